// How engines are started: one process each (local), one mpiexec, one ssh
// connection each, or one Slurm job; and what the connection file says for
// engines elsewhere.
#include <unistd.h>

#include <fstream>
#include <set>

#include "cluster/launcher.h"
#include "cluster/local_cluster.h"
#include "cluster/util.h"
#include "protocol/connection_file.h"

namespace ztask::cluster {
namespace fs = std::filesystem;

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

Status LocalCluster::CopyConnectionFile(const std::vector<std::string>& hosts) {
  const std::string remote = (options_.remote_profile_dir / protocol::kConnectionFileName).string();
  auto specs = ParseHostSpecs(hosts);
  if (!specs.ok()) return specs.status();
  for (const auto& [host, count] : *specs) {
    std::vector<std::string> argv = SplitWords(options_.ssh);
    argv[0] = Which(argv[0]);
    // The host after "--": ssh takes nothing after it as an option. The
    // remote command is one line for the remote shell, each path quoted.
    const std::string dir = ShellQuote(options_.remote_profile_dir.string());
    const std::string tmp = ShellQuote(remote + ".tmp");
    argv.insert(argv.end(), {"--", host, "umask 077 && mkdir -p " + dir + " && cat > " + tmp +
                                             " && mv " + tmp + " " + ShellQuote(remote)});
    const std::string sh = "exec \"$0\" \"$@\" < " +
                           ShellQuote(protocol::ConnectionFilePath(profile_).string());
    argv.insert(argv.begin(), {"/bin/sh", "-c", sh});
    ChildProcess copy(argv, logs() / "ssh-copy.log");
    if (copy.Wait(std::chrono::seconds(60)) != 0) {
      return Status::Unavailable("could not copy the connection file to " + host + " with '" +
                                 options_.ssh + "'; see " + (logs() / "ssh-copy.log").string());
    }
  }
  return Status::Ok();
}

std::string LocalCluster::SlurmScript(int engines, const std::string& name_prefix) const {
  std::string script =
      "#!/bin/bash\n"
      "# ztask engines for the cluster in " + profile_.string() + "\n"
      "#SBATCH --job-name=ztask-engines\n"
      "#SBATCH --ntasks=" + std::to_string(engines) + "\n"
      "#SBATCH --output=" + (profile_ / "logs" / "slurm-%j.out").string() + "\n";
  // sbatch reads #SBATCH lines itself, word by word, with no shell: an
  // option stays on its line (Claim refuses line breaks in them).
  for (const auto& arg : options_.slurm_args) script += "#SBATCH " + arg + "\n";
  // Each task is one engine, named after its node and SLURM_PROCID; every
  // word quoted for bash.
  script += "exec srun " + ShellQuote(options_.engine_program.string()) + " --profile-dir " +
            ShellQuote(profile_.string());
  if (!name_prefix.empty()) script += " --name-prefix " + ShellQuote(name_prefix);
  for (const auto& arg : options_.engine_args) script += " " + ShellQuote(arg);
  script += "\n";
  return script;
}

Status LocalCluster::SubmitSlurmJob(int engines, const std::string& prefix) {
  const fs::path script = logs() / ("engines-" + std::to_string(job_groups_) + ".sbatch");
  ZTASK_RETURN_IF_ERROR(protocol::WritePrivateFile(script, SlurmScript(engines, prefix)));
  const fs::path out = logs() / "sbatch.out";
  ChildProcess submit({"/bin/sh", "-c", "exec \"$0\" --parsable \"$1\" > \"$2\"",
                       Which(options_.sbatch), script.string(), out.string()},
                      logs() / "sbatch.log");
  const auto code = submit.Wait(std::chrono::seconds(60));
  std::string job;
  std::ifstream in(out);
  std::getline(in, job);
  job = job.substr(0, job.find(';'));  // "id;cluster"
  if (code != 0 || job.empty()) {
    return Status::Unavailable("sbatch did not accept " + script.string() + "; see " +
                               (logs() / "sbatch.log").string());
  }
  std::fprintf(stderr, "taskcluster: engines submitted as Slurm job %s\n", job.c_str());
  slurm_jobs_.push_back(job);
  return Status::Ok();
}

void LocalCluster::AddPlanned(Supervised planned) {
  planned.window = RestartWindow(options_.max_restarts, options_.restart_window_s,
                                 options_.restart_backoff_s);
  engines_.push_back(std::move(planned));
}

// The first job's engines are HOST-LAUNCHER-RANK; later jobs' get their own
// prefix, so ranks of two jobs never share a name (and so an id).
std::string LocalCluster::NextJobPrefix(std::string_view launcher, int* group) {
  *group = job_groups_++;
  if (*group == 0) return {};
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return std::string(host) + "-" + std::string(launcher) + std::to_string(*group) + "-";
}

class LocalLauncher final : public Launcher {
 public:
  std::string_view name() const override { return "local"; }
  Status Prepare(ClusterOptions&) const override { return Status::Ok(); }
  bool scalable() const override { return true; }
  Status Plan(LocalCluster& c, int engines, const std::vector<std::string>&) override {
    for (int i = 0; i < engines; ++i) {
      LocalCluster::Supervised engine;
      engine.name = "engine-" + std::to_string(c.next_engine_index_++);
      engine.argv = {c.options_.engine_program.string(), "--profile-dir", c.profile_.string(),
                     "--name", engine.name};
      engine.argv.insert(engine.argv.end(), c.options_.engine_args.begin(),
                         c.options_.engine_args.end());
      c.AddPlanned(std::move(engine));
    }
    return Status::Ok();
  }
};

class SshLauncher final : public Launcher {
 public:
  std::string_view name() const override { return "ssh"; }
  Status Prepare(ClusterOptions& options) const override {
    if (options.hosts.empty()) {
      return Status::InvalidArgument("the ssh launcher needs --hosts HOST[:COUNT],...");
    }
    auto total = EngineCount(options.engines, options.hosts);
    if (!total.ok()) return total.status();
    options.engines = *total;
    return Status::Ok();
  }
  bool scalable() const override { return true; }
  Result<int> EngineCount(int asked, const std::vector<std::string>& hosts) const override {
    if (hosts.empty()) return asked;
    auto specs = ParseHostSpecs(hosts);
    if (!specs.ok()) return specs.status();
    int total = 0;
    for (const auto& spec : *specs) total += spec.count;
    return total;
  }
  // Engines go round the hosts, each host as often as its count says; the
  // connection file goes to each host once, before its first engine.
  Status Plan(LocalCluster& c, int engines, const std::vector<std::string>& given) override {
    const std::vector<std::string>& hosts = given.empty() ? c.options_.hosts : given;
    if (hosts.empty()) return Status::InvalidArgument("the ssh launcher needs --hosts");
    // Hosts may come over the control socket: checked here, as at start.
    auto specs = ParseHostSpecs(hosts);
    if (!specs.ok()) return specs.status();
    std::vector<std::string> fresh, slots;
    for (const auto& [host, count] : *specs) {
      if (copied_.insert(host).second) fresh.push_back(host);
      for (int i = 0; i < count; ++i) slots.push_back(host);
    }
    if (!fresh.empty()) {
      if (Status copied = c.CopyConnectionFile(fresh); !copied.ok()) {
        for (const auto& host : fresh) copied_.erase(host);
        return copied;
      }
    }
    for (int i = 0; i < engines; ++i) {
      const int index = c.next_engine_index_++;
      const std::string& host = slots[static_cast<size_t>(index) % slots.size()];
      LocalCluster::Supervised engine;
      engine.name = host + "-ssh-" + std::to_string(index);
      engine.argv = SplitWords(c.options_.ssh);
      engine.argv[0] = Which(engine.argv[0]);
      // -tt: when the connection ends, the remote engine gets a hang-up.
      // ssh joins what follows the host into one line for the remote
      // shell: each word is quoted.
      std::string remote = "exec " + ShellQuote(c.options_.remote_engine_program.string()) +
                           " --profile-dir " + ShellQuote(c.options_.remote_profile_dir.string()) +
                           " --name " + ShellQuote(engine.name);
      for (const auto& arg : c.options_.engine_args) remote += " " + ShellQuote(arg);
      engine.argv.insert(engine.argv.end(), {"-tt", "--", host, remote});
      c.AddPlanned(std::move(engine));
    }
    return Status::Ok();
  }

