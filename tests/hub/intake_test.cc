// The hub's decisions about the scheduler's monitor messages
// (hub/hub_core.h), with a fake clock and no sockets: each message becomes
// a record's change, an event and a note for the waits; what the monitor
// repeats changes nothing.
#include <gtest/gtest.h>

#include "tests/hub/hub_core_fixture.h"

namespace ztask::hub {
namespace {

using protocol::EventKind;

TaskId Id(uint64_t n) { return TaskId{5, n}; }

class IntakeTest : public HubCoreTest {
 protected:
  HubActions& Submitted(uint64_t n, const std::string& label = "") {
    out_.Clear();
    protocol::TaskSpec spec;
    spec.kind = "command";
    spec.label = label;
    const protocol::Header request{Id(n), protocol::MsgType::kTaskRequest, "client", 1};
    core_->Submitted(request, protocol::RoutingMeta{}, spec, {"header", "meta", "content"}, 0,
                     &out_);
    return out_;
  }
  HubActions& Assigned(uint64_t n, int32_t engine, int32_t attempt = 1) {
    out_.Clear();
    core_->Assigned(Id(n), {engine, attempt}, &out_);
    return out_;
  }
  HubActions& Outcome(uint64_t n, protocol::OutcomeMeta meta,
                      Result<protocol::TaskResult> result = protocol::TaskResult{}) {
    out_.Clear();
    core_->Outcome(Id(n), meta, std::move(result), &out_);
    return out_;
  }
  const protocol::TaskRecord* Record(uint64_t n) { return store_->Find(Id(n), &scratch_); }

