// The engine's Python worker process (engine/python_worker.h).
#include "engine/python_worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <msgpack.hpp>
#include <vector>

#include "base/clock.h"
#include "base/path_search.h"
#include "base/spawn.h"
#include "engine/bounded_answer.h"
#include "protocol/wire.h"

extern char** environ;

namespace ztask::engine {
namespace {

constexpr int64_t kStartTimeoutUs = 30'000'000;
// An answer holds the result and what the task printed, each within its
// limit, and a little more (the exception's text, the map's keys).
constexpr size_t kAnswerSlackBytes = size_t{1} << 20;

std::string Field(const msgpack::object& map, std::string_view key) {
  if (map.type != msgpack::type::MAP) return "";
  for (uint32_t i = 0; i < map.via.map.size; ++i) {
    const auto& kv = map.via.map.ptr[i];
    if (kv.key.type != msgpack::type::STR || std::string_view(kv.key.via.str.ptr, kv.key.via.str.size) != key) {
      continue;
    }
    if (kv.val.type == msgpack::type::STR) return std::string(kv.val.via.str.ptr, kv.val.via.str.size);
    if (kv.val.type == msgpack::type::BIN) return std::string(kv.val.via.bin.ptr, kv.val.via.bin.size);
  }
  return "";
}

void Keep(std::string text, size_t limit, std::string* out, bool* truncated) {
  if (text.size() > limit) {
    text.resize(limit);
    *truncated = true;
  }
  *out = std::move(text);
}

std::string ExitText(int wstatus) {
  if (WIFSIGNALED(wstatus)) return "killed by signal " + std::to_string(WTERMSIG(wstatus));
  return "exited with code " + std::to_string(WEXITSTATUS(wstatus));
}

}  // namespace

PythonWorker::PythonWorker(std::string interpreter, std::string python_path)
    : interpreter_(std::move(interpreter)), python_path_(std::move(python_path)) {}

PythonWorker::~PythonWorker() {
  Kill();
  std::string why;
  Reap(&why);
}

void PythonWorker::Kill() {
  const pid_t pid = pid_.load();
  if (pid > 0) ::kill(-pid, SIGKILL);
}

void PythonWorker::Reap(std::string* why) {
  const pid_t pid = pid_.exchange(-1);
  if (to_worker_ >= 0) ::close(to_worker_);
  if (from_worker_ >= 0) ::close(from_worker_);
  to_worker_ = from_worker_ = -1;
  inbox_.clear();
  inbox_at_ = 0;
  if (pid <= 0) return;
  ::kill(-pid, SIGKILL);  // what it started goes with it
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  *why = ExitText(wstatus);
}

std::string PythonWorker::Start() {
  std::string program = FindOnPath(interpreter_);
  if (program.empty() || ::access(program.c_str(), X_OK) != 0) {
    return "cannot run the Python interpreter '" + interpreter_ +
           "': not found or not executable (taskengine --python PATH, or $ZTASK_PYTHON)";
  }
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "PYTHONPATH=", 11) != 0) env.emplace_back(*e);
  }
  std::string path = python_path_;
  if (const char* old = std::getenv("PYTHONPATH"); old && *old) {
    path = path.empty() ? old : path + ":" + old;
  }
  if (!path.empty()) env.push_back("PYTHONPATH=" + path);
  int to[2], from[2];
  if (::pipe2(to, O_CLOEXEC) != 0) return std::string("cannot make pipes: ") + std::strerror(errno);
  if (::pipe2(from, O_CLOEXEC) != 0) {
    ::close(to[0]);
    ::close(to[1]);
    return std::string("cannot make pipes: ") + std::strerror(errno);
  }
  base::SpawnOptions spawn;
  spawn.argv = {program, "-c", "from ztask_worker import main; main()", "3", "4"};
  spawn.env = std::move(env);
  spawn.fds = {{3, to[0]}, {4, from[1]}};
  // An engine killed outright takes its worker with it, even mid-task.
  spawn.dies_with_parent = true;
  Result<pid_t> spawned = base::Spawn(spawn);
  ::close(to[0]);
  ::close(from[1]);
  if (!spawned.ok()) {
    ::close(to[1]);
    ::close(from[0]);
    return spawned.status().message();
  }
  const pid_t pid = *spawned;
  pid_.store(pid);
  to_worker_ = to[1];
  from_worker_ = from[0];
  ::fcntl(to_worker_, F_SETFL, O_NONBLOCK);  // writes wait in poll, within a deadline
  // Its first word: a hello, or why it cannot serve (a string).
  std::string hello;
  const IoStatus read = ReadMessage(&hello, base::MonotonicMicros() + kStartTimeoutUs);
  std::string why;
  if (read == IoStatus::kOk) {
    try {
      msgpack::object_handle h = msgpack::unpack(hello.data(), hello.size());
      if (h.get().type == msgpack::type::MAP && Field(h.get(), "status") == "hello") return "";
      if (h.get().type == msgpack::type::STR) why = h.get().as<std::string>();
    } catch (const std::exception&) {
    }
    if (why.empty()) why = "the Python worker did not say hello";
  }
  std::string exit_text;
  Reap(&exit_text);
  if (why.empty()) {
    why = "the Python worker (" + program + ") " +
          (read == IoStatus::kTimedOut ? "did not start within 30 s" : exit_text + " at start") +
          "; is the ztask package importable there (taskengine --python-path DIR)?";
  }
  return why;
}

