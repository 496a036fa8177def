// The vocabulary of tasks shared by clients, scheduler, engines and hub:
// dependency sets and their settings, and the error types a task can end
// with. Plain values; safe to copy and share read-only across threads.
#ifndef ZTASK_TASK_H_
#define ZTASK_TASK_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "ztask/task_id.h"

namespace ztask {

// How many of a dependency set's tasks must reach an accepted outcome.
enum class DependencyMode : uint8_t { kAll = 0, kAny = 1 };

// Which outcome of a dependency counts as met.
enum class AcceptedOutcome : uint8_t { kSuccess = 0, kFailure = 1, kEither = 2 };

// A set of task ids with its settings: `after` (time) or `follow` (place).
struct DependencySet {
  std::vector<TaskId> ids;
  DependencyMode mode = DependencyMode::kAll;
  AcceptedOutcome outcome = AcceptedOutcome::kSuccess;

  bool empty() const { return ids.empty(); }
  friend bool operator==(const DependencySet&, const DependencySet&) = default;
};

// Every way a task can fail. The wire carries the name (ErrorTypeName).
enum class ErrorType : uint8_t {
  kNone = 0,
  kTaskFailed,            // it ran and failed (non-zero exit, exception...)
  kImpossibleDependency,  // a dependency can no longer be met
  kInvalidDependency,     // depends on itself or on an id never seen
  kTaskTimeout,           // not started within its timeout
  kTimeLimitExceeded,     // ran longer than its time limit
  kEngineError,           // its engine was lost while it ran
  kTaskAborted,           // aborted before it started
  kTaskRejected,          // over a limit of the cluster (size, dependencies, queue)
  kBadTask,               // its body or its result breaks the limits on values, or
                          // cannot be read: never retried
  kUnsatisfiable,         // needs more slots or resources than any engine it may use has
};

std::string_view ErrorTypeName(ErrorType type);
// The inverse of ErrorTypeName; nullopt for an unknown name.
std::optional<ErrorType> ParseErrorType(std::string_view name);

// Where a task is in its life, as the hub records it. The wire carries the
// name (TaskStateName): "waiting", "running", "ok", "error"; "" before
// anything is known of it (kNone).
enum class TaskState : uint8_t { kNone = 0, kWaiting, kRunning, kOk, kError };

std::string_view TaskStateName(TaskState state);
// The inverse of TaskStateName; nullopt for an unknown name.
std::optional<TaskState> ParseTaskState(std::string_view name);
// Finished: ok or error, never to change again.
inline bool IsFinal(TaskState state) { return state == TaskState::kOk || state == TaskState::kError; }

// Where an engine is in its life, as the hub lists it and its supervisor
// reports it. The wire carries the name (EngineStateName): "starting",
// "running", "restarting", "draining", "failed", "stopped".
enum class EngineState : uint8_t { kStarting = 0, kRunning, kRestarting, kDraining, kFailed, kStopped };

std::string_view EngineStateName(EngineState state);
// The inverse of EngineStateName; nullopt for an unknown name.
std::optional<EngineState> ParseEngineState(std::string_view name);
// Gone for good: retired, or given up on by its supervisor.
inline bool IsGone(EngineState state) {
  return state == EngineState::kFailed || state == EngineState::kStopped;
}

std::string_view DependencyModeName(DependencyMode mode);
std::optional<DependencyMode> ParseDependencyMode(std::string_view name);
std::string_view AcceptedOutcomeName(AcceptedOutcome outcome);
std::optional<AcceptedOutcome> ParseAcceptedOutcome(std::string_view name);

}  // namespace ztask

#endif  // ZTASK_TASK_H_
