// The fence: whether this engine may start tasks, judged from what the hub
// answered, without I/O (the caller passes the times).
//
// The hub removes an engine it has not heard from for heartbeat_misses
// heartbeats, and the scheduler then gives its tasks to others (or fails
// them). An engine that has had no answer to a heartbeat sent within that
// window cannot know it was not removed, so it starts nothing until the hub
// answers one again (it was not removed: it carries on) or it has
// registered again (it was: what it held is dropped, answered "not run").
// The window is counted from when the answered heartbeat left, not when its
// answer came: the hub touched the engine after that, so the engine always
// fences itself no later than the hub can remove it, and answers that
// waited in its socket through a pause (SIGSTOP) do not count as fresh. A
// task already running is not stopped (docs/reliability.md).
//
// Must not: send, receive or read a clock. Thread safety: the hub link's
// thread (the loop thread) calls everything but Fenced, drop_held,
// removals and Dropped, which any thread may call.
#ifndef ZTASK_ENGINE_FENCE_H_
#define ZTASK_ENGINE_FENCE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>

namespace ztask::engine {

class Fence {
 public:
  // Recent heartbeats remembered, to match the hub's answers to them.
  static constexpr size_t kBeatsKept = 64;

  // What a refusal of the hub (it does not know this engine) calls for.
  enum class Refusal {
    kStale,            // it refused a heartbeat sent before the latest registration
    kRegister,         // register again; the tasks held stay
    kRegisterAndDrop,  // it removed this engine: register again, drop what is held
  };

  // The hub answered a registration request dated `date_us` (wall) that
  // left at `sent_us` (monotonic); it removes an engine silent for
  // `window_us`.
  void Registered(int64_t date_us, int64_t sent_us, int64_t window_us);
  // The hub stretched its heartbeat period: it now removes an engine
  // silent for `window_us` (longer than before).
  void SetWindow(int64_t window_us) { window_us_.store(window_us); }
  // A heartbeat dated `date_us` left at `sent_us`.
  void BeatSent(int64_t date_us, int64_t sent_us);
  // The hub answered the heartbeat dated `parent_date_us`. True when that
  // lifts the fence (tasks may start again).
  bool BeatAnswered(int64_t parent_date_us, int64_t now_us);
  // The hub refused the heartbeat dated `parent_date_us`.
  Refusal Refused(int64_t parent_date_us, int64_t now_us);
  // Whether the heartbeat dated `date_us` went to the hub of the latest
  // registration: an answer from a hub that has since restarted says
  // nothing of the period this one asks for.
  bool SinceRegistration(int64_t date_us) const { return date_us > registered_date_us_; }

  // Any thread: whether tasks may not start now.
  bool Fenced(int64_t now_us) const {
    return drop_held() || now_us - heard_us_.load() > window_us_.load();
  }
  // Any thread: the hub removed this engine; what it holds goes back unstarted.
  bool drop_held() const { return removals_.load() > dropped_.load(); }
  // Any thread: how many removals were found so far (read before dropping).
  uint64_t removals() const { return removals_.load(); }
  // One thread (the one that drops): what was held when `removals` were
  // counted is dropped. A removal found since still asks for its drop.
  void Dropped(uint64_t removals) { dropped_.store(removals); }
  int64_t window_us() const { return window_us_.load(); }

 private:
  void HeardFromHub(int64_t sent_us);

  std::atomic<int64_t> heard_us_{0};
  std::atomic<int64_t> window_us_{3'000'000};
  // Removals found, and those whose drop was done: both only grow, so a
  // second removal found while the first one's drop runs is not lost.
  std::atomic<uint64_t> removals_{0}, dropped_{0};
  // The loop thread's: the date of the latest registration request, and the
  // date and time each recent heartbeat left.
  int64_t registered_date_us_ = 0;
  std::deque<std::pair<int64_t, int64_t>> beats_sent_;
};

}  // namespace ztask::engine

#endif  // ZTASK_ENGINE_FENCE_H_
