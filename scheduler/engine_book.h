// EngineBook: the engines a core places tasks on, one entry per engine life
// (slot): whether it is alive, accepting and draining, what it can hold
// (slots, units of countable resources) and what the tasks it holds have
// booked, which tasks those are, and how recently it was given one (the
// LRU stamps). It keeps the scheme told of the engines with room for a
// one-slot task that asks no resource, so a scheme chooses among exactly
// those; and it may hold one engine, or some of its units, for the oldest
// wide task that fits nowhere yet (Reserve), so packing stays fair.
//
// It owns the engines and the scheme; it must not know what a task is
// beyond its id and what it holds (Demand): no dependencies, retries,
// actions or clock. What a task may use is the core's to say.
//
// Thread safety: owned by the core's thread.
#ifndef ZTASK_SCHEDULER_ENGINE_BOOK_H_
#define ZTASK_SCHEDULER_ENGINE_BOOK_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "scheduler/ready_queue.h"
#include "scheduler/scheme.h"
#include "ztask/task_id.h"

namespace ztask::scheduler {

// What an engine can hold at once, or what a task holds while it runs:
// slots, and units of countable resources by name ("gpus": 2).
struct Amounts {
  int32_t slots = 1;
  std::map<std::string, int64_t> resources;
};

// What a task holds on an engine while it runs, resources by index.
struct Demand {
  uint32_t slots = 1;
  ReadyQueue::Units units;  // units of each resource (by index), none zero
  // Placed like a task with targets: not simply by the scheme.
  bool Wide() const { return slots > 1 || !units.empty(); }
};

// CoreOptions::hwm for the default: each engine's own depth (SetDepth).
inline constexpr uint32_t kAdaptiveHwm = UINT32_MAX;

class EngineBook {
 public:
  // `hwm` as CoreOptions::hwm (kAdaptiveHwm: each engine's depth, 0 until
  // SetDepth). REQUIRES: scheme non-null.
  EngineBook(uint32_t hwm, std::unique_ptr<Scheme> scheme);

  // A new engine life: returns its slot. REQUIRES: engine_id is not alive.
  EngineSlot Add(int32_t engine_id, bool accepting, const Amounts& capacity);
  // Each returns false, changing nothing, when the slot is not alive or
  // already so.
  bool SetCapacity(EngineSlot slot, const Amounts& capacity);
  bool Accept(EngineSlot slot);
  bool Drain(EngineSlot slot);
  // The engine life ends: its bookings are dropped and the tasks it held
  // are returned. REQUIRES: Alive(slot).
  std::vector<TaskId> Remove(EngineSlot slot);

  bool Alive(EngineSlot slot) const { return slot < engines_.size() && engines_[slot].alive; }
  // REQUIRES: slot was returned by Add.
  int32_t IdOf(EngineSlot slot) const { return engines_[slot].id; }
  uint32_t SlotsOf(EngineSlot slot) const { return engines_[slot].slots; }
  // The slot of a live engine id, or kNoSlot.
  EngineSlot SlotOf(int32_t engine_id) const {
    auto it = slot_of_id_.find(engine_id);
    return it == slot_of_id_.end() ? kNoSlot : it->second;
  }
  // Live engine ids and their slots.
  const std::unordered_map<int32_t, EngineSlot>& live() const { return slot_of_id_; }
  // Slots booked on the engine by the tasks it holds (0 for an unknown slot).
  uint32_t LoadOf(EngineSlot slot) const {
    return slot < engines_.size() ? engines_[slot].load : 0;
  }
  // The tasks the engine holds (none for an unknown slot).
  std::vector<TaskId> RunningOn(EngineSlot slot) const;
  // Alive, draining and holding nothing: it may go.
  bool Drained(EngineSlot slot) const {
    const Engine& e = engines_[slot];
    return e.alive && e.draining && e.load == 0;
  }
  // Room for a one-slot task asking no resource: what the scheme holds.
  bool HasRoom(EngineSlot slot) const { return HasRoom(engines_[slot]); }
  // Open to new tasks with a slot free: it would start one at once.
  bool Idle(EngineSlot slot) const {
    const Engine& e = engines_[slot];
    return Open(e) && e.load < e.slots;
  }
  // Slots booked beyond what the engine runs at once: tasks queued there.
  uint32_t Queued(EngineSlot slot) const {
    const Engine& e = engines_[slot];
    return e.load > e.slots ? e.load - e.slots : 0;
  }

