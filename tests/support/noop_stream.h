// NoOpStream: no-op tasks pushed through a running cluster by the client
// library, one chunk in flight while the one before is answered, with every
// process's resident memory read (from /proc) each so many tasks. The one
// loop that the retention tests (tests/integration) and the soak
// (bench/soak.cc) run, so that a figure of one means the same in the other.
//
// Must not: start or stop a cluster (the caller's), or judge what it
// measured beyond Grew (the caller asserts or reports).
//
// Thread safety: RunNoOps on the client's thread; the rest is plain data.
#ifndef ZTASK_TESTS_SUPPORT_NOOP_STREAM_H_
#define ZTASK_TESTS_SUPPORT_NOOP_STREAM_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tests/support/proc_status.h"
#include "ztask/client.h"
#include "ztask/status.h"

namespace ztask::testing {

// The processes of one cluster.
struct ClusterPids {
  pid_t hub = -1, scheduler = -1;
  std::vector<pid_t> engines;
  // Found in `profile`'s cluster; false (and what is missing in *why) when
  // a daemon or one of `engines` engines is not there.
  bool Find(const std::string& profile, size_t engines, std::string* why);
};

// What one look at the cluster saw, `tasks` answered so far.
struct StreamSample {
  size_t tasks = 0;
  double seconds = 0;      // since the stream started
  double tasks_per_s = 0;  // since the sample before (or the start)
  // Resident bytes; engine: the largest engine's; client: this process's.
  int64_t hub = 0, scheduler = 0, engine = 0, client = 0;
};

struct NoOpRun {
  size_t tasks = 1000000;
  size_t chunk = 50000;         // submitted at once
  size_t sample_every = 250000;  // a multiple of chunk
  // For one chunk's replies: below the tests' CTest limits, so that a
  // stream that stops says so (and how much disk the profile has left).
  double reply_timeout_s = 120;
  std::string profile;  // the cluster's profile directory, named on a failure
};

// Runs `run.tasks` no-ops through `client`, calling `sampled` each
// run.sample_every tasks answered (and at the end). *first and *last get
// the first and the last task's ids. Fails as the client does, or when a
// chunk is not answered within its time.
Status RunNoOps(Client& client, const NoOpRun& run, const ClusterPids& pids,
                const std::function<void(const StreamSample&)>& sampled, TaskId* first,
                TaskId* last);

// Whether any process grew from `then` to `now` by more than `fraction` of
// what it held then plus `slack_bytes` (plus `scheduler_slack_bytes` for
// the scheduler); *why names them, with the figures.
bool Grew(const StreamSample& then, const StreamSample& now, double fraction, int64_t slack_bytes,
          std::string* why, int64_t scheduler_slack_bytes = 0);

// What a scheduler may keep of the batches the hub has not acknowledged
// (scheduler/hub_link.h): the hub holds a new task's record back for up to
// a second, so a stream fills this at its own pace, at any point of a run.
inline constexpr int64_t kSchedulerKeepsForTheHub = int64_t{128} << 20;

}  // namespace ztask::testing

#endif  // ZTASK_TESTS_SUPPORT_NOOP_STREAM_H_
