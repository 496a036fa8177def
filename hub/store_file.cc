// The SQLite file behind the hub's records (store_file.h): opening it, its
// statements and transactions, loading and writing (the conversions of
// earlier layouts are in store_migration.cc). Must not: decide what a
// record holds or which records change (records.h).
#include "hub/store_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include <algorithm>
#include <string_view>

#include "hub/sqlite_statement.h"
#include "protocol/codec.h"

namespace ztask::hub {

using sqlite::Blob;
using sqlite::Column;
using sqlite::Exec;
using sqlite::Key;
using sqlite::Null;
using sqlite::SqlError;
using sqlite::Statement;
using sqlite::Text;

Result<std::unique_ptr<StoreFile>> StoreFile::Open(const std::string& path, bool power,
                                                   std::function<void(size_t)> progress) {
  // Records hold every task's command, environment and output: 0600,
  // whoever made the file and whatever the umask. SQLite gives the -wal and
  // -shm files the mode of the database file.
  if (const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600); fd >= 0) {
    ::fchmod(fd, 0600);
    ::close(fd);
  }
  for (const char* suffix : {"-wal", "-shm"}) ::chmod((path + suffix).c_str(), 0600);
  // The loop's connection is the loop's alone (the checkpointer has its
  // own), and nothing reads SQLite's memory statistics: without either
  // lock SQLite takes a mutex on no call and no allocation, where they were
  // a twentieth of the hub's CPU under a stream of tasks. The statistics
  // can only be turned off before SQLite starts; later this does nothing.
  static const bool kNoMemoryStatistics = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) == SQLITE_OK;
  (void)kNoMemoryStatistics;
  sqlite3* db = nullptr;
  const int opened = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  std::unique_ptr<StoreFile> file(new StoreFile(db, std::move(progress)));
  if (opened != SQLITE_OK) return SqlError(db, "cannot open the task database " + path);
  ZTASK_RETURN_IF_ERROR(file->Configure(path, power));
  ZTASK_RETURN_IF_ERROR(file->Migrate(path));
  ZTASK_RETURN_IF_ERROR(file->Prepare());
  ZTASK_RETURN_IF_ERROR(file->StartCheckpoints(path));
  return file;
}

StoreFile::~StoreFile() {
  checkpointer_.reset();  // its connection first: the writer's close checkpoints the rest
  sqlite3_finalize(find_);
  sqlite3_close(db_);
}

// A new file has 16 KiB pages: the WAL is written a page a call, and a
// quarter of the calls took a tenth of the hub's CPU off a no-op (a file
// made with 4 KiB pages keeps them). Checkpoints come every 32 MiB of WAL,
// on the checkpointer's thread once the file is ready (StartCheckpoints).
Status StoreFile::Configure(const std::string& path, bool power) {
  sqlite3_busy_timeout(db_, 5000);
  const std::string setup = std::string("PRAGMA page_size=16384;PRAGMA journal_mode=WAL;") +
                            (power ? "PRAGMA synchronous=FULL;" : "PRAGMA synchronous=NORMAL;") +
                            "PRAGMA cache_size=-65536;";
  if (!Exec(db_, setup.c_str())) return SqlError(db_, "cannot set up the task database " + path);
  const std::string checkpoint =
      "PRAGMA wal_autocheckpoint=" + std::to_string(CheckpointPages()) + ";";
  if (!Exec(db_, checkpoint.c_str())) {
    return SqlError(db_, "cannot set up the task database " + path);
  }
  return Status::Ok();
}

// 32 MiB of the file's pages.
int64_t StoreFile::CheckpointPages() const {
  return (32 << 20) / std::max<int64_t>(512, Statement(db_, "PRAGMA page_size").ScalarOr(4096));
}

Status StoreFile::StartCheckpoints(const std::string& path) {
  auto checkpointer = Checkpointer::Start(path, CheckpointPages());
  if (!checkpointer.ok()) return checkpointer.status();
  checkpointer_ = std::move(*checkpointer);
  checkpointer_->Attach(db_);
  return Status::Ok();
}

int StoreFile::synchronous_level() const {
  return static_cast<int>(Statement(db_, "PRAGMA synchronous").ScalarOr(-1));
}

Status StoreFile::Prepare() {
  if (sqlite3_prepare_v2(db_, "SELECT seq, record FROM tasks WHERE id = ?1", -1, &find_,
                         nullptr) != SQLITE_OK) {
    return SqlError(db_, "cannot read the task database");
  }
  return Status::Ok();
}

