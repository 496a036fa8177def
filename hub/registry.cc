#include "hub/registry.h"

#include <algorithm>
#include <set>

#include "protocol/resources.h"

namespace ztask::hub {

EngineRegistry::Registered EngineRegistry::Register(const protocol::RegistrationRequest& request,
                                                    int64_t now_us, int64_t wall_us) {
  if (auto it = by_uuid_.find(request.uuid); it != by_uuid_.end()) {
    alive_[it->second].last_seen_us = now_us;  // the same engine asking again
    return {it->second, std::nullopt};
  }
  Registered result{0, std::nullopt};
  if (auto it = by_name_.find(request.name); it != by_name_.end()) {
    result.id = it->second;
    if (auto old = alive_.find(result.id); old != alive_.end()) {
      result.replaced = protocol::EngineRef{result.id, old->second.info.uuid};
      by_uuid_.erase(old->second.info.uuid);
      alive_.erase(old);
    }
  } else {
    result.id = FreeIdFor(request);
    by_name_[request.name] = result.id;
  }
  EngineRecord& record = alive_[result.id];
  record.info = {result.id,   request.uuid, request.name,     request.host,
                 request.pid, EngineState::kRunning,    wall_us,          request.mpi_rank,
                 std::nullopt, request.slots, request.resources};
  // What no rule allows is not listed (the scheduler takes such an engine
  // as one slot with no resources).
  if (!protocol::AmountsError(request.slots, request.resources, 1).empty()) {
    record.info.slots.reset();
    record.info.resources.reset();
  }
  record.last_seen_us = now_us;
  by_uuid_[request.uuid] = result.id;
  return result;
}

int32_t EngineRegistry::FreeIdFor(const protocol::RegistrationRequest& request) {
  // An engine that had an id (this hub restarted) gets it back when no
  // other engine has taken it since.
  if (request.engine_id && *request.engine_id >= 0 && !alive_.count(*request.engine_id)) {
    const int32_t wanted = *request.engine_id;
    const bool taken = std::any_of(by_name_.begin(), by_name_.end(),
                                   [&](const auto& entry) { return entry.second == wanted; });
    if (!taken) {
      next_id_ = std::max(next_id_, wanted + 1);
      return wanted;
    }
  }
  return next_id_++;
}

bool EngineRegistry::Touch(const std::string& uuid, int64_t now_us) {
  auto it = by_uuid_.find(uuid);
  if (it == by_uuid_.end()) return false;
  alive_[it->second].last_seen_us = now_us;
  return true;
}

std::optional<EngineRecord> EngineRegistry::Unregister(const std::string& uuid) {
  auto it = by_uuid_.find(uuid);
  if (it == by_uuid_.end()) return std::nullopt;
  auto node = alive_.extract(it->second);
  by_uuid_.erase(it);
  return std::move(node.mapped());
}

std::optional<std::string> EngineRegistry::UuidOfName(const std::string& name) const {
  auto id = by_name_.find(name);
  if (id == by_name_.end()) return std::nullopt;
  auto record = alive_.find(id->second);
  if (record == alive_.end()) return std::nullopt;
  return record->second.info.uuid;
}

std::vector<EngineRecord> EngineRegistry::Expire(int64_t now_us, int64_t expiry_us) {
  std::vector<EngineRecord> gone;
  for (auto it = alive_.begin(); it != alive_.end();) {
    if (now_us - it->second.last_seen_us > expiry_us) {
      by_uuid_.erase(it->second.info.uuid);
      gone.push_back(std::move(it->second));
      it = alive_.erase(it);
    } else {
      ++it;
    }
  }
  return gone;
}

void EngineRegistry::SetSupervised(const protocol::EngineStateReport& state) {
  supervised_[state.name] = state;
}

std::vector<protocol::EngineInfo> EngineRegistry::Listing() const {
  std::vector<protocol::EngineInfo> out;
  std::set<std::string> shown;
  for (const auto& [id, record] : alive_) {
    protocol::EngineInfo info = record.info;
    if (auto s = supervised_.find(info.name); s != supervised_.end()) {
      info.restarts = s->second.restarts;
      if (s->second.state == EngineState::kDraining) info.state = EngineState::kDraining;
    }
    shown.insert(info.name);
    out.push_back(std::move(info));
  }
  for (const auto& [name, state] : supervised_) {
    if (shown.count(name) || state.state == EngineState::kRunning) continue;
    protocol::EngineInfo info;
    auto id = by_name_.find(name);
    info.id = id == by_name_.end() ? -1 : id->second;
    info.name = name;
    info.state = state.state;
    info.restarts = state.restarts;
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace ztask::hub
