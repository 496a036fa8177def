// e2e_bench: the whole cluster, end to end, through the client library.
//
// usage: e2e_bench [--engines N | --simulated N] [--hwm H] [--scheme S]
//                  [--db PATH|:memory:] [--tasks N] [--latency N] [--chain N]
//                  [--fan-in N] [--dag N] [--relay] [--label TEXT]
//                  [--send-ahead true|false] [--waiting N] [--curve]
//                  [--durability process|power] [--shape mixed|spikes|slowdown]
//                  [--layout auto|separate|controller] [--tcp]
// --hwm takes a number or auto (the scheduler's default; 64 here unless
// given).
//        e2e_bench --attach PROFILE_DIR [--tasks N] --latency N
//
// --attach: against a cluster already running, the no-op throughput (with
// --tasks) and the round trips (the Python client's benchmark measures the
// C++ client's in its cluster; the dashboard's, a cluster with a browser on
// its dashboard).
// --curve: the hub makes the connection file with CurveZMQ on, as a cluster
// bound beyond loopback has by default: every connection encrypted.
// --durability power: the hub's commits and the scheduler's journal synced
// to disk (group-committed), as `taskcluster start --durability power`.
// --layout: controller runs the hub and the scheduler in one process
// (taskcontroller); auto (the default, as taskcluster's) does unless the
// engines need more open files than one process may have; their CPU is told apart by thread: the
// hub's threads
// ("hub", "hub-checkpoint") and those of its ZeroMQ context ("1/ZMQbg/...")
// are the hub's. separate: taskhub and taskscheduler.
// --tcp: the hub and the scheduler bind TCP ports on loopback, as with
// `taskcluster start --tcp`, instead of Unix sockets in the profile.
//
// Starts a hub, a scheduler and N engines (real taskengine processes, or
// simulated ones: processes holding many engine connections) in a temporary
// profile, then measures, each workload only when its count is above 0:
//   no-op throughput   --tasks no-ops submitted as fast as the client can,
//                      to the last reply received;
//   round trip         --latency no-ops one at a time (p50, p99, max in µs);
//   chain              --chain no-ops, each `after` the one before;
//   fan-in             --fan-in no-ops and one `after` all of them;
//   random DAG         --dag no-ops, each after up to 3 random earlier ones;
//   a shape            --shape: tasks that sleep, submitted at once, the
//                      seconds to the last reply (ShapeOf says which);
//   hub memory         the hub's resident memory grown per recorded task;
//   waiting memory     --waiting no-ops, each after a task that sleeps,
//                      so that all of them wait in the scheduler: its
//                      resident memory grown per waiting task, in all and
//                      from half of them to all (measured last, once the
//                      hub has recorded them; alone, or memory freed by
//                      the workloads before hides some);
//   CPU per task       each process's CPU time (user and system, all its
//                      threads) over the no-op run, to the hub's last write,
//                      divided by the tasks.
// --relay adds the floor (relay.h) with as many workers as engines, at one
// task a message and at 64 a message. Prints a
// table and, as its last line, one JSON object.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/clock.h"
#include "base/open_files.h"
#include "bench/relay.h"
#include "bench/simulated_engines.h"
#include "cluster/child_process.h"
#include "protocol/connection_file.h"
#include "ztask/client.h"

namespace ztask::bench {
namespace {

using Clock = base::MonotonicClock;
using cluster::ChildProcess;
// What the benchmark starts ends with it, stopped or killed.
constexpr ChildProcess::WhenParentDies kDie = ChildProcess::WhenParentDies::kDie;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(base::MonotonicNow() - t).count();
}

struct Options {
  int engines = 2, simulated = 0;
  std::string hwm = "64";  // or auto
  std::string shape;       // none, or ShapeOf's
  std::string scheme = "leastload", db, label = "ztask";
  int tasks = 20000, latency = 2000, chain = 2000, fan_in = 0, dag = 0, waiting = 0;
  bool relay = false;
  bool curve = false;  // the hub's --curve: every connection encrypted
  bool tcp = false;    // --tcp: TCP ports on loopback, not Unix sockets
  std::string send_ahead = "true";  // the scheduler's --send-ahead
  std::string durability = "process";  // the hub's and the scheduler's --durability
  std::string layout = "auto";  // taskcontroller, or separate where it could not hold the engines
};

std::string BinDir() {
  char path[4096];
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  return std::filesystem::path(std::string(path, n > 0 ? static_cast<size_t>(n) : 0))
      .parent_path()
      .string();
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "e2e_bench: %s\n", what.c_str());
  return 1;
}

