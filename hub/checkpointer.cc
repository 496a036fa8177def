// The task database's checkpoints, off the hub's loop (checkpointer.h).
#include "hub/checkpointer.h"

#include <pthread.h>

#include <sqlite3.h>

#include <utility>

#include "hub/sqlite_statement.h"

namespace ztask::hub {

Result<std::unique_ptr<Checkpointer>> Checkpointer::Start(const std::string& path, int64_t pages) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) !=
      SQLITE_OK) {
    Status error = sqlite::SqlError(db, "cannot open the task database " + path + " to checkpoint it");
    sqlite3_close(db);
    return error;
  }
  // A connection learns the file's journal mode when it first reads it;
  // until then a checkpoint does nothing and says so (-1 frames).
  sqlite::Statement mode(db, "PRAGMA journal_mode");
  if (mode.TextOr() != "wal") {
    sqlite3_close(db);
    return Status::IoError("the task database " + path + " is not in WAL mode");
  }
  std::unique_ptr<Checkpointer> checkpointer(new Checkpointer(db, pages));
  checkpointer->thread_ = std::thread([c = checkpointer.get()] { c->Run(); });
  ::pthread_setname_np(checkpointer->thread_.native_handle(), "hub-checkpoint");
  return checkpointer;
}

Checkpointer::~Checkpointer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
  // The writer checkpoints for itself again (as SQLite does by default),
  // should it write after this.
  if (writer_) sqlite3_wal_autocheckpoint(writer_, static_cast<int>(pages_));
  sqlite3_close(db_);
}

void Checkpointer::Attach(sqlite3* writer) {
  writer_ = writer;
  sqlite3_wal_hook(writer, &Checkpointer::OnCommit, this);
}

// SQLite's hook after each commit of the writer: `pages` are in the log.
int Checkpointer::OnCommit(void* self, sqlite3* writer, const char* /*name*/, int pages) {
  auto* c = static_cast<Checkpointer*>(self);
  if (pages < c->pages_) return SQLITE_OK;
  // Past the limit by a quarter: the thread's checkpoints did not catch up
  // with the commits (a loaded machine, a slow disk), and the log only
  // grows until one copies all of it between two of them. The writer
  // checkpoints itself, as SQLite would.
  if (4 * int64_t{pages} >= kWriterTakesOverPastQuarters * c->pages_) {
    c->writer_checkpoints_.fetch_add(1);
    sqlite3_wal_checkpoint_v2(writer, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    return SQLITE_OK;
  }
  {
    std::lock_guard<std::mutex> lock(c->mutex_);
    c->due_ = true;
  }
  c->wake_.notify_one();
  return SQLITE_OK;
}

std::optional<std::string> Checkpointer::TakeNewError() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(new_error_, std::nullopt);
}

void Checkpointer::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return due_ || stop_; });
    if (stop_) return;
    due_ = false;
    lock.unlock();
    // Passive: what the writer commits meanwhile stays in the log for the
    // next one; the writer never waits for this.
    int logged = 0, copied = 0;
    const int rc = sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, &logged,
                                             &copied);
    const bool ok = rc == SQLITE_OK && logged >= 0;
    const std::string error = rc != SQLITE_OK ? sqlite3_errmsg(db_) : "not in WAL mode";
    lock.lock();
    if (ok) {
      if (copied == logged) done_.fetch_add(1);
      failing_ = false;
    } else {
      failed_.fetch_add(1);
      if (!failing_) new_error_ = "cannot checkpoint the task database: " + error;
      failing_ = true;
    }
  }
}

}  // namespace ztask::hub
