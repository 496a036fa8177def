// Runs one task at a time and says what it answers: a command (in its own
// process group, killed whole at its time limit), a registered C++ function
// (its arguments, or its inputs' results asked of the hub), or a Python
// function (in this runner's Python worker). The answer is ok, failed with
// one error type and a message, unmet here, or too large; it never throws.
// Each runner keeps what a running task needs of its own: the process
// group of its command, a Python worker, a socket for the hub's queries.
//
// Must not: touch the scheduler socket, queue or order tasks, decide
// whether a task may start (engine/engine_core.h does). Thread safety: owned
// by the one thread that runs its tasks (the worker thread of an engine of
// one slot, or a thread of the pool); Kill() may be called from any thread.
#ifndef ZTASK_ENGINE_TASK_RUNNER_H_
#define ZTASK_ENGINE_TASK_RUNNER_H_

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "engine/capacity.h"
#include "engine/job.h"
#include "engine/python_worker.h"
#include "protocol/connection_file.h"
#include "protocol/signer.h"
#include "ztask/engine.h"

namespace ztask::engine {

// What every runner of an engine shares, read-only while tasks run.
struct RunnerSetup {
  const EngineOptions* options = nullptr;
  const std::map<std::string, Function>* functions = nullptr;
  zmq::context_t* context = nullptr;
  const protocol::ConnectionInfo* info = nullptr;
  const protocol::Signer* signer = nullptr;
  std::string uuid;
  std::optional<int32_t> mpi_rank;  // from Open MPI's or Slurm's environment
};

class TaskRunner {
 public:
  explicit TaskRunner(const RunnerSetup& setup) : setup_(setup) {}
  ~TaskRunner();
  TaskRunner(const TaskRunner&) = delete;
  TaskRunner& operator=(const TaskRunner&) = delete;

  // Runs `job`, holding `grant`, as engine `engine_id`; returns its answer,
  // started and completed dates set.
  Done Run(const Job& job, const Grant& grant, int32_t engine_id);
  // The command and the Python worker of the task running here die now.
  void Kill();
  // Closes the hub query socket. REQUIRES: the owner thread, before it ends
  // (a socket left open would block the context's destruction).
  void CloseSockets() { query_.reset(); }

 private:
  class Answer;
  void RunCommandTask(const Job& job, const Grant& grant, int32_t engine_id, Answer& answer);
  void RunFunction(const Job& job, const Grant& grant, int32_t engine_id, Answer& answer);
  void RunPython(const Job& job, const Grant& grant, int32_t engine_id, Answer& answer);
  Result<Value> ResultsOf(const std::vector<TaskId>& ids);
  Result<std::vector<protocol::TaskRecord>> AskRecords(const std::vector<TaskId>& ids,
                                                       int32_t wait_ms);

  RunnerSetup setup_;
  std::atomic<int> group_{0};
  std::unique_ptr<PythonWorker> python_;
  std::atomic<PythonWorker*> python_for_kill_{nullptr};
  std::unique_ptr<zmq::socket_t> query_;
};

}  // namespace ztask::engine

#endif  // ZTASK_ENGINE_TASK_RUNNER_H_