  // ---- the default HWM (kAdaptiveHwm)
  bool adaptive() const { return hwm_ == kAdaptiveHwm; }
  // The slots' worth of tasks the engine may hold queued beyond what it
  // runs. Ignored unless adaptive().
  void SetDepth(EngineSlot slot, uint32_t depth);
  // Tasks of the engine that count as one unit of load (run_times.h).
  void SetPack(EngineSlot slot, uint32_t pack);
  // The engine's pack was begun in a turn before `turn` and is still open:
  // the tasks that came with its first have gone (ClosePack).
  bool PackExpired(EngineSlot slot, uint64_t turn) const {
    const Engine& e = engines_[slot];
    return e.open && e.opened_turn != turn;
  }
  void ClosePack(EngineSlot slot);
  // The HWM the engine has now (as --hwm would give it): its depth plus
  // one when adaptive(), the fixed one otherwise.
  uint32_t HwmOf(EngineSlot slot) const {
    return adaptive() ? engines_[slot].depth + 1 : hwm_;
  }

  // The scheme's choice among the engines with room. REQUIRES: !SchemeEmpty().
  bool SchemeEmpty() const { return scheme_->Empty(); }
  EngineSlot Pick() { return scheme_->Pick(); }
  // REQUIRES: candidates non-empty.
  EngineSlot PickFrom(std::span<const EngineView> candidates) {
    return scheme_->PickFrom(candidates);
  }
  EngineView ViewOf(EngineSlot slot) const {
    const Engine& e = engines_[slot];
    return {slot, e.load, e.stamp, e.pack, e.open};
  }

  // Books `demand` for task `id` on the engine, makes it the most recently
  // used, opens its pack in `turn` when not full, and returns the task's
  // index in the engine's list. REQUIRES: Alive(slot).
  uint32_t Place(EngineSlot slot, const TaskId& id, const Demand& demand, uint64_t turn = 0);
  // Unbooks the task at `index` (as Place returned, or as moved since);
  // returns the task moved into `index` to fill the gap, if one was.
  std::optional<TaskId> Unplace(EngineSlot slot, uint32_t index, const Demand& demand);

  // What a task asking `needs` holds: resource names become indices (a
  // bounded table: see ResourceIndex).
  Demand DemandOf(const Amounts& needs) {
    Demand demand;
    demand.slots = static_cast<uint32_t>(std::max(1, needs.slots));
    if (!needs.resources.empty()) AddUnits(needs.resources, &demand.units);  // most ask none
    return demand;
  }
  // Whether the engine could hold `demand` were it idle.
  bool CouldHold(const Demand& demand, EngineSlot slot) const;
  // Whether task `id` asking `demand` may go to the engine now.
  bool Fits(const TaskId& id, const Demand& demand, EngineSlot slot) const;
  // Why none of `allowed` could ever hold `demand` (for task `id`; `targeted`:
  // the task named its engines), or "" when one could.
  std::string Unsatisfiable(const TaskId& id, const Demand& demand,
                            std::span<const EngineSlot> allowed, bool targeted) const;
  // Packing fairness: task `id`, wide and fitting nowhere now, holds the
  // engine of `allowed` that could hold it with the most slots free. When
  // it lacks slots there, no other task goes there (it leaves the scheme);
  // when it lacks only units, no task asking any of those goes there.
  // Held until Unreserve. REQUIRES: nothing is held.
  void Reserve(const TaskId& id, const Demand& demand, std::span<const EngineSlot> allowed);
  void Unreserve();
  bool holding() const { return reserved_slot_ != kNoSlot; }

