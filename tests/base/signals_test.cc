#include "base/signals.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "base/clock.h"

namespace ztask {
namespace {

class Counting : public Stoppable {
 public:
  void RequestStop() override { stops.fetch_add(1); }
  std::atomic<int> stops{0};
};

// Each test runs in a process of its own (ctest), so installing the
// signals here touches no other test.

TEST(StopSignals, ASignalSentToTheProcessStopsTheTarget) {
  InstallStopSignals();
  Counting target;
  SetStopTarget(&target);
  ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);
  EXPECT_TRUE(base::WaitUntil([&] { return target.stops.load() == 1; }, std::chrono::seconds(10)));
  EXPECT_TRUE(StopRequested());
  SetStopTarget(nullptr);
}

TEST(StopSignals, ASignalBeforeThereIsATargetStopsItOnceItIsSet) {
  InstallStopSignals();
  ASSERT_EQ(::kill(::getpid(), SIGHUP), 0);
  ASSERT_TRUE(base::WaitUntil([] { return StopRequested(); }, std::chrono::seconds(10)));
  Counting target;
  SetStopTarget(&target);
  EXPECT_EQ(target.stops.load(), 1);
  SetStopTarget(nullptr);
}

TEST(StopSignals, TheyAreTakenByTheirOwnThreadNotByThoseThatServe) {
  InstallStopSignals();
  InstallStopSignals();  // once per process, however often it is called
  Counting target;
  SetStopTarget(&target);
  // A thread started now (as a server's are) has them blocked, so that a
  // signal never interrupts its waits or runs code in the middle of it.
  sigset_t blocked;
  std::thread([&] { pthread_sigmask(SIG_BLOCK, nullptr, &blocked); }).join();
  EXPECT_EQ(sigismember(&blocked, SIGTERM), 1);
  EXPECT_EQ(sigismember(&blocked, SIGINT), 1);
  EXPECT_EQ(sigismember(&blocked, SIGHUP), 1);
  ASSERT_EQ(::kill(::getpid(), SIGINT), 0);
  ASSERT_EQ(::kill(::getpid(), SIGINT), 0);
  EXPECT_TRUE(base::WaitUntil([&] { return target.stops.load() >= 1; }, std::chrono::seconds(10)));
  SetStopTarget(nullptr);
}

}  // namespace
}  // namespace ztask
