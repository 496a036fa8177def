// Simulated engines for the end-to-end benchmark: one process holding many
// engines, each as the hub and the scheduler see a real one: its own
// connection to the hub (registration, then heartbeats at its own phase)
// and its own connection to the scheduler (tasks), answering every task at
// once with an empty success. They speak the real protocol (signed, through
// the real hub and scheduler), so a pool of 10,000 engines can be measured
// on one machine. The process waits on its sockets with epoll, as a real
// engine waits on its own, and touches only those that are ready: what it
// costs grows with the tasks it answers, not with the engines it holds.
// A send that fails is counted and said at exit, never ignored.
#ifndef ZTASK_BENCH_SIMULATED_ENGINES_H_
#define ZTASK_BENCH_SIMULATED_ENGINES_H_

#include <string>

namespace ztask::bench {

// Runs `count` engines of the cluster in `profile` until SIGTERM or SIGINT.
// Returns the process exit code: 2 when not every engine registered within
// two minutes, or the profile cannot be read.
int RunSimulatedEngines(const std::string& profile, int count);

}  // namespace ztask::bench

#endif  // ZTASK_BENCH_SIMULATED_ENGINES_H_
