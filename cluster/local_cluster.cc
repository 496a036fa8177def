#include "cluster/local_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include <zmq.hpp>

#include "cluster/report.h"
#include "protocol/codec.h"
#include "protocol/wire.h"
#include "protocol/connection_file.h"
#include "ztask/client.h"

namespace ztask::cluster {
namespace fs = std::filesystem;

namespace {

fs::path SelfDir() {
  char path[4096];
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? fs::path(std::string(path, static_cast<size_t>(n))).parent_path() : fs::path(".");
}

fs::path PidFile(const fs::path& profile) { return profile / "cluster.pid"; }

// "ssh -p 22 -i key" -> {"ssh", "-p", "22", "-i", "key"}
std::vector<std::string> SplitWords(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  for (char c : text + " ") {
    if (c == ' ') {
      if (!word.empty()) words.push_back(std::move(word));
      word.clear();
    } else {
      word += c;
    }
  }
  return words;
}

// `program` found on PATH (unchanged when it has a slash or is not found).
std::string Which(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    fs::path candidate = fs::path(dirs.substr(start, end - start)) / program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    start = end + 1;
  }
  return program;
}

double SteadySeconds() {
  using namespace std::chrono;
  return duration_cast<duration<double>>(steady_clock::now().time_since_epoch()).count();
}

int ReadPid(const fs::path& profile) {
  std::ifstream in(PidFile(profile));
  int pid = 0;
  in >> pid;
  return pid;
}

}  // namespace

Result<std::unique_ptr<LocalCluster>> LocalCluster::Claim(const ClusterOptions& given) {
  ClusterOptions options = given;
  fs::path profile = options.profile_dir.empty() ? protocol::DefaultProfileDir() : options.profile_dir;
  std::error_code ec;
  fs::create_directories(profile / "logs", ec);
  if (ec) return Status::IoError("cannot create " + profile.string() + ": " + ec.message());
  fs::permissions(profile, fs::perms::owner_all, ec);
  if (options.engines <= 0) options.engines = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (options.bin_dir.empty()) options.bin_dir = SelfDir();
  if (options.engine_program.empty()) options.engine_program = options.bin_dir / "taskengine";
  if (options.launcher != "local" && options.launcher != "mpi" && options.launcher != "ssh") {
    return Status::InvalidArgument("unknown launcher '" + options.launcher +
                                   "'; this build has: local, mpi, ssh");
  }
  if (options.launcher == "ssh") {
    if (options.hosts.empty()) {
      return Status::InvalidArgument("the ssh launcher needs --hosts HOST[:COUNT],...");
    }
    int total = 0;
    for (const auto& h : options.hosts) {
      const auto colon = h.rfind(':');
      const int count = colon == std::string::npos ? 1 : std::atoi(h.c_str() + colon + 1);
      if (count < 1 || h.empty() || colon == 0) {
        return Status::InvalidArgument("bad host '" + h + "': give HOST or HOST:COUNT");
      }
      total += count;
    }
    options.engines = total;
    if (options.remote_profile_dir.empty()) options.remote_profile_dir = profile;
    if (options.remote_engine_program.empty()) options.remote_engine_program = options.engine_program;
  }
  if (options.launcher == "mpi") {
    // ChildProcess runs argv[0] as a path: find mpiexec on PATH now.
    const std::string found = Which(options.mpiexec);
    if (::access(found.c_str(), X_OK) != 0) {
      return Status::NotFound("no '" + options.mpiexec +
                              "' on PATH: install Open MPI (Debian: openmpi-bin) or give --mpiexec");
    }
    options.mpiexec = found;
  }
  const int fd = ::open(PidFile(profile).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IoError("cannot open " + PidFile(profile).string());
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return Status::InvalidArgument("a cluster is already running in " + profile.string() +
                                   " (pid " + std::to_string(ReadPid(profile)) +
                                   "); stop it with: taskcluster stop --profile-dir " +
                                   profile.string());
  }
  return std::unique_ptr<LocalCluster>(new LocalCluster(options, profile, fd));
}

struct LocalCluster::Control {
  explicit Control(const std::string& key) : signer(key) {}
  protocol::Signer signer;
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::router};
};

namespace {
fs::path ControlFile(const fs::path& profile) { return profile / "cluster.control"; }
}  // namespace

