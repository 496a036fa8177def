// The engine library: build your own engine binary by registering C++
// functions by name, then calling Main(). Clients call them with
// `taskctl submit --fn NAME --args JSON` or Client::Submit. Arguments and
// results travel as msgpack and reach your function as JSON values.
//
//   int main(int argc, char** argv) {
//     ztask::Engine engine;
//     ztask::RegisterBuiltins(engine);
//     engine.Register("square", [](const ztask::Value& x, const ztask::TaskContext&) {
//       return ztask::Value(x.get<double>() * x.get<double>());
//     });
//     return engine.Main(argc, argv);
//   }
//
// Thread safety: call Register before Run or Main, never while they run. Run
// (and Main) blocks the thread that calls it until the engine stops; that
// thread keeps the hub's heartbeats, so a task never delays them. A
// process runs one engine at a time (SIGINT/SIGTERM stop the latest). With
// one slot (the default) every function runs on one runner thread of the
// engine, the same for every task, one task at a time; never on the thread
// that called Run. With --slots N it runs on any of N runner threads of a
// pool, reused from task to task: up to N tasks run at
// once (fewer when tasks ask several slots), so one function may be called
// from several threads at once, and thread-local state outlives a task.
// A TaskContext is valid during its call only.
#ifndef ZTASK_ENGINE_H_
#define ZTASK_ENGINE_H_

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "ztask/status.h"
#include "ztask/task_id.h"

namespace ztask {

using Value = nlohmann::json;

// What a running function may ask about its task.
struct TaskContext {
  TaskId task_id;
  int32_t engine_id = -1;
  int32_t attempt = 1;
  int32_t num_engines = 0;
  int64_t deadline_us = 0;  // steady-clock µs when its time limit ends; 0: none
  // The slots it holds, and the indices of the resource units it was given
  // ({"gpus": {1, 3}}).
  int32_t slots = 1;
  std::map<std::string, std::vector<int64_t>> resources;

  // True once the task's time limit has passed; long functions should check
  // and throw TimeLimitReached.
  bool OutOfTime() const;
};

// Thrown by a function that stops because its time limit passed: the task
// fails with TimeLimitExceeded. Any other exception fails it with TaskFailed
// and the exception's message.
class TimeLimitReached : public std::runtime_error {
 public:
  TimeLimitReached() : std::runtime_error("time limit reached") {}
};

// Thrown by a function that cannot run on this engine (a library or a
// device it needs is missing here): the scheduler sends the task to another
// engine, without using a retry, and fails it with ImpossibleDependency once
// every engine it may use has answered so. The message says why.
class UnmetDependency : public std::runtime_error {
 public:
  explicit UnmetDependency(const std::string& why) : std::runtime_error(why) {}
};

// The exit code by which a command says that it cannot run on this engine
// (as UnmetDependency does); commands see it as $ZTASK_UNMET_EXIT_CODE.
inline constexpr int kUnmetExitCode = 75;

using Function = std::function<Value(const Value& args, const TaskContext& context)>;

struct EngineOptions {
  // Where the connection file is. Default: ~/.ztask/profile_default.
  std::filesystem::path profile_dir;
  // The engine's name; an engine restarted under the same name keeps its id.
  // Default: HOST-PID.
  std::string name;
  // Under mpiexec or srun, with no name: the name is this prefix and the
  // rank. Default: HOST-mpi- or HOST-slurm-.
  std::string name_prefix;
  // Most bytes of stdout and of stderr kept per command. Default: 1 MiB.
  size_t max_output_bytes = size_t{1} << 20;
  // Most bytes of a function's result (msgpack); a larger one fails the
  // task. Default: 16 MiB.
  size_t max_result_bytes = size_t{16} << 20;
  // How long to wait for the hub to answer the registration. Default: 10 s.
  int register_timeout_ms = 10000;
  // The Python that runs Python function tasks (a path, or a name looked up
  // on PATH). Default: $ZTASK_PYTHON, else /usr/bin/python3.
  std::string python;
  // Put first on that Python's PYTHONPATH, so that it finds the ztask
  // package. Default: the package of the source tree this engine was built
  // from, when it is there.
  std::string python_path;
  // Tasks it runs at once, each holding the slots it asks (taskctl submit
  // --slots). Default: 1, one at a time.
  int32_t slots = 1;
  // Countable resources by name: gpus=4 is four units, indices 0-3, each
  // given to one task at a time (ZTASK_RESOURCE_GPUS, CUDA_VISIBLE_DEVICES).
  std::map<std::string, int64_t> resources;
};

class Engine {
 public:
  Engine();
  ~Engine();

  // REQUIRES: called before Run/Main; a name registered twice keeps the last.
  void Register(const std::string& name, Function function);

  // Registers with the cluster and serves tasks until SIGINT/SIGTERM or the
  // cluster goes away. Returns an error when it cannot start.
  Status Run(const EngineOptions& options);
  // Parses the command line into EngineOptions, then Run(). Its flags
  // (`taskengine --help`): --profile-dir, --name,
  // --name-prefix, --slots, --resource NAME=COUNT (repeated),
  // --max-output-bytes, --max-result-bytes, --python, --python-path,
  // --log-level; --version and --help print and return 0. Returns the exit
  // code: 0, or 2 with one line on stderr for a command line it cannot use
  // or a cluster it cannot join.
  int Main(int argc, char** argv);

 private:
  std::map<std::string, Function> functions_;
};

// noop (returns null), echo (returns its arguments), sleep (seconds, as a
// number or [number]), sum (adds numbers and nested arrays of numbers), fail
// (fails with its argument as the message).
void RegisterBuiltins(Engine& engine);

}  // namespace ztask

#endif  // ZTASK_ENGINE_H_
