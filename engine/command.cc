// Running a command task (engine/command.h).
#include "engine/command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "base/clock.h"
#include "base/path_search.h"
#include "base/spawn.h"

extern char** environ;

namespace ztask::engine {
namespace {

std::vector<std::string> Environment(const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq) merged[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
  }
  for (const auto& [k, v] : extra) merged[k] = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : merged) out.push_back(k + "=" + v);
  return out;
}

// Opens an output file of the task (after making its directories): an fd,
// or -1 with *error set.
int OpenOutput(const std::string& path, const std::string& cwd, std::string* error) {
  std::filesystem::path p(path);
  if (p.is_relative() && !cwd.empty()) p = std::filesystem::path(cwd) / p;
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) *error = "cannot write the output file " + p.string() + ": " + std::strerror(errno);
  return fd;
}

// A task's output files (one fd for both when they are the same file).
struct OutputFiles {
  int fd[2] = {-1, -1};
  ~OutputFiles() {
    if (fd[1] >= 0 && fd[1] != fd[0]) ::close(fd[1]);
    if (fd[0] >= 0) ::close(fd[0]);
  }
};

void WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // a full disk: the record's tail still has the end
    data += w;
    n -= static_cast<size_t>(w);
  }
}

void Append(std::string& out, bool& truncated, const char* data, size_t n, size_t limit) {
  const size_t room = out.size() < limit ? limit - out.size() : 0;
  if (n > room) truncated = true;
  out.append(data, std::min(n, room));
}

}  // namespace

namespace {

// The pipes of a running task: its stdout and stderr, and, where the kernel
// has pidfds, one that is readable once it has exited.
struct Pipes {
  pollfd fds[3] = {{-1, POLLIN, 0}, {-1, POLLIN, 0}, {-1, POLLIN, 0}};
  ~Pipes() {
    for (pollfd& p : fds) {
      if (p.fd >= 0) ::close(p.fd);
    }
  }
};

// Collects what the task writes until its process ends (not until the last
// holder of its output lets go: a child it left in the background may hold
// it for ever) or its time limit passes; then ends its process group and
// reaps it.
class Collector {
 public:
  Collector(const CommandRequest& request, pid_t pid, const int* files, Pipes& pipes,
            CommandOutcome& outcome)
      : request_(request), pid_(pid), files_(files), fds_(pipes.fds), outcome_(outcome) {}

  void Run() {
    const bool limited = request_.time_limit_s > 0;
    const base::Deadline deadline(
        limited ? std::chrono::microseconds(static_cast<int64_t>(request_.time_limit_s * 1e6))
                : std::chrono::microseconds(-1));
    const bool has_pidfd = fds_[2].fd >= 0;
    while (!reaped_) {
      int wait_ms = has_pidfd ? -1 : 50;  // without a pidfd: ask every 50 ms
      if (limited) {
        if (deadline.expired()) {
          outcome_.timed_out = true;
          ::kill(-pid_, SIGKILL);
          break;
        }
        const int until_limit =
            static_cast<int>(std::min<int64_t>(deadline.remaining().count() + 1, 1000));
        wait_ms = wait_ms < 0 ? until_limit : std::min(wait_ms, until_limit);
      }
      if (::poll(fds_, has_pidfd ? 3 : 2, wait_ms) < 0 && errno != EINTR) break;
      for (int i = 0; i < 2; ++i) {
        if (fds_[i].fd >= 0 && (fds_[i].revents & (POLLIN | POLLHUP | POLLERR))) Read(i);
      }
      // The process's end ends the task (its time limit goes on counting
      // after it closed its output).
      if (!has_pidfd || (fds_[2].revents & POLLIN)) TryReap();
    }
    Finish();
  }

 private:
  bool Read(int i) {
    const ssize_t n = ::read(fds_[i].fd, buffer_, sizeof buffer_);
    if (n > 0) {
      if (files_[i] >= 0) WriteAll(files_[i], buffer_, static_cast<size_t>(n));
      std::string& text = i == 0 ? outcome_.stdout_text : outcome_.stderr_text;
      bool& truncated = i == 0 ? outcome_.stdout_truncated : outcome_.stderr_truncated;
      Append(text, truncated, buffer_, static_cast<size_t>(n), request_.max_output_bytes);
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      ::close(fds_[i].fd);
      fds_[i].fd = -1;
    }
    return n > 0;
  }

