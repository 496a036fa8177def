// TaskStore: the hub's record of every task, built from the scheduler's
// monitor messages. Every unfinished task and the most recently finished
// ones (StoreOptions::keep_finished) are kept in memory; with a database
// file, every change is also written to SQLite (WAL mode) in batched
// transactions by Flush(), so writing is never per message, and a finished
// record that was written may leave memory: a query for it reads the file
// (by its id's index). At start only the unfinished records and the latest
// finished ones are loaded, so a restart costs what is kept, not the length
// of the history. The counts a status query shows are kept whole (in the
// file too), whatever is in memory.
//
// The store joins two parts, each tested alone: the records in memory
// (records.h: what a record holds, how the monitor's messages change it,
// the counts, what stays in memory; it keeps each unfinished task's
// request, and every change is idempotent) and the SQLite file
// (store_file.h: the layout of its rows, its statements and transactions,
// loading and writing). This file only joins them: it must not hold a
// rule of either.
//
// Thread safety: owned by one thread.
#ifndef ZTASK_HUB_STORE_H_
#define ZTASK_HUB_STORE_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hub/records.h"
#include "hub/store_file.h"
#include "protocol/messages.h"
#include "ztask/status.h"

namespace ztask::hub {

struct StoreOptions {
  // Every commit reaches the disk before it returns (synchronous=FULL), so
  // what was acknowledged survives a power loss; otherwise (synchronous=
  // NORMAL in WAL mode) it survives a crash of the process, and a power loss
  // may take the latest commits.
  bool power = false;
  // Finished records kept in memory, at most, beyond those not yet written;
  // older ones are read from the file when asked for. Without a file
  // (":memory:") every record stays.
  size_t keep_finished = 100000;
  // Retention, off by default: the file keeps at most this many finished
  // records (the newest recorded; 0: every one) ...
  size_t max_finished_records = 0;
  // ... and none that ended more than this many seconds ago (0: forever).
  // Either way a record that an unfinished task names as a dependency
  // stays. Needs a file.
  double drop_finished_after_s = 0;
  // Rows one DropFinished deletes, at most, beyond as many as were written
  // since the previous one (so that retention keeps pace with a burst
  // whose turns come far apart). Default: 20000.
  size_t drop_per_turn = 20000;
  // Called with the count of records read so far, every million, when a
  // file is converted from an earlier layout.
  std::function<void(size_t)> progress;
};

class TaskStore {
 public:
  // ":memory:" keeps records in memory only; any other path is a SQLite file,
  // created when missing.
  static Result<std::unique_ptr<TaskStore>> Open(const std::string& path,
                                                 StoreOptions options = {});
  // Writes what is not written yet.
  ~TaskStore();

  // Each returns false when the record was already final: nothing changed.
  // `request` is the task's frames after the signature, without the parent.
  // `hold_since_us` > 0: a new record is held back from the file until it
  // changes again or a flush releases it (records.h); none without a file.
  bool Submitted(const protocol::Header& request, const protocol::RoutingMeta& meta,
                 const protocol::TaskSpec& spec, KeptRequest request_frames,
                 int64_t hold_since_us = 0) {
    return book_.Submitted(request, meta, spec, std::move(request_frames),
                           file_ ? hold_since_us : 0);
  }
  bool Assigned(const TaskId& id, const protocol::Assignment& assignment) {
    return book_.Assigned(id, assignment);
  }
  bool Outcome(const TaskId& id, const protocol::OutcomeMeta& meta,
               const protocol::TaskResult& result, int64_t now_us) {
    return book_.Outcome(id, meta, result, now_us);
  }

  // The kept request of an unfinished task, or null.
  const KeptRequest* RequestOf(const TaskId& id) const {
    return book_.RequestOf(id);
  }

