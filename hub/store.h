// TaskStore: the hub's record of every task, built from the scheduler's
// monitor messages. Queries read an in-memory index; with a database file,
// every change is also written to SQLite (WAL mode) in batched transactions
// by Flush(), so writing is never per message. Records in the file are loaded
// at start, so they survive a restart of the hub.
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

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "protocol/flat_id_map.h"
#include "protocol/messages.h"
#include "ztask/status.h"

struct sqlite3;

namespace ztask::hub {

class TaskStore {
 public:
  // ":memory:" keeps records in memory only; any other path is a SQLite file,
  // created when missing.
  // `power`: every commit reaches the disk before it returns
  // (synchronous=FULL), so what was acknowledged survives a power loss;
  // otherwise (synchronous=NORMAL in WAL mode) it survives a crash of the
  // process, and a power loss may take the latest commits.
  // `progress`, if given, is called with the count of records loaded after
  // each million of them.
  static Result<std::unique_ptr<TaskStore>> Open(
      const std::string& path, bool power = false,
      const std::function<void(size_t)>& progress = {});
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

  const protocol::TaskRecord* Find(const TaskId& id) const;
  // Removes finished records (the listed ones, or all with `all`); returns
  // how many went.
  size_t Purge(const std::vector<TaskId>& ids, bool all);
  size_t size() const { return entries_.size(); }
  // SQLite's synchronous level on this connection: 2 (FULL) when opened for
  // power loss, 1 (NORMAL) otherwise, 0 without a database.
  int synchronous_level() const;
  // Calls f(id, record) for every record, in no order.
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
  const std::map<int32_t, EngineTally>& by_engine() const { return by_engine_; }

  // Writes every change since the last flush in one transaction.
  Status Flush();
  // Rows the next flush writes or deletes.
  size_t unflushed() const { return dirty_.size() + deleted_rows_.size(); }
  bool durable() const { return db_ != nullptr; }

 private:
  TaskStore() = default;
  Status Migrate(const std::string& path);
  Status Load(const std::function<void(size_t)>& progress);
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
  // The entry of `id`, made when missing (`made` says so): one lookup.
  Entry& EntryOf(const TaskId& id, bool* made);
  // Marks an entry to be written at the next flush.
  void Touch(Entry& e);
  // After a flush: nothing is dirty.
  void Clean();
  const Entry* FindEntry(const TaskId& id) const;
  // The request of a task that just got its final outcome is not needed.
  void DropRequest(Entry& entry);
  // Adds (+1) or takes away (-1) a record from the counts.
  void Tally(const protocol::TaskRecord& r, int delta);

  sqlite3* db_ = nullptr;
  // Entries stay where they are made (an allocation each), so dirty_ may
  // point at them; Purge takes a purged entry out of dirty_.
  FlatIdMap<std::unique_ptr<Entry>> entries_;
  std::vector<Entry*> dirty_;          // each dirty entry once
  std::vector<int64_t> deleted_rows_;  // rows of purged records
  int64_t waiting_ = 0;
  std::map<int32_t, EngineTally> by_engine_;
};

}  // namespace ztask::hub

#endif  // ZTASK_HUB_STORE_H_