  void TryReap() {
    while (true) {
      const pid_t done = ::waitpid(pid_, &wstatus_, WNOHANG);
      if (done < 0 && errno == EINTR) continue;
      reaped_ = done == pid_;
      return;
    }
  }

  void Finish() {
    // What it left running in its process group (children in the background
    // that held its output, or anything after a time limit) goes with it:
    // the engine's next task starts on a clean slate.
    ::kill(-pid_, SIGKILL);
    if (reaped_) {
      // What it wrote before it ended is in the pipes: take it, without
      // waiting for whatever may still hold them (a process that left the
      // group), and no more than a few buffers' worth.
      for (int i = 0; i < 2; ++i) {
        if (fds_[i].fd < 0) continue;
        ::fcntl(fds_[i].fd, F_SETFL, O_NONBLOCK);
        for (int reads = 0; reads < 64 && fds_[i].fd >= 0 && Read(i); ++reads) {
        }
      }
    } else {
      while (::waitpid(pid_, &wstatus_, 0) < 0 && errno == EINTR) {
      }
    }
    outcome_.exit_code =
        WIFEXITED(wstatus_) ? WEXITSTATUS(wstatus_) : 128 + WTERMSIG(wstatus_);
  }

  const CommandRequest& request_;
  const pid_t pid_;
  const int* files_;
  pollfd* fds_;
  CommandOutcome& outcome_;
  bool reaped_ = false;
  int wstatus_ = 0;
  char buffer_[65536];
};

// Opens the task's output files, before anything runs, so that one that
// cannot be written fails the task at once. False with outcome.spawn_error.
bool OpenOutputs(const CommandRequest& request, OutputFiles& output, CommandOutcome& outcome) {
  int* files = output.fd;
  if (!request.stdout_path.empty()) {
    files[0] = OpenOutput(request.stdout_path, request.cwd, &outcome.spawn_error);
    if (files[0] < 0) return false;
  }
  if (!request.stderr_path.empty()) {
    files[1] = request.stderr_path == request.stdout_path
                   ? files[0]
                   : OpenOutput(request.stderr_path, request.cwd, &outcome.spawn_error);
    if (files[1] < 0) return false;
  }
  return true;
}

}  // namespace

CommandOutcome RunCommand(const CommandRequest& request) {
  CommandOutcome outcome;
  if (request.argv.empty()) {
    outcome.spawn_error = "the command is empty";
    return outcome;
  }
  base::SpawnOptions spawn;
  spawn.program = FindOnPath(request.argv[0]);
  if (spawn.program.empty()) {
    outcome.spawn_error = "cannot run '" + request.argv[0] + "': not found in PATH";
    return outcome;
  }
  OutputFiles output;
  if (!OpenOutputs(request, output, outcome)) return outcome;
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    outcome.spawn_error = std::string("cannot make pipes: ") + std::strerror(errno);
    return outcome;
  }
  if (::pipe2(err, O_CLOEXEC) != 0) {
    outcome.spawn_error = std::string("cannot make pipes: ") + std::strerror(errno);
    ::close(out[0]);
    ::close(out[1]);
    return outcome;
  }
  spawn.argv = request.argv;
  spawn.env = Environment(request.env);
  spawn.cwd = request.cwd;
  spawn.fds = {{1, out[1]}, {2, err[1]}};
  spawn.null_stdin = true;
  Result<pid_t> pid = base::Spawn(spawn);
  ::close(out[1]);
  ::close(err[1]);
  Pipes pipes;
  pipes.fds[0].fd = out[0];
  pipes.fds[1].fd = err[0];
  if (!pid.ok()) {
    outcome.spawn_error = pid.status().message();
    return outcome;
  }
  if (request.running_group) request.running_group->store(*pid);
  pipes.fds[2].fd = static_cast<int>(::syscall(SYS_pidfd_open, *pid, 0));
  Collector(request, *pid, output.fd, pipes, outcome).Run();
  if (request.running_group) request.running_group->store(0);
  return outcome;
}

}  // namespace ztask::engine
