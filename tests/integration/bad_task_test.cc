// Tasks that once could hold an engine for ever. Bodies or results no
// process can read: each ends with one final record (BadTask, saying what
// was wrong), never retried, and the engine that met it goes on with the
// next task. Commands whose children keep their output open: the task ends
// with its own process.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "protocol/codec.h"
#include "protocol/connection_file.h"
#include "tests/support/cluster_fixture.h"
#include "tests/support/raw_peer.h"

namespace ztask::testing {
namespace {

// [[[...1...]]]: `depth` levels, the 1 being the deepest.
Value Nested(int depth) {
  Value v = 1;
  for (int i = 1; i < depth; ++i) v = Value::array({std::move(v)});
  return v;
}

std::string NestedBytes(int depth) { return std::string(static_cast<size_t>(depth - 1), '\x91') + '\x01'; }

// A msgpack array of `n` ones (array 32).
std::string ArrayOfOnes(uint32_t n) {
  std::string out = "\xdd";
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((n >> shift) & 0xff));
  out.append(n, '\x01');
  return out;
}

TaskInfo FetchOne(Client& client, const TaskId& id) {
  auto records = client.Fetch({id});
  EXPECT_TRUE(records.ok()) << records.status().ToString();
  return records.ok() && records->size() == 1 ? (*records)[0] : TaskInfo{};
}

TEST_F(ClusterTest, ATaskNoProcessCanReadFailsAsBadTaskAndItsEngineGoesOn) {
  // One engine taking one task at a time: a task it dropped would hold it.
  StartCluster(1, {"--hwm", "1"});
  auto info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile()));
  ASSERT_TRUE(info.ok());
  const protocol::Signer signer(info->key);
  RawPeer peer(info->scheduler.client);

  // Sent as another client might: bodies the scheduler passes on unread.
  struct Case {
    std::string args;
    std::string why;
  };
  const std::vector<Case> cases = {
      {NestedBytes(40), "nests deeper than 32 levels"},
      {NestedBytes(static_cast<int>(protocol::kMaxValueDepth) + 1), "nests deeper than 24 levels"},
      {ArrayOfOnes(1100000), "more than 1048576 items"},
      {"\xc1", "bad msgpack"},
  };
  std::vector<TaskId> ids;
  for (const Case& c : cases) {
    protocol::TaskSpec spec;
    spec.kind = "function";
    spec.function = "echo";
    spec.args.bytes = c.args;
    ids.push_back(TaskId::Random());
    peer.Send(TaskRequest(signer, "another-client", ids.back(), spec));
  }
  TaskOptions noop;
  noop.function = "noop";
  auto after = client_->Submit(noop);
  ASSERT_TRUE(after.ok());

  ASSERT_TRUE(client_->Wait({*after}, 60).ok()) << "the engine went on to the next task";
  ASSERT_TRUE(client_->Wait(ids, 60).ok()) << "every unreadable task has a final record";
  EXPECT_EQ(FetchOne(*client_, *after).status, TaskState::kOk);
  for (size_t i = 0; i < cases.size(); ++i) {
    const TaskInfo r = FetchOne(*client_, ids[i]);
    EXPECT_EQ(r.status, TaskState::kError) << i;
    EXPECT_EQ(r.error_type, ErrorType::kBadTask) << i << ": " << r.error_message;
    EXPECT_NE(r.error_message.find(cases[i].why), std::string::npos) << i << ": " << r.error_message;
    EXPECT_EQ(r.attempts, 1) << "a task that cannot be read is not retried";
    EXPECT_TRUE(r.submitted.has_value()) << "the hub recorded the task it could not read";
  }
}

