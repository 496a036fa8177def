#include "hub/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include <algorithm>
#include <cstdlib>
#include <map>

#include "protocol/codec.h"

namespace ztask::hub {
namespace {

bool Finished(const protocol::TaskRecord& r) { return IsFinal(r.state); }

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
  // Runs it once with what is bound, and readies it for the next binding.
  bool StepDone() {
    const bool done = sqlite3_step(stmt_) == SQLITE_DONE;
    sqlite3_reset(stmt_);
    return done;
  }

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

Result<std::unique_ptr<TaskStore>> TaskStore::Open(const std::string& path,
                                                   StoreOptions options) {
  const bool power = options.power;
  std::unique_ptr<TaskStore> store(new TaskStore(std::move(options)));
  if (path == ":memory:") return store;
  // Records hold every task's command, environment and output: 0600,
  // whoever made the file and whatever the umask. SQLite gives the -wal and
  // -shm files the mode of the database file.
  if (const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600); fd >= 0) {
    ::fchmod(fd, 0600);
    ::close(fd);
  }
  for (const char* suffix : {"-wal", "-shm"}) ::chmod((path + suffix).c_str(), 0600);
  if (sqlite3_open(path.c_str(), &store->db_) != SQLITE_OK) {
    return SqlError(store->db_, "cannot open the task database " + path);
  }
  sqlite3_busy_timeout(store->db_, 5000);
  // A new file has 16 KiB pages: the WAL is written a page a call, and a
  // quarter of the calls took a tenth of the hub's CPU off a no-op (a file
  // made with 4 KiB pages keeps them). Checkpoints come every 32 MiB of WAL.
  const std::string setup = std::string("PRAGMA page_size=16384;PRAGMA journal_mode=WAL;") +
                            (power ? "PRAGMA synchronous=FULL;" : "PRAGMA synchronous=NORMAL;") +
                            "PRAGMA cache_size=-65536;";
  if (sqlite3_exec(store->db_, setup.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
    return SqlError(store->db_, "cannot set up the task database " + path);
  }
  int page_bytes = 4096;
  {
    Statement pragma(store->db_, "PRAGMA page_size");
    if (pragma.ok() && sqlite3_step(pragma.get()) == SQLITE_ROW) {
      page_bytes = std::max(512, sqlite3_column_int(pragma.get(), 0));
    }
  }
  const std::string checkpoint =
      "PRAGMA wal_autocheckpoint=" + std::to_string((32 << 20) / page_bytes) + ";";
  if (sqlite3_exec(store->db_, checkpoint.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
    return SqlError(store->db_, "cannot set up the task database " + path);
  }
  ZTASK_RETURN_IF_ERROR(store->Migrate(path));
  ZTASK_RETURN_IF_ERROR(store->Prepare());
  ZTASK_RETURN_IF_ERROR(store->Load());
  return store;
}

int TaskStore::synchronous_level() const {
  if (!db_) return 0;
  Statement query(db_, "PRAGMA synchronous");
  if (!query.ok() || sqlite3_step(query.get()) != SQLITE_ROW) return -1;
  return sqlite3_column_int(query.get(), 0);
}

TaskStore::~TaskStore() {
  if (db_) {
    (void)Flush();
    sqlite3_finalize(find_);
    sqlite3_close(db_);
  }
}

// Version 3 of the file: one row per task, in the order recorded, with
// whether it is finished, an index by id (for records no longer in memory)
// and one of the unfinished rows (all that a start must read), and the
// count of finished tasks per engine. Version 4 adds the count of finished
// tasks by outcome (ok, error), so that a start reads two numbers, not the
// history. Version 2 lacked the column, the indexes and the counts;
// version 1 (two tables keyed by task id) is carried over to 2 first. Each
// step is one transaction.
Status TaskStore::Migrate(const std::string& path) {
  int version = 0;
  {
    Statement pragma(db_, "PRAGMA user_version");
    if (pragma.ok() && sqlite3_step(pragma.get()) == SQLITE_ROW) {
      version = sqlite3_column_int(pragma.get(), 0);
    }
  }
  if (version >= 5) return Status::Ok();
  if (version == 4) return AddJobs(path);
  auto run = [&](const std::string& sql) { return SetUp(sql, path); };
  if (version == 3) {
    ZTASK_RETURN_IF_ERROR(AddOutcomeCounts(path));
    return AddJobs(path);
  }
  if (version < 2) {
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
    ZTASK_RETURN_IF_ERROR(run(sql));
  }
  ZTASK_RETURN_IF_ERROR(run(
      "BEGIN;"
      "ALTER TABLE tasks ADD COLUMN done INTEGER NOT NULL DEFAULT 0;"
      "CREATE TABLE finished_by_engine (engine INTEGER PRIMARY KEY, finished INTEGER NOT NULL);"));
  if (Status marked = AddFinishedColumn(); !marked.ok()) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return marked;
  }
  ZTASK_RETURN_IF_ERROR(run(
      "CREATE INDEX tasks_by_id ON tasks (id);"
      "CREATE INDEX tasks_open ON tasks (seq) WHERE done = 0;"
      "PRAGMA user_version = 3; COMMIT;"));
  ZTASK_RETURN_IF_ERROR(AddOutcomeCounts(path));
  return AddJobs(path);
}

// Records of earlier layouts belong to no job: nothing to read.
Status TaskStore::AddJobs(const std::string& path) {
  return SetUp(
      "BEGIN; ALTER TABLE tasks ADD COLUMN job TEXT;"
      "CREATE INDEX tasks_by_job ON tasks (job, id) WHERE job IS NOT NULL;"
      "CREATE TABLE jobs (name TEXT PRIMARY KEY, ok INTEGER NOT NULL, "
      "failed INTEGER NOT NULL, replaced INTEGER NOT NULL, "
      "first_submit INTEGER NOT NULL, last_finish INTEGER NOT NULL);"
      "PRAGMA user_version = 5; COMMIT;",
      path);
}

Status TaskStore::SetUp(const std::string& sql, const std::string& path) {
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK) return Status::Ok();
  Status error = SqlError(db_, "cannot set up the tables of the task database " + path);
  sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  return error;
}

Status TaskStore::AddOutcomeCounts(const std::string& path) {
  ZTASK_RETURN_IF_ERROR(SetUp(
      "BEGIN; CREATE TABLE finished_counts (state INTEGER PRIMARY KEY, n INTEGER NOT NULL);",
      path));
  int64_t counts[2] = {0, 0};
  {
    Statement select(db_, "SELECT record FROM tasks WHERE done = 1");
    if (!select.ok()) return SqlError(db_, "cannot convert the tasks");
    size_t read = 0;
    while (sqlite3_step(select.get()) == SQLITE_ROW) {
      if (options_.progress && ++read % 1000000 == 0) options_.progress(read);
      const void* blob = sqlite3_column_blob(select.get(), 0);
      auto record = protocol::DecodeBody<protocol::TaskRecord>(
          {static_cast<const char*>(blob),
           static_cast<size_t>(sqlite3_column_bytes(select.get(), 0))});
      if (record.ok() && Finished(*record)) ++counts[record->state == TaskState::kOk ? 0 : 1];
    }
  }
  const std::string sql = "INSERT INTO finished_counts (state, n) VALUES (" +
                          std::to_string(static_cast<int>(TaskState::kOk)) + ", " +
                          std::to_string(counts[0]) + "), (" +
                          std::to_string(static_cast<int>(TaskState::kError)) + ", " +
                          std::to_string(counts[1]) + "); PRAGMA user_version = 4; COMMIT;";
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
    Status error = SqlError(db_, "cannot convert the tasks");
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return error;
  }
  return Status::Ok();
}

