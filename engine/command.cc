#include "engine/command.h"

#include "protocol/path_search.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

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

CommandOutcome RunCommand(const CommandRequest& request) {
  CommandOutcome outcome;
  if (request.argv.empty()) {
    outcome.spawn_error = "the command is empty";
    return outcome;
  }
  // Resolved here: after fork only async-signal-safe calls are made.
  const std::string program = FindOnPath(request.argv[0]);
  if (program.empty()) {
    outcome.spawn_error = "cannot run '" + request.argv[0] + "': not found in PATH";
    return outcome;
  }
  // Output files, opened before anything runs, so that one that cannot be
  // written fails the task at once.
  OutputFiles output;
  int* files = output.fd;
  if (!request.stdout_path.empty()) {
    files[0] = OpenOutput(request.stdout_path, request.cwd, &outcome.spawn_error);
    if (files[0] < 0) return outcome;
  }
  if (!request.stderr_path.empty()) {
    files[1] = request.stderr_path == request.stdout_path
                   ? files[0]
                   : OpenOutput(request.stderr_path, request.cwd, &outcome.spawn_error);
    if (files[1] < 0) return outcome;
  }
  std::vector<std::string> env = Environment(request.env);
  std::vector<char*> argv, envp;
  for (const auto& a : request.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  int out[2], err[2], status[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 ||
      ::pipe2(status, O_CLOEXEC) != 0) {
    outcome.spawn_error = std::string("cannot make pipes: ") + std::strerror(errno);
    return outcome;
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    if (!request.cwd.empty() && ::chdir(request.cwd.c_str()) != 0) {
      int e = errno;
      [[maybe_unused]] ssize_t n = ::write(status[1], &e, sizeof e);
      ::_exit(127);
    }
    ::execve(program.c_str(), argv.data(), envp.data());
    int e = errno;
    [[maybe_unused]] ssize_t n = ::write(status[1], &e, sizeof e);
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  ::close(status[1]);
  if (pid < 0) {
    outcome.spawn_error = std::string("cannot fork: ") + std::strerror(errno);
    ::close(out[0]);
    ::close(err[0]);
    ::close(status[0]);
    return outcome;
  }
  ::setpgid(pid, pid);  // also here, so a kill cannot race the child's own call
  if (request.running_group) request.running_group->store(pid);

  int child_errno = 0;
  if (::read(status[0], &child_errno, sizeof child_errno) == sizeof child_errno) {
    outcome.spawn_error = "cannot run '" + request.argv[0] + "'" +
                          (request.cwd.empty() ? "" : " in " + request.cwd) + ": " +
                          std::strerror(child_errno);
  }
  ::close(status[0]);

  using Clock = std::chrono::steady_clock;
  const bool limited = request.time_limit_s > 0;
  const auto deadline = Clock::now() + std::chrono::microseconds(
                                           static_cast<int64_t>(request.time_limit_s * 1e6));
  // The task ends when its process ends, not when the last holder of its
  // output lets go (a child it left in the background may hold it for
  // ever): the process's end is watched with a pidfd, or, where the kernel
  // has none, by asking every 50 ms.
  const int exited_fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  pollfd fds[3] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {exited_fd, POLLIN, 0}};
  bool reaped = false;
  int wstatus = 0;
  char buffer[65536];
  auto read_from = [&](int i) {
    const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
    if (n > 0) {
      if (files[i] >= 0) WriteAll(files[i], buffer, static_cast<size_t>(n));
      if (i == 0) {
        Append(outcome.stdout_text, outcome.stdout_truncated, buffer, static_cast<size_t>(n),
               request.max_output_bytes);
      } else {
        Append(outcome.stderr_text, outcome.stderr_truncated, buffer, static_cast<size_t>(n),
               request.max_output_bytes);
      }
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      ::close(fds[i].fd);
      fds[i].fd = -1;
    }
    return n > 0;
  };
  while (!reaped) {
    int wait_ms = exited_fd >= 0 ? -1 : 50;
    if (limited) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        outcome.timed_out = true;
        ::kill(-pid, SIGKILL);
        break;
      }
      const int until_limit = static_cast<int>(std::min<int64_t>(left.count() + 1, 1000));
      wait_ms = wait_ms < 0 ? until_limit : std::min(wait_ms, until_limit);
    }
    if (::poll(fds, exited_fd >= 0 ? 3 : 2, wait_ms) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      read_from(i);
    }
    // The process's end ends the task (its time limit goes on counting
    // after it closed its output).
    if (exited_fd < 0 || (fds[2].revents & POLLIN)) {
      while (true) {
        const pid_t done = ::waitpid(pid, &wstatus, WNOHANG);
        if (done < 0 && errno == EINTR) continue;
        reaped = done == pid;
        break;
      }
    }
  }
  // What it left running in its process group (children in the background
  // that held its output, or anything after a time limit) goes with it: the
  // engine's next task starts on a clean slate.
  ::kill(-pid, SIGKILL);
  if (reaped) {
    // What it wrote before it ended is in the pipes: take it, without
    // waiting for whatever may still hold them (a process that left the
    // group), and no more than a few buffers' worth.
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0) continue;
      ::fcntl(fds[i].fd, F_SETFL, O_NONBLOCK);
      for (int reads = 0; reads < 64 && fds[i].fd >= 0 && read_from(i); ++reads) {
      }
    }
  }
  for (int i = 0; i < 3; ++i) {
    if (fds[i].fd >= 0) ::close(fds[i].fd);
  }
  if (!reaped) {
    while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
  }
  if (request.running_group) request.running_group->store(0);
  outcome.exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  return outcome;
}

}  // namespace ztask::engine
