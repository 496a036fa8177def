// TaskStore: the hub's record of every task, built from the scheduler's
// monitor messages. Queries read an in-memory index; with a database file,
// every change is also written to SQLite (WAL mode) in batched transactions
// by Flush(), so writing is never per message. Records in the file are loaded
// at start, so they survive a restart of the hub.
//
// Thread safety: owned by one thread.
#ifndef ZTASK_HUB_STORE_H_
#define ZTASK_HUB_STORE_H_

#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "protocol/messages.h"
#include "ztask/status.h"

struct sqlite3;

namespace ztask::hub {

class TaskStore {
 public:
  // ":memory:" keeps records in memory only; any other path is a SQLite file,
  // created when missing.
  static Result<std::unique_ptr<TaskStore>> Open(const std::string& path);
  ~TaskStore();

  void Submitted(const protocol::Header& request, const protocol::RoutingMeta& meta,
                 const protocol::TaskSpec& spec);
  void Assigned(const TaskId& id, const protocol::Assignment& assignment);
  void Outcome(const TaskId& id, const protocol::OutcomeMeta& meta,
               const protocol::TaskResult& result, int64_t now_us);

  const protocol::TaskRecord* Find(const TaskId& id) const;
  // Removes finished records (the listed ones, or all with `all`); returns
  // how many went.
  size_t Purge(const std::vector<TaskId>& ids, bool all);
  const std::unordered_map<TaskId, protocol::TaskRecord, TaskIdHash>& records() const {
    return records_;
  }

  // Writes every change since the last flush in one transaction.
  Status Flush();
  size_t unflushed() const { return dirty_.size() + deleted_.size(); }

 private:
  TaskStore() = default;
  Status Load();
  protocol::TaskRecord& Touch(const TaskId& id);

  sqlite3* db_ = nullptr;
  std::unordered_map<TaskId, protocol::TaskRecord, TaskIdHash> records_;
  std::unordered_set<TaskId, TaskIdHash> dirty_;
  std::unordered_set<TaskId, TaskIdHash> deleted_;
};

}  // namespace ztask::hub

#endif  // ZTASK_HUB_STORE_H_
