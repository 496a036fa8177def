// EnginePort: the scheduler's engine ROUTER, inbound: an engine saying it
// is ready (at its start, or again after its connection broke, with the
// tasks it holds), and the replies of engines, alone or in task_batches,
// handed to the core with the reply itself for the actions that pass it
// on. It also decides when an engine takes tasks (registered by the hub
// and connected here), and removes one the socket cannot reach.
//
// It must not send: tasks leave through the applier's outbox
// (action_applier.h) at the end of the loop's turn. The hub's notices about
// engines come on another socket (hub_notices.h).
//
// Thread safety: owned by the scheduler's loop thread.
#ifndef ZTASK_SCHEDULER_ENGINE_PORT_H_
#define ZTASK_SCHEDULER_ENGINE_PORT_H_

#include <string>

#include "protocol/peer_routes.h"
#include "protocol/replay_guard.h"
#include "scheduler/action_applier.h"
#include "scheduler/core.h"
#include "scheduler/engine_directory.h"
#include "scheduler/inbound.h"
#include "scheduler/restart_recovery.h"
#include "scheduler/server.h"

namespace ztask::scheduler {

class EnginePort {
 public:
  // REQUIRES: everything given outlives the port.
  EnginePort(Inbound& inbound, SchedulerCore& core, EngineDirectory& engines,
             RestartRecovery& recovery, ActionApplier& actions, protocol::PeerRoutes& routes,
             const protocol::ReplayOptions& replay, ServerCounters& counters)
      : inbound_(inbound),
        core_(core),
        engines_(engines),
        recovery_(recovery),
        actions_(actions),
        routes_(routes),
        guard_(replay),
        counters_(counters) {}

  // A message on the engine socket (frames[0]: the connection's routing
  // id). Returns the replies it held.
  size_t OnMessage(protocol::Frames& frames);

  // An engine takes tasks once the hub registered it and it reached us.
  void Activate(const std::string& uuid, EngineEntry& entry);

  // Registered but not connected: treat it as lost, its tasks go elsewhere.
  void Unreachable(const std::string& uuid);
  // The hub says an engine is gone: after our restart, what was restored
  // for it goes too (linked: `slot`; else by its id).
  void Unregistered(int32_t engine_id, EngineSlot slot);

 private:
  void OnEngineReady(const std::string& uuid, const protocol::EngineReady& ready);
  // `msg` is verified: the engine's session, then the reply.
  void OnTaskReply(Msg msg);
  // Replies kept while their engines were not linked yet.
  void ReplayEarlyReplies();
  // Why an engine cannot run a task: its reply's error_message, bounded.
  static std::string UnmetReason(Msg reply);

  Inbound& inbound_;
  SchedulerCore& core_;
  EngineDirectory& engines_;
  RestartRecovery& recovery_;
  ActionApplier& actions_;
  protocol::PeerRoutes& routes_;
  protocol::ReplayGuard guard_;
  ServerCounters& counters_;
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_ENGINE_PORT_H_
