#include "bench/simulated_engines.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
#include <memory>
#include <vector>
#include <zmq.hpp>

#include "protocol/codec.h"
#include "protocol/connection_file.h"
#include "protocol/security.h"
#include "protocol/wire.h"

namespace ztask::bench {
namespace {

using protocol::MsgType;

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

int64_t SteadyMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

struct Sim {
  std::string uuid;
  int32_t id = -1;
  std::unique_ptr<zmq::socket_t> socket;
};

}  // namespace

int RunSimulatedEngines(const std::string& profile, int count) {
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  auto info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile));
  if (!info.ok()) {
    std::fprintf(stderr, "simulated engines: %s\n", info.status().message().c_str());
    return 2;
  }
  const protocol::Signer signer(info->key);
  zmq::context_t context(1);
  context.set(zmq::ctxopt::max_sockets, count + 16);
  zmq::socket_t hub(context, zmq::socket_type::dealer);
  hub.set(zmq::sockopt::linger, 0);
  protocol::SecureClient(hub, *info);
  hub.connect(info->hub.registration);
  const std::string session = "sim-" + std::to_string(::getpid());
  // One session per connection: receivers check each session's order.
  auto header = [&](MsgType type, const std::string& from) {
    return protocol::Header{TaskId::Random(), type, from, protocol::NowMicros()};
  };

  // Register every engine; the replies say their ids.
  std::vector<Sim> sims(static_cast<size_t>(count));
  std::map<TaskId, size_t> pending;
  for (size_t i = 0; i < sims.size(); ++i) {
    sims[i].uuid = session + "-" + std::to_string(i);
    protocol::RegistrationRequest request{sims[i].uuid, sims[i].uuid, "simulated", ::getpid(), {}, {}, {}, {}};
    const protocol::Header h = header(MsgType::kRegistrationRequest, session);
    pending[h.id] = i;
    (void)protocol::SendEncoded(hub, {}, protocol::EncodeMessage(signer, h, std::nullopt,
                                                                 protocol::Empty{}, request));
  }
  int heartbeat_ms = 1000;
  protocol::Frames frames;
  const int64_t deadline = SteadyMs() + 60000;
  while (!pending.empty() && !g_stop && SteadyMs() < deadline) {
    zmq::pollitem_t item{hub.handle(), 0, ZMQ_POLLIN, 0};
    (void)protocol::Poll(&item, 1, std::chrono::milliseconds(100));
    while (protocol::TryReceive(hub, frames)) {
      auto reply = protocol::DecodeMessage<MsgType::kRegistrationReply>(signer, {},
                                                                        protocol::Views(frames));
      if (!reply.ok() || !reply->parent) continue;
      auto it = pending.find(reply->parent->id);
      if (it == pending.end()) continue;
      if (!reply->content.ok) {
        std::fprintf(stderr, "simulated engines: the hub refused: %s\n",
                     reply->content.error.c_str());
        return 2;
      }
      sims[it->second].id = reply->content.engine_id;
      heartbeat_ms = reply->content.heartbeat_ms > 0 ? reply->content.heartbeat_ms : 1000;
      pending.erase(it);
    }
  }
  if (!pending.empty()) return 2;

  std::vector<zmq::pollitem_t> items;
  for (Sim& sim : sims) {
    sim.socket = std::make_unique<zmq::socket_t>(context, zmq::socket_type::dealer);
    sim.socket->set(zmq::sockopt::linger, 0);
    protocol::SecureClient(*sim.socket, *info);
    sim.socket->connect(info->scheduler.engine);
    (void)protocol::SendEncoded(
        *sim.socket, {},
        protocol::EncodeMessage(signer, header(MsgType::kEngineReady, sim.uuid), std::nullopt,
                                protocol::Empty{}, protocol::EngineReady{sim.id, sim.uuid, std::nullopt, std::nullopt, std::nullopt}));
    items.push_back({sim.socket->handle(), 0, ZMQ_POLLIN, 0});
  }
  items.push_back({hub.handle(), 0, ZMQ_POLLIN, 0});

  int64_t next_heartbeat = 0;
  while (!g_stop) {
    if (SteadyMs() >= next_heartbeat) {
      for (const Sim& sim : sims) {
        (void)protocol::SendEncoded(
            hub, {},
            protocol::EncodeMessage(signer, header(MsgType::kHeartbeat, session), std::nullopt,
                                    protocol::Empty{}, protocol::EngineRef{sim.id, sim.uuid}));
      }
      next_heartbeat = SteadyMs() + heartbeat_ms;
    }
    (void)protocol::Poll(items.data(), items.size(), std::chrono::milliseconds(50));
    while (protocol::TryReceive(hub, frames)) {
    }  // heartbeat answers
    for (size_t i = 0; i < sims.size(); ++i) {
      if (!(items[i].revents & ZMQ_POLLIN)) continue;
      while (protocol::TryReceive(*sims[i].socket, frames)) {
        // A task_batch, verified like a real engine does, so that the
        // work is the same; its replies go back as one batch.
        auto views = protocol::Views(frames);
        if (!protocol::CheckFrames(signer, protocol::Limits{}, views).ok()) continue;
        protocol::TaskBatch batch;
        auto tasks = protocol::UnpackBatch(views, &batch);
        if (!tasks.ok() || !batch.dispatch) continue;
        std::vector<std::vector<std::string>> replies;
        for (size_t t = 0; t < tasks->size(); ++t) {
          auto request = protocol::DecodeHeader((*tasks)[t][protocol::kFrameHeader]);
          if (!request.ok()) continue;
          protocol::ReplyMeta meta{true, ErrorType::kNone, sims[i].id, (*batch.dispatch)[t].attempt};
          replies.push_back(protocol::EncodeInner(header(MsgType::kTaskReply, sims[i].uuid),
                                                  *request, meta, protocol::TaskResult{}));
        }
        if (replies.empty()) continue;
        (void)protocol::SendEncoded(
            *sims[i].socket, {},
            protocol::EncodeBatch(signer, header(MsgType::kTaskBatch, sims[i].uuid), replies));
      }
    }
  }
  for (const Sim& sim : sims) {
    (void)protocol::SendEncoded(
        hub, {},
        protocol::EncodeMessage(signer, header(MsgType::kUnregistration, session), std::nullopt,
                                protocol::Empty{}, protocol::EngineRef{sim.id, sim.uuid}));
  }
  return 0;
}

}  // namespace ztask::bench
