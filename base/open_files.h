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

}  // namespace ztask::base

#endif  // ZTASK_BASE_OPEN_FILES_H_
