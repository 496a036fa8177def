// Retention (StoreFile::DropFinished, store_file.h): deleting finished rows
// past a bound on their count or their age. Must not: decide which records
// a task waits for (the RecordBook answers `awaited`), or run on its own:
// the store calls it between writes, a bounded number of rows at a time.
//
// The rows are in the order recorded, so the oldest finished ones are at
// the front of the table: a call reads from there and stops at the first
// row it keeps for its age, or once it has chosen `most`. Counting the
// finished rows costs two counts over indexes (all rows, by id; unfinished
// ones, partial): SQLite counts a b-tree by its pages, a few hundred for a
// hundred thousand rows.
#include <sqlite3.h>

#include "hub/sqlite_statement.h"
#include "hub/store_file.h"
#include "protocol/codec.h"

namespace ztask::hub {

using sqlite::Column;
using sqlite::Exec;
using sqlite::SqlError;
using sqlite::Statement;

Status StoreFile::ChooseDropped(const Retention& bound,
                                const std::function<bool(const TaskId&)>& awaited,
                                std::vector<std::pair<int64_t, TaskId>>* rows) {
  int64_t beyond = 0;  // the oldest this many finished rows are past the count bound
  if (bound.max_finished > 0) {
    const int64_t all = Statement(db_, "SELECT count(*) FROM tasks").ScalarOr(-1);
    const int64_t open = Statement(db_, "SELECT count(*) FROM tasks WHERE done = 0").ScalarOr(-1);
    if (all < 0 || open < 0) return SqlError(db_, "cannot count the finished task records");
    beyond = all - open - static_cast<int64_t>(bound.max_finished);
  }
  if (beyond <= 0 && bound.finished_before_us == 0) return Status::Ok();
  Statement oldest(db_, "SELECT seq, id, record FROM tasks WHERE done = 1 ORDER BY seq");
  if (!oldest.ok()) return SqlError(db_, "cannot read the finished task records");
  for (int64_t position = 0; rows->size() < bound.most; ++position) {
    const int step = sqlite3_step(oldest.get());
    if (step == SQLITE_DONE) break;
    if (step != SQLITE_ROW) return SqlError(db_, "cannot read the finished task records");
    if (position >= beyond) {  // kept for its count: maybe not for its age
      if (bound.finished_before_us == 0) break;
      auto record = protocol::DecodeStored<protocol::TaskRecord>(Column(oldest.get(), 2));
      // An unreadable record has no age: it goes with the old ones.
      if (record.ok() && record->completed_us.value_or(0) >= bound.finished_before_us) break;
    }
    if (sqlite3_column_bytes(oldest.get(), 1) != 16) continue;
    const TaskId id = TaskId::FromBytes(Column(oldest.get(), 1));
    if (awaited(id)) continue;  // a waiting task depends on it: it stays
    rows->emplace_back(sqlite3_column_int64(oldest.get(), 0), id);
  }
  return Status::Ok();
}

Status StoreFile::DropFinished(const Retention& bound,
                               const std::function<bool(const TaskId&)>& awaited,
                               std::vector<TaskId>* dropped) {
  if (bound.most == 0) return Status::Ok();
  if (!Exec(db_, "BEGIN")) return SqlError(db_, "cannot begin a transaction");
  std::vector<std::pair<int64_t, TaskId>> rows;
  Status chosen = ChooseDropped(bound, awaited, &rows);
  if (chosen.ok() && !rows.empty()) {
    Statement erase(db_, "DELETE FROM tasks WHERE seq = ?1");
    if (!erase.ok()) chosen = SqlError(db_, "cannot delete task records");
    for (size_t i = 0; chosen.ok() && i < rows.size(); ++i) {
      if (!erase.Run(rows[i].first)) chosen = SqlError(db_, "cannot delete task records");
    }
  }
  if (!chosen.ok()) {
    Exec(db_, "ROLLBACK");
    return chosen;
  }
  if (!Exec(db_, "COMMIT")) {
    Status error = SqlError(db_, "cannot commit the deletion of task records");
    Exec(db_, "ROLLBACK");
    return error;
  }
  for (const auto& [seq, id] : rows) dropped->push_back(id);
  return Status::Ok();
}

}  // namespace ztask::hub
