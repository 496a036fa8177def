// The floor: a bare ZeroMQ relay in the shape of the cluster (client DEALER
// -> ROUTER/ROUTER broker that parses nothing -> echo workers -> back), run
// in one process, so that every end-to-end figure can be given as a fraction
// of what ZeroMQ itself allows on the same machine in the same run.
#ifndef ZTASK_BENCH_RELAY_H_
#define ZTASK_BENCH_RELAY_H_

#include <vector>

namespace ztask::bench {

struct Latency {
  double p50 = 0, p99 = 0, max = 0;
};
// p50, p99 and max of round trips in µs.
Latency Summarize(std::vector<double> us);

struct RelayResult {
  double tasks_per_s = 0;
  Latency rtt;
};
// `tasks` tasks of 32 bytes through `workers` echo workers, `per_message`
// of them in each message, with up to 1,000 tasks in flight, then
// `latency_tasks` one at a time. Nothing is signed or parsed: what ZeroMQ
// alone costs.
RelayResult RunRelay(int workers, int tasks, int latency_tasks, int per_message = 1);

}  // namespace ztask::bench

#endif  // ZTASK_BENCH_RELAY_H_
