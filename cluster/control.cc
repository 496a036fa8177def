// The supervisor's control socket: `taskcluster scale` and `taskcluster
// engines start` ask a running cluster to change its pool.
#include "cluster/control.h"

#include <algorithm>
#include <fstream>

#include "base/clock.h"
#include "base/reactor.h"
#include "cluster/util.h"
#include "protocol/connection_file.h"
#include "protocol/request.h"
#include "protocol/wire.h"
#include "ztask/client.h"

namespace ztask::cluster {
namespace fs = std::filesystem;

namespace {

int RunningEngines(Client& client, int* draining = nullptr) {
  auto list = client.Engines();
  if (!list.ok()) return -1;
  if (draining) {
    *draining = static_cast<int>(std::count_if(list->begin(), list->end(),
                                               [](const auto& e) { return e.state == EngineState::kDraining; }));
  }
  return static_cast<int>(std::count_if(list->begin(), list->end(),
                                        [](const auto& e) { return e.state == EngineState::kRunning; }));
}

// Sends one request to the supervisor of the cluster in `profile`.
Status Request(const fs::path& profile, const protocol::ClusterRequest& request) {
  // One line: a Unix socket's path may hold spaces.
  std::ifstream in(ControlFile(profile));
  std::string endpoint;
  std::getline(in, endpoint);
  auto info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile));
  // A connection file that is there but may not be used (readable by
  // others, a link, another user's) says why, as every other command does.
  if (!info.ok() && info.status().code() != Status::Code::kNotFound) return info.status();
  if (endpoint.empty() || !info.ok()) {
    return Status::NotFound("no cluster is running in " + profile.string());
  }
  const protocol::Signer signer(info->key);
  zmq::context_t context(1);
  zmq::socket_t socket(context, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  protocol::SecureClient(socket, *info);
  ZTASK_RETURN_IF_ERROR(protocol::Connect(socket, endpoint));
  const protocol::Header header{TaskId::Random(), protocol::MsgType::kClusterRequest,
                                "taskctl-" + TaskId::Random().ToHex(), base::WallMicros()};
  protocol::AskOptions options;
  options.timeout = std::chrono::seconds(60);
  auto reply = protocol::Ask<protocol::MsgType::kClusterReply>(socket, signer, header, request,
                                                               options);
  if (!reply.ok()) {
    if (reply.status().code() != Status::Code::kTimedOut) return reply.status();
    return Status::Unavailable("the cluster's supervisor in " + profile.string() +
                               " did not answer");
  }
  if (!reply->content.ok) return Status::InvalidArgument(reply->content.error);
  return Status::Ok();
}

}  // namespace

Status LocalCluster::OpenControl() {
  auto info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile_));
  if (!info.ok()) return info.status();
  control_ = std::make_unique<Control>(info->key);
  control_->socket.set(zmq::sockopt::linger, 0);
  control_->socket.set(zmq::sockopt::maxmsgsize,
                       static_cast<int64_t>(protocol::Limits{}.max_message_bytes));
  auto security =
      protocol::ServerSecurity::Create(control_->context, *info, profile_, "taskcluster control");
  if (!security.ok()) return security.status();
  control_->security = std::move(*security);
  ZTASK_RETURN_IF_ERROR(control_->security->Secure(control_->socket, "control"));
  ZTASK_RETURN_IF_ERROR(control_->security->Start());
  // Whoever scales the cluster reads this file in the profile: it is on
  // this host, and a Unix socket in the profile keeps every other account
  // of the host from even connecting.
  auto where = protocol::LocalSocketEndpoint(profile_, "cluster-control.ipc");
  if (!where.ok()) return where.status();
  auto endpoint = protocol::Bind(control_->socket, *where);
  if (!endpoint.ok()) return endpoint.status();
  ZTASK_RETURN_IF_ERROR(protocol::WritePrivateFile(ControlFile(profile_), *endpoint + "\n"));
  return Status::Ok();
}

void LocalCluster::ServeControl(std::chrono::microseconds wait) {
  if (!base::WaitReady(control_->socket, ZMQ_POLLIN,
                       std::chrono::duration_cast<std::chrono::milliseconds>(wait))) {
    return;
  }
  protocol::Frames frames;
  while (protocol::TryReceive(control_->socket, frames)) {
    const std::string_view peer = protocol::View(frames[0]);
    if (frames.size() < 2) {
      control_->drops.Drop(peer, Status::Malformed("no message after the routing id"));
      continue;
    }
    auto request = protocol::DecodeMessage<protocol::MsgType::kClusterRequest>(
        control_->signer, {}, protocol::Views(frames, 1));
    Status admitted = request.ok()
                          ? control_->guard.Admit(request->header, base::WallMicros())
                          : request.status();
    if (!admitted.ok()) {
      control_->drops.Drop(peer, admitted);
      continue;
    }
    const auto& r = request->content;
    std::string error;
    if (r.command == "scale") {
      error = ScaleTo(r.engines);
    } else if (r.command == "add") {
      error = Add(r.launcher, r.engines, r.hosts);
    } else {
      error = "unknown command '" + r.command + "'";
    }
    const protocol::Acknowledgement reply{error.empty(), error};
    const std::string_view prefix[] = {protocol::View(frames[0])};
    // taskcluster waits for this answer with a timeout and says so when it
    // does not come: nothing else is lost.
    (void)protocol::SendEncoded(
        control_->socket, prefix,
        protocol::EncodeMessage(control_->signer,
                                {TaskId::Random(), protocol::MsgType::kClusterReply, "cluster",
                                 base::WallMicros()},
                                request->header, protocol::Empty{}, reply));
  }
  control_->drops.Report(base::MonotonicMicros());
}