// The whole of `data` to the worker before `deadline_us` (0: none): a
// worker that stops reading is timed out like one that stops answering.
PythonWorker::IoStatus PythonWorker::WriteMessage(std::string_view data, int64_t deadline_us) {
  while (!data.empty()) {
    const ssize_t w = ::write(to_worker_, data.data(), data.size());
    if (w > 0) {
      data.remove_prefix(static_cast<size_t>(w));
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno != EAGAIN) return IoStatus::kClosed;  // EPIPE: it died
    int wait_ms = -1;
    if (deadline_us > 0) {
      const int64_t left = deadline_us - base::MonotonicMicros();
      if (left <= 0) return IoStatus::kTimedOut;
      wait_ms = static_cast<int>(std::min<int64_t>(left / 1000 + 1, 1000));
    }
    pollfd fd{to_worker_, POLLOUT, 0};
    if (::poll(&fd, 1, wait_ms) < 0 && errno != EINTR) return IoStatus::kClosed;
  }
  return IoStatus::kOk;
}

// More of what the worker sent, into inbox_ (kOk also when nothing came
// yet: the caller looks again).
PythonWorker::IoStatus PythonWorker::Fill(int64_t deadline_us) {
  int wait_ms = -1;
  if (deadline_us > 0) {
    const int64_t left = deadline_us - base::MonotonicMicros();
    if (left <= 0) return IoStatus::kTimedOut;
    wait_ms = static_cast<int>(std::min<int64_t>(left / 1000 + 1, 1000));
  }
  pollfd fd{from_worker_, POLLIN, 0};
  const int ready = ::poll(&fd, 1, wait_ms);
  if (ready < 0 && errno != EINTR) return IoStatus::kClosed;
  if (ready <= 0) return IoStatus::kOk;  // look at the deadline again
  if (inbox_at_ > 0) {
    inbox_.erase(0, inbox_at_);
    inbox_at_ = 0;
  }
  char buffer[1 << 16];
  const ssize_t r = ::read(from_worker_, buffer, sizeof buffer);
  if (r < 0 && (errno == EINTR || errno == EAGAIN)) return IoStatus::kOk;
  if (r <= 0) return IoStatus::kClosed;
  inbox_.append(buffer, static_cast<size_t>(r));
  return IoStatus::kOk;
}

