// The hub's answers to queries over its records (hub/answers.h), from a
// store in memory: no sockets.
#include "hub/answers.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace ztask::hub {
namespace {

TaskId Id(uint64_t n) { return TaskId{3, n}; }

class AnswersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = TaskStore::Open(":memory:");
    ASSERT_TRUE(store.ok());
    store_ = std::move(*store);
  }
  void Submit(uint64_t n, protocol::RoutingMeta meta = {}, std::vector<std::string> request = {"r"}) {
    const std::vector<std::string_view> frames(request.begin(), request.end());
    store_->Submitted({Id(n), protocol::MsgType::kTaskRequest, "c", 1}, meta, {},
                      KeptRequest(frames));
  }
  void Finish(uint64_t n, bool ok) {
    protocol::TaskResult result;
    result.stdout_text = "out";
    store_->Outcome(Id(n), {true, ok, ok ? ErrorType::kNone : ErrorType::kTaskFailed, 2, 1},
                    result, 5);
  }
  std::unique_ptr<TaskStore> store_;
};

TEST_F(AnswersTest, ListedRecordsAndTheUnknownOnesLeanForTheScheduler) {
  Submit(1);
  Finish(1, true);
  protocol::TaskIdList request;
  request.task_ids = {Id(1), Id(9)};
  const protocol::ResultReply full = Records(*store_, request, /*lean=*/false);
  ASSERT_EQ(full.records.size(), 1u);
  EXPECT_EQ(full.records[0].stdout_text, "out");
  EXPECT_EQ(full.unknown, (std::vector<TaskId>{Id(9)}));
  const protocol::ResultReply lean = Records(*store_, request, /*lean=*/true);
  ASSERT_EQ(lean.records.size(), 1u);
  EXPECT_TRUE(lean.records[0].stdout_text.empty()) << "outcomes only";
  EXPECT_EQ(lean.records[0].state, TaskState::kOk);
}

TEST_F(AnswersTest, APageOfRecordsInIdOrderFilteredByStatus) {
  for (uint64_t n = 1; n <= 4; ++n) Submit(n);
  Finish(2, false);
  Finish(3, true);
  protocol::TaskIdList page;
  page.limit = 2;
  const protocol::ResultReply first = Records(*store_, page, false);
  ASSERT_EQ(first.records.size(), 2u);
  EXPECT_EQ(first.records[0].id, Id(1));
  EXPECT_EQ(first.more, true);
  EXPECT_EQ(first.next, Id(2));
  protocol::TaskIdList failed;
  failed.status = "failed";
  const protocol::ResultReply only = Records(*store_, failed, false);
  ASSERT_EQ(only.records.size(), 1u);
  EXPECT_EQ(only.records[0].id, Id(2));
}

TEST_F(AnswersTest, RecoveryPagesCarryTheUnfinishedAndTheOutcomesTheyNeed) {
  Submit(1);
  Finish(1, true);
  protocol::RoutingMeta after_one;
  after_one.after.ids = {Id(1)};
  Submit(2, after_one, {"header", "meta"});
  Submit(3, {}, {});
  std::vector<TaskId> without_request;
  const protocol::RecoverReply reply = Recover(*store_, {}, &without_request);
  ASSERT_EQ(reply.tasks.size(), 2u);
  EXPECT_EQ(reply.tasks[0].id, Id(2));
  ASSERT_EQ(reply.finished.size(), 1u);
  EXPECT_EQ(reply.finished[0].id, Id(1));
  EXPECT_TRUE(reply.finished[0].ok);
  EXPECT_TRUE(reply.done);
  EXPECT_TRUE(without_request.empty());
}

TEST_F(AnswersTest, AQueuePerEngineFromTheCounts) {
  Submit(1);
  Submit(2);
  store_->Assigned(Id(1), {2, 1});
  store_->Assigned(Id(2), {2, 1});
  EngineRegistry registry;
  const protocol::QueueReply queue = QueueStatus(*store_, registry);
  ASSERT_EQ(queue.engines.size(), 1u);
  EXPECT_EQ(queue.engines[0].running, 1) << "one runs, the other is queued";
  EXPECT_EQ(queue.engines[0].queued, 1);
  EXPECT_EQ(queue.unassigned, 0);
}

}  // namespace
}  // namespace ztask::hub