// ---- loading ---------------------------------------------------------------

Status StoreFile::Load(RecordBook* book, size_t keep_finished) {
  ZTASK_RETURN_IF_ERROR(LoadEngineCounts(book));
  ZTASK_RETURN_IF_ERROR(LoadOutcomeCounts(book));
  ZTASK_RETURN_IF_ERROR(LoadJobs(book));
  ZTASK_RETURN_IF_ERROR(LoadUnfinished(book));
  auto finished = LoadLatestFinished(book, keep_finished);
  if (!finished.ok()) return finished.status();
  book->Restored(*finished >= keep_finished, LargestId());
  return Status::Ok();
}

Status StoreFile::LoadEngineCounts(RecordBook* book) {
  Statement counts(db_, "SELECT engine, finished FROM finished_by_engine");
  if (!counts.ok()) return SqlError(db_, "cannot read the task database");
  while (sqlite3_step(counts.get()) == SQLITE_ROW) {
    book->RestoreEngineCount(sqlite3_column_int(counts.get(), 0),
                             sqlite3_column_int64(counts.get(), 1));
  }
  return Status::Ok();
}

Status StoreFile::LoadOutcomeCounts(RecordBook* book) {
  Statement outcomes(db_, "SELECT state, n FROM finished_counts");
  if (!outcomes.ok()) return SqlError(db_, "cannot read the task database");
  while (sqlite3_step(outcomes.get()) == SQLITE_ROW) {
    book->RestoreOutcomeCount(static_cast<TaskState>(sqlite3_column_int(outcomes.get(), 0)),
                              sqlite3_column_int64(outcomes.get(), 1));
  }
  return Status::Ok();
}

Status StoreFile::LoadJobs(RecordBook* book) {
  Statement jobs(db_, "SELECT name, ok, failed, replaced, first_submit, last_finish FROM jobs");
  if (!jobs.ok()) return SqlError(db_, "cannot read the task database");
  while (sqlite3_step(jobs.get()) == SQLITE_ROW) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(jobs.get(), 0));
    if (!text) continue;
    protocol::JobSummary j;
    j.name = text;
    j.ok = sqlite3_column_int64(jobs.get(), 1);
    j.failed = sqlite3_column_int64(jobs.get(), 2);
    j.replaced = sqlite3_column_int64(jobs.get(), 3);
    j.first_submit_us = sqlite3_column_int64(jobs.get(), 4);
    j.last_finish_us = sqlite3_column_int64(jobs.get(), 5);
    book->RestoreJob(std::move(j));
  }
  return Status::Ok();
}

// Through the partial index of the unfinished rows, with their requests.
Status StoreFile::LoadUnfinished(RecordBook* book) {
  Statement select(db_, "SELECT seq, record, request FROM tasks WHERE done = 0");
  if (!select.ok()) return SqlError(db_, "cannot read the task database");
  while (sqlite3_step(select.get()) == SQLITE_ROW) {
    auto record = protocol::DecodeStored<protocol::TaskRecord>(Column(select.get(), 1));
    if (!record.ok()) continue;
    std::optional<KeptRequest> request;
    if (sqlite3_column_type(select.get(), 2) != SQLITE_NULL) {
      request = KeptRequest::FromStored(Column(select.get(), 2));
    }
    book->RestoreUnfinished(std::move(*record), sqlite3_column_int64(select.get(), 0),
                            std::move(request));
  }
  return Status::Ok();
}

Result<size_t> StoreFile::LoadLatestFinished(RecordBook* book, size_t keep_finished) {
  Statement select(db_, "SELECT seq, record FROM tasks WHERE done = 1 ORDER BY seq DESC LIMIT ?1");
  if (!select.ok()) return SqlError(db_, "cannot read the task database");
  sqlite3_bind_int64(select.get(), 1, static_cast<int64_t>(keep_finished));
  size_t rows = 0;
  while (sqlite3_step(select.get()) == SQLITE_ROW) {
    ++rows;
    auto record = protocol::DecodeStored<protocol::TaskRecord>(Column(select.get(), 1));
    if (!record.ok()) continue;
    book->RestoreFinished(std::move(*record), sqlite3_column_int64(select.get(), 0));
  }
  return rows;
}

