#include "base/id_slots.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <unordered_map>
#include <vector>

namespace ztask {
namespace {

struct Value {
  int n = 0;
  std::vector<std::string> held;
};

TEST(IdSlots, AReferenceLastsThroughOtherInsertsAndErasesUntilItsOwnErase) {
  IdSlots<Value> slots;
  Value& first = slots[TaskId{0, 1}];
  first.n = 1;
  // Enough others to grow the index several times and fill many blocks.
  for (uint64_t i = 2; i < 5000; ++i) slots[TaskId{0, i}].n = static_cast<int>(i);
  for (uint64_t i = 2; i < 5000; i += 2) ASSERT_TRUE(slots.erase(TaskId{0, i}));
  for (uint64_t i = 5000; i < 9000; ++i) slots[TaskId{0, i}].n = static_cast<int>(i);
  EXPECT_EQ(&first, slots.find(TaskId{0, 1})) << "the value never moved";
  EXPECT_EQ(first.n, 1);
  EXPECT_EQ(slots.size(), 1u + 2499u + 4000u);
}

TEST(IdSlots, AnErasedValueIsResetAndItsSlotTakenByTheNextInsert) {
  IdSlots<Value> slots;
  Value& a = slots[TaskId{7, 7}];
  a.n = 5;
  a.held = {"request"};
  slots[TaskId{9, 9}];  // one left alive: the slots are kept
  EXPECT_TRUE(slots.erase(TaskId{7, 7}));
  EXPECT_FALSE(slots.erase(TaskId{7, 7})) << "gone already";
  EXPECT_FALSE(slots.contains(TaskId{7, 7}));
  EXPECT_EQ(slots.find(TaskId{7, 7}), nullptr);
  Value& b = slots[TaskId{8, 8}];
  EXPECT_EQ(&a, &b) << "the freed slot is taken again, nothing allocated";
  EXPECT_EQ(b.n, 0);
  EXPECT_TRUE(b.held.empty()) << "the erased task's value does not leak into the next";
  EXPECT_EQ(slots.slots(), 2u);
}

TEST(IdSlots, ATrickleOfValuesReusesItsSlotWhenTheTableEmpties) {
  IdSlots<Value> slots;
  Value* first = &slots[TaskId{0, 1}];
  slots.erase(TaskId{0, 1});
  for (uint64_t i = 2; i < 5000; ++i) {
    Value& v = slots[TaskId{0, i}];
    ASSERT_EQ(&v, first) << "one in, one out: the same slot, nothing made anew";
    ASSERT_EQ(v.n, 0) << "reset when erased";
    v.n = 1;
    slots.erase(TaskId{0, i});
  }
  EXPECT_EQ(slots.slots(), 1u);
}

TEST(IdSlots, TheLastEraseGivesEverySlotBack) {
  IdSlots<Value> slots;
  for (uint64_t i = 1; i <= 3000; ++i) slots[TaskId{0, i}].n = 1;
  for (uint64_t i = 1; i < 3000; ++i) slots.erase(TaskId{0, i});
  EXPECT_EQ(slots.slots(), 3000u) << "kept while one value lives";
  slots.erase(TaskId{0, 3000});
  EXPECT_EQ(slots.slots(), 0u) << "a burst over, its memory goes";
  slots[TaskId{0, 1}].n = 2;
  EXPECT_EQ(slots.at(TaskId{0, 1}).n, 2);
}

TEST(IdSlots, TheZeroIdIsAnOrdinaryKey) {
  IdSlots<Value> slots;
  EXPECT_FALSE(slots.contains(TaskId{}));
  slots[TaskId{}].n = 3;
  EXPECT_EQ(slots.at(TaskId{}).n, 3);
  EXPECT_TRUE(slots.erase(TaskId{}));
  EXPECT_TRUE(slots.empty());
}

// Sequential ids (as tests make them) and random ones, many sharing the
// low bits of their hash: every run of the index is probed and shifted back.
TEST(IdSlots, AgreesWithAStandardMapThroughRandomTurnover) {
  IdSlots<Value> slots;
  std::unordered_map<TaskId, int> model;
  std::mt19937_64 random(42);
  for (int step = 0; step < 200000; ++step) {
    const uint64_t k = random() % 3000;
    const TaskId id = k % 2 ? TaskId{0, k} : TaskId{k * 0x9E3779B97F4A7C15ull, k};
    if (random() % 3 == 0) {
      EXPECT_EQ(slots.erase(id), model.erase(id) == 1);
    } else {
      slots[id].n = step;
      model[id] = step;
    }
  }
  ASSERT_EQ(slots.size(), model.size());
  for (const auto& [id, n] : model) {
    ASSERT_NE(slots.find(id), nullptr);
    EXPECT_EQ(slots.find(id)->n, n);
  }
  EXPECT_LE(slots.slots(), 3000u) << "turnover reuses slots instead of making new ones";
}

}  // namespace
}  // namespace ztask
