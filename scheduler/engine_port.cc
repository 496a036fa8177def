// The engine ROUTER, inbound: ready, replies, reconnections (engine_port.h).
#include "scheduler/engine_port.h"

#include <spdlog/spdlog.h>

namespace ztask::scheduler {
namespace {

using protocol::MsgType;
using protocol::View;

}  // namespace

size_t EnginePort::OnMessage(protocol::Frames& frames) {
  std::vector<std::string_view> views;
  auto header = inbound_.OpenFromPeer(frames, &views, &guard_, routes_);
  const std::string_view peer = frames.empty() ? "" : View(frames[0]);
  if (!header.ok()) {
    inbound_.Drop(peer, header.status());
    return 0;
  }
  if (header->type == MsgType::kEngineReady) {
    auto ready = protocol::DecodeBody<protocol::EngineReady>(views[protocol::kFrameContent]);
    if (!ready.ok()) {
      inbound_.Drop(peer, "engine_ready: " + ready.status().message());
      return 0;
    }
    OnEngineReady(std::string(peer), *ready);
    return 0;
  }
  if (header->type == MsgType::kTaskBatch) {
    return inbound_.ForEachInBatch(
        *header, views, frames, MsgType::kTaskReply,
        [&](const protocol::Header&, Msg reply) { OnTaskReply(reply); },
        [&](const protocol::Header&, Msg reply) {
          // The task it answers: its entries are cache misses once many wait.
          auto parent = protocol::DecodeParentId(reply[protocol::kFrameParent]);
          if (!parent.ok() || !*parent) return;
          actions_.Prefetch(**parent);
        });
  }
  if (header->type != MsgType::kTaskReply) {
    inbound_.Drop(peer, "unexpected " + std::string(protocol::MsgTypeName(header->type)) +
                            " on the engine socket");
    return 0;
  }
  OnTaskReply(protocol::Views(frames));
  return 1;
}

void EnginePort::Unreachable(const std::string& uuid) {
  auto it = engines_.find(uuid);
  if (it == engines_.end() || it->second.slot == kNoSlot) return;
  spdlog::warn("engine {} is unreachable; removing it", it->second.id);
  const EngineSlot slot = it->second.slot;
  it->second.slot = kNoSlot;
  it->second.ready = false;
  recovery_.Forget(slot);
  core_.EngineRemoved(slot);
  actions_.ApplyAll(ActionApplier::kNoReply);
}

void EnginePort::Unregistered(int32_t engine_id, EngineSlot slot) {
  if (slot != kNoSlot) {
    recovery_.Forget(slot);
  } else {
    recovery_.Unregistered(engine_id);
  }
}

// An engine's DEALER reached us: at its start, or again after its
// connection broke (then it says which tasks it holds).
void EnginePort::OnEngineReady(const std::string& uuid, const protocol::EngineReady& ready) {
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
  if (!entry.registered && recovery_.Expects(ready.engine_id)) {
    entry.id = ready.engine_id;
    entry.registered = true;
  }
  Activate(uuid, entry);
  // An engine linked already (restored after our restart, or connected
  // again) says now what it has.
  if (entry.slot != kNoSlot) core_.SetCapacity(entry.slot, entry.capacity);
  // A fresh engine process (no list) holds nothing of what its id had.
  if (entry.slot != kNoSlot && recovery_.Recovering(entry.slot)) {
    recovery_.EngineBack(entry.slot, ready.held.value_or(std::vector<TaskId>{}),
                         engines_.UuidOf(entry.slot));
  }
  actions_.ApplyAll(ActionApplier::kNoReply);
}

std::string EnginePort::UnmetReason(Msg reply) {
  auto result = protocol::DecodeBody<protocol::TaskResult>(reply[protocol::kFrameContent]);
  std::string why = result.ok() ? result->error_message : "";
  if (why.empty()) why = "its dependencies are unmet there";
  if (why.size() > 500) why.resize(500);
  return why;
}

void EnginePort::OnTaskReply(Msg msg) {
  const std::string_view peer = msg[0];
  auto entry = engines_.find(peer);
  if (entry == engines_.end() || entry->second.slot == kNoSlot) {
    // After a restart, an engine may answer before it is linked again.
    if (recovery_.KeepEarly(msg)) return;
    ++counters_.unknown_engines;
    return inbound_.Drop(peer, "task_reply from an engine that is not registered");
  }
  const Msg views = msg.subspan(1);
  auto parent = protocol::DecodeParentId(views[protocol::kFrameParent]);
  if (!parent.ok() || !*parent) return inbound_.Drop(peer, "task_reply without a parent header");
  auto meta = protocol::DecodeBody<protocol::ReplyMeta>(views[protocol::kFrameMeta]);
  if (!meta.ok()) return inbound_.Drop(peer, "task_reply metadata: " + meta.status().message());
  const EngineSlot slot = entry->second.slot;
  const TaskId& id = **parent;
  if (recovery_.Recovering(slot)) core_.Adopt(slot, id, meta->attempt);
  // An engine sends its latest replies again when it reconnects: one of
  // an earlier attempt is late, like a reply from a lost engine.
  const bool earlier = meta->attempt > 0 && meta->attempt < core_.AttemptOf(id);
  auto finish = [&] {
    if (meta->not_run) return core_.TaskNotRun(slot, id);
    if (meta->unmet.value_or(false)) return core_.TaskUnmet(slot, id, UnmetReason(views));
    return core_.TaskFinished(slot, id, meta->ok, meta->error_type, !meta->no_retry.value_or(false),
                              meta->run_us.value_or(-1));
  };
  if (earlier || finish() == SchedulerCore::Finish::kLate) {
    ++counters_.late_replies;
    spdlog::debug("ignored a late reply for task {}", id.ToHex());
  }
  actions_.ApplyAll(msg);
}

void EnginePort::ReplayEarlyReplies() {
  for (const std::vector<std::string>& kept : recovery_.TakeEarlyReplies()) {
    const std::vector<std::string_view> msg(kept.begin(), kept.end());
    OnTaskReply(msg);
  }
}

void EnginePort::Activate(const std::string& uuid, EngineEntry& entry) {
  if (!entry.registered || entry.slot != kNoSlot) return;
  if (std::optional<EngineSlot> restored = recovery_.Link(entry.id)) {
    // After our restart: the engine that holds the tasks restored on its id.
    entry.slot = *restored;
    engines_.Link(entry.slot, uuid);
    spdlog::info("engine {} is linked to the tasks restored on it", entry.id);
    ReplayEarlyReplies();
    return;
  }
  if (!entry.ready) return;
  // Told to drain before it could take tasks: added taking none, and
  // retired idle.
  // After our restart, no engine takes a task until those that may hold
  // one have said what they hold (restart_recovery.h).
  const bool hold = recovery_.holding();
  entry.slot = core_.EngineAdded(entry.id, /*accepting=*/!entry.draining && !hold, entry.capacity);
  engines_.Link(entry.slot, uuid);
  if (entry.draining) {
    core_.EngineDraining(entry.slot);
    return;
  }
  if (hold) recovery_.AcceptWhenAllBack(entry.slot);
  spdlog::info("engine {} can take tasks", entry.id);
}

}  // namespace ztask::scheduler
