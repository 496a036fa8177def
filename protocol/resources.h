// Slots and countable resources: what an engine has (taskengine --slots,
// --resource gpus=4) and what a task asks (taskctl submit --slots,
// --resource gpus=1). One set of rules for the command lines, the
// scheduler and the engine.
#ifndef ZTASK_PROTOCOL_RESOURCES_H_
#define ZTASK_PROTOCOL_RESOURCES_H_

#include <cctype>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/messages.h"

namespace ztask::protocol {

inline constexpr int32_t kMaxSlots = 4096;
// Units of one resource an engine has; each is an index the task is given.
inline constexpr int64_t kMaxUnits = 4096;
inline constexpr size_t kMaxResourceNames = 16;
inline constexpr size_t kMaxResourceNameBytes = 32;

// Why `name` cannot name a resource, or "".
inline std::string ResourceNameError(std::string_view name) {
  if (name.empty() || name.size() > kMaxResourceNameBytes) {
    return "a resource name has 1 to " + std::to_string(kMaxResourceNameBytes) + " characters";
  }
  for (char c : name) {
    if (!std::islower(static_cast<unsigned char>(c)) &&
        !std::isdigit(static_cast<unsigned char>(c)) && c != '_') {
      return "resource name '" + std::string(name) +
             "': use lower-case letters, digits and _ (gpus, fpga_cards)";
    }
  }
  if (name == "slots") return "'slots' is not a resource: use --slots";
  return "";
}

// Why a task's or an engine's slots and resources are not valid, or "".
// `units_from` is the least count of a unit (0 for a task: asks none).
inline std::string AmountsError(std::optional<int32_t> slots,
                                const std::optional<ResourceMap>& resources, int64_t units_from) {
  if (slots && (*slots < 1 || *slots > kMaxSlots)) {
    return "slots must be from 1 to " + std::to_string(kMaxSlots) + ", not " +
           std::to_string(*slots);
  }
  if (!resources) return "";
  if (resources->size() > kMaxResourceNames) {
    return "at most " + std::to_string(kMaxResourceNames) + " resource names";
  }
  for (const auto& [name, units] : *resources) {
    if (std::string e = ResourceNameError(name); !e.empty()) return e;
    if (units < units_from || units > kMaxUnits) {
      return "resource " + name + ": the count must be from " + std::to_string(units_from) +
             " to " + std::to_string(kMaxUnits) + ", not " + std::to_string(units);
    }
  }
  return "";
}

// Reads NAME=COUNT (gpus=4) into *resources; false with *error set when
// it is not that, or names a resource already given.
inline bool ParseResource(std::string_view text, int64_t units_from, ResourceMap* resources,
                          std::string* error) {
  const size_t eq = text.find('=');
  const std::string name(text.substr(0, eq == std::string_view::npos ? text.size() : eq));
  if (eq == std::string_view::npos) {
    *error = "'" + std::string(text) + "' is not NAME=COUNT (say gpus=2)";
    return false;
  }
  if (std::string e = ResourceNameError(name); !e.empty()) {
    *error = e;
    return false;
  }
  const std::string_view count = text.substr(eq + 1);
  int64_t units = 0;
  bool digits = !count.empty() && count.size() <= 7;
  for (char c : count) {
    digits = digits && std::isdigit(static_cast<unsigned char>(c));
    if (digits) units = units * 10 + (c - '0');
  }
  if (!digits || units < units_from || units > kMaxUnits) {
    *error = "'" + std::string(text) + "': the count must be a whole number from " +
             std::to_string(units_from) + " to " + std::to_string(kMaxUnits);
    return false;
  }
  if (!resources->emplace(name, units).second) {
    *error = "resource " + name + " is given twice";
    return false;
  }
  return true;
}

// The environment variable that lists a resource's units given to a task:
// gpus -> ZTASK_RESOURCE_GPUS.
inline std::string ResourceEnvName(std::string_view name) {
  std::string out = "ZTASK_RESOURCE_";
  for (char c : name) out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace ztask::protocol

#endif  // ZTASK_PROTOCOL_RESOURCES_H_
