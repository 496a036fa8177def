// What an engine can hold, and who holds it (engine/capacity.h).
#include "engine/capacity.h"

#include <cassert>

#include "protocol/resources.h"

namespace ztask::engine {

std::map<std::string, std::string> Grant::Environment() const {
  std::map<std::string, std::string> env;
  env["ZTASK_SLOTS"] = std::to_string(slots);
  for (const auto& [name, indices] : units) {
    std::string list;
    for (int64_t i : indices) list += (list.empty() ? "" : ",") + std::to_string(i);
    env[protocol::ResourceEnvName(name)] = list;
    if (name == "gpus") env["CUDA_VISIBLE_DEVICES"] = list;
  }
  return env;
}

Capacity::Capacity(int32_t slots, const protocol::ResourceMap& resources)
    : slots_(slots), resources_(resources), free_slots_(slots) {
  for (const auto& [name, units] : resources_) {
    std::set<int64_t>& free = free_units_[name];
    for (int64_t i = 0; i < units; ++i) free.insert(free.end(), i);
  }
}

std::string Capacity::NeverFits(int32_t slots, const protocol::ResourceMap& resources) const {
  if (slots > slots_) {
    return "needs " + std::to_string(slots) + " slots, this engine has " + std::to_string(slots_);
  }
  for (const auto& [name, units] : resources) {
    auto it = resources_.find(name);
    const int64_t has = it == resources_.end() ? 0 : it->second;
    if (units > has) {
      return "needs " + name + "=" + std::to_string(units) + ", this engine has " +
             (has == 0 ? "no " + name : std::to_string(has));
    }
  }
  return "";
}

bool Capacity::FitsNow(int32_t slots, const protocol::ResourceMap& resources) const {
  if (slots > free_slots_) return false;
  for (const auto& [name, units] : resources) {
    if (units <= 0) continue;
    auto it = free_units_.find(name);
    if (it == free_units_.end() || static_cast<int64_t>(it->second.size()) < units) return false;
  }
  return true;
}

Grant Capacity::Take(int32_t slots, const protocol::ResourceMap& resources) {
  assert(FitsNow(slots, resources));
  Grant grant;
  grant.slots = slots;
  free_slots_ -= slots;
  for (const auto& [name, units] : resources) {
    if (units <= 0) continue;
    std::set<int64_t>& free = free_units_[name];
    std::vector<int64_t>& taken = grant.units[name];
    for (int64_t n = 0; n < units; ++n) {
      taken.push_back(*free.begin());
      free.erase(free.begin());
    }
  }
  return grant;
}

void Capacity::Give(const Grant& grant) {
  free_slots_ += grant.slots;
  for (const auto& [name, indices] : grant.units) {
    free_units_[name].insert(indices.begin(), indices.end());
  }
}

}  // namespace ztask::engine
