// ClientPort: the scheduler's client ROUTER, inbound: task requests, alone
// or in task_batches, and abort requests. A task is checked against the
// limits (TaskLimits), recorded for the hub, kept (kept_requests.h) and
// handed to the core; one sent again after a reconnection is recognised.
//
// It must not send a task or a reply itself: what the core decides goes
// through the applier (action_applier.h), and replies leave through the
// clients' outbox at the end of the loop's turn.
//
// Thread safety: owned by the scheduler's loop thread.
#ifndef ZTASK_SCHEDULER_CLIENT_PORT_H_
#define ZTASK_SCHEDULER_CLIENT_PORT_H_

#include <string>
#include <string_view>
#include <vector>

#include "protocol/peer_routes.h"
#include "protocol/replay_guard.h"
#include "scheduler/action_applier.h"
#include "scheduler/core.h"
#include "scheduler/frame_builder.h"
#include "scheduler/hub_link.h"
#include "scheduler/inbound.h"
#include "scheduler/kept_requests.h"
#include "scheduler/outbox.h"
#include "scheduler/server.h"

namespace ztask::scheduler {

class ClientPort {
 public:
  // REQUIRES: everything given outlives the port; `out` sends on the
  // socket whose messages the port is given.
  ClientPort(Inbound& inbound, SchedulerCore& core, KeptRequests& requests, ActionApplier& actions,
             HubLink& hub, FrameBuilder& builder, Outbox& out, protocol::PeerRoutes& routes,
             const protocol::ReplayOptions& replay, const TaskLimits& limits,
             ServerCounters& counters)
      : inbound_(inbound),
        core_(core),
        requests_(requests),
        actions_(actions),
        hub_(hub),
        builder_(builder),
        out_(out),
        routes_(routes),
        guard_(replay),
        limits_(limits),
        counters_(counters) {}

  // A message on the client socket (frames[0]: the connection's routing
  // id). Returns the tasks it held.
  size_t OnMessage(protocol::Frames& frames);

 private:
  void OnTaskRequest(const protocol::Header& header, Msg msg);
  // Why a task may not be taken (TaskLimits), or "".
  std::string OverLimit(const protocol::RoutingMeta& meta, Msg msg, std::string_view client) const;
  // Fails a task at once, recorded in the hub like any other outcome.
  void Reject(const protocol::Header& header, Msg msg, const std::string& why);
  void OnAbortRequest(const std::vector<std::string_view>& views, protocol::Frames& frames);

  Inbound& inbound_;
  SchedulerCore& core_;
  KeptRequests& requests_;
  ActionApplier& actions_;
  HubLink& hub_;
  FrameBuilder& builder_;
  Outbox& out_;
  protocol::PeerRoutes& routes_;
  protocol::ReplayGuard guard_;
  const TaskLimits limits_;
  ServerCounters& counters_;
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_CLIENT_PORT_H_
