// A task as the engine holds it (Job: read from the scheduler's batch) and
// its answer (Done: what goes back in the reply), and the answers that need
// no run: "not run" (sent ahead behind a task that did not succeed here, or
// held while the hub had removed this engine) and "unsatisfiable" (it asks
// more than this engine has). Reading a job is decoding only.
//
// Must not: run, send or queue anything. Thread safety: plain values; a Job
// or Done belongs to the thread that holds it.
#ifndef ZTASK_ENGINE_JOB_H_
#define ZTASK_ENGINE_JOB_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/codec.h"
#include "protocol/messages.h"
#include "ztask/status.h"

namespace ztask::engine {

struct Job {
  protocol::Header header;
  protocol::RoutingMeta meta;
  protocol::TaskSpec spec;
  protocol::DispatchInfo dispatch;
  // Why the task cannot be read, or "": such a job is answered BadTask.
  std::string unreadable;
};

struct Done {
  protocol::Header request;
  protocol::ReplyMeta meta;
  protocol::TaskResult result;
};

// A task of a batch from the scheduler (whose signature covers it). Once
// its header is read it is a job, answered like any other: a body that
// cannot be read (beyond the limits on values, say) makes a job that fails
// with BadTask when its turn comes. Only what cannot be answered (no valid
// header) is an error here.
Result<Job> ReadJob(std::span<const std::string_view> views,
                    const protocol::DispatchInfo& dispatch);

// What a task holds while it runs (an unreadable one: one slot; it is
// answered BadTask).
int32_t SlotsOf(const Job& job);
const protocol::ResourceMap& ResourcesOf(const Job& job);

// The answer of a task not started here: the scheduler puts it back to wait
// as if never sent (or takes it as late), its retries untouched.
Done NotRunAnswer(const Job& job, int32_t engine_id);
// The answer of a task this engine could never hold (`why` says what it
// lacks), dated `now_wall_us`.
Done UnsatisfiableAnswer(const Job& job, int32_t engine_id, const std::string& why,
                         int64_t now_wall_us);

}  // namespace ztask::engine

#endif  // ZTASK_ENGINE_JOB_H_
