// A child process and its parent's end (cluster/child_process.h): what a
// benchmark or a test starts ends with it; a supervised daemon runs on.
#include "cluster/child_process.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <memory>
#include <thread>

namespace ztask::cluster {
namespace {

// `sleep 30` started from a thread that then ends, as a parent killed
// would: the child's parent-death signal is tied to that thread.
std::unique_ptr<ChildProcess> StartFromAThreadThatEnds(ChildProcess::WhenParentDies when) {
  std::unique_ptr<ChildProcess> child;
  std::thread([&] {
    child = std::make_unique<ChildProcess>(
        std::vector<std::string>{"/bin/sleep", "30"},
        std::filesystem::temp_directory_path() / "child_process_test.log", when);
  }).join();
  return child;
}

TEST(ChildProcess, OneThatDiesWithItsParentEndsWhenItsParentDoes) {
  auto child = StartFromAThreadThatEnds(ChildProcess::WhenParentDies::kDie);
  ASSERT_GT(child->pid(), 0);
  const std::optional<int> code = child->Wait(std::chrono::seconds(10));
  ASSERT_TRUE(code.has_value()) << "still running after its parent ended";
  EXPECT_EQ(*code, 128 + SIGKILL);
}

TEST(ChildProcess, OneThatRunsOnOutlivesItsParent) {
  auto child = StartFromAThreadThatEnds(ChildProcess::WhenParentDies::kRunOn);
  ASSERT_GT(child->pid(), 0);
  // Longer than a child meant to die takes to.
  EXPECT_FALSE(child->Wait(std::chrono::milliseconds(300)).has_value());
}  // stopped here

}  // namespace
}  // namespace ztask::cluster
