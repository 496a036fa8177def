// How often the supervisor starts again what exited: the restarts within a
// sliding window, whether they used up the limit, and the back-off before
// the next one. Engines are given up once the limit is reached within the
// window; the hub and the scheduler never are (they hold what is not written
// yet), and wait longer the further past the limit they are.
//
// Must not: start, stop or look at a process (cluster/local_cluster.cc
// does), or read a clock (the time is given). Thread safety: one owner.
#ifndef ZTASK_CLUSTER_RESTART_WINDOW_H_
#define ZTASK_CLUSTER_RESTART_WINDOW_H_

#include <cstddef>
#include <vector>

namespace ztask::cluster {

class RestartWindow {
 public:
  // The longest back-off, whatever the count.
  static constexpr double kMaxBackoffS = 30;

  // At most `max_restarts` within `window_s` seconds; the first back-off is
  // `backoff_s`, doubling with each restart still in the window.
  RestartWindow(int max_restarts, double window_s, double backoff_s)
      : max_restarts_(max_restarts), window_s_(window_s), backoff_s_(backoff_s) {}

  // Forgets the restarts older than the window at `now`; those left.
  size_t Recent(double now);
  // Whether the restarts within the window at `now` reached the limit.
  bool Exhausted(double now) { return Recent(now) >= static_cast<size_t>(max_restarts_); }
  // Records a restart at `now`.
  void Restarted(double now) { recent_.push_back(now); }

  // An engine's wait before its next restart: the back-off doubled once per
  // restart within the window, at most kMaxBackoffS.
  double EngineBackoff() const;
  // A server's wait once past the limit: at least 0.1 s doubled once per
  // restart beyond the limit (eight times at most), at most kMaxBackoffS.
  double ServerBackoff() const;

 private:
  int max_restarts_;
  double window_s_;
  double backoff_s_;
  std::vector<double> recent_;  // the restarts' times, oldest first
};

}  // namespace ztask::cluster

#endif  // ZTASK_CLUSTER_RESTART_WINDOW_H_
