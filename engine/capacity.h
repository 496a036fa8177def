// What an engine can hold at once (taskengine --slots, --resource) and
// which of it each running task holds: its slots, and the indices of the
// resource units it was given (gpus 1 and 3). No I/O.
//
// Thread safety: owned by the engine core (engine/engine_core.h).
#ifndef ZTASK_ENGINE_CAPACITY_H_
#define ZTASK_ENGINE_CAPACITY_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "protocol/messages.h"

namespace ztask::engine {

// What one task holds while it runs.
struct Grant {
  int32_t slots = 1;
  std::map<std::string, std::vector<int64_t>> units;  // indices, by resource

  // What the task's command sees: ZTASK_SLOTS, ZTASK_RESOURCE_<NAME> (the
  // indices, comma-separated) and, for gpus, CUDA_VISIBLE_DEVICES.
  std::map<std::string, std::string> Environment() const;
};

class Capacity {
 public:
  // REQUIRES: slots >= 1; counts as protocol::AmountsError accepts.
  Capacity(int32_t slots, const protocol::ResourceMap& resources);

  // Why this engine could never run a task asking `slots` and `resources`
  // (it has fewer), or "".
  std::string NeverFits(int32_t slots, const protocol::ResourceMap& resources) const;
  // Whether all of it is free now.
  bool FitsNow(int32_t slots, const protocol::ResourceMap& resources) const;
  // Takes it: the lowest free indices of each resource.
  // REQUIRES: FitsNow(slots, resources).
  Grant Take(int32_t slots, const protocol::ResourceMap& resources);
  void Give(const Grant& grant);

  int32_t slots() const { return slots_; }
  int32_t free_slots() const { return free_slots_; }
  const protocol::ResourceMap& resources() const { return resources_; }

 private:
  int32_t slots_;
  protocol::ResourceMap resources_;
  int32_t free_slots_;
  std::map<std::string, std::set<int64_t>> free_units_;
};

}  // namespace ztask::engine

#endif  // ZTASK_ENGINE_CAPACITY_H_
