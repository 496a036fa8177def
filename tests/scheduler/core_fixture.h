// A SchedulerCore driven by a fake clock and fake engines, with helpers that
// read its actions. Shared by the scheduler's rule tests.
#ifndef ZTASK_TESTS_SCHEDULER_CORE_FIXTURE_H_
#define ZTASK_TESTS_SCHEDULER_CORE_FIXTURE_H_

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/core.h"

namespace ztask::scheduler {

using FakeClock = base::ManualClock;

inline TaskId Id(uint64_t n) { return TaskId{0xabcdef, n}; }

// Builder of submissions: Task(1).After({2, 3}).Mode(kAny).
struct TaskSpec {
  Submission s;
  explicit TaskSpec(uint64_t n) { s.id = Id(n); }
  TaskSpec& After(std::vector<uint64_t> ids, DependencyMode m = DependencyMode::kAll,
                  AcceptedOutcome o = AcceptedOutcome::kSuccess) {
    for (auto i : ids) s.after.ids.push_back(Id(i));
    s.after.mode = m;
    s.after.outcome = o;
    return *this;
  }
  TaskSpec& Follow(std::vector<uint64_t> ids, DependencyMode m = DependencyMode::kAll,
                   AcceptedOutcome o = AcceptedOutcome::kSuccess) {
    for (auto i : ids) s.follow.ids.push_back(Id(i));
    s.follow.mode = m;
    s.follow.outcome = o;
    return *this;
  }
  // clang-format off
  TaskSpec& Targets(std::vector<int32_t> t) { s.targets = std::move(t); return *this; }
  TaskSpec& Timeout(double seconds) { s.timeout_s = seconds; return *this; }
  TaskSpec& Retries(int32_t n) { s.retries = n; return *this; }
  TaskSpec& Priority(int32_t p) { s.priority = p; return *this; }
  TaskSpec& Slots(int32_t k) { s.needs.slots = k; return *this; }
  TaskSpec& Uses(const std::string& name, int64_t units) {
    s.needs.resources[name] = units; return *this;
  }
  // clang-format on
};

// What happened to a task, read from the actions.
struct Final {
  Action::Kind kind;
  ErrorType error;
  std::string message;
  int32_t engine_id;
};

class CoreTest : public ::testing::Test {
 protected:
  void Make(uint32_t hwm = 1, const std::string& scheme = "leastload", bool send_ahead = false) {
    MakeWith({.hwm = hwm, .send_ahead = send_ahead}, scheme);
  }
  void MakeWith(const CoreOptions& options, const std::string& scheme = "leastload") {
    core_ = std::make_unique<SchedulerCore>(options, MakeScheme(scheme, 42), &clock_);
  }
  void SetUp() override { Make(); }

  SchedulerCore& core() { return *core_; }

  bool Submit(const TaskSpec& spec) {
    bool accepted = core_->Submit(spec.s);
    Collect();
    return accepted;
  }
  EngineSlot AddEngine(int32_t id, const Amounts& capacity = {}) {
    EngineSlot slot = core_->EngineAdded(id, /*accepting=*/true, capacity);
    slots_[id] = slot;
    Collect();
    return slot;
  }
  void RemoveEngine(int32_t id) {
    core_->EngineRemoved(slots_.at(id));
    Collect();
  }
  // Finishes task n on the engine it was last dispatched to.
  SchedulerCore::Finish Finish(uint64_t n, bool success, ErrorType error = ErrorType::kTaskFailed) {
    auto it = running_on_.find(n);
    EXPECT_NE(it, running_on_.end()) << "task " << n << " was never dispatched";
    if (it == running_on_.end()) return SchedulerCore::Finish::kLate;
    return FinishOn(it->second, n, success, error);
  }
  SchedulerCore::Finish FinishOn(int32_t engine, uint64_t n, bool success,
                                 ErrorType error = ErrorType::kTaskFailed) {
    auto r =
        core_->TaskFinished(slots_.at(engine), Id(n), success, success ? ErrorType::kNone : error);
    Collect();
    return r;
  }
  // Task n succeeded on its engine, which says it ran `run_us`.
  SchedulerCore::Finish FinishRan(uint64_t n, int64_t run_us) {
    auto r = core_->TaskFinished(slots_.at(running_on_.at(n)), Id(n), true, ErrorType::kNone,
                                 /*retriable=*/true, run_us);
    Collect();
    return r;
  }
  // The engine task n was last sent to did not run it (sent ahead).
  SchedulerCore::Finish NotRun(uint64_t n) {
    auto r = core_->TaskNotRun(slots_.at(running_on_.at(n)), Id(n));
    Collect();
    return r;
  }
  // The engine task n was last sent to cannot run it (a functional
  // dependency unmet there).
  SchedulerCore::Finish Unmet(uint64_t n, const std::string& why = "no numpy here") {
    auto r = core_->TaskUnmet(slots_.at(running_on_.at(n)), Id(n), why);
    Collect();
    return r;
  }
  void Tick(double seconds) {
    clock_.AdvanceSeconds(seconds);
    core_->Tick();
    Collect();
  }
  AbortOutcome Abort(std::vector<uint64_t> ids) {
    std::vector<TaskId> t;
    for (auto i : ids) t.push_back(Id(i));
    auto r = core_->Abort(t);
    Collect();
    return r;
  }

