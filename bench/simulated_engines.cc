#include "bench/simulated_engines.h"

#include <signal.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <deque>
#include <memory>
#include <optional>
#include <vector>
#include <zmq.hpp>

#include "base/clock.h"
#include "protocol/codec.h"
#include "protocol/connection_file.h"
#include "protocol/security.h"
#include "protocol/wire.h"

namespace ztask::bench {
namespace {

using protocol::MsgType;

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

int64_t SteadyMs() { return base::MonotonicMillis(); }

constexpr int64_t kRegisterWithinMs = 120'000;

// One engine: a connection to the hub and, once registered, one to the
// scheduler, as taskengine has.
struct Sim {
  std::string uuid;
  int32_t id = -1;
  TaskId registration;
  std::unique_ptr<zmq::socket_t> hub, tasks;
};

class Simulator {
 public:
  Simulator(const protocol::ConnectionInfo& info, int count)
      : info_(info), signer_(info.key), context_(1), sims_(static_cast<size_t>(count)) {
    context_.set(zmq::ctxopt::max_sockets, 2 * count + 16);
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    session_ = "sim-" + std::to_string(::getpid());
  }
  ~Simulator() {
    if (epoll_ >= 0) ::close(epoll_);
  }

  int Run() {
    for (size_t i = 0; i < sims_.size(); ++i) Register(i);
    const int64_t deadline = SteadyMs() + kRegisterWithinMs;
    while (!g_stop) {
      if (registered_ < sims_.size() && SteadyMs() >= deadline) {
        std::fprintf(stderr,
                     "simulated engines: %zu of %zu registered within %lld s; %zu sends failed\n",
                     registered_, sims_.size(), static_cast<long long>(kRegisterWithinMs / 1000),
                     failed_sends_);
        return 2;
      }
      const int64_t wait =
          beats_.empty() ? 50 : std::max<int64_t>(0, beats_.front().due - SteadyMs());
      Turn(static_cast<int>(std::min<int64_t>(wait, 50)));
      Heartbeats();
    }
    for (Sim& sim : sims_) {
      Send(*sim.hub, protocol::EncodeMessage(signer_, Header(MsgType::kUnregistration, sim.uuid),
                                             std::nullopt, protocol::Empty{},
                                             protocol::EngineRef{sim.id, sim.uuid}));
    }
    if (failed_sends_ > 0) std::fprintf(stderr, "simulated engines: %zu sends failed\n", failed_sends_);
    return 0;
  }

 private:
  struct Beat {
    int64_t due;
    size_t sim;
  };

  protocol::Header Header(MsgType type, const std::string& from) {
    return protocol::Header{TaskId::Random(), type, from, base::WallMicros()};
  }

