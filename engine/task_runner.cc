// Running one task and what it answers (engine/task_runner.h).
#include "engine/task_runner.h"

#include <signal.h>

#include <cstdio>
#include <utility>

#include "base/clock.h"
#include "engine/command.h"
#include "protocol/placeholders.h"
#include "protocol/request.h"
#include "protocol/security.h"
#include "protocol/wire.h"

namespace ztask {

bool TaskContext::OutOfTime() const {
  return deadline_us > 0 && base::MonotonicMicros() >= deadline_us;
}

namespace engine {
namespace {

std::string SecondsText(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", s);
  return text;
}

// An output file's path with its placeholders replaced.
std::string ExpandOutputPath(const std::optional<std::string>& pattern, const Job& job) {
  if (!pattern) return {};
  return protocol::ExpandPlaceholders(
      *pattern, {{"TASK_ID", job.header.id.ToHex()},
                 {"JOB", job.spec.job.value_or("")},
                 {"ARRAY_INDEX", job.spec.array_index ? std::to_string(*job.spec.array_index)
                                                       : std::string()}});
}

}  // namespace

// The answer being made: ok until it fails or is unmet.
class TaskRunner::Answer {
 public:
  explicit Answer(Done& done) : done_(done) {}
  void Fail(ErrorType type, std::string message) {
    done_.meta.ok = false;
    done_.meta.error_type = type;
    done_.result.error_message = std::move(message);
  }
  // The task cannot run here: the scheduler tries another engine.
  void Unmet(std::string why) {
    done_.meta.ok = false;
    done_.meta.unmet = true;
    done_.result.error_message = std::move(why);
  }
  // Its result, not a fault of the engine: the same anywhere, not retried.
  void FailEverywhere(std::string message) {
    done_.meta.no_retry = true;
    Fail(ErrorType::kTaskFailed, std::move(message));
  }
  Done& done() { return done_; }

