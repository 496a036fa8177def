// MonitorLink: the scheduler's side of the monitor, delivering every batch
// of task_submitted / task_assigned / task_outcome messages to the hub at
// least once. Each batch carries a number; the hub acknowledges numbers once
// their records are in its database. Unacknowledged batches stay here and go
// again, resealed with a fresh header, when the connection to the hub was
// made again, or when the hub has acknowledged nothing for kResendAfterUs
// since the oldest of them was sent (it died without the connection showing
// it). A hub that acknowledges, however far behind, is not sent anything
// twice. The hub applies a batch twice, or out of order, harmlessly
// (store.h).
//
// The link never blocks its loop: a socket that will not take a batch now
// (the hub is down: the DEALER is set to queue nothing for absent peers) is
// tried again at the next Flush. Each call costs what it sends, not what
// waits for an acknowledgement.
//
// Thread safety: owned by the scheduler's loop thread.
#ifndef ZTASK_SCHEDULER_MONITOR_LINK_H_
#define ZTASK_SCHEDULER_MONITOR_LINK_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <vector>
#include <zmq.hpp>

#include "protocol/wire.h"
#include "scheduler/dispatch_log.h"
#include "scheduler/frame_builder.h"
#include "scheduler/journal.h"

namespace ztask::scheduler {

class MonitorLink {
 public:
  // Resend after the hub has been silent this long (it holds a batch back
  // for up to 2.5 s, hub/server_impl.h, and may be behind in reading).
  static constexpr int64_t kResendAfterUs = 5'000'000;
  // Sealed batches wait up to this long after the last send, unless this
  // many are waiting: a hub woken for every turn of a lightly loaded
  // scheduler takes the CPU its round trips need. The journal, not the
  // hub, is what must hold a record before the messages it describes
  // leave, so holding batches here loses nothing.
  static constexpr int64_t kHoldUs = 1000;
  static constexpr size_t kHoldBatches = 16;

  // REQUIRES: socket and builder outlive the link.
  MonitorLink(zmq::socket_t& socket, FrameBuilder& builder) : socket_(socket), builder_(builder) {}

  // Without a hub to send to, batches are made and let go.
  void set_enabled(bool enabled) { enabled_ = enabled; }
  // Every batch is written to `journal` before it is queued (journal.h).
  // REQUIRES: the journal outlives the link.
  void set_journal(Journal* journal) { journal_ = journal; }
  // Whether dispatches are noted in the journal (it is there).
  bool noting() const { return journal_ != nullptr; }
  // The notes of dispatches the hub has no record of yet (dispatch_log.h):
  // they go into the journal with the next batch sealed, or alone.
  DispatchLog& dispatches() { return dispatches_; }
  // Takes over a batch an earlier scheduler left in the journal: it gets a
  // number of ours and goes first. Notes it left are kept as ours.
  void Adopt(Journal::Found found);
  // Writes the notes waiting, which no batch took this turn. Call before
  // the dispatches they note leave.
  void WriteDispatches();
  // Notes of dispatches up to `serial` only are covered by the batches
  // sealed so far, and released once those are acknowledged.
  // REQUIRES: what the hub is to hear of those dispatches is sealed.
  void CoverDispatches(int64_t serial);
  // Seals what the builder has batched (if anything) and queues it.
  void Seal();
  // Sends what has not been sent (once kHoldUs has passed since the last
  // send, or kHoldBatches wait, or at once with `now`), and everything
  // unacknowledged when the hub has been silent for kResendAfterUs.
  void Flush(int64_t now_us, bool now = false);
  // When Flush will send what waits; nullopt when nothing waits, or when
  // the socket refused it (wait for it to take more: blocked()).
  std::optional<int64_t> NextSendUs() const;
  // The hub has recorded these batches.
  void Acknowledged(const std::vector<int64_t>& seqs, int64_t now_us);
  // The connection to the hub was made again: everything unacknowledged
  // goes again at the next Flush.
  void Reconnected();

  // Whether a batch waits for the socket to take it.
  bool blocked() const { return socket_full_ && !to_send_.empty(); }
  size_t unacknowledged() const { return unacked_.size(); }
  // The memory they hold, counted with each frame's own.
  size_t unacknowledged_bytes() const { return unacked_bytes_; }
  uint64_t resent() const { return resent_; }

 private:
  struct Batch {
    protocol::Frames frames;
    int64_t sent_us = 0;  // 0: waits in to_send_
    size_t bytes = 0;
    int64_t segment = -1;  // of the journal that holds it (-1: none)
  };

  void Keep(int64_t seq, protocol::Frames batch, int64_t segment);
  // Appends, in one write, the dispatch notes waiting (if any) and `batch`
  // (if given): the segment that holds them. REQUIRES: journal_.
  Result<int64_t> AppendWithNotes(const protocol::Frames* batch);
  // Appends to the journal: the segment that holds it, or -1 (logged).
  // REQUIRES: journal_.
  int64_t WriteAhead(const protocol::Frames& batch);
  // Appends the batches that could not be (unjournaled_); false when one
  // still cannot be.
  bool JournalAgain();
  // Every batch sent and unacknowledged goes again.
  void SendAllAgain();
  // The latest number up to which every batch is acknowledged.
  int64_t AcknowledgedThrough() const {
    return unacked_.empty() ? next_seq_ - 1 : unacked_.begin()->first - 1;
  }

  zmq::socket_t& socket_;
  FrameBuilder& builder_;
  std::map<int64_t, Batch> unacked_;  // by number
  std::deque<int64_t> to_send_;       // numbers, in sending order
  size_t unacked_bytes_ = 0;
  int64_t next_seq_ = 1;
  int64_t last_ack_us_ = 0;
  int64_t last_send_us_ = 0;
  bool socket_full_ = false;
  uint64_t resent_ = 0;
  bool enabled_ = false;
  Journal* journal_ = nullptr;
  bool journal_failing_ = false;
  bool journal_spilling_ = false;  // its appends go to the spill directory
  // Batches (by number) whose append failed, oldest first: each is
  // appended again before the next batch.
  std::deque<int64_t> unjournaled_;
  DispatchLog dispatches_;
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_MONITOR_LINK_H_