Status TaskStore::AddFinishedColumn() {
  Statement select(db_, "SELECT seq, record FROM tasks");
  Statement mark(db_, "UPDATE tasks SET done = 1 WHERE seq = ?1");
  Statement count(db_, "INSERT INTO finished_by_engine (engine, finished) VALUES (?1, ?2)");
  if (!select.ok() || !mark.ok() || !count.ok()) return SqlError(db_, "cannot convert the tasks");
  std::map<int32_t, int64_t> finished;
  size_t read = 0;
  while (sqlite3_step(select.get()) == SQLITE_ROW) {
    if (options_.progress && ++read % 1000000 == 0) options_.progress(read);
    const void* blob = sqlite3_column_blob(select.get(), 1);
    auto record = protocol::DecodeBody<protocol::TaskRecord>(
        {static_cast<const char*>(blob), static_cast<size_t>(sqlite3_column_bytes(select.get(), 1))});
    if (!record.ok() || !Finished(*record)) continue;
    if (record->engine_id) ++finished[*record->engine_id];
    sqlite3_bind_int64(mark.get(), 1, sqlite3_column_int64(select.get(), 0));
    const bool ok = sqlite3_step(mark.get()) == SQLITE_DONE;
    sqlite3_reset(mark.get());
    if (!ok) return SqlError(db_, "cannot convert the tasks");
  }
  for (const auto& [engine, n] : finished) {
    sqlite3_bind_int(count.get(), 1, engine);
    sqlite3_bind_int64(count.get(), 2, n);
    const bool ok = sqlite3_step(count.get()) == SQLITE_DONE;
    sqlite3_reset(count.get());
    if (!ok) return SqlError(db_, "cannot convert the tasks");
  }
  return Status::Ok();
}

