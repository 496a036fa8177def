// Simulated engines for the end-to-end benchmark: one process holding many
// engine connections, each registered with the hub, heartbeating, and
// answering every task at once with an empty success. They speak the real
// protocol (signed, through the real hub and scheduler), so a pool of 1,000
// or 10,000 engines can be measured on one machine; what they cost themselves
// is counted in the figures they give.
#ifndef ZTASK_BENCH_SIMULATED_ENGINES_H_
#define ZTASK_BENCH_SIMULATED_ENGINES_H_

#include <string>

namespace ztask::bench {

// Runs `count` engines of the cluster in `profile` until SIGTERM or SIGINT.
// Returns the process exit code.
int RunSimulatedEngines(const std::string& profile, int count);

}  // namespace ztask::bench

#endif  // ZTASK_BENCH_SIMULATED_ENGINES_H_
