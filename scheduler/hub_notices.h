// HubNotices: the scheduler's SUB to the hub's notifier: engines
// registered (again, perhaps under a new uuid), draining, unregistered. The
// hub may repeat a notice; each is taken once.
//
// It must not send, nor read the engines' own word (engine_port.h): whether
// an engine takes tasks once both have spoken is the engine port's
// (EnginePort::Activate).
//
// Thread safety: owned by the scheduler's loop thread.
#ifndef ZTASK_SCHEDULER_HUB_NOTICES_H_
#define ZTASK_SCHEDULER_HUB_NOTICES_H_

#include "scheduler/action_applier.h"
#include "scheduler/core.h"
#include "scheduler/engine_directory.h"
#include "scheduler/engine_port.h"
#include "scheduler/inbound.h"

namespace ztask::scheduler {

class HubNotices {
 public:
  // REQUIRES: everything given outlives this.
  HubNotices(Inbound& inbound, SchedulerCore& core, EngineDirectory& engines,
             EnginePort& engine_port, ActionApplier& actions)
      : inbound_(inbound),
        core_(core),
        engines_(engines),
        engine_port_(engine_port),
        actions_(actions) {}

  // A message from the notifier. Returns 0 (no task in it).
  size_t OnMessage(protocol::Frames& frames);

 private:
  // False when the notice changes nothing (heard already, or of an
  // engine not known).
  bool OnRegistered(const protocol::EngineInfo& info);
  void OnDraining(const protocol::EngineRef& ref);
  bool OnUnregistered(const protocol::EngineRef& ref);

  Inbound& inbound_;
  SchedulerCore& core_;
  EngineDirectory& engines_;
  EnginePort& engine_port_;
  ActionApplier& actions_;
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_HUB_NOTICES_H_
