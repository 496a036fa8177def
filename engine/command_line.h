// The engine's command line: the flags of `taskengine` (and of every engine
// binary built with the engine library, through Engine::Main), declared on
// a CLI::App into one struct, so that another program that starts engines
// (taskcluster) can offer the same flags with the same words and checks:
//
//   --profile-dir DIR       the profile holding the connection file
//                           (default ~/.ztask/profile_default, or
//                           $ZTASK_PROFILE_DIR where the program reads it)
//   --name NAME             the engine's name; restarted under the same
//                           name it keeps its id (default HOST-PID, or
//                           HOST-mpi-RANK / HOST-slurm-RANK under a launcher)
//   --name-prefix PREFIX    under mpiexec or srun: the name is PREFIX+RANK
//   --slots N               tasks it runs at once, each holding the slots it
//                           asks (default 1)
//   --resource NAME=COUNT   a countable resource (gpus=4: units 0-3); may be
//                           repeated
//   --max-output-bytes N    stdout and stderr kept per task (default 1 MiB)
//   --max-result-bytes N    largest result; a larger one fails the task
//                           (default 16 MiB)
//   --python PATH           the Python of Python function tasks (default
//                           $ZTASK_PYTHON, else /usr/bin/python3)
//   --python-path DIR       put first on that Python's PYTHONPATH (default:
//                           the ztask package installed beside the program)
//   --log-level LEVEL       trace, debug, info, warn, error (default info)
//   --version, --help       print and exit 0
//
// Must not: start an engine or read the cluster's files (Engine::Run
// does). Thread safety: none needed; used on one thread before the engine
// starts.
#ifndef ZTASK_ENGINE_COMMAND_LINE_H_
#define ZTASK_ENGINE_COMMAND_LINE_H_

#include <string>
#include <vector>

#include "ztask/engine.h"
#include "ztask/status.h"

namespace CLI {
class App;
}

namespace ztask::engine {

// Everything an engine reads from its command line.
struct CommandLineOptions {
  // Every flag but --resource and --log-level, one to one.
  EngineOptions engine;
  // --resource, as given (NAME=COUNT); FinishEngineFlags reads them into
  // engine.resources. Default: none.
  std::vector<std::string> resources;
  // --log-level. Default: info.
  std::string log_level = "info";
};

// Declares the engine's flags (all of the list above but --version and
// --help, which base/usage.h's AddStandardFlags adds) on `app`, writing into
// `*options`. REQUIRES: `options` outlives the parse.
void AddEngineFlags(CLI::App& app, CommandLineOptions* options);

// After a parse: reads the resources into options->engine and checks the
// amounts. On failure, a message for "PROGRAM: MESSAGE (see PROGRAM --help)".
Status FinishEngineFlags(CommandLineOptions* options);

}  // namespace ztask::engine

#endif  // ZTASK_ENGINE_COMMAND_LINE_H_
