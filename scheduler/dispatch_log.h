// DispatchLog: the dispatches the hub has no record of yet, kept in the
// journal until it has one. A short task's dispatch reaches the hub only in
// its outcome (hub_link.h, set_record_running_after): were the scheduler to
// die after sending it, and its engine too before resending the reply, the
// next scheduler would find the task waiting, as if never sent, and run it
// again under the same attempt. So each dispatch is noted (task, engine,
// attempt) in the journal before it leaves, in the same write as the turn's
// monitor batch; the next scheduler restores a task the hub has waiting,
// or running an earlier attempt, as running the noted attempt on the noted
// engine, which then says whether it holds it (restart_recovery.h).
//
// A turn's notes are one record of the journal, written at most once per
// turn. Each dispatch has a serial number; a record is covered once every
// dispatch in it was either due to be recorded (and recorded if its task
// still ran) or had its outcome recorded, and released once the batches
// sealed by then are acknowledged.
//
// Record: two frames, kTag and the notes, 24 bytes each: the task's 16
// bytes, then the engine's id and the attempt (4 bytes each,
// little-endian). Earlier versions of the scheduler release a record of
// fewer frames than a message has without reading it.
//
// Thread safety: owned by the scheduler's loop thread.
#ifndef ZTASK_SCHEDULER_DISPATCH_LOG_H_
#define ZTASK_SCHEDULER_DISPATCH_LOG_H_

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "protocol/wire.h"
#include "scheduler/journal.h"
#include "ztask/task_id.h"

namespace ztask::scheduler {

struct DispatchNote {
  int32_t engine_id = -1;
  int32_t attempt = 0;
};
// The latest noted dispatch of each task.
using DispatchNotes = std::unordered_map<TaskId, DispatchNote, TaskIdHash>;

class DispatchLog {
 public:
  static constexpr std::string_view kTag = "ztask dispatches 1";
  static constexpr size_t kNoteBytes = 24;

  // Task `id` goes to engine `engine_id` as `attempt`: dispatch `serial`
  // (serials grow by one with each dispatch).
  void Add(const TaskId& id, int32_t engine_id, int32_t attempt, int64_t serial);
  // Whether notes wait to be written.
  bool waiting() const { return !pending_.empty(); }
  // The record of the notes waiting.
  protocol::Frames Record() const;
  // That record is now in `segment` of the journal; less than 0: it could
  // not be written, and its notes are let go.
  void Written(int64_t segment);
  // A record an earlier scheduler wrote, in `segment`: kept until
  // HandOver, then released as this scheduler's own.
  void Adopt(int64_t segment) { adopted_.push_back(segment); }
  // The tasks the adopted records note are restored, and those restored as
  // running noted again (waiting, or none): the adopted records are
  // released as this scheduler's own once those notes are written. Should
  // that write fail, they are kept for good (a next scheduler reads them).
  void HandOver();

  // Every dispatch up to `serial` is covered by what the batches up to
  // `seq` hold: so are the records holding only those.
  void Cover(int64_t serial, int64_t seq);
  // Every batch up to `seq` is acknowledged: the records covered by them
  // are released from `journal`.
  void AcknowledgedThrough(int64_t seq, Journal& journal);
  // Records written and not released.
  size_t kept() const { return adopted_.size() + written_.size() + covered_.size(); }

  // Whether `record` is a record of notes.
  static bool IsRecord(const protocol::Frames& record);
  // Adds the notes of `record` to `into`, the later attempt of a task
  // winning. Returns false (adding nothing) when it does not hold together.
  static bool Read(const protocol::Frames& record, DispatchNotes& into);

 private:
  void ReleaseAdopted();

  struct Kept {
    int64_t segment;
    int64_t last_serial;  // of the dispatches noted in it
  };
  struct Covered {
    int64_t segment;
    int64_t seq;
  };
  std::string pending_;
  int64_t pending_last_serial_ = 0;
  std::deque<Kept> written_;     // oldest first
  std::deque<Covered> covered_;  // in order of seq
  std::vector<int64_t> adopted_;  // segments of an earlier scheduler's records
  // kDone: the adopted records handed over, or kept for good.
  enum class HandOverState : uint8_t { kNotYet, kWithNextWrite, kDone };
  HandOverState hand_over_ = HandOverState::kNotYet;
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_DISPATCH_LOG_H_
