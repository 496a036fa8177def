#include "scheduler/scheme.h"

#include <algorithm>
#include <functional>
#include <random>
#include <set>
#include <tuple>
#include <unordered_map>

namespace ztask::scheduler {
namespace {

bool LessRecent(const EngineView& a, const EngineView& b) {
  return std::tie(a.stamp, a.slot) < std::tie(b.stamp, b.slot);
}
bool LessLoaded(const EngineView& a, const EngineView& b) {
  return std::tie(a.load, a.stamp, a.slot) < std::tie(b.load, b.stamp, b.slot);
}

// Fewest outstanding tasks, counted in packs (run_times.h: tasks measured
// far shorter than a message share one unit; most count one each); a pack
// open for tasks that came together is filled first; ties to the least
// recently used. A closed pack counts whole however little it holds: a
// task that comes later goes to an idle engine, not behind one whose task
// may have run far longer than the measure.
class LeastLoad final : public Scheme {
 public:
  void Insert(const EngineView& e) override { set_.insert(Key(e)); }
  void Erase(const EngineView& e) override { set_.erase(Key(e)); }
  bool Empty() const override { return set_.empty(); }
  EngineSlot Pick() override { return std::get<3>(*set_.begin()); }
  EngineSlot PickFrom(std::span<const EngineView> c) override {
    return std::min_element(
               c.begin(), c.end(),
               [](const EngineView& a, const EngineView& b) { return Key(a) < Key(b); })
        ->slot;
  }

 private:
  // Packs (full ones only while one is open), whether none is open,
  // recency. With packs of 1: the load.
  using K = std::tuple<uint32_t, bool, int64_t, EngineSlot>;
  static K Key(const EngineView& e) {
    const uint32_t pack = std::max<uint32_t>(1, e.pack);
    const uint32_t packs = e.open ? e.load / pack : (e.load + pack - 1) / pack;
    return {packs, !e.open, e.stamp, e.slot};
  }
  std::set<K> set_;
};

// The least recently used, whatever its load.
class Lru final : public Scheme {
 public:
  void Insert(const EngineView& e) override { set_.insert({e.stamp, e.slot}); }
  void Erase(const EngineView& e) override { set_.erase({e.stamp, e.slot}); }
  bool Empty() const override { return set_.empty(); }
  EngineSlot Pick() override { return set_.begin()->second; }
  EngineSlot PickFrom(std::span<const EngineView> c) override {
    return std::min_element(c.begin(), c.end(), LessRecent)->slot;
  }

 private:
  std::set<std::pair<int64_t, EngineSlot>> set_;
};

// Base of the schemes that sample: a vector with O(1) insert, erase and
// uniform draw.
class Sampling : public Scheme {
 public:
  explicit Sampling(uint64_t seed) : rng_(seed) {}
  void Insert(const EngineView& e) override {
    position_[e.slot] = views_.size();
    views_.push_back(e);
  }
  void Erase(const EngineView& e) override {
    auto it = position_.find(e.slot);
    const size_t at = it->second;
    position_.erase(it);
    if (at + 1 != views_.size()) {
      views_[at] = views_.back();
      position_[views_[at].slot] = at;
    }
    views_.pop_back();
  }
  bool Empty() const override { return views_.empty(); }
  EngineSlot Pick() override { return Choose(views_); }
  EngineSlot PickFrom(std::span<const EngineView> c) override { return Choose(c); }

 protected:
  virtual EngineSlot Choose(std::span<const EngineView> c) = 0;
  size_t Uniform(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  double Unit() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }
  // Two distinct indexes at random. REQUIRES: n >= 2.
  std::pair<size_t, size_t> TwoDistinct(size_t n) {
    size_t a = Uniform(n);
    size_t b = Uniform(n - 1);
    if (b >= a) ++b;
    return {a, b};
  }

 private:
  std::mt19937_64 rng_;
  std::vector<EngineView> views_;
  std::unordered_map<EngineSlot, size_t> position_;
};

class Random final : public Sampling {
 public:
  using Sampling::Sampling;

 protected:
  EngineSlot Choose(std::span<const EngineView> c) override { return c[Uniform(c.size())].slot; }
};

// Two at random; the less recently used of the two.
class TwoBin final : public Sampling {
 public:
  using Sampling::Sampling;

 protected:
  EngineSlot Choose(std::span<const EngineView> c) override {
    if (c.size() == 1) return c[0].slot;
    auto [a, b] = TwoDistinct(c.size());
    return LessRecent(c[a], c[b]) ? c[a].slot : c[b].slot;
  }
};

// Two drawn with probability proportional to 1/(1+load); the less loaded.
class Weighted final : public Sampling {
 public:
  using Sampling::Sampling;

 protected:
  EngineSlot Choose(std::span<const EngineView> c) override {
    if (c.size() == 1) return c[0].slot;
    size_t a = Draw(c);
    size_t b = Draw(c);
    for (int i = 0; b == a && i < 8; ++i) b = Draw(c);
    if (b == a) b = (a + 1) % c.size();
    return LessLoaded(c[a], c[b]) ? c[a].slot : c[b].slot;
  }

 private:
  // Rejection sampling: accept a uniform draw with probability
  // 1/(1+load). Bounded tries, then uniform, so a hugely loaded pool
  // still costs O(1).
  size_t Draw(std::span<const EngineView> c) {
    for (int i = 0; i < 64; ++i) {
      size_t k = Uniform(c.size());
      if (Unit() * (1.0 + c[k].load) < 1.0) return k;
    }
    return Uniform(c.size());
  }
};

struct Entry {
  const char* name;
  std::function<std::unique_ptr<Scheme>(uint64_t)> make;
};

const std::vector<Entry>& Registry() {
  static const std::vector<Entry> registry = {
      {"leastload", [](uint64_t) { return std::make_unique<LeastLoad>(); }},
      {"lru", [](uint64_t) { return std::make_unique<Lru>(); }},
      {"twobin", [](uint64_t s) { return std::make_unique<TwoBin>(s); }},
      {"weighted", [](uint64_t s) { return std::make_unique<Weighted>(s); }},
      {"random", [](uint64_t s) { return std::make_unique<Random>(s); }},
  };
  return registry;
}

}  // namespace

std::unique_ptr<Scheme> MakeScheme(std::string_view name, uint64_t seed) {
  for (const auto& entry : Registry()) {
    if (name == entry.name) return entry.make(seed);
  }
  return nullptr;
}

std::vector<std::string> SchemeNames() {
  std::vector<std::string> names;
  for (const auto& entry : Registry()) names.emplace_back(entry.name);
  return names;
}

}  // namespace ztask::scheduler
