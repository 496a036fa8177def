// RecordBook: the hub's records of tasks in memory. It owns what a task's
// record holds (Entry), how a monitor message changes it, the counts kept as
// records change (so that a status query costs the number of engines, not of
// records), which finished records stay in memory, and what changed since the
// last write. It must not touch a file: the SQLite file (store_file.h) writes
// what it lists as changed, and a record let go of is read back through the
// RecordSource it is given.
//
// Until a task has its final outcome, the book also keeps its request as the
// scheduler saw it (header, metadata, content, buffers), so that a restarted
// scheduler can queue it again. A request whose task finishes before the next
// write is never written.
//
// Every change is idempotent: a final record never goes back, so the monitor
// may deliver a batch twice (it resends what the hub did not acknowledge).
//
// A new record may be held back: not listed as changed until it changes
// again (assigned, final) or is released (ReleaseHeld), so that a task that
// ends soon after it came is written once, final, instead of twice. Only a
// record the scheduler keeps until the hub acknowledges it may be held (the
// hub acknowledges a batch once no record that came with it or before it
// is held: OldestHeldUs).
//
// Thread safety: owned by one thread.
#ifndef ZTASK_HUB_RECORDS_H_
#define ZTASK_HUB_RECORDS_H_

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/flat_id_map.h"
#include "protocol/messages.h"

namespace ztask::hub {

// A task's request as the book keeps it until the task is final: its frames
// encoded once, when they come, as the file stores them (a FrameList body),
// so that a write copies them no more, and only a restarted scheduler's
// recovery reads them back.
class KeptRequest {
 public:
  KeptRequest() = default;  // no frames
  explicit KeptRequest(std::span<const std::string_view> frames);
  KeptRequest(std::initializer_list<std::string_view> frames)
      : KeptRequest(std::span<const std::string_view>(frames.begin(), frames.size())) {}
  // Bytes read back from the file; nullopt when they are not a frame list.
  static std::optional<KeptRequest> FromStored(std::string_view bytes);

  const std::string& stored() const { return stored_.empty() ? NoFrames() : stored_; }
  std::vector<std::string> frames() const;
  void Release() { std::string().swap(stored_); }

 private:
  static const std::string& NoFrames();  // an empty frame list's bytes
  struct Stored {};
  KeptRequest(Stored, std::string bytes) : stored_(std::move(bytes)) {}
  std::string stored_;
};

// Where records let go of are read back from (the SQLite file).
class RecordSource {
 public:
  virtual ~RecordSource() = default;
  // The stored record of `id` and its row number; false when there is none.
  virtual bool ReadStored(const TaskId& id, protocol::TaskRecord* record,
                          int64_t* row) const = 0;
};

class RecordBook {
 public:
  // What the book keeps of one task, found with one lookup: the whole
  // record while it may change (an Entry), or, once it is finished and
  // written, the bytes the file stores of it (Packed): 115 bytes for a
  // no-op where the whole record takes a thousand, so that the finished
  // records kept in memory cost a fraction as much. A packed record is
  // read back on demand (Find), and made whole again when it changes (a
  // resubmission marks it replaced) or is purged.
  struct Kept {
    explicit Kept(bool is_packed) : packed(is_packed) {}
    virtual ~Kept() = default;
    int64_t row = 0;  // its row in the file; 0: not written yet
    const bool packed;
    bool finished() const;
  };
  struct Entry final : Kept {
    Entry() : Kept(false) {}
    protocol::TaskRecord record;
    KeptRequest request;  // while unfinished (has_request)
    bool has_request = false;
    bool dirty = false;            // changed since the last write (in dirty())
    bool request_changed = false;  // its request kept or dropped since then
    bool guards = false;           // its dependencies are counted in awaited_
    bool held = false;             // new, not written, not in dirty() (in held_)
  };
  struct Packed final : Kept {
    Packed() : Kept(true) {}
    std::string bytes;                 // the record as stored (protocol::EncodeStored)
    const std::string* job = nullptr;  // its job: a key of jobs_, or null
  };
  // Per engine id: the tasks running (or queued) there and those that ended
  // there.
  struct EngineTally {
    int64_t running = 0, finished = 0;
  };
  // What a write did, applied once it committed: the rows it gave to new
  // entries, and the finished records as it stored them (to be kept so).
  struct Written {
    std::vector<std::pair<Entry*, int64_t>> rows;
    std::vector<std::pair<Entry*, std::string>> finished;
  };

