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
// Until a task has its final outcome, the store also keeps its request as the
// scheduler saw it (header, metadata, content, buffers), so that a restarted
// scheduler can queue it again. A request whose task finishes before the next
// flush is never written.
//
// On disk a task is one row, in the order tasks were first recorded: the
// in-memory index, not SQLite's, finds a record, so a flush appends new rows
// at the end of the table and rewrites rows recorded about the same time,
// instead of touching pages all over a tree keyed by random ids.
//
// Every change is idempotent: a final record never goes back, so the monitor
// may deliver a batch twice (it resends what the hub did not acknowledge).
//
// Thread safety: owned by one thread.
#ifndef ZTASK_HUB_STORE_H_
#define ZTASK_HUB_STORE_H_

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/flat_id_map.h"
#include "protocol/messages.h"
#include "ztask/status.h"

struct sqlite3;
struct sqlite3_stmt;

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
  ~TaskStore();

  // Each returns false when the record was already final: nothing changed.
  // `request` is the task's frames after the signature, without the parent.
  bool Submitted(const protocol::Header& request, const protocol::RoutingMeta& meta,
                 const protocol::TaskSpec& spec, std::vector<std::string> request_frames);
  bool Assigned(const TaskId& id, const protocol::Assignment& assignment);
  bool Outcome(const TaskId& id, const protocol::OutcomeMeta& meta,
               const protocol::TaskResult& result, int64_t now_us);

  // The kept request of an unfinished task, or null.
  const std::vector<std::string>* RequestOf(const TaskId& id) const;

  // The record of `id`: in memory, or read from the file into *scratch;
  // null when there is none.
  const protocol::TaskRecord* Find(const TaskId& id, protocol::TaskRecord* scratch) const;
  // Up to `limit` task ids after `after` (all with nullopt), in id order,
  // of every record (of `job`'s only, when given), in memory or only in the
  // file.
  std::vector<TaskId> IdsAfter(const std::optional<TaskId>& after, size_t limit,
                               const std::optional<std::string>& job = std::nullopt) const;
  // Removes finished records (the listed ones, or all with `all`); returns
  // how many went.
  size_t Purge(const std::vector<TaskId>& ids, bool all);
  // Records in memory.
  size_t size() const { return entries_.size(); }
  // Whether some finished records are only in the file.
  bool has_evicted() const { return has_evicted_; }
  // SQLite's synchronous level on this connection: 2 (FULL) when opened for
  // power loss, 1 (NORMAL) otherwise, 0 without a database.
  int synchronous_level() const;
  // Calls f(id, record) for every record in memory (every unfinished one),
  // in no order.
  template <class F>
  void ForEachRecord(F&& f) const {
    entries_.for_each(
        [&](const TaskId& id, const std::unique_ptr<Entry>& entry) { f(id, entry->record); });
  }
  // Counts kept as records change, so that a status query costs the number
  // of engines, not of records: tasks waiting for an engine, and per engine
  // id the tasks running (or queued) there and those that ended there.
  struct EngineTally {
    int64_t running = 0, finished = 0;
  };
  int64_t waiting() const { return waiting_; }
  // Tasks held that are running (or queued on an engine), and finished
  // records by outcome, over the whole history (purged ones excepted).
  int64_t running() const {
    int64_t n = 0;
    for (const auto& [engine, tally] : by_engine_) n += tally.running;
    return n;
  }
  int64_t ok() const { return ok_; }
  int64_t failed() const { return failed_; }
  const std::map<int32_t, EngineTally>& by_engine() const { return by_engine_; }
  // Every job's counts, by name (a job's finished counts over the whole
  // history, purged ones excepted).
  const std::map<std::string, protocol::JobSummary>& jobs() const { return jobs_; }
  // A name for a new job: one more than the largest number that names a
  // job (or was given by this call before).
  std::string NewJobName();

  // Writes every change since the last flush in one transaction.
  Status Flush();
  // Rows the next flush writes or deletes.
  size_t unflushed() const { return dirty_.size() + deleted_rows_.size(); }
  bool durable() const { return db_ != nullptr; }

 private:
  explicit TaskStore(StoreOptions options) : options_(std::move(options)) {}
  Status Migrate(const std::string& path);
  // From layout 2: marks every finished row and counts them per engine.
  Status AddFinishedColumn();
  // From layout 3: counts the finished tasks by outcome.
  Status AddOutcomeCounts(const std::string& path);
  // From layout 4: a job column, its index, and the jobs' counts.
  Status AddJobs(const std::string& path);
  // Runs SQL that changes the tables; on failure rolls back and says so.
  Status SetUp(const std::string& sql, const std::string& path);
  Status Prepare();
  Status Load();
  // Everything kept of one task, found with one lookup.
  struct Entry {
    protocol::TaskRecord record;
    std::vector<std::string> request;  // while unfinished (has_request)
    int64_t row = 0;                   // its row on disk; 0: not written yet
    bool has_request = false;
    bool dirty = false;            // changed since the last flush (in dirty_)
    bool request_changed = false;  // its request kept or dropped since then
  };

  // Writes what changed; the row numbers it gave are applied to the entries
  // once the transaction commits.
  Status WriteRows(std::vector<std::pair<Entry*, int64_t>>* added);
  // Its parts: the dirty records, the rows let go, the finished counts,
  // the jobs' counts.
  Status WriteRecords(std::vector<std::pair<Entry*, int64_t>>* added);
  Status DeleteRows();
  Status WriteCounts();
  Status WriteJobs();
  // The entry of `id`, made when missing (`made` says so): one lookup, and
  // one in the file when records were let go (a finished one comes back).
  Entry& EntryOf(const TaskId& id, bool* made);
  // Reads the row of `id` from the file: its record and row number.
  bool ReadStored(const TaskId& id, protocol::TaskRecord* record, int64_t* row) const;
  // Lets go of the oldest finished records beyond keep_finished (written
  // ones only: call after a flush).
  void Evict();
  // Purge(all) with records in the file only: in one transaction.
  std::optional<size_t> PurgeAllStored();
  // Marks an entry to be written at the next flush.
  void Touch(Entry& e);
  // After a flush: nothing is dirty.
  void Clean();
  const Entry* FindEntry(const TaskId& id) const;
  // Whether the file may hold a record of `id` that memory does not.
  bool MayBeStored(const TaskId& id) const { return has_evicted_ && !(largest_stored_ < id); }
  // The request of a task that just got its final outcome is not needed.
  void DropRequest(Entry& entry);
  // Marks the failed task `old_id` as replaced by `by` (a resubmission).
  void Replace(const TaskId& old_id, const TaskId& by);
  // Adds (+1) or takes away (-1) a record from the counts.
  void Tally(const protocol::TaskRecord& r, int delta);

  StoreOptions options_;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* find_ = nullptr;  // the row of an id
  // Entries stay where they are made (an allocation each), so dirty_ may
  // point at them; Purge takes a purged entry out of dirty_.
  FlatIdMap<std::unique_ptr<Entry>> entries_;
  std::vector<Entry*> dirty_;          // each dirty entry once
  std::vector<int64_t> deleted_rows_;  // rows of purged records
  int64_t waiting_ = 0;
  std::map<int32_t, EngineTally> by_engine_;
  std::set<int32_t> tally_changed_;  // engines whose finished count to write
  int64_t ok_ = 0, failed_ = 0;
  bool outcomes_changed_ = false;  // ok_ or failed_ to write
  std::map<std::string, protocol::JobSummary> jobs_;
  std::set<std::string> jobs_changed_;  // whose finished counts to write
  int64_t last_job_number_ = 0;
  // Finished records in memory, oldest first (some may be purged already).
  std::deque<TaskId> finished_order_;
  bool has_evicted_ = false;
  // No row of the file has a larger id: a new id above it (the usual case,
  // as clients make ids that grow with time: TaskId::New) is known not to
  // be there without reading the file.
  TaskId largest_stored_;
};

}  // namespace ztask::hub

#endif  // ZTASK_HUB_STORE_H_
