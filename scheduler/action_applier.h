// ActionApplier: carries out what the core asks (core.h, Action): a task to
// an engine, a reply or an error to its client, a retry or a return
// recorded for the hub, a drained engine told to go. Every socket's handler
// hands the core an event and then has its actions applied here, with the
// engine's reply being handled when there is one: the frames a delivery or
// a retry passes on are the reply's, given with the call.
//
// It must not read any socket, nor decide anything: which task goes where,
// and when, is the core's. What it sends is queued in the outboxes
// (outbox.h) and leaves at the end of the loop's turn.
//
// Thread safety: owned by the scheduler's loop thread.
#ifndef ZTASK_SCHEDULER_ACTION_APPLIER_H_
#define ZTASK_SCHEDULER_ACTION_APPLIER_H_

#include <string>
#include <string_view>
#include <vector>
#include <zmq.hpp>

#include "protocol/peer_routes.h"
#include "scheduler/core.h"
#include "scheduler/engine_directory.h"
#include "scheduler/frame_builder.h"
#include "scheduler/hub_link.h"
#include "scheduler/inbound.h"
#include "scheduler/kept_requests.h"
#include "scheduler/outbox.h"

namespace ztask::scheduler {

// Where the applier sends: the outboxes of both ROUTERs, and the engine
// socket itself for a retirement (sent at once, on the connection the
// engine proved).
struct ActionTargets {
  Outbox& clients;
  Outbox& engines;
  zmq::socket_t& engine_socket;
  protocol::PeerRoutes& engine_routes;
};

class ActionApplier {
 public:
  // No engine's reply is being handled.
  static constexpr Msg kNoReply{};

  // REQUIRES: everything given outlives the applier.
  ActionApplier(SchedulerCore& core, KeptRequests& requests, EngineDirectory& engines,
                HubLink& hub, FrameBuilder& builder, const protocol::Signer& signer,
                ActionTargets targets)
      : core_(core),
        requests_(requests),
        engines_(engines),
        hub_(hub),
        builder_(builder),
        signer_(signer),
        targets_(targets) {}

  // Carries out every action the core has, and those they cause.
  // `reply`: the engine's reply being handled (its session, then the
  // message), whose frames a delivery or a retry passes on; kNoReply when
  // the event was not a reply.
  void ApplyAll(Msg reply);

  // Starts loading what taking or finishing task `id` looks up (its kept
  // request, its entries in the core), a few messages of a batch ahead.
  void Prefetch(const TaskId& id) const {
    requests_.Prefetch(id);
    core_.Prefetch(id);
  }

  // Fails a task the core never took (the loop refused it), with its final
  // reply to the client and its record in the hub, as any failure.
  void Fail(const Action& a, const PackedRequest& request);

 private:
  void Apply(const Action& a, Msg reply);
  // A drained engine may go: tell it, and forget it (it unregisters).
  void Retire(const Action& a);
  // Notes a task to ask back from its engine (SendTakeBacks asks).
  void TakeBack(const Action& a);
  // One task_take_back to each engine that has tasks to give back.
  void SendTakeBacks();
  void Dispatch(const Action& a, const PackedRequest& request);
  // REQUIRES: `reply` is the engine's reply that finished the task.
  void Deliver(const Action& a, const PackedRequest& request, Msg reply);
  void Retried(const Action& a, const PackedRequest& request, Msg reply);
  void Returned(const Action& a, const PackedRequest& request);

  SchedulerCore& core_;
  KeptRequests& requests_;
  EngineDirectory& engines_;
  HubLink& hub_;
  FrameBuilder& builder_;
  const protocol::Signer& signer_;
  ActionTargets targets_;
  // An empty vector with room, handed to the core for its next actions
  // (TakeActions): two buffers go back and forth, and a turn allocates none.
  std::vector<Action> spare_;
  // Tasks to ask back, by engine slot, gathered while applying.
  std::vector<std::pair<EngineSlot, TaskId>> take_back_;
  std::vector<std::string_view> frames_;  // a dispatch's, reused
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_ACTION_APPLIER_H_