TEST_F(ClusterTest, TaskctlRefusesArgumentsBeyondTheLimitsOnValues) {
  StartCluster(1);
  Ran refused = Ctl({"submit", "--fn", "echo", "--args", Nested(40).dump()});
  EXPECT_EQ(refused.code, 2) << refused.out << refused.err;
  EXPECT_EQ(refused.err.find('\n'), refused.err.size() - 1) << "one line: " << refused.err;
  EXPECT_NE(refused.err.find("limits on values"), std::string::npos) << refused.err;
  EXPECT_TRUE(refused.out.empty()) << "nothing was submitted: " << refused.out;

  TaskOptions deep;
  deep.function = "echo";
  deep.args = Nested(25);
  EXPECT_EQ(client_->Submit(deep).status().code(), Status::Code::kInvalidArgument);

  // At the limit: it runs, and its result comes back whole.
  const std::string id = Submit({"--fn", "echo", "--args", Nested(24).dump()});
  auto records = Wait({id});
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["status"], "ok");
  EXPECT_EQ(records[0]["result"], Nested(24));
}

TEST_F(ClusterTest, AResultBeyondTheLimitsOnValuesIsRecordedAsBadTask) {
  StartCluster(1);
  // echo's arguments are within the limits; a task that gets its result as
  // one of its arguments (pass_results) returns it one level deeper.
  TaskOptions inner;
  inner.function = "echo";
  inner.args = Nested(24);
  auto first = client_->Submit(inner);
  ASSERT_TRUE(first.ok());
  TaskOptions outer;
  outer.function = "echo";
  outer.after.ids = {*first};
  outer.pass_results = true;
  outer.retries = 3;
  auto second = client_->Submit(outer);
  ASSERT_TRUE(second.ok());
  TaskOptions next;
  next.function = "noop";
  auto third = client_->Submit(next);
  ASSERT_TRUE(third.ok());
  ASSERT_TRUE(client_->Wait({*first, *second, *third}, 60).ok());
  EXPECT_EQ(FetchOne(*client_, *first).status, TaskState::kOk);
  const TaskInfo r = FetchOne(*client_, *second);
  EXPECT_EQ(r.error_type, ErrorType::kBadTask) << r.error_message;
  EXPECT_NE(r.error_message.find("its result breaks the limits on values"), std::string::npos)
      << r.error_message;
  EXPECT_EQ(r.attempts, 1) << "not retried: it would fail the same way";
  EXPECT_TRUE(r.result.is_null());
  EXPECT_EQ(FetchOne(*client_, *third).status, TaskState::kOk);
}

// True while a process whose command line contains `marker` lives.
bool Alive(const std::string& marker) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string cmdline = ReadFile(entry.path() / "cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(marker) != std::string::npos) return true;
  }
  return false;
}

TEST_F(ClusterTest, ACommandEndsWithItsProcessThoughAChildStillHoldsItsOutput) {
  StartCluster(1, {"--hwm", "1"});
  // A unique duration marks the child left in the background.
  TaskOptions left_behind;
  left_behind.command = {"/bin/sh", "-c", "sleep 600.4711 & echo started; echo also >&2"};
  auto first = client_->Submit(left_behind);
  ASSERT_TRUE(first.ok());
  // One that closes its output and outlives its time limit.
  TaskOptions closed;
  closed.command = {"/bin/sh", "-c", "exec >&- 2>&-; sleep 600.4712"};
  closed.time_limit = 1;
  auto second = client_->Submit(closed);
  ASSERT_TRUE(second.ok());
  TaskOptions next;
  next.command = {"true"};
  auto third = client_->Submit(next);
  ASSERT_TRUE(third.ok());
  ASSERT_TRUE(client_->Wait({*first, *second, *third}, 60).ok()) << "the engine is not held";
  const TaskInfo a = FetchOne(*client_, *first);
  EXPECT_EQ(a.status, TaskState::kOk) << a.error_message;
  EXPECT_EQ(a.stdout_text, "started\n");
  EXPECT_EQ(a.stderr_text, "also\n");
  const TaskInfo b = FetchOne(*client_, *second);
  EXPECT_EQ(b.error_type, ErrorType::kTimeLimitExceeded) << b.error_message;
  EXPECT_EQ(FetchOne(*client_, *third).status, TaskState::kOk);
  // What the tasks left behind went with them.
  EXPECT_TRUE(WaitFor([] { return !Alive("600.4711") && !Alive("600.4712"); }));
}

}  // namespace
}  // namespace ztask::testing
