// Names of the task vocabulary (include/ztask/task.h) and TaskId's forms.
#include "ztask/task.h"

#include <pthread.h>
#include <sodium.h>

#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstring>
#include <exception>

#include "base/clock.h"
#include "protocol/messages.h"
#include "ztask/task_id.h"

namespace ztask {
namespace {

constexpr std::array<std::string_view, 11> kErrorNames = {"",
                                                         "TaskFailed",
                                                         "ImpossibleDependency",
                                                         "InvalidDependency",
                                                         "TaskTimeout",
                                                         "TimeLimitExceeded",
                                                         "EngineError",
                                                         "TaskAborted",
                                                         "TaskRejected",
                                                         "BadTask",
                                                         "Unsatisfiable"};

// One load and a byte swap where the machine is little-endian.
uint64_t LoadBigEndian(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap64(v);
  return v;
}

void StoreBigEndian(uint64_t v, char* p) {
  if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap64(v);
  std::memcpy(p, &v, sizeof v);
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The value of the enum E whose name in `names` (indexed by value, from
// `first`) is `name`.
template <class E, size_t N>
std::optional<E> ValueNamed(const std::array<std::string_view, N>& names, std::string_view name,
                            size_t first = 0) {
  for (size_t i = first; i < N; ++i) {
    if (names[i] == name) return static_cast<E>(i);
  }
  return std::nullopt;
}

}  // namespace

std::string_view ErrorTypeName(ErrorType type) { return kErrorNames[static_cast<size_t>(type)]; }

std::optional<ErrorType> ParseErrorType(std::string_view name) {
  return ValueNamed<ErrorType>(kErrorNames, name, /*first=*/1);  // kNone has no name
}

constexpr std::array<std::string_view, 5> kStateNames = {"", "waiting", "running", "ok", "error"};

std::string_view TaskStateName(TaskState state) { return kStateNames[static_cast<size_t>(state)]; }

std::optional<TaskState> ParseTaskState(std::string_view name) {
  return ValueNamed<TaskState>(kStateNames, name);
}

constexpr std::array<std::string_view, 6> kEngineStateNames = {"starting", "running", "restarting",
                                                               "draining", "failed",  "stopped"};

std::string_view EngineStateName(EngineState state) {
  return kEngineStateNames[static_cast<size_t>(state)];
}

std::optional<EngineState> ParseEngineState(std::string_view name) {
  return ValueNamed<EngineState>(kEngineStateNames, name);
}

namespace protocol {

constexpr std::array<std::string_view, 3> kTaskKindNames = {"command", "function", "python"};

std::string_view TaskKindName(TaskKind kind) { return kTaskKindNames[static_cast<size_t>(kind)]; }

std::optional<TaskKind> ParseTaskKind(std::string_view name) {
  return ValueNamed<TaskKind>(kTaskKindNames, name);
}

constexpr std::array<std::string_view, 9> kEventKindNames = {
    "engine_registered", "engine_unregistered", "engine_state",  "task_submitted", "task_assigned",
    "task_finished",     "task_returned",       "task_retried",  "store_error"};

std::string_view EventKindName(EventKind kind) {
  return kEventKindNames[static_cast<size_t>(kind)];
}

std::optional<EventKind> ParseEventKind(std::string_view name) {
  return ValueNamed<EventKind>(kEventKindNames, name);
}

static_assert(EventStatusOf(EngineState::kStopped) == EventStatus::kStopped);

constexpr std::array<std::string_view, 9> kEventStatusNames = {
    "", "ok", "error", "starting", "running", "restarting", "draining", "failed", "stopped"};

std::string_view EventStatusName(EventStatus status) {
  return kEventStatusNames[static_cast<size_t>(status)];
}

std::optional<EventStatus> ParseEventStatus(std::string_view name) {
  return ValueNamed<EventStatus>(kEventStatusNames, name);
}

}  // namespace protocol

std::string_view DependencyModeName(DependencyMode mode) {
  return mode == DependencyMode::kAll ? "all" : "any";
}

std::optional<DependencyMode> ParseDependencyMode(std::string_view name) {
  if (name == "all") return DependencyMode::kAll;
  if (name == "any") return DependencyMode::kAny;
  return std::nullopt;
}

std::string_view AcceptedOutcomeName(AcceptedOutcome outcome) {
  switch (outcome) {
    case AcceptedOutcome::kSuccess:
      return "success";
    case AcceptedOutcome::kFailure:
      return "failure";
    case AcceptedOutcome::kEither:
      return "either";
  }
  return "success";
}

std::optional<AcceptedOutcome> ParseAcceptedOutcome(std::string_view name) {
  if (name == "success") return AcceptedOutcome::kSuccess;
  if (name == "failure") return AcceptedOutcome::kFailure;
  if (name == "either") return AcceptedOutcome::kEither;
  return std::nullopt;
}

// Ids come from the operating system's random source 256 at a time: one
// system call per id was a visible share of an engine's time per task. A
// forked child must not hand out its parent's ids: each fork starts a new
// generation, and a thread refills its buffer when the generation changed.
namespace {

std::atomic<uint64_t> fork_generation{1};

struct RandomBuffer {
  unsigned char bytes[4096];
  size_t used = sizeof bytes;
  uint64_t generation = 0;
};

}  // namespace

TaskId TaskId::Random() {
  static const bool ready = [] {
    if (sodium_init() < 0) return false;
    ::pthread_atfork(nullptr, nullptr, [] { fork_generation.fetch_add(1); });
    return true;
  }();
  if (!ready) std::terminate();  // no randomness: ids could collide
  thread_local RandomBuffer buffer;
  const uint64_t generation = fork_generation.load(std::memory_order_relaxed);
  if (buffer.used + 16 > sizeof buffer.bytes || buffer.generation != generation) {
    randombytes_buf(buffer.bytes, sizeof buffer.bytes);
    buffer.used = 0;
    buffer.generation = generation;
  }
  const char* bytes = reinterpret_cast<const char*>(buffer.bytes + buffer.used);
  buffer.used += 16;
  const TaskId id = FromBytes({bytes, 16});
  sodium_memzero(buffer.bytes + buffer.used - 16, 16);  // handed out: not kept
  return id;
}

TaskId TaskId::New() {
  const auto ms = static_cast<uint64_t>(base::WallMicros() / 1000);
  TaskId id = Random();
  id.hi = (ms << 16) | (id.hi & 0xffff);
  return id;
}

TaskId TaskId::FromBytes(std::string_view bytes) {
  return TaskId{LoadBigEndian(bytes.data()), LoadBigEndian(bytes.data() + 8)};
}

void TaskId::ToBytes(char out[16]) const {
  StoreBigEndian(hi, out);
  StoreBigEndian(lo, out + 8);
}

std::string TaskId::ToBytes() const {
  std::string out(16, '\0');
  ToBytes(out.data());
  return out;
}

std::string TaskId::ToHex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  char bytes[16];
  ToBytes(bytes);
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[2 * i] = kDigits[static_cast<unsigned char>(bytes[i]) >> 4];
    out[2 * i + 1] = kDigits[static_cast<unsigned char>(bytes[i]) & 0xf];
  }
  return out;
}

Result<TaskId> TaskId::FromHex(std::string_view hex) {
  if (hex.size() != 32) {
    return Status::InvalidArgument("task id '" + std::string(hex) +
                                   "' must be 32 hex digits, not " + std::to_string(hex.size()) +
                                   " characters");
  }
  char bytes[16];
  for (int i = 0; i < 16; ++i) {
    int high = HexValue(hex[2 * i]);
    int low = HexValue(hex[2 * i + 1]);
    if (high < 0 || low < 0) {
      return Status::InvalidArgument("task id '" + std::string(hex) + "' has a non-hex character");
    }
    bytes[i] = static_cast<char>(high * 16 + low);
  }
  return FromBytes({bytes, 16});
}

}  // namespace ztask
