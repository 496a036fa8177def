// The engine book alone: what the scheme is told, bookings, draining,
// removal, what fits, and the hold for a wide task.
#include "scheduler/engine_book.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ztask::scheduler {
namespace {

TaskId T(uint64_t n) { return TaskId{0xb00c, n}; }

EngineBook Book(uint32_t hwm = 1, const char* scheme = "leastload") {
  return EngineBook(hwm, MakeScheme(scheme, 1));
}

TEST(EngineBook, AnAddedEngineIsWhatTheSchemePicks) {
  EngineBook book = Book();
  EXPECT_TRUE(book.SchemeEmpty());
  const EngineSlot slot = book.Add(7, /*accepting=*/true, {});
  EXPECT_FALSE(book.SchemeEmpty());
  EXPECT_EQ(book.Pick(), slot);
  EXPECT_EQ(book.SlotOf(7), slot);
  EXPECT_EQ(book.IdOf(slot), 7);
  EXPECT_EQ(book.SlotOf(8), kNoSlot);
}

TEST(EngineBook, AnEngineNotAcceptingJoinsTheSchemeOnlyOnceItAccepts) {
  EngineBook book = Book();
  const EngineSlot slot = book.Add(1, /*accepting=*/false, {});
  EXPECT_TRUE(book.SchemeEmpty());
  EXPECT_TRUE(book.Accept(slot));
  EXPECT_FALSE(book.Accept(slot)) << "accepting already";
  EXPECT_EQ(book.Pick(), slot);
}

TEST(EngineBook, AFullEngineLeavesTheSchemeAndComesBackWhenFreed) {
  EngineBook book = Book(/*hwm=*/1);
  const EngineSlot slot = book.Add(1, true, {});
  const Demand one;
  EXPECT_EQ(book.Place(slot, T(1), one), 0u);
  EXPECT_EQ(book.LoadOf(slot), 1u);
  EXPECT_TRUE(book.SchemeEmpty());
  EXPECT_FALSE(book.HasRoom(slot));
  EXPECT_FALSE(book.Unplace(slot, 0, one).has_value());
  EXPECT_EQ(book.LoadOf(slot), 0u);
  EXPECT_EQ(book.Pick(), slot);
}

TEST(EngineBook, HwmLetsMoreWaitOnAnEngineAndZeroIsNoLimit) {
  EngineBook two = Book(/*hwm=*/2);
  const EngineSlot a = two.Add(1, true, {});
  two.Place(a, T(1), {});
  EXPECT_TRUE(two.HasRoom(a));
  two.Place(a, T(2), {});
  EXPECT_FALSE(two.HasRoom(a));

  EngineBook unlimited = Book(/*hwm=*/0);
  const EngineSlot b = unlimited.Add(1, true, {});
  for (uint64_t n = 0; n < 100; ++n) unlimited.Place(b, T(n), {});
  EXPECT_TRUE(unlimited.HasRoom(b));
}

TEST(EngineBook, PlacingMakesAnEngineTheMostRecentlyUsed) {
  EngineBook book = Book(/*hwm=*/0, "lru");
  const EngineSlot a = book.Add(1, true, {});
  const EngineSlot b = book.Add(2, true, {});
  EXPECT_EQ(book.Pick(), a) << "new engines in the order they came";
  book.Place(a, T(1), {});
  EXPECT_EQ(book.Pick(), b);
  EXPECT_GT(book.ViewOf(a).stamp, book.ViewOf(b).stamp);
}

TEST(EngineBook, UnplaceFillsTheGapWithTheLastTask) {
  EngineBook book = Book(/*hwm=*/0);
  const EngineSlot slot = book.Add(1, true, {});
  for (uint64_t n = 0; n < 3; ++n) EXPECT_EQ(book.Place(slot, T(n), {}), n);
  const std::optional<TaskId> moved = book.Unplace(slot, 0, {});
  ASSERT_TRUE(moved.has_value());
  EXPECT_EQ(*moved, T(2));
  EXPECT_EQ(book.RunningOn(slot), (std::vector<TaskId>{T(2), T(1)}));
}

TEST(EngineBook, ADrainingEngineLeavesTheSchemeAndIsDrainedWhenIdle) {
  EngineBook book = Book();
  const EngineSlot slot = book.Add(1, true, {});
  book.Place(slot, T(1), {});
  EXPECT_TRUE(book.Drain(slot));
  EXPECT_FALSE(book.Drain(slot)) << "draining already";
  EXPECT_FALSE(book.Drained(slot));
  book.Unplace(slot, 0, {});
  EXPECT_TRUE(book.Drained(slot));
  EXPECT_TRUE(book.SchemeEmpty());
}

TEST(EngineBook, RemoveReturnsWhatItHeldAndForgetsTheId) {
  EngineBook book = Book(/*hwm=*/0);
  const EngineSlot slot = book.Add(1, true, {});
  book.Place(slot, T(1), {});
  book.Place(slot, T(2), {});
  EXPECT_EQ(book.Remove(slot), (std::vector<TaskId>{T(1), T(2)}));
  EXPECT_FALSE(book.Alive(slot));
  EXPECT_EQ(book.LoadOf(slot), 0u);
  EXPECT_EQ(book.SlotOf(1), kNoSlot);
  EXPECT_TRUE(book.SchemeEmpty());
  EXPECT_NE(book.Add(1, true, {}), slot) << "a new life, a new slot";
}

TEST(EngineBook, FitsOnlyWhereSlotsAndUnitsAreFreeAtOnce) {
  EngineBook book = Book();
  const EngineSlot slot = book.Add(1, true, Amounts{4, {{"gpus", 2}}});
  const Demand two_gpus = book.DemandOf(Amounts{1, {{"gpus", 2}}});
  const Demand one_gpu = book.DemandOf(Amounts{1, {{"gpus", 1}}});
  const Demand five_slots = book.DemandOf(Amounts{5, {}});
  EXPECT_TRUE(book.Fits(T(1), two_gpus, slot));
  EXPECT_FALSE(book.Fits(T(1), five_slots, slot));
  EXPECT_FALSE(book.CouldHold(five_slots, slot));
  book.Place(slot, T(1), one_gpu);
  EXPECT_FALSE(book.Fits(T(2), two_gpus, slot)) << "one of two GPUs is booked";
  EXPECT_TRUE(book.Fits(T(2), one_gpu, slot));
  EXPECT_TRUE(book.CouldHold(two_gpus, slot));
}

TEST(EngineBook, UnsatisfiableSaysWhatNoEngineHas) {
  EngineBook book = Book();
  const EngineSlot a = book.Add(1, true, Amounts{2, {{"gpus", 1}}});
  const EngineSlot b = book.Add(2, true, Amounts{4, {}});
  const std::vector<EngineSlot> both{a, b};
  EXPECT_EQ(book.Unsatisfiable(T(1), book.DemandOf(Amounts{4, {}}), both, false), "");
  const std::string slots = book.Unsatisfiable(T(1), book.DemandOf(Amounts{8, {}}), both, false);
  EXPECT_NE(slots.find("needs 8 slots, the largest engine has 4"), std::string::npos) << slots;
  const std::string gpus =
      book.Unsatisfiable(T(1), book.DemandOf(Amounts{1, {{"gpus", 2}}}), both, true);
  EXPECT_NE(gpus.find("gpus=2, the largest engine it may use has 1"), std::string::npos) << gpus;
  const std::string together =
      book.Unsatisfiable(T(1), book.DemandOf(Amounts{3, {{"gpus", 1}}}), both, false);
  EXPECT_NE(together.find("at once, and no engine has all of them"), std::string::npos)
      << together;
}

TEST(EngineBook, AHeldEngineTakesOnlyTheTaskItIsHeldFor) {
  EngineBook book = Book(/*hwm=*/1);
  const EngineSlot slot = book.Add(1, true, Amounts{4, {}});
  book.Place(slot, T(1), book.DemandOf(Amounts{2, {}}));
  const Demand wide = book.DemandOf(Amounts{4, {}});
  const std::vector<EngineSlot> allowed{slot};
  book.Reserve(T(9), wide, allowed);
  EXPECT_TRUE(book.holding());
  EXPECT_TRUE(book.SchemeEmpty()) << "held whole: out of the scheme";
  EXPECT_FALSE(book.Fits(T(2), Demand{}, slot));
  book.Unreserve();
  EXPECT_FALSE(book.holding());
  EXPECT_FALSE(book.SchemeEmpty());
  EXPECT_TRUE(book.Fits(T(2), Demand{}, slot));
}

TEST(EngineBook, AnEngineHeldForUnitsRefusesOnlyTasksAskingThem) {
  EngineBook book = Book(/*hwm=*/1);
  const EngineSlot slot = book.Add(1, true, Amounts{4, {{"gpus", 2}}});
  const Demand one_gpu = book.DemandOf(Amounts{1, {{"gpus", 1}}});
  book.Place(slot, T(1), one_gpu);
  const std::vector<EngineSlot> allowed{slot};
  book.Reserve(T(9), book.DemandOf(Amounts{1, {{"gpus", 2}}}), allowed);
  EXPECT_FALSE(book.SchemeEmpty());
  EXPECT_TRUE(book.Fits(T(2), Demand{}, slot));
  EXPECT_FALSE(book.Fits(T(2), one_gpu, slot));
  EXPECT_TRUE(book.Fits(T(9), one_gpu, slot)) << "the task it is held for";
}

}  // namespace
}  // namespace ztask::scheduler
