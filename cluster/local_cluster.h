// LocalCluster: starts and stops a whole cluster on this machine (hub,
// scheduler, N engines), as `taskcluster start` does, and supervises it
// until asked to stop or until the hub goes (a shutdown request).
//
// One cluster per profile directory: <profile>/cluster.pid holds the
// supervisor's pid under an exclusive lock for as long as it runs.
//
// Thread safety: owned by one thread; RequestStop from any thread (the signal thread).
#ifndef ZTASK_CLUSTER_LOCAL_CLUSTER_H_
#define ZTASK_CLUSTER_LOCAL_CLUSTER_H_

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/signals.h"
#include "cluster/child_process.h"
#include "cluster/launcher.h"
#include "cluster/restart_window.h"
#include "ztask/status.h"
#include "ztask/task.h"

namespace ztask {
class Client;
}

namespace ztask::cluster {

struct ClusterOptions {
  std::filesystem::path profile_dir;  // Default: ~/.ztask/profile_default.
  int engines = 0;                    // 0: the number of cores.
  std::string scheme = "leastload";
  std::string hwm = "auto";            // taskscheduler --hwm
  std::string db;                     // Default: <profile>/tasks.db; or :memory:.
  // "controller": the hub and the scheduler in one process
  // (taskcontroller), supervised as one; "separate": taskhub and
  // taskscheduler, each restarted alone; "auto" (the default): the
  // controller, unless one process could not hold a connection from each
  // engine to both under the open-file limit (Claim decides, and says why
  // in layout_note).
  std::string layout = "auto";
  std::string layout_note;
  std::string ip = "127.0.0.1";       // where every socket binds
  double launch_timeout_s = 30;       // for all engines to register
  // An engine that exits is restarted (same name, so the same id) after a
  // back-off that doubles with each recent restart, at most `max_restarts`
  // times within `restart_window_s`; then it is given up as failed.
  int max_restarts = 3;
  double restart_window_s = 60;
  double restart_backoff_s = 1;
  double monitor_interval_s = 0.1;    // how often engines are checked
  std::filesystem::path bin_dir;      // where taskhub & co. are; default: next to us
  // The program run as each engine (given --profile-dir and --name), e.g. an
  // engine built with the engine library. Default: <bin_dir>/taskengine.
  std::filesystem::path engine_program;
  // How engines are started: "local" (one process each, each supervised) or
  // "mpi" (one `mpiexec -n N`, supervised as a whole: MPI ends every rank
  // when one ends). Default: local.
  std::string launcher = "local";
  // The mpiexec command and extra arguments (a hostfile, say). As root,
  // --allow-run-as-root is added; --oversubscribe always.
  std::string mpiexec = "mpiexec";
  std::vector<std::string> mpi_args;
  // The ssh launcher: "host" or "host:count" entries, the ssh command (split
  // on spaces, e.g. "ssh -p 2222 -i key"), and where the connection file
  // and the engine program are on those hosts (default: the same paths).
  std::vector<std::string> hosts;
  std::string ssh = "ssh";
  std::filesystem::path remote_profile_dir;
  std::filesystem::path remote_engine_program;
  // The slurm launcher: extra #SBATCH options ("--partition=x"), and the
  // sbatch and scancel commands.
  std::vector<std::string> slurm_args;
  std::string sbatch = "sbatch";
  std::string scancel = "scancel";
  // The address written into the connection file when sockets bind to one
  // that others cannot dial (--ip 0.0.0.0). Default: the --ip address.
  std::string location;
  // On loopback, TCP ports instead of Unix sockets in the profile (peers
  // that dial through a tunnel). Implied by `location`.
  bool tcp = false;
  // No key (anyone reaching the ports may run commands), or CurveZMQ on
  // every socket (protocol/security.h). CurveZMQ is also on whenever `ip`
  // is beyond loopback, unless `no_encryption`.
  bool insecure = false;
  bool curve = false;
  bool no_encryption = false;
  // "[ADDR:]PORT" to serve the web dashboard (taskdash) on, supervised
  // like the hub and the scheduler; empty: none. ADDR defaults to
  // 127.0.0.1; any other needs the token in the URL taskdash makes.
  std::string dashboard;
  // Extra flags for the hub, the scheduler (limits) and every engine (limits).
  std::vector<std::string> hub_args;
  std::vector<std::string> scheduler_args;
  std::vector<std::string> controller_args;  // each flag of the two above once
  std::vector<std::string> engine_args;
};

class LocalCluster final : public Stoppable {
 public:
  // Claims the profile (an error when a cluster already runs there).
  static Result<std::unique_ptr<LocalCluster>> Claim(const ClusterOptions& options);
  ~LocalCluster() override;

  // Starts hub, scheduler and engines; returns once every engine registered.
  // On failure everything started is stopped again.
  Status Start();
  // Supervises until RequestStop() or the hub exits when asked to; then
  // stops everything. A hub or scheduler that dies is started again.
  void Serve();
  void RequestStop() override;