PythonWorker::IoStatus PythonWorker::ReadMessage(std::string* out, int64_t deadline_us,
                                                 size_t max_bytes, const AnswerBounds* bounds,
                                                 BoundedOutcome* bounded) {
  // Whatever the pipe has is taken at once: a message most often in one read.
  auto have = [&](size_t n) { return inbox_.size() - inbox_at_ >= n; };
  while (!have(4)) {
    if (IoStatus s = Fill(deadline_us); s != IoStatus::kOk) return s;
  }
  const auto* p = reinterpret_cast<const unsigned char*>(inbox_.data() + inbox_at_);
  const uint32_t size = p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24;
  if (size > max_bytes) {
    if (!bounds || !bounded) return IoStatus::kClosed;
    // Walked as it comes, a buffer at a time, keeping each value within
    // its bound: what follows is the next message, so the worker goes on.
    inbox_at_ += 4;
    class Pipe final : public AnswerSource {
     public:
      Pipe(PythonWorker& w, int64_t deadline_us) : w_(w), deadline_us_(deadline_us) {}
      bool Read(char* into, size_t n) override { return Take(into, n); }
      bool Skip(size_t n) override { return Take(nullptr, n); }
      IoStatus status = IoStatus::kOk;

     private:
      bool Take(char* into, size_t n) {
        while (n > 0) {
          const size_t ready = w_.inbox_.size() - w_.inbox_at_;
          if (ready == 0) {
            status = w_.Fill(deadline_us_);
            if (status != IoStatus::kOk) return false;
            continue;
          }
          const size_t take = std::min(n, ready);
          if (into) {
            std::memcpy(into, w_.inbox_.data() + w_.inbox_at_, take);
            into += take;
          }
          w_.inbox_at_ += take;
          n -= take;
        }
        return true;
      }
      PythonWorker& w_;
      const int64_t deadline_us_;
    } pipe(*this, deadline_us);
    BoundedAnswer answer(pipe, size, *bounds);
    if (!answer.Read(bounded)) return pipe.status == IoStatus::kOk ? IoStatus::kClosed : pipe.status;
    return IoStatus::kTooLarge;
  }
  while (!have(4 + size)) {
    if (IoStatus s = Fill(deadline_us); s != IoStatus::kOk) return s;
  }
  out->assign(inbox_, inbox_at_ + 4, size);
  inbox_at_ += 4 + size;
  return IoStatus::kOk;
}

// An answer of the worker (a msgpack map) into `outcome`; kWorkerLost when
// it cannot be read.
void PythonWorker::Parse(const std::string& reply, const PythonTask& task, PythonOutcome* outcome) {
  try {
    msgpack::object_handle h = msgpack::unpack(reply.data(), reply.size());
    const msgpack::object& map = h.get();
    const std::string status = Field(map, "status");
    Keep(Field(map, "stdout"), task.max_output_bytes, &outcome->stdout_text,
         &outcome->stdout_truncated);
    Keep(Field(map, "stderr"), task.max_output_bytes, &outcome->stderr_text,
         &outcome->stderr_truncated);
    outcome->evalue = Field(map, "evalue");
    if (status == "ok") {
      outcome->kind = PythonOutcome::Kind::kOk;
      outcome->result = Field(map, "result");
    } else if (status == "unmet") {
      outcome->kind = PythonOutcome::Kind::kUnmet;
    } else if (status == "too_large") {
      // The worker measured its pickle against max_result_bytes and kept
      // none of it: the task's result, not a fault of the engine.
      outcome->kind = PythonOutcome::Kind::kTooLarge;
    } else {
      outcome->kind = PythonOutcome::Kind::kError;
      outcome->ename = Field(map, "ename");
      outcome->traceback = Field(map, "traceback");
    }
  } catch (const std::exception& e) {
    outcome->kind = PythonOutcome::Kind::kWorkerLost;
    outcome->evalue = std::string("the Python worker answered what cannot be read: ") + e.what();
  }
}