  // `source` null: no file, every record stays in memory. Otherwise at most
  // `keep_finished` finished records stay, beyond those not yet written.
  RecordBook(size_t keep_finished, const RecordSource* source)
      : keep_finished_(keep_finished), source_(source) {}
  RecordBook(const RecordBook&) = delete;
  RecordBook& operator=(const RecordBook&) = delete;

  // ---- changes from the monitor: each returns false when the record was
  // already final or the change is old (nothing changed).
  // `request_frames` is the task's frames after the signature, without the
  // parent. With `hold_since_us` > 0 (when it came, increasing from one
  // call to the next), a new record is held back instead of changed.
  bool Submitted(const protocol::Header& request, const protocol::RoutingMeta& meta,
                 const protocol::TaskSpec& spec, KeptRequest request_frames,
                 int64_t hold_since_us = 0);
  bool Assigned(const TaskId& id, const protocol::Assignment& assignment);
  bool Outcome(const TaskId& id, const protocol::OutcomeMeta& meta,
               const protocol::TaskResult& result, int64_t now_us);

  // ---- reading
  // The kept request of an unfinished task, or null.
  const KeptRequest* RequestOf(const TaskId& id) const;
  // The record of `id`: in memory, or read from the source into *scratch;
  // null when there is none.
  const protocol::TaskRecord* Find(const TaskId& id, protocol::TaskRecord* scratch) const;
  // Start loading what a change of `id`'s record reads first: its slot in
  // the table (Prefetch), then, once that is in, the record itself
  // (PrefetchRecord). A batch's changes issue them a few messages ahead.
  void Prefetch(const TaskId& id) const { entries_.prefetch(id); }
  void PrefetchRecord(const TaskId& id) const {
    if (const std::unique_ptr<Kept>* slot = entries_.find(id)) {
      PrefetchLine(slot->get());
    }
  }
  // Up to `limit` ids after `after` (all with nullopt), of `job` when given,
  // sorted, among the records in memory that the file does not list (every
  // record in memory while none was let go).
  std::vector<TaskId> IdsAfter(const std::optional<TaskId>& after, size_t limit,
                               const std::optional<std::string>& job) const;
  // Sorts the first `limit` ids of *ids and drops the rest.
  static void KeepFirst(std::vector<TaskId>* ids, size_t limit);
  // Calls f(id, record) for every record in memory, in no order (a packed
  // one unpacked for the call: a scan to check the counts against).
  template <class F>
  void ForEachRecord(F&& f) const {
    protocol::TaskRecord scratch;
    entries_.for_each([&](const TaskId& id, const std::unique_ptr<Kept>&) {
      if (const protocol::TaskRecord* r = Find(id, &scratch)) f(id, *r);
    });
  }
  // Calls f(id, record) for every unfinished record (all are in memory), in
  // no order.
  template <class F>
  void ForEachUnfinished(F&& f) const {
    entries_.for_each([&](const TaskId& id, const std::unique_ptr<Kept>& kept) {
      if (!kept->finished()) f(id, static_cast<const Entry&>(*kept).record);
    });
  }
  size_t size() const { return entries_.size(); }
  // Whether some finished records are only in the file.
  bool has_evicted() const { return has_evicted_; }

  // ---- counts
  int64_t waiting() const { return waiting_; }
  int64_t running() const {
    int64_t n = 0;
    for (const auto& [engine, tally] : by_engine_) n += tally.running;
    return n;
  }
  int64_t ok() const { return ok_; }
  int64_t failed() const { return failed_; }
  const std::map<int32_t, EngineTally>& by_engine() const { return by_engine_; }
  const std::map<std::string, protocol::JobSummary>& jobs() const { return jobs_; }
  // A name for a new job: one more than the largest number that names a
  // job (or was given by this call before).
  std::string NewJobName();

  // ---- purging
  // Removes finished records (the listed ones, or all in memory with
  // `all`); returns how many went.
  size_t Purge(const std::vector<TaskId>& ids, bool all);
  // After the file deleted every finished row and zeroed its counts: the
  // same in memory.
  void ForgetFinished();

  // ---- retention (the file drops finished records past a bound, store.h)
  // From now on, counts the dependencies (after and follow) of unfinished
  // records, so that Awaited can answer. Call before restoring.
  void GuardDependencies() { guard_ = true; }
  // Whether an unfinished record names `id` as a dependency.
  // REQUIRES: GuardDependencies was called.
  bool Awaited(const TaskId& id) const { return awaited_.contains(id); }
  // The file deleted the rows of these finished records: they leave memory
  // too. The counts keep them (they count the history).
  // REQUIRES: nothing changed since the last write (!HasChanges()).
  void Dropped(const std::vector<TaskId>& ids);