// Resident memory of a process, in bytes, from /proc.
int64_t ResidentBytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return 0;
}

// CPU time a process (or a thread: "PID/task/TID") has used (user and
// system, every thread), in µs.
double CpuMicros(const std::string& pid) {
  std::ifstream stat("/proc/" + pid + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces) start at ')'.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int k = 3; fields >> field; ++k) {  // field 3 is the state
    if (k == 14) utime = std::stod(field);
    if (k == 15) {
      stime = std::stod(field);
      break;
    }
  }
  return (utime + stime) * 1e6 / static_cast<double>(::sysconf(_SC_CLK_TCK));
}
double CpuMicros(pid_t pid) { return CpuMicros(std::to_string(pid)); }

// A taskcontroller's CPU: its hub's threads, and the rest (the scheduler's).
std::pair<double, double> ControllerCpuMicros(pid_t pid) {
  double hub = 0, all = CpuMicros(pid);
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(tasks, ec)) {
    std::ifstream comm(entry.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind("hub", 0) == 0 || name.rfind("1/", 0) == 0) {
      hub += CpuMicros(std::to_string(pid) + "/task/" + entry.path().filename().string());
    }
  }
  return {hub, all - hub};
}

struct CpuSample {
  double hub = 0, scheduler = 0, engines = 0, client = 0;
  CpuSample operator-(const CpuSample& o) const {
    return {hub - o.hub, scheduler - o.scheduler, engines - o.engines, client - o.client};
  }
  double total() const { return hub + scheduler + engines + client; }
};

