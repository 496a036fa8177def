// The default HWM and the take-back rule (core.h, CoreOptions::hwm):
// engines' depths measured as they answer, and tasks queued behind a long
// one asked back when another engine is idle.
#include "scheduler/core.h"

namespace ztask::scheduler {

void SchedulerCore::Measured(EngineSlot slot) {
  book_.SetDepth(slot, gauge_.Finished(slot, clock_->MonotonicMicros()));
}

void SchedulerCore::TakeBackStuck(int64_t now) {
  bool any_idle = false;
  std::vector<EngineSlot> stuck;
  maybe_queued_ = false;
  for (const auto& [engine_id, slot] : book_.live()) {
    if (book_.Idle(slot)) any_idle = true;
    if (book_.Queued(slot) == 0) continue;
    maybe_queued_ = true;
    if (gauge_.Stuck(slot, now)) stuck.push_back(slot);
  }
  if (!any_idle) return;
  for (EngineSlot slot : stuck) {
    // The engine knows which it started: it gives back only the others.
    // Until it answers again it is given nothing more to queue.
    gauge_.Stalled(slot);
    book_.SetDepth(slot, 0);
    for (const TaskId& id : book_.RunningOn(slot)) AskBack(tasks_.at(id));
  }
}

void SchedulerCore::AskBack(Task& task) {
  if (task.taking_back) return;
  task.taking_back = true;
  ++counters_.taken_back;
  actions_.push_back({Action::Kind::kTakeBack,
                      task.id,
                      task.slot,
                      book_.IdOf(task.slot),
                      task.attempt,
                      ErrorType::kNone,
                      {},
                      false});
}

}  // namespace ztask::scheduler
