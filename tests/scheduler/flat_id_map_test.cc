#include "scheduler/flat_id_map.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

namespace ztask::scheduler {
namespace {

TEST(FlatIdMap, FindsWhatWasAddedAndNothingElse) {
  FlatIdMap<int> map;
  EXPECT_EQ(map.find(TaskId{1, 2}), nullptr);
  EXPECT_TRUE(map.emplace(TaskId{1, 2}, 7));
  EXPECT_FALSE(map.emplace(TaskId{1, 2}, 8)) << "a second add changes nothing";
  ASSERT_NE(map.find(TaskId{1, 2}), nullptr);
  EXPECT_EQ(*map.find(TaskId{1, 2}), 7);
  EXPECT_FALSE(map.contains(TaskId{2, 1}));
  EXPECT_EQ(map.size(), 1u);
}

TEST(FlatIdMap, TheZeroIdIsAnOrdinaryKey) {
  FlatIdMap<int> map;
  EXPECT_FALSE(map.contains(TaskId{}));
  EXPECT_TRUE(map.emplace(TaskId{}, 3));
  EXPECT_FALSE(map.emplace(TaskId{}, 4));
  EXPECT_EQ(*map.find(TaskId{}), 3);
  EXPECT_EQ(map.size(), 1u);
}

TEST(FlatIdMap, AgreesWithAStandardMapThroughManyGrowths) {
  FlatIdMap<uint64_t> flat;
  std::unordered_map<TaskId, uint64_t, TaskIdHash> reference;
  std::mt19937_64 rng(5);
  for (uint64_t i = 0; i < 200000; ++i) {
    // Sequential ids (as tests use) and random ones, with repeats.
    const TaskId id = i % 3 == 0 ? TaskId{0, i / 3} : TaskId{rng() % 1000, rng() % 1000};
    EXPECT_EQ(flat.emplace(id, i), reference.emplace(id, i).second);
  }
  EXPECT_EQ(flat.size(), reference.size());
  for (const auto& [id, value] : reference) {
    const uint64_t* found = flat.find(id);
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(*found, value);
  }
  EXPECT_FALSE(flat.contains(TaskId{5000, 5000}));
}

}  // namespace
}  // namespace ztask::scheduler
