// How engines start: one interface, one class per way. local runs one
// process per engine here; ssh one `ssh -tt` per engine on other hosts; mpi
// one mpiexec for a job of engines; slurm one batch job of engines under
// srun. The cluster supervises whatever a launcher planned.
#ifndef ZTASK_CLUSTER_LAUNCHER_H_
#define ZTASK_CLUSTER_LAUNCHER_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ztask/status.h"

namespace ztask::cluster {

struct ClusterOptions;
class LocalCluster;

class Launcher {
 public:
  virtual ~Launcher() = default;
  virtual std::string_view name() const = 0;
  // At start, before anything runs: checks and completes the options (the
  // ssh launcher's engine count comes from its hosts; mpiexec is looked
  // up on PATH).
  virtual Status Prepare(ClusterOptions& options) const = 0;
  // Whether each engine is a process of its own, so that the pool grows
  // and shrinks one engine at a time; otherwise the launcher starts jobs
  // of engines, and only adds more.
  virtual bool scalable() const = 0;
  // How many engines a request for `asked` on `hosts` makes (the ssh
  // launcher's hosts say it themselves).
  virtual Result<int> EngineCount(int asked, const std::vector<std::string>& hosts) const {
    (void)hosts;
    return asked;
  }
  // Plans `engines` more engines in `cluster` (on `hosts` where that
  // matters; empty: those given at start): what the cluster is to run and
  // supervise, or a job submitted elsewhere.
  virtual Status Plan(LocalCluster& cluster, int engines, const std::vector<std::string>& hosts) = 0;
};

// The launcher of this name, or null.
std::unique_ptr<Launcher> MakeLauncher(std::string_view name);
// "local, mpi, ssh, slurm".
std::string LauncherNames();

}  // namespace ztask::cluster

#endif  // ZTASK_CLUSTER_LAUNCHER_H_