Status TaskStore::Prepare() {
  if (sqlite3_prepare_v2(db_, "SELECT seq, record FROM tasks WHERE id = ?1", -1, &find_,
                         nullptr) != SQLITE_OK) {
    return SqlError(db_, "cannot read the task database");
  }
  return Status::Ok();
}

// Reads what a start needs, whatever the history's length: the finished
// counts, every unfinished task (through the index of them) and the latest
// keep_finished finished ones.
Status TaskStore::Load() {
  {
    Statement counts(db_, "SELECT engine, finished FROM finished_by_engine");
    if (!counts.ok()) return SqlError(db_, "cannot read the task database");
    while (sqlite3_step(counts.get()) == SQLITE_ROW) {
      by_engine_[sqlite3_column_int(counts.get(), 0)].finished =
          sqlite3_column_int64(counts.get(), 1);
    }
    Statement outcomes(db_, "SELECT state, n FROM finished_counts");
    if (!outcomes.ok()) return SqlError(db_, "cannot read the task database");
    while (sqlite3_step(outcomes.get()) == SQLITE_ROW) {
      const auto state = static_cast<TaskState>(sqlite3_column_int(outcomes.get(), 0));
      (state == TaskState::kOk ? ok_ : failed_) = sqlite3_column_int64(outcomes.get(), 1);
    }
    Statement jobs(db_, "SELECT name, ok, failed, replaced, first_submit, last_finish FROM jobs");
    if (!jobs.ok()) return SqlError(db_, "cannot read the task database");
    while (sqlite3_step(jobs.get()) == SQLITE_ROW) {
      const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(jobs.get(), 0));
      if (!text) continue;
      protocol::JobSummary& j = jobs_[text];
      j.name = text;
      j.ok = sqlite3_column_int64(jobs.get(), 1);
      j.failed = sqlite3_column_int64(jobs.get(), 2);
      j.replaced = sqlite3_column_int64(jobs.get(), 3);
      j.first_submit_us = sqlite3_column_int64(jobs.get(), 4);
      j.last_finish_us = sqlite3_column_int64(jobs.get(), 5);
    }
  }
  auto read = [&](const char* sql, bool finished) {
    Statement select(db_, sql);
    if (!select.ok()) return SqlError(db_, "cannot read the task database");
    sqlite3_bind_int64(select.get(), 1, static_cast<int64_t>(options_.keep_finished));
    size_t rows = 0;
    while (sqlite3_step(select.get()) == SQLITE_ROW) {
      ++rows;
      auto column = [&select](int k) -> std::string_view {
        const void* blob = sqlite3_column_blob(select.get(), k);
        return {static_cast<const char*>(blob),
                static_cast<size_t>(sqlite3_column_bytes(select.get(), k))};
      };
      auto record = protocol::DecodeBody<protocol::TaskRecord>(column(1));
      if (!record.ok()) continue;
      bool made;
      Entry& e = EntryOf(record->id, &made);
      e.row = sqlite3_column_int64(select.get(), 0);
      e.record = std::move(*record);
      if (finished) {
        finished_order_.push_front(e.record.id);  // read newest first
        continue;
      }
      Tally(e.record, +1);  // finished ones are counted in finished_by_engine and jobs
      if (sqlite3_column_type(select.get(), 2) == SQLITE_NULL) continue;
      if (auto stored = protocol::DecodeBody<protocol::FrameList>(column(2)); stored.ok()) {
        e.request = std::move(stored->frames);
        e.has_request = true;
      }
    }
    if (finished && rows >= options_.keep_finished) has_evicted_ = true;
    return Status::Ok();
  };
  ZTASK_RETURN_IF_ERROR(read("SELECT seq, record, request FROM tasks WHERE done = 0", false));
  ZTASK_RETURN_IF_ERROR(
      read("SELECT seq, record FROM tasks WHERE done = 1 ORDER BY seq DESC LIMIT ?1", true));
  tally_changed_.clear();
  jobs_changed_.clear();
  for (const auto& [name, job] : jobs_) {
    char* end = nullptr;
    const long long n = std::strtoll(name.c_str(), &end, 10);
    if (!name.empty() && *end == '\0' && n > last_job_number_) last_job_number_ = n;
  }
  Statement largest(db_, "SELECT max(id) FROM tasks");
  if (largest.ok() && sqlite3_step(largest.get()) == SQLITE_ROW &&
      sqlite3_column_bytes(largest.get(), 0) == 16) {
    largest_stored_ = TaskId::FromBytes(
        {static_cast<const char*>(sqlite3_column_blob(largest.get(), 0)), 16});
  } else if (has_evicted_) {
    largest_stored_ = TaskId{~uint64_t{0}, ~uint64_t{0}};  // unknown: any id may be there
  }
  return Status::Ok();
}

