// The limit on a process's open files: a hub or a scheduler holds one
// descriptor per engine connected to it, so it is what caps how many
// engines one cluster can hold.
#ifndef ZTASK_BASE_OPEN_FILES_H_
#define ZTASK_BASE_OPEN_FILES_H_

#include <cstdint>

namespace ztask::base {

// Raises this process's soft limit on open files to its hard limit (what
// any process may do for itself) and returns the limit now in force.
uint64_t RaiseOpenFileLimit();

// Raises the hard limit too, to at least `wanted` (only a privileged
// process may), then the soft one. Returns the limit now in force, which
// is below `wanted` when the hard limit could not be raised.
uint64_t RaiseOpenFileLimitTo(uint64_t wanted);

// The descriptors a server process keeps for itself (its files, its
// sockets) beside those of its engines' connections.
inline constexpr uint64_t kServerOwnFiles = 256;

// How many engines a process can serve under `open_files` when it holds
// `per_engine` descriptors for each (2 when it is the hub and the
// scheduler both).
inline uint64_t EnginesWithin(uint64_t open_files, uint64_t per_engine) {
  return open_files > kServerOwnFiles ? (open_files - kServerOwnFiles) / per_engine : 0;
}

// Whether one process can serve `engines` as both the hub and the
// scheduler (two descriptors an engine) under `open_files`: the rule of
// the default layout (taskcluster start --layout auto).
inline bool OneServerProcessHolds(uint64_t engines, uint64_t open_files) {
  return EnginesWithin(open_files, 2) >= engines;
}

}  // namespace ztask::base

#endif  // ZTASK_BASE_OPEN_FILES_H_
