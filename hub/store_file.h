// StoreFile: the SQLite file behind the hub's records (records.h). It owns
// the file's layout (tables, indexes, the conversions from earlier layouts),
// its prepared statements and transactions, reading at start what the
// records in memory need, and writing what they list as changed. It must
// not decide anything about a record: which records change, stay in memory
// or count where is the RecordBook's.
//
// On disk a task is one row, in the order tasks were first recorded: the
// in-memory index, not SQLite's, finds a record, so a write appends new rows
// at the end of the table and rewrites rows recorded about the same time,
// instead of touching pages all over a tree keyed by random ids. The file
// marks finished rows (with a partial index of the unfinished ones) and keeps
// the finished counts per engine, by outcome and per job, so that a start
// reads the unfinished rows, the latest finished ones and the counts: its
// cost does not grow with the history.
//
// Thread safety: owned by one thread.
#ifndef ZTASK_HUB_STORE_FILE_H_
#define ZTASK_HUB_STORE_FILE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hub/checkpointer.h"
#include "hub/records.h"
#include "ztask/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace ztask::hub {

class StoreFile final : public RecordSource {
 public:
  // Opens (creating it when missing, mode 0600) the file at `path` in WAL
  // mode, synchronous=FULL with `power` (every commit reaches the disk) and
  // NORMAL otherwise, and converts a file of an earlier layout (calling
  // `progress` with the rows read, every million).
  static Result<std::unique_ptr<StoreFile>> Open(const std::string& path, bool power,
                                                 std::function<void(size_t)> progress);
  ~StoreFile() override;

  // Reads what a start needs into `book`, whatever the history's length:
  // the finished counts, every unfinished task and the latest
  // `keep_finished` finished ones.
  Status Load(RecordBook* book, size_t keep_finished);

  bool ReadStored(const TaskId& id, protocol::TaskRecord* record, int64_t* row) const override;
  // Appends to *ids up to `limit` ids after `after` (all with nullopt), of
  // `job` when given, in id order, read through the file's indexes.
  void IdsAfter(const std::optional<TaskId>& after, size_t limit,
                const std::optional<std::string>& job, std::vector<TaskId>* ids) const;

  // Writes every change `book` lists in one transaction; on success returns
  // the rows given to new records (for RecordBook::Committed). On failure
  // nothing was written.
  Result<RecordBook::Written> Write(const RecordBook& book);
  // Deletes every finished row and zeroes the finished counts, in one
  // transaction; returns how many rows went, or nullopt when the file
  // could not be written (nothing changed).
  std::optional<size_t> PurgeFinished();

  // Which finished rows DropFinished deletes.
  struct Retention {
    size_t max_finished = 0;         // all but the newest this many; 0: no count bound
    int64_t finished_before_us = 0;  // those that ended before; 0: no age bound
    size_t most = 0;                 // rows deleted in one call, at most
  };
  // Deletes finished rows, oldest recorded first, in one transaction: those
  // beyond the newest `max_finished` finished ones and those that ended
  // before `finished_before_us`, at most `most`, never one whose id
  // `awaited` says an unfinished task depends on. The age is read in the
  // order recorded: the first young row stops it (a row may outlive the
  // age by as long as the tasks recorded before it ran). On success
  // appends the ids deleted to *dropped; on failure nothing was deleted.
  Status DropFinished(const Retention& bound, const std::function<bool(const TaskId&)>& awaited,
                      std::vector<TaskId>* dropped);

  // SQLite's synchronous level on this connection: 2 (FULL), 1 (NORMAL),
  // -1 when it cannot be read.
  int synchronous_level() const;
  // The checkpoints of the write-ahead log, on a thread of their own
  // (checkpointer.h).
  const Checkpointer& checkpointer() const { return *checkpointer_; }
  std::optional<std::string> TakeCheckpointError() { return checkpointer_->TakeNewError(); }

 private:
  StoreFile(sqlite3* db, std::function<void(size_t)> progress)
      : db_(db), progress_(std::move(progress)) {}
  Status Configure(const std::string& path, bool power);
  // The log's pages at which it is checkpointed (32 MiB of them).
  int64_t CheckpointPages() const;
  Status StartCheckpoints(const std::string& path);

  // ---- the layout, and the conversions from earlier ones (store_migration.cc)
  Status Migrate(const std::string& path);
  // From layout 1 to 2: one table of rows in the order recorded.
  Status ToRowsInOrder(const std::string& path);
  // From layout 2: marks every finished row and counts them per engine.
  Status AddFinishedColumn();
  // From layout 3: counts the finished tasks by outcome.
  Status AddOutcomeCounts(const std::string& path);
  // From layout 4: a job column, its index, and the jobs' counts.
  Status AddJobs(const std::string& path);
  // Runs SQL that changes the tables; on failure rolls back and says so.
  Status SetUp(const std::string& sql, const std::string& path);
  Status Prepare();
  void ReportProgress(size_t* read) const;

  // ---- Load's steps
  Status LoadEngineCounts(RecordBook* book);
  Status LoadOutcomeCounts(RecordBook* book);
  Status LoadJobs(RecordBook* book);
  Status LoadUnfinished(RecordBook* book);
  // Returns how many rows were read.
  Result<size_t> LoadLatestFinished(RecordBook* book, size_t keep_finished);
  std::optional<TaskId> LargestId();

  // ---- Write's steps, within its transaction
  Status WriteRecords(const RecordBook& book, RecordBook::Written* written);
  Status DeleteRows(const RecordBook& book);
  Status WriteCounts(const RecordBook& book);
  Status WriteJobs(const RecordBook& book);

  // ---- DropFinished's steps
  // The rows to delete, oldest first, read without deleting.
  Status ChooseDropped(const Retention& bound, const std::function<bool(const TaskId&)>& awaited,
                       std::vector<std::pair<int64_t, TaskId>>* rows);

  sqlite3* db_ = nullptr;
  sqlite3_stmt* find_ = nullptr;  // the row of an id
  std::function<void(size_t)> progress_;
  std::unique_ptr<Checkpointer> checkpointer_;  // set once the file is ready
};

}  // namespace ztask::hub

#endif  // ZTASK_HUB_STORE_FILE_H_
