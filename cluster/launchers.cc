// How engines are started: one process each (local), one mpiexec, one ssh
// connection each, or one Slurm job; and what the connection file says for
// engines elsewhere.
#include <unistd.h>

#include <fstream>

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

LocalCluster::Supervised LocalCluster::NewEngine(int index, const std::string& launcher,
                                                 const std::vector<std::string>& hosts) {
  Supervised engine;
  if (launcher == "ssh") {
    // Engines go round the hosts, each host as often as its count says.
    // REQUIRES: every spec was parsed when it came (Claim, Add).
    std::vector<std::string> slots;
    for (const auto& spec : hosts) {
      auto [host, count] = *ParseHostSpec(spec);
      for (int i = 0; i < count; ++i) slots.push_back(host);
    }
    const std::string& host = slots[static_cast<size_t>(index) % slots.size()];
    engine.name = host + "-ssh-" + std::to_string(index);
    engine.argv = SplitWords(options_.ssh);
    engine.argv[0] = Which(engine.argv[0]);
    // -tt: when the connection ends, the remote engine gets a hang-up.
    // ssh joins what follows the host into one line for the remote shell:
    // each word is quoted.
    std::string remote = "exec " + ShellQuote(options_.remote_engine_program.string()) +
                         " --profile-dir " + ShellQuote(options_.remote_profile_dir.string()) +
                         " --name " + ShellQuote(engine.name);
    for (const auto& arg : options_.engine_args) remote += " " + ShellQuote(arg);
    engine.argv.insert(engine.argv.end(), {"-tt", "--", host, remote});
    return engine;
  }
  engine.name = "engine-" + std::to_string(index);
  engine.argv = {options_.engine_program.string(), "--profile-dir", profile_.string(), "--name",
                 engine.name};
  engine.argv.insert(engine.argv.end(), options_.engine_args.begin(), options_.engine_args.end());
  return engine;
}

LocalCluster::Supervised LocalCluster::JobOfEngines(const std::string& launcher, int engines) {
  // The first job's engines are HOST-mpi-RANK; later jobs' get their own
  // prefix, so ranks of two jobs never share a name (and so an id).
  const int group = job_groups_++;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string prefix =
      group == 0 ? "" : std::string(host) + "-" + launcher + std::to_string(group) + "-";
  Supervised job;
  job.name = launcher == "mpi" ? "mpiexec-" + std::to_string(group) : "slurm-" + std::to_string(group);
  if (launcher == "mpi") {
    job.argv = {options_.mpiexec, "-n", std::to_string(engines), "--oversubscribe"};
    if (::geteuid() == 0) job.argv.push_back("--allow-run-as-root");
    job.argv.insert(job.argv.end(), options_.mpi_args.begin(), options_.mpi_args.end());
    job.argv.insert(job.argv.end(),
                    {options_.engine_program.string(), "--profile-dir", profile_.string()});
    if (!prefix.empty()) job.argv.insert(job.argv.end(), {"--name-prefix", prefix});
    job.argv.insert(job.argv.end(), options_.engine_args.begin(), options_.engine_args.end());
  } else {
    job.prefix = prefix;
  }
  return job;
}

Status LocalCluster::PlanEngines() {
  if (options_.launcher == "mpi" || options_.launcher == "slurm") {
    Supervised job = JobOfEngines(options_.launcher, options_.engines);
    if (options_.launcher == "slurm") return SubmitSlurmJob(options_.engines, job.prefix);
    engines_.push_back(std::move(job));
    return Status::Ok();
  }
  if (options_.launcher == "ssh") ZTASK_RETURN_IF_ERROR(CopyConnectionFile(options_.hosts));
  for (int i = 0; i < options_.engines; ++i) {
    engines_.push_back(NewEngine(next_engine_index_++, options_.launcher, options_.hosts));
  }
  return Status::Ok();
}

}  // namespace ztask::cluster