// A hub, a scheduler and the engines, each a child process, stopped on exit.
class Cluster {
 public:
  Status Start(const Options& o, const std::string& dir) {
    profile_ = dir + "/profile";
    const std::string bin = BinDir() + "/";
    controller_ = o.layout == "controller";
    std::vector<std::string> hub = {bin + (controller_ ? "taskcontroller" : "taskhub"),
                                    "--profile-dir", profile_, "--log-level", "warn"};
    if (!o.db.empty()) hub.insert(hub.end(), {"--db", o.db});
    if (o.curve) hub.push_back("--curve");
    if (o.tcp) hub.push_back("--tcp");
    hub.insert(hub.end(), {"--durability", o.durability});
    const std::vector<std::string> routing = {"--hwm",  o.hwm,          "--scheme",
                                              o.scheme, "--send-ahead", o.send_ahead};
    if (controller_) hub.insert(hub.end(), routing.begin(), routing.end());
    hub_ = std::make_unique<ChildProcess>(hub, dir + "/hub.log", kDie);
    ZTASK_RETURN_IF_ERROR(
        WaitForFile([](const protocol::ConnectionInfo& i) { return !i.hub.query.empty(); }));
    if (!controller_) {
      std::vector<std::string> scheduler = {
          bin + "taskscheduler", "--profile-dir", profile_, "--durability",
          o.durability,          "--log-level",   "warn"};
      scheduler.insert(scheduler.end(), routing.begin(), routing.end());
      if (o.tcp) scheduler.push_back("--tcp");
      scheduler_ = std::make_unique<ChildProcess>(scheduler, dir + "/scheduler.log", kDie);
    }
    ZTASK_RETURN_IF_ERROR(
        WaitForFile([](const protocol::ConnectionInfo& i) { return !i.scheduler.client.empty(); }));
    hub_rss_before_ = ResidentBytes(hub_->pid());
    scheduler_rss_before_ = ResidentBytes(scheduler_pid());
    started_us_ = base::MonotonicMicros();
    if (o.simulated > 0) {
      // At most 2,000 engines a process: each holds two connections, and
      // each connection costs two descriptors.
      for (int left = o.simulated, k = 0; left > 0; left -= 2000, ++k) {
        engines_.push_back(std::make_unique<ChildProcess>(
            std::vector<std::string>{bin + "e2e_bench", "--serve-simulated",
                                     std::to_string(std::min(left, 2000)), "--profile", profile_},
            dir + "/simulated-" + std::to_string(k) + ".log", kDie));
      }
    } else {
      for (int i = 0; i < o.engines; ++i) {
        engines_.push_back(std::make_unique<ChildProcess>(
            std::vector<std::string>{bin + "taskengine", "--profile-dir", profile_, "--name",
                                     "engine-" + std::to_string(i), "--log-level", "warn"},
            dir + "/engine-" + std::to_string(i) + ".log", kDie));
      }
    }
    auto client = Client::Connect(profile_);
    if (!client.ok()) return client.status();
    client_ = std::move(*client);
    ZTASK_RETURN_IF_ERROR(client_->WaitForEngines(o.simulated > 0 ? o.simulated : o.engines, 120));
    register_s_ = static_cast<double>(base::MonotonicMicros() - started_us_) / 1e6;
    return Status::Ok();
  }
  // Seconds from the first engine started to the last one registered.
  double register_s() const { return register_s_; }
  // Resident bytes the hub and the scheduler grew since before the engines
  // started.
  std::pair<int64_t, int64_t> GrewSinceEngines() const {
    return {ResidentBytes(hub_->pid()) - hub_rss_before_,
            ResidentBytes(scheduler_pid()) - scheduler_rss_before_};
  }
  ~Cluster() {
    client_.reset();
    for (auto& e : engines_) e->Stop();
    if (scheduler_) scheduler_->Stop();
    if (hub_) hub_->Stop();
  }
  Client& client() { return *client_; }
  pid_t hub_pid() const { return hub_->pid(); }
  // With the controller layout, the one process of both.
  pid_t scheduler_pid() const { return controller_ ? hub_->pid() : scheduler_->pid(); }
  CpuSample Cpu() const {
    CpuSample s{0, 0, 0, CpuMicros(::getpid())};
    if (controller_) {
      std::tie(s.hub, s.scheduler) = ControllerCpuMicros(hub_->pid());
    } else {
      s.hub = CpuMicros(hub_->pid());
      s.scheduler = CpuMicros(scheduler_->pid());
    }
    for (const auto& e : engines_) s.engines += CpuMicros(e->pid());
    return s;
  }
  // Waits (up to 30 s) until the hub has stopped working: the records of
  // the last tasks are written a moment after their replies.
  void WaitForHubIdle() const {
    double last = CpuMicros(hub_->pid());
    for (int i = 0; i < 300; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const double now = CpuMicros(hub_->pid());
      if (now - last < 5000) return;  // under 5 % of a core
      last = now;
    }
  }

