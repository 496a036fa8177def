// What a restarted scheduler learns from the hub before it serves: every
// task submitted and not finished (with its request, its attempts and where
// its latest attempt runs), and the outcomes of the finished tasks those
// depend on. Fetched page by page over the hub's query socket.
//
// Thread safety: call from the thread that owns `context`'s sockets here.
#ifndef ZTASK_SCHEDULER_RECOVERY_H_
#define ZTASK_SCHEDULER_RECOVERY_H_

#include <atomic>
#include <optional>
#include <vector>
#include <zmq.hpp>

#include "protocol/codec.h"
#include "protocol/connection_file.h"
#include "ztask/status.h"

namespace ztask::scheduler {

struct RecoveredState {
  std::vector<protocol::RecoveredTask> tasks;
  std::vector<protocol::FinishedTask> finished;
  // The engines registered when the hub answered; nullopt when it could
  // not tell.
  std::optional<std::vector<int32_t>> engines;
};

// Asks the hub at info.hub.query for the unfinished tasks and the outcomes
// of the finished tasks they depend on, page by page. A hub that does not answer is
// asked again, with an error in the log every `timeout_ms`, until it does
// or `stop` is set: a scheduler never runs without the state it could not
// read.
Result<RecoveredState> FetchRecovery(zmq::context_t& context, const protocol::ConnectionInfo& info,
                                     const protocol::Signer& signer, int64_t timeout_ms,
                                     const std::atomic<bool>& stop);

// A DEALER to the hub's query socket (info.hub.query), connected.
Result<zmq::socket_t> ConnectQuery(zmq::context_t& context, const protocol::ConnectionInfo& info);

// The engines the hub has registered, asked once on `hub` (from
// ConnectQuery; no task is read), waiting up to `timeout_ms`; nullopt when
// it did not answer or cannot tell yet.
std::optional<std::vector<int32_t>> FetchEngines(zmq::socket_t& hub, const protocol::Signer& signer,
                                                 int64_t timeout_ms, const std::atomic<bool>& stop);

// The tasks in an order where each comes after the tasks it depends on
// (those that are among them), so that submitting them in turn never meets
// an id not seen yet.
std::vector<const protocol::RecoveredTask*> DependencyOrder(const RecoveredState& state);

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_RECOVERY_H_
