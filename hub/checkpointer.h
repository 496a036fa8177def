// Checkpointer: copies the task database's write-ahead log into the
// database on a thread and a connection of its own, so that the hub's
// intake never waits for it. Left to SQLite, the commit that takes the log
// past its limit runs the checkpoint itself: the hub's loop stopped for it
// (8 % of the loop's time under a stream of no-ops).
//
// The writer's connection tells it, after each commit, how many pages the
// log holds (Attach installs that hook). Past `pages`, the thread runs a
// passive checkpoint: it copies what it can without waiting for the writer,
// which goes on committing; the log starts again from its beginning at the
// writer's next transaction once a checkpoint has copied all of it.
//
// Thread safety: Attach, the hook and the destructor on the writer's
// thread; the counts and TakeNewError from any.
#ifndef ZTASK_HUB_CHECKPOINTER_H_
#define ZTASK_HUB_CHECKPOINTER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "ztask/status.h"

struct sqlite3;

namespace ztask::hub {

class Checkpointer {
 public:
  // The log a quarter past the limit (the thread did not catch up, and the
  // log restarts only once a checkpoint has copied all of it between two
  // commits): the writer checkpoints itself, so that the log stays within
  // about what it was when SQLite checkpointed in the writer's commits.
  static constexpr int64_t kWriterTakesOverPastQuarters = 5;

  // Opens its own connection to the database at `path` (in WAL mode) and
  // starts its thread; checkpoints once the log holds `pages` pages.
  static Result<std::unique_ptr<Checkpointer>> Start(const std::string& path, int64_t pages);
  // Stops the thread (after the checkpoint it may be running) and closes
  // its connection.
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Makes the writer's connection `writer` tell this checkpointer of each
  // commit, instead of checkpointing itself. REQUIRES: `writer` outlives
  // this checkpointer, or is closed after it.
  void Attach(sqlite3* writer);

  // Checkpoints that copied the whole log; failed ones (a full disk: tried
  // again at the next commit past the limit).
  uint64_t checkpoints() const { return done_.load(); }
  uint64_t failures() const { return failed_.load(); }
  // Checkpoints the writer ran itself (kWriterTakesOverPastQuarters).
  uint64_t writer_checkpoints() const { return writer_checkpoints_.load(); }
  // Once when checkpoints begin to fail, what SQLite said; then nothing
  // until one has succeeded and another fails.
  std::optional<std::string> TakeNewError();

 private:
  Checkpointer(sqlite3* db, int64_t pages) : db_(db), pages_(pages) {}
  static int OnCommit(void* self, sqlite3* writer, const char* name, int pages);
  void Run();

  sqlite3* db_;
  const int64_t pages_;
  sqlite3* writer_ = nullptr;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool due_ = false;   // guarded by mutex_
  bool stop_ = false;  // guarded by mutex_
  bool failing_ = false;  // guarded by mutex_
  std::optional<std::string> new_error_;  // guarded by mutex_
  std::atomic<uint64_t> done_{0};
  std::atomic<uint64_t> failed_{0};
  std::atomic<uint64_t> writer_checkpoints_{0};
  std::thread thread_;
};

}  // namespace ztask::hub

#endif  // ZTASK_HUB_CHECKPOINTER_H_
