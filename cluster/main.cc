// taskcluster: start a whole cluster on this machine, or stop one.
#include <fcntl.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <thread>
#include <tuple>

#include "base/signals.h"
#include "base/usage.h"
#include "cluster/local_cluster.h"
#include "cluster/passed_flags.h"
#include "cluster/report.h"
#include "protocol/resources.h"

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "taskcluster: %s\n", message.c_str());
  return 2;
}

void Announce(const ztask::cluster::LocalCluster& cluster, const std::string& dashboard_url) {
  std::printf("cluster ready: %d engines; profile %s; logs in %s\n", cluster.engines(),
              cluster.profile().c_str(), cluster.logs().c_str());
  if (!cluster.layout_note().empty()) std::printf("%s\n", cluster.layout_note().c_str());
  std::printf("submit with: taskctl --profile-dir %s submit -- CMD...\n",
              cluster.profile().c_str());
  if (!dashboard_url.empty()) std::printf("dashboard: %s\n", dashboard_url.c_str());
  std::fflush(stdout);
}

// --daemonize: the cluster starts in a child that leaves the session; this
// process returns once it is ready (0) or has failed (its message, 2).
int Daemonize(ztask::cluster::LocalCluster& cluster) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return Fail("cannot make a pipe");
  std::fflush(nullptr);
  // The one fork not followed by exec (base/spawn.h is for that): the child
  // carries on as the supervisor. It is safe because no thread runs yet (the
  // signal thread is started after it, in the child).
  const pid_t pid = ::fork();
  if (pid < 0) return Fail("cannot fork");
  if (pid > 0) {
    ::close(pipe_fds[1]);
    std::string report;
    char buffer[512];
    ssize_t n;
    while ((n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0)
      report.append(buffer, static_cast<size_t>(n));
    if (report.rfind("ok", 0) != 0)
      return Fail(report.empty() ? "the cluster did not start" : report);
    // "ok", then the dashboard's URL on a line of its own.
    const size_t line = report.find('\n');
    Announce(cluster, line == std::string::npos ? "" : report.substr(line + 1));
    std::_Exit(0);  // the child owns the cluster now
  }
  ::close(pipe_fds[0]);
  ::setsid();
  ztask::InstallStopSignals();
  ztask::Status started = cluster.Start();
  const std::string report =
      started.ok() ? "ok" + (cluster.dashboard_url().empty() ? "" : "\n" + cluster.dashboard_url())
                   : started.message();
  [[maybe_unused]] ssize_t w = ::write(pipe_fds[1], report.data(), report.size());
  ::close(pipe_fds[1]);
  if (!started.ok()) return 2;
  // The supervisor's own messages (restarts, give-ups) go to its log.
  int null_fd = ::open("/dev/null", O_RDWR);
  int log_fd =
      ::open((cluster.logs() / "cluster.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  ::dup2(null_fd, 0);
  ::dup2(null_fd, 1);
  ::dup2(log_fd >= 0 ? log_fd : null_fd, 2);
  cluster.Serve();
  return 0;
}

// A subcommand: its options are on `app`; `run` does it once parsed.
struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;
};
using ztask::cluster::ClusterOptions;

// What start takes beyond ClusterOptions: its own switches, and the words
// of the flags handed on to the hub, the scheduler or the engines as typed.
struct StartFlags {
  bool daemonize = false, dry_run = false;
  std::vector<std::vector<std::string>> passed_on;  // by ztask::cluster::PassedFlags()
};

// How many engines, how tasks are routed, where records and ports are.
void AddShapeFlags(CLI::App* start, ClusterOptions& options) {
  start->add_option("-n,--engines", options.engines, "number of engines (default: cores)")
      ->check(ztask::WholeNumberIn(1, 100000));
  start->add_option("--scheme", options.scheme, "leastload, lru, twobin, weighted, random");
  start->add_option("--hwm", options.hwm,
                    "most tasks outstanding per engine; 0: no limit; auto (the default): "
                    "learned per engine")
      ->check(ztask::kHwmValue);
  start->add_option("--db", options.db, "task records: a SQLite file or :memory:");
  start
      ->add_option("--layout", options.layout,
                   "controller: the hub and the scheduler in one process (taskcontroller); "
                   "separate: each in its own (taskhub, taskscheduler); auto: the controller "
                   "unless the engines need more open files than one process may have")
      ->check(CLI::IsMember({"auto", "controller", "separate"}))
      ->capture_default_str();
  start->add_option("--ip", options.ip, "address to bind (and to write in the connection file)");
  start->add_flag("--tcp", options.tcp,
                  "on loopback, bind TCP ports instead of Unix sockets in the profile (peers "
                  "that dial through a tunnel; implied by --location)");
  start->add_option("--dashboard", options.dashboard,
                    "serve the web dashboard and /metrics on [ADDR:]PORT (0: any free port; "
                    "every request needs the token in the printed URL)");
  start->add_option("--launch-timeout", options.launch_timeout_s,
                    "seconds for every engine to register");
}

// How the supervisor restarts engines that die.
void AddSupervisionFlags(CLI::App* start, ClusterOptions& options) {
  start
      ->add_option("--max-restarts", options.max_restarts,
                   "restarts of one engine within the window before it is given up")
      ->check(ztask::kNonNegativeNumber);
  start->add_option("--restart-window", options.restart_window_s, "seconds")
      ->check(ztask::kPositiveNumber);
  start
      ->add_option("--restart-backoff", options.restart_backoff_s,
                   "seconds before the first restart; doubles with each recent one")
      ->check(ztask::kNonNegativeNumber);
  start
      ->add_option("--monitor-interval", options.monitor_interval_s,
                   "seconds between checks of the engines")
      ->check(ztask::kPositiveNumber);
}

// Where engines start: here, under mpiexec, over ssh, or as a Slurm job.
void AddLauncherFlags(CLI::App* start, ClusterOptions& options, StartFlags& f) {
  start->add_option("--launcher", options.launcher, "how engines start: local, mpi, ssh or slurm")
      ->capture_default_str();
  start->add_option("--mpiexec", options.mpiexec, "the mpiexec to run (mpi launcher)")
      ->capture_default_str();
  start
      ->add_option("--mpi-args", options.mpi_args,
                   "extra mpiexec arguments, e.g. --mpi-args=--hostfile --mpi-args=hosts")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  start->add_option("--hosts", options.hosts, "ssh launcher: HOST[:COUNT],...")
      ->delimiter(',')
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  start->add_option("--ssh", options.ssh, "ssh command, split on spaces (ssh launcher)")
      ->capture_default_str();
  start->add_option("--remote-profile-dir", options.remote_profile_dir,
                    "profile directory on the hosts (default: the same path)");
  start->add_option("--remote-engine-program", options.remote_engine_program,
                    "engine program on the hosts (default: the same path)");
  start->add_option("--location", options.location,
                    "address written into the connection file (default: --ip)");
  start
      ->add_option("--slurm-args", options.slurm_args,
                   "an #SBATCH option for the slurm launcher (repeatable), e.g. --partition=x")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  start->add_option("--sbatch", options.sbatch, "sbatch command (slurm launcher)");
  start->add_option("--scancel", options.scancel, "scancel command (slurm launcher)");
  start->add_flag("--dry-run", f.dry_run,
                  "slurm launcher: print the batch script and start nothing");
  start->add_option("--engine-program", options.engine_program,
                    "program to run as each engine (default: taskengine next to taskcluster)");
}

// Who may connect, and whether connections are encrypted.
void AddSecurityFlags(CLI::App* start, ClusterOptions& options) {
  start->add_flag("--insecure", options.insecure,
                  "run without a key: anyone who can reach the ports can run commands");
  start->add_flag("--curve", options.curve,
                  "encrypt every connection with CurveZMQ (on by default when --ip is not "
                  "loopback)");
  start->add_flag("--no-encryption", options.no_encryption,
                  "no CurveZMQ even when --ip is beyond loopback (warns): signing only");
}

// Whether a retention bound (a value above 0) goes with --db :memory:,
// which the hub refuses at its start (TaskStore::Open): said here at once,
// rather than as a hub that exited.
bool RetentionWithoutAFile(const StartFlags& f, const ClusterOptions& options) {
  if (options.db != ":memory:") return false;
  const auto& table = ztask::cluster::PassedFlags();
  for (size_t i = 0; i < table.size() && i < f.passed_on.size(); ++i) {
    if (table[i].name != "--max-finished-records" && table[i].name != "--drop-finished-after") {
      continue;
    }
    for (const std::string& value : f.passed_on[i]) {
      if (std::strtod(value.c_str(), nullptr) > 0) return true;  // checked as a number
    }
  }
  return false;
}

// Starts the cluster as parsed, and serves it until it is stopped (or
// until it is ready, with --daemonize).
int RunStart(const StartFlags& f, ClusterOptions& options) {
  using ztask::cluster::PassedOnTo;
  if (RetentionWithoutAFile(f, options)) {
    return Fail("a bound on the finished records needs a database file, not :memory:");
  }
  for (auto [daemon, args] : {std::pair{ztask::cluster::kHub, &options.hub_args},
                              {ztask::cluster::kScheduler, &options.scheduler_args},
                              {ztask::cluster::kController, &options.controller_args},
                              {ztask::cluster::kEngine, &options.engine_args}}) {
    const std::vector<std::string> words = PassedOnTo(daemon, f.passed_on);
    args->insert(args->end(), words.begin(), words.end());
  }
  // With --daemonize the thread that takes stop signals starts in the child
  // (Daemonize): a process must fork without threads to carry on unexeced.
  if (!f.daemonize) ztask::InstallStopSignals();
  auto cluster = ztask::cluster::LocalCluster::Claim(options);
  if (!cluster.ok()) return Fail(cluster.status().message());
  if (f.dry_run) {
    if (options.launcher != "slurm") return Fail("--dry-run goes with --launcher slurm");
    std::printf("%s", (*cluster)->SlurmScript().c_str());
    return 0;
  }
  const ztask::ScopedStopTarget stop_target(cluster->get());
  if (f.daemonize) return Daemonize(**cluster);
  ztask::Status started = (*cluster)->Start();
  if (!started.ok()) return Fail(started.message());
  Announce(**cluster, (*cluster)->dashboard_url());
  (*cluster)->Serve();
  std::printf("cluster stopped\n");
  return 0;
}

Subcommand AddStart(CLI::App& app, ClusterOptions& options) {
  auto f = std::make_shared<StartFlags>();
  auto* start = app.add_subcommand("start", "start hub, scheduler and engines");
  AddShapeFlags(start, options);
  start->add_flag("--daemonize", f->daemonize, "return once the cluster is ready");
  AddSupervisionFlags(start, options);
  AddLauncherFlags(start, options, *f);
  AddSecurityFlags(start, options);
  ztask::cluster::AddEveryPassedFlag(*start, f->passed_on);
  return {start, [f, &options] { return RunStart(*f, options); }};
}

Subcommand AddStop(CLI::App& app, const ClusterOptions& options) {
  auto timeout = std::make_shared<double>(30);
  auto* stop = app.add_subcommand("stop", "stop the cluster in a profile directory");
  stop->add_option("--timeout", *timeout, "seconds to wait for it to stop");
  return {stop, [timeout, &options] {
            ztask::Status s =
                ztask::cluster::LocalCluster::StopRunning(options.profile_dir, *timeout);
            if (!s.ok()) return Fail(s.message());
            std::printf("cluster stopped\n");
            return 0;
          }};
}

Subcommand AddScale(CLI::App& app, const ClusterOptions& options) {
  struct Flags {
    int engines = 0;
    double timeout = 120;
  };
  auto f = std::make_shared<Flags>();
  auto* scale = app.add_subcommand("scale", "grow or shrink the pool of a running cluster");
  scale->add_option("engines", f->engines, "how many engines")
      ->required()
      ->check(ztask::kPositiveNumber);
  scale->add_option("--timeout", f->timeout, "seconds to wait for the pool to reach that size");
  return {scale, [f, &options] {
            ztask::Status s =
                ztask::cluster::LocalCluster::Scale(options.profile_dir, f->engines, f->timeout);
            if (!s.ok()) return Fail(s.message());
            std::printf("%d engines running\n", f->engines);
            return 0;
          }};
}

Subcommand AddEnginesStart(CLI::App& app, const ClusterOptions& options) {
  struct Flags {
    std::string launcher = "local";
    int count = 1;
    std::vector<std::string> hosts;
    double timeout = 120;
  };
  auto f = std::make_shared<Flags>();
  auto* engines = app.add_subcommand("engines", "engines of a running cluster");
  engines->require_subcommand(1);
  auto* start = engines->add_subcommand("start", "add engines to a running cluster");
  start->add_option("--launcher", f->launcher, "local, mpi, ssh or slurm")->capture_default_str();
  start->add_option("-n,--engines", f->count, "how many")->check(ztask::kPositiveNumber);
  start->add_option("--hosts", f->hosts, "ssh: HOST[:COUNT],...")->delimiter(',');
  start->add_option("--timeout", f->timeout, "seconds for them to register");
  return {start, [f, &options] {
            ztask::Status s = ztask::cluster::LocalCluster::AddEngines(
                options.profile_dir, f->launcher, f->count, f->hosts, f->timeout);
            if (!s.ok()) return Fail(s.message());
            std::printf("engines added\n");
            return 0;
          }};
}

Subcommand AddStatus(CLI::App& app, const ClusterOptions& options) {
  auto* status =
      app.add_subcommand("status", "the run report of the cluster in a profile directory");
  return {status, [&options] {
            auto client = ztask::Client::Connect(options.profile_dir);
            if (!client.ok()) return Fail(client.status().message());
            auto report = ztask::cluster::RunReport(**client);
            if (!report.ok()) return Fail(report.status().message());
            std::printf("%s", report->c_str());
            return 0;
          }};
}

int Run(int argc, char** argv) {
  // Its messages (the control socket's drops among them) go to stderr, which
  // a daemonized supervisor points at logs/cluster.log.
  spdlog::set_default_logger(spdlog::stderr_color_st("taskcluster"));
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e taskcluster %l: %v");
  CLI::App app{"taskcluster: start a ztask cluster on this machine, or stop one"};
  app.require_subcommand(1);
  // Global options are read before or after the subcommand (see taskctl).
  app.fallthrough();
  ClusterOptions options;
  ztask::AddProfileFlags(app, &options.profile_dir, "profile directory");
  const Subcommand subcommands[] = {AddStart(app, options), AddStop(app, options),
                                    AddScale(app, options), AddEnginesStart(app, options),
                                    AddStatus(app, options)};
  ztask::AddStandardFlags(app, "taskcluster");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // help, version, completion
    return Fail(ztask::UsageMessage(app, e) + " (see taskcluster --help)");
  }
  for (const Subcommand& sub : subcommands) {
    if (sub.app->parsed()) return sub.run();
  }
  return 2;
}
}  // namespace

int main(int argc, char** argv) {
  // Whatever goes wrong reaches the user as one line, never a trace.
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    return Fail(std::string("internal error: ") + e.what());
  }
}