bool TaskStore::ReadStored(const TaskId& id, protocol::TaskRecord* record, int64_t* row) const {
  if (!find_) return false;
  const Key key(id);
  BindBlob(find_, 1, key.view());
  bool found = false;
  if (sqlite3_step(find_) == SQLITE_ROW) {
    const void* blob = sqlite3_column_blob(find_, 1);
    auto decoded = protocol::DecodeBody<protocol::TaskRecord>(
        {static_cast<const char*>(blob), static_cast<size_t>(sqlite3_column_bytes(find_, 1))});
    if (decoded.ok()) {
      *record = std::move(*decoded);
      *row = sqlite3_column_int64(find_, 0);
      found = true;
    }
  }
  sqlite3_reset(find_);
  return found;
}

TaskStore::Entry& TaskStore::EntryOf(const TaskId& id, bool* made) {
  auto [slot, inserted] = entries_.try_emplace(id);
  *made = inserted;
  if (!inserted) return **slot;
  *slot = std::make_unique<Entry>();
  Entry& e = **slot;
  e.record.id = id;
  // A record let go of is finished: it comes back (to be let go again) so
  // that what comes for it is checked against it, never written twice.
  if (MayBeStored(id) && ReadStored(id, &e.record, &e.row)) {
    *made = false;
    if (Finished(e.record)) finished_order_.push_back(id);
  }
  return e;
}

void TaskStore::Touch(Entry& e) {
  if (!e.dirty) {
    e.dirty = true;
    dirty_.push_back(&e);
  }
}

void TaskStore::Clean() {
  for (Entry* e : dirty_) e->dirty = e->request_changed = false;
  dirty_.clear();
  deleted_rows_.clear();
  tally_changed_.clear();
  jobs_changed_.clear();
  outcomes_changed_ = false;
}

const TaskStore::Entry* TaskStore::FindEntry(const TaskId& id) const {
  const std::unique_ptr<Entry>* slot = entries_.find(id);
  return slot ? slot->get() : nullptr;
}

const protocol::TaskRecord* TaskStore::Find(const TaskId& id,
                                            protocol::TaskRecord* scratch) const {
  if (const Entry* e = FindEntry(id)) return &e->record;
  int64_t row;
  if (MayBeStored(id) && ReadStored(id, scratch, &row)) return scratch;
  return nullptr;
}

