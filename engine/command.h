// Runs a command task: argv executed directly (no shell), in its own process
// group, with stdout and stderr captured up to a bound, killed with its whole
// group when its time limit passes.
//
// Must not: decide what the outcome means for the task (engine/task_runner.h
// does). Thread safety: reentrant; RunCommand blocks its caller's thread
// until the command ended, and `running_group` lets another thread kill it.
#ifndef ZTASK_ENGINE_COMMAND_H_
#define ZTASK_ENGINE_COMMAND_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ztask::engine {

struct CommandRequest {
  std::vector<std::string> argv;
  std::string cwd;                           // empty: the engine's
  std::map<std::string, std::string> env;    // added to the engine's environment
  double time_limit_s = 0;                   // 0: none
  size_t max_output_bytes = size_t{1} << 20;
  // When set, holds the command's process group while it runs (0 after), so
  // another thread can kill it.
  std::atomic<int>* running_group = nullptr;
  // Files that get the whole of stdout and stderr (made with their parent
  // directories, replaced when there; relative to cwd). Empty: none. The
  // same path for both gets both, interleaved as read.
  std::string stdout_path, stderr_path;
};

struct CommandOutcome {
  std::string spawn_error;  // non-empty: it never ran (and why)
  int exit_code = -1;       // 128+N when killed by signal N
  bool timed_out = false;
  std::string stdout_text, stderr_text;
  bool stdout_truncated = false, stderr_truncated = false;
};

CommandOutcome RunCommand(const CommandRequest& request);

}  // namespace ztask::engine

#endif  // ZTASK_ENGINE_COMMAND_H_
