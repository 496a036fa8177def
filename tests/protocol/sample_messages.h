// One filled-in example of every message type, for round-trip tests and the
// fuzz corpus.
#ifndef ZTASK_TESTS_PROTOCOL_SAMPLE_MESSAGES_H_
#define ZTASK_TESTS_PROTOCOL_SAMPLE_MESSAGES_H_

#include <string>
#include <vector>

#include "protocol/codec.h"

namespace ztask::protocol::testing {

inline TaskId SampleId(uint64_t n) { return TaskId{0x0123456789abcdefull, n}; }

inline Header SampleHeader(MsgType type) {
  return {SampleId(1), type, "session-7f", 1'700'000'000'123'456};
}

inline WireDependencies SampleDeps() {
  return {{SampleId(2), SampleId(3)}, DependencyMode::kAny, AcceptedOutcome::kEither};
}

inline RawValue SampleRaw() { return {std::string("\x93\x01\xa1x\xc3", 5)}; }  // [1, "x", true]

template <class T> T Sample();
template <> inline Empty Sample<Empty>() { return {}; }
template <> inline RoutingMeta Sample<RoutingMeta>() {
  return {SampleDeps(), {{SampleId(4)}, DependencyMode::kAll, AcceptedOutcome::kFailure},
          {0, 3}, 2.5, 10.0, 3, -2, 4, ResourceMap{{"gpus", 2}}};
}
template <> inline TaskSpec Sample<TaskSpec>() {
  return {"command", "", SampleRaw(), {"/bin/echo", "hi there"}, "/tmp",
          {{"A", "1"}, {"B", "two"}}, "render frame 7", true, "sweep", 7,
          "out/%{ARRAY_INDEX}.txt", "err/%{TASK_ID}", SampleId(9)};
}
template <> inline ReplyMeta Sample<ReplyMeta>() {
  return {false, ErrorType::kTimeLimitExceeded, 4, 2};
}
template <> inline TaskResult Sample<TaskResult>() {
  return {"killed after 10 s", SampleRaw(), -9, "out\n", "err\n", true, false, 100, 200};
}
template <> inline AbortRequest Sample<AbortRequest>() { return {{SampleId(5), SampleId(6)}}; }
template <> inline AbortReply Sample<AbortReply>() {
  return {{SampleId(5)}, {SampleId(6)}, {}, {SampleId(9)}};
}
template <> inline EngineReady Sample<EngineReady>() {
  return {3, "uuid-3", std::vector<TaskId>{TaskId{1, 2}}, 8, ResourceMap{{"gpus", 4}}};
}
template <> inline RegistrationRequest Sample<RegistrationRequest>() {
  return {"uuid-3", "node7-0", "node7", 4242, 5, 2, 16, ResourceMap{{"gpus", 4}}};
}
template <> inline RegistrationReply Sample<RegistrationReply>() { return {true, 3, "", 1000, 3}; }
template <> inline EngineRef Sample<EngineRef>() { return {3, "uuid-3"}; }
template <> inline HeartbeatBody Sample<HeartbeatBody>() { return {3, "uuid-3", 2500}; }
template <> inline ClusterRequest Sample<ClusterRequest>() {
  return {"add", 4, "ssh", {"node1", "node2:3"}};
}
template <> inline EngineStateReport Sample<EngineStateReport>() {
  return {"node7-0", EngineState::kRestarting, 2, "exited with code 137"};
}
template <> inline TaskIdList Sample<TaskIdList>() {
  return {{SampleId(7)}, SampleId(8), 500, "final", 1000, "sweep", "failed"};
}
template <> inline ResultReply Sample<ResultReply>() {
  TaskRecord r;
  r.id = SampleId(7);
  r.label = "l";
  r.client = "c";
  r.state = TaskState::kError;
  r.error_type = ErrorType::kTaskFailed;
  r.error_message = "exit 3";
  r.engine_id = 1;
  r.attempts = 2;
  r.submitted_us = 1;
  r.started_us = 2;
  r.completed_us = 3;
  r.exit_code = 3;
  r.stdout_text = "o";
  r.stderr_text = "e";
  r.result = SampleRaw();
  r.stdout_truncated = true;
  r.routing = Sample<RoutingMeta>();
  r.job = "sweep";
  r.array_index = 7;
  r.spec = Sample<TaskSpec>();
  r.replaced_by = SampleId(10);
  return {{r}, {SampleId(8)}, true, SampleId(7)};
}
template <> inline QueueReply Sample<QueueReply>() { return {{{0, 1, 2, 3}, {1, 0, 0, 9}}, 12}; }
template <> inline EngineInfo Sample<EngineInfo>() {
  return {3,         "uuid-3",      "node7-0", "node7", 4242, EngineState::kRunning, 1'700'000'000'000'000,
          std::nullopt, 1,          16,        ResourceMap{{"gpus", 4}}};
}
template <> inline EnginesReply Sample<EnginesReply>() { return {{Sample<EngineInfo>()}}; }
template <> inline PurgeRequest Sample<PurgeRequest>() { return {{SampleId(1)}, true}; }
template <> inline Count Sample<Count>() { return {17}; }
template <> inline Acknowledgement Sample<Acknowledgement>() { return {false, "busy"}; }
template <> inline Assignment Sample<Assignment>() { return {2, 3}; }
template <> inline MonitorBatch Sample<MonitorBatch>() { return {}; }
template <> inline TaskBatch Sample<TaskBatch>() { return {std::vector<DispatchInfo>{}}; }
template <> inline BatchMeta Sample<BatchMeta>() { return {12}; }
template <> inline MonitorAck Sample<MonitorAck>() { return {{12, 14}}; }
template <> inline RecoverRequest Sample<RecoverRequest>() { return {SampleId(7), 2000, true}; }
template <> inline RecoverReply Sample<RecoverReply>() {
  RecoverReply reply;
  reply.tasks.push_back({SampleId(8), "client-1", TaskState::kRunning, 2, 1, {"header", "meta", "content"}});
  reply.finished.push_back({SampleId(7), true, 2});
  reply.done = true;
  return reply;
}
template <> inline StatsRequest Sample<StatsRequest>() { return {12, 500, true}; }
template <> inline SchedulerStats Sample<SchedulerStats>() {
  return {"leastload", -1, 3, 10, 5, 4, 2, 1, std::vector<EngineHwm>{{0, 64}, {1, 1}}};
}
template <> inline StatsReply Sample<StatsReply>() {
  StatsReply reply;
  reply.now_us = 99;
  reply.waiting = 1;
  reply.running = 2;
  reply.ok = 3;
  reply.failed = 4;
  reply.submitted_total = 10;
  reply.retries_total = 1;
  reply.bucket_bounds = {0.5, 1};
  reply.bucket_counts = {1, 2, 0};
  reply.duration_sum = 1.25;
  reply.scheduler = Sample<SchedulerStats>();
  reply.feed = 13;
  reply.finished.push_back(
      {SampleId(4), 2, false, ErrorType::kTaskFailed, 1, "sweep/3", 10, 11, 12, 1});
  reply.current.push_back({2, SampleId(5)});
  reply.labels.push_back({"sweep", 10, 3, 4});
  return reply;
}
template <> inline JobsRequest Sample<JobsRequest>() { return {"list", "sweep", "a", 100}; }
template <> inline JobsReply Sample<JobsReply>() {
  return {{{"sweep", 1, 2, 3, 4, 5, 10, 20}}, "7", true};
}
template <> inline OutcomeMeta Sample<OutcomeMeta>() {
  return {false, false, ErrorType::kEngineError, 2, 1};
}
template <> inline Event Sample<Event>() {
  return {EventKind::kTaskAssigned, SampleId(3), 2, 1, EventStatus::kNone, ErrorType::kNone, "", 99, 7};
}

template <MsgType kType>
std::vector<std::string> SampleFrames(const Signer& signer) {
  using B = Bodies<kType>;
  std::optional<Header> parent;
  if (kType == MsgType::kTaskReply) parent = SampleHeader(MsgType::kTaskRequest);
  return EncodeMessage(signer, SampleHeader(kType), parent, Sample<typename B::Meta>(),
                       Sample<typename B::Content>(), {"raw-buffer"});
}

}  // namespace ztask::protocol::testing

#endif  // ZTASK_TESTS_PROTOCOL_SAMPLE_MESSAGES_H_