std::vector<TaskId> TaskStore::IdsAfter(const std::optional<TaskId>& after, size_t limit,
                                        const std::optional<std::string>& job) const {
  // In memory: every record when none was let go; otherwise those not yet
  // written (the file has the rest, in the order of its index).
  std::vector<TaskId> ids;
  entries_.for_each([&](const TaskId& id, const std::unique_ptr<Entry>& e) {
    if ((!after || *after < id) && (!has_evicted_ || e->row == 0) &&
        (!job || e->record.job == job)) {
      ids.push_back(id);
    }
  });
  const auto cut = [&](std::vector<TaskId>& v) {
    const size_t n = std::min(v.size(), limit);
    std::partial_sort(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n), v.end());
    v.resize(n);
  };
  cut(ids);
  if (!has_evicted_) return ids;
  Statement select(db_, job ? (after ? "SELECT id FROM tasks WHERE job = ?3 AND id > ?1 "
                                       "ORDER BY id LIMIT ?2"
                                     : "SELECT id FROM tasks WHERE job = ?3 ORDER BY id LIMIT ?2")
                       : after ? "SELECT id FROM tasks WHERE id > ?1 ORDER BY id LIMIT ?2"
                               : "SELECT id FROM tasks ORDER BY id LIMIT ?2");
  if (!select.ok()) return ids;
  if (job) sqlite3_bind_text(select.get(), 3, job->data(), static_cast<int>(job->size()), SQLITE_STATIC);
  std::optional<Key> key;
  if (after) {
    key.emplace(*after);
    BindBlob(select.get(), 1, key->view());
  }
  sqlite3_bind_int64(select.get(), 2, static_cast<int64_t>(limit));
  while (sqlite3_step(select.get()) == SQLITE_ROW) {
    if (sqlite3_column_bytes(select.get(), 0) != 16) continue;
    ids.push_back(TaskId::FromBytes(
        {static_cast<const char*>(sqlite3_column_blob(select.get(), 0)), 16}));
  }
  cut(ids);
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

const std::vector<std::string>* TaskStore::RequestOf(const TaskId& id) const {
  const Entry* e = FindEntry(id);
  return e && e->has_request ? &e->request : nullptr;
}

bool TaskStore::Submitted(const protocol::Header& request, const protocol::RoutingMeta& meta,
                          const protocol::TaskSpec& spec, std::vector<std::string> request_frames) {
  bool made;
  Entry& e = EntryOf(request.id, &made);
  if (!made && Finished(e.record)) return false;
  Touch(e);
  protocol::TaskRecord& r = e.record;
  Tally(r, -1);
  r.label = spec.label;
  r.client = request.session;
  if (r.state == TaskState::kNone) r.state = TaskState::kWaiting;  // what came later for it stays
  r.submitted_us = request.date_us;
  r.routing = meta;
  r.job = spec.job;
  r.array_index = spec.array_index;
  // What it runs, to be submitted again: not a Python task's (its pickled
  // function and arguments could be large, and only Python can send it).
  if (spec.kind != "python") r.spec = spec;
  Tally(r, +1);
  if (spec.replaces && *spec.replaces != request.id) Replace(*spec.replaces, request.id);
  if (!e.has_request) {
    e.request = std::move(request_frames);
    e.has_request = true;
    e.request_changed = true;
  }
  return true;
}

void TaskStore::Replace(const TaskId& old_id, const TaskId& by) {
  bool made;
  Entry& old = EntryOf(old_id, &made);
  if (made) {  // never recorded: nothing to mark
    entries_.erase(old_id);
    return;
  }
  if (old.record.state != TaskState::kError || old.record.replaced_by) return;
  Touch(old);
  Tally(old.record, -1);
  old.record.replaced_by = by;
  Tally(old.record, +1);
}

std::string TaskStore::NewJobName() {
  for (;;) {
    std::string name = std::to_string(++last_job_number_);
    if (!jobs_.contains(name)) return name;
  }
}

void TaskStore::DropRequest(Entry& e) {
  if (!e.has_request) return;
  e.request.clear();
  e.request.shrink_to_fit();
  e.has_request = false;
  e.request_changed = true;
}

// The monitor may repeat itself, and after a restart of the hub deliver an
// older batch after a newer one: a change applies only when it is news. An
// attempt's assignment comes before its outcome, so an assignment of an
// attempt already counted is old.
bool TaskStore::Assigned(const TaskId& id, const protocol::Assignment& assignment) {
  bool made;
  Entry& e = EntryOf(id, &made);
  if (!made && (Finished(e.record) || assignment.attempt <= e.record.attempts)) return false;
  Touch(e);
  protocol::TaskRecord& r = e.record;
  Tally(r, -1);
  r.state = TaskState::kRunning;
  r.engine_id = assignment.engine_id;
  r.attempts = assignment.attempt;
  Tally(r, +1);
  return true;
}