std::optional<TaskId> StoreFile::LargestId() {
  Statement largest(db_, "SELECT max(id) FROM tasks");
  if (largest.ok() && sqlite3_step(largest.get()) == SQLITE_ROW &&
      sqlite3_column_bytes(largest.get(), 0) == 16) {
    return TaskId::FromBytes(Column(largest.get(), 0));
  }
  return std::nullopt;
}

// ---- reading one record or a page of ids -----------------------------------

bool StoreFile::ReadStored(const TaskId& id, protocol::TaskRecord* record, int64_t* row) const {
  if (!find_) return false;
  const Key key(id);
  sqlite3_bind_blob(find_, 1, key.bytes, sizeof key.bytes, SQLITE_STATIC);
  bool found = false;
  if (sqlite3_step(find_) == SQLITE_ROW) {
    auto decoded = protocol::DecodeStored<protocol::TaskRecord>(Column(find_, 1));
    if (decoded.ok()) {
      *record = std::move(*decoded);
      *row = sqlite3_column_int64(find_, 0);
      found = true;
    }
  }
  sqlite3_reset(find_);
  return found;
}

void StoreFile::IdsAfter(const std::optional<TaskId>& after, size_t limit,
                         const std::optional<std::string>& job, std::vector<TaskId>* ids) const {
  Statement select(db_, job ? (after ? "SELECT id FROM tasks WHERE job = ?3 AND id > ?1 "
                                       "ORDER BY id LIMIT ?2"
                                     : "SELECT id FROM tasks WHERE job = ?3 ORDER BY id LIMIT ?2")
                       : after ? "SELECT id FROM tasks WHERE id > ?1 ORDER BY id LIMIT ?2"
                               : "SELECT id FROM tasks ORDER BY id LIMIT ?2");
  if (!select.ok()) return;
  if (job) sqlite3_bind_text(select.get(), 3, job->data(), static_cast<int>(job->size()), SQLITE_STATIC);
  std::optional<Key> key;
  if (after) {
    key.emplace(*after);
    sqlite3_bind_blob(select.get(), 1, key->bytes, sizeof key->bytes, SQLITE_STATIC);
  }
  sqlite3_bind_int64(select.get(), 2, static_cast<int64_t>(limit));
  while (sqlite3_step(select.get()) == SQLITE_ROW) {
    if (sqlite3_column_bytes(select.get(), 0) != 16) continue;
    ids->push_back(TaskId::FromBytes(Column(select.get(), 0)));
  }
}

// ---- writing ---------------------------------------------------------------

Result<RecordBook::Written> StoreFile::Write(const RecordBook& book) {
  if (!Exec(db_, "BEGIN")) return SqlError(db_, "cannot begin a transaction");
  // Row numbers count only once the transaction holding them commits.
  RecordBook::Written written;
  Status status = WriteRecords(book, &written);
  if (status.ok()) status = DeleteRows(book);
  if (status.ok()) status = WriteCounts(book);
  if (status.ok()) status = WriteJobs(book);
  if (!status.ok()) {
    Exec(db_, "ROLLBACK");
    return status;  // the records stay in memory and changed: the next write retries
  }
  if (!Exec(db_, "COMMIT")) {
    Status error = SqlError(db_, "cannot commit task records");
    Exec(db_, "ROLLBACK");
    return error;
  }
  return written;
}

// A new record is a new row at the end, inserted with its request; a known
// one is rewritten by its row number, with its request only when that
// changed (kept, or dropped once the task ended). A finished record's bytes
// go back to the book, which keeps them instead of the record.
Status StoreFile::WriteRecords(const RecordBook& book, RecordBook::Written* written) {
  Statement insert(db_,
                   "INSERT INTO tasks (id, record, request, done, job) VALUES (?1, ?2, ?3, ?4, ?5)");
  Statement update(db_, "UPDATE tasks SET record = ?2, done = ?4, job = ?5 WHERE seq = ?1");
  Statement update_both(
      db_, "UPDATE tasks SET record = ?2, request = ?3, done = ?4, job = ?5 WHERE seq = ?1");
  if (!insert.ok() || !update.ok() || !update_both.ok()) {
    return SqlError(db_, "cannot write task records");
  }
  std::string blob;  // reused: each record is encoded into it, and copied once when finished
  for (RecordBook::Entry* dirty : book.dirty()) {
    const RecordBook::Entry& e = *dirty;
    const protocol::TaskRecord& record = e.record;
    protocol::EncodeStoredInto(record, &blob);
    const bool done = record.finished();
    bool ran;
    if (e.row == 0) {
      const Key key(record.id);  // bound before stepping, while it is on the stack
      ran = e.has_request
                ? insert.Run(key.blob(), Blob{blob}, Blob{e.request.stored()}, done, record.job)
                : insert.Run(key.blob(), Blob{blob}, Null{}, done, record.job);
      if (ran) written->rows.emplace_back(dirty, sqlite3_last_insert_rowid(db_));
    } else if (!e.request_changed) {  // ?3 is not in the statement
      ran = update.Run(e.row, Blob{blob}, Null{}, done, record.job);
    } else if (e.has_request) {
      ran = update_both.Run(e.row, Blob{blob}, Blob{e.request.stored()}, done, record.job);
    } else {
      ran = update_both.Run(e.row, Blob{blob}, Null{}, done, record.job);
    }
    if (!ran) return SqlError(db_, "cannot write task records");
    if (done) written->finished.emplace_back(dirty, std::string(blob));  // its exact size
  }
  return Status::Ok();
}

