// ResultWaits (hub/result_waits.h): a result_request with `wait` is answered
// once every task it names is recorded, or final, or when its time is up;
// never twice, and never beyond its bounds.
#include "hub/result_waits.h"

#include <gtest/gtest.h>

namespace ztask::hub {
namespace {

using Until = ResultWaits::Until;

ResultWaits::Wait WaitFor(std::vector<TaskId> ids, Until until, int64_t deadline,
                          std::string route = "client") {
  ResultWaits::Wait w;
  w.route = std::move(route);
  w.request.task_ids = std::move(ids);
  w.until = until;
  w.deadline_us = deadline;
  return w;
}

const TaskId kA{1, 1}, kB{1, 2}, kC{1, 3};

TEST(ResultWaits, AFinalWaitIsAnsweredWhenItsLastTaskFinishes) {
  ResultWaits waits;
  ASSERT_TRUE(waits.Park(WaitFor({kA, kB}, Until::kFinal, 1000), {kA, kB}));
  EXPECT_TRUE(waits.Noted(kA, /*final=*/false).empty()) << "recorded is not final";
  EXPECT_TRUE(waits.Noted(kA, true).empty()) << "B is not final yet";
  EXPECT_TRUE(waits.Noted(kA, true).empty()) << "A again counts once";
  auto ready = waits.Noted(kB, true);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].route, "client");
  EXPECT_EQ(waits.size(), 0u);
  EXPECT_EQ(waits.ids_held(), 0u);
  EXPECT_TRUE(waits.Expired(5000).empty()) << "answered once, not again at its deadline";
}

TEST(ResultWaits, ARecordedWaitIsAnsweredByAnyMessageForEachTask) {
  ResultWaits waits;
  ASSERT_TRUE(waits.Park(WaitFor({kA, kB}, Until::kRecorded, 1000), {kB}));
  EXPECT_TRUE(waits.Noted(kA, false).empty()) << "A was there already: not waited for";
  EXPECT_EQ(waits.Noted(kB, false).size(), 1u);
}

TEST(ResultWaits, ManyWaitsOnOneTaskAreAllAnswered) {
  ResultWaits waits;
  ASSERT_TRUE(waits.Park(WaitFor({kA}, Until::kFinal, 1000, "one"), {kA}));
  ASSERT_TRUE(waits.Park(WaitFor({kA, kC}, Until::kFinal, 1000, "two"), {kA, kC}));
  ASSERT_TRUE(waits.Park(WaitFor({kA}, Until::kRecorded, 1000, "three"), {kA}));
  auto first = waits.Noted(kA, false);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].route, "three");
  auto second = waits.Noted(kA, true);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].route, "one");
  auto third = waits.Noted(kC, true);
  ASSERT_EQ(third.size(), 1u);
  EXPECT_EQ(third[0].route, "two");
  EXPECT_EQ(waits.size(), 0u);
}

TEST(ResultWaits, AWaitWhoseTimeIsUpIsAnsweredAsThingsAre) {
  ResultWaits waits;
  ASSERT_TRUE(waits.Park(WaitFor({kA}, Until::kFinal, 2000, "late"), {kA}));
  ASSERT_TRUE(waits.Park(WaitFor({kB}, Until::kFinal, 1000, "early"), {kB}));
  EXPECT_EQ(waits.NextDeadline(), 1000);
  EXPECT_TRUE(waits.Expired(999).empty());
  auto expired = waits.Expired(1000);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].route, "early");
  EXPECT_TRUE(waits.Noted(kB, true).empty()) << "answered already";
  EXPECT_EQ(waits.Expired(5000).size(), 1u);
  EXPECT_EQ(waits.ids_held(), 0u);
  EXPECT_EQ(waits.NextDeadline(), std::numeric_limits<int64_t>::max());
}

TEST(ResultWaits, FullIsRefusedNotGrown) {
  ResultWaits waits;
  std::vector<TaskId> many(ResultWaits::kMaxIds + 1);
  for (size_t i = 0; i < many.size(); ++i) many[i] = TaskId{2, i};
  EXPECT_FALSE(waits.Park(WaitFor(many, Until::kFinal, 1000), many));
  EXPECT_EQ(waits.ids_held(), 0u);
  for (size_t i = 0; i < ResultWaits::kMaxWaits; ++i) {
    ASSERT_TRUE(waits.Park(WaitFor({kA}, Until::kFinal, 1000), {kA}));
  }
  EXPECT_FALSE(waits.Park(WaitFor({kA}, Until::kFinal, 1000), {kA}));
  EXPECT_EQ(waits.Noted(kA, true).size(), ResultWaits::kMaxWaits);
}

TEST(ResultWaits, OnlyRecordedAndFinalAreWords) {
  EXPECT_EQ(ResultWaits::Parse("recorded"), Until::kRecorded);
  EXPECT_EQ(ResultWaits::Parse("final"), Until::kFinal);
  EXPECT_FALSE(ResultWaits::Parse("done").has_value());
  EXPECT_FALSE(ResultWaits::Parse("").has_value());
}

}  // namespace
}  // namespace ztask::hub
