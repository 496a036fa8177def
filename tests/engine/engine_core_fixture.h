// An EngineCore driven by a fake clock, with helpers that make jobs and read
// the replies it would send. No socket, no thread: the engine's rules in
// microseconds, as tests/scheduler/core_fixture.h does for the scheduler.
#ifndef ZTASK_TESTS_ENGINE_ENGINE_CORE_FIXTURE_H_
#define ZTASK_TESTS_ENGINE_ENGINE_CORE_FIXTURE_H_

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_core.h"

namespace ztask::engine {

using FakeClock = base::ManualClock;

inline TaskId Id(uint64_t n) { return TaskId{0xe, n}; }

// Builder of jobs: Task(2).After(1).Slots(2).Kind("command").
struct TaskJob {
  Job job;
  explicit TaskJob(uint64_t n) {
    job.header.id = Id(n);
    job.header.type = protocol::MsgType::kTaskRequest;
    job.spec.kind = "function";
    job.spec.function = "noop";
  }
  // clang-format off
  TaskJob& After(uint64_t n) { job.dispatch.run_after = Id(n); return *this; }
  TaskJob& Attempt(int32_t a) { job.dispatch.attempt = a; return *this; }
  TaskJob& Slots(int32_t k) { job.meta.slots = k; return *this; }
  TaskJob& Uses(const std::string& name, int64_t units) {
    if (!job.meta.resources) job.meta.resources.emplace();
    (*job.meta.resources)[name] = units; return *this;
  }
  TaskJob& Kind(const std::string& kind) { job.spec.kind = kind; return *this; }
  // clang-format on
};

// A reply the core would send, read back from its frames.
struct SentReply {
  TaskId id;
  protocol::ReplyMeta meta;
};

class EngineCoreTest : public ::testing::Test {
 protected:
  static constexpr int64_t kWindowUs = 3'000'000;  // heartbeat 1 s, 3 misses

  void Make(int32_t slots = 1, protocol::ResourceMap resources = {}) {
    core_ = std::make_unique<EngineCore>(CoreOptions{"engine-uuid", slots, resources}, &clock_);
    core_->set_engine_id(7);
    // Registered just now (dated 100), the hub's window from here.
    core_->fence().Registered(100, clock_.now_us, kWindowUs);
  }
  void SetUp() override { Make(); }

  EngineCore& core() { return *core_; }
  FakeClock& clock() { return clock_; }

  void Arrive(const TaskJob& t) { core_->Arrive(Job(t.job)); }
  // A free runner: the id of the task that starts next, after answering those
  // that need no run; nullopt when none may start.
  std::optional<uint64_t> Next() {
    auto start = core_->NextThatFits();
    if (!start) return std::nullopt;
    running_.push_back(std::move(*start));
    return running_.back().job.header.id.lo;
  }
  // Free runners, as many as start: the tasks started now, in order.
  std::vector<uint64_t> StartWhatFits() {
    std::vector<uint64_t> ids;
    while (auto s = core_->NextThatFits()) {
      ids.push_back(s->job.header.id.lo);
      running_.push_back(std::move(*s));
    }
    return ids;
  }
  // Task n, started, ends ok or failed.
  void Finish(uint64_t n, bool ok = true) {
    for (auto it = running_.begin(); it != running_.end(); ++it) {
      if (it->job.header.id != Id(n)) continue;
      Done done{it->job.header, {ok, ok ? ErrorType::kNone : ErrorType::kTaskFailed, 7,
                                 it->job.dispatch.attempt}, {}};
      core_->Finished(done, it->grant);
      running_.erase(it);
      return;
    }
    ADD_FAILURE() << "task " << n << " is not running";
  }
  // Every reply waiting to go, in order; they are then sent.
  std::vector<SentReply> Sent() {
    std::vector<SentReply> out;
    while (core_->HasUnsent()) {
      for (const auto& reply : core_->TakeUnsent()) {
        const std::vector<std::string>& frames = *reply;
        auto parent = protocol::DecodeParent(frames[1]);
        auto meta = protocol::DecodeBody<protocol::ReplyMeta>(frames[2]);
        EXPECT_TRUE(parent.ok() && *parent && meta.ok());
        if (parent.ok() && *parent && meta.ok()) out.push_back({(*parent)->id, *meta});
      }
    }
    return out;
  }
  std::vector<uint64_t> SentIds() {
    std::vector<uint64_t> ids;
    for (const auto& r : Sent()) ids.push_back(r.id.lo);
    return ids;
  }

  FakeClock clock_;
  std::unique_ptr<EngineCore> core_;
  std::vector<EngineCore::Start> running_;
};

}  // namespace ztask::engine

#endif  // ZTASK_TESTS_ENGINE_ENGINE_CORE_FIXTURE_H_