 private:
  std::set<std::string> copied_;  // hosts that have the connection file
};

class MpiLauncher final : public Launcher {
 public:
  std::string_view name() const override { return "mpi"; }
  Status Prepare(ClusterOptions& options) const override { return FindMpiexec(options); }
  bool scalable() const override { return false; }
  Status Plan(LocalCluster& c, int engines, const std::vector<std::string>&) override {
    ZTASK_RETURN_IF_ERROR(FindMpiexec(c.options_));
    int group;
    const std::string prefix = c.NextJobPrefix(name(), &group);
    LocalCluster::Supervised job;
    job.name = "mpiexec-" + std::to_string(group);
    job.prefix = prefix;
    const ClusterOptions& o = c.options_;
    job.argv = {o.mpiexec, "-n", std::to_string(engines), "--oversubscribe"};
    if (::geteuid() == 0) job.argv.push_back("--allow-run-as-root");
    job.argv.insert(job.argv.end(), o.mpi_args.begin(), o.mpi_args.end());
    job.argv.insert(job.argv.end(), {o.engine_program.string(), "--profile-dir", c.profile_.string()});
    if (!prefix.empty()) job.argv.insert(job.argv.end(), {"--name-prefix", prefix});
    job.argv.insert(job.argv.end(), o.engine_args.begin(), o.engine_args.end());
    c.AddPlanned(std::move(job));
    return Status::Ok();
  }

 private:
  // ChildProcess runs argv[0] as a path: mpiexec is found on PATH first.
  static Status FindMpiexec(ClusterOptions& options) {
    const std::string found = Which(options.mpiexec);
    if (::access(found.c_str(), X_OK) != 0) {
      return Status::NotFound("no '" + options.mpiexec +
                              "' on PATH: install Open MPI (Debian: openmpi-bin) or give --mpiexec");
    }
    options.mpiexec = found;
    return Status::Ok();
  }
};

class SlurmLauncher final : public Launcher {
 public:
  std::string_view name() const override { return "slurm"; }
  Status Prepare(ClusterOptions&) const override { return Status::Ok(); }
  bool scalable() const override { return false; }
  // The job runs elsewhere: nothing here to supervise; it is cancelled at stop.
  Status Plan(LocalCluster& c, int engines, const std::vector<std::string>&) override {
    int group;
    const std::string prefix = c.NextJobPrefix(name(), &group);
    return c.SubmitSlurmJob(engines, prefix);
  }
};

std::unique_ptr<Launcher> MakeLauncher(std::string_view name) {
  if (name == "local") return std::make_unique<LocalLauncher>();
  if (name == "ssh") return std::make_unique<SshLauncher>();
  if (name == "mpi") return std::make_unique<MpiLauncher>();
  if (name == "slurm") return std::make_unique<SlurmLauncher>();
  return nullptr;
}

std::string LauncherNames() { return "local, mpi, ssh, slurm"; }

Status LocalCluster::PlanEngines() { return launcher_->Plan(*this, options_.engines, {}); }

}  // namespace ztask::cluster
