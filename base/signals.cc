#include "base/signals.h"

#include <atomic>
#include <csignal>

namespace ztask {
namespace {

std::atomic<Stoppable*> g_target{nullptr};
std::atomic<bool> g_requested{false};

void OnSignal(int) {
  g_requested.store(true);
  if (Stoppable* target = g_target.load()) target->RequestStop();
}

}  // namespace

void InstallStopSignals() {
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGHUP, OnSignal);  // the terminal or ssh connection went away
  std::signal(SIGPIPE, SIG_IGN);
}

void SetStopTarget(Stoppable* target) {
  g_target.store(target);
  if (target && g_requested.load()) target->RequestStop();
}

bool StopRequested() { return g_requested.load(); }

}  // namespace ztask
