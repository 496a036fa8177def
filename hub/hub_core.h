// HubCore: the hub's decisions about engines and the scheduler's monitor,
// with no I/O. Events go in, decoded (an engine registers, beats, says
// goodbye; a supervisor reports on an engine; the scheduler says a task was
// submitted, assigned or ended; the time passes; a write of the store
// succeeded or failed); actions come out (HubActions: the answer to the
// engine, notices for the scheduler, events for the stream, the tasks whose
// records changed, lines for the log). The clock is injected, so tests drive
// it in microseconds with a fake one.
//
// It owns the registry of engines (registry.h) and the activity
// (activity.h), and applies the monitor's messages to the store's records
// (store.h). It must not touch a socket, encode a message, log or write
// the store's file: the server (server.cc, intake.cc, queries.cc) decodes
// what came, hands it here and carries out what comes out.
//
// The monitor may repeat itself: a message that changes no record (the
// store says it is old) makes no action.
//
// Thread safety: owned by the hub's loop thread.
#ifndef ZTASK_HUB_HUB_CORE_H_
#define ZTASK_HUB_HUB_CORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "hub/activity.h"
#include "hub/registry.h"
#include "hub/store.h"
#include "protocol/messages.h"
#include "ztask/status.h"

namespace ztask::hub {

struct HubCoreOptions {
  // Engines heartbeat this often, and are lost after `heartbeat_misses`
  // periods of silence; the scheduler's notices are repeated every period.
  // With many engines the period stretches (HeartbeatMs). Defaults: 1000
  // ms, 3.
  int heartbeat_ms = 1000;
  int heartbeat_misses = 3;
  // Engines registered at once; more are refused with a reason.
  // Default: 100000.
  size_t max_engines = 100000;
};

// A notice to the scheduler on the notifier.
struct Notice {
  // kEngineRegistered (with `info`), kEngineUnregistered or kEngineDraining
  // (with `ref`).
  protocol::MsgType type;
  protocol::EngineInfo info;
  protocol::EngineRef ref;
};

struct LogLine {
  enum class Level : uint8_t { kInfo, kWarning, kError };
  Level level;
  std::string text;
};

// What the server does after an event, each list in order. Reused from one
// event to the next (Clear), so that steady intake allocates nothing.
struct HubActions {
  // The answer to the engine whose message it was: a registration_reply,
  // or its heartbeat echoed.
  std::optional<protocol::RegistrationReply> registration_reply;
  std::optional<protocol::HeartbeatBody> heartbeat;
  std::vector<Notice> notices;
  // Dated and numbered; made only while someone listens (SetListening).
  std::vector<protocol::Event> events;
  // Tasks whose records changed, and whether the change made them final:
  // what the waits held for them may answer.
  std::vector<std::pair<TaskId, bool>> noted;
  std::vector<LogLine> log;

  void Clear() {
    registration_reply.reset();
    heartbeat.reset();
    notices.clear();
    events.clear();
    noted.clear();
    log.clear();
  }
};

class HubCore {
 public:
  // `store` and `clock` outlive the core.
  HubCore(HubCoreOptions options, TaskStore* store, base::Clock* clock)
      : options_(options), store_(store), clock_(clock), heartbeat_ms_(options.heartbeat_ms) {}

  // ---- engines ------------------------------------------------------------
  // Answered with a registration_reply: an id, or a refusal past
  // max_engines (unless the name is registered: a restart). An engine
  // registered under the same name before is gone (its old life).
  void Register(const protocol::RegistrationRequest& request, HubActions* out);
  // Echoed while the engine is registered; otherwise answered with a
  // registration_reply that tells it to register again.
  void Heartbeat(const protocol::EngineRef& ref, HubActions* out);
  void Unregister(const protocol::EngineRef& ref, HubActions* out);
  // A supervisor's report: a draining engine is announced; one that
  // restarts or failed is gone at once (its process ended).
  void EngineReported(const protocol::EngineStateReport& report, HubActions* out);

  // ---- the scheduler's monitor --------------------------------------------
  // A task whose metadata or body cannot be read is recorded all the same
  // (without them): every task accepted has a record.
  // `hold_since_us` > 0: the record may be held back from the file (the
  // scheduler keeps it until acknowledged; store.h).
  void Submitted(const protocol::Header& request, const Result<protocol::RoutingMeta>& meta,
                 const Result<protocol::TaskSpec>& spec, KeptRequest request_frames,
                 int64_t hold_since_us, HubActions* out);
  void Assigned(const TaskId& id, const protocol::Assignment& assignment, HubActions* out);
  // An outcome whose result cannot be read is recorded as the task's
  // BadTask error: it is never lost for its body.
  void Outcome(const TaskId& id, protocol::OutcomeMeta meta,
               Result<protocol::TaskResult> result, HubActions* out);
  void SchedulerStats(const protocol::SchedulerStats& stats) {
    activity_.Scheduler(stats, clock_->MonotonicMicros());
  }

  // ---- the time, the store, the listeners ---------------------------------
  // The heartbeat period engines are told now: heartbeat_ms, stretched so
  // that all the engines registered together send at most
  // kMostHeartbeatsPerSecond. It only grows while the hub runs, so that no
  // engine still beating at a longer period it was told is taken for lost.
  static constexpr int kMostHeartbeatsPerSecond = 2000;
  int HeartbeatMs() const { return heartbeat_ms_; }
  // Engines silent for HeartbeatMs() × heartbeat_misses are gone (looked
  // for four times a period; time between two ticks beyond a quarter of
  // that wait is not counted: the hub did not run); every
  // heartbeat period the live and draining engines are announced again
  // (notices are idempotent: a scheduler that started late learns them).
  void Tick(HubActions* out);
  // What a write of the store came to: a failure is logged and announced
  // once until a write succeeds again.
  void Flushed(const Status& status, HubActions* out);
  // Whether anyone subscribes to the event stream: events are made only
  // then.
  void SetListening(bool listening) { listening_ = listening; }

  const EngineRegistry& registry() const { return registry_; }
  const Activity& activity() const { return activity_; }
  uint64_t refused_registrations() const { return refused_registrations_; }

 private:
  void EngineGone(const protocol::EngineRef& ref, const std::string& why, HubActions* out);
  // An event of `kind`, dated and numbered, or null while nobody listens.
  protocol::Event* NewEvent(protocol::EventKind kind, HubActions* out);
  void Log(LogLine::Level level, std::string text, HubActions* out) {
    out->log.push_back({level, std::move(text)});
  }
  void Announce(HubActions* out);

  HubCoreOptions options_;
  TaskStore* store_;
  base::Clock* clock_;
  EngineRegistry registry_;
  Activity activity_;
  bool listening_ = false;
  int64_t events_made_ = 0;
  int64_t next_announce_us_ = 0;
  int64_t next_expiry_look_us_ = 0;
  int64_t last_tick_us_ = 0;  // 0: no tick yet
  int heartbeat_ms_;  // HeartbeatMs()
  uint64_t refused_registrations_ = 0;
  bool flush_failing_ = false;
};

}  // namespace ztask::hub

#endif  // ZTASK_HUB_HUB_CORE_H_