bool TaskStore::Outcome(const TaskId& id, const protocol::OutcomeMeta& meta,
                        const protocol::TaskResult& result, int64_t now_us) {
  bool made;
  Entry& e = EntryOf(id, &made);
  const protocol::TaskRecord& known = e.record;
  if (!made && (Finished(known) ||
                (!meta.final && (meta.attempt < known.attempts ||
                                 (meta.attempt == known.attempts && known.state == TaskState::kWaiting))))) {
    return false;  // final already, or a retry of an attempt already counted
  }
  Touch(e);
  protocol::TaskRecord& r = e.record;
  Tally(r, -1);
  r.attempts = std::max(r.attempts, meta.attempt);
  r.error_type = meta.error_type;
  r.error_message = result.error_message;
  if (meta.engine_id) r.engine_id = meta.engine_id;
  if (!meta.final) {
    r.state = TaskState::kWaiting;  // queued again for another attempt
    Tally(r, +1);
    return true;
  }
  DropRequest(e);
  if (db_) finished_order_.push_back(id);
  r.state = meta.ok ? TaskState::kOk : TaskState::kError;
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
  if (r.state == TaskState::kWaiting) {
    waiting_ += delta;
  } else if (r.engine_id) {
    if (r.state == TaskState::kRunning) by_engine_[*r.engine_id].running += delta;
    if (Finished(r)) {
      by_engine_[*r.engine_id].finished += delta;
      tally_changed_.insert(*r.engine_id);
    }
  }
  if (Finished(r)) {
    (r.state == TaskState::kOk ? ok_ : failed_) += delta;
    outcomes_changed_ = true;
  }
  if (!r.job || r.state == TaskState::kNone) return;
  protocol::JobSummary& j = jobs_[*r.job];
  if (j.name.empty()) j.name = *r.job;
  if (r.replaced_by) {
    j.replaced += delta;
  } else {
    switch (r.state) {
      case TaskState::kWaiting: j.waiting += delta; break;
      case TaskState::kRunning: j.running += delta; break;
      case TaskState::kOk: j.ok += delta; break;
      case TaskState::kError: j.failed += delta; break;
      case TaskState::kNone: break;
    }
  }
  if (delta > 0) {
    if (r.submitted_us > 0 && (j.first_submit_us == 0 || r.submitted_us < j.first_submit_us)) {
      j.first_submit_us = r.submitted_us;
    }
    if (Finished(r) && r.completed_us) j.last_finish_us = std::max(j.last_finish_us, *r.completed_us);
  }
  if (Finished(r)) jobs_changed_.insert(*r.job);
}

size_t TaskStore::Purge(const std::vector<TaskId>& ids, bool all) {
  if (all && has_evicted_) {
    if (auto purged = PurgeAllStored()) return *purged;
  }
  std::vector<TaskId> doomed;
  if (all) {
    entries_.for_each([&](const TaskId& id, const std::unique_ptr<Entry>& e) {
      if (Finished(e->record)) doomed.push_back(id);
    });
  } else {
    for (const TaskId& id : ids) {
      bool made;
      Entry& e = EntryOf(id, &made);  // brings back one let go of
      if (made) {
        entries_.erase(id);
      } else if (Finished(e.record)) {
        doomed.push_back(id);
      }
    }
  }
  std::sort(doomed.begin(), doomed.end());
  doomed.erase(std::unique(doomed.begin(), doomed.end()), doomed.end());  // listed twice
  bool dirty_purged = false;
  for (const TaskId& id : doomed) {
    Entry& e = **entries_.find(id);
    Tally(e.record, -1);
    if (e.row != 0) deleted_rows_.push_back(e.row);
    if (e.dirty) {
      e.dirty = false;  // marks it for taking out of dirty_ below
      dirty_purged = true;
    }
  }
  if (dirty_purged) {
    std::erase_if(dirty_, [](const Entry* e) { return !e->dirty; });
  }
  for (const TaskId& id : doomed) entries_.erase(id);
  return doomed.size();
}