 private:
  struct Engine {
    int32_t id = -1;
    bool alive = false;
    bool draining = false;
    bool accepting = true;
    bool reserved = false;  // held whole (Reserve): out of the scheme
    uint32_t load = 0;      // slots booked by the tasks it holds
    uint32_t slots = 1;     // what it has
    uint32_t depth = 0;     // queued beyond its slots (adaptive())
    uint32_t pack = 1;      // tasks a unit of load (SetPack)
    bool open = false;      // a pack begun in opened_turn, not full
    uint64_t opened_turn = 0;
    std::vector<int64_t> capacity, booked;  // units by resource index
    int64_t stamp = 0;
    std::vector<TaskId> running;
  };

  static bool Open(const Engine& e) { return e.alive && e.accepting && !e.draining; }
  // Room for `slots` more slots, within the HWM.
  bool SlotRoom(const Engine& e, uint32_t slots) const {
    if (hwm_ == 0) return true;
    const uint32_t hwm = adaptive() ? e.depth + 1 : hwm_;
    return e.load + slots <= e.slots + hwm - 1;
  }
  bool HasRoom(const Engine& e) const { return Open(e) && !e.reserved && SlotRoom(e, 1); }
  static int64_t UnitsOf(const std::vector<int64_t>& v, uint16_t r) {
    return r < v.size() ? v[r] : 0;
  }
  static bool UnitsFree(const Engine& e, uint16_t r, int64_t units) {
    return UnitsOf(e.booked, r) + units <= UnitsOf(e.capacity, r);
  }
  void LeaveScheme(EngineSlot slot) {
    if (HasRoom(engines_[slot])) scheme_->Erase(ViewOf(slot));
  }
  void JoinScheme(EngineSlot slot) {
    if (HasRoom(engines_[slot])) scheme_->Insert(ViewOf(slot));
  }
  void Book(Engine& e, const Demand& demand, int sign);
  void Apply(const Amounts& capacity, Engine& e);
  void AddUnits(const std::map<std::string, int64_t>& resources, ReadyQueue::Units* units);
  uint16_t ResourceIndex(const std::string& name);

  uint32_t hwm_;
  std::unique_ptr<Scheme> scheme_;
  std::vector<Engine> engines_;  // by slot
  std::unordered_map<int32_t, EngineSlot> slot_of_id_;
  static constexpr size_t kMaxResourceNames = 1024;
  std::unordered_map<std::string, uint16_t> resource_index_;
  std::vector<std::string> resource_names_;
  EngineSlot reserved_slot_ = kNoSlot;
  TaskId reserved_for_;
  std::vector<uint16_t> held_units_;        // the resources it lacks there
  int64_t next_new_stamp_ = INT64_MIN / 2;  // new engines: older than any use
  int64_t next_use_stamp_ = 0;
};

// Placing and releasing are on every task's path: defined here to be inlined.
inline uint32_t EngineBook::Place(EngineSlot slot, const TaskId& id, const Demand& demand,
                                  uint64_t turn) {
  Engine& e = engines_[slot];
  LeaveScheme(slot);
  Book(e, demand, +1);
  e.stamp = ++next_use_stamp_;
  e.open = e.load % e.pack != 0;
  e.opened_turn = turn;
  const auto index = static_cast<uint32_t>(e.running.size());
  e.running.push_back(id);
  JoinScheme(slot);
  return index;
}

inline std::optional<TaskId> EngineBook::Unplace(EngineSlot slot, uint32_t index,
                                                 const Demand& demand) {
  Engine& e = engines_[slot];
  LeaveScheme(slot);
  Book(e, demand, -1);
  e.open = e.open && e.load % e.pack != 0;
  std::optional<TaskId> moved;
  if (index + 1 != e.running.size()) {
    e.running[index] = e.running.back();
    moved = e.running[index];
  }
  e.running.pop_back();
  JoinScheme(slot);
  return moved;
}

inline void EngineBook::Book(Engine& e, const Demand& demand, int sign) {
  e.load += sign > 0 ? demand.slots : -demand.slots;
  for (const auto& [r, units] : demand.units) {
    if (e.booked.size() <= r) e.booked.resize(r + 1, 0);
    e.booked[r] += sign * units;
  }
}

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_ENGINE_BOOK_H_
