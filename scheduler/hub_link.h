// HubLink: the scheduler's monitor DEALER to the hub. It records what the
// loop did into the monitor batches (a task submitted, its outcomes, and
// its assignment once it has run for a while), hears the hub's
// acknowledgements of them (monitor_link.h keeps each batch until then),
// asks the hub about dependencies the core does not know and hands the
// answers to the core, sends the scheduler's counts once
// a second, and at start sends what an earlier scheduler left in the
// journal.
//
// It must not decide anything about a task or an engine: it records and
// asks. The hub's notices about engines come on another socket
// (hub_notices.h).
//
// Thread safety: owned by the scheduler's loop thread.
#ifndef ZTASK_SCHEDULER_HUB_LINK_H_
#define ZTASK_SCHEDULER_HUB_LINK_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <zmq.hpp>

#include "scheduler/core.h"
#include "scheduler/frame_builder.h"
#include "scheduler/inbound.h"
#include "scheduler/journal.h"
#include "scheduler/monitor_link.h"
#include "scheduler/server.h"

namespace ztask::scheduler {

class HubLink {
 public:
  // Past this much unacknowledged by the hub, no new task is taken. The
  // hub holds new tasks' records back (and their batches unacknowledged)
  // while they come to less than 96 MiB (hub/server_impl.h).
  static constexpr size_t kMaxUnacknowledgedBytes = size_t{128} << 20;

  // REQUIRES: everything given outlives the link.
  HubLink(zmq::socket_t& monitor, FrameBuilder& builder, const protocol::Signer& signer,
          Inbound& inbound, SchedulerCore& core, ServerCounters& counters)
      : socket_(monitor),
        builder_(builder),
        signer_(signer),
        inbound_(inbound),
        core_(core),
        counters_(counters),
        link_(monitor, builder) {}

  // The batches and their acknowledgements.
  MonitorLink& link() { return link_; }
  const MonitorLink& link() const { return link_; }
  bool far_behind() const { return link_.unacknowledged_bytes() > kMaxUnacknowledgedBytes; }

  // A monitor message carrying a request's parts as they came (`request`:
  // the client's session, then the message).
  void RecordCopy(protocol::MsgType type, Msg request);
  // Tasks dispatched are recorded as assigned only once they have run this
  // long (SchedulerOptions::record_running_after_s): the hub hears two
  // records of a task that ends sooner (submitted, and its outcome, which
  // names the engine), so that a short task costs it no third. A running
  // task's live state is the scheduler's; what the hub shows of it may be
  // this much late. After a restart, a task dispatched and not recorded is
  // found on its engine (restart_recovery.h).
  void set_record_running_after(int64_t us) { assigned_after_us_ = us; }

  // Task `id` was dispatched to `slot` (engine `engine_id`) as `attempt`:
  // noted in the journal before it leaves (dispatch_log.h), and recorded by
  // RecordLongAssignments if it still runs there then.
  void RecordAssigned(const TaskId& id, EngineSlot slot, int32_t engine_id, int32_t attempt);
  // Records a task_assigned for each task dispatched that long ago
  // (set_record_running_after) or more that still runs as dispatched. Call
  // once a turn.
  void RecordLongAssignments(int64_t now_us);
  // The journal's notes of the dispatches RecordLongAssignments has looked
  // at are covered by the batches sealed so far (dispatch_log.h). Call at
  // the end of a turn, after sealing.
  void CoverDispatches() {
    link_.CoverDispatches(assigned_.empty() ? next_serial_ - 1 : assigned_.front().serial - 1);
  }
  // When RecordLongAssignments has one to look at next; nullopt: none.
  std::optional<int64_t> NextAssignmentUs() const {
    if (assigned_.empty()) return std::nullopt;
    return assigned_.front().due_us;
  }
  // A task_outcome of `a`; `buffers`: the reply's, when the outcome is an
  // engine's reply.
  void RecordOutcome(const Action& a, bool final, std::string_view parent,
                     std::string_view content, Msg buffers = {});

  // A message from the hub on the monitor socket: an acknowledgement, or
  // the answer to a lookup. Returns 0 (no task in it).
  size_t OnMessage(protocol::Frames& frames);

  // Asks the hub about `unknown` (dependencies the core does not know),
  // after the batches sent before, and again those unanswered for
  // kLookupAgainUs.
  void SendLookups(std::vector<TaskId> unknown, int64_t now_us);
  // Whether lookups wait for an answer.
  bool asking() const { return !lookups_asked_.empty(); }

  // Signs and sends the scheduler's counts; the hub away, they are lost
  // (the next second's replace them).
  void SendStats(const protocol::SchedulerStats& stats);

  // Sends the hub the batches an earlier scheduler recorded in `journal`
  // and the hub never acknowledged, and waits until it has (before it is
  // asked what was in flight, so that its answer is whole), up to
  // `timeout_s` or until `stop`.
  void ReplayJournal(Journal& journal, double timeout_s, const std::atomic<bool>& stop);
  // The dispatches an earlier scheduler noted in the journal (given once,
  // after ReplayJournal).
  DispatchNotes TakeFoundDispatches() { return std::move(found_dispatches_); }

 private:
  // Monitor messages go to the hub in batches, one signature each: a batch
  // is sealed when it is full and at the end of every turn of the loop.
  static constexpr size_t kBatchMessages = 1024;
  static constexpr size_t kBatchBytes = size_t{8} << 20;
  static constexpr int64_t kLookupAgainUs = 2'000'000;
  static constexpr size_t kIdsPerLookup = 1000;

  void SealIfFull() {
    if (builder_.batched() >= kBatchMessages || builder_.batched_bytes() >= kBatchBytes) {
      link_.Seal();
    }
  }
  void OnLookupReply(const std::vector<std::string_view>& views);

  zmq::socket_t& socket_;
  FrameBuilder& builder_;
  const protocol::Signer& signer_;
  Inbound& inbound_;
  SchedulerCore& core_;
  ServerCounters& counters_;
  MonitorLink link_;
  // Lookups sent and not answered, by request id: the ids, and when sent.
  struct LookupAsked {
    std::vector<TaskId> ids;
    int64_t sent_us = 0;  // 0: not sent yet (the socket would not take it)
  };
  std::map<TaskId, LookupAsked> lookups_asked_;
  int64_t assigned_after_us_ = 50'000;
  // Dispatches not recorded yet, oldest first.
  struct Dispatched {
    TaskId id;
    int64_t due_us;
    EngineSlot slot;
    int32_t engine_id;
    int32_t attempt;
    int64_t serial;
  };
  std::deque<Dispatched> assigned_;
  int64_t next_serial_ = 1;
  // Past this many, those that no longer run are let go (a long delay
  // would otherwise keep one a dispatch).
  static constexpr size_t kCompactAssignedFrom = size_t{1} << 16;
  size_t compact_at_ = kCompactAssignedFrom;
  const std::string session_ = TaskId::Random().ToHex();
  DispatchNotes found_dispatches_;
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_HUB_LINK_H_
