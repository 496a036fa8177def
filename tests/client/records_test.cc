// The client's vocabulary at its boundary: the name tables of the enums the
// wire carries as names (TaskFilter, TaskKind, HeldUntil, and TaskState as
// TaskInfo holds it), and records turned into TaskInfo and its JSON with
// the wire's strings unchanged.
#include "client/records.h"

#include <gtest/gtest.h>

namespace ztask::client {
namespace {

TEST(TaskFilterNames, RoundTripAndTheHubsNames) {
  for (TaskFilter f : {TaskFilter::kWaiting, TaskFilter::kRunning, TaskFilter::kOk,
                       TaskFilter::kFailed}) {
    EXPECT_EQ(ParseTaskFilter(TaskFilterName(f)), f) << TaskFilterName(f);
  }
  EXPECT_EQ(TaskFilterName(TaskFilter::kWaiting), "waiting");
  EXPECT_EQ(TaskFilterName(TaskFilter::kRunning), "running");
  EXPECT_EQ(TaskFilterName(TaskFilter::kOk), "ok");
  EXPECT_EQ(TaskFilterName(TaskFilter::kFailed), "failed");
  EXPECT_EQ(TaskFilterName(TaskFilter::kAll), "");
}

TEST(TaskFilterNames, UnknownNamesAreRejected) {
  for (const char* name : {"", "error", "Failed", "done", "all", "ok "}) {
    EXPECT_FALSE(ParseTaskFilter(name).has_value()) << "'" << name << "'";
  }
}

TEST(TaskKindNames, RoundTripAndTheWiresNames) {
  for (TaskKind k : {TaskKind::kCommand, TaskKind::kFunction, TaskKind::kPython}) {
    EXPECT_EQ(ParseTaskKind(TaskKindName(k)), k) << TaskKindName(k);
  }
  EXPECT_EQ(TaskKindName(TaskKind::kCommand), "command");
  EXPECT_EQ(TaskKindName(TaskKind::kFunction), "function");
  EXPECT_EQ(TaskKindName(TaskKind::kPython), "python");
  for (const char* name : {"", "shell", "Command", "fn"}) {
    EXPECT_FALSE(ParseTaskKind(name).has_value()) << "'" << name << "'";
  }
}

TEST(HeldUntilNames, RoundTripAndTheWiresNames) {
  for (HeldUntil h : {HeldUntil::kRecorded, HeldUntil::kFinal}) {
    EXPECT_EQ(ParseHeldUntil(HeldUntilName(h)), h) << HeldUntilName(h);
  }
  EXPECT_EQ(HeldUntilName(HeldUntil::kRecorded), "recorded");
  EXPECT_EQ(HeldUntilName(HeldUntil::kFinal), "final");
  for (const char* name : {"", "finished", "Final"}) {
    EXPECT_FALSE(ParseHeldUntil(name).has_value()) << "'" << name << "'";
  }
}

protocol::TaskRecord Record(TaskState state) {
  protocol::TaskRecord r;
  r.id = TaskId::FromHex("0123456789abcdef0123456789abcdef").value();
  r.state = state;
  r.label = "x";
  return r;
}

TEST(Records, TheStatusIsTheRecordsStateAndItsJsonTheWiresName) {
  const std::pair<TaskState, const char*> states[] = {{TaskState::kNone, ""},
                                                      {TaskState::kWaiting, "waiting"},
                                                      {TaskState::kRunning, "running"},
                                                      {TaskState::kOk, "ok"},
                                                      {TaskState::kError, "error"}};
  for (const auto& [state, name] : states) {
    const TaskInfo info = FromRecord(Record(state));
    EXPECT_EQ(info.status, state);
    EXPECT_EQ(info.ToJson()["status"], name);
    EXPECT_EQ(info.finished(), state == TaskState::kOk || state == TaskState::kError) << name;
    EXPECT_EQ(info.ok(), state == TaskState::kOk) << name;
  }
}

TEST(Records, JsonOfAFailedTaskIsAsBefore) {
  protocol::TaskRecord r = Record(TaskState::kError);
  r.error_type = ErrorType::kTaskFailed;
  r.error_message = "exit 3";
  EXPECT_EQ(FromRecord(r).ToJson().dump(),
            R"({"array_index":null,"attempts":0,"completed":null,"engine_id":null,)"
            R"("error":{"message":"exit 3","type":"TaskFailed"},"exit_code":null,)"
            R"("id":"0123456789abcdef0123456789abcdef","job":null,"label":"x",)"
            R"("replaced_by":null,"result":null,"started":null,"status":"error","stderr":"",)"
            R"("stdout":"","submitted":null})");
  EXPECT_EQ(FromRecord(Record(TaskState::kOk)).ToJson()["error"], nullptr);
}

TEST(Records, ASpecOfAnyKindButCommandKeepsItsFunction) {
  for (const char* kind : {"command", "function", "python", "unknown"}) {
    protocol::TaskRecord r = Record(TaskState::kOk);
    r.spec = protocol::TaskSpec{};
    r.spec->kind = kind;
    r.spec->function = "f";
    const TaskInfo info = FromRecord(r);
    ASSERT_TRUE(info.spec.has_value());
    EXPECT_EQ(info.spec->function, std::string(kind) == "command" ? "" : "f") << kind;
  }
}

}  // namespace
}  // namespace ztask::client