  protocol::TaskRecord scratch_;
};

TEST_F(IntakeTest, AMonitorBatchBecomesRecordsEventsAndNotes) {
  // What one monitor batch carries for a task that ran once and succeeded.
  HubActions& submitted = Submitted(1, "step");
  EXPECT_EQ(Kinds(submitted), (std::vector{EventKind::kTaskSubmitted}));
  EXPECT_EQ(submitted.events[0].text, "step");
  EXPECT_EQ(submitted.noted, (std::vector<std::pair<TaskId, bool>>{{Id(1), false}}));
  EXPECT_EQ(Record(1)->state, TaskState::kWaiting);
  EXPECT_EQ(store_->unflushed(), 1u) << "a row to write";

  HubActions& assigned = Assigned(1, 3);
  EXPECT_EQ(Kinds(assigned), (std::vector{EventKind::kTaskAssigned}));
  EXPECT_EQ(assigned.events[0].engine_id, 3);
  EXPECT_EQ(Record(1)->state, TaskState::kRunning);

  protocol::TaskResult result;
  result.stdout_text = "out";
  HubActions& finished = Outcome(1, {true, true, ErrorType::kNone, 3, 1}, result);
  EXPECT_EQ(Kinds(finished), (std::vector{EventKind::kTaskFinished}));
  EXPECT_EQ(finished.events[0].status, protocol::EventStatus::kOk);
  EXPECT_EQ(finished.noted, (std::vector<std::pair<TaskId, bool>>{{Id(1), true}}));
  EXPECT_EQ(Record(1)->state, TaskState::kOk);
  EXPECT_EQ(Record(1)->stdout_text, "out");
  EXPECT_EQ(Record(1)->completed_us, clock_.WallMicros()) << "dated by the hub's clock";
  EXPECT_EQ(store_->ok(), 1);
  EXPECT_EQ(store_->unflushed(), 1u) << "still one row: the task's";
}

TEST_F(IntakeTest, DuplicatesAreDroppedWithoutEventsOrNotes) {
  Submitted(1);
  Assigned(1, 0);
  Outcome(1, {true, false, ErrorType::kTaskFailed, 0, 1});
  // The scheduler resends the batch the hub did not acknowledge.
  const auto nothing = [](const HubActions& out) { return out.events.empty() && out.noted.empty(); };
  EXPECT_TRUE(nothing(Submitted(1)));
  EXPECT_TRUE(nothing(Assigned(1, 0)));
  EXPECT_TRUE(nothing(Outcome(1, {true, false, ErrorType::kTaskFailed, 0, 1})));
  EXPECT_TRUE(nothing(Outcome(1, {true, true, ErrorType::kNone, 0, 1})));
  EXPECT_EQ(Record(1)->state, TaskState::kError) << "a final record never goes back";
  EXPECT_EQ(store_->failed(), 1);
}

TEST_F(IntakeTest, AnAttemptThatEndsWithoutBeingFinalIsARetryOrAReturn) {
  Submitted(1);
  Assigned(1, 0);
  HubActions& retried = Outcome(1, {false, false, ErrorType::kTaskFailed, 0, 1});
  EXPECT_EQ(Kinds(retried), (std::vector{EventKind::kTaskRetried}));
  EXPECT_EQ(retried.events[0].status, protocol::EventStatus::kError);
  EXPECT_EQ(Record(1)->state, TaskState::kWaiting);
  Assigned(1, 1, 2);
  HubActions& returned = Outcome(1, {false, true, ErrorType::kNone, 1, 2});
  EXPECT_EQ(Kinds(returned), (std::vector{EventKind::kTaskReturned})) << "sent ahead, not run";
  EXPECT_TRUE(Outcome(1, {false, true, ErrorType::kNone, 1, 2}).events.empty()) << "repeated";
}

TEST_F(IntakeTest, AResultThatCannotBeReadIsRecordedAsBadTask) {
  Submitted(1);
  HubActions& out = Outcome(1, {true, true, ErrorType::kNone, 0, 1},
                            Status::Malformed("truncated"));
  EXPECT_EQ(Record(1)->state, TaskState::kError);
  EXPECT_EQ(Record(1)->error_type, ErrorType::kBadTask);
  EXPECT_NE(Record(1)->error_message.find("truncated"), std::string::npos);
  ASSERT_EQ(out.log.size(), 1u);
  EXPECT_EQ(out.log[0].level, LogLine::Level::kWarning);
  EXPECT_EQ(out.events.at(0).error_type, ErrorType::kBadTask);
}

TEST_F(IntakeTest, ATaskWhoseBodyCannotBeReadIsRecordedAllTheSame) {
  out_.Clear();
  const protocol::Header request{Id(1), protocol::MsgType::kTaskRequest, "client", 1};
  core_->Submitted(request, protocol::RoutingMeta{}, Status::Malformed("bad body"), {"frames"}, 0,
                   &out_);
  ASSERT_NE(Record(1), nullptr);
  EXPECT_EQ(Record(1)->state, TaskState::kWaiting);
  ASSERT_EQ(out_.log.size(), 1u);
  EXPECT_NE(out_.log[0].text.find("its body cannot be read"), std::string::npos);
  EXPECT_EQ(Kinds(out_), (std::vector{EventKind::kTaskSubmitted}));
}

TEST_F(IntakeTest, AnEngineLostTakesItsCurrentTaskOffTheActivity) {
  Register("a", "u1");
  Submitted(1);
  Assigned(1, 0);
  protocol::StatsReply before;
  core_->activity().Fill({}, clock_.MonotonicMicros(), &before);
  ASSERT_EQ(before.current.size(), 1u);
  EXPECT_EQ(before.current[0].task_id, Id(1));
  clock_.AdvanceSeconds(10);
  HubActions& out = Tick();
  EXPECT_EQ(NoticesOf(out, protocol::MsgType::kEngineUnregistered), 1u);
  protocol::StatsReply after;
  core_->activity().Fill({}, clock_.MonotonicMicros(), &after);
  EXPECT_TRUE(after.current.empty());
  EXPECT_EQ(Record(1)->state, TaskState::kRunning)
      << "the scheduler, not the hub, decides what becomes of its task";
}

}  // namespace
}  // namespace ztask::hub
