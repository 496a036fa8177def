// The engine side of the core: placing ready tasks on engines with room,
// engines coming, going and draining. The task side is in core.cc.
#include <algorithm>
#include <cassert>

#include "scheduler/core.h"

namespace ztask::scheduler {
namespace {

bool Contains(const std::vector<int32_t>& v, int32_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

void SchedulerCore::LeaveScheme(EngineSlot slot) {
  if (HasRoom(engines_[slot])) scheme_->Erase(ViewOf(slot));
}

void SchedulerCore::JoinScheme(EngineSlot slot) {
  if (HasRoom(engines_[slot])) scheme_->Insert(ViewOf(slot));
}

void SchedulerCore::Place(Task& task, EngineSlot slot) {
  Engine& e = engines_[slot];
  LeaveScheme(slot);
  Book(e, task, +1);
  e.stamp = ++next_use_stamp_;
  task.running_index = static_cast<uint32_t>(e.running.size());
  e.running.push_back(task.id);
  JoinScheme(slot);
  task.state = State::kRunning;
  task.slot = slot;
  task.ahead = !Met(task);
  task.followed = false;
  ++running_;
}

void SchedulerCore::Assign(Task& task, EngineSlot slot, const TaskId& run_after) {
  Place(task, slot);
  Engine& e = engines_[slot];
  ++task.attempt;
  ++counters_.dispatched;
  actions_.push_back({Action::Kind::kDispatch,
                      task.id,
                      slot,
                      e.id,
                      task.attempt,
                      ErrorType::kNone,
                      {},
                      false,
                      run_after});
  if (options_.send_ahead) ahead_check_.push_back(task.id);
}

bool SchedulerCore::MayGoAhead(const Task& task, const Task& dep, bool is_follow,
                               bool* no_room) const {
  *no_room = false;
  if (task.state != State::kWaiting || task.timeout_us > 0) return false;
  if (dep.state != State::kRunning || dep.slot == kNoSlot || dep.followed) return false;
  const auto unfinished = [](const DependencyProgress& p) {
    return p.total - p.accepted - p.rejected;
  };
  if (unfinished(task.after) + unfinished(task.follow) != 1) return false;
  if (task.after.Impossible() || task.follow.Impossible()) return false;
  // Met as soon as `dep` succeeds, and only then: what the engine checks.
  DependencyProgress if_ok = is_follow ? task.follow : task.after;
  if (if_ok.outcome != AcceptedOutcome::kSuccess) return false;
  if_ok.Count(true);
  if (!if_ok.Met() || !(is_follow ? task.after : task.follow).Met()) return false;
  if (task.follow.total > 0) {
    if (task.follow.mode != DependencyMode::kAll || task.follow_unlocated > 0) return false;
    for (EngineSlot s : task.location) {
      if (s != dep.slot) return false;
    }
  }
  const Engine& e = engines_[dep.slot];
  // An engine of many slots runs what it holds side by side: the task
  // could start before its dependency ended there.
  if (Wide(task) || e.slots > 1) return false;
  if (!task.targets.empty() && !Contains(task.targets, e.id)) return false;
  if (Contains(task.blacklist, e.id) || Contains(task.unmet, e.id)) return false;
  if (!HasRoom(e)) {
    *no_room = true;
    return false;
  }
  return true;
}

bool SchedulerCore::GoAheadIfMay(Task& task, Task& dep, bool is_follow) {
  bool no_room = false;
  if (MayGoAhead(task, dep, is_follow, &no_room)) {
    dep.followed = true;
    Assign(task, dep.slot, dep.id);
    return true;
  }
  // Looked at again once the engine has room (Release).
  if (no_room) ahead_blocked_[dep.slot].push_back(dep.id);
  return no_room;
}

// One waiter at most goes behind a task: the others wait for its outcome
// and then spread over every engine, as they would without sending ahead.
void SchedulerCore::SendAheadAfter(const TaskId& dep_id) {
  auto w = waiters_.find(dep_id);  // most tasks have none: looked up first
  if (w == waiters_.end()) return;
  auto d = tasks_.find(dep_id);
  if (d == tasks_.end()) return;
  Task& dep = d->second;
  if (dep.state != State::kRunning || dep.followed) return;
  size_t looked = 0;
  for (size_t i = 0; i < w->second.size() && looked < kAheadScan; ++i) {
    const Waiter waiter = w->second[i];
    auto t = tasks_.find(waiter.task);
    if (t == tasks_.end()) continue;
    if (t->second.state != State::kWaiting) return;  // running already: one at most
    ++looked;
    if (GoAheadIfMay(t->second, dep, waiter.is_follow)) return;
  }
}

void SchedulerCore::SendAhead() {
  while (!ahead_check_.empty()) {
    const TaskId dep = ahead_check_.back();
    ahead_check_.pop_back();
    SendAheadAfter(dep);
  }
}

void SchedulerCore::Return(Task& task, EngineSlot slot) {
  actions_.push_back({Action::Kind::kReturned,
                      task.id,
                      slot,
                      engines_[slot].id,
                      task.attempt,
                      ErrorType::kNone,
                      {},
                      false});
  task.ahead = false;
  Cause cause;
  if (auto c = ahead_cause_.find(task.id); c != ahead_cause_.end()) {
    cause = c->second;
    ahead_cause_.erase(c);
  }
  Settle(task, cause);
}

void SchedulerCore::Release(Task& task) {
  Engine& e = engines_[task.slot];
  LeaveScheme(task.slot);
  Book(e, task, -1);
  const uint32_t at = task.running_index;
  if (at + 1 != e.running.size()) {
    e.running[at] = e.running.back();
    tasks_.at(e.running[at]).running_index = at;
  }
  e.running.pop_back();
  JoinScheme(task.slot);
  --running_;
  RetireIfDrained(task.slot);
  if (!ahead_blocked_.empty() && HasRoom(e)) {
    if (auto it = ahead_blocked_.find(task.slot); it != ahead_blocked_.end()) {
      ahead_check_.insert(ahead_check_.end(), it->second.begin(), it->second.end());
      ahead_blocked_.erase(it);
    }
  }
  task.state = State::kWaiting;
  task.slot = kNoSlot;
}

void SchedulerCore::EngineDraining(EngineSlot slot) {
  if (slot >= engines_.size() || !engines_[slot].alive || engines_[slot].draining) return;
  LeaveScheme(slot);
  engines_[slot].draining = true;
  RetireIfDrained(slot);
}

void SchedulerCore::RetireIfDrained(EngineSlot slot) {
  const Engine& e = engines_[slot];
  if (e.alive && e.draining && e.load == 0) {
    actions_.push_back(
        {Action::Kind::kRetire, TaskId{}, slot, e.id, 0, ErrorType::kNone, {}, false});
  }
}

bool SchedulerCore::Constrained(const Task& task) const {
  return !task.location.empty() || !task.targets.empty() || !task.blacklist.empty() ||
         !task.unmet.empty();
}

void SchedulerCore::AllowedSlots(const Task& task, std::vector<EngineSlot>* allowed,
                                 std::string* never) const {
  allowed->clear();
  never->clear();
  if (!task.location.empty()) {
    for (EngineSlot s : task.location) {
      if (engines_[s].alive) allowed->push_back(s);
    }
    if (allowed->empty()) {
      *never = "task " + task.id.ToHex() + ": the engine where its follow dependencies ran is gone";
      return;
    }
  } else if (!task.targets.empty()) {
    for (int32_t id : task.targets) {
      if (auto it = slot_of_id_.find(id); it != slot_of_id_.end()) allowed->push_back(it->second);
    }
  } else {
    for (const auto& [id, slot] : slot_of_id_) allowed->push_back(slot);
  }
  if (task.unmet.empty()) return;
  const size_t before = allowed->size();
  std::erase_if(*allowed, [&](EngineSlot s) { return Contains(task.unmet, engines_[s].id); });
  if (before > 0 && allowed->empty()) {
    *never = "task " + task.id.ToHex() +
             ": no engine can run it: every engine it may use answered that its dependencies "
             "are unmet there";
  }
}

void SchedulerCore::Candidates(Task& task, std::vector<EngineView>* out, std::string* never,
                               ErrorType* why) {
  out->clear();
  std::vector<EngineSlot> allowed;
  AllowedSlots(task, &allowed, never);
  *why = ErrorType::kImpossibleDependency;
  if (!never->empty()) return;
  if (Wide(task) && !allowed.empty() && (!task.judged || !task.unmet.empty())) {
    *never = Unsatisfiable(task, allowed);
    if (!never->empty()) {
      // Judged before: engines that could hold it answered that it cannot
      // run there.
      *why = task.judged ? ErrorType::kImpossibleDependency : ErrorType::kUnsatisfiable;
      if (task.judged) *never += " (of the engines that did not answer that it cannot run there)";
      return;
    }
    task.judged = true;
  }
  // Prefer engines where it has not failed; when it failed on all of them,
  // run again on one rather than wait for an engine that may never come.
  const bool any_fresh = std::any_of(allowed.begin(), allowed.end(), [&](EngineSlot s) {
    return !Contains(task.blacklist, engines_[s].id) && CouldHold(task, engines_[s]);
  });
  for (EngineSlot s : allowed) {
    if (!Fits(task, engines_[s])) continue;
    if (any_fresh && Contains(task.blacklist, engines_[s].id)) continue;
    out->push_back(ViewOf(s));
  }
}

void SchedulerCore::Pump() {
  std::vector<EngineView> candidates;
  std::string never;
  ErrorType why = ErrorType::kNone;
  Unreserve();  // looked at again: the oldest wide task may fit now
  // Takes the task at `at` out of ready_; where to go on (the next of its
  // group may have come in just after it).
  auto take = [&](ReadyQueue::Iterator at, Task& task) {
    const ReadyQueue::Group group{task.slots, task.needs};
    const ReadyQueue::Iterator next = ready_.Take(at, task.grouped ? &group : nullptr);
    task.grouped = false;
    return next;
  };
  do {
    ready_.ClearGrew();
    for (auto it = ready_.begin(); it != ready_.end() && !scheme_->Empty();) {
      Task& task = tasks_.at(it->id);
      if (!Constrained(task) && !Wide(task)) {
        const EngineSlot slot = scheme_->Pick();
        it = take(it, task);
        Assign(task, slot);
        continue;
      }
      Candidates(task, &candidates, &never, &why);
      if (!never.empty()) {
        it = take(it, task);
        task.state = State::kWaiting;
        Fail(task, why, never);
        continue;
      }
      if (candidates.empty()) {
        if (Wide(task) && reserved_slot_ == kNoSlot) Reserve(task);
        ++it;
        continue;
      }
      const EngineSlot slot = scheme_->PickFrom(candidates);
      it = take(it, task);
      Assign(task, slot);
    }
  } while (ready_.grew() && !scheme_->Empty());
  // What room is left after the ready tasks may take tasks sent ahead.
  if (options_.send_ahead) SendAhead();
}

EngineSlot SchedulerCore::EngineAdded(int32_t engine_id, bool accepting,
                                      const Amounts& capacity) {
  if (auto it = slot_of_id_.find(engine_id); it != slot_of_id_.end()) EngineRemoved(it->second);
  const auto slot = static_cast<EngineSlot>(engines_.size());
  Engine engine;
  engine.id = engine_id;
  engine.alive = true;
  engine.accepting = accepting;
  engine.stamp = next_new_stamp_++;
  engines_.push_back(std::move(engine));
  slot_of_id_[engine_id] = slot;
  Apply(capacity, engines_[slot]);
  JoinScheme(slot);
  Pump();
  return slot;
}

void SchedulerCore::SetCapacity(EngineSlot slot, const Amounts& capacity) {
  if (slot >= engines_.size() || !engines_[slot].alive) return;
  LeaveScheme(slot);
  Apply(capacity, engines_[slot]);
  JoinScheme(slot);
  Pump();
}

void SchedulerCore::Apply(const Amounts& capacity, Engine& e) {
  e.slots = static_cast<uint32_t>(std::max(1, capacity.slots));
  std::fill(e.capacity.begin(), e.capacity.end(), 0);
  for (const auto& [name, units] : capacity.resources) {
    const uint16_t r = ResourceIndex(name);
    if (e.capacity.size() <= r) e.capacity.resize(r + 1, 0);
    e.capacity[r] = std::max<int64_t>(0, units);
  }
}

uint16_t SchedulerCore::ResourceIndex(const std::string& name) {
  if (auto it = resource_index_.find(name); it != resource_index_.end()) return it->second;
  // Clients may name resources at will: past kMaxResourceNames distinct
  // names, every new one shares the last index (no engine has it, unless an
  // engine's name came that late), so the table stays bounded.
  if (resource_names_.size() >= kMaxResourceNames) return kMaxResourceNames - 1;
  const auto r = static_cast<uint16_t>(resource_names_.size());
  resource_index_.emplace(name, r);
  resource_names_.push_back(resource_names_.size() + 1 == kMaxResourceNames
                                ? "(one of too many resource names)"
                                : name);
  return r;
}

void SchedulerCore::Book(Engine& e, const Task& task, int sign) {
  e.load += sign > 0 ? task.slots : -task.slots;
  for (const auto& [r, units] : task.needs) {
    if (e.booked.size() <= r) e.booked.resize(r + 1, 0);
    e.booked[r] += sign * units;
  }
}

bool SchedulerCore::CouldHold(const Task& task, const Engine& e) {
  if (task.slots > e.slots) return false;
  for (const auto& [r, units] : task.needs) {
    if (units > UnitsOf(e.capacity, r)) return false;
  }
  return true;
}

bool SchedulerCore::Fits(const Task& task, const Engine& e) const {
  if (!Open(e)) return false;
  if (reserved_slot_ != kNoSlot && &e == &engines_[reserved_slot_] && task.id != reserved_for_) {
    if (e.reserved) return false;
    for (const auto& [r, units] : task.needs) {
      if (std::find(held_units_.begin(), held_units_.end(), r) != held_units_.end()) return false;
    }
  }
  if (task.slots > e.slots || !SlotRoom(e, task.slots)) return false;
  for (const auto& [r, units] : task.needs) {
    if (UnitsOf(e.booked, r) + units > UnitsOf(e.capacity, r)) return false;
  }
  return true;
}

std::string SchedulerCore::Unsatisfiable(const Task& task,
                                         const std::vector<EngineSlot>& allowed) const {
  uint32_t most_slots = 0;
  for (EngineSlot s : allowed) {
    if (CouldHold(task, engines_[s])) return "";
    most_slots = std::max(most_slots, engines_[s].slots);
  }
  const std::string prefix = "task " + task.id.ToHex() + ": needs ";
  const std::string largest =
      task.targets.empty() ? ", the largest engine has " : ", the largest engine it may use has ";
  if (task.slots > most_slots) {
    return prefix + std::to_string(task.slots) + " slots" + largest + std::to_string(most_slots);
  }
  std::string all = "slots=" + std::to_string(task.slots);
  for (const auto& [r, units] : task.needs) {
    int64_t most = 0;
    for (EngineSlot s : allowed) most = std::max(most, UnitsOf(engines_[s].capacity, r));
    const std::string& name = resource_names_[r];
    if (units > most) {
      return prefix + name + "=" + std::to_string(units) + largest +
             (most == 0 ? "no " + name : std::to_string(most));
    }
    all += " " + name + "=" + std::to_string(units);
  }
  return prefix + all + " at once, and no engine" +
         (task.targets.empty() ? "" : " it may use") + " has all of them";
}

void SchedulerCore::Reserve(const Task& task) {
  std::vector<EngineSlot> allowed;
  std::string never;
  AllowedSlots(task, &allowed, &never);
  EngineSlot best = kNoSlot;
  int64_t best_free = 0;
  for (EngineSlot s : allowed) {
    const Engine& e = engines_[s];
    if (!Open(e) || !CouldHold(task, e)) continue;
    const int64_t free = int64_t{e.slots} - e.load;
    if (best == kNoSlot || free > best_free) {
      best = s;
      best_free = free;
    }
  }
  if (best == kNoSlot) return;
  Engine& e = engines_[best];
  if (!SlotRoom(e, task.slots)) {
    LeaveScheme(best);  // every task needs a slot: none goes there
    e.reserved = true;
  } else {
    for (const auto& [r, units] : task.needs) {
      if (UnitsOf(e.booked, r) + units > UnitsOf(e.capacity, r)) held_units_.push_back(r);
    }
  }
  reserved_slot_ = best;
  reserved_for_ = task.id;
}

void SchedulerCore::Unreserve() {
  if (reserved_slot_ == kNoSlot) return;
  const EngineSlot slot = reserved_slot_;
  reserved_slot_ = kNoSlot;
  reserved_for_ = TaskId{};
  held_units_.clear();
  if (!engines_[slot].reserved) return;
  engines_[slot].reserved = false;
  JoinScheme(slot);
}

void SchedulerCore::EngineAccepting(EngineSlot slot) {
  if (slot >= engines_.size() || !engines_[slot].alive || engines_[slot].accepting) return;
  engines_[slot].accepting = true;
  JoinScheme(slot);
  Pump();
}

std::vector<TaskId> SchedulerCore::RunningOn(EngineSlot slot) const {
  return slot < engines_.size() ? engines_[slot].running : std::vector<TaskId>{};
}

bool SchedulerCore::Adopt(EngineSlot slot, const TaskId& id, int32_t attempt) {
  auto it = tasks_.find(id);
  if (slot >= engines_.size() || !engines_[slot].alive || it == tasks_.end()) return false;
  Task& task = it->second;
  if (task.state == State::kRunning || attempt <= task.attempt) return false;
  Unready(task);
  task.state = State::kWaiting;
  task.attempt = attempt;
  Place(task, slot);
  return true;
}

void SchedulerCore::AttemptLost(EngineSlot slot, const TaskId& id) {
  auto it = tasks_.find(id);
  if (it == tasks_.end() || it->second.state != State::kRunning || it->second.slot != slot) return;
  // The engine neither holds it nor sent its reply again (it sends the
  // replies it keeps before it says what it holds): the dispatch died with
  // the old scheduler, the task never ran. It waits again, no retry spent.
  Release(it->second);
  Return(it->second, slot);
  Pump();
}

void SchedulerCore::EngineRemoved(EngineSlot slot) {
  if (slot >= engines_.size() || !engines_[slot].alive) return;
  Engine& e = engines_[slot];
  LeaveScheme(slot);
  e.alive = false;
  slot_of_id_.erase(e.id);
  std::vector<TaskId> running = std::move(e.running);
  e.running.clear();
  e.load = 0;
  std::fill(e.booked.begin(), e.booked.end(), 0);
  ahead_blocked_.erase(slot);
  for (const TaskId& id : running) {
    Task& task = tasks_.at(id);
    task.state = State::kWaiting;
    task.slot = kNoSlot;
    --running_;
    if (task.ahead && !Met(task)) {  // it could not have started
      Return(task, slot);
      continue;
    }
    AttemptFailed(task, slot, ErrorType::kEngineError,
                  "engine " + std::to_string(e.id) + " was lost while running task " + id.ToHex() +
                      " (attempt " + std::to_string(task.attempt) + ")",
                  /*from_reply=*/false);
  }
  if (auto it = located_on_.find(slot); it != located_on_.end()) {
    std::vector<TaskId> located = std::move(it->second);
    located_on_.erase(it);
    for (const TaskId& id : located) {
      auto t = tasks_.find(id);
      if (t == tasks_.end() || t->second.state != State::kReady) continue;
      Task& task = t->second;
      const bool any_alive = std::any_of(task.location.begin(), task.location.end(),
                                         [&](EngineSlot s) { return engines_[s].alive; });
      if (!any_alive) {
        Fail(task, ErrorType::kImpossibleDependency,
             "task " + id.ToHex() + ": engine " + std::to_string(e.id) +
                 ", where its follow dependencies ran, is gone");
      }
    }
  }
  Pump();
}

}  // namespace ztask::scheduler
