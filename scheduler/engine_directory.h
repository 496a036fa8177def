// EngineDirectory: what the hub and each engine itself have told the
// scheduler's loop of the engines (by the uuid engines speak with), and
// which uuid each of the core's engine slots stands for.
//
// It must not decide: whether an engine takes tasks is the engine port's
// (engine_port.h, Activate), what it holds is the core's.
//
// Thread safety: owned by the scheduler's loop thread.
#ifndef ZTASK_SCHEDULER_ENGINE_DIRECTORY_H_
#define ZTASK_SCHEDULER_ENGINE_DIRECTORY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/string_hash.h"
#include "scheduler/core.h"

namespace ztask::scheduler {

// What the hub and the engine itself have told us of one engine.
struct EngineEntry {
  int32_t id = -1;
  bool registered = false;  // the hub says so
  bool ready = false;       // its DEALER has reached us
  bool draining = false;    // the hub said so, perhaps before it could take tasks
  EngineSlot slot = kNoSlot;
  Amounts capacity;  // as its engine_ready said
};

class EngineDirectory {
 public:
  using Entries =
      std::unordered_map<std::string, EngineEntry, protocol::StringHash, std::equal_to<>>;

  // The entry of `uuid`, made empty when there is none.
  EngineEntry& operator[](const std::string& uuid) { return entries_[uuid]; }
  Entries::iterator find(std::string_view uuid) { return entries_.find(uuid); }
  Entries::iterator end() { return entries_.end(); }
  void erase(Entries::iterator it) { entries_.erase(it); }

  // `slot` stands for the engine `uuid` from now on.
  void Link(EngineSlot slot, const std::string& uuid) {
    if (uuid_of_slot_.size() <= slot) uuid_of_slot_.resize(slot + 1);
    uuid_of_slot_[slot] = uuid;
  }
  // REQUIRES: `slot` was linked.
  const std::string& UuidOf(EngineSlot slot) const { return uuid_of_slot_[slot]; }

 private:
  Entries entries_;
  std::vector<std::string> uuid_of_slot_;
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_ENGINE_DIRECTORY_H_
