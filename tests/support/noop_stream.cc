// The no-op stream (noop_stream.h).
#include "tests/support/noop_stream.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <tuple>

namespace ztask::testing {

bool ClusterPids::Find(const std::string& profile, size_t n, std::string* why) {
  hub = PidOf("taskhub", profile);
  scheduler = PidOf("taskscheduler", profile);
  engines = PidsOf("taskengine", profile);
  if (hub <= 0 || scheduler <= 0 || engines.size() != n) {
    *why = "hub " + std::to_string(hub) + ", scheduler " + std::to_string(scheduler) + ", " +
           std::to_string(engines.size()) + " engines of " + std::to_string(n);
    return false;
  }
  return true;
}

namespace {

StreamSample Look(const ClusterPids& pids, size_t tasks) {
  StreamSample s;
  s.tasks = tasks;
  s.hub = StatusBytes(pids.hub, "VmRSS");
  s.scheduler = StatusBytes(pids.scheduler, "VmRSS");
  for (pid_t e : pids.engines) s.engine = std::max(s.engine, StatusBytes(e, "VmRSS"));
  s.client = StatusBytes(::getpid(), "VmRSS");
  return s;
}

// A chunk's replies that did not come: with the space left where the
// cluster writes, since a full disk stops the hub's records and so, past
// what the scheduler keeps for it, new tasks.
Status Stalled(const Status& waited, const std::string& profile) {
  std::string why = waited.message();
  struct statvfs fs {};
  if (!profile.empty() && ::statvfs(profile.c_str(), &fs) == 0) {
    const double free_mib = static_cast<double>(fs.f_bavail) * fs.f_frsize / (1 << 20);
    char line[160];
    std::snprintf(line, sizeof line, " (%.0f MiB free on the disk of %s)", free_mib,
                  profile.c_str());
    why += line;
  }
  return Status(waited.code(), why);
}

}  // namespace

Status RunNoOps(Client& client, const NoOpRun& run, const ClusterPids& pids,
                const std::function<void(const StreamSample&)>& sampled, TaskId* first,
                TaskId* last) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  std::vector<TaskOptions> chunk(run.chunk);
  for (auto& o : chunk) o.function = "noop";
  std::vector<TaskId> previous;
  double sampled_at = 0;
  size_t sampled_tasks = 0;
  auto sample = [&](size_t answered) {
    StreamSample s = Look(pids, answered);
    s.seconds = since(start);
    s.tasks_per_s = (answered - sampled_tasks) / std::max(1e-9, s.seconds - sampled_at);
    sampled_at = s.seconds;
    sampled_tasks = answered;
    sampled(s);
  };
  for (size_t sent = 0; sent < run.tasks; sent += run.chunk) {
    chunk.resize(std::min(run.chunk, run.tasks - sent));
    auto ids = client.SubmitMany(chunk);
    if (!ids.ok()) return ids.status();
    if (sent == 0) *first = ids->front();
    // One chunk in flight while the one before is answered.
    if (!previous.empty()) {
      if (Status s = client.WaitReplies(previous, run.reply_timeout_s); !s.ok()) {
        return Stalled(s, run.profile);
      }
      if (sent % run.sample_every == 0) sample(sent);
    }
    previous = std::move(*ids);
  }
  if (!previous.empty()) {
    if (Status s = client.WaitReplies(previous, run.reply_timeout_s); !s.ok()) {
      return Stalled(s, run.profile);
    }
    *last = previous.back();
  }
  sample(run.tasks);
  return Status::Ok();
}

bool Grew(const StreamSample& then, const StreamSample& now, double fraction, int64_t slack_bytes,
          std::string* why, int64_t scheduler_slack_bytes) {
  auto mib = [](int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); };
  bool grew = false;
  for (auto [name, a, b, extra] :
       {std::tuple{"hub", then.hub, now.hub, int64_t{0}},
        {"scheduler", then.scheduler, now.scheduler, scheduler_slack_bytes},
        {"engine", then.engine, now.engine, int64_t{0}},
        {"client", then.client, now.client, int64_t{0}}}) {
    if (b - a < static_cast<int64_t>(a * fraction) + slack_bytes + extra) continue;
    grew = true;
    char line[160];
    std::snprintf(line, sizeof line, "%s grew from %.1f MiB at %zu tasks to %.1f MiB at %zu; ",
                  name, mib(a), then.tasks, mib(b), now.tasks);
    *why += line;
  }
  return grew;
}

}  // namespace ztask::testing
