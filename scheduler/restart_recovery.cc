// A restarted scheduler taking over what was in flight (restart_recovery.h).
#include "scheduler/restart_recovery.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/clock.h"

namespace ztask::scheduler {

void RestartRecovery::Recover(const RecoverySource& source, const std::atomic<bool>& stop) {
  auto state = FetchRecovery(source.context, source.info, signer_,
                             static_cast<int64_t>(source.timeout_s * 1000), stop);
  const int64_t grace_end = base::MonotonicMicros() + base::DurationMicros(source.grace_s);
  const bool found = state.ok() && (!state->tasks.empty() || !state->finished.empty());
  // A restart, even one that found nothing recorded: what clients sent
  // while no scheduler ran can come out of order, a task before a
  // dependency its client sends again (core.h, AwaitUnknownUntil).
  if (found || source.restarted) core_.AwaitUnknownUntil(grace_end);
  if (!state.ok()) return;  // stopped while asking
  if (!found) return;
  RestoreOutcomes(*state);
  for (const protocol::RecoveredTask* t : DependencyOrder(*state)) Restore(*t, source.dispatched);
  // Any engine registered may hold a task dispatched after the hub's latest
  // record of it (hub_link.h records a dispatch only once it has run a
  // while): no engine takes a task until each has said what it holds, or
  // the grace period ended, so that no task is sent to a second engine.
  // A hub that cannot name them (it started too recently, or is of an
  // earlier version): the whole grace period.
  if (state->engines) {
    for (int32_t engine_id : *state->engines) RecoveredSlot(engine_id);
  } else {
    // Asked again once a second: once it can, tasks wait only for the
    // engines it names that are not back yet.
    hold_to_grace_end_ = true;
    if (auto query = ConnectQuery(source.context, source.info); query.ok()) {
      query_.emplace(std::move(*query));
      next_ask_us_ = base::MonotonicMicros() + kAskEnginesEveryUs;
    }
    spdlog::warn(
        "the hub cannot tell yet which engines there are: no task goes to an engine "
        "until it can, or for {} s",
        source.grace_s);
  }
  hold_ = true;
  counters_.recovered = state->tasks.size();
  deadline_us_ = grace_end;
  spdlog::info(
      "restored {} unfinished tasks ({} dispatched after the hub's latest record of them); {} "
      "engines have {} s to come back and say what they hold",
      state->tasks.size(), noted_.size(), recovered_slots_.size(), source.grace_s);
  ReleaseIfAllBack();
  actions_.ApplyAll(ActionApplier::kNoReply);
}

void RestartRecovery::AskEnginesIfDue(int64_t now_us, const std::atomic<bool>& stop) {
  if (!hold_to_grace_end_ || !query_ || now_us < next_ask_us_) return;
  auto engines = FetchEngines(*query_, signer_, kAskEnginesWaitMs, stop);
  next_ask_us_ = base::MonotonicMicros() + kAskEnginesEveryUs;
  if (!engines) return;
  query_.reset();
  hold_to_grace_end_ = false;
  // Engines that had restored tasks and are not named have not registered
  // again within two heartbeat windows: lost, with their tasks, as when
  // the hub says an engine is gone.
  const std::unordered_set<int32_t> named(engines->begin(), engines->end());
  std::vector<int32_t> unnamed;
  for (const auto& [engine_id, slot] : recovered_slots_) {
    if (!named.count(engine_id)) unnamed.push_back(engine_id);
  }
  for (int32_t engine_id : unnamed) Unregistered(engine_id);
  // Those linked already have their slots; the others are waited for
  // until the grace period ends, as when the hub named them at once.
  for (int32_t engine_id : *engines) {
    if (core_.SlotOf(engine_id) == kNoSlot) RecoveredSlot(engine_id);
  }
  spdlog::info("the hub names {} engines; tasks wait for the {} not back yet", engines->size(),
               recovering_slots_.size());
  ReleaseIfAllBack();
  actions_.ApplyAll(ActionApplier::kNoReply);
}

void RestartRecovery::RestoreOutcomes(const RecoveredState& state) {
  // Engines where the outcomes restored tasks depend on ran get slots (a
  // `follow` needs them); other outcomes keep the engine only if it has one.
  std::unordered_set<TaskId, TaskIdHash> needed;
  for (const auto& t : state.tasks) {
    if (t.request.size() < 2) continue;
    auto meta = protocol::DecodeBody<protocol::RoutingMeta>(t.request[1]);
    if (!meta.ok()) continue;
    needed.insert(meta->after.ids.begin(), meta->after.ids.end());
    needed.insert(meta->follow.ids.begin(), meta->follow.ids.end());
  }
  for (const auto& f : state.finished) {
    if (needed.count(f.id)) RecoveredSlot(f.engine_id);
  }
  for (const auto& f : state.finished) {
    core_.RestoreFinished(f.id, f.ok, f.engine_id.value_or(-1));
  }
}

EngineSlot RestartRecovery::RecoveredSlot(std::optional<int32_t> engine_id) {
  if (!engine_id) return kNoSlot;
  auto [it, added] = recovered_slots_.try_emplace(*engine_id, kNoSlot);
  if (added) {
    it->second = core_.EngineAdded(*engine_id, /*accepting=*/false);
    recovering_slots_.insert(it->second);
  }
  return it->second;
}

void RestartRecovery::Restore(const protocol::RecoveredTask& t, const DispatchNotes& dispatched) {
  // The request as the client sent it, signed again (the scheduler holds
  // the cluster's key): header, no parent, metadata, content, buffers.
  if (t.request.size() < 3) return;
  auto meta = protocol::DecodeBody<protocol::RoutingMeta>(t.request[1]);
  if (!meta.ok()) {
    spdlog::error("task {} has a recorded request that does not decode: {}", t.id.ToHex(),
                  meta.status().message());
    return;
  }
  protocol::Frames frames;
  frames.push_back(protocol::Frame(t.client));
  frames.push_back(protocol::Frame(protocol::kProtocolSignature));
  frames.emplace_back();
  frames.push_back(protocol::Frame(t.request[0]));
  frames.push_back(protocol::Frame(protocol::EncodeParent(std::nullopt)));
  for (size_t i = 1; i < t.request.size(); ++i) frames.push_back(protocol::Frame(t.request[i]));
  protocol::SignFrames(signer_, frames, 1);
  if (!requests_.Keep(t.id, protocol::Views(frames))) return;
  Submission submission = ToSubmission(t.id, *meta);
  // Dispatched again (or first) after the hub's latest record of it: it
  // runs, or ran, that attempt there, as far as anyone can know.
  const auto note = dispatched.find(t.id);
  const bool later = note != dispatched.end() && note->second.attempt > t.attempts;
  if (later) {
    submission.attempts = note->second.attempt;
    submission.running_on = RecoveredSlot(note->second.engine_id);
  } else {
    submission.attempts = t.attempts;
    if (t.state == TaskState::kRunning) submission.running_on = RecoveredSlot(t.engine_id);
  }
  if (!core_.Submit(submission)) {
    requests_.Forget(t.id, *requests_.Find(t.id));
  } else if (later) {
    noted_.push_back({t.id, submission.running_on, note->second.engine_id, note->second.attempt});
  }
}

std::optional<EngineSlot> RestartRecovery::Link(int32_t engine_id) {
  auto r = recovered_slots_.find(engine_id);
  if (r == recovered_slots_.end()) return std::nullopt;
  const EngineSlot slot = r->second;
  recovered_slots_.erase(r);
  return slot;
}

bool RestartRecovery::Expects(int32_t engine_id) {
  if (hold_to_grace_end_ && engine_id >= 0) RecoveredSlot(engine_id);
  return HasTasksOf(engine_id);
}

void RestartRecovery::EngineBack(EngineSlot slot, const std::vector<TaskId>& held,
                                 const std::string& uuid) {
  const std::unordered_set<TaskId, TaskIdHash> holds(held.begin(), held.end());
  for (const TaskId& id : core_.RunningOn(slot)) {
    if (!holds.count(id)) core_.AttemptLost(slot, id);
  }
  for (const TaskId& id : held) {
    if (!core_.Knows(id)) continue;
    const int32_t attempt = core_.AttemptOf(id) + 1;
    // Noted and recorded as any dispatch: known only from this engine, it
    // would run again under this attempt were the scheduler and the engine
    // to die now.
    if (core_.Adopt(slot, id, attempt))
      noted_.push_back({id, slot, core_.EngineIdOf(slot), attempt});
  }
  recovering_slots_.erase(slot);
  AcceptWhenAllBack(slot);
  spdlog::info("engine {} is back, holding {} tasks", uuid.substr(0, 8), held.size());
  ReleaseIfAllBack();
}

void RestartRecovery::AcceptWhenAllBack(EngineSlot slot) {
  if (hold_) {
    back_.push_back(slot);
  } else {
    core_.EngineAccepting(slot);
  }
}

void RestartRecovery::Forget(EngineSlot slot) {
  recovering_slots_.erase(slot);
  std::erase(back_, slot);
  ReleaseIfAllBack();
}

void RestartRecovery::Unregistered(int32_t engine_id) {
  auto r = recovered_slots_.find(engine_id);
  if (r == recovered_slots_.end()) return;
  // Its tasks are lost with it, as at the end of the grace period.
  spdlog::info("engine {} is gone before it came back after the restart", engine_id);
  const EngineSlot slot = r->second;
  recovered_slots_.erase(r);
  recovering_slots_.erase(slot);
  core_.EngineRemoved(slot);
  ReleaseIfAllBack();
}

void RestartRecovery::ReleaseIfAllBack() {
  if (hold_ && !hold_to_grace_end_ && recovered_slots_.empty() && recovering_slots_.empty()) {
    Release();
  }
}

void RestartRecovery::Release() {
  hold_ = false;
  for (EngineSlot slot : back_) core_.EngineAccepting(slot);
  back_.clear();
}

bool RestartRecovery::KeepEarly(Msg reply) {
  if (!waiting() || early_replies_.size() >= kMaxEarlyReplies) return false;
  early_replies_.emplace_back(reply.begin(), reply.end());
  return true;
}

std::vector<std::vector<std::string>> RestartRecovery::TakeEarlyReplies() {
  std::vector<std::vector<std::string>> early;
  early.swap(early_replies_);
  return early;
}

void RestartRecovery::EndGraceIfDue(int64_t now_us) {
  if (!waiting() || now_us < deadline_us_) return;
  for (const auto& [engine_id, slot] : recovered_slots_) {
    spdlog::warn("engine {} did not come back after the restart: its tasks are lost with it",
                 engine_id);
    recovering_slots_.erase(slot);
    core_.EngineRemoved(slot);
  }
  recovered_slots_.clear();
  // Engines linked and still silent take tasks once they say what they
  // hold (EngineBack), like the others now.
  hold_to_grace_end_ = false;
  query_.reset();
  if (hold_) Release();
  if (!early_replies_.empty()) {
    counters_.unknown_engines += early_replies_.size();
    spdlog::warn("dropped {} replies from engines that never registered", early_replies_.size());
    early_replies_.clear();
  }
  actions_.ApplyAll(ActionApplier::kNoReply);
}

}  // namespace ztask::scheduler
