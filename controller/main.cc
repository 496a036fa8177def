// taskcontroller: the hub and the scheduler of a cluster in one process,
// each on a thread of its own with its own sockets, as in taskhub and
// taskscheduler; the scheduler's records reach the hub and the hub's
// engine notices reach the scheduler over inproc sockets (no copy, no
// kernel). Peers see the same endpoints in the connection file as with two
// processes. A crash ends both, and both recover as after any kill of the
// two (the scheduler's journal, the hub's file).
#include <pthread.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string_view>
#include <thread>

#include "base/signals.h"
#include "controller/command_line.h"
#include "hub/server.h"
#include "scheduler/server.h"

namespace {

using ztask::hub::HubServer;
using ztask::scheduler::SchedulerServer;

constexpr char kMonitor[] = "inproc://ztask-controller-monitor";
constexpr char kNotifier[] = "inproc://ztask-controller-notifier";

// ThreadSanitizer does not see how libzmq's inproc pipes order a message's
// bytes between the thread that wrote them and the one that reads them
// (libzmq is not built with it): under it the scheduler reaches the hub by
// the endpoints the hub publishes, as taskscheduler does, and the inproc
// link is left to the other builds' tests.
#if defined(__SANITIZE_THREAD__)
constexpr bool kInProcessLink = false;
#else
constexpr bool kInProcessLink = true;
#endif

// The part a thread serves ("hub", "scheduler"), which its log lines name
// after the program's ("taskcontroller hub info: ..."); a thread the
// parts start themselves names none.
thread_local std::string_view log_part;

class PartFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    if (log_part.empty()) return;
    dest.push_back(' ');
    dest.append(log_part.data(), log_part.data() + log_part.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<PartFlag>();
  }
};

void SetLogPattern() {
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<PartFlag>('*').set_pattern("%Y-%m-%d %H:%M:%S.%e taskcontroller%* %l: %v");
  spdlog::set_formatter(std::move(formatter));
}

// A stop signal while the scheduler starts: the hub, and the scheduler's
// waits for it.
class Starting final : public ztask::Stoppable {
 public:
  Starting(HubServer& hub, std::atomic<bool>& scheduler_stop)
      : hub_(hub), scheduler_stop_(scheduler_stop) {}
  void RequestStop() override {
    scheduler_stop_.store(true);
    hub_.RequestStop();
  }

 private:
  HubServer& hub_;
  std::atomic<bool>& scheduler_stop_;
};

// A stop signal once both serve stops both.
class Both final : public ztask::Stoppable {
 public:
  Both(HubServer& hub, SchedulerServer& scheduler) : hub_(hub), scheduler_(scheduler) {}
  void RequestStop() override {
    scheduler_.RequestStop();
    hub_.RequestStop();
  }

 private:
  HubServer& hub_;
  SchedulerServer& scheduler_;
};

}  // namespace

int main(int argc, char** argv) {
  // What it writes (records, journal, logs) holds commands, environments and
  // outputs: for its user only, whoever started it.
  ::umask(077);
  ztask::controller::ControllerFlags flags;
  if (auto code = ztask::controller::ParseControllerFlags({argv + 1, argv + argc}, flags)) {
    return *code;
  }
  ztask::InstallStopSignals();
  spdlog::set_level(spdlog::level::from_str(flags.hub.log_level));
  SetLogPattern();
  log_part = "hub";
  // Each engine holds a connection to the hub and one to the scheduler.
  ztask::hub::PrepareHubProcess(flags.hub.options, 2);
  if (kInProcessLink) {
    flags.hub.options.in_process_monitor = kMonitor;
    flags.hub.options.in_process_notifier = kNotifier;
  }
  auto hub = HubServer::Create(flags.hub.options);
  if (!hub.ok()) {
    std::fprintf(stderr, "taskcontroller: %s\n", hub.status().message().c_str());
    return 2;
  }
  // The hub serves while the scheduler starts: a scheduler that restarts
  // asks it what was in flight, and replays its journal to it. A stop
  // signal meanwhile, or the hub's end (a shutdown), ends those waits.
  std::atomic<bool> hub_ended{false};
  std::atomic<bool> scheduler_stop{false};
  std::atomic<SchedulerServer*> started{nullptr};
  std::thread hub_thread([&] {
    log_part = "hub";
    (*hub)->Run();
    hub_ended.store(true);
    scheduler_stop.store(true);
    if (SchedulerServer* scheduler = started.load()) scheduler->RequestStop();
  });
  ::pthread_setname_np(hub_thread.native_handle(), "hub");
  log_part = "scheduler";
  ztask::Result<std::unique_ptr<SchedulerServer>> scheduler = [&] {
    Starting starting(**hub, scheduler_stop);
    const ztask::ScopedStopTarget stop_both(&starting);
    ztask::scheduler::SchedulerOptions options = flags.scheduler.options;
    if (kInProcessLink) {
      options.hub_context = &(*hub)->context();
      options.hub_monitor = kMonitor;
      options.hub_notifier = kNotifier;
    }
    options.stop = &scheduler_stop;
    return SchedulerServer::Create(options);
  }();
  if (!scheduler.ok()) {
    // Stopped while starting (a signal, or the hub shut down): asked to,
    // not a failure.
    const bool asked = ztask::StopRequested() || hub_ended.load();
    (*hub)->RequestStop();
    hub_thread.join();
    if (asked) return 0;
    std::fprintf(stderr, "taskcontroller: %s\n", scheduler.status().message().c_str());
    return 2;
  }
  int code = 0;
  {
    Both both(**hub, **scheduler);
    const ztask::ScopedStopTarget stop_both(&both);
    started.store(scheduler->get());
    ztask::scheduler::LogServing(flags.scheduler.options, **scheduler);
    (*scheduler)->Run();
    // A scheduler that ended on its own (neither a signal nor the hub's
    // shutdown) is a failure: the supervisor starts the pair again.
    if (!hub_ended.load() && !ztask::StopRequested()) code = 1;
    (*hub)->RequestStop();
    hub_thread.join();
  }
  // The scheduler's hub sockets live in the hub's context: closed first.
  scheduler.value().reset();
  hub.value().reset();
  return code;
}
