// The hub's notices about engines (hub_notices.h).
#include "scheduler/hub_notices.h"

#include <spdlog/spdlog.h>

namespace ztask::scheduler {
namespace {

using protocol::MsgType;

// The content of a notice of type `name`, or nullopt (dropped, counted).
template <class Body>
std::optional<Body> Decode(Inbound& inbound, const std::vector<std::string_view>& views,
                           const char* name) {
  auto body = protocol::DecodeBody<Body>(views[protocol::kFrameContent]);
  if (body.ok()) return std::move(*body);
  inbound.Drop("hub-notifier", std::string(name) + ": " + body.status().message());
  return std::nullopt;
}

}  // namespace

size_t HubNotices::OnMessage(protocol::Frames& frames) {
  std::vector<std::string_view> views;
  auto header = inbound_.Open(frames, 0, &views, nullptr);
  if (!header.ok()) {
    inbound_.Drop("hub-notifier", header.status());
    return 0;
  }
  if (header->type == MsgType::kEngineRegistered) {
    auto info = Decode<protocol::EngineInfo>(inbound_, views, "engine_registered");
    if (!info || !OnRegistered(*info)) return 0;
  } else if (header->type == MsgType::kEngineDraining) {
    auto ref = Decode<protocol::EngineRef>(inbound_, views, "engine_draining");
    if (!ref) return 0;
    OnDraining(*ref);
  } else if (header->type == MsgType::kEngineUnregistered) {
    auto ref = Decode<protocol::EngineRef>(inbound_, views, "engine_unregistered");
    if (!ref || !OnUnregistered(*ref)) return 0;
  } else {
    inbound_.Drop("hub-notifier", "unexpected " + std::string(protocol::MsgTypeName(header->type)));
    return 0;
  }
  actions_.ApplyAll(ActionApplier::kNoReply);
  return 0;
}

bool HubNotices::OnRegistered(const protocol::EngineInfo& info) {
  EngineEntry& entry = engines_[info.uuid];
  if (entry.registered && entry.id == info.id) return false;  // heard it already
  if (entry.slot != kNoSlot) {
    engine_port_.Unregistered(entry.id, entry.slot);
    core_.EngineRemoved(entry.slot);
    entry.slot = kNoSlot;
  }
  entry.id = info.id;
  entry.registered = true;
  engine_port_.Activate(info.uuid, entry);
  return true;
}

void HubNotices::OnDraining(const protocol::EngineRef& ref) {
  // Kept for an engine not taking tasks yet (its notice or its ready
  // still to come): once it can, it drains instead.
  EngineEntry& entry = engines_[ref.uuid];
  if (!entry.draining) spdlog::info("engine {} is draining", ref.engine_id);
  entry.draining = true;
  if (entry.slot != kNoSlot) core_.EngineDraining(entry.slot);
}

bool HubNotices::OnUnregistered(const protocol::EngineRef& ref) {
  auto it = engines_.find(ref.uuid);
  if (it == engines_.end()) {  // never heard from since our start
    engine_port_.Unregistered(ref.engine_id, kNoSlot);
    return true;
  }
  engine_port_.Unregistered(ref.engine_id, it->second.slot);
  if (it->second.slot != kNoSlot) {
    spdlog::info("engine {} is gone", it->second.id);
    core_.EngineRemoved(it->second.slot);
  }
  engines_.erase(it);
  return true;
}

}  // namespace ztask::scheduler
