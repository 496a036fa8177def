#include "base/flat_id_map.h"
#include "base/recent_id_map.h"

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <random>
#include <unordered_map>

namespace ztask {
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

TEST(FlatIdMap, ErasedIdsAreGoneAndTheirNeighboursStayFound) {
  FlatIdMap<int> map;
  for (uint64_t i = 1; i <= 100; ++i) EXPECT_TRUE(map.emplace(TaskId{0, i}, static_cast<int>(i)));
  for (uint64_t i = 1; i <= 100; i += 2) EXPECT_TRUE(map.erase(TaskId{0, i}));
  EXPECT_FALSE(map.erase(TaskId{0, 1})) << "erased already";
  EXPECT_FALSE(map.erase(TaskId{7, 7})) << "never there";
  EXPECT_EQ(map.size(), 50u);
  for (uint64_t i = 1; i <= 100; ++i) {
    const int* v = map.find(TaskId{0, i});
    if (i % 2 == 1) {
      EXPECT_EQ(v, nullptr) << i;
    } else {
      ASSERT_NE(v, nullptr) << i;
      EXPECT_EQ(*v, static_cast<int>(i));
    }
  }
  // Made again after its erase: a new entry with the new value.
  EXPECT_TRUE(map.emplace(TaskId{0, 1}, 1000));
  EXPECT_EQ(*map.find(TaskId{0, 1}), 1000);
  EXPECT_TRUE(map.emplace(TaskId{}, 5));
  EXPECT_TRUE(map.erase(TaskId{}));
  EXPECT_FALSE(map.contains(TaskId{}));
}

TEST(FlatIdMap, HoldsValuesThatOnlyMoveAndFreesThemOnErase) {
  FlatIdMap<std::unique_ptr<int>> map;
  auto watched = std::make_shared<int>(0);
  for (uint64_t i = 1; i <= 1000; ++i) {
    auto [value, added] = map.try_emplace(TaskId{i, i}, std::make_unique<int>(static_cast<int>(i)));
    ASSERT_TRUE(added);
    ASSERT_EQ(**value, static_cast<int>(i));
  }
  auto [again, added] = map.try_emplace(TaskId{3, 3});
  EXPECT_FALSE(added);
  EXPECT_EQ(**again, 3) << "try_emplace of a known id leaves its value";
  FlatIdMap<std::shared_ptr<int>> shared;
  shared.emplace(TaskId{1, 1}, watched);
  EXPECT_EQ(watched.use_count(), 2);
  shared.erase(TaskId{1, 1});
  EXPECT_EQ(watched.use_count(), 1) << "an erased value is destroyed at once";
}

TEST(FlatIdMap, ForEachVisitsEveryEntryOnce) {
  FlatIdMap<uint64_t> map;
  uint64_t expected = 0;
  for (uint64_t i = 0; i < 500; ++i) {
    map.emplace(TaskId{i, 1}, i);
    if (i % 5 == 0) {
      map.erase(TaskId{i, 1});
    } else {
      expected += i;
    }
  }
  map.emplace(TaskId{}, 1);
  uint64_t sum = 0;
  size_t visits = 0;
  map.for_each([&](const TaskId&, uint64_t& v) {
    sum += v;
    ++visits;
  });
  EXPECT_EQ(visits, map.size());
  EXPECT_EQ(sum, expected + 1);
}

TEST(FlatIdMap, TurningOverNeverMakesItGrow) {
  FlatIdMap<int> map;
  for (uint64_t i = 1; i <= 100000; ++i) {
    map.emplace(TaskId{i, i}, 1);
    map.erase(TaskId{i, i});
  }
  EXPECT_TRUE(map.empty());
  EXPECT_EQ(map.capacity(), 64u);
}

// A window of the latest ids, as RecentIdMap keeps: every id in the window
// is still found through the moves that erasing makes, and the table never
// grows past what the window needs.
TEST(FlatIdMap, AWindowOfTheLatestIdsKeepsItsArraysAndFindsEveryOne) {
  FlatIdMap<uint64_t> map;
  constexpr uint64_t kWindow = 5000;
  std::mt19937_64 rng(5);
  std::deque<TaskId> window;
  for (uint64_t i = 1; i <= 200000; ++i) {
    const TaskId id{rng() | 1, rng()};
    ASSERT_TRUE(map.emplace(id, i));
    window.push_back(id);
    if (window.size() > kWindow) {
      ASSERT_TRUE(map.erase(window.front()));
      window.pop_front();
    }
    if (i % 9973 == 0) {
      ASSERT_EQ(map.size(), window.size());
      for (const TaskId& kept : window) ASSERT_NE(map.find(kept), nullptr);
    }
  }
  EXPECT_EQ(map.capacity(), 8192u) << "grown to hold the window, then never rebuilt";
}

// Many inserts and erases mixed, as a store of live tasks sees them: the
// table agrees with a standard map all along.
TEST(FlatIdMap, AgreesWithAStandardMapThroughInsertsAndErases) {
  FlatIdMap<uint64_t> flat;
  std::unordered_map<TaskId, uint64_t, TaskIdHash> reference;
  std::mt19937_64 rng(11);
  for (uint64_t i = 0; i < 300000; ++i) {
    const TaskId id{rng() % 64, rng() % 4096};
    if (rng() % 2 == 0) {
      EXPECT_EQ(flat.emplace(id, i), reference.emplace(id, i).second);
    } else {
      EXPECT_EQ(flat.erase(id), reference.erase(id) == 1);
    }
  }
  EXPECT_EQ(flat.size(), reference.size());
  for (const auto& [id, value] : reference) {
    const uint64_t* found = flat.find(id);
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(*found, value);
  }
  size_t visits = 0;
  flat.for_each([&](const TaskId& id, const uint64_t& v) {
    ++visits;
    EXPECT_EQ(reference.at(id), v);
  });
  EXPECT_EQ(visits, reference.size());
}

TEST(RecentIdMap, KeepsTheLatestAndLetsGoOfTheOldestFirst) {
  RecentIdMap<int> map(3);
  for (uint64_t n = 1; n <= 5; ++n) EXPECT_TRUE(map.try_emplace(TaskId{1, n}, static_cast<int>(n)));
  EXPECT_EQ(map.size(), 3u);
  EXPECT_TRUE(map.forgot());
  EXPECT_FALSE(map.contains(TaskId{1, 1}));
  EXPECT_FALSE(map.contains(TaskId{1, 2}));
  ASSERT_NE(map.find(TaskId{1, 3}), nullptr);
  EXPECT_EQ(*map.find(TaskId{1, 3}), 3);
  // Again: no change, and not made younger.
  EXPECT_FALSE(map.try_emplace(TaskId{1, 3}, 30));
  EXPECT_EQ(*map.find(TaskId{1, 3}), 3);
  map.try_emplace(TaskId{1, 6}, 6);
  EXPECT_FALSE(map.contains(TaskId{1, 3}));
  map.set_capacity(1);
  EXPECT_EQ(map.size(), 1u);
  EXPECT_TRUE(map.contains(TaskId{1, 6}));
}

TEST(RecentIdMap, AMillionThroughASmallMapKeepsItSmall) {
  RecentIdMap<uint8_t> map(1000);
  for (uint64_t n = 1; n <= 1000000; ++n) map.try_emplace(TaskId{n, n}, 1);
  EXPECT_EQ(map.size(), 1000u);
  EXPECT_TRUE(map.contains(TaskId{1000000, 1000000}));
  EXPECT_FALSE(map.contains(TaskId{999000, 999000}));
}

}  // namespace
}  // namespace ztask