  const std::filesystem::path& profile() const { return profile_; }
  std::filesystem::path logs() const { return profile_ / "logs"; }
  int engines() const { return options_.engines; }
  // Why "auto" chose the separate layout ("" when it did not).
  const std::string& layout_note() const { return options_.layout_note; }
  // The dashboard's URL (with its token), once started; empty without one.
  const std::string& dashboard_url() const { return dashboard_url_; }

  // The batch script the slurm launcher submits.
  std::string SlurmScript(int engines, const std::string& name_prefix) const;
  std::string SlurmScript() const { return SlurmScript(options_.engines, ""); }

  // The control socket's requests.
  std::string ScaleTo(int engines);
  std::string Add(const std::string& launcher, int engines, const std::vector<std::string>& hosts);

  // Stops the cluster running in `profile_dir` and waits until it is gone.
  static Status StopRunning(const std::filesystem::path& profile_dir, double timeout_s);
  // Asks the cluster running in `profile_dir` to grow or shrink to `engines`,
  // then waits (up to timeout_s) until that many engines run. A shrink
  // drains: the engines that leave finish their tasks first.
  static Status Scale(const std::filesystem::path& profile_dir, int engines, double timeout_s);
  // Adds `engines` engines to the running cluster with `launcher` (hosts for
  // ssh), and waits (up to timeout_s) until they run.
  static Status AddEngines(const std::filesystem::path& profile_dir, const std::string& launcher,
                           int engines, const std::vector<std::string>& hosts, double timeout_s);

 private:
  LocalCluster(ClusterOptions options, std::filesystem::path profile, int lock_fd);
  struct Supervised {
    std::string name;
    std::vector<std::string> argv;
    std::unique_ptr<ChildProcess> process;  // null while waiting to restart, or failed
    RestartWindow window{0, 0, 0};          // set from the options when planned
    int restarts = 0;
    double restart_at = 0;
    bool failed = false;
    bool retiring = false;  // draining; its exit is the end, not a crash
    std::string prefix;     // a job's engine name prefix (mpi, slurm)
  };

  // `log_since`: the size of its log before it started.
  Status WaitForEndpoint(ChildProcess& process, const char* what, bool scheduler,
                         uintmax_t log_since);
  // What to run: one entry per engine (local, ssh) or one mpiexec (mpi).
  Status PlanEngines();
  // --location: the address written for every endpoint.
  Status WriteLocation();
  // slurm: submits a batch script for `engines` engines named with
  // `prefix`; its job id goes to slurm_jobs_.
  Status SubmitSlurmJob(int engines, const std::string& prefix);
  // ssh: copies the connection file, and only it, to every host.
  Status CopyConnectionFile(const std::vector<std::string>& hosts);
  void Launch(Supervised& engine);
  // Restarts engines that exited, or gives up on them.
  void Supervise(double now);
  // Restarts the hub or the scheduler when it died; false when the cluster
  // is to stop (the hub was shut down, or they keep dying).
  bool KeepServersUp(double now);
  void Report(const Supervised& engine, EngineState state, const std::string& why);
  // The control socket: scale requests from `taskcluster scale`.
  Status OpenControl();
  void ServeControl(std::chrono::microseconds wait);
  // Plans `engines` more with `launcher`, launches what it planned, and
  // reports each engine as starting (`why`): an error message, or "".
  std::string Started(Launcher& launcher, int engines, const std::vector<std::string>& hosts,
                      const std::string& why);
  // For launchers: an engine (or a job of them) to run and supervise, and
  // the name prefix of a new job's engines (empty for the first job).
  void AddPlanned(Supervised planned);
  std::string NextJobPrefix(std::string_view launcher, int* group);
  friend class LocalLauncher;
  friend class SshLauncher;
  friend class MpiLauncher;
  friend class SlurmLauncher;
  // Pids of the running engines on this host, as the hub knows them.
  std::vector<pid_t> LocalEnginePids();
  void StopAll();

  ClusterOptions options_;
  std::unique_ptr<Launcher> launcher_;  // options_.launcher's
  std::filesystem::path profile_;
  int lock_fd_;
  // With the controller layout hub_ is the controller, and scheduler_ null.
  std::unique_ptr<ChildProcess> hub_, scheduler_, dashboard_;
  std::vector<std::string> hub_argv_, scheduler_argv_, dashboard_argv_;
  std::string dashboard_url_;
  // Starts taskdash and waits for the URL it writes.
  Status StartDashboard();
  bool controller() const { return options_.layout == "controller"; }
  RestartWindow server_restarts_;  // of the hub, the scheduler and the dashboard
  // The hub or the scheduler that exited past max_restarts: when it is
  // started again (steady seconds), by name.
  std::map<std::string, double> server_restart_at_;
  std::vector<Supervised> engines_;
  std::unique_ptr<Client> client_;  // to tell the hub of engine states
  struct Control;
  std::unique_ptr<Control> control_;
  int next_engine_index_ = 0;
  std::vector<std::string> slurm_jobs_;  // submitted jobs, cancelled at stop
  int job_groups_ = 0;                   // mpiexec and Slurm jobs started
  std::atomic<bool> stop_{false};
};

}  // namespace ztask::cluster

#endif  // ZTASK_CLUSTER_LOCAL_CLUSTER_H_