LocalCluster::LocalCluster(ClusterOptions options, fs::path profile, int lock_fd)
    : options_(std::move(options)), profile_(std::move(profile)), lock_fd_(lock_fd) {}

Status LocalCluster::OpenControl() {
  auto info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile_));
  if (!info.ok()) return info.status();
  control_ = std::make_unique<Control>(info->key);
  control_->socket.set(zmq::sockopt::linger, 0);
  auto endpoint = protocol::Bind(control_->socket, "tcp://127.0.0.1:*");
  if (!endpoint.ok()) return endpoint.status();
  std::ofstream(ControlFile(profile_), std::ios::trunc) << *endpoint << "\n";
  return Status::Ok();
}

void LocalCluster::ServeControl(std::chrono::microseconds wait) {
  zmq::pollitem_t item{control_->socket.handle(), 0, ZMQ_POLLIN, 0};
  if (!protocol::Poll(&item, 1, std::chrono::duration_cast<std::chrono::milliseconds>(wait)).ok()) {
    return;
  }
  protocol::Frames frames;
  while (protocol::TryReceive(control_->socket, frames)) {
    if (frames.size() < 2) continue;
    auto request = protocol::DecodeMessage<protocol::MsgType::kClusterRequest>(
        control_->signer, {}, protocol::Views(frames, 1));
    if (!request.ok()) continue;  // unsigned or malformed: not from us
    protocol::Acknowledgement reply;
    if (request->content.command == "scale") {
      reply.error = ScaleTo(request->content.engines);
      reply.ok = reply.error.rfind("scaling", 0) == 0;
    } else {
      reply = {false, "unknown command '" + request->content.command + "'"};
    }
    const std::string_view prefix[] = {protocol::View(frames[0])};
    (void)protocol::SendEncoded(
        control_->socket, prefix,
        protocol::EncodeMessage(control_->signer,
                                {TaskId::Random(), protocol::MsgType::kClusterReply, "cluster",
                                 protocol::NowMicros()},
                                request->header, protocol::Empty{}, reply));
  }
}

LocalCluster::Supervised LocalCluster::NewEngine(int index) {
  Supervised engine;
  const std::string program = options_.engine_program.string();
  if (options_.launcher == "ssh") {
    const std::string& h = options_.hosts[static_cast<size_t>(index) % options_.hosts.size()];
    const auto colon = h.rfind(':');
    const std::string host = h.substr(0, colon == std::string::npos ? h.size() : colon);
    engine.name = host + "-ssh-" + std::to_string(index);
    engine.argv = SplitWords(options_.ssh);
    engine.argv[0] = Which(engine.argv[0]);
    // -tt: when the connection ends, the remote engine gets a hang-up.
    engine.argv.insert(engine.argv.end(),
                       {"-tt", host, "exec", options_.remote_engine_program.string(),
                        "--profile-dir", options_.remote_profile_dir.string(), "--name",
                        engine.name});
  } else {
    engine.name = "engine-" + std::to_string(index);
    engine.argv = {program, "--profile-dir", profile_.string(), "--name", engine.name};
  }
  return engine;
}

std::string LocalCluster::ScaleTo(int target) {
  if (options_.launcher == "mpi") {
    return "the mpi launcher runs one mpiexec; it cannot scale (stop and start with another -n)";
  }
  if (target < 1) return "a cluster needs at least one engine";
  std::vector<Supervised*> active;
  for (Supervised& e : engines_) {
    if (!e.failed && !e.retiring) active.push_back(&e);
  }
  const int from = static_cast<int>(active.size());
  for (int i = from; i < target; ++i) {
    engines_.push_back(NewEngine(next_engine_index_++));
    Launch(engines_.back());
    Report(engines_.back(), "starting", "scaled up");
  }
  // The newest leave first; they drain before they go.
  for (int i = from - 1; i >= target; --i) {
    active[static_cast<size_t>(i)]->retiring = true;
    Report(*active[static_cast<size_t>(i)], "draining", "scaled down");
  }
  return "scaling from " + std::to_string(from) + " to " + std::to_string(target) + " engines";
}

LocalCluster::~LocalCluster() {
  StopAll();
  ::ftruncate(lock_fd_, 0);
  ::close(lock_fd_);  // releases the lock
}

