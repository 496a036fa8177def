#include "base/signals.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <mutex>
#include <thread>

namespace ztask {
namespace {

std::mutex g_mutex;
Stoppable* g_target = nullptr;  // guarded by g_mutex
std::atomic<bool> g_requested{false};
std::atomic<pid_t> g_installed_in{0};

sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);  // the terminal or ssh connection went away
  return set;
}

void TakeSignals() {
  const sigset_t set = StopSignals();
  for (;;) {
    int signal = 0;
    if (sigwait(&set, &signal) != 0) continue;
    g_requested.store(true);
    std::lock_guard lock(g_mutex);
    if (g_target) g_target->RequestStop();
  }
}

}  // namespace

void InstallStopSignals() {
  const pid_t self = ::getpid();
  if (g_installed_in.exchange(self) == self) return;
  std::signal(SIGPIPE, SIG_IGN);
  const sigset_t set = StopSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread(TakeSignals).detach();
}

void SetStopTarget(Stoppable* target) {
  std::lock_guard lock(g_mutex);
  g_target = target;
  if (target && g_requested.load()) target->RequestStop();
}

bool StopRequested() { return g_requested.load(); }

}  // namespace ztask