// Every finished record, most of them only in the file: written first, then
// deleted by the column that marks them, with their counts, in one
// transaction. Nullopt when the file cannot be written (nothing changed).
std::optional<size_t> TaskStore::PurgeAllStored() {
  if (!Flush().ok()) return std::nullopt;
  if (sqlite3_exec(db_, "BEGIN", nullptr, nullptr, nullptr) != SQLITE_OK) return std::nullopt;
  int64_t count = -1;
  {
    Statement counted(db_, "SELECT count(*) FROM tasks WHERE done = 1");
    if (counted.ok() && sqlite3_step(counted.get()) == SQLITE_ROW) {
      count = sqlite3_column_int64(counted.get(), 0);
    }
  }
  if (count < 0 ||
      sqlite3_exec(db_,
                   "DELETE FROM tasks WHERE done = 1; DELETE FROM finished_by_engine; "
                   "UPDATE finished_counts SET n = 0; "
                   "UPDATE jobs SET ok = 0, failed = 0, replaced = 0; COMMIT",
                   nullptr, nullptr, nullptr) != SQLITE_OK) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return std::nullopt;
  }
  std::vector<TaskId> gone;
  entries_.for_each([&](const TaskId& id, const std::unique_ptr<Entry>& e) {
    if (Finished(e->record)) gone.push_back(id);
  });
  for (const TaskId& id : gone) entries_.erase(id);
  for (auto& [engine, tally] : by_engine_) tally.finished = 0;
  ok_ = failed_ = 0;
  for (auto& [name, job] : jobs_) job.ok = job.failed = job.replaced = 0;
  finished_order_.clear();
  has_evicted_ = false;
  return static_cast<size_t>(count);
}

Status TaskStore::Flush() {
  if (!db_) {  // nothing to write: forget what changed
    Clean();
    return Status::Ok();
  }
  if (unflushed() == 0 && tally_changed_.empty() && !outcomes_changed_ && jobs_changed_.empty()) {
    return Status::Ok();
  }
  if (sqlite3_exec(db_, "BEGIN", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return SqlError(db_, "cannot begin a transaction");
  }
  // Row numbers count only once the transaction holding them commits.
  std::vector<std::pair<Entry*, int64_t>> added;
  if (Status written = WriteRows(&added); !written.ok()) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return written;  // the records stay in memory and dirty: the next flush retries
  }
  if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
    Status error = SqlError(db_, "cannot commit task records");
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return error;
  }
  for (const auto& [e, row] : added) {
    e->row = row;
    largest_stored_ = std::max(largest_stored_, e->record.id);
  }
  Clean();
  Evict();
  return Status::Ok();
}

void TaskStore::Evict() {
  while (finished_order_.size() > options_.keep_finished) {
    const TaskId id = finished_order_.front();
    finished_order_.pop_front();
    const Entry* e = FindEntry(id);
    // Purged already, or not written (a failed flush left it dirty).
    if (!e || e->row == 0 || e->dirty || !Finished(e->record)) continue;
    entries_.erase(id);
    has_evicted_ = true;
  }
}

// Within Flush()'s transaction: a new record is a new row at the end; a
// known one is rewritten by its row number, with its request only when that
// changed (kept, or dropped once the task ended).
Status TaskStore::WriteRows(std::vector<std::pair<Entry*, int64_t>>* added) {
  ZTASK_RETURN_IF_ERROR(WriteRecords(added));
  ZTASK_RETURN_IF_ERROR(DeleteRows());
  ZTASK_RETURN_IF_ERROR(WriteCounts());
  return WriteJobs();
}