Status StoreFile::DeleteRows(const RecordBook& book) {
  if (book.deleted_rows().empty()) return Status::Ok();
  Statement erase(db_, "DELETE FROM tasks WHERE seq = ?1");
  if (!erase.ok()) return SqlError(db_, "cannot delete task records");
  for (int64_t row : book.deleted_rows()) {
    if (!erase.Run(row)) return SqlError(db_, "cannot delete task records");
  }
  return Status::Ok();
}

// The finished counts by engine and by outcome, kept as rows so that a
// restarted hub reports the same totals.
Status StoreFile::WriteCounts(const RecordBook& book) {
  if (!book.tally_changed().empty()) {
    Statement count(db_,
                    "INSERT OR REPLACE INTO finished_by_engine (engine, finished) VALUES (?1, ?2)");
    if (!count.ok()) return SqlError(db_, "cannot write the finished counts");
    for (int32_t engine : book.tally_changed()) {
      const auto tally = book.by_engine().find(engine);
      const int64_t finished = tally == book.by_engine().end() ? 0 : tally->second.finished;
      if (!count.Run(engine, finished)) return SqlError(db_, "cannot write the finished counts");
    }
  }
  if (!book.outcomes_changed()) return Status::Ok();
  Statement outcomes(db_, "INSERT OR REPLACE INTO finished_counts (state, n) VALUES (?1, ?2)");
  if (!outcomes.ok()) return SqlError(db_, "cannot write the finished counts");
  for (const auto& [state, n] :
       {std::pair{TaskState::kOk, book.ok()}, {TaskState::kError, book.failed()}}) {
    if (!outcomes.Run(static_cast<int>(state), n)) {
      return SqlError(db_, "cannot write the finished counts");
    }
  }
  return Status::Ok();
}

Status StoreFile::WriteJobs(const RecordBook& book) {
  if (book.jobs_changed().empty()) return Status::Ok();
  Statement job(db_,
                "INSERT OR REPLACE INTO jobs (name, ok, failed, replaced, first_submit, "
                "last_finish) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  if (!job.ok()) return SqlError(db_, "cannot write the jobs' counts");
  for (const std::string& name : book.jobs_changed()) {
    const auto found = book.jobs().find(name);
    const protocol::JobSummary j =
        found == book.jobs().end() ? protocol::JobSummary{} : found->second;
    if (!job.Run(Text{name}, j.ok, j.failed, j.replaced, j.first_submit_us, j.last_finish_us)) {
      return SqlError(db_, "cannot write the jobs' counts");
    }
  }
  return Status::Ok();
}

// Every finished row, most of them not in memory: deleted by the column
// that marks them, with their counts, in one transaction.
std::optional<size_t> StoreFile::PurgeFinished() {
  if (!Exec(db_, "BEGIN")) return std::nullopt;
  const int64_t count = Statement(db_, "SELECT count(*) FROM tasks WHERE done = 1").ScalarOr(-1);
  if (count < 0 || !Exec(db_,
                         "DELETE FROM tasks WHERE done = 1; DELETE FROM finished_by_engine; "
                         "UPDATE finished_counts SET n = 0; "
                         "UPDATE jobs SET ok = 0, failed = 0, replaced = 0; COMMIT")) {
    Exec(db_, "ROLLBACK");
    return std::nullopt;
  }
  return static_cast<size_t>(count);
}

}  // namespace ztask::hub