Status LocalCluster::WaitForEndpoint(ChildProcess& process, const char* what, bool scheduler) {
  const auto path = protocol::ConnectionFilePath(profile_);
  bool ready = WaitFor(
      [&] {
        if (process.Poll()) return true;
        auto info = protocol::ReadConnectionFile(path);
        return info.ok() && !(scheduler ? info->scheduler.client : info->hub.query).empty();
      },
      std::chrono::seconds(20));
  if (auto code = process.Poll()) {
    return Status::Unavailable(std::string("the ") + what + " exited with code " +
                               std::to_string(*code) + " while starting; see " +
                               (logs() / (std::string(what) + ".log")).string());
  }
  if (!ready) return Status::TimedOut(std::string("the ") + what + " did not start within 20 s");
  return Status::Ok();
}

Status LocalCluster::Start() {
  // A fresh connection file: a new key, no endpoints until each binds.
  protocol::ConnectionInfo info;
  info.key = protocol::GenerateKey();
  ZTASK_RETURN_IF_ERROR(protocol::WriteConnectionFile(protocol::ConnectionFilePath(profile_), info));
  std::ofstream(PidFile(profile_), std::ios::trunc) << ::getpid() << "\n";

  const std::string bin = options_.bin_dir.string() + "/";
  const std::string dir = profile_.string();
  std::vector<std::string> hub = {bin + "taskhub", "--profile-dir", dir, "--ip", options_.ip};
  if (!options_.db.empty()) hub.insert(hub.end(), {"--db", options_.db});
  hub_ = std::make_unique<ChildProcess>(hub, logs() / "hub.log");
  Status s = WaitForEndpoint(*hub_, "hub", false);
  if (s.ok()) {
    scheduler_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{bin + "taskscheduler", "--profile-dir", dir, "--scheme",
                                 options_.scheme, "--hwm", std::to_string(options_.hwm), "--ip",
                                 options_.ip},
        logs() / "scheduler.log");
    s = WaitForEndpoint(*scheduler_, "scheduler", true);
  }
  if (s.ok() && !options_.location.empty()) s = WriteLocation();
  if (s.ok()) s = PlanEngines();
  if (s.ok()) {
    for (Supervised& e : engines_) Launch(e);
    auto client = Client::Connect(profile_);
    s = client.ok() ? (*client)->WaitForEngines(options_.engines, options_.launch_timeout_s)
                    : client.status();
    if (client.ok()) client_ = std::move(*client);
    if (!s.ok() && s.code() == Status::Code::kTimedOut) {
      s = Status::TimedOut(s.message() + "; see the engine logs in " + logs().string());
    }
  }
  if (!s.ok()) StopAll();
  return s;
}


Status LocalCluster::WriteLocation() {
  // Sockets bound to --ip; others dial --location, with the same ports.
  return protocol::UpdateConnectionFile(
      protocol::ConnectionFilePath(profile_), {}, [&](protocol::ConnectionInfo& c) {
        for (std::string* e : {&c.hub.registration, &c.hub.query, &c.hub.notifier,
                               &c.hub.monitor, &c.hub.events, &c.scheduler.client,
                               &c.scheduler.engine}) {
          const auto colon = e->rfind(':');
          if (e->rfind("tcp://", 0) == 0 && colon != std::string::npos) {
            *e = "tcp://" + options_.location + e->substr(colon);
          }
        }
      });
}

Status LocalCluster::CopyConnectionFile() {
  const std::string remote = (options_.remote_profile_dir / protocol::kConnectionFileName).string();
  for (const auto& h : options_.hosts) {
    const std::string host = h.substr(0, h.rfind(':') == std::string::npos ? h.size() : h.rfind(':'));
    std::vector<std::string> argv = SplitWords(options_.ssh);
    argv.insert(argv.end(), {host, "umask 077 && mkdir -p '" + options_.remote_profile_dir.string() +
                                       "' && cat > '" + remote + ".tmp' && mv '" + remote +
                                       ".tmp' '" + remote + "'"});
    argv[0] = Which(argv[0]);
    const std::string sh = "exec \"$0\" \"$@\" < '" +
                           protocol::ConnectionFilePath(profile_).string() + "'";
    argv.insert(argv.begin(), {"/bin/sh", "-c", sh});
    ChildProcess copy(argv, logs() / "ssh-copy.log");
    const auto code = copy.Wait(std::chrono::seconds(60));
    if (code != 0) {
      return Status::Unavailable("could not copy the connection file to " + host + " with '" +
                                 options_.ssh + "'; see " + (logs() / "ssh-copy.log").string());
    }
  }
  return Status::Ok();
}

