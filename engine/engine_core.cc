// The engine's logic without I/O (engine/engine_core.h).
#include "engine/engine_core.h"

#include <algorithm>
#include <utility>

#include "base/clock.h"

namespace ztask::engine {


EngineCore::EngineCore(CoreOptions options, base::Clock* clock)
    : options_(std::move(options)), clock_(clock), capacity_(options_.slots, options_.resources) {
  running_ids_.reserve(static_cast<size_t>(options_.slots));
}

void EngineCore::Arrive(Job&& job) {
  // Sent again while queued here: taken once. Ran here already (a restarted
  // scheduler did not hear): its reply again, not a second run.
  const TaskId id = job.header.id;
  if (ledger_.Arrive(id, job.dispatch.attempt, clock_->MonotonicMicros()) ==
      Ledger::Arrival::kQueued) {
    queue_.push_back(std::move(job));
  }
}

bool EngineCore::AnsweredWithoutRun(const Job& job) {
  if (!ledger_.MayRun(job.dispatch.run_after)) {
    Reply(NotRunAnswer(job, engine_id()));
    return true;
  }
  if (std::string why = capacity_.NeverFits(SlotsOf(job), ResourcesOf(job)); !why.empty()) {
    Reply(UnsatisfiableAnswer(job, engine_id(), why, clock_->WallMicros()));
    return true;
  }
  return false;
}

std::optional<EngineCore::Start> EngineCore::NextThatFits() {
  while (!queue_.empty() && MayStart()) {
    Job& job = queue_.front();
    if (AnsweredWithoutRun(job)) {
      queue_.pop_front();
      continue;
    }
    if (!capacity_.FitsNow(SlotsOf(job), ResourcesOf(job))) break;
    Grant grant = capacity_.Take(SlotsOf(job), ResourcesOf(job));
    // Moved once, out of the queue: a task's body is many strings.
    Start start{std::move(job), std::move(grant)};
    queue_.pop_front();
    Running(start.job.header.id);
    return start;
  }
  return std::nullopt;
}

void EngineCore::Finished(const Done& done, const Grant& grant) {
  capacity_.Give(grant);
  for (TaskId& id : running_ids_) {
    if (id != done.request.id) continue;
    id = running_ids_.back();
    running_ids_.pop_back();
    break;
  }
  Reply(done);
}

size_t EngineCore::ResendReplies() { return ledger_.ResendAll(clock_->MonotonicMicros()); }

std::optional<size_t> EngineCore::DropIfRemoved() {
  const uint64_t removals = fence_.removals();
  if (!fence_.drop_held()) return std::nullopt;
  const size_t dropped = queue_.size();
  for (const Job& job : queue_) Reply(NotRunAnswer(job, engine_id()));
  queue_.clear();
  fence_.Dropped(removals);
  return dropped;
}

size_t EngineCore::TakeBack(const std::vector<TaskId>& ids) {
  size_t given = 0;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (std::find(ids.begin(), ids.end(), it->header.id) == ids.end()) {
      ++it;
      continue;
    }
    Reply(NotRunAnswer(*it, engine_id()));
    it = queue_.erase(it);
    ++given;
  }
  return given;
}

std::vector<TaskId> EngineCore::Held() const {
  std::vector<TaskId> held(running_ids_.begin(), running_ids_.end());
  for (const Job& job : queue_) held.push_back(job.header.id);
  return held;
}

void EngineCore::Reply(const Done& done) {
  // Every answered task leaves the queue's bookkeeping here, run or not.
  ledger_.Dequeued(done.request.id);
  protocol::Header header{TaskId::Random(), protocol::MsgType::kTaskReply, options_.uuid,
                          clock_->WallMicros()};
  ledger_.Reply(done.request.id, done.meta.attempt, done.meta.ok && !done.meta.not_run,
                protocol::EncodeInner(header, done.request, done.meta, done.result),
                clock_->MonotonicMicros());
}

}  // namespace ztask::engine
