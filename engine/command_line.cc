// The engine's flags and Engine::Main (engine/command_line.h).
#include "engine/command_line.h"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "base/signals.h"
#include "base/usage.h"
#include "cluster/passed_flags.h"
#include "protocol/resources.h"

namespace ztask {
namespace engine {

void AddEngineFlags(CLI::App& app, CommandLineOptions* options) {
  EngineOptions& o = options->engine;
  AddProfileFlags(app, &o.profile_dir, "profile directory holding the connection file");
  app.add_option("--name", o.name, "engine name (default HOST-PID, or HOST-mpi-RANK)");
  app.add_option("--name-prefix", o.name_prefix,
                 "under mpiexec or srun: the name is this prefix and the rank");
  // The flags taskcluster passes on are declared once, in its table.
  cluster::AddPassedFlag(app, "--max-output-bytes", o.max_output_bytes)->capture_default_str();
  cluster::AddPassedFlag(app, "--max-result-bytes", o.max_result_bytes)->capture_default_str();
  app.add_option("--python", o.python,
                 "the Python that runs Python function tasks (default $ZTASK_PYTHON, else "
                 "/usr/bin/python3)");
  app.add_option("--python-path", o.python_path,
                 "put first on that Python's PYTHONPATH (default: the ztask package installed "
                 "beside this program, PREFIX/lib/python3/dist-packages)");
  cluster::AddPassedFlag(app, "--slots", o.slots)->capture_default_str();
  cluster::AddPassedFlag(app, "--resource", options->resources);
  app.add_option("--log-level", options->log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
}

Status FinishEngineFlags(CommandLineOptions* options) {
  std::string error;
  for (const std::string& r : options->resources) {
    if (!protocol::ParseResource(r, 1, &options->engine.resources, &error)) {
      return Status::InvalidArgument("--resource " + error);
    }
  }
  if (std::string e = protocol::AmountsError(options->engine.slots, options->engine.resources, 1);
      !e.empty()) {
    return Status::InvalidArgument(e);
  }
  return Status::Ok();
}

}  // namespace engine

int Engine::Main(int argc, char** argv) {
  engine::CommandLineOptions options;
  CLI::App app{"taskengine: runs ztask tasks"};
  engine::AddEngineFlags(app, &options);
  // An engine binary of the user's own answers --version with its own name.
  const std::string program =
      argc > 0 ? std::filesystem::path(argv[0]).filename().string() : "taskengine";
  AddStandardFlags(app, program);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return UsageExit(app, e, program.c_str());
  }
  if (Status s = engine::FinishEngineFlags(&options); !s.ok()) {
    std::fprintf(stderr, "taskengine: %s (see taskengine --help)\n", s.message().c_str());
    return 2;
  }
  InstallStopSignals();
  spdlog::set_level(spdlog::level::from_str(options.log_level));
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e taskengine %l: %v");
  Status status = Run(options.engine);
  if (!status.ok()) {
    std::fprintf(stderr, "taskengine: %s\n", status.message().c_str());
    return 2;
  }
  return 0;
}

}  // namespace ztask