PythonOutcome PythonWorker::Run(const PythonTask& task) {
  PythonOutcome outcome;
  if (pid_.load() <= 0) {
    if (std::string why = Start(); !why.empty()) {
      outcome.evalue = std::move(why);
      return outcome;
    }
  }
  msgpack::sbuffer body;
  body.write("\0\0\0\0", 4);  // its length, once known: one write a task
  msgpack::packer<msgpack::sbuffer> packer(body);
  packer.pack_map(7);
  packer.pack(std::string_view("payload"));
  packer.pack_bin(static_cast<uint32_t>(task.payload.size()));
  packer.pack_bin_body(task.payload.data(), static_cast<uint32_t>(task.payload.size()));
  packer.pack(std::string_view("task_id"));
  packer.pack(task.task_id);
  packer.pack(std::string_view("engine_id"));
  packer.pack(task.engine_id);
  packer.pack(std::string_view("attempt"));
  packer.pack(task.attempt);
  packer.pack(std::string_view("env"));
  packer.pack(task.env);
  packer.pack(std::string_view("max_result_bytes"));
  packer.pack(static_cast<uint64_t>(task.max_result_bytes));
  packer.pack(std::string_view("max_output_bytes"));
  packer.pack(static_cast<uint64_t>(task.max_output_bytes));
  const uint32_t n = static_cast<uint32_t>(body.size() - 4);
  const char size[4] = {static_cast<char>(n), static_cast<char>(n >> 8), static_cast<char>(n >> 16),
                        static_cast<char>(n >> 24)};
  std::memcpy(body.data(), size, 4);
  const int64_t deadline =
      task.time_limit_s > 0
          ? base::MonotonicMicros() + static_cast<int64_t>(task.time_limit_s * 1e6)
          : 0;
  std::string reply;
  const AnswerBounds bounds{task.max_output_bytes, task.max_result_bytes, kAnswerSlackBytes};
  BoundedOutcome bounded;
  IoStatus read = WriteMessage(std::string_view(body.data(), body.size()), deadline);
  if (read == IoStatus::kOk) {
    read = ReadMessage(&reply, deadline,
                       task.max_result_bytes + 2 * task.max_output_bytes + kAnswerSlackBytes,
                       &bounds, &bounded);
  }
  if (read == IoStatus::kTooLarge) {
    // Too large to keep whole: what was kept of it, output cut as a
    // command's is; a result over its limit is dropped and the task fails.
    if (!bounded.map.empty()) Parse(bounded.map, task, &outcome);
    if (bounded.map.empty() || outcome.kind == PythonOutcome::Kind::kWorkerLost) {
      outcome.kind = PythonOutcome::Kind::kTooLarge;
      outcome.evalue = "its answer could not be read within the engine's limits";
      return outcome;
    }
    outcome.stdout_truncated = outcome.stdout_truncated || bounded.stdout_cut;
    outcome.stderr_truncated = outcome.stderr_truncated || bounded.stderr_cut;
    if (bounded.result_dropped) {
      outcome.kind = PythonOutcome::Kind::kTooLarge;
      outcome.result.clear();
      outcome.evalue = "its result is " + std::to_string(bounded.result_bytes) +
                       " bytes, over the engine's limit of " +
                       std::to_string(task.max_result_bytes) +
                       " bytes (taskengine --max-result-bytes)";
    }
    return outcome;
  }
  if (read != IoStatus::kOk) {
    std::string exit_text;
    Reap(&exit_text);
    if (read == IoStatus::kTimedOut) {
      outcome.kind = PythonOutcome::Kind::kTimedOut;
      return outcome;
    }
    outcome.evalue = "the Python worker " + exit_text +
                     " while it ran the task; it is started again for the next task";
    return outcome;
  }
  Parse(reply, task, &outcome);
  if (outcome.kind == PythonOutcome::Kind::kWorkerLost) {
    std::string exit_text;
    Reap(&exit_text);
  }
  return outcome;
}

}  // namespace ztask::engine
