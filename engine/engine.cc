// ztask::Engine: puts an engine's rooms together and runs its loop thread.
// Threads: the thread that calls Run becomes the loop thread (the hub
// socket, heartbeats: engine/hub_link.h); the worker thread owns the
// scheduler socket (engine/scheduler_link.h); the tasks run on the runner
// threads of a pool, one per slot (engine/pool.h). The logic of
// what starts and what is answered is the core's (engine/engine_core.h);
// the command line is engine/command_line.cc's.
//
// Must not: decide anything about tasks or the hub's answers here: this file
// only starts, wires, turns and stops.
#include "ztask/engine.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <zmq.hpp>

#include "base/clock.h"
#include "base/reactor.h"
#include "base/signals.h"
#include "engine/engine_core.h"
#include "engine/hub_link.h"
#include "engine/python_path.h"
#include "engine/scheduler_link.h"
#include "engine/task_runner.h"
#include "protocol/connection_file.h"
#include "protocol/resources.h"
#include "protocol/security.h"
#include "protocol/signer.h"
#include "protocol/wire.h"

namespace ztask {
namespace {

std::string Hostname() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

// Started by mpiexec or srun: the rank names the engine across restarts of
// the job. Sets `rank` and, with no name given, the name.
void NameEngine(EngineOptions& options, std::optional<int32_t>& rank) {
  std::string launcher;
  if (const char* r = std::getenv("OMPI_COMM_WORLD_RANK")) {
    rank = std::atoi(r);
    launcher = "mpi";
  } else if (const char* proc = std::getenv("SLURM_PROCID")) {
    rank = std::atoi(proc);
    launcher = "slurm";
  }
  if (!options.name.empty()) return;
  const std::string prefix =
      options.name_prefix.empty() ? Hostname() + "-" + launcher + "-" : options.name_prefix;
  options.name =
      rank ? prefix + std::to_string(*rank) : Hostname() + "-" + std::to_string(::getpid());
}

}  // namespace

class EngineLoop final : public Stoppable {
 public:
  EngineLoop(const EngineOptions& options, const std::map<std::string, Function>& functions,
             protocol::ConnectionInfo info)
      : options_(options),
        info_(std::move(info)),
        signer_(info_.key),
        setup_{&options_, &functions, &context_, &info_, &signer_, TaskId::Random().ToHex(), {}},
        core_({setup_.uuid, options_.slots, options_.resources}, &clock_),
        wake_(context_, zmq::socket_type::pair) {}

  Status Start() {
    NameEngine(options_, setup_.mpi_rank);
    const std::string wake_endpoint = "inproc://worker-" + setup_.uuid;
    wake_.bind(wake_endpoint);
    hub_ = std::make_unique<engine::HubLink>(setup_, core_, stop_);
    scheduler_ = std::make_unique<engine::SchedulerLink>(setup_, core_, stop_);
    ZTASK_RETURN_IF_ERROR(hub_->Connect());
    ZTASK_RETURN_IF_ERROR(scheduler_->Connect(wake_endpoint));
    return scheduler_->Start();
  }

  // The loop thread: heartbeats and the hub's answers, and the worker's
  // words.
  void Run() {
    base::Reactor reactor;
    reactor.Add(hub_->socket(), [this] {
      hub_->OnReadable([this] {
        wake_.send(zmq::buffer(engine::SchedulerLink::kReady), zmq::send_flags::dontwait);
      });
    });
    reactor.Add(wake_, [this] {
      // "retire" (stop_ is set).
      protocol::Frames frames;
      while (protocol::TryReceive(wake_, frames)) {
      }
    });
    reactor.Add(stopping_.fd(), [] {});  // RequestStop: stop_ is set
    while (!stop_.load()) {
      const int64_t now = base::MonotonicMicros();
      if (now >= hub_->NextBeatUs()) hub_->Beat();
      const int64_t wait_us = std::max<int64_t>(0, hub_->NextBeatUs() - now);
      if (!reactor.Turn(std::chrono::microseconds(wait_us)).ok()) break;
    }
    Stop();
  }

  void RequestStop() override {
    stop_.store(true);
    stopping_.Wake();
  }

 private:
  void Stop() {
    hub_->Unregister();
    // A command still running dies with the engine (its task is failed over
    // by the scheduler when the hub reports the engine gone). Stop first, so
    // that no runner starts another task once the running ones are killed.
    stop_.store(true);
    scheduler_->KillTasks();
    wake_.send(zmq::str_buffer("stop"), zmq::send_flags::dontwait);
    scheduler_->Join();
    spdlog::info("engine {} stopped", core_.engine_id());
  }

  EngineOptions options_;
  protocol::ConnectionInfo info_;
  protocol::Signer signer_;
  zmq::context_t context_{1};
  engine::RunnerSetup setup_;
  base::SystemClock clock_;
  engine::EngineCore core_;
  // The loop thread's end of the inproc pair with the worker thread.
  zmq::socket_t wake_;
  std::atomic<bool> stop_{false};
  base::Wakeup stopping_;  // RequestStop, from the signal thread
  // Declared last: closed before the context.
  std::unique_ptr<engine::HubLink> hub_;
  std::unique_ptr<engine::SchedulerLink> scheduler_;
};

Engine::Engine() = default;
Engine::~Engine() = default;

void Engine::Register(const std::string& name, Function function) {
  functions_[name] = std::move(function);
}

Status Engine::Run(const EngineOptions& options) {
  const auto profile =
      options.profile_dir.empty() ? protocol::DefaultProfileDir() : options.profile_dir;
  auto info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile));
  if (!info.ok()) return info.status();
  ZTASK_RETURN_IF_ERROR(protocol::CheckAuthenticated(*info, /*allow_insecure=*/true,
                                                     protocol::ConnectionFilePath(profile)));
  if (info->hub.registration.empty() || info->scheduler.engine.empty()) {
    return Status::Unavailable("the cluster in " + profile.string() +
                               " has not started its hub and scheduler yet");
  }
  // A Python worker that died leaves a closed pipe: writing to it must be
  // an error to handle, not a signal that ends the engine (also when a
  // program runs the engine library without Main).
  ::signal(SIGPIPE, SIG_IGN);
  if (std::string e = protocol::AmountsError(options.slots, options.resources, 1); !e.empty()) {
    return Status::InvalidArgument("this engine's " + e);
  }
  EngineOptions with_defaults = options;
  if (with_defaults.python.empty()) {
    const char* env = std::getenv("ZTASK_PYTHON");
    with_defaults.python = env && *env                                   ? env
                           : std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3"
                                                                         : "python3";
  }
  if (with_defaults.python_path.empty()) with_defaults.python_path = engine::BundledPythonPath();
  EngineLoop loop(with_defaults, functions_, *info);
  const ScopedStopTarget stop_target(&loop);
  Status started = loop.Start();
  if (started.ok()) loop.Run();
  return started;
}

}  // namespace ztask