Status TaskStore::WriteRecords(std::vector<std::pair<Entry*, int64_t>>* added) {
  Statement insert(db_,
                   "INSERT INTO tasks (id, record, request, done, job) VALUES (?1, ?2, ?3, ?4, ?5)");
  Statement update(db_, "UPDATE tasks SET record = ?2, done = ?4, job = ?5 WHERE seq = ?1");
  Statement update_both(
      db_, "UPDATE tasks SET record = ?2, request = ?3, done = ?4, job = ?5 WHERE seq = ?1");
  if (!insert.ok() || !update.ok() || !update_both.ok()) {
    return SqlError(db_, "cannot write task records");
  }
  std::string blob, request;
  for (Entry* dirty : dirty_) {
    const Entry& e = *dirty;
    blob = protocol::EncodeBody(e.record);
    // A new record is inserted with its request; a known one is updated by
    // its row, with its request only when that changed.
    const bool new_row = e.row == 0;
    const bool write_request = new_row || e.request_changed;
    const bool kept = write_request && e.has_request;
    if (kept) request = protocol::EncodeBody(protocol::FrameList{e.request});
    Statement& statement = new_row ? insert : e.request_changed ? update_both : update;
    sqlite3_stmt* stmt = statement.get();
    const Key key(e.record.id);  // bound before stepping, while it is on the stack
    if (new_row) {
      BindBlob(stmt, 1, key.view());
    } else {
      sqlite3_bind_int64(stmt, 1, e.row);
    }
    BindBlob(stmt, 2, blob);
    sqlite3_bind_int(stmt, 4, Finished(e.record) ? 1 : 0);
    if (e.record.job) {
      sqlite3_bind_text(stmt, 5, e.record.job->data(), static_cast<int>(e.record.job->size()),
                        SQLITE_STATIC);
    } else {
      sqlite3_bind_null(stmt, 5);
    }
    if (kept) {
      BindBlob(stmt, 3, request);
    } else if (write_request) {
      sqlite3_bind_null(stmt, 3);
    }
    if (!statement.StepDone()) return SqlError(db_, "cannot write task records");
    if (new_row) added->emplace_back(dirty, sqlite3_last_insert_rowid(db_));
  }
  return Status::Ok();
}

Status TaskStore::DeleteRows() {
  if (deleted_rows_.empty()) return Status::Ok();
  Statement erase(db_, "DELETE FROM tasks WHERE seq = ?1");
  if (!erase.ok()) return SqlError(db_, "cannot delete task records");
  for (int64_t row : deleted_rows_) {
    sqlite3_bind_int64(erase.get(), 1, row);
    if (!erase.StepDone()) return SqlError(db_, "cannot delete task records");
  }
  return Status::Ok();
}

// The finished counts by engine and by outcome, kept as rows so that a
// restarted hub reports the same totals.
Status TaskStore::WriteCounts() {
  if (!tally_changed_.empty()) {
    Statement count(db_,
                    "INSERT OR REPLACE INTO finished_by_engine (engine, finished) VALUES (?1, ?2)");
    if (!count.ok()) return SqlError(db_, "cannot write the finished counts");
    for (int32_t engine : tally_changed_) {
      sqlite3_bind_int(count.get(), 1, engine);
      sqlite3_bind_int64(count.get(), 2, by_engine_[engine].finished);
      if (!count.StepDone()) return SqlError(db_, "cannot write the finished counts");
    }
  }
  if (!outcomes_changed_) return Status::Ok();
  Statement outcomes(db_, "INSERT OR REPLACE INTO finished_counts (state, n) VALUES (?1, ?2)");
  if (!outcomes.ok()) return SqlError(db_, "cannot write the finished counts");
  for (const auto& [state, n] : {std::pair{TaskState::kOk, ok_}, {TaskState::kError, failed_}}) {
    sqlite3_bind_int(outcomes.get(), 1, static_cast<int>(state));
    sqlite3_bind_int64(outcomes.get(), 2, n);
    if (!outcomes.StepDone()) return SqlError(db_, "cannot write the finished counts");
  }
  return Status::Ok();
}

Status TaskStore::WriteJobs() {
  if (jobs_changed_.empty()) return Status::Ok();
  Statement job(db_,
                "INSERT OR REPLACE INTO jobs (name, ok, failed, replaced, first_submit, "
                "last_finish) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  if (!job.ok()) return SqlError(db_, "cannot write the jobs' counts");
  for (const std::string& name : jobs_changed_) {
    const protocol::JobSummary& j = jobs_[name];
    sqlite3_bind_text(job.get(), 1, name.data(), static_cast<int>(name.size()), SQLITE_STATIC);
    sqlite3_bind_int64(job.get(), 2, j.ok);
    sqlite3_bind_int64(job.get(), 3, j.failed);
    sqlite3_bind_int64(job.get(), 4, j.replaced);
    sqlite3_bind_int64(job.get(), 5, j.first_submit_us);
    sqlite3_bind_int64(job.get(), 6, j.last_finish_us);
    if (!job.StepDone()) return SqlError(db_, "cannot write the jobs' counts");
  }
  return Status::Ok();
}

}  // namespace ztask::hub
