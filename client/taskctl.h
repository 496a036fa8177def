// taskctl's pieces: each subcommand is one Add* function that puts its
// options on the command line's parser and says what it does before
// connecting (what needs no cluster: usage errors first) and with a client.
// Exit status: 0 all ok, 1 a task failed, 2 a usage error, an unknown id or
// an unreachable cluster, 3 a timeout.
#ifndef ZTASK_CLIENT_TASKCTL_H_
#define ZTASK_CLIENT_TASKCTL_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ztask/client.h"

namespace ztask::ctl {

inline constexpr int kOk = 0, kFailed = 1, kUsage = 2, kTimedOut = 3;

// Prints "taskctl: MESSAGE" on stderr; returns `code`.
int Error(const std::string& message, int code = kUsage);
// kTimedOut for a timeout, kUsage otherwise.
int Error(const Status& status);

Result<std::vector<TaskId>> ParseIds(const std::vector<std::string>& texts);

// The records as JSON lines on stdout; kFailed (and a line on stderr
// saying how many) when some failed.
int PrintRecords(const std::vector<TaskInfo>& records);

// Waits (10 s at most) until the hub has the records of `ids` (the last
// one is enough: a client's tasks are recorded in the order sent), so an
// id printed can be waited for at once by any process, and a cluster that
// does not take the tasks is an error rather than ids that lead nowhere.
Status AwaitRecorded(Client& client, const std::vector<TaskId>& ids);

// A job's name as given with --job: empty (none given), or 1 to 128
// characters with no space or control character, so that tables and
// scripts can show it as one word.
Status CheckJobName(const std::string& name);

// Reads a whole file; an error naming it.
Result<std::string> ReadFile(const std::string& path);

struct Subcommand {
  CLI::App* app = nullptr;
  std::function<Status()> check;       // before connecting; may be empty
  std::function<int(Client&)> run;
};
using Subcommands = std::vector<Subcommand>;

// `command`: what came after `--` on the command line.
void AddSubmit(CLI::App& app, Subcommands& out, const std::vector<std::string>* command);
void AddSubmitGraph(CLI::App& app, Subcommands& out);
void AddWait(CLI::App& app, Subcommands& out);
void AddJobs(CLI::App& app, Subcommands& out);
void AddList(CLI::App& app, Subcommands& out);
void AddAbort(CLI::App& app, Subcommands& out);
void AddResubmit(CLI::App& app, Subcommands& out);
void AddResult(CLI::App& app, Subcommands& out);
void AddStatus(CLI::App& app, Subcommands& out);
void AddEngines(CLI::App& app, Subcommands& out);
void AddMonitor(CLI::App& app, Subcommands& out);
void AddGraph(CLI::App& app, Subcommands& out);
void AddPurge(CLI::App& app, Subcommands& out);
void AddWaitEngines(CLI::App& app, Subcommands& out);
void AddShutdown(CLI::App& app, Subcommands& out);

// How long `taskctl wait` rides out a hub that does not answer (a restart
// takes seconds; a cluster that was stopped never answers again).
inline constexpr double kUnreachableS = 30;

// Waits for tasks to finish (the job's, or the listed ids), drawing a
// progress bar on stderr when `progress` and stderr is a terminal, then
// prints their records (PrintRecords). timeout_s < 0: no limit. A hub that
// does not answer is waited for up to `unreachable_s` (said once on
// stderr), then it is an error naming the profile (exit 2).
int WaitAndPrint(Client& client, const std::string& job, const std::vector<TaskId>& ids,
                 double timeout_s, bool progress, double unreachable_s = kUnreachableS);

}  // namespace ztask::ctl

#endif  // ZTASK_CLIENT_TASKCTL_H_
