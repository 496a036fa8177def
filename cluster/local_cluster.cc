#include "cluster/local_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <syslog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>
#include <tuple>

#include "base/clock.h"
#include "base/open_files.h"
#include "cluster/control.h"
#include "cluster/launcher.h"
#include "cluster/report.h"
#include "cluster/util.h"
#include "protocol/connection_file.h"
#include "protocol/security.h"
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

// How long a log is now: where what a process started next writes begins
// (logs are appended to, run after run).
uintmax_t LogSize(const fs::path& log) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(log, ec);
  return ec ? 0 : size;
}

// The last line that is not empty of what was written to a log from
// `since` on.
std::string LastLineSince(const fs::path& log, uintmax_t since) {
  std::ifstream in(log);
  in.seekg(static_cast<std::streamoff>(since));
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

// Why `what` exited while starting: its code, the last thing it said (a
// flag it refused, a port taken, a database it cannot open), and where its
// log is.
Status ExitedWhileStarting(const std::string& what, int code, const fs::path& log,
                           uintmax_t since) {
  const std::string said = LastLineSince(log, since);
  return Status::Unavailable("the " + what + " exited with code " + std::to_string(code) +
                             " while starting" + (said.empty() ? "" : ": " + said) + "; see " +
                             log.string());
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
  if (options.layout == "auto") {
    // Each engine holds a connection to the hub and one to the scheduler:
    // one process holds both where the open-file limit (the hard one, which
    // the servers inherit and raise their own to) leaves room for them.
    const auto engines = static_cast<uint64_t>(options.engines);
    const uint64_t files = base::RaiseOpenFileLimit();
    const bool one = base::OneServerProcessHolds(engines, files);
    options.layout = one ? "controller" : "separate";
    if (!one) {
      options.layout_note =
          "the hub and the scheduler run in processes of their own: " + std::to_string(engines) +
          " engines need more open files than one process may have (" + std::to_string(files) +
          ", ulimit -Hn)";
    }
  }
  if (options.bin_dir.empty()) options.bin_dir = SelfDir();
  if (options.engine_program.empty()) options.engine_program = options.bin_dir / "taskengine";
  const std::unique_ptr<Launcher> launcher = MakeLauncher(options.launcher);
  if (!launcher) {
    return Status::InvalidArgument("unknown launcher '" + options.launcher +
                                   "'; this build has: " + LauncherNames());
  }
  ZTASK_RETURN_IF_ERROR(launcher->Prepare(options));
  for (const auto& arg : options.slurm_args) {
    if (arg.find_first_of("\r\n") != std::string::npos) {
      return Status::InvalidArgument("--slurm-args may not hold a line break");
    }
  }
  if (!options.dashboard.empty()) {
    // [ADDR:]PORT
    const size_t colon = options.dashboard.rfind(':');
    const std::string port =
        colon == std::string::npos ? options.dashboard : options.dashboard.substr(colon + 1);
    const bool digits = !port.empty() && port.size() <= 5 &&
                        std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || std::stoi(port) > 65535 || colon == 0) {
      return Status::InvalidArgument("--dashboard takes [ADDR:]PORT (e.g. 8787 or 0.0.0.0:8787), not '" +
                                     options.dashboard + "'");
    }
  }
  if (options.remote_profile_dir.empty()) options.remote_profile_dir = profile;
  if (options.remote_engine_program.empty()) options.remote_engine_program = options.engine_program;
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

LocalCluster::LocalCluster(ClusterOptions options, fs::path profile, int lock_fd)
    : options_(std::move(options)),
      launcher_(MakeLauncher(options_.launcher)),
      profile_(std::move(profile)),
      lock_fd_(lock_fd),
      server_restarts_(options_.max_restarts, options_.restart_window_s,
                       options_.restart_backoff_s) {}

LocalCluster::~LocalCluster() {
  StopAll();
  ::ftruncate(lock_fd_, 0);
  ::close(lock_fd_);  // releases the lock
}

// Waits while the process makes progress: a large history takes the hub
// long to load and the scheduler long to recover, and each says how far it
// got in its log. 20 s without an endpoint or a new line is an error.
Status LocalCluster::WaitForEndpoint(ChildProcess& process, const char* what, bool scheduler,
                                     uintmax_t log_since) {
  const auto path = protocol::ConnectionFilePath(profile_);
  const auto log = logs() / (std::string(what) + ".log");
  constexpr int64_t kStillUs = 20'000'000;
  std::error_code ec;
  auto logged = fs::file_size(log, ec);
  auto last_progress = base::MonotonicMicros();
  bool ready = false;
  while (!ready) {
    ready = WaitFor(
        [&] {
          if (process.Poll()) return true;
          auto info = protocol::ReadConnectionFile(path);
          return info.ok() && !(scheduler ? info->scheduler.client : info->hub.query).empty();
        },
        std::chrono::seconds(1));
    if (ready) break;
    const auto size = fs::file_size(log, ec);
    if (!ec && size != logged) {
      logged = size;
      last_progress = base::MonotonicMicros();
    } else if (base::MonotonicMicros() - last_progress >= kStillUs) {
      break;
    }
  }
  if (auto code = process.Poll()) return ExitedWhileStarting(what, *code, log, log_since);
  if (!ready) {
    return Status::TimedOut(std::string("the ") + what +
                            " has neither started nor logged anything for 20 s; see " +
                            log.string());
  }
  return Status::Ok();
}

Status LocalCluster::Start() {
  // A fresh connection file: a new key, no endpoints until each binds.
  protocol::ConnectionInfo info;
  if (options_.insecure) {
    info.signature_scheme = protocol::kSchemeNone;
  } else {
    info.key = protocol::GenerateKey();
  }
  if (protocol::CurveWanted(options_.ip, options_.curve, options_.no_encryption, "taskcluster")) {
    ZTASK_RETURN_IF_ERROR(protocol::EnableCurve(profile_, info));
  }
  ZTASK_RETURN_IF_ERROR(protocol::WriteConnectionFile(protocol::ConnectionFilePath(profile_), info));
  ZTASK_RETURN_IF_ERROR(
      protocol::CheckAuthenticated(info, options_.insecure, protocol::ConnectionFilePath(profile_)));
  std::ofstream(PidFile(profile_), std::ios::trunc) << ::getpid() << "\n";

  const std::string bin = options_.bin_dir.string() + "/";
  const std::string dir = profile_.string();
  // The hub, or the controller (the hub and the scheduler) in its place.
  const bool both = controller();
  const char* role = both ? "controller" : "hub";
  std::vector<std::string> hub = {bin + (both ? "taskcontroller" : "taskhub"), "--profile-dir", dir,
                                  "--ip", options_.ip};
  if (both) hub.insert(hub.end(), {"--scheme", options_.scheme, "--hwm", options_.hwm});
  if (!options_.db.empty()) hub.insert(hub.end(), {"--db", options_.db});
  if (options_.insecure) hub.push_back("--insecure");
  // Peers dial --location: ports, not Unix sockets, even on loopback.
  const bool tcp = options_.tcp || !options_.location.empty();
  if (tcp) hub.push_back("--tcp");
  const std::vector<std::string>& args = both ? options_.controller_args : options_.hub_args;
  hub.insert(hub.end(), args.begin(), args.end());
  hub_argv_ = hub;
  const fs::path hub_log = logs() / (std::string(role) + ".log");
  const uintmax_t hub_since = LogSize(hub_log);
  hub_ = std::make_unique<ChildProcess>(hub, hub_log);
  Status s = WaitForEndpoint(*hub_, role, both, hub_since);
  if (s.ok() && !controller()) {
    std::vector<std::string> scheduler = {bin + "taskscheduler", "--profile-dir", dir, "--scheme",
                                          options_.scheme, "--hwm", options_.hwm,
                                          "--ip", options_.ip};
    if (options_.insecure) scheduler.push_back("--insecure");
    if (tcp) scheduler.push_back("--tcp");
    scheduler.insert(scheduler.end(), options_.scheduler_args.begin(),
                     options_.scheduler_args.end());
    scheduler_argv_ = scheduler;
    const uintmax_t scheduler_since = LogSize(logs() / "scheduler.log");
    scheduler_ = std::make_unique<ChildProcess>(scheduler, logs() / "scheduler.log");
    s = WaitForEndpoint(*scheduler_, "scheduler", true, scheduler_since);
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
  if (s.ok() && !options_.dashboard.empty()) s = StartDashboard();
  // Before the cluster is called ready, so that `taskcluster scale` works
  // as soon as `start --daemonize` returns.
  if (s.ok()) {
    if (Status opened = OpenControl(); !opened.ok()) {
      std::fprintf(stderr, "taskcluster: no control socket (scale will not work): %s\n",
                   opened.message().c_str());
    }
  }
  if (!s.ok()) StopAll();
  return s;
}


Status LocalCluster::StartDashboard() {
  const size_t colon = options_.dashboard.rfind(':');
  const std::string ip = colon == std::string::npos ? "127.0.0.1" : options_.dashboard.substr(0, colon);
  const std::string port =
      colon == std::string::npos ? options_.dashboard : options_.dashboard.substr(colon + 1);
  const fs::path url_file = profile_ / "taskdash.url";
  std::error_code ignored;
  fs::remove(url_file, ignored);
  dashboard_argv_ = {options_.bin_dir.string() + "/taskdash", "--profile-dir", profile_.string(),
                     "--ip", ip, "--port", port};
  {
    // The token is made here, so that a restarted dashboard keeps its URL.
    // Every address needs it: another account can reach a loopback port.
    const fs::path token_file = profile_ / "taskdash.token";
    ZTASK_RETURN_IF_ERROR(protocol::WritePrivateFile(token_file, protocol::GenerateToken() + "\n"));
    dashboard_argv_.insert(dashboard_argv_.end(), {"--token-file", token_file.string()});
  }
  const uintmax_t log_since = LogSize(logs() / "dashboard.log");
  dashboard_ = std::make_unique<ChildProcess>(dashboard_argv_, logs() / "dashboard.log");
  const bool up = WaitFor(
      [&] {
        if (dashboard_->Poll()) return true;
        std::ifstream in(url_file);
        return static_cast<bool>(std::getline(in, dashboard_url_)) && !dashboard_url_.empty();
      },
      std::chrono::seconds(20));
  if (auto code = dashboard_->Poll()) {
    return ExitedWhileStarting("dashboard", *code, logs() / "dashboard.log", log_since);
  }
  if (!up) {
    return Status::TimedOut("the dashboard did not start within 20 s; see " +
                            (logs() / "dashboard.log").string());
  }
  // A restart binds the port this one got.
  const size_t port_at = dashboard_url_.find(':', dashboard_url_.find("//"));
  if (port_at != std::string::npos) {
    const size_t end = dashboard_url_.find('/', port_at);
    auto it = std::find(dashboard_argv_.begin(), dashboard_argv_.end(), "--port");
    if (it != dashboard_argv_.end() && end != std::string::npos) {
      *std::next(it) = dashboard_url_.substr(port_at + 1, end - port_at - 1);
    }
  }
  return Status::Ok();
}

void LocalCluster::Launch(Supervised& engine) {
  engine.process = std::make_unique<ChildProcess>(engine.argv, logs() / (engine.name + ".log"));
}

void LocalCluster::Report(const Supervised& engine, EngineState state,
                          const std::string& why) {
  std::fprintf(stderr, "taskcluster: %s %s: %s\n", engine.name.c_str(),
               std::string(EngineStateName(state)).c_str(), why.c_str());
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
        Report(e, EngineState::kStopped, "drained and retired");
        continue;
      }
      const std::string exited = "exited with code " + std::to_string(*code);
      if (e.window.Exhausted(now)) {
        e.failed = true;
        Report(e, EngineState::kFailed, exited + "; gave up after " + std::to_string(options_.max_restarts) +
                                " restarts within " + std::to_string(options_.restart_window_s) +
                                " s");
        continue;
      }
      const double backoff = e.window.EngineBackoff();
      e.restart_at = now + backoff;
      char why[160];
      std::snprintf(why, sizeof why, "%s; restarting in %g s", exited.c_str(), backoff);
      Report(e, EngineState::kRestarting, why);
    } else if (!e.failed && now >= e.restart_at) {
      e.window.Restarted(now);
      ++e.restarts;
      Launch(e);
      Report(e, EngineState::kStarting, "restart " + std::to_string(e.restarts));
    }
  }
}