  // The record of `id`: in memory, or read from the file into *scratch;
  // null when there is none.
  void Prefetch(const TaskId& id) const { book_.Prefetch(id); }
  void PrefetchRecord(const TaskId& id) const { book_.PrefetchRecord(id); }
  const protocol::TaskRecord* Find(const TaskId& id, protocol::TaskRecord* scratch) const {
    return book_.Find(id, scratch);
  }
  // Up to `limit` task ids after `after` (all with nullopt), in id order,
  // of every record (of `job`'s only, when given), in memory or only in the
  // file.
  std::vector<TaskId> IdsAfter(const std::optional<TaskId>& after, size_t limit,
                               const std::optional<std::string>& job = std::nullopt) const;
  // Removes finished records (the listed ones, or all with `all`); returns
  // how many went.
  size_t Purge(const std::vector<TaskId>& ids, bool all);
  // Records in memory.
  size_t size() const { return book_.size(); }
  // Whether some finished records are only in the file.
  bool has_evicted() const { return book_.has_evicted(); }
  // SQLite's synchronous level on this connection: 2 (FULL) when opened for
  // power loss, 1 (NORMAL) otherwise, 0 without a database.
  int synchronous_level() const { return file_ ? file_->synchronous_level() : 0; }
  // Calls f(id, record) for every record in memory, in no order.
  template <class F>
  void ForEachRecord(F&& f) const {
    book_.ForEachRecord(std::forward<F>(f));
  }
  // Calls f(id, record) for every unfinished record (all are in memory),
  // in no order.
  template <class F>
  void ForEachUnfinished(F&& f) const {
    book_.ForEachUnfinished(std::forward<F>(f));
  }
  // Counts kept as records change, so that a status query costs the number
  // of engines, not of records: tasks waiting for an engine, and per engine
  // id the tasks running (or queued) there and those that ended there.
  using EngineTally = RecordBook::EngineTally;
  int64_t waiting() const { return book_.waiting(); }
  // Tasks held that are running (or queued on an engine), and finished
  // records by outcome, over the whole history (purged ones excepted).
  int64_t running() const { return book_.running(); }
  int64_t ok() const { return book_.ok(); }
  int64_t failed() const { return book_.failed(); }
  const std::map<int32_t, EngineTally>& by_engine() const { return book_.by_engine(); }
  // Every job's counts, by name (a job's finished counts over the whole
  // history, purged ones excepted).
  const std::map<std::string, protocol::JobSummary>& jobs() const { return book_.jobs(); }
  // A name for a new job: one more than the largest number that names a
  // job (or was given by this call before).
  std::string NewJobName() { return book_.NewJobName(); }

  // Writes every change since the last flush in one transaction, with the
  // records held back that came at or before `release_until_us` (all of
  // them by default).
  Status Flush(int64_t release_until_us = INT64_MAX);
  // When the oldest record still held back came, or earlier (INT64_MAX:
  // none).
  int64_t OldestHeldUs() const { return book_.OldestHeldUs(); }
  // Whether a retention bound is on.
  bool retains() const {
    return options_.max_finished_records > 0 || options_.drop_finished_after_s > 0;
  }
  // Deletes, in one transaction, up to drop_per_turn finished records, plus
  // as many as the flushes since the last call added, past the retention
  // bounds (`now_us`: the wall clock, for their age), from
  // the file and from memory; returns how many went. Does nothing (0)
  // without a bound, or while changes wait to be written (a failed flush).
  // A dropped record is unknown to every query afterwards.
  Result<size_t> DropFinished(int64_t now_us);
  // The most rows one DropFinished deletes.
  size_t drop_per_turn() const { return options_.drop_per_turn; }
  // Rows the next flush writes or deletes.
  size_t unflushed() const { return book_.unflushed(); }
  bool durable() const { return file_ != nullptr; }
  // Once when the database's checkpoints begin to fail, why.
  std::optional<std::string> TakeCheckpointError() {
    return file_ ? file_->TakeCheckpointError() : std::nullopt;
  }

 private:
  TaskStore(StoreOptions options, std::unique_ptr<StoreFile> file)
      : options_(std::move(options)),
        file_(std::move(file)),
        book_(options_.keep_finished, file_.get()) {}

  StoreOptions options_;
  std::unique_ptr<StoreFile> file_;  // null: records in memory only
  RecordBook book_;                  // reads records let go of from file_
  size_t added_since_drop_ = 0;      // rows the flushes since DropFinished added
};

}  // namespace ztask::hub

#endif  // ZTASK_HUB_STORE_H_
