// Schemes choose which engine runs a task. The core keeps each scheme told
// of the engines that have room for one more task (Insert/Erase around every
// change of load or recency); a scheme keeps whatever index makes its choice
// fast. Adding a scheme is one class here and one line in the registry
// (scheme.cc).
//
// Thread safety: owned by the core's thread.
#ifndef ZTASK_SCHEDULER_SCHEME_H_
#define ZTASK_SCHEDULER_SCHEME_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ztask::scheduler {

// One engine life: a restarted engine gets a new slot. Never reused.
using EngineSlot = uint32_t;
inline constexpr EngineSlot kNoSlot = UINT32_MAX;

struct EngineView {
  EngineSlot slot = kNoSlot;
  uint32_t load = 0;   // tasks outstanding on it
  int64_t stamp = 0;   // lower: used less recently
  // Tasks that count as one unit of load for leastload (run_times.h): 1
  // unless the engine's tasks are measured far shorter than a message.
  uint32_t pack = 1;
  // A pack begun with tasks that came together (this turn) and not full:
  // leastload fills it before it gives an idle engine a task.
  bool open = false;
};

class Scheme {
 public:
  virtual ~Scheme() = default;

  // The set of engines with room. REQUIRES: Insert only what is not in the
  // set, Erase only what is, with the view it was inserted with.
  virtual void Insert(const EngineView& engine) = 0;
  virtual void Erase(const EngineView& engine) = 0;
  virtual bool Empty() const = 0;

  // Chooses from the whole set. REQUIRES: !Empty().
  virtual EngineSlot Pick() = 0;
  // Chooses from `candidates` (engines with room a constrained task may
  // use), given in no particular order. REQUIRES: !candidates.empty().
  virtual EngineSlot PickFrom(std::span<const EngineView> candidates) = 0;
};

// The scheme of this name seeded with `seed`, or nullptr for an unknown name.
std::unique_ptr<Scheme> MakeScheme(std::string_view name, uint64_t seed);
// Every valid name, the default first.
std::vector<std::string> SchemeNames();

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_SCHEME_H_