namespace {

// Why a role may not start, when its disk is the reason: "" otherwise.
std::string FullDiskNote(const fs::path& profile) {
  struct statvfs st {};
  if (::statvfs(profile.c_str(), &st) != 0) return "";
  const uint64_t free_bytes = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  if (free_bytes >= (uint64_t{1} << 20)) return "";
  return "; the disk of " + profile.string() + " is full (" + std::to_string(free_bytes) +
         " bytes free)";
}

// Said where an operator looks: the supervisor's stderr (its terminal, or
// logs/cluster.log when daemonized, which a full disk may not take) and
// the system log.
void Alert(const std::string& text) {
  std::fprintf(stderr, "taskcluster: %s\n", text.c_str());
  ::syslog(LOG_ERR, "%s", text.c_str());
}

}  // namespace

bool LocalCluster::KeepServersUp(double now) {
  for (auto [process, argv, name] :
       {std::tuple{&hub_, &hub_argv_, controller() ? "controller" : "hub"},
        {&scheduler_, &scheduler_argv_, "scheduler"},
        {&dashboard_, &dashboard_argv_, "dashboard"}}) {
    if (!*process) continue;
    auto pending = server_restart_at_.find(name);
    if (pending != server_restart_at_.end()) {
      if (now < pending->second) continue;
      server_restart_at_.erase(pending);
      *process = std::make_unique<ChildProcess>(*argv, logs() / (std::string(name) + ".log"));
      continue;
    }
    const auto code = (*process)->Poll();
    if (!code) continue;
    // The hub ends with 0 when asked to (taskctl shutdown): so does the cluster.
    if (*code == 0 && process == &hub_) return false;
    const bool again = server_restarts_.Exhausted(now);
    if (again && process == &dashboard_) {
      // The cluster does not need its dashboard to work.
      std::fprintf(stderr, "taskcluster: the dashboard exited with code %d again; giving it up (see %s)\n",
                   *code, (logs() / "dashboard.log").c_str());
      dashboard_.reset();
      continue;
    }
    server_restarts_.Restarted(now);
    if (again) {
      // The hub and the scheduler hold what is not written yet (the
      // scheduler's unacknowledged records, the hub's unwritten ones):
      // stopping the cluster would lose it. They are started again, less
      // often, until they stay up.
      const double backoff = server_restarts_.ServerBackoff();
      server_restart_at_[name] = now + backoff;
      char text[512];
      std::snprintf(text, sizeof text,
                    "the %s of %s exited with code %d again (%zu times within %g s)%s; starting it "
                    "again in %g s, and the cluster is kept, for what it has not written yet "
                    "(see %s)",
                    name, profile_.c_str(), *code, server_restarts_.Recent(now),
                    options_.restart_window_s, FullDiskNote(profile_).c_str(), backoff,
                    (logs() / (std::string(name) + ".log")).c_str());
      Alert(text);
      continue;
    }
    std::fprintf(stderr, "taskcluster: the %s exited with code %d; restarting it\n", name, *code);
    // Same ports (it binds where the connection file says it was), same
    // database: its peers reconnect and the work goes on.
    *process = std::make_unique<ChildProcess>(*argv, logs() / (std::string(name) + ".log"));
  }
  return true;
}

