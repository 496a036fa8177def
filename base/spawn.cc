// The one way to start a program (base/spawn.h).
#include "base/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace ztask::base {
namespace {

// Where the child's descriptors wait before they are moved into place: above
// every target, so that moving one never overwrites another's source.
constexpr int kFirstStagingFd = 100;

// What the child reports through the pipe when it cannot go on.
struct ChildFailure {
  int step;  // 0: chdir, 1: exec, 2: a descriptor (told apart in the message)
  int error;
};

[[noreturn]] void ChildFails(int pipe_fd, int step) {
  const ChildFailure failure{step, errno};
  [[maybe_unused]] ssize_t n = ::write(pipe_fd, &failure, sizeof failure);
  ::_exit(127);
}

// The child's side: async-signal-safe calls only.
[[noreturn]] void RunChild(const SpawnOptions& options, const char* program, char* const* argv,
                           char* const* envp, const std::vector<std::pair<int, int>>& staged,
                           int report_fd) {
  // The stop signals blocked for the signal thread (base/signals.h) and the
  // signals ignored (SIGPIPE; SIGXFSZ in the hub) are this process's
  // choices, not the program's.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  for (int ignored : {SIGPIPE, SIGXFSZ}) ::sigaction(ignored, &default_action, nullptr);
  if (options.own_group) ::setpgid(0, 0);
  if (options.dies_with_parent) ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (options.null_stdin) {
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
  }
  for (const auto& [target, source] : staged) {  // dup2 clears close-on-exec
    if (::dup2(source, target) < 0) ChildFails(report_fd, 2);
  }
  if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0) ChildFails(report_fd, 0);
  ::execve(program, argv, envp);
  ChildFails(report_fd, 1);
}

std::string Describe(const SpawnOptions& options, const ChildFailure& failure) {
  const std::string what = "cannot run '" + options.argv[0] + "'";
  const std::string where = options.cwd.empty() ? "" : " in " + options.cwd;
  if (failure.step == 2) {
    return what + ": cannot hand it its descriptors: " + std::strerror(failure.error);
  }
  return what + where + ": " + std::strerror(failure.error);
}

void CloseStaged(const std::vector<std::pair<int, int>>& staged) {
  for (const auto& [target, fd] : staged) ::close(fd);
}

// Each descriptor to pass, duplicated above kFirstStagingFd: (target, copy).
Result<std::vector<std::pair<int, int>>> StageDescriptors(
    const std::vector<std::pair<int, int>>& fds) {
  std::vector<std::pair<int, int>> staged;
  for (const auto& [target, source] : fds) {
    const int fd = ::fcntl(source, F_DUPFD_CLOEXEC, kFirstStagingFd);
    if (fd < 0) {
      const int error = errno;
      CloseStaged(staged);
      return Status::IoError(std::string("cannot pass a descriptor to a child: ") +
                             std::strerror(error));
    }
    staged.emplace_back(target, fd);
  }
  return staged;
}

// The pid once the child's exec closed the report pipe; or, when the child
// reported a failure instead, the child reaped and the failure described.
Result<pid_t> AwaitExec(pid_t pid, int report_fd, const SpawnOptions& options) {
  ChildFailure failure{};
  ssize_t n;
  do {
    n = ::read(report_fd, &failure, sizeof failure);
  } while (n < 0 && errno == EINTR);
  ::close(report_fd);
  if (n != static_cast<ssize_t>(sizeof failure)) return pid;  // exec closed the pipe: it runs
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return Status::NotFound(Describe(options, failure));
}

}  // namespace

Result<pid_t> Spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return Status::InvalidArgument("nothing to run");
  // Everything the child touches is made here, before the fork.
  std::vector<std::string> args = options.argv;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env = options.env.value_or(std::vector<std::string>{});
  std::vector<char*> envp;
  if (options.env) {
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
  char* const* child_env = options.env ? envp.data() : environ;

  auto staging = StageDescriptors(options.fds);
  if (!staging.ok()) return staging.status();
  const std::vector<std::pair<int, int>> staged = std::move(*staging);
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    const int error = errno;
    CloseStaged(staged);
    return Status::IoError(std::string("cannot make a pipe: ") + std::strerror(error));
  }

  const std::string& program = options.program.empty() ? args[0] : options.program;
  const pid_t pid = ::fork();
  if (pid == 0) RunChild(options, program.c_str(), argv.data(), child_env, staged, report[1]);
  const int fork_error = errno;
  ::close(report[1]);
  CloseStaged(staged);
  if (pid < 0) {
    ::close(report[0]);
    return Status::IoError(std::string("cannot fork: ") + std::strerror(fork_error));
  }
  // Here too: a kill of the group cannot come before the child's own call.
  if (options.own_group) ::setpgid(pid, pid);
  return AwaitExec(pid, report[0], options);
}

}  // namespace ztask::base
