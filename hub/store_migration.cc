// The conversions of the hub's SQLite file from its earlier layouts to
// this one (StoreFile::Migrate), each one transaction. Must not: read or
// write a record for any other purpose than converting it.
#include <sqlite3.h>

#include <map>
#include <string>

#include "hub/sqlite_statement.h"
#include "hub/store_file.h"
#include "protocol/codec.h"

namespace ztask::hub {

using sqlite::Column;
using sqlite::Exec;
using sqlite::SqlError;
using sqlite::Statement;

// Version 3 of the file: one row per task, in the order recorded, with
// whether it is finished, an index by id (for records no longer in memory)
// and one of the unfinished rows (all that a start must read), and the
// count of finished tasks per engine. Version 4 adds the count of finished
// tasks by outcome (ok, error), so that a start reads two numbers, not the
// history; version 5 the jobs. Version 2 lacked the column, the indexes and
// the counts; version 1 (two tables keyed by task id) is carried over to 2
// first. Each step is one transaction.
Status StoreFile::Migrate(const std::string& path) {
  const int64_t version = Statement(db_, "PRAGMA user_version").ScalarOr(0);
  if (version >= 5) return Status::Ok();
  if (version == 4) return AddJobs(path);
  if (version == 3) {
    ZTASK_RETURN_IF_ERROR(AddOutcomeCounts(path));
    return AddJobs(path);
  }
  if (version < 2) ZTASK_RETURN_IF_ERROR(ToRowsInOrder(path));
  ZTASK_RETURN_IF_ERROR(SetUp(
      "BEGIN;"
      "ALTER TABLE tasks ADD COLUMN done INTEGER NOT NULL DEFAULT 0;"
      "CREATE TABLE finished_by_engine (engine INTEGER PRIMARY KEY, finished INTEGER NOT NULL);",
      path));
  if (Status marked = AddFinishedColumn(); !marked.ok()) {
    Exec(db_, "ROLLBACK");
    return marked;
  }
  ZTASK_RETURN_IF_ERROR(SetUp(
      "CREATE INDEX tasks_by_id ON tasks (id);"
      "CREATE INDEX tasks_open ON tasks (seq) WHERE done = 0;"
      "PRAGMA user_version = 3; COMMIT;",
      path));
  ZTASK_RETURN_IF_ERROR(AddOutcomeCounts(path));
  return AddJobs(path);
}

Status StoreFile::ToRowsInOrder(const std::string& path) {
  auto has_table = [this](const char* name) {
    Statement table(db_, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1");
    sqlite3_bind_text(table.get(), 1, name, -1, SQLITE_STATIC);
    return table.ok() && sqlite3_step(table.get()) == SQLITE_ROW;
  };
  std::string sql =
      "BEGIN;"
      "CREATE TABLE tasks_v2 (seq INTEGER PRIMARY KEY, id BLOB NOT NULL, record BLOB NOT NULL, "
      "request BLOB);";
  if (has_table("requests")) {
    sql +=
        "INSERT INTO tasks_v2 (id, record, request) SELECT t.id, t.record, r.frames "
        "FROM tasks t LEFT JOIN requests r ON r.id = t.id;"
        "DROP TABLE tasks; DROP TABLE requests;";
  } else if (has_table("tasks")) {  // from before requests were kept
    sql += "INSERT INTO tasks_v2 (id, record) SELECT id, record FROM tasks; DROP TABLE tasks;";
  }
  sql += "ALTER TABLE tasks_v2 RENAME TO tasks; PRAGMA user_version = 2; COMMIT;";
  return SetUp(sql, path);
}

// Records of earlier layouts belong to no job: nothing to read.
Status StoreFile::AddJobs(const std::string& path) {
  return SetUp(
      "BEGIN; ALTER TABLE tasks ADD COLUMN job TEXT;"
      "CREATE INDEX tasks_by_job ON tasks (job, id) WHERE job IS NOT NULL;"
      "CREATE TABLE jobs (name TEXT PRIMARY KEY, ok INTEGER NOT NULL, "
      "failed INTEGER NOT NULL, replaced INTEGER NOT NULL, "
      "first_submit INTEGER NOT NULL, last_finish INTEGER NOT NULL);"
      "PRAGMA user_version = 5; COMMIT;",
      path);
}

Status StoreFile::SetUp(const std::string& sql, const std::string& path) {
  if (Exec(db_, sql.c_str())) return Status::Ok();
  Status error = SqlError(db_, "cannot set up the tables of the task database " + path);
  Exec(db_, "ROLLBACK");
  return error;
}

void StoreFile::ReportProgress(size_t* read) const {
  if (progress_ && ++*read % 1000000 == 0) progress_(*read);
}

Status StoreFile::AddOutcomeCounts(const std::string& path) {
  ZTASK_RETURN_IF_ERROR(SetUp(
      "BEGIN; CREATE TABLE finished_counts (state INTEGER PRIMARY KEY, n INTEGER NOT NULL);",
      path));
  int64_t counts[2] = {0, 0};
  {
    Statement select(db_, "SELECT record FROM tasks WHERE done = 1");
    if (!select.ok()) return SqlError(db_, "cannot convert the tasks");
    size_t read = 0;
    while (sqlite3_step(select.get()) == SQLITE_ROW) {
      ReportProgress(&read);
      auto record = protocol::DecodeStored<protocol::TaskRecord>(Column(select.get(), 0));
      if (record.ok() && IsFinal(record->state)) ++counts[record->state == TaskState::kOk ? 0 : 1];
    }
  }
  const std::string sql = "INSERT INTO finished_counts (state, n) VALUES (" +
                          std::to_string(static_cast<int>(TaskState::kOk)) + ", " +
                          std::to_string(counts[0]) + "), (" +
                          std::to_string(static_cast<int>(TaskState::kError)) + ", " +
                          std::to_string(counts[1]) + "); PRAGMA user_version = 4; COMMIT;";
  if (!Exec(db_, sql.c_str())) {
    Status error = SqlError(db_, "cannot convert the tasks");
    Exec(db_, "ROLLBACK");
    return error;
  }
  return Status::Ok();
}

Status StoreFile::AddFinishedColumn() {
  Statement select(db_, "SELECT seq, record FROM tasks");
  Statement mark(db_, "UPDATE tasks SET done = 1 WHERE seq = ?1");
  Statement count(db_, "INSERT INTO finished_by_engine (engine, finished) VALUES (?1, ?2)");
  if (!select.ok() || !mark.ok() || !count.ok()) return SqlError(db_, "cannot convert the tasks");
  std::map<int32_t, int64_t> finished;
  size_t read = 0;
  while (sqlite3_step(select.get()) == SQLITE_ROW) {
    ReportProgress(&read);
    auto record = protocol::DecodeStored<protocol::TaskRecord>(Column(select.get(), 1));
    if (!record.ok() || !IsFinal(record->state)) continue;
    if (record->engine_id) ++finished[*record->engine_id];
    if (!mark.Run(sqlite3_column_int64(select.get(), 0))) {
      return SqlError(db_, "cannot convert the tasks");
    }
  }
  for (const auto& [engine, n] : finished) {
    if (!count.Run(engine, n)) return SqlError(db_, "cannot convert the tasks");
  }
  return Status::Ok();
}

}  // namespace ztask::hub