std::string LocalCluster::ScaleTo(int target) {
  if (!launcher_->scalable()) {
    return "the " + options_.launcher +
           " launcher starts its engines as one job; it cannot scale (add engines with "
           "taskcluster engines start, or start again with another -n)";
  }
  if (target < 1) return "a cluster needs at least one engine";
  std::vector<size_t> active;
  for (size_t i = 0; i < engines_.size(); ++i) {
    if (!engines_[i].failed && !engines_[i].retiring) active.push_back(i);
  }
  const int from = static_cast<int>(active.size());
  if (target > from) {
    if (std::string error = Started(*launcher_, target - from, {}, "scaled up"); !error.empty()) {
      return error;
    }
  }
  // The newest leave first; they drain before they go.
  for (int i = from - 1; i >= target; --i) {
    Supervised& engine = engines_[active[static_cast<size_t>(i)]];
    engine.retiring = true;
    Report(engine, EngineState::kDraining, "scaled down");
  }
  return {};
}

std::string LocalCluster::Started(Launcher& launcher, int engines,
                                  const std::vector<std::string>& hosts, const std::string& why) {
  const size_t before = engines_.size();
  if (Status planned = launcher.Plan(*this, engines, hosts); !planned.ok()) {
    return planned.message();
  }
  for (size_t i = before; i < engines_.size(); ++i) {
    Launch(engines_[i]);
    // A job of engines is not an engine: the engines report themselves.
    if (launcher.scalable()) Report(engines_[i], EngineState::kStarting, why);
  }
  return {};
}

std::string LocalCluster::Add(const std::string& name, int engines,
                              const std::vector<std::string>& hosts) {
  if (engines < 1) return "add at least one engine";
  std::unique_ptr<Launcher> other;
  Launcher* launcher = launcher_.get();
  if (name != launcher_->name()) {
    other = MakeLauncher(name);
    if (!other) return "unknown launcher '" + name + "'; this build has: " + LauncherNames();
    launcher = other.get();
  }
  return Started(*launcher, engines, hosts, "added with the " + name + " launcher");
}

Status LocalCluster::Scale(const fs::path& profile_dir, int engines, double timeout_s) {
  const fs::path profile = profile_dir.empty() ? protocol::DefaultProfileDir() : profile_dir;
  ZTASK_RETURN_IF_ERROR(Request(profile, {"scale", engines, "", {}}));
  auto client = Client::Connect(profile);
  if (!client.ok()) return client.status();
  // Until exactly `engines` run, and none is still draining.
  const bool done = WaitFor([&] {
    int draining = 0;
    return RunningEngines(**client, &draining) == engines && draining == 0;
  }, std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  if (!done) {
    return Status::TimedOut("the cluster did not reach " + std::to_string(engines) +
                            " engines within " + std::to_string(timeout_s) + " s");
  }
  return Status::Ok();
}

Status LocalCluster::AddEngines(const fs::path& profile_dir, const std::string& launcher,
                                int engines, const std::vector<std::string>& hosts,
                                double timeout_s) {
  const fs::path profile = profile_dir.empty() ? protocol::DefaultProfileDir() : profile_dir;
  auto client = Client::Connect(profile);
  if (!client.ok()) return client.status();
  const std::unique_ptr<Launcher> made = MakeLauncher(launcher);
  if (!made) {
    return Status::InvalidArgument("unknown launcher '" + launcher + "'; this build has: " +
                                   LauncherNames());
  }
  auto counted = made->EngineCount(engines, hosts);
  if (!counted.ok()) return counted.status();
  const int total = *counted;
  const int before = RunningEngines(**client);
  ZTASK_RETURN_IF_ERROR(Request(profile, {"add", total, launcher, hosts}));
  const bool done = WaitFor([&] { return RunningEngines(**client) >= before + total; },
                            std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  if (!done) {
    return Status::TimedOut("the " + std::to_string(total) + " engines added did not all register within " +
                            std::to_string(timeout_s) + " s; see the logs in " +
                            (profile / "logs").string());
  }
  return Status::Ok();
}

}  // namespace ztask::cluster
