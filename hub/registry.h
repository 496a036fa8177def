// EngineRegistry: the hub's list of engines, with no I/O. Engines get
// integer ids in registration order; an engine that registers again under a
// name it had before gets its old id back, and so does one that names the id
// it had (its hub restarted), unless another engine took it meanwhile. An engine not heard from within
// the expiry is removed.
//
// Thread safety: owned by one thread.
#ifndef ZTASK_HUB_REGISTRY_H_
#define ZTASK_HUB_REGISTRY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "protocol/messages.h"

namespace ztask::hub {

struct EngineRecord {
  protocol::EngineInfo info;
  int64_t last_seen_us = 0;  // steady clock
};

class EngineRegistry {
 public:
  struct Registered {
    int32_t id;
    // Another live engine held this name (an engine that restarted before it
    // was found dead): it is removed, and the caller tells the scheduler.
    std::optional<protocol::EngineRef> replaced;
  };
  Registered Register(const protocol::RegistrationRequest& request, int64_t now_us,
                      int64_t wall_us);
  // Returns false for an engine not registered.
  bool Touch(const std::string& uuid, int64_t now_us);
  std::optional<EngineRecord> Unregister(const std::string& uuid);
  // The live engine of this name, if any.
  std::optional<std::string> UuidOfName(const std::string& name) const;
  // The id a name has (had), or -1.
  int32_t IdOfName(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? -1 : it->second;
  }
  // Every engine counts as heard from `us` later than it was: the hub
  // could not hear anyone for that long.
  void Postpone(int64_t us) {
    for (auto& [id, record] : alive_) record.last_seen_us += us;
  }
  // Removes and returns every engine silent for longer than `expiry_us`.
  std::vector<EngineRecord> Expire(int64_t now_us, int64_t expiry_us);

  // A supervisor's word on an engine, by name; "running" clears it (the
  // registry itself knows running engines).
  void SetSupervised(const protocol::EngineStateReport& state);
  // Every engine to show: the live ones (with their restart counts) and those
  // a supervisor reports starting, restarting, failed or stopped.
  std::vector<protocol::EngineInfo> Listing() const;

  const std::map<int32_t, EngineRecord>& alive() const { return alive_; }
  size_t size() const { return alive_.size(); }

 private:
  int32_t FreeIdFor(const protocol::RegistrationRequest& request);

  std::map<int32_t, EngineRecord> alive_;              // by id
  std::unordered_map<std::string, int32_t> by_uuid_;   // alive only
  std::unordered_map<std::string, int32_t> by_name_;   // every name ever seen
  std::map<std::string, protocol::EngineStateReport> supervised_;  // by name
  int32_t next_id_ = 0;
};

}  // namespace ztask::hub

#endif  // ZTASK_HUB_REGISTRY_H_
