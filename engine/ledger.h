// The engine's bookkeeping of the tasks it is given and the replies it
// sends, without I/O or clock of its own (the caller passes the time), as
// the scheduler's core is: which tasks are queued here (a task sent again
// while queued is taken once), the latest replies kept to be sent again
// (after a reconnection, or when a restarted scheduler sends a task that
// already ran here: its reply again, not a second run), the send-ahead
// gate (a task sent behind another runs only once that one succeeded
// here), and the replies waiting to go together in one batch, with when
// they must go.
//
// Thread safety: none; owned by the engine core (engine/engine_core.h).
#ifndef ZTASK_ENGINE_LEDGER_H_
#define ZTASK_ENGINE_LEDGER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/flat_id_map.h"
#include "protocol/codec.h"
#include "ztask/task_id.h"

namespace ztask::engine {

class Ledger {
 public:
  // Kept replies: at most this many and about this many bytes (the latest
  // one always).
  static constexpr size_t kKeepReplies = 1024;
  static constexpr size_t kKeepBytes = size_t{16} << 20;
  // A batch of replies holds at most this many, or bytes (then it goes at
  // once): the protocol's limits on a batch.
  static constexpr size_t kBatchReplies = protocol::kMaxBatchTasks;
  static constexpr size_t kBatchBytes = protocol::kMaxBatchBytes;
  // The replies waiting go when there are this many, or the oldest waited
  // this long (or nothing runs: engine/pool.h).
  static constexpr size_t kFlushReplies = 32;
  static constexpr int64_t kFlushAfterUs = 200;

  // What becomes of a task that arrives.
  enum class Arrival {
    kQueued,     // new here: to run
    kDuplicate,  // queued here already: ignored
    kAnswered,   // ran here at this attempt or later: its kept reply goes again
  };
  // Limits may be lowered (tests); the defaults are the constants above.
  explicit Ledger(size_t keep_replies = kKeepReplies, size_t keep_bytes = kKeepBytes,
                  size_t batch_replies = kBatchReplies, size_t batch_bytes = kBatchBytes);

  Arrival Arrive(const TaskId& id, int32_t attempt, int64_t now_us);
  // The task left the queue (it starts, or is answered without running).
  void Dequeued(const TaskId& id) { queued_.erase(id); }
  size_t queued() const { return queued_.size(); }

  // A task sent ahead behind `run_after` may run: that one ran here and
  // succeeded (it came first, so its reply is among the latest kept).
  bool MayRun(const std::optional<TaskId>& run_after) const;

  // A task's reply (its frames, header first): kept, and waiting to go in
  // the next batch. `ran_ok`: it ran and succeeded.
  void Reply(const TaskId& id, int32_t attempt, bool ran_ok, std::vector<std::string> frames,
             int64_t now_us);
  // Every kept reply waits to go again (a reconnection); how many.
  size_t ResendAll(int64_t now_us);

  // Whether the waiting replies must go now: the batch is full.
  bool BatchFull() const {
    return unsent_.size() >= batch_replies_ || unsent_bytes_ >= batch_bytes_;
  }
  // Whether they are due to go: enough of them wait, or the oldest waited
  // long enough.
  bool FlushDue(int64_t now_us) const;
  bool has_unsent() const { return !unsent_.empty(); }
  // When the oldest waiting reply was given (meaningful while one waits).
  int64_t unsent_since_us() const { return unsent_since_us_; }
  // A reply's frames, shared by the kept reply and the copies waiting to
  // go (a reply is not copied to be sent).
  using Frames = std::shared_ptr<const std::vector<std::string>>;
  // The first batch of the waiting replies, in the order given: at most
  // batch_replies of them and, beyond the first, batch_bytes.
  std::vector<Frames> TakeUnsent();

  size_t kept() const { return kept_.size(); }

 private:
  struct Kept {
    TaskId id;
    int32_t attempt;
    bool ok;
    Frames frames;
    size_t bytes;
  };
  const Kept* KeptFor(const TaskId& id) const;
  // A copy of a kept reply's frames waits to go.
  void Queue(const Kept& kept, int64_t now_us);

  const size_t keep_replies_, keep_bytes_, batch_replies_, batch_bytes_;
  FlatIdMap<uint8_t> queued_;  // a set
  std::deque<Kept> kept_;
  // Into kept_ (a deque keeps its elements in place as its ends change):
  // the latest reply of each id.
  FlatIdMap<const Kept*> kept_by_id_;
  size_t kept_bytes_ = 0;
  std::deque<std::pair<Frames, size_t>> unsent_;  // frames, bytes
  size_t unsent_bytes_ = 0;
  int64_t unsent_since_us_ = 0;
};

}  // namespace ztask::engine

#endif  // ZTASK_ENGINE_LEDGER_H_
