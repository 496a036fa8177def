// The engines, their bookings and the scheme's set (engine_book.h).
#include "scheduler/engine_book.h"

#include <algorithm>
#include <cassert>

namespace ztask::scheduler {

EngineBook::EngineBook(uint32_t hwm, std::unique_ptr<Scheme> scheme)
    : hwm_(hwm), scheme_(std::move(scheme)) {
  assert(scheme_);
}

EngineSlot EngineBook::Add(int32_t engine_id, bool accepting, const Amounts& capacity) {
  assert(!slot_of_id_.contains(engine_id));
  const auto slot = static_cast<EngineSlot>(engines_.size());
  Engine engine;
  engine.id = engine_id;
  engine.alive = true;
  engine.accepting = accepting;
  engine.stamp = next_new_stamp_++;
  engines_.push_back(std::move(engine));
  slot_of_id_[engine_id] = slot;
  Apply(capacity, engines_[slot]);
  JoinScheme(slot);
  return slot;
}

bool EngineBook::SetCapacity(EngineSlot slot, const Amounts& capacity) {
  if (!Alive(slot)) return false;
  LeaveScheme(slot);
  Apply(capacity, engines_[slot]);
  JoinScheme(slot);
  return true;
}

void EngineBook::SetDepth(EngineSlot slot, uint32_t depth) {
  if (!Alive(slot) || engines_[slot].depth == depth) return;
  LeaveScheme(slot);
  engines_[slot].depth = depth;
  JoinScheme(slot);
}

void EngineBook::SetPack(EngineSlot slot, uint32_t pack) {
  pack = std::max<uint32_t>(1, pack);
  if (!Alive(slot) || engines_[slot].pack == pack) return;
  Engine& e = engines_[slot];
  LeaveScheme(slot);
  e.pack = pack;
  e.open = e.open && e.load % pack != 0;
  JoinScheme(slot);
}

void EngineBook::ClosePack(EngineSlot slot) {
  if (!engines_[slot].open) return;
  LeaveScheme(slot);
  engines_[slot].open = false;
  JoinScheme(slot);
}

bool EngineBook::Accept(EngineSlot slot) {
  if (!Alive(slot) || engines_[slot].accepting) return false;
  engines_[slot].accepting = true;
  JoinScheme(slot);
  return true;
}

bool EngineBook::Drain(EngineSlot slot) {
  if (!Alive(slot) || engines_[slot].draining) return false;
  LeaveScheme(slot);
  engines_[slot].draining = true;
  return true;
}

std::vector<TaskId> EngineBook::Remove(EngineSlot slot) {
  assert(Alive(slot));
  Engine& e = engines_[slot];
  LeaveScheme(slot);
  e.alive = false;
  slot_of_id_.erase(e.id);
  std::vector<TaskId> running = std::move(e.running);
  e.running.clear();
  e.load = 0;
  std::fill(e.booked.begin(), e.booked.end(), 0);
  return running;
}

std::vector<TaskId> EngineBook::RunningOn(EngineSlot slot) const {
  return slot < engines_.size() ? engines_[slot].running : std::vector<TaskId>{};
}

void EngineBook::Apply(const Amounts& capacity, Engine& e) {
  e.slots = static_cast<uint32_t>(std::max(1, capacity.slots));
  std::fill(e.capacity.begin(), e.capacity.end(), 0);
  for (const auto& [name, units] : capacity.resources) {
    const uint16_t r = ResourceIndex(name);
    if (e.capacity.size() <= r) e.capacity.resize(r + 1, 0);
    e.capacity[r] = std::max<int64_t>(0, units);
  }
}

void EngineBook::AddUnits(const std::map<std::string, int64_t>& resources,
                          ReadyQueue::Units* units) {
  for (const auto& [name, count] : resources) {
    if (count > 0) units->emplace_back(ResourceIndex(name), count);
  }
}

uint16_t EngineBook::ResourceIndex(const std::string& name) {
  if (auto it = resource_index_.find(name); it != resource_index_.end()) return it->second;
  // Clients may name resources at will: past kMaxResourceNames distinct
  // names, every new one shares the last index (no engine has it, unless an
  // engine's name came that late), so the table stays bounded.
  if (resource_names_.size() >= kMaxResourceNames) return kMaxResourceNames - 1;
  const auto r = static_cast<uint16_t>(resource_names_.size());
  resource_index_.emplace(name, r);
  resource_names_.push_back(resource_names_.size() + 1 == kMaxResourceNames
                                ? "(one of too many resource names)"
                                : name);
  return r;
}

bool EngineBook::CouldHold(const Demand& demand, EngineSlot slot) const {
  const Engine& e = engines_[slot];
  if (demand.slots > e.slots) return false;
  for (const auto& [r, units] : demand.units) {
    if (units > UnitsOf(e.capacity, r)) return false;
  }
  return true;
}

bool EngineBook::Fits(const TaskId& id, const Demand& demand, EngineSlot slot) const {
  const Engine& e = engines_[slot];
  if (!Open(e)) return false;
  if (slot == reserved_slot_ && id != reserved_for_) {
    if (e.reserved) return false;
    for (const auto& [r, units] : demand.units) {
      if (std::find(held_units_.begin(), held_units_.end(), r) != held_units_.end()) return false;
    }
  }
  if (demand.slots > e.slots || !SlotRoom(e, demand.slots)) return false;
  for (const auto& [r, units] : demand.units) {
    if (!UnitsFree(e, r, units)) return false;
  }
  return true;
}

std::string EngineBook::Unsatisfiable(const TaskId& id, const Demand& demand,
                                      std::span<const EngineSlot> allowed, bool targeted) const {
  uint32_t most_slots = 0;
  for (EngineSlot s : allowed) {
    if (CouldHold(demand, s)) return "";
    most_slots = std::max(most_slots, engines_[s].slots);
  }
  const std::string prefix = "task " + id.ToHex() + ": needs ";
  const std::string largest =
      targeted ? ", the largest engine it may use has " : ", the largest engine has ";
  if (demand.slots > most_slots) {
    return prefix + std::to_string(demand.slots) + " slots" + largest + std::to_string(most_slots);
  }
  std::string all = "slots=" + std::to_string(demand.slots);
  for (const auto& [r, units] : demand.units) {
    int64_t most = 0;
    for (EngineSlot s : allowed) most = std::max(most, UnitsOf(engines_[s].capacity, r));
    const std::string& name = resource_names_[r];
    if (units > most) {
      return prefix + name + "=" + std::to_string(units) + largest +
             (most == 0 ? "no " + name : std::to_string(most));
    }
    all += " " + name + "=" + std::to_string(units);
  }
  return prefix + all + " at once, and no engine" + (targeted ? " it may use" : "") +
         " has all of them";
}

void EngineBook::Reserve(const TaskId& id, const Demand& demand,
                         std::span<const EngineSlot> allowed) {
  assert(!holding());
  EngineSlot best = kNoSlot;
  int64_t best_free = 0;
  for (EngineSlot s : allowed) {
    const Engine& e = engines_[s];
    if (!Open(e) || !CouldHold(demand, s)) continue;
    const int64_t free = int64_t{e.slots} - e.load;
    if (best == kNoSlot || free > best_free) {
      best = s;
      best_free = free;
    }
  }
  if (best == kNoSlot) return;
  Engine& e = engines_[best];
  if (!SlotRoom(e, demand.slots)) {
    LeaveScheme(best);  // every task needs a slot: none goes there
    e.reserved = true;
  } else {
    for (const auto& [r, units] : demand.units) {
      if (!UnitsFree(e, r, units)) held_units_.push_back(r);
    }
  }
  reserved_slot_ = best;
  reserved_for_ = id;
}

void EngineBook::Unreserve() {
  if (reserved_slot_ == kNoSlot) return;
  const EngineSlot slot = reserved_slot_;
  reserved_slot_ = kNoSlot;
  reserved_for_ = TaskId{};
  held_units_.clear();
  if (!engines_[slot].reserved) return;
  engines_[slot].reserved = false;
  JoinScheme(slot);
}

}  // namespace ztask::scheduler
