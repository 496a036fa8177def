// Each scheme's choice on constructed load and recency vectors.
#include <gtest/gtest.h>

#include <map>

#include "scheduler/scheme.h"

namespace ztask::scheduler {
namespace {

std::unique_ptr<Scheme> With(const std::string& name, std::vector<EngineView> views) {
  auto scheme = MakeScheme(name, 7);
  for (const auto& v : views) scheme->Insert(v);
  return scheme;
}

// slot, load, stamp (lower stamp: used less recently)
const std::vector<EngineView> kPool = {{0, 3, 10}, {1, 0, 30}, {2, 1, 5}, {3, 0, 20}};

TEST(Schemes, UnknownNameIsNull) { EXPECT_EQ(MakeScheme("fastest", 1), nullptr); }

TEST(Schemes, RegistryListsFiveWithLeastLoadFirst) {
  EXPECT_EQ(SchemeNames(),
            (std::vector<std::string>{"leastload", "lru", "twobin", "weighted", "random"}));
}

TEST(Schemes, LeastLoadPicksFewestOutstandingThenLeastRecent) {
  auto s = With("leastload", kPool);
  EXPECT_EQ(s->Pick(), 3u);  // loads 0 on slots 1 and 3; slot 3 less recent
  EXPECT_EQ(s->PickFrom(kPool), 3u);
  s->Erase(kPool[3]);
  EXPECT_EQ(s->Pick(), 1u);
}

TEST(Schemes, LeastLoadCountsLoadInPacksAndFillsAnOpenOneFirst) {
  // slot, load, stamp, pack, open
  const std::vector<EngineView> pool = {
      {0, 3, 10, 4, true}, {1, 0, 30, 4, false}, {2, 4, 5, 4, false}, {3, 1, 20, 1, false}};
  auto s = With("leastload", pool);
  EXPECT_EQ(s->Pick(), 0u);  // three of a pack of four, open: before the idle slot 1
  EXPECT_EQ(s->PickFrom(pool), 0u);
  s->Erase(pool[0]);
  EXPECT_EQ(s->Pick(), 1u);  // idle: no full pack, before slot 2 (one) and 3 (one)
  s->Erase(pool[1]);
  EXPECT_EQ(s->Pick(), 2u);  // one full pack each: slot 2 less recent than slot 3
  std::vector<EngineView> rest = {pool[2], pool[3]};
  EXPECT_EQ(s->PickFrom(rest), 2u);
}

TEST(Schemes, LeastLoadWeighsAClosedPackAsAWholeOne) {
  // Slot 0 holds one task of a pack of four, closed (it came earlier, and
  // may be long): the idle slot 1 goes first, though used more recently.
  const std::vector<EngineView> pool = {{0, 1, 5, 4, false}, {1, 0, 10, 4, false}};
  auto s = With("leastload", pool);
  EXPECT_EQ(s->Pick(), 1u);
  EXPECT_EQ(s->PickFrom(pool), 1u);
  // Slot 2 holds a full pack and one of the next, closed: two, behind a
  // slot with one full pack.
  const std::vector<EngineView> busy = {{2, 5, 5, 4, false}, {3, 4, 10, 4, false}};
  auto t = With("leastload", busy);
  EXPECT_EQ(t->Pick(), 3u);
  EXPECT_EQ(t->PickFrom(busy), 3u);
}

TEST(Schemes, LruPicksLeastRecentWhateverTheLoad) {
  auto s = With("lru", kPool);
  EXPECT_EQ(s->Pick(), 2u);
  EXPECT_EQ(s->PickFrom(kPool), 2u);
  s->Erase(kPool[2]);
  EXPECT_EQ(s->Pick(), 0u);
}

TEST(Schemes, TwoBinNeverPicksTheMostRecentOfMany) {
  auto s = With("twobin", kPool);
  std::map<EngineSlot, int> seen;
  for (int i = 0; i < 2000; ++i) ++seen[s->Pick()];
  EXPECT_EQ(seen.count(1), 0u) << "slot 1 is the most recently used";
  EXPECT_GT(seen[2], seen[0]);
  EXPECT_EQ(seen.size(), 3u);
}

TEST(Schemes, TwoBinOfTwoPicksTheLessRecent) {
  std::vector<EngineView> two = {{0, 0, 9}, {1, 0, 4}};
  auto s = With("twobin", two);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s->Pick(), 1u);
}

TEST(Schemes, WeightedNeverPicksTheMostLoadedOfMany) {
  auto s = With("weighted", kPool);
  std::map<EngineSlot, int> seen;
  for (int i = 0; i < 2000; ++i) ++seen[s->Pick()];
  EXPECT_EQ(seen.count(0), 0u) << "slot 0 carries the most load";
  EXPECT_GT(seen[1] + seen[3], seen[2]);
}

TEST(Schemes, WeightedOfTwoPicksTheLessLoaded) {
  std::vector<EngineView> two = {{0, 5, 1}, {1, 0, 9}};
  auto s = With("weighted", two);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s->PickFrom(two), 1u);
}

TEST(Schemes, RandomReachesEveryEngine) {
  auto s = With("random", kPool);
  std::map<EngineSlot, int> seen;
  for (int i = 0; i < 400; ++i) ++seen[s->Pick()];
  EXPECT_EQ(seen.size(), kPool.size());
}

TEST(Schemes, SamplingSchemesForgetErasedEngines) {
  for (const char* name : {"twobin", "weighted", "random"}) {
    auto s = With(name, kPool);
    s->Erase(kPool[1]);
    s->Erase(kPool[3]);
    for (int i = 0; i < 200; ++i) {
      EngineSlot slot = s->Pick();
      EXPECT_TRUE(slot == 0 || slot == 2) << name;
    }
    s->Erase(kPool[0]);
    s->Erase(kPool[2]);
    EXPECT_TRUE(s->Empty()) << name;
  }
}

}  // namespace
}  // namespace ztask::scheduler