Status LocalCluster::PlanEngines() {
  if (options_.launcher == "mpi") {
    Supervised all;
    all.name = "mpiexec";
    all.argv = {options_.mpiexec, "-n", std::to_string(options_.engines), "--oversubscribe"};
    if (::geteuid() == 0) all.argv.push_back("--allow-run-as-root");
    all.argv.insert(all.argv.end(), options_.mpi_args.begin(), options_.mpi_args.end());
    // Engines name themselves after their host and MPI rank.
    all.argv.insert(all.argv.end(),
                    {options_.engine_program.string(), "--profile-dir", profile_.string()});
    engines_.push_back(std::move(all));
    return Status::Ok();
  }
  if (options_.launcher == "ssh") ZTASK_RETURN_IF_ERROR(CopyConnectionFile());
  for (int i = 0; i < options_.engines; ++i) engines_.push_back(NewEngine(next_engine_index_++));
  return Status::Ok();
}

void LocalCluster::Launch(Supervised& engine) {
  engine.process = std::make_unique<ChildProcess>(engine.argv, logs() / (engine.name + ".log"));
}

void LocalCluster::Report(const Supervised& engine, const std::string& state,
                          const std::string& why) {
  std::fprintf(stderr, "taskcluster: %s %s: %s\n", engine.name.c_str(), state.c_str(), why.c_str());
  if (client_) (void)client_->ReportEngineState(engine.name, state, engine.restarts, why);
}

void LocalCluster::Supervise(double now) {
  for (Supervised& e : engines_) {
    if (e.process) {
      const auto code = e.process->Poll();
      if (!code) continue;
      e.process.reset();
      if (e.retiring) {
        e.failed = true;  // never restarted
        Report(e, "stopped", "drained and retired");
        continue;
      }
      const std::string exited = "exited with code " + std::to_string(*code);
      std::erase_if(e.recent_restarts,
                    [&](double t) { return now - t > options_.restart_window_s; });
      if (static_cast<int>(e.recent_restarts.size()) >= options_.max_restarts) {
        e.failed = true;
        Report(e, "failed", exited + "; gave up after " + std::to_string(options_.max_restarts) +
                                " restarts within " + std::to_string(options_.restart_window_s) +
                                " s");
        continue;
      }
      const double backoff = std::min(
          30.0, options_.restart_backoff_s * static_cast<double>(1 << e.recent_restarts.size()));
      e.restart_at = now + backoff;
      char why[160];
      std::snprintf(why, sizeof why, "%s; restarting in %g s", exited.c_str(), backoff);
      Report(e, "restarting", why);
    } else if (!e.failed && now >= e.restart_at) {
      e.recent_restarts.push_back(now);
      ++e.restarts;
      Launch(e);
      Report(e, "starting", "restart " + std::to_string(e.restarts));
    }
  }
}

void LocalCluster::Serve() {
  const auto interval = std::chrono::microseconds(
      static_cast<int64_t>(std::max(0.001, options_.monitor_interval_s) * 1e6));
  if (Status opened = OpenControl(); !opened.ok()) {
    std::fprintf(stderr, "taskcluster: no control socket (scale will not work): %s\n",
                 opened.message().c_str());
  }
  while (!stop_ && !hub_->Poll()) {
    Supervise(SteadySeconds());
    if (control_) {
      ServeControl(interval);
    } else {
      std::this_thread::sleep_for(interval);
    }
  }
  if (client_ && !hub_->Poll()) {
    auto report = RunReport(*client_);
    if (report.ok()) std::fprintf(stderr, "%s", report->c_str());
  }
  StopAll();
}

void LocalCluster::RequestStop() { stop_ = 1; }

