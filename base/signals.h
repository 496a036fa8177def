// SIGINT, SIGTERM and SIGHUP for a server process: installed before the server
// exists, so a signal that arrives while it starts is not lost; delivered as
// RequestStop() once it does.
//
// Thread safety: call both from the main thread; the handler is async-signal-safe.
#ifndef ZTASK_BASE_SIGNALS_H_
#define ZTASK_BASE_SIGNALS_H_

namespace ztask {

class Stoppable {
 public:
  virtual ~Stoppable() = default;
  // Must be async-signal-safe.
  virtual void RequestStop() = 0;
};

void InstallStopSignals();
// From now on a signal stops `target` (nullptr: forget it). A signal that
// came earlier stops it at once.
void SetStopTarget(Stoppable* target);
// Whether a stop signal came (for waits before there is a target).
bool StopRequested();

}  // namespace ztask

#endif  // ZTASK_BASE_SIGNALS_H_
