// The one way a ztask process starts another program: fork, then only
// async-signal-safe calls until exec. Everything the child needs (argument
// and environment arrays, descriptors) is made before the fork, because
// another thread of ours may hold the allocator's lock at the moment of it.
// Spawn returns once the program runs, or with why it could not (the child
// reports a failed chdir or exec through a close-on-exec pipe, and is
// reaped). The program starts with no signal blocked and SIGPIPE and
// SIGXFSZ at their defaults, whatever this process set for itself.
//
// Must not: wait for the child, read its output or kill it; that is the
// caller's (cluster/child_process.h, engine/command.cc,
// engine/python_worker.cc). Thread safety: reentrant.
#ifndef ZTASK_BASE_SPAWN_H_
#define ZTASK_BASE_SPAWN_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ztask/status.h"

namespace ztask::base {

struct SpawnOptions {
  // The program's path, used as given (no search of PATH); empty: argv[0].
  std::string program;
  // Its arguments, argv[0] first.
  std::vector<std::string> argv;
  // The whole environment; nullopt inherits this process's.
  std::optional<std::vector<std::string>> env;
  // The child's working directory; empty keeps ours.
  std::string cwd;
  // Descriptors the child gets, as (child fd, our fd); our fds are not
  // closed. Everything else ours is close-on-exec and stays behind.
  std::vector<std::pair<int, int>> fds;
  // /dev/null as its standard input.
  bool null_stdin = false;
  // A process group of its own, so that a kill of the group takes what it
  // starts too. Default: yes.
  bool own_group = true;
  // Killed (SIGKILL) when the thread that spawned it ends, however it ends.
  bool dies_with_parent = false;
};

// The child's pid once its program runs; otherwise a Status saying what
// could not run and why (e.g. "cannot run '/bin/x' in /tmp: No such file or
// directory").
Result<pid_t> Spawn(const SpawnOptions& options);

}  // namespace ztask::base

#endif  // ZTASK_BASE_SPAWN_H_