 private:
  Done& done_;
};

TaskRunner::~TaskRunner() = default;

void TaskRunner::Kill() {
  if (const int g = group_.load(); g > 0) ::kill(-g, SIGKILL);
  if (PythonWorker* p = python_for_kill_.load()) p->Kill();
}

Done TaskRunner::Run(const Job& job, const Grant& grant, int32_t engine_id) {
  Done done{job.header, {true, ErrorType::kNone, engine_id, job.dispatch.attempt}, {}};
  done.result.started_us = base::WallMicros();
  const int64_t began_us = base::MonotonicMicros();
  Answer answer(done);
  if (!job.unreadable.empty()) {
    answer.Fail(ErrorType::kBadTask, "engine " + std::to_string(engine_id) +
                                         " cannot read the task: " + job.unreadable);
  } else if (const auto kind = protocol::ParseTaskKind(job.spec.kind); !kind) {
    answer.Fail(ErrorType::kTaskFailed, "unknown task kind '" + job.spec.kind + "'");
  } else {
    switch (*kind) {
      case protocol::TaskKind::kCommand:
        RunCommandTask(job, grant, engine_id, answer);
        break;
      case protocol::TaskKind::kFunction:
        RunFunction(job, grant, engine_id, answer);
        break;
      case protocol::TaskKind::kPython:
        RunPython(job, grant, engine_id, answer);
        break;
    }
  }
  done.result.completed_us = base::WallMicros();
  done.meta.run_us = base::MonotonicMicros() - began_us;
  return done;
}

void TaskRunner::RunCommandTask(const Job& job, const Grant& grant, int32_t engine_id,
                                Answer& answer) {
  const EngineOptions& options = *setup_.options;
  CommandRequest request{job.spec.argv,          job.spec.cwd,
                         job.spec.env,           job.meta.time_limit_s,
                         options.max_output_bytes, &group_,
                         ExpandOutputPath(job.spec.stdout_path, job),
                         ExpandOutputPath(job.spec.stderr_path, job)};
  request.env["ZTASK_TASK_ID"] = job.header.id.ToHex();
  request.env["ZTASK_ENGINE_ID"] = std::to_string(engine_id);
  request.env["ZTASK_ATTEMPT"] = std::to_string(job.dispatch.attempt);
  request.env["ZTASK_NUM_ENGINES"] = std::to_string(job.dispatch.engines);
  request.env["ZTASK_UNMET_EXIT_CODE"] = std::to_string(kUnmetExitCode);
  for (auto& [name, value] : grant.Environment()) request.env[name] = std::move(value);
  if (setup_.mpi_rank) request.env["ZTASK_MPI_RANK"] = std::to_string(*setup_.mpi_rank);
  if (job.spec.job) request.env["ZTASK_JOB"] = *job.spec.job;
  if (job.spec.array_index) request.env["ZTASK_ARRAY_INDEX"] = std::to_string(*job.spec.array_index);
  CommandOutcome outcome = RunCommand(request);
  protocol::TaskResult& result = answer.done().result;
  result.stdout_text = std::move(outcome.stdout_text);
  result.stderr_text = std::move(outcome.stderr_text);
  result.stdout_truncated = outcome.stdout_truncated;
  result.stderr_truncated = outcome.stderr_truncated;
  if (!outcome.spawn_error.empty()) return answer.Fail(ErrorType::kTaskFailed, outcome.spawn_error);
  result.exit_code = outcome.exit_code;
  if (outcome.timed_out) {
    answer.Fail(ErrorType::kTimeLimitExceeded,
                "killed after its time limit of " + SecondsText(job.meta.time_limit_s));
  } else if (outcome.exit_code == kUnmetExitCode) {
    answer.Unmet("the command exited with code " + std::to_string(kUnmetExitCode) +
                 " (its dependencies are unmet here)");
  } else if (outcome.exit_code != 0) {
    answer.Fail(ErrorType::kTaskFailed, "exited with code " + std::to_string(outcome.exit_code));
  }
}

void TaskRunner::RunFunction(const Job& job, const Grant& grant, int32_t engine_id,
                             Answer& answer) {
  auto it = setup_.functions->find(job.spec.function);
  if (it == setup_.functions->end()) {
    return answer.Fail(ErrorType::kTaskFailed, "no function named '" + job.spec.function +
                                                   "' on engine " + std::to_string(engine_id));
  }
  TaskContext context{job.header.id, engine_id,   job.dispatch.attempt, job.dispatch.engines, 0,
                      grant.slots,   grant.units};
  if (job.meta.time_limit_s > 0) {
    context.deadline_us =
        base::MonotonicMicros() + static_cast<int64_t>(job.meta.time_limit_s * 1e6);
  }
  const size_t limit = setup_.options->max_result_bytes;
  try {
    Value args;
    if (job.spec.pass_results.value_or(false)) {
      auto results = ResultsOf(job.meta.after.ids);
      if (!results.ok()) return answer.Fail(ErrorType::kTaskFailed, results.status().message());
      args = std::move(*results);
    } else if (!job.spec.args.bytes.empty()) {
      args = Value::from_msgpack(job.spec.args.bytes);
    }
    std::vector<uint8_t> packed = Value::to_msgpack(it->second(args, context));
    if (packed.size() > limit) {
      return answer.FailEverywhere("its result is " + std::to_string(packed.size()) +
                                   " bytes, over the engine's limit of " + std::to_string(limit) +
                                   " (taskengine --max-result-bytes)");
    }
    std::string& bytes = answer.done().result.result.bytes;
    bytes.assign(packed.begin(), packed.end());
    // What no process could read is not sent: the task fails, recorded.
    if (Status s = protocol::CheckValue(bytes); !s.ok()) {
      bytes.clear();
      return answer.Fail(ErrorType::kBadTask,
                         "its result breaks the limits on values: " + s.message());
    }
  } catch (const UnmetDependency& e) {
    answer.Unmet(e.what());
  } catch (const TimeLimitReached&) {
    answer.Fail(ErrorType::kTimeLimitExceeded,
                "stopped at its time limit of " + SecondsText(job.meta.time_limit_s));
  } catch (const std::exception& e) {
    answer.Fail(ErrorType::kTaskFailed, e.what());
  }
}

// A Python function task, in this runner's Python worker. Its arguments are
// {"pickle": bytes}; so is its result.
void TaskRunner::RunPython(const Job& job, const Grant& grant, int32_t engine_id,
                           Answer& answer) {
  const EngineOptions& options = *setup_.options;
  auto payload = protocol::PickledPayload(job.spec.args.bytes);
  if (!payload.ok()) {
    return answer.Fail(ErrorType::kBadTask, "a Python task whose arguments are not {pickle: bytes}: " +
                                                payload.status().message());
  }
  if (!python_) {
    python_ = std::make_unique<PythonWorker>(options.python, options.python_path);
    python_for_kill_.store(python_.get());
  }
  PythonTask task{std::move(*payload),     job.header.id.ToHex(),    engine_id,
                  job.dispatch.attempt,    job.meta.time_limit_s,    options.max_output_bytes,
                  options.max_result_bytes, grant.Environment()};
  PythonOutcome outcome = python_->Run(task);
  protocol::TaskResult& result = answer.done().result;
  result.stdout_text = std::move(outcome.stdout_text);
  result.stderr_text = std::move(outcome.stderr_text);
  result.stdout_truncated = outcome.stdout_truncated;
  result.stderr_truncated = outcome.stderr_truncated;
  using Kind = PythonOutcome::Kind;
  switch (outcome.kind) {
    case Kind::kOk:
      result.result.bytes = protocol::PickledValue(outcome.result);
      if (result.result.bytes.size() > options.max_result_bytes) {
        result.result.bytes.clear();
        return answer.FailEverywhere("its result is over the engine's limit of " +
                                     std::to_string(options.max_result_bytes) +
                                     " bytes (taskengine --max-result-bytes)");
      }
      return;
    case Kind::kError:
      result.result.bytes =
          protocol::RemoteException(outcome.ename, outcome.evalue, outcome.traceback);
      return answer.Fail(ErrorType::kTaskFailed, outcome.ename + ": " + outcome.evalue);
    case Kind::kUnmet:
      return answer.Unmet(outcome.evalue);
    case Kind::kTimedOut:
      return answer.Fail(ErrorType::kTimeLimitExceeded,
                         "killed after its time limit of " + SecondsText(job.meta.time_limit_s) +
                             " (the engine's Python worker is started again)");
    case Kind::kWorkerLost:
      return answer.Fail(ErrorType::kEngineError,
                         "engine " + std::to_string(engine_id) + ": " + outcome.evalue);
    case Kind::kTooLarge:
      return answer.FailEverywhere(outcome.evalue);
  }
}

// The results of `ids`, in order, from the hub. The scheduler may start
// this task a moment before the hub has recorded its inputs' outcomes, so
// the hub is asked to answer once they are final.
Result<Value> TaskRunner::ResultsOf(const std::vector<TaskId>& ids) {
  if (!query_) {
    query_ = std::make_unique<zmq::socket_t>(*setup_.context, zmq::socket_type::dealer);
    query_->set(zmq::sockopt::linger, 0);
    protocol::SecureClient(*query_, *setup_.info);
    query_->connect(setup_.info->hub.query);
  }
  // One request: the hub answers once every record is final, or after 10 s.
  auto records = AskRecords(ids, 10'000);
  if (!records.ok()) return records.status();
  std::map<TaskId, const protocol::TaskRecord*> by_id;
  for (const auto& r : *records) by_id[r.id] = &r;
  Value out = Value::array();
  for (const TaskId& id : ids) {
    auto it = by_id.find(id);
    if (it == by_id.end() || !IsFinal(it->second->state)) {
      return Status::Unavailable("the hub did not have the results of this task's dependencies");
    }
    const auto& bytes = it->second->result.bytes;
    out.push_back(bytes.empty() ? Value() : Value::from_msgpack(bytes));
  }
  return out;
}

// The records of `ids`, once all are final or `wait_ms` passed.
Result<std::vector<protocol::TaskRecord>> TaskRunner::AskRecords(const std::vector<TaskId>& ids,
                                                                 int32_t wait_ms) {
  protocol::Header header{TaskId::Random(), protocol::MsgType::kResultRequest, setup_.uuid,
                          base::WallMicros()};
  protocol::TaskIdList request{ids, std::nullopt, std::nullopt, "final", wait_ms};
  protocol::AskOptions options;
  options.timeout = std::chrono::milliseconds(int64_t{wait_ms} + 5000);
  auto reply =
      protocol::Ask<protocol::MsgType::kResultReply>(*query_, *setup_.signer, header, request, options);
  if (!reply.ok()) return Status::Unavailable("the hub did not answer this engine's query");
  return std::move(reply->content.records);
}

}  // namespace engine
}  // namespace ztask
