// The scheduler's side of engines (ready, replies, reconnections), of the
// hub's notices and acknowledgements, and the recovery of a restarted
// scheduler (docs/reliability.md).
#include <spdlog/spdlog.h>

#include "base/clock.h"
#include "base/reactor.h"
#include "scheduler/recovery.h"
#include "scheduler/server_impl.h"

namespace ztask::scheduler {
namespace {

using protocol::Frames;
using protocol::MsgType;
using protocol::View;

}  // namespace

// Registered but not connected: treat it as lost, its tasks go elsewhere.
void SchedulerServer::Impl::EngineUnreachable(const std::string& uuid) {
  auto it = engines_.find(uuid);
  if (it == engines_.end() || it->second.slot == kNoSlot) return;
  spdlog::warn("engine {} is unreachable; removing it", it->second.id);
  const EngineSlot slot = it->second.slot;
  it->second.slot = kNoSlot;
  it->second.ready = false;
  recovering_slots_.erase(slot);
  core_.EngineRemoved(slot);
  DrainActions();
}

void SchedulerServer::Impl::OnEngineMessage(Frames& frames) {
  std::vector<std::string_view> views;
  auto header = OpenFromPeer(frames, &views, &engine_guard_, engine_routes_);
  const std::string_view peer = frames.empty() ? "" : View(frames[0]);
  if (!header.ok()) return Drop(peer, header.status());
  if (header->type == MsgType::kEngineReady) {
    auto ready = protocol::DecodeBody<protocol::EngineReady>(views[protocol::kFrameContent]);
    if (!ready.ok()) return Drop(peer, "engine_ready: " + ready.status().message());
    return OnEngineReady(std::string(peer), *ready);
  }
  if (header->type == MsgType::kTaskBatch) {
    return ForEachInBatch(*header, views, frames, MsgType::kTaskReply,
                          [&](const protocol::Header&, Msg reply) { OnTaskReply(reply); });
  }
  if (header->type != MsgType::kTaskReply) {
    return Drop(peer, "unexpected " + std::string(protocol::MsgTypeName(header->type)) +
                          " on the engine socket");
  }
  OnTaskReply(protocol::Views(frames));
}

// An engine's DEALER reached us: at its start, or again after its
// connection broke (then it says which tasks it holds).
void SchedulerServer::Impl::OnEngineReady(const std::string& uuid,
                                          const protocol::EngineReady& ready) {
  EngineEntry& entry = engines_[uuid];
  entry.ready = true;
  if (std::string e = protocol::AmountsError(ready.slots, ready.resources, 1); !e.empty()) {
    spdlog::warn("engine {} says it has {}; it is taken as one slot and no resources",
                 ready.engine_id, e);
    entry.capacity = {};
  } else {
    entry.capacity = ToAmounts(ready.slots, ready.resources);
  }

  // After our restart, the engine's word links it to the tasks the hub
  // recorded on its id, before the hub's notice comes.
  if (!entry.registered && recovered_slots_.count(ready.engine_id)) {
    entry.id = ready.engine_id;
    entry.registered = true;
  }
  Activate(uuid, entry);
  // An engine linked already (restored after our restart, or connected
  // again) says now what it has.
  if (entry.slot != kNoSlot) core_.SetCapacity(entry.slot, entry.capacity);
  // A fresh engine process (no list) holds nothing of what its id had.
  if (entry.slot != kNoSlot && recovering_slots_.count(entry.slot)) {
    Reconcile(entry.slot, ready.held.value_or(std::vector<TaskId>{}));
  }
  DrainActions();
}

// A restored engine says what it holds: tasks restored as running there
// that it does not hold were lost with its old connection, and tasks it
// holds that the restored state has waiting were dispatched there after
// the hub's last record.
void SchedulerServer::Impl::Reconcile(EngineSlot slot, const std::vector<TaskId>& held) {
  const std::unordered_set<TaskId, TaskIdHash> holds(held.begin(), held.end());
  for (const TaskId& id : core_.RunningOn(slot)) {
    if (!holds.count(id)) core_.AttemptLost(slot, id);
  }
  for (const TaskId& id : held) {
    if (core_.Knows(id)) core_.Adopt(slot, id, core_.AttemptOf(id) + 1);
  }
  recovering_slots_.erase(slot);
  core_.EngineAccepting(slot);
  spdlog::info("engine {} is back, holding {} tasks", uuid_of_slot_[slot].substr(0, 8),
               held.size());
}

// Why an engine cannot run a task: its reply's error_message, bounded.
std::string SchedulerServer::Impl::UnmetReason(Msg reply) {
  auto result = protocol::DecodeBody<protocol::TaskResult>(reply[protocol::kFrameContent]);
  std::string why = result.ok() ? result->error_message : "";
  if (why.empty()) why = "its dependencies are unmet there";
  if (why.size() > 500) why.resize(500);
  return why;
}

// `frames` is verified: the engine's routing id, then the reply.
void SchedulerServer::Impl::OnTaskReply(Msg msg) {
  ++tasks_seen_;
  const std::string_view peer = msg[0];
  auto entry = engines_.find(std::string(peer));
  if (entry == engines_.end() || entry->second.slot == kNoSlot) {
    if (!recovered_slots_.empty() && early_replies_.size() < kMaxEarlyReplies) {
      // After a restart, an engine may answer before it is linked again.
      early_replies_.emplace_back(msg.begin(), msg.end());
      return;
    }
    ++counters_.unknown_engines;
    return Drop(peer, "task_reply from an engine that is not registered");
  }
  const Msg views = msg.subspan(1);
  auto parent = protocol::DecodeParent(views[protocol::kFrameParent]);
  if (!parent.ok() || !*parent) return Drop(peer, "task_reply without a parent header");
  auto meta = protocol::DecodeBody<protocol::ReplyMeta>(views[protocol::kFrameMeta]);
  if (!meta.ok()) return Drop(peer, "task_reply metadata: " + meta.status().message());
  const EngineSlot slot = entry->second.slot;
  const TaskId& id = (*parent)->id;
  if (recovering_slots_.count(slot)) core_.Adopt(slot, id, meta->attempt);
  // An engine sends its latest replies again when it reconnects: one of
  // an earlier attempt is late, like a reply from a lost engine.
  const bool earlier = meta->attempt > 0 && meta->attempt < core_.AttemptOf(id);
  auto finish = [&] {
    if (meta->not_run) return core_.TaskNotRun(slot, id);
    if (meta->unmet.value_or(false)) return core_.TaskUnmet(slot, id, UnmetReason(views));
    return core_.TaskFinished(slot, id, meta->ok, meta->error_type,
                              !meta->no_retry.value_or(false));
  };
  if (earlier || finish() == SchedulerCore::Finish::kLate) {
    ++counters_.late_replies;
    spdlog::debug("ignored a late reply for task {}", id.ToHex());
  }
  DrainActions(msg);
}

// Replies kept while their engines were not linked yet.
void SchedulerServer::Impl::ReplayEarlyReplies() {
  std::vector<std::vector<std::string>> early;
  early.swap(early_replies_);
  for (const std::vector<std::string>& kept : early) {
    const std::vector<std::string_view> msg(kept.begin(), kept.end());
    OnTaskReply(msg);
  }
}

void SchedulerServer::Impl::OnMonitorReply(Frames& frames) {
  std::vector<std::string_view> views;
  auto header = Open(frames, 0, &views, nullptr);
  if (!header.ok()) return Drop("hub-monitor", header.status());
  if (header->type == MsgType::kResultReply) return OnLookupReply(views);
  if (header->type != MsgType::kMonitorAck) {
    return Drop("hub-monitor", "unexpected " + std::string(protocol::MsgTypeName(header->type)));
  }
  auto ack = protocol::DecodeBody<protocol::MonitorAck>(views[protocol::kFrameContent]);
  if (!ack.ok()) return Drop("hub-monitor", "monitor_ack: " + ack.status().message());
  monitor_link_.Acknowledged(ack->seqs, SteadyClock::Now());
}

void SchedulerServer::Impl::SendLookups() {
  const int64_t now = SteadyClock::Now();
  std::vector<TaskId> asked = core_.TakeLookups();
  for (size_t i = 0; i < asked.size(); i += kIdsPerLookup) {
    const size_t end = std::min(asked.size(), i + kIdsPerLookup);
    lookups_asked_[TaskId::Random()].ids.assign(asked.begin() + static_cast<std::ptrdiff_t>(i),
                                                asked.begin() + static_cast<std::ptrdiff_t>(end));
    counters_.lookups += end - i;
  }
  bool flushed = false;
  for (auto& [request_id, lookup] : lookups_asked_) {
    if (lookup.sent_us != 0 && now - lookup.sent_us < kLookupAgainUs) continue;
    if (!flushed) {
      // What the hub records of these tasks goes before the question.
      monitor_link_.Flush(now, /*now=*/true);
      flushed = true;
    }
    const protocol::Header header{request_id, MsgType::kResultRequest, lookup_session_,
                                  base::WallMicros()};
    const Status sent = protocol::SendEncoded(
        monitor_, {},
        protocol::EncodeMessage(signer_, header, std::nullopt, protocol::Empty{},
                                protocol::TaskIdList{lookup.ids, std::nullopt, std::nullopt}));
    if (!sent.ok()) return;  // the hub is away: asked again at the next turn
    if (lookup.sent_us != 0) {
      spdlog::info("asking the hub again about {} dependencies it has not answered for",
                   lookup.ids.size());
    }
    lookup.sent_us = now;
  }
}

void SchedulerServer::Impl::OnLookupReply(const std::vector<std::string_view>& views) {
  auto parent = protocol::DecodeParent(views[protocol::kFrameParent]);
  if (!parent.ok() || !*parent) return Drop("hub-monitor", "result_reply without a request");
  auto reply = protocol::DecodeBody<protocol::ResultReply>(views[protocol::kFrameContent]);
  if (!reply.ok()) return Drop("hub-monitor", "result_reply: " + reply.status().message());
  auto asked = lookups_asked_.find((*parent)->id);
  if (asked == lookups_asked_.end()) return;  // answered already (asked twice)
  lookups_asked_.erase(asked);
  for (const protocol::TaskRecord& r : reply->records) {
    if (IsFinal(r.state)) {
      core_.LookedUp(r.id, Lookup::kFinished, r.state == TaskState::kOk, r.engine_id.value_or(-1));
    } else {
      core_.LookedUp(r.id, Lookup::kUnfinished);
    }
  }
  for (const TaskId& id : reply->unknown) core_.LookedUp(id, Lookup::kUnknown);
}

void SchedulerServer::Impl::OnNotifierMessage(Frames& frames) {
  std::vector<std::string_view> views;
  auto header = Open(frames, 0, &views, nullptr);
  if (!header.ok()) return Drop("hub-notifier", header.status());
  if (header->type == MsgType::kEngineRegistered) {
    auto info = protocol::DecodeBody<protocol::EngineInfo>(views[protocol::kFrameContent]);
    if (!info.ok()) return Drop("hub-notifier", "engine_registered: " + info.status().message());
    EngineEntry& entry = engines_[info->uuid];
    if (entry.registered && entry.id == info->id) return;  // heard it already
    if (entry.slot != kNoSlot) {
      core_.EngineRemoved(entry.slot);
      entry.slot = kNoSlot;
    }
    entry.id = info->id;
    entry.registered = true;
    Activate(info->uuid, entry);
  } else if (header->type == MsgType::kEngineDraining) {
    auto ref = protocol::DecodeBody<protocol::EngineRef>(views[protocol::kFrameContent]);
    if (!ref.ok()) return Drop("hub-notifier", "engine_draining: " + ref.status().message());
    // Kept for an engine not taking tasks yet (its notice or its ready
    // still to come): once it can, it drains instead.
    EngineEntry& entry = engines_[ref->uuid];
    if (!entry.draining) spdlog::info("engine {} is draining", ref->engine_id);
    entry.draining = true;
    if (entry.slot != kNoSlot) core_.EngineDraining(entry.slot);
  } else if (header->type == MsgType::kEngineUnregistered) {
    auto ref = protocol::DecodeBody<protocol::EngineRef>(views[protocol::kFrameContent]);
    if (!ref.ok()) return Drop("hub-notifier", "engine_unregistered: " + ref.status().message());
    auto it = engines_.find(ref->uuid);
    if (it == engines_.end()) return;
    if (it->second.slot != kNoSlot) {
      spdlog::info("engine {} is gone", it->second.id);
      core_.EngineRemoved(it->second.slot);
    }
    engines_.erase(it);
  } else {
    return Drop("hub-notifier", "unexpected " + std::string(protocol::MsgTypeName(header->type)));
  }
  DrainActions();
}

// An engine takes tasks once the hub registered it and it reached us.
void SchedulerServer::Impl::Activate(const std::string& uuid, EngineEntry& entry) {
  if (!entry.registered || entry.slot != kNoSlot) return;
  if (auto r = recovered_slots_.find(entry.id); r != recovered_slots_.end()) {
    // After our restart: the engine that holds the tasks restored on its id.
    entry.slot = r->second;
    recovered_slots_.erase(r);
    if (uuid_of_slot_.size() <= entry.slot) uuid_of_slot_.resize(entry.slot + 1);
    uuid_of_slot_[entry.slot] = uuid;
    spdlog::info("engine {} is linked to the tasks restored on it", entry.id);
    ReplayEarlyReplies();
    return;
  }
  if (!entry.ready) return;
  // Told to drain before it could take tasks: added taking none, and
  // retired idle.
  entry.slot = core_.EngineAdded(entry.id, /*accepting=*/!entry.draining, entry.capacity);
  if (uuid_of_slot_.size() <= entry.slot) uuid_of_slot_.resize(entry.slot + 1);
  uuid_of_slot_[entry.slot] = uuid;
  if (entry.draining) {
    core_.EngineDraining(entry.slot);
    return;
  }
  spdlog::info("engine {} can take tasks", entry.id);
}

// A drained engine may go: tell it, and forget it (it unregisters).
void SchedulerServer::Impl::Retire(const Action& a) {
  const std::string uuid = uuid_of_slot_[a.slot];
  // On the connection the engine proved; none: it is gone already.
  const std::string* route = engine_routes_.RouteOf(uuid);
  if (!route) return;
  const std::string_view prefix[] = {*route};
  const protocol::Header header = builder_.NewHeader(MsgType::kEngineRetire);
  (void)protocol::SendEncoded(
      engine_, prefix,
      protocol::EncodeMessage(signer_, header, std::nullopt, protocol::Empty{},
                              protocol::EngineRef{a.engine_id, uuid}));
  spdlog::info("engine {} is drained and retires", a.engine_id);
}

// Sends the hub what an earlier scheduler recorded in the journal and the
// hub never acknowledged, and waits until it has (before asking it what
// was in flight, so that its answer is whole).
void SchedulerServer::Impl::ReplayJournal() {
  std::vector<Frames> found = journal_->TakeFound();
  if (found.empty()) return;
  for (Frames& batch : found) monitor_link_.Adopt(std::move(batch));
  spdlog::info(
      "sending the hub {} monitor batches an earlier scheduler left in its "
      "journal",
      found.size());
  const int64_t deadline =
      SteadyClock::Now() + static_cast<int64_t>(options_.recover_timeout_s * 1e6);
  while (monitor_link_.unacknowledged() > 0 && SteadyClock::Now() < deadline && !stop_.load()) {
    monitor_link_.Flush(SteadyClock::Now());
    base::WaitReady(monitor_, ZMQ_POLLIN, std::chrono::milliseconds(100));
    Drain(monitor_, &Impl::OnMonitorReply);
  }
  if (monitor_link_.unacknowledged() > 0) {
    spdlog::error(
        "the hub did not acknowledge the journal's batches within {} s; they "
        "stay "
        "queued",
        options_.recover_timeout_s);
  }
}

// Restores the tasks an earlier scheduler of this cluster left unfinished,
// as the hub recorded them. Engines that ran them get slots that take no
// new task until they are back and say what they hold (Reconcile); those
// not back within the grace period are lost, with their tasks' attempts.
void SchedulerServer::Impl::Recover() {
  auto state = FetchRecovery(context_, info_, signer_,
                             static_cast<int64_t>(options_.recover_timeout_s * 1000), stop_);
  const int64_t grace_end =
      SteadyClock::Now() + static_cast<int64_t>(options_.recover_grace_s * 1e6);
  const bool found = state.ok() && (!state->tasks.empty() || !state->finished.empty());
  // A restart, even one that found nothing recorded: what clients sent
  // while no scheduler ran can come out of order, a task before a
  // dependency its client sends again (core.h, AwaitUnknownUntil).
  if (found || (journal_ && journal_->existed())) core_.AwaitUnknownUntil(grace_end);
  if (!state.ok()) return;  // stopped while asking
  if (!found) return;
  // Engines where the outcomes restored tasks depend on ran get slots (a
  // `follow` needs them); other outcomes keep the engine only if it has one.
  std::unordered_set<TaskId, TaskIdHash> needed;
  for (const auto& t : state->tasks) {
    if (t.request.size() < 2) continue;
    auto meta = protocol::DecodeBody<protocol::RoutingMeta>(t.request[1]);
    if (!meta.ok()) continue;
    needed.insert(meta->after.ids.begin(), meta->after.ids.end());
    needed.insert(meta->follow.ids.begin(), meta->follow.ids.end());
  }
  for (const auto& f : state->finished) {
    if (needed.count(f.id)) RecoveredSlot(f.engine_id);
  }
  for (const auto& f : state->finished) {
    core_.RestoreFinished(f.id, f.ok, f.engine_id.value_or(-1));
  }
  for (const protocol::RecoveredTask* t : DependencyOrder(*state)) Restore(*t);
  counters_.recovered = state->tasks.size();
  recovery_deadline_us_ = grace_end;
  spdlog::info(
      "restored {} unfinished tasks; {} engines had some and have {} s to come "
      "back",
      state->tasks.size(), recovered_slots_.size(), options_.recover_grace_s);
  DrainActions();
}

// The slot of an engine id the restored state names: one that holds its
// tasks and takes none until the engine is back.
EngineSlot SchedulerServer::Impl::RecoveredSlot(std::optional<int32_t> engine_id) {
  if (!engine_id) return kNoSlot;
  auto [it, added] = recovered_slots_.try_emplace(*engine_id, kNoSlot);
  if (added) {
    it->second = core_.EngineAdded(*engine_id, /*accepting=*/false);
    recovering_slots_.insert(it->second);
  }
  return it->second;
}

void SchedulerServer::Impl::Restore(const protocol::RecoveredTask& t) {
  // The request as the client sent it, signed again (the scheduler holds
  // the cluster's key): header, no parent, metadata, content, buffers.
  if (t.request.size() < 3) return;
  auto meta = protocol::DecodeBody<protocol::RoutingMeta>(t.request[1]);
  if (!meta.ok()) {
    spdlog::error("task {} has a recorded request that does not decode: {}", t.id.ToHex(),
                  meta.status().message());
    return;
  }
  Frames frames;
  frames.push_back(protocol::Frame(t.client));
  frames.push_back(protocol::Frame(protocol::kProtocolSignature));
  frames.emplace_back();
  frames.push_back(protocol::Frame(t.request[0]));
  frames.push_back(protocol::Frame(protocol::EncodeParent(std::nullopt)));
  for (size_t i = 1; i < t.request.size(); ++i) frames.push_back(protocol::Frame(t.request[i]));
  protocol::SignFrames(signer_, frames, 1);
  auto [pending, inserted] = pending_.try_emplace(t.id);
  if (!inserted) return;
  pending->request = PackedRequest(protocol::Views(frames));
  ++queued_per_client_[t.client];
  Submission submission = ToSubmission(t.id, *meta);
  submission.attempts = t.attempts;
  if (t.state == TaskState::kRunning) submission.running_on = RecoveredSlot(t.engine_id);
  if (!core_.Submit(submission)) Forget(t.id, *pending);
}

// Engines that held restored tasks and did not come back are lost.
void SchedulerServer::Impl::EndRecoveryGrace() {
  if (recovered_slots_.empty() || SteadyClock::Now() < recovery_deadline_us_) return;
  for (const auto& [engine_id, slot] : recovered_slots_) {
    spdlog::warn(
        "engine {} did not come back after the restart: its tasks are lost "
        "with it",
        engine_id);
    recovering_slots_.erase(slot);
    core_.EngineRemoved(slot);
  }
  recovered_slots_.clear();
  if (!early_replies_.empty()) {
    counters_.unknown_engines += early_replies_.size();
    spdlog::warn("dropped {} replies from engines that never registered", early_replies_.size());
    early_replies_.clear();
  }
  DrainActions();
}

}  // namespace ztask::scheduler
