// A DEALER that speaks the wire protocol by hand, as an attacker (or a
// client of another make) would: it sends whatever frames it is given.
#ifndef ZTASK_TESTS_SUPPORT_RAW_PEER_H_
#define ZTASK_TESTS_SUPPORT_RAW_PEER_H_

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "base/clock.h"
#include "base/reactor.h"
#include "protocol/codec.h"
#include "protocol/connection_file.h"
#include "protocol/wire.h"

namespace ztask::testing {

class RawPeer {
 public:
  explicit RawPeer(const std::string& endpoint, const protocol::CurveKeys* curve = nullptr) {
    socket_.set(zmq::sockopt::linger, 0);
    if (curve) {
      socket_.set(zmq::sockopt::curve_serverkey, curve->server_public);
      socket_.set(zmq::sockopt::curve_publickey, curve->client_public);
      socket_.set(zmq::sockopt::curve_secretkey, curve->client_secret);
    }
    socket_.connect(endpoint);
  }
  void Send(const std::vector<std::string>& frames) { ASSERT_TRUE(TrySend(frames)); }
  // False when it could not even be queued: a peer whose handshake the
  // server refused may have no connection left to queue on.
  bool TrySend(const std::vector<std::string>& frames) {
    protocol::Frames out;
    for (const auto& f : frames) out.push_back(protocol::Frame(f));
    return protocol::SendFrames(socket_, out).ok();
  }
  // One message within `ms`, or nothing.
  bool Receive(protocol::Frames& frames, int ms) {
    base::WaitReady(socket_, ZMQ_POLLIN, std::chrono::milliseconds(ms));
    return protocol::TryReceive(socket_, frames);
  }

 private:
  zmq::context_t context_{1};
  zmq::socket_t socket_{context_, zmq::socket_type::dealer};
};

// A signed task_request of `spec`, as a client would send it.
inline std::vector<std::string> TaskRequest(const protocol::Signer& signer,
                                            const std::string& session, const TaskId& id,
                                            const protocol::TaskSpec& spec) {
  return protocol::EncodeMessage(
      signer, {id, protocol::MsgType::kTaskRequest, session, base::WallMicros()},
      std::nullopt, protocol::RoutingMeta{}, spec);
}

inline std::vector<std::string> CommandRequest(const protocol::Signer& signer,
                                               const std::string& session, const TaskId& id,
                                               std::vector<std::string> argv) {
  protocol::TaskSpec spec;
  spec.kind = "command";
  spec.argv = std::move(argv);
  return TaskRequest(signer, session, id, spec);
}

// The task_replies in a message from the scheduler (a task_batch of them),
// decoded; an error when the message is anything else or fails its
// signature.
inline Result<std::vector<protocol::DecodedOf<protocol::MsgType::kTaskReply>>> RepliesIn(
    const protocol::Signer& signer, const protocol::Frames& frames) {
  const auto views = protocol::Views(frames);
  auto batch = protocol::DecodeMessage<protocol::MsgType::kTaskBatch>(
      signer, protocol::Limits{}, views);
  if (!batch.ok()) return batch.status();
  auto inner = protocol::UnpackBatch(views);
  if (!inner.ok()) return inner.status();
  std::vector<protocol::DecodedOf<protocol::MsgType::kTaskReply>> out;
  for (auto& message : *inner) {
    // Unsigned inside the batch: checked as a message of an unsigned cluster.
    message[protocol::kFrameSignature] = protocol::kProtocolSignature;
    auto reply = protocol::DecodeMessage<protocol::MsgType::kTaskReply>(protocol::Signer(), {},
                                                                         message);
    if (!reply.ok()) return reply.status();
    out.push_back(std::move(*reply));
  }
  return out;
}

}  // namespace ztask::testing

#endif  // ZTASK_TESTS_SUPPORT_RAW_PEER_H_