  std::unique_ptr<zmq::socket_t> Connect(const std::string& endpoint, size_t index, int which) {
    auto socket = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::dealer);
    socket->set(zmq::sockopt::linger, 200);
    protocol::SecureClient(*socket, info_);
    socket->connect(endpoint);
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = index * 2 + static_cast<uint64_t>(which);
    const int fd = socket->get(zmq::sockopt::fd);
    if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event) != 0) {
      std::perror("simulated engines: epoll_ctl");
    }
    return socket;
  }

  void Send(zmq::socket_t& socket, const std::vector<std::string>& frames) {
    if (!protocol::SendEncoded(socket, {}, frames).ok()) ++failed_sends_;
  }

  void Register(size_t i) {
    Sim& sim = sims_[i];
    sim.uuid = session_ + "-" + std::to_string(i);
    sim.hub = Connect(info_.hub.registration, i, 0);
    protocol::RegistrationRequest request{sim.uuid, sim.uuid, "simulated", ::getpid(),
                                          {},       {},       {},          {}};
    const protocol::Header h = Header(MsgType::kRegistrationRequest, sim.uuid);
    sim.registration = h.id;
    Send(*sim.hub, protocol::EncodeMessage(signer_, h, std::nullopt, protocol::Empty{}, request));
    Drain(i, 0);
  }

  // Waits up to `timeout_ms` for sockets to become readable and serves
  // each that did, and only those.
  void Turn(int timeout_ms) {
    epoll_event events[256];
    const int n = ::epoll_wait(epoll_, events, 256, timeout_ms);
    for (int k = 0; k < n; ++k) {
      Drain(static_cast<size_t>(events[k].data.u64 / 2), static_cast<int>(events[k].data.u64 % 2));
    }
  }

  // ZeroMQ's descriptor signals edges: read until the socket says it holds
  // nothing more, also after our own sends on it.
  void Drain(size_t i, int which) {
    Sim& sim = sims_[i];
    zmq::socket_t* socket = which == 0 ? sim.hub.get() : sim.tasks.get();
    if (socket == nullptr) return;
    while (socket->get(zmq::sockopt::events) & ZMQ_POLLIN) {
      if (!protocol::TryReceive(*socket, frames_)) break;
      if (which == 0) {
        OnHubMessage(i);
      } else {
        OnTasks(i);
      }
      socket = which == 0 ? sim.hub.get() : sim.tasks.get();
    }
  }

  void OnHubMessage(size_t i) {
    Sim& sim = sims_[i];
    if (sim.id >= 0) {
      // A heartbeat's answer, read as a real engine reads it: the hub may
      // have stretched the period, which only grows (so beats_ stays in
      // order).
      auto answer =
          protocol::DecodeMessage<MsgType::kHeartbeat>(signer_, {}, protocol::Views(frames_));
      if (answer.ok() && answer->content.heartbeat_ms.value_or(0) > heartbeat_ms_) {
        heartbeat_ms_ = *answer->content.heartbeat_ms;
      }
      return;
    }
    auto reply = protocol::DecodeMessage<MsgType::kRegistrationReply>(
        signer_, {}, protocol::Views(frames_));
    if (!reply.ok() || !reply->parent || reply->parent->id != sim.registration) return;
    if (!reply->content.ok) {
      std::fprintf(stderr, "simulated engines: the hub refused: %s\n", reply->content.error.c_str());
      g_stop = 1;
      return;
    }
    sim.id = reply->content.engine_id;
    heartbeat_ms_ = std::max(heartbeat_ms_, int64_t{reply->content.heartbeat_ms});
    ++registered_;
    // Its heartbeats start now, as a real engine's do once it registered:
    // engines registered together beat together, as real ones would.
    beats_.push_back({SteadyMs() + heartbeat_ms_, i});
    sim.tasks = Connect(info_.scheduler.engine, i, 1);
    Send(*sim.tasks, protocol::EncodeMessage(
                         signer_, Header(MsgType::kEngineReady, sim.uuid), std::nullopt,
                         protocol::Empty{},
                         protocol::EngineReady{sim.id, sim.uuid, std::nullopt, std::nullopt,
                                               std::nullopt}));
    Drain(i, 1);
  }

  // A task_batch, verified as a real engine verifies it, so that the work
  // is the same; its replies go back as one batch.
  void OnTasks(size_t i) {
    Sim& sim = sims_[i];
    auto views = protocol::Views(frames_);
    if (!protocol::CheckFrames(signer_, protocol::Limits{}, views).ok()) return;
    protocol::TaskBatch batch;
    auto tasks = protocol::UnpackBatch(views, &batch);
    if (!tasks.ok() || !batch.dispatch) return;
    std::vector<std::vector<std::string>> replies;
    for (size_t t = 0; t < tasks->size(); ++t) {
      auto request = protocol::DecodeHeader((*tasks)[t][protocol::kFrameHeader]);
      if (!request.ok()) continue;
      protocol::ReplyMeta meta{true, ErrorType::kNone, sim.id, (*batch.dispatch)[t].attempt};
      meta.run_us = 0;  // runs nothing
      replies.push_back(protocol::EncodeInner(Header(MsgType::kTaskReply, sim.uuid), *request,
                                              meta, protocol::TaskResult{}));
    }
    if (replies.empty()) return;
    Send(*sim.tasks, protocol::EncodeBatch(signer_, Header(MsgType::kTaskBatch, sim.uuid), replies));
  }

  void Heartbeats() {
    const int64_t now = SteadyMs();
    while (!beats_.empty() && beats_.front().due <= now) {
      Beat beat = beats_.front();
      beats_.pop_front();
      Sim& sim = sims_[beat.sim];
      Send(*sim.hub,
           protocol::EncodeMessage(signer_, Header(MsgType::kHeartbeat, sim.uuid), std::nullopt,
                                   protocol::Empty{},
                                   protocol::HeartbeatBody{sim.id, sim.uuid, std::nullopt}));
      Drain(beat.sim, 0);
      beat.due += heartbeat_ms_;
      beats_.push_back(beat);
    }
  }

  const protocol::ConnectionInfo& info_;
  const protocol::Signer signer_;
  zmq::context_t context_;
  std::vector<Sim> sims_;
  std::deque<Beat> beats_;  // in the order they fall due
  int epoll_ = -1;
  std::string session_;
  protocol::Frames frames_;
  int64_t heartbeat_ms_ = 1000;
  size_t registered_ = 0;
  size_t failed_sends_ = 0;
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
  Simulator simulator(*info, count);
  return simulator.Run();
}

}  // namespace ztask::bench
