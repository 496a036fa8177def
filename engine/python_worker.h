// Runs Python function tasks in a long-lived Python process of the engine's
// own: started on the first Python task (`python3 -c "from ztask_worker
// import main; main()"`, with python/ on its PYTHONPATH), reused for the
// next ones, and started again after it died or was killed at a time limit.
// Starting Python and importing cloudpickle costs 50-70 ms here; a task in a
// worker already running costs tens of µs.
//
// The engine and its worker speak over two pipes: each message a msgpack
// map after its length (4 bytes, little-endian). To the worker: the task's
// pickled function and arguments, its id, the engine's id, the attempt, the
// limits on its result and on what it prints.
// From it: first a hello, then for each task `status` ("ok", "error",
// "unmet", "too_large"), the pickled result, or the exception's name, text
// and traceback, and what the task printed. The worker keeps what a task
// prints to the output limit and pickles a result only within the result
// limit ("too_large" and its size past it), so its memory stays near the
// limits whatever a task prints or returns. The worker's own stdout and
// stderr are the engine's (its log).
//
// Thread safety: owned by the thread of its TaskRunner; Kill() may be called
// from another thread.
#ifndef ZTASK_ENGINE_PYTHON_WORKER_H_
#define ZTASK_ENGINE_PYTHON_WORKER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "engine/bounded_answer.h"

namespace ztask::engine {

struct PythonTask {
  std::string payload;  // the pickled {"fn", "args", "kwargs"} or {"fn", "chunk"}
  std::string task_id;  // hex
  int32_t engine_id = -1;
  int32_t attempt = 1;
  double time_limit_s = 0;  // 0: none
  size_t max_output_bytes = size_t{1} << 20;
  size_t max_result_bytes = size_t{16} << 20;
  // Set in os.environ while it runs (ZTASK_SLOTS, ZTASK_RESOURCE_GPUS...).
  std::map<std::string, std::string> env;
};

struct PythonOutcome {
  enum class Kind {
    kOk,          // result: the pickled value
    kError,       // the function raised: ename, evalue, traceback
    kUnmet,       // its require/depend check failed here: evalue says why
    kTimedOut,    // killed at its time limit
    kWorkerLost,  // the worker could not start, or died: evalue says why
    kTooLarge,    // its result was over the limit (evalue says how large):
                  // dropped as it came, the worker kept
  };
  Kind kind = Kind::kWorkerLost;
  std::string result;
  std::string ename, evalue, traceback;
  std::string stdout_text, stderr_text;
  bool stdout_truncated = false, stderr_truncated = false;
};

class PythonWorker {
 public:
  // `interpreter`: the Python to run (a path, or a name looked up on PATH).
  // `python_path`: put first on the worker's PYTHONPATH when not empty.
  PythonWorker(std::string interpreter, std::string python_path);
  ~PythonWorker();
  PythonWorker(const PythonWorker&) = delete;
  PythonWorker& operator=(const PythonWorker&) = delete;

  // Runs one task, starting the worker first when none runs.
  PythonOutcome Run(const PythonTask& task);
  // Kills the worker, if one runs (the engine stops).
  void Kill();

 private:
  std::string Start();  // "" or why the worker could not start
  void Reap(std::string* why);
  // One message to or from the worker before `deadline_us` (steady µs; 0:
  // none).
  // A message over `max_bytes` is walked as it comes into *bounded, each
  // value within `bounds` (kTooLarge; without bounds, kClosed): the
  // engine's memory stays bounded and the worker is kept.
  enum class IoStatus { kOk, kTimedOut, kClosed, kTooLarge };
  IoStatus WriteMessage(std::string_view data, int64_t deadline_us);
  IoStatus ReadMessage(std::string* out, int64_t deadline_us, size_t max_bytes = kMaxHelloBytes,
                       const AnswerBounds* bounds = nullptr, BoundedOutcome* bounded = nullptr);
  IoStatus Fill(int64_t deadline_us);
  static void Parse(const std::string& reply, const PythonTask& task, PythonOutcome* outcome);
  static constexpr size_t kMaxHelloBytes = size_t{1} << 20;

  std::string interpreter_;
  std::string python_path_;
  std::atomic<pid_t> pid_{-1};
  int to_worker_ = -1;
  int from_worker_ = -1;
  // Read from the worker and not taken yet: inbox_ from inbox_at_ on.
  std::string inbox_;
  size_t inbox_at_ = 0;
};

}  // namespace ztask::engine

#endif  // ZTASK_ENGINE_PYTHON_WORKER_H_