void LocalCluster::Serve() {
  const auto interval = std::chrono::microseconds(
      static_cast<int64_t>(std::max(0.001, options_.monitor_interval_s) * 1e6));
  while (!stop_ && KeepServersUp(base::MonotonicSeconds())) {
    Supervise(base::MonotonicSeconds());
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

void LocalCluster::RequestStop() { stop_.store(true); }

std::vector<pid_t> LocalCluster::LocalEnginePids() {
  std::vector<pid_t> pids;
  if (!client_ || !hub_ || hub_->Poll()) return pids;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  auto engines = client_->Engines();
  if (!engines.ok()) return pids;
  for (const auto& e : *engines) {
    if (e.state == EngineState::kRunning && e.host == host) pids.push_back(static_cast<pid_t>(e.pid));
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
  for (const std::string& job : slurm_jobs_) {
    ChildProcess cancel({Which(options_.scancel), job}, logs() / "scancel.log");
    cancel.Wait(std::chrono::seconds(30));
  }
  slurm_jobs_.clear();
  for (pid_t pid : engine_pids) {
    if (ProcessRunning(pid)) ::kill(pid, SIGKILL);
  }
  client_.reset();
  if (dashboard_) dashboard_->Stop();
  dashboard_.reset();
  if (scheduler_) scheduler_->Stop();
  if (hub_) hub_->Stop();
  scheduler_.reset();
  hub_.reset();
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