  // ---- records held back
  // Lists as changed every held record that came at or before `until_us`.
  void ReleaseHeld(int64_t until_us);
  // When the oldest record still held came, or earlier; INT64_MAX when
  // none is held.
  int64_t OldestHeldUs() const;
  // Records held back now.
  size_t held() const { return held_count_; }

  // ---- what a write needs, and what it did
  const std::vector<Entry*>& dirty() const { return dirty_; }
  const std::vector<int64_t>& deleted_rows() const { return deleted_rows_; }
  const std::set<int32_t>& tally_changed() const { return tally_changed_; }
  bool outcomes_changed() const { return outcomes_changed_; }
  const std::set<std::string>& jobs_changed() const { return jobs_changed_; }
  // Rows the next write writes or deletes.
  size_t unflushed() const { return dirty_.size() + deleted_rows_.size(); }
  bool HasChanges() const {
    return unflushed() != 0 || !tally_changed_.empty() || outcomes_changed_ ||
           !jobs_changed_.empty();
  }
  // A write committed: the rows it gave take effect, the finished records
  // it wrote are kept packed, nothing is changed any more, and the oldest
  // finished records beyond keep_finished go.
  void Committed(Written& written);
  // Nothing is changed any more (without a file, nothing is written).
  void Clean();

  // ---- restoring what the file holds, at start
  void RestoreEngineCount(int32_t engine, int64_t finished) {
    by_engine_[engine].finished = finished;
  }
  void RestoreOutcomeCount(TaskState state, int64_t n) {
    (state == TaskState::kOk ? ok_ : failed_) = n;
  }
  void RestoreJob(protocol::JobSummary job);
  // An unfinished record, with its request when it has one.
  void RestoreUnfinished(protocol::TaskRecord record, int64_t row,
                         std::optional<KeptRequest> request);
  // A finished record; they come newest first.
  void RestoreFinished(protocol::TaskRecord record, int64_t row);
  // Every row was read: `evicted` when some finished ones were left in the
  // file, `largest` the largest id in it (nullopt: none, or unknown).
  void Restored(bool evicted, std::optional<TaskId> largest);

 private:
  // What is kept of `id`, a new entry when nothing is (`made` says so):
  // one lookup, and one in the source when records were let go (a finished
  // one comes back).
  Kept& KeptOf(const TaskId& id, bool* made);
  const Kept* FindKept(const TaskId& id) const;
  // The whole entry of `kept` (of `id`): itself, or, packed, a new entry in
  // its place (`kept` is gone then).
  Entry& Whole(const TaskId& id, Kept& kept);
  // Tally of a kept record, whole or packed.
  void TallyKept(const Kept& kept, int delta);
  // Whether the source may hold a record of `id` that memory does not.
  bool MayBeStored(const TaskId& id) const { return has_evicted_ && !(largest_stored_ < id); }
  // Marks an entry to be written at the next write (a held one is held no
  // more).
  void Touch(Entry& e);
  // Holds back a new entry that came at `since_us`.
  void Hold(Entry& e, int64_t since_us);
  // The request of a task that just got its final outcome is not needed.
  void DropRequest(Entry& entry);
  // Marks the failed task `old_id` as replaced by `by` (a resubmission).
  void Replace(const TaskId& old_id, const TaskId& by);
  // Adds (+1) or takes away (-1) a record from the counts.
  void Tally(const protocol::TaskRecord& r, int delta);
  // Lets go of the oldest finished records beyond keep_finished (written
  // ones only).
  void Evict();
  // Counts (on) or uncounts the dependencies of an entry in awaited_.
  void Guard(Entry& e, bool on);

  size_t keep_finished_;
  const RecordSource* source_;
  // Entries stay where they are made (an allocation each), so dirty_ may
  // point at them; Purge takes a purged entry out of dirty_. An entry is
  // packed (replaced) only once it is clean.
  FlatIdMap<std::unique_ptr<Kept>> entries_;
  std::vector<Entry*> dirty_;          // each dirty entry once
  std::vector<int64_t> deleted_rows_;  // rows of purged records
  // Records held back, as they came (ids, not entries: one that changed
  // since is held no more, and may have been let go of; it is skipped).
  struct Held {
    TaskId id;
    int64_t since_us;
  };
  std::deque<Held> held_;
  size_t held_count_ = 0;  // entries with held set
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
  // With guard_: per task id, how many unfinished records name it.
  bool guard_ = false;
  FlatIdMap<int32_t> awaited_;
};

inline bool RecordBook::Kept::finished() const {
  return packed || static_cast<const Entry*>(this)->record.finished();
}

}  // namespace ztask::hub

#endif  // ZTASK_HUB_RECORDS_H_
