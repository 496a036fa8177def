#include "hub/store.h"

#include <sqlite3.h>

#include "protocol/codec.h"

namespace ztask::hub {
namespace {

bool Finished(const protocol::TaskRecord& r) { return r.state == "ok" || r.state == "error"; }

Status SqlError(sqlite3* db, const std::string& what) {
  return Status::IoError(what + ": " + (db ? sqlite3_errmsg(db) : "no database"));
}

// A prepared statement, finalized when it goes.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) { sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  ~Statement() { sqlite3_finalize(stmt_); }
  sqlite3_stmt* get() { return stmt_; }
  bool ok() const { return stmt_ != nullptr; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

// The bytes must stay until the statement is stepped.
void BindBlob(sqlite3_stmt* stmt, int index, std::string_view bytes) {
  sqlite3_bind_blob(stmt, index, bytes.data(), static_cast<int>(bytes.size()), SQLITE_STATIC);
}

// A task id as its 16-byte key, on the stack.
struct Key {
  explicit Key(const TaskId& id) { id.ToBytes(bytes); }
  std::string_view view() const { return {bytes, sizeof bytes}; }
  char bytes[16];
};

}  // namespace

Result<std::unique_ptr<TaskStore>> TaskStore::Open(const std::string& path) {
  std::unique_ptr<TaskStore> store(new TaskStore());
  if (path == ":memory:") return store;
  if (sqlite3_open(path.c_str(), &store->db_) != SQLITE_OK) {
    return SqlError(store->db_, "cannot open the task database " + path);
  }
  sqlite3_busy_timeout(store->db_, 5000);
  // Keyed by random ids, a flush touches pages all over the tables: a cache
  // of up to 64 MiB keeps them from being written out and read back within
  // one transaction, and tables without a rowid hold each row in one tree.
  const char* setup =
      "PRAGMA journal_mode=WAL;"
      "PRAGMA synchronous=NORMAL;"
      "PRAGMA cache_size=-65536;"
      "CREATE TABLE IF NOT EXISTS tasks (id BLOB PRIMARY KEY, record BLOB NOT NULL) "
      "WITHOUT ROWID;"
      "CREATE TABLE IF NOT EXISTS requests (id BLOB PRIMARY KEY, frames BLOB NOT NULL) "
      "WITHOUT ROWID;";
  if (sqlite3_exec(store->db_, setup, nullptr, nullptr, nullptr) != SQLITE_OK) {
    return SqlError(store->db_, "cannot set up the task database " + path);
  }
  ZTASK_RETURN_IF_ERROR(store->Load());
  return store;
}

TaskStore::~TaskStore() {
  if (db_) {
    (void)Flush();
    sqlite3_close(db_);
  }
}

Status TaskStore::Load() {
  Statement select(db_, "SELECT record FROM tasks");
  if (!select.ok()) return SqlError(db_, "cannot read the task database");
  while (sqlite3_step(select.get()) == SQLITE_ROW) {
    const void* blob = sqlite3_column_blob(select.get(), 0);
    const int size = sqlite3_column_bytes(select.get(), 0);
    auto record = protocol::DecodeBody<protocol::TaskRecord>(
        {static_cast<const char*>(blob), static_cast<size_t>(size)});
    if (record.ok()) {
      Tally(*record, +1);
      records_[record->id] = std::move(*record);
    }
  }
  Statement requests(db_, "SELECT id, frames FROM requests");
  if (!requests.ok()) return SqlError(db_, "cannot read the task database's requests");
  while (sqlite3_step(requests.get()) == SQLITE_ROW) {
    const void* key = sqlite3_column_blob(requests.get(), 0);
    const int key_size = sqlite3_column_bytes(requests.get(), 0);
    const void* blob = sqlite3_column_blob(requests.get(), 1);
    const int size = sqlite3_column_bytes(requests.get(), 1);
    if (key_size != 16) continue;
    auto stored = protocol::DecodeBody<protocol::FrameList>(
        {static_cast<const char*>(blob), static_cast<size_t>(size)});
    const TaskId id = TaskId::FromBytes({static_cast<const char*>(key), 16});
    auto record = records_.find(id);
    if (!stored.ok() || record == records_.end() || Finished(record->second)) continue;
    requests_[id] = std::move(stored->frames);
  }
  return Status::Ok();
}

protocol::TaskRecord& TaskStore::Touch(const TaskId& id) {
  dirty_.insert(id);
  deleted_.erase(id);
  protocol::TaskRecord& r = records_[id];
  r.id = id;
  return r;
}

bool TaskStore::Submitted(const protocol::Header& request, const protocol::RoutingMeta& meta,
                          const protocol::TaskSpec& spec, std::vector<std::string> request_frames) {
  if (auto* known = Find(request.id); known && Finished(*known)) return false;
  protocol::TaskRecord& r = Touch(request.id);
  Tally(r, -1);
  r.label = spec.label;
  r.client = request.session;
  if (r.state.empty()) r.state = "waiting";  // what came later for it stays
  r.submitted_us = request.date_us;
  r.routing = meta;
  Tally(r, +1);
  if (!requests_.count(request.id)) {
    requests_[request.id] = std::move(request_frames);
    new_requests_.insert(request.id);
  }
  return true;
}

const std::vector<std::string>* TaskStore::RequestOf(const TaskId& id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : &it->second;
}

void TaskStore::DropRequest(const TaskId& id) {
  if (requests_.erase(id) == 0) return;
  // Never written: nothing to delete.
  if (new_requests_.erase(id) == 0) done_requests_.insert(id);
}

// The monitor may repeat itself, and after a restart of the hub deliver an
// older batch after a newer one: a change applies only when it is news. An
// attempt's assignment comes before its outcome, so an assignment of an
// attempt already counted is old.
bool TaskStore::Assigned(const TaskId& id, const protocol::Assignment& assignment) {
  if (auto* known = Find(id);
      known && (Finished(*known) || assignment.attempt <= known->attempts)) {
    return false;
  }
  protocol::TaskRecord& r = Touch(id);
  Tally(r, -1);
  r.state = "running";
  r.engine_id = assignment.engine_id;
  r.attempts = assignment.attempt;
  Tally(r, +1);
  return true;
}

bool TaskStore::Outcome(const TaskId& id, const protocol::OutcomeMeta& meta,
                        const protocol::TaskResult& result, int64_t now_us) {
  if (auto* known = Find(id);
      known &&
      (Finished(*known) ||
       (!meta.final && (meta.attempt < known->attempts ||
                        (meta.attempt == known->attempts && known->state == "waiting"))))) {
    return false;  // final already, or a retry of an attempt already counted
  }
  protocol::TaskRecord& r = Touch(id);
  Tally(r, -1);
  r.attempts = std::max(r.attempts, meta.attempt);
  r.error_type = meta.error_type;
  r.error_message = result.error_message;
  if (meta.engine_id) r.engine_id = meta.engine_id;
  if (!meta.final) {
    r.state = "waiting";  // queued again for another attempt
    Tally(r, +1);
    return true;
  }
  DropRequest(id);
  r.state = meta.ok ? "ok" : "error";
  r.result = result.result;
  r.exit_code = result.exit_code;
  r.stdout_text = result.stdout_text;
  r.stderr_text = result.stderr_text;
  r.stdout_truncated = result.stdout_truncated;
  r.stderr_truncated = result.stderr_truncated;
  if (result.started_us) r.started_us = result.started_us;
  r.completed_us = result.completed_us ? result.completed_us : now_us;
  Tally(r, +1);
  return true;
}

void TaskStore::Tally(const protocol::TaskRecord& r, int delta) {
  if (r.state == "waiting") {
    waiting_ += delta;
  } else if (r.engine_id) {
    if (r.state == "running") by_engine_[*r.engine_id].running += delta;
    if (Finished(r)) by_engine_[*r.engine_id].finished += delta;
  }
}

const protocol::TaskRecord* TaskStore::Find(const TaskId& id) const {
  auto it = records_.find(id);
  return it == records_.end() ? nullptr : &it->second;
}

size_t TaskStore::Purge(const std::vector<TaskId>& ids, bool all) {
  std::vector<TaskId> doomed;
  if (all) {
    for (const auto& [id, r] : records_) {
      if (Finished(r)) doomed.push_back(id);
    }
  } else {
    for (const TaskId& id : ids) {
      if (auto* r = Find(id); r && Finished(*r)) doomed.push_back(id);
    }
  }
  for (const TaskId& id : doomed) {
    DropRequest(id);
    Tally(records_.at(id), -1);
    records_.erase(id);
    dirty_.erase(id);
    deleted_.insert(id);
  }
  return doomed.size();
}

Status TaskStore::Flush() {
  if (!db_) {  // nothing to write: forget what changed
    dirty_.clear();
    deleted_.clear();
    new_requests_.clear();
    done_requests_.clear();
    return Status::Ok();
  }
  if (unflushed() == 0) return Status::Ok();
  if (sqlite3_exec(db_, "BEGIN", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return SqlError(db_, "cannot begin a transaction");
  }
  Statement upsert(db_, "INSERT OR REPLACE INTO tasks (id, record) VALUES (?1, ?2)");
  Statement erase(db_, "DELETE FROM tasks WHERE id = ?1");
  bool ok = upsert.ok() && erase.ok();
  for (const TaskId& id : dirty_) {
    if (!ok) break;
    const Key key(id);
    const std::string blob = protocol::EncodeBody(records_.at(id));
    BindBlob(upsert.get(), 1, key.view());
    BindBlob(upsert.get(), 2, blob);
    ok = sqlite3_step(upsert.get()) == SQLITE_DONE;
    sqlite3_reset(upsert.get());
  }
  for (const TaskId& id : deleted_) {
    if (!ok) break;
    const Key key(id);
    BindBlob(erase.get(), 1, key.view());
    ok = sqlite3_step(erase.get()) == SQLITE_DONE;
    sqlite3_reset(erase.get());
  }
  if (ok) ok = WriteRequests().ok();
  if (!ok) {
    Status error = SqlError(db_, "cannot write task records");
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return error;  // the records stay in memory and dirty: the next flush retries
  }
  if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
    Status error = SqlError(db_, "cannot commit task records");
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return error;
  }
  dirty_.clear();
  deleted_.clear();
  new_requests_.clear();
  done_requests_.clear();
  return Status::Ok();
}

// Within Flush()'s transaction.
Status TaskStore::WriteRequests() {
  Statement insert(db_, "INSERT OR REPLACE INTO requests (id, frames) VALUES (?1, ?2)");
  Statement erase(db_, "DELETE FROM requests WHERE id = ?1");
  if (!insert.ok() || !erase.ok()) return SqlError(db_, "cannot write requests");
  for (const TaskId& id : new_requests_) {
    const Key key(id);
    const std::string blob = protocol::EncodeBody(protocol::FrameList{requests_.at(id)});
    BindBlob(insert.get(), 1, key.view());
    BindBlob(insert.get(), 2, blob);
    const bool ok = sqlite3_step(insert.get()) == SQLITE_DONE;
    sqlite3_reset(insert.get());
    if (!ok) return SqlError(db_, "cannot write requests");
  }
  for (const TaskId& id : done_requests_) {
    const Key key(id);
    BindBlob(erase.get(), 1, key.view());
    const bool ok = sqlite3_step(erase.get()) == SQLITE_DONE;
    sqlite3_reset(erase.get());
    if (!ok) return SqlError(db_, "cannot delete requests");
  }
  return Status::Ok();
}

}  // namespace ztask::hub