  // Engine ids task n was dispatched to, in order.
  std::vector<int32_t> DispatchesOf(uint64_t n) const {
    std::vector<int32_t> out;
    for (const auto& a : log_) {
      if (a.kind == Action::Kind::kDispatch && a.task == Id(n)) out.push_back(a.engine_id);
    }
    return out;
  }
  // Task numbers in the order they were dispatched (any engine).
  std::vector<uint64_t> DispatchOrder() const {
    std::vector<uint64_t> out;
    for (const auto& a : log_) {
      if (a.kind == Action::Kind::kDispatch) out.push_back(a.task.lo);
    }
    return out;
  }
  bool Running(uint64_t n) const { return running_on_.count(n) && !finals_.count(n); }
  std::optional<Final> FinalOf(uint64_t n) const {
    auto it = finals_.find(n);
    if (it == finals_.end()) return std::nullopt;
    return it->second;
  }
  int FinalCount(uint64_t n) const {
    int count = 0;
    for (const auto& a : log_) {
      if (a.task == Id(n) && (a.kind == Action::Kind::kDeliver || a.kind == Action::Kind::kFail)) {
        ++count;
      }
    }
    return count;
  }
  // The dispatches of task n, in order.
  std::vector<Action> DispatchActionsOf(uint64_t n) const {
    std::vector<Action> out;
    for (const auto& a : log_) {
      if (a.kind == Action::Kind::kDispatch && a.task == Id(n)) out.push_back(a);
    }
    return out;
  }
  int CountOf(Action::Kind kind, uint64_t n) const {
    int count = 0;
    for (const auto& a : log_) count += a.kind == kind && a.task == Id(n);
    return count;
  }
  std::vector<Action> RetriesOf(uint64_t n) const {
    std::vector<Action> out;
    for (const auto& a : log_) {
      if (a.kind == Action::Kind::kRetry && a.task == Id(n)) out.push_back(a);
    }
    return out;
  }
  ErrorType ErrorOf(uint64_t n) const {
    auto f = FinalOf(n);
    return f ? f->error : ErrorType::kNone;
  }

  FakeClock clock_;
  std::unique_ptr<SchedulerCore> core_;
  std::map<int32_t, EngineSlot> slots_;
  std::map<uint64_t, int32_t> running_on_;
  std::map<uint64_t, Final> finals_;
  std::vector<Action> log_;

 protected:
  void Collect() {
    std::vector<Action> actions;
    core_->TakeActions(&actions);
    for (const auto& a : actions) {
      log_.push_back(a);
      const uint64_t n = a.task.lo;
      if (a.kind == Action::Kind::kDispatch) running_on_[n] = a.engine_id;
      if (a.kind == Action::Kind::kDeliver || a.kind == Action::Kind::kFail) {
        finals_[n] = {a.kind, a.error, a.message, a.engine_id};
      }
    }
  }
};

}  // namespace ztask::scheduler

#endif  // ZTASK_TESTS_SCHEDULER_CORE_FIXTURE_H_
