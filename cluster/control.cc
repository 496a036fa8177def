// The supervisor's control socket: `taskcluster scale` and `taskcluster
// engines start` ask a running cluster to change its pool.
#include "cluster/control.h"

#include <algorithm>
#include <fstream>

#include "cluster/util.h"
#include "protocol/connection_file.h"
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
                                               [](const auto& e) { return e.state == "draining"; }));
  }
  return static_cast<int>(std::count_if(list->begin(), list->end(),
                                        [](const auto& e) { return e.state == "running"; }));
}

// Sends one request to the supervisor of the cluster in `profile`.
Status Request(const fs::path& profile, const protocol::ClusterRequest& request) {
  std::ifstream in(ControlFile(profile));
  std::string endpoint;
  in >> endpoint;
  auto info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile));
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
                                "taskctl-" + TaskId::Random().ToHex(), protocol::NowMicros()};
  ZTASK_RETURN_IF_ERROR(protocol::SendEncoded(
      socket, {}, protocol::EncodeMessage(signer, header, std::nullopt, protocol::Empty{}, request)));
  zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
  protocol::Frames frames;
  if (!protocol::Poll(&item, 1, std::chrono::milliseconds(60000)).ok() ||
      !protocol::TryReceive(socket, frames)) {
    return Status::Unavailable("the cluster's supervisor in " + profile.string() +
                               " did not answer");
  }
  auto reply = protocol::DecodeMessage<protocol::MsgType::kClusterReply>(signer, {},
                                                                         protocol::Views(frames));
  if (!reply.ok()) return reply.status();
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
  auto endpoint = protocol::Bind(control_->socket, "tcp://127.0.0.1:*");
  if (!endpoint.ok()) return endpoint.status();
  ZTASK_RETURN_IF_ERROR(protocol::WritePrivateFile(ControlFile(profile_), *endpoint + "\n"));
  return Status::Ok();
}

void LocalCluster::ServeControl(std::chrono::microseconds wait) {
  zmq::pollitem_t item{control_->socket.handle(), 0, ZMQ_POLLIN, 0};
  if (!protocol::Poll(&item, 1, std::chrono::duration_cast<std::chrono::milliseconds>(wait)).ok()) {
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
                          ? control_->guard.Admit(request->header, protocol::NowMicros())
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
    (void)protocol::SendEncoded(
        control_->socket, prefix,
        protocol::EncodeMessage(control_->signer,
                                {TaskId::Random(), protocol::MsgType::kClusterReply, "cluster",
                                 protocol::NowMicros()},
                                request->header, protocol::Empty{}, reply));
  }
  control_->drops.Report(std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count());
}

std::string LocalCluster::ScaleTo(int target) {
  if (options_.launcher == "mpi" || options_.launcher == "slurm") {
    return "the " + options_.launcher +
           " launcher starts its engines as one job; it cannot scale (add engines with "
           "taskcluster engines start, or start again with another -n)";
  }
  if (target < 1) return "a cluster needs at least one engine";
  std::vector<Supervised*> active;
  for (Supervised& e : engines_) {
    if (!e.failed && !e.retiring) active.push_back(&e);
  }
  const int from = static_cast<int>(active.size());
  for (int i = from; i < target; ++i) {
    engines_.push_back(NewEngine(next_engine_index_++, options_.launcher, options_.hosts));
    Launch(engines_.back());
    Report(engines_.back(), "starting", "scaled up");
  }
  // The newest leave first; they drain before they go.
  for (int i = from - 1; i >= target; --i) {
    active[static_cast<size_t>(i)]->retiring = true;
    Report(*active[static_cast<size_t>(i)], "draining", "scaled down");
  }
  return {};
}

std::string LocalCluster::Add(const std::string& launcher, int engines,
                              const std::vector<std::string>& hosts) {
  if (engines < 1) return "add at least one engine";
  if (launcher == "local" || launcher == "ssh") {
    const auto& where = hosts.empty() ? options_.hosts : hosts;
    if (launcher == "ssh") {
      if (where.empty()) return "the ssh launcher needs --hosts";
      // Hosts may come over the control socket: checked here, as at start.
      if (auto specs = ParseHostSpecs(where); !specs.ok()) return specs.status().message();
      if (Status copied = CopyConnectionFile(where); !copied.ok()) return copied.message();
    }
    for (int i = 0; i < engines; ++i) {
      engines_.push_back(NewEngine(next_engine_index_++, launcher, where));
      Launch(engines_.back());
      Report(engines_.back(), "starting", "added with the " + launcher + " launcher");
    }
    return {};
  }
  if (launcher == "mpi") {
    if (FindOnPath(options_.mpiexec).empty()) return "no '" + options_.mpiexec + "' on PATH";
    options_.mpiexec = FindOnPath(options_.mpiexec);
    engines_.push_back(JobOfEngines("mpi", engines));
    Launch(engines_.back());
    return {};
  }
  if (launcher == "slurm") {
    Supervised job = JobOfEngines("slurm", engines);
    Status submitted = SubmitSlurmJob(engines, job.prefix);
    return submitted.ok() ? std::string() : submitted.message();
  }
  return "unknown launcher '" + launcher + "'; this build has: local, mpi, ssh, slurm";
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
  const int before = RunningEngines(**client);
  int total = engines;
  if (launcher == "ssh" && !hosts.empty()) {
    auto specs = ParseHostSpecs(hosts);
    if (!specs.ok()) return specs.status();
    total = 0;
    for (const auto& spec : *specs) total += spec.count;
  }
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
