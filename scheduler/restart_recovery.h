// RestartRecovery: a scheduler started again takes over what an earlier
// one of its cluster left unfinished (docs/reliability.md). At start it
// restores the tasks the hub recorded as in flight (recovery.h fetches
// them), a task dispatched after the hub's latest record of it as the
// journal noted it (dispatch_log.h), on engine slots that take no new task
// until their engines are back and say what they hold; replies that come
// before their engine is linked are kept for it; engines not back within
// the grace period are lost, with their tasks' attempts.
//
// It must not read any socket: the engine port (engine_port.h) hears the
// engines and asks it here what was restored for them.
//
// Thread safety: owned by the scheduler's loop thread.
#ifndef ZTASK_SCHEDULER_RESTART_RECOVERY_H_
#define ZTASK_SCHEDULER_RESTART_RECOVERY_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>
#include <zmq.hpp>

#include "protocol/connection_file.h"
#include "scheduler/action_applier.h"
#include "scheduler/core.h"
#include "scheduler/dispatch_log.h"
#include "scheduler/inbound.h"
#include "scheduler/kept_requests.h"
#include "scheduler/recovery.h"
#include "scheduler/server.h"

namespace ztask::scheduler {

// Where the hub is, and how long to wait for it and for the engines.
struct RecoverySource {
  zmq::context_t& context;
  const protocol::ConnectionInfo& info;
  double timeout_s;  // SchedulerOptions::recover_timeout_s
  double grace_s;    // SchedulerOptions::recover_grace_s
  // An earlier scheduler of this profile ran (its journal was there).
  bool restarted;
  // The dispatches it noted in its journal.
  const DispatchNotes& dispatched;
};

class RestartRecovery {
 public:
  // REQUIRES: everything given outlives this.
  RestartRecovery(SchedulerCore& core, KeptRequests& requests, ActionApplier& actions,
                  const protocol::Signer& signer, ServerCounters& counters)
      : core_(core), requests_(requests), actions_(actions), signer_(signer), counters_(counters) {}

  // Restores the tasks an earlier scheduler of this cluster left unfinished,
  // as the hub recorded them; asks until the hub answers or `stop`.
  void Recover(const RecoverySource& source, const std::atomic<bool>& stop);

  // A task restored as running on `slot` (engine `engine_id`) as `attempt`
  // from a note of the journal, or taken as running there when its engine
  // said it holds it; the hub has no record of that attempt yet.
  struct Noted {
    TaskId id;
    EngineSlot slot;
    int32_t engine_id;
    int32_t attempt;
  };
  // Those restored by Recover or taken by EngineBack since the last call,
  // given once: each is to be noted and recorded, as a dispatch of this
  // scheduler's.
  std::vector<Noted> TakeNoted() {
    std::vector<Noted> noted;
    noted.swap(noted_);
    return noted;
  }

  // Whether engines that may hold restored tasks have not come back yet.
  bool waiting() const { return !recovered_slots_.empty() || hold_; }
  // Whether engines take no task yet: some that may hold restored tasks
  // have not said what they hold, and the grace period has not ended.
  bool holding() const { return hold_; }
  // `slot` (an engine that came now, or is back) takes tasks once no
  // engine is waited for; at once when none is.
  void AcceptWhenAllBack(EngineSlot slot);
  // Whether the restored state has tasks on engine `engine_id`, not linked
  // to a connected engine yet.
  bool HasTasksOf(int32_t engine_id) const { return recovered_slots_.count(engine_id) > 0; }
  // Whether an engine that says it is `engine_id` is to be linked to a
  // restored slot: one the hub named, or any while the hub could not name
  // them (then it gets one now, so that what it holds is heard).
  bool Expects(int32_t engine_id);
  // The slot holding the tasks restored on `engine_id`, now linked to its
  // connected engine; nullopt when there is none.
  std::optional<EngineSlot> Link(int32_t engine_id);
  // Whether `slot` is linked but its engine has not said what it holds.
  bool Recovering(EngineSlot slot) const { return recovering_slots_.count(slot) > 0; }
  // The engine of `slot` (`uuid`) is back and holds `held`: tasks restored
  // as running there that it does not hold were lost with its old
  // connection, and tasks it holds that the restored state has waiting were
  // dispatched there after the hub's last record. It takes tasks again.
  void EngineBack(EngineSlot slot, const std::vector<TaskId>& held, const std::string& uuid);
  // The engine of `slot` is gone.
  void Forget(EngineSlot slot);
  // The hub says engine `engine_id` is gone, and none of ours is linked to
  // it: the slot restored for it, if any, goes with its tasks.
  void Unregistered(int32_t engine_id);

  // Keeps a reply (the engine's session, then the message; copied) from an
  // engine not linked yet, while engines are waited for; false when it is
  // not kept.
  bool KeepEarly(Msg reply);
  // The replies kept, given once.
  std::vector<std::vector<std::string>> TakeEarlyReplies();

  // Past the grace period, engines that held restored tasks and did not
  // come back are lost.
  void EndGraceIfDue(int64_t now_us);
  // While the hub could not name the engines at the restart (it started
  // too recently): asks it again, once a second, blocking up to
  // kAskEnginesWaitMs; once it names them, tasks wait only for those not
  // back yet. Call once a turn.
  void AskEnginesIfDue(int64_t now_us, const std::atomic<bool>& stop);

 private:
  // Replies from engines not linked yet, kept while a restart recovers.
  static constexpr size_t kMaxEarlyReplies = 100000;
  static constexpr int64_t kAskEnginesEveryUs = 1'000'000;
  static constexpr int64_t kAskEnginesWaitMs = 200;

  // The slot of an engine id the restored state names: one that holds its
  // tasks and takes none until the engine is back.
  EngineSlot RecoveredSlot(std::optional<int32_t> engine_id);
  // Gives the engines of the tasks restored slots, and finished outcomes.
  void RestoreOutcomes(const RecoveredState& state);
  void Restore(const protocol::RecoveredTask& t, const DispatchNotes& dispatched);
  // Engines back (and those that came) take tasks once every engine waited
  // for is back.
  void ReleaseIfAllBack();
  void Release();

  SchedulerCore& core_;
  KeptRequests& requests_;
  ActionApplier& actions_;
  const protocol::Signer& signer_;
  ServerCounters& counters_;
  // Engine id -> slot of engines holding restored tasks and not linked to
  // a connected engine yet; slots linked but not back (no engine_ready
  // yet); replies that came before their engine was linked.
  std::unordered_map<int32_t, EngineSlot> recovered_slots_;
  std::unordered_set<EngineSlot> recovering_slots_;
  std::vector<std::vector<std::string>> early_replies_;  // copies of the messages
  int64_t deadline_us_ = 0;
  // Engines take no task until those waited for are back (holding()); the
  // slots that wait to take them.
  bool hold_ = false;
  bool hold_to_grace_end_ = false;  // the hub could not name the engines
  std::vector<EngineSlot> back_;
  std::vector<Noted> noted_;
  // The hub's query socket while it is to be asked which engines there are.
  std::optional<zmq::socket_t> query_;
  int64_t next_ask_us_ = 0;
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_RESTART_RECOVERY_H_
