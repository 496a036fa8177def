// Reading a job from the scheduler's batch, and the answers that need no run.
#include "engine/job.h"

#include <algorithm>
#include <utility>

namespace ztask::engine {

Result<Job> ReadJob(std::span<const std::string_view> views,
                    const protocol::DispatchInfo& dispatch) {
  auto header = protocol::DecodeHeader(views[protocol::kFrameHeader]);
  if (!header.ok()) return header.status();
  if (header->type != protocol::MsgType::kTaskRequest) {
    return Status::Malformed("a " + std::string(protocol::MsgTypeName(header->type)) +
                             " where a task_request was expected");
  }
  Job job{std::move(*header), {}, {}, dispatch, {}};
  auto meta = protocol::DecodeBody<protocol::RoutingMeta>(views[protocol::kFrameMeta]);
  auto spec = protocol::DecodeBody<protocol::TaskSpec>(views[protocol::kFrameContent]);
  if (!meta.ok()) {
    job.unreadable = "its metadata: " + meta.status().message();
  } else if (!spec.ok()) {
    job.unreadable = "its body: " + spec.status().message();
  } else {
    job.meta = std::move(*meta);
    job.spec = std::move(*spec);
  }
  return job;
}

int32_t SlotsOf(const Job& job) { return std::max(1, job.meta.slots.value_or(1)); }

const protocol::ResourceMap& ResourcesOf(const Job& job) {
  static const protocol::ResourceMap kNone;
  return job.meta.resources ? *job.meta.resources : kNone;
}

Done NotRunAnswer(const Job& job, int32_t engine_id) {
  Done done{job.header, {false, ErrorType::kNone, engine_id, job.dispatch.attempt}, {}};
  done.meta.not_run = true;
  return done;
}

Done UnsatisfiableAnswer(const Job& job, int32_t engine_id, const std::string& why,
                         int64_t now_wall_us) {
  Done done{job.header, {false, ErrorType::kUnsatisfiable, engine_id, job.dispatch.attempt}, {}};
  done.result.error_message = "engine " + std::to_string(engine_id) + ": the task " + why;
  done.result.started_us = done.result.completed_us = now_wall_us;
  return done;
}

}  // namespace ztask::engine
