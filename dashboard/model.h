// DashModel: everything taskdash shows, built from what it asks the hub
// (ClusterStats every poll, engines and queues every second) and free of
// I/O, so that every rule of it is tested without a cluster. Its memory is
// bounded whatever the number of tasks: a time series of kSeriesPoints,
// the latest kStreamSize finished tasks and kFailuresKept failures.
//
// What a page receives is JSON made here: a snapshot, and deltas since a
// cursor (a version number and the stream's position), so that each
// browser gets only what is new, at most a few times a second.
//
// Thread safety: none; taskdash guards it with a mutex.
#ifndef ZTASK_DASHBOARD_MODEL_H_
#define ZTASK_DASHBOARD_MODEL_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ztask/client.h"

namespace ztask::dashboard {

class DashModel {
 public:
  static constexpr size_t kSeriesPoints = 600;  // one a second: ten minutes
  static constexpr size_t kStreamSize = 20000;
  static constexpr size_t kFailuresKept = 10000;
  // Stream entries in one delta, at most: a page draws a sample of what
  // finished (every failure, then tasks evenly spaced among the rest), so
  // that an open page costs the cluster the same at any task rate.
  static constexpr size_t kDeltaStream = 100;

  // A poll's answer, taken at `now_s` (seconds, any clock that only grows).
  void ApplyStats(const ClusterStats& stats, double now_s);
  void ApplyEngines(const std::vector<EngineStatus>& engines, const QueueStatus& queue);
  // The hub does not answer: shown until it does again.
  void SetError(const std::string& error);

  // Where a page is: what it was sent last. A new page's cursor is zero:
  // its first delta is a snapshot.
  struct Cursor {
    int64_t version = 0, stream = 0, points = 0, engines = 0;
  };
  int64_t version() const { return version_; }

  // What changed since `*cursor` (all of it for a new cursor: the series,
  // engines, labels), with at most kDeltaStream of the stream entries since
  // (StreamSample; "stream_skipped" counts the others), and moves the
  // cursor; nullopt when nothing changed.
  std::optional<Value> Delta(Cursor* cursor) const;

  // /api/... views.
  Value Overview() const;
  Value Engines() const;
  Value Labels() const;
  // The stream after a position (the newest `limit` of it).
  Value Stream(int64_t after, size_t limit) const;
  // At most `limit` of the stream after a position, in its order: every
  // failure (up to `limit`), then entries evenly spaced over the rest. Sets
  // *skipped to how many were left out.
  Value StreamSample(int64_t after, size_t limit, int64_t* skipped) const;
  // Finished tasks taskdash holds, newest first, filtered: state "ok",
  // "failed" or "" (either), "running" (each engine's current task); a
  // part of the label, engine id, id prefix.
  Value Tasks(const std::string& state, const std::string& label, std::optional<int32_t> engine,
              const std::string& id_prefix, size_t limit) const;
  // The Prometheus text exposition of the counts.
  std::string Metrics() const;

 private:
  struct Point {
    double t = 0;  // seconds since the epoch (the hub's clock)
    double finished_rate = 0, submitted_rate = 0;
    int64_t queued = 0, running = 0;
  };
  Value CountsJson() const;
  static Value EntryJson(const ClusterStats::Finished& f);

  std::optional<ClusterStats> stats_;  // the latest, without its feed
  std::string error_;
  int64_t version_ = 0;
  int64_t missed_ = 0;
  // Time series: the previous sample, and points one per second or more.
  double last_sample_at_ = -1;
  int64_t last_finished_total_ = 0, last_submitted_total_ = 0;
  std::deque<Point> series_;
  int64_t series_end_ = 0;  // points ever added
  // Finished tasks: the stream (positions stream_end_ - size + 1 ..) and
  // the latest failures.
  std::deque<ClusterStats::Finished> stream_;
  int64_t stream_end_ = 0;
  std::deque<ClusterStats::Finished> failures_;
  std::vector<EngineStatus> engines_;
  std::map<int32_t, QueueStatus::PerEngine> queues_;
  int64_t engines_version_ = 0;
};

}  // namespace ztask::dashboard

#endif  // ZTASK_DASHBOARD_MODEL_H_