 private:
  template <class Ready>
  Status WaitForFile(Ready ready) {
    const auto path = protocol::ConnectionFilePath(profile_);
    for (int i = 0; i < 2000; ++i) {
      auto info = protocol::ReadConnectionFile(path);
      if (info.ok() && ready(*info)) return Status::Ok();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return Status::TimedOut("the cluster did not start; see the logs next to " + profile_);
  }

  std::string profile_;
  int64_t hub_rss_before_ = 0, scheduler_rss_before_ = 0, started_us_ = 0;
  double register_s_ = 0;
  bool controller_ = false;
  std::unique_ptr<ChildProcess> hub_, scheduler_;  // hub_ is the controller, if one
  std::vector<std::unique_ptr<ChildProcess>> engines_;
  std::unique_ptr<Client> client_;
};

// Submits `graph` (after lists by index) in order, as SubmitMany does for a
// graph or a map (in calls of kPerCall tasks), and waits for every reply:
// tasks per second.
Result<double> RunGraph(Client& c, const std::vector<std::vector<size_t>>& after) {
  constexpr size_t kPerCall = 1024;
  std::vector<TaskId> ids;
  ids.reserve(after.size());
  for (size_t i = 0; i < after.size(); ++i) ids.push_back(TaskId::New());
  std::vector<TaskOptions> tasks;
  const auto start = base::MonotonicNow();
  for (size_t first = 0; first < after.size(); first += kPerCall) {
    const size_t end = std::min(after.size(), first + kPerCall);
    tasks.assign(end - first, TaskOptions{});
    for (size_t i = first; i < end; ++i) {
      TaskOptions& task = tasks[i - first];
      task.function = "noop";
      for (size_t d : after[i]) task.after.ids.push_back(ids[d]);
    }
    const std::vector<TaskId> call(ids.begin() + static_cast<std::ptrdiff_t>(first),
                                   ids.begin() + static_cast<std::ptrdiff_t>(end));
    auto sent = c.SubmitMany(tasks, call);
    if (!sent.ok()) return sent.status();
  }
  ZTASK_RETURN_IF_ERROR(c.WaitReplies(ids, 600));
  return static_cast<double>(after.size()) / Since(start);
}

// The durations (seconds) of the tasks of a shape, in submission order, or
// none for an unknown name:
//   mixed     one task of 2 s, then 160 of 10 ms;
//   spikes    2,000 tasks of 1 ms with 4 of 1 s at random among them;
//   slowdown  a map of 400 tasks that become ten times slower halfway
//             (2 ms, then 20 ms).
std::vector<double> ShapeOf(const std::string& name) {
  std::vector<double> d;
  if (name == "mixed") {
    d.push_back(2.0);
    d.insert(d.end(), 160, 0.01);
  } else if (name == "spikes") {
    d.assign(2000, 0.001);
    std::mt19937_64 rng(20261126);
    for (int k = 0; k < 4; ++k) d[rng() % d.size()] = 1.0;
  } else if (name == "slowdown") {
    d.assign(200, 0.002);
    d.insert(d.end(), 200, 0.02);
  }
  return d;
}

// Submits tasks that sleep for `durations` at once; the seconds to the
// last reply.
Result<double> RunShape(Client& c, const std::vector<double>& durations) {
  std::vector<TaskOptions> tasks(durations.size());
  for (size_t i = 0; i < durations.size(); ++i) {
    tasks[i].function = "sleep";
    tasks[i].args = Value(durations[i]);
  }
  const auto start = base::MonotonicNow();
  auto ids = c.SubmitMany(tasks);
  if (!ids.ok()) return ids.status();
  ZTASK_RETURN_IF_ERROR(c.WaitReplies(*ids, 600));
  return Since(start);
}

// The scheduler's resident memory grown per waiting task: in all, and
// between half of them waiting and all of them (what each more costs, without
// what the first burst of a run costs once: what the hub has not
// acknowledged yet, up to the scheduler's bound, and the allocator's pools).
struct WaitingMemory {
  double all = 0, marginal = 0;
};

// Submits `n` no-ops after a task that sleeps, so that all of them wait in
// the scheduler, in two halves; reads its memory once the hub has recorded
// each half. Aborts them after.
Result<WaitingMemory> WaitingBytes(Cluster& cluster, int n) {
  Client& c = cluster.client();
  TaskOptions blocker;
  blocker.function = "sleep";
  blocker.args = Value(3600);
  auto blocker_id = c.Submit(blocker);
  if (!blocker_id.ok()) return blocker_id.status();
  const int64_t before = ResidentBytes(cluster.scheduler_pid());
  TaskOptions task;
  task.function = "noop";
  task.after.ids = {*blocker_id};
  std::vector<TaskId> ids;
  // Submits up to `total` waiting tasks and reads the memory once the hub
  // has them all.
  auto fill = [&](int total) -> Result<int64_t> {
    while (static_cast<int>(ids.size()) < total) {
      auto id = c.Submit(task);
      if (!id.ok()) return id.status();
      ids.push_back(*id);
    }
    const auto deadline = base::MonotonicNow() + std::chrono::seconds(120);
    while (true) {
      auto queue = c.Queue();
      if (!queue.ok()) return queue.status();
      // One of them may have been sent ahead, behind the blocker.
      int64_t held = queue->unassigned;
      for (const auto& e : queue->engines) held += e.running + e.queued;
      if (held >= total + 1) break;
      if (base::MonotonicNow() > deadline) {
        return Status::TimedOut("the hub recorded " + std::to_string(held) + " of " +
                                std::to_string(total + 1) + " tasks");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    // The hub acknowledges what it recorded within its next write.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return ResidentBytes(cluster.scheduler_pid());
  };
  auto half = fill(n / 2);
  if (!half.ok()) return half.status();
  auto all = fill(n);
  if (!all.ok()) return all.status();
  ids.push_back(*blocker_id);
  if (auto aborted = c.Abort(ids); !aborted.ok()) return aborted.status();
  return WaitingMemory{static_cast<double>(*all - before) / n,
                       static_cast<double>(*all - *half) / (n - n / 2)};
}

// `n` no-ops one at a time, each to its reply.
Result<Latency> RoundTrips(Client& c, int n) {
  std::vector<double> us;
  TaskOptions noop;
  noop.function = "noop";
  for (int i = 0; i < n; ++i) {
    const auto t = base::MonotonicNow();
    auto id = c.Submit(noop);
    if (!id.ok() || !c.WaitReplies({*id}, 60).ok()) return Status::TimedOut("a round trip stalled");
    us.push_back(Since(t) * 1e6);
  }
  return Summarize(us);
}

int Attached(const std::string& profile, int n, int tasks) {
  auto client = Client::Connect(profile);
  if (!client.ok()) return Fail(client.status().message());
  double throughput = 0;
  if (tasks > 0) {
    auto rate = RunGraph(**client, std::vector<std::vector<size_t>>(static_cast<size_t>(tasks)));
    if (!rate.ok()) return Fail("throughput: " + rate.status().message());
    throughput = *rate;
  }
  Latency rtt;
  if (n > 0) {
    auto measured = RoundTrips(**client, n);
    if (!measured.ok()) return Fail(measured.status().message());
    rtt = *measured;
  }
  std::printf("{\"label\": \"attached\", \"tasks\": %d, \"tasks_per_s\": %.0f, \"latency\": %d, "
              "\"p50_us\": %.0f, \"p99_us\": %.0f, \"max_us\": %.0f}\n",
              tasks, throughput, n, rtt.p50, rtt.p99, rtt.max);
  return 0;
}

// The dependency graphs the bench runs: each task lists the tasks it waits for.
using Graph = std::vector<std::vector<size_t>>;

Graph ChainGraph(int n) {
  Graph g(static_cast<size_t>(n));
  for (size_t i = 1; i < g.size(); ++i) g[i] = {i - 1};
  return g;
}

Graph FanInGraph(int n) {
  Graph g(static_cast<size_t>(n) + 1);
  for (size_t i = 0; i + 1 < g.size(); ++i) g.back().push_back(i);
  return g;
}

// Each task waits for 0 to 3 earlier ones, the same graph every run.
Graph RandomDag(int n) {
  std::mt19937_64 rng(20261121);
  Graph g(static_cast<size_t>(n));
  for (size_t i = 1; i < g.size(); ++i) {
    for (int k = static_cast<int>(rng() % 4); k > 0; --k) g[i].push_back(rng() % i);
  }
  return g;
}

// What one run measured.
struct Figures {
  double throughput = 0, chain = 0, fan_in = 0, dag = 0, bytes_per_record = 0;
  double shape_s = 0;  // --shape's seconds
  double register_s = 0;  // from the first engine started to the last registered
  // The pool idle, with simulated engines: the hub's and the scheduler's
  // CPU (ms a second) and resident bytes per engine.
  double idle_hub_ms = 0, idle_scheduler_ms = 0, hub_bytes_per_engine = 0,
         scheduler_bytes_per_engine = 0;
  WaitingMemory waiting;  // bytes per waiting task
  CpuSample cpu;          // µs per task over the no-op run
  Latency rtt;
  RelayResult relay, relay64;
};

// The no-op throughput, with the CPU and hub memory it cost per task.
Status MeasureThroughput(const Options& o, Cluster& cluster, Figures* f) {
  const int64_t before = ResidentBytes(cluster.hub_pid());
  const CpuSample cpu_before = cluster.Cpu();
  auto rate = RunGraph(cluster.client(), Graph(static_cast<size_t>(o.tasks)));
  if (!rate.ok()) return Status::Unavailable("throughput: " + rate.status().message());
  f->throughput = *rate;
  cluster.WaitForHubIdle();
  const CpuSample used = cluster.Cpu() - cpu_before;
  f->cpu = {used.hub / o.tasks, used.scheduler / o.tasks, used.engines / o.tasks,
            used.client / o.tasks};
  f->bytes_per_record = static_cast<double>(ResidentBytes(cluster.hub_pid()) - before) / o.tasks;
  return Status::Ok();
}

// What the registered pool costs before any task: the heartbeats alone
// (after a few periods, so that every engine beats at the period the hub
// asks of a pool this size), and the memory each engine takes.
void MeasureIdlePool(const Options& o, Cluster& cluster, Figures* f) {
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const CpuSample before = cluster.Cpu();
  constexpr int kSeconds = 5;
  std::this_thread::sleep_for(std::chrono::seconds(kSeconds));
  const CpuSample used = cluster.Cpu() - before;
  f->idle_hub_ms = used.hub / 1000 / kSeconds;
  f->idle_scheduler_ms = used.scheduler / 1000 / kSeconds;
  const auto [hub, scheduler] = cluster.GrewSinceEngines();
  f->hub_bytes_per_engine = static_cast<double>(hub) / o.simulated;
  f->scheduler_bytes_per_engine = static_cast<double>(scheduler) / o.simulated;
}

// Every workload asked for, on one cluster started in `dir`.
Status MeasureCluster(const Options& o, const std::string& dir, Figures* f) {
  Cluster cluster;
  ZTASK_RETURN_IF_ERROR(cluster.Start(o, dir));
  Client& c = cluster.client();
  f->register_s = cluster.register_s();
  if (o.simulated > 0) MeasureIdlePool(o, cluster, f);
  if (o.tasks > 0) ZTASK_RETURN_IF_ERROR(MeasureThroughput(o, cluster, f));
  auto measured = RoundTrips(c, o.latency);
  if (!measured.ok()) return measured.status();
  f->rtt = *measured;
  for (auto [n, make, name, out] : {std::tuple{o.chain, &ChainGraph, "chain", &f->chain},
                                    {o.fan_in, &FanInGraph, "fan-in", &f->fan_in},
                                    {o.dag, &RandomDag, "random DAG", &f->dag}}) {
    if (n <= 0) continue;
    auto rate = RunGraph(c, make(n));
    if (!rate.ok()) return Status::Unavailable(std::string(name) + ": " + rate.status().message());
    *out = *rate;
  }
  if (!o.shape.empty()) {
    auto seconds = RunShape(c, ShapeOf(o.shape));
    if (!seconds.ok()) return Status::Unavailable("shape: " + seconds.status().message());
    f->shape_s = *seconds;
  }
  if (o.waiting > 0) {
    auto bytes = WaitingBytes(cluster, o.waiting);
    if (!bytes.ok()) return Status::Unavailable("waiting tasks: " + bytes.status().message());
    f->waiting = *bytes;
  }
  return Status::Ok();
}

void PrintTable(const Options& o, int pool, const Figures& f) {
  std::printf("%s: %d %s engines, %s, hwm %s, db %s, signed\n", o.label.c_str(), pool,
              o.simulated > 0 ? "simulated" : "real", o.scheme.c_str(), o.hwm.c_str(),
              o.db.empty() ? "sqlite" : o.db.c_str());
  std::printf("  %-22s %12s %9s %9s %9s\n", "workload", "tasks/s", "p50 us", "p99 us", "max us");
  if (o.tasks > 0) std::printf("  %-22s %12.0f\n", "no-op throughput", f.throughput);
  if (o.latency > 0) {
    std::printf("  %-22s %12s %9.0f %9.0f %9.0f\n", "round trip", "", f.rtt.p50, f.rtt.p99,
                f.rtt.max);
  }
  if (o.chain > 0) std::printf("  %-22s %12.0f\n", "chain", f.chain);
  if (o.fan_in > 0) std::printf("  %-22s %12.0f\n", "fan-in", f.fan_in);
  if (o.dag > 0) std::printf("  %-22s %12.0f\n", "random DAG", f.dag);
  if (!o.shape.empty()) std::printf("  shape %s: %.3f s\n", o.shape.c_str(), f.shape_s);
  std::printf("  engines registered in %.1f s\n", f.register_s);
  if (o.simulated > 0) {
    std::printf(
        "  idle pool: hub %.0f ms CPU a second, scheduler %.0f; memory per engine: hub %.0f "
        "bytes, scheduler %.0f\n",
        f.idle_hub_ms, f.idle_scheduler_ms, f.hub_bytes_per_engine, f.scheduler_bytes_per_engine);
  }
  if (o.tasks > 0) {
    std::printf("  hub memory per recorded task: %.0f bytes\n", f.bytes_per_record);
    std::printf(
        "  CPU per no-op, us: hub %.1f, scheduler %.1f, engines %.1f, client %.1f, "
        "all %.1f\n",
        f.cpu.hub, f.cpu.scheduler, f.cpu.engines, f.cpu.client, f.cpu.total());
  }
  if (o.waiting > 0) {
    std::printf(
        "  scheduler memory per waiting task: %.0f bytes more for each of the last %d, "
        "%.0f bytes in all\n",
        f.waiting.marginal, o.waiting - o.waiting / 2, f.waiting.all);
  }
  if (o.relay) {
    std::printf("  %-22s %12.0f %9.0f %9.0f %9.0f\n", "bare relay (floor)", f.relay.tasks_per_s,
                f.relay.rtt.p50, f.relay.rtt.p99, f.relay.rtt.max);
    std::printf("  %-22s %12.0f\n", "relay, 64 a message", f.relay64.tasks_per_s);
  }
}

// The one JSON line bench/compare.sh reads.
void PrintJson(const Options& o, int pool, const Figures& f) {
  std::printf(
      "{\"label\": \"%s\", \"layout\": \"%s\", \"engines\": %d, \"simulated\": %s, \"hwm\": "
      "\"%s\", "
      "\"scheme\": \"%s\", "
      "\"db\": \"%s\", \"tasks\": %d, \"tasks_per_s\": %.0f, \"p50_us\": %.0f, \"p99_us\": %.0f, "
      "\"max_us\": %.0f, \"chain_tasks_per_s\": %.0f, \"fan_in_tasks_per_s\": %.0f, "
      "\"dag_tasks_per_s\": %.0f, \"hub_bytes_per_record\": %.0f, "
      "\"waiting\": %d, \"scheduler_bytes_per_waiting\": %.0f, "
      "\"scheduler_bytes_per_waiting_all\": %.0f, \"relay_tasks_per_s\": %.0f, "
      "\"relay_p50_us\": %.0f, \"relay64_tasks_per_s\": %.0f, \"shape\": \"%s\", \"shape_s\": "
      "%.3f, "
      "\"register_s\": %.1f, \"idle_hub_ms_per_s\": %.0f, \"idle_scheduler_ms_per_s\": %.0f, "
      "\"hub_bytes_per_engine\": %.0f, \"scheduler_bytes_per_engine\": %.0f, "
      "\"cpu_us_per_task\": {\"hub\": %.1f, \"scheduler\": %.1f, "
      "\"engines\": %.1f, \"client\": %.1f, \"all\": %.1f}}\n",
      o.label.c_str(), o.layout.c_str(), pool, o.simulated > 0 ? "true" : "false", o.hwm.c_str(),
      o.scheme.c_str(), o.db.empty() ? "sqlite" : o.db.c_str(), o.tasks, f.throughput, f.rtt.p50,
      f.rtt.p99, f.rtt.max, f.chain, f.fan_in, f.dag, f.bytes_per_record, o.waiting,
      f.waiting.marginal, f.waiting.all, f.relay.tasks_per_s, f.relay.rtt.p50,
      f.relay64.tasks_per_s, o.shape.c_str(), f.shape_s, f.register_s, f.idle_hub_ms,
      f.idle_scheduler_ms, f.hub_bytes_per_engine, f.scheduler_bytes_per_engine, f.cpu.hub,
      f.cpu.scheduler, f.cpu.engines, f.cpu.client, f.cpu.total());
}

int Main(Options o) {
  // The hub and the scheduler hold a descriptor per engine, the simulated
  // engines' processes two per connection: a large pool needs more than a
  // login's usual limit, which the children inherit.
  uint64_t files = base::RaiseOpenFileLimit();
  if (o.simulated > 0) {
    const uint64_t wanted = 2 * static_cast<uint64_t>(o.simulated) + 4096;
    if (files = base::RaiseOpenFileLimitTo(wanted); files < wanted) {
      std::fprintf(stderr, "e2e_bench: the open-file limit is %llu; %d engines need about %llu\n",
                   static_cast<unsigned long long>(files), o.simulated,
                   static_cast<unsigned long long>(wanted));
    }
  }
  // As taskcluster start chooses: one process unless it could not hold a
  // connection from each engine to both the hub and the scheduler.
  if (o.layout == "auto") {
    const auto engines = static_cast<uint64_t>(o.simulated > 0 ? o.simulated : o.engines);
    o.layout = base::OneServerProcessHolds(engines, files) ? "controller" : "separate";
  }
  char pattern[] = "/tmp/ztask-bench-XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  Figures f;
  const Status measured = MeasureCluster(o, dir, &f);
  std::filesystem::remove_all(dir);
  if (!measured.ok()) return Fail(measured.message());
  const int pool = o.simulated > 0 ? o.simulated : o.engines;
  if (o.relay) {
    f.relay = RunRelay(std::min(pool, 64), std::max(o.tasks, 100000), o.latency);
    f.relay64 = RunRelay(std::min(pool, 64), std::max(o.tasks, 100000) * 4, 0, 64);
  }
  PrintTable(o, pool, f);
  PrintJson(o, pool, f);
  return 0;
}

}  // namespace
}  // namespace ztask::bench

int main(int argc, char** argv) {
  using ztask::bench::Fail;
  ztask::bench::Options o;
  std::string serve_profile, attach;
  bool tasks_given = false;
  int serve = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--relay" || flag == "--curve" || flag == "--tcp") {
      (flag == "--relay" ? o.relay : flag == "--curve" ? o.curve : o.tcp) = true;
      continue;
    }
    if (i + 1 >= argc) {
      return Fail(flag + " needs a value (see the usage at the top of e2e_bench.cc)");
    }
    const std::string v = argv[++i];
    try {
      // clang-format off
      if (flag == "--engines") o.engines = std::stoi(v);
      else if (flag == "--simulated") o.simulated = std::stoi(v);
      else if (flag == "--hwm") o.hwm = v == "auto" ? v : std::to_string(std::stoi(v));
      else if (flag == "--shape") o.shape = v;
      else if (flag == "--scheme") o.scheme = v;
      else if (flag == "--db") o.db = v;
      else if (flag == "--tasks") o.tasks = std::stoi(v), tasks_given = true;
      else if (flag == "--latency") o.latency = std::stoi(v);
      else if (flag == "--chain") o.chain = std::stoi(v);
      else if (flag == "--fan-in") o.fan_in = std::stoi(v);
      else if (flag == "--dag") o.dag = std::stoi(v);
      else if (flag == "--waiting") o.waiting = std::stoi(v);
      else if (flag == "--label") o.label = v;
      else if (flag == "--send-ahead") o.send_ahead = v;
      else if (flag == "--durability") o.durability = v;
      else if (flag == "--layout") o.layout = v;
      else if (flag == "--serve-simulated") serve = std::stoi(v);
      else if (flag == "--profile") serve_profile = v;
      else if (flag == "--attach") attach = v;
      else return Fail("unknown flag " + flag + " (see the usage at the top of e2e_bench.cc)");
      // clang-format on
    } catch (const std::exception&) {
      return Fail(flag + " needs a number, not '" + v + "'");
    }
  }
  if (o.durability != "process" && o.durability != "power") {
    return Fail("--durability takes process or power, not '" + o.durability + "'");
  }
  if (o.layout != "auto" && o.layout != "separate" && o.layout != "controller") {
    return Fail("--layout takes auto, separate or controller, not '" + o.layout + "'");
  }
  if (o.send_ahead != "true" && o.send_ahead != "false") {
    return Fail("--send-ahead takes true or false, not '" + o.send_ahead + "'");
  }
  if (!o.shape.empty() && ztask::bench::ShapeOf(o.shape).empty()) {
    return Fail("--shape takes mixed, spikes or slowdown, not '" + o.shape + "'");
  }
  if (serve > 0) return ztask::bench::RunSimulatedEngines(serve_profile, serve);
  if (!attach.empty()) return ztask::bench::Attached(attach, o.latency, tasks_given ? o.tasks : 0);
  return ztask::bench::Main(o);
}
