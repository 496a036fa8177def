#include "cluster/local_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

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
    : options_(std::move(options)), profile_(std::move(profile)), lock_fd_(lock_fd) {}

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
  if (s.ok()) {
    for (int i = 0; i < options_.engines; ++i) {
      const std::string name = "engine-" + std::to_string(i);
      engines_.push_back(std::make_unique<ChildProcess>(
          std::vector<std::string>{bin + "taskengine", "--profile-dir", dir, "--name", name},
          logs() / (name + ".log")));
    }
    auto client = Client::Connect(profile_);
    s = client.ok() ? (*client)->WaitForEngines(options_.engines, options_.launch_timeout_s)
                    : client.status();
    if (!s.ok() && s.code() == Status::Code::kTimedOut) {
      s = Status::TimedOut(s.message() + "; see the engine logs in " + logs().string());
    }
  }
  if (!s.ok()) StopAll();
  return s;
}

void LocalCluster::Serve() {
  while (!stop_ && !hub_->Poll()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  StopAll();
}

void LocalCluster::RequestStop() { stop_ = 1; }

void LocalCluster::StopAll() {
  // Engines first (they unregister), the hub last (it flushes its records).
  for (auto& e : engines_) e->Kill(SIGTERM);
  for (auto& e : engines_) e->Stop();
  engines_.clear();
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