std::vector<pid_t> LocalCluster::LocalEnginePids() {
  std::vector<pid_t> pids;
  if (!client_ || !hub_ || hub_->Poll()) return pids;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  auto engines = client_->Engines();
  if (!engines.ok()) return pids;
  for (const auto& e : *engines) {
    if (e.state == "running" && e.host == host) pids.push_back(static_cast<pid_t>(e.pid));
  }
  return pids;
}

void LocalCluster::StopAll() {
  // Engines first (they unregister), the hub last (it flushes its records).
  // A launcher such as mpiexec may end before, or without, the engines it
  // started, so each engine on this host is also signalled by its own pid.
  const std::vector<pid_t> engine_pids = LocalEnginePids();
  for (pid_t pid : engine_pids) ::kill(pid, SIGTERM);
  WaitFor([&] { return std::none_of(engine_pids.begin(), engine_pids.end(), ProcessRunning); },
          std::chrono::seconds(10));
  for (auto& e : engines_) {
    if (e.process) e.process->Stop();
  }
  engines_.clear();
  for (pid_t pid : engine_pids) {
    if (ProcessRunning(pid)) ::kill(pid, SIGKILL);
  }
  client_.reset();
  if (scheduler_) scheduler_->Stop();
  if (hub_) hub_->Stop();
  scheduler_.reset();
  hub_.reset();
}

Status LocalCluster::Scale(const fs::path& profile_dir, int engines, double timeout_s) {
  const fs::path profile = profile_dir.empty() ? protocol::DefaultProfileDir() : profile_dir;
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
  ZTASK_RETURN_IF_ERROR(protocol::Connect(socket, endpoint));
  const protocol::Header header{TaskId::Random(), protocol::MsgType::kClusterRequest, "taskcluster",
                                protocol::NowMicros()};
  ZTASK_RETURN_IF_ERROR(protocol::SendEncoded(
      socket, {},
      protocol::EncodeMessage(signer, header, std::nullopt, protocol::Empty{},
                              protocol::ClusterRequest{"scale", engines})));
  zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
  protocol::Frames frames;
  if (!protocol::Poll(&item, 1, std::chrono::milliseconds(10000)).ok() ||
      !protocol::TryReceive(socket, frames)) {
    return Status::Unavailable("the cluster's supervisor in " + profile.string() +
                               " did not answer");
  }
  auto reply = protocol::DecodeMessage<protocol::MsgType::kClusterReply>(signer, {},
                                                                         protocol::Views(frames));
  if (!reply.ok()) return reply.status();
  if (!reply->content.ok) return Status::InvalidArgument(reply->content.error);
  auto client = Client::Connect(profile);
  if (!client.ok()) return client.status();
  // Running engines, and those draining, until exactly `engines` run.
  const bool done = WaitFor([&] {
    auto list = (*client)->Engines();
    if (!list.ok()) return false;
    const auto running = std::count_if(list->begin(), list->end(),
                                       [](const auto& e) { return e.state == "running"; });
    const auto draining = std::count_if(list->begin(), list->end(),
                                        [](const auto& e) { return e.state == "draining"; });
    return running == engines && draining == 0;
  }, std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  if (!done) {
    return Status::TimedOut("the cluster did not reach " + std::to_string(engines) +
                            " engines within " + std::to_string(timeout_s) + " s");
  }
  return Status::Ok();
}

Status LocalCluster::StopRunning(const fs::path& profile_dir, double timeout_s) {
  const fs::path profile = profile_dir.empty() ? protocol::DefaultProfileDir() : profile_dir;
  const int fd = ::open(PidFile(profile).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) == 0) {
    if (fd >= 0) ::close(fd);
    return Status::NotFound("no cluster is running in " + profile.string());
  }
  const int pid = ReadPid(profile);
  if (pid <= 0 || ::kill(pid, SIGTERM) != 0) {
    ::close(fd);
    return Status::NotFound("no cluster is running in " + profile.string());
  }
  // The supervisor holds the lock until everything it started is gone.
  const bool gone = WaitFor([&] { return ::flock(fd, LOCK_EX | LOCK_NB) == 0; },
                            std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  ::close(fd);
  if (!gone) {
    return Status::TimedOut("the cluster in " + profile.string() + " (pid " + std::to_string(pid) +
                            ") did not stop within " + std::to_string(timeout_s) + " s");
  }
  return Status::Ok();
}

}  // namespace ztask::cluster
