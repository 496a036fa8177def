// taskctl's work with jobs and many tasks: wait (with a progress bar),
// jobs, list, abort and resubmit.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <deque>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>

#include "base/clock.h"
#include "base/usage.h"
#include "client/taskctl.h"

namespace ztask::ctl {
namespace {

constexpr size_t kAtOnce = 10000;  // ids per request
// How long the client library waits for the hub's answer before it says
// the hub does not answer.
constexpr double kHubSilentS = 6;


// A progress bar on stderr, redrawn in place, only on a terminal.
class ProgressBar {
 public:
  explicit ProgressBar(bool wanted) : on_(wanted && ::isatty(STDERR_FILENO)) {}
  ~ProgressBar() { Finish(); }

  void Draw(int64_t total, int64_t ok, int64_t failed, int64_t running) {
    if (!on_) return;
    const double now = base::MonotonicSeconds();
    if (now - last_draw_ < 0.1 && ok + failed < total) return;
    last_draw_ = now;
    const int64_t done = ok + failed;
    samples_.push_back({now, done});
    while (samples_.size() > 2 && now - samples_.front().first > 10) samples_.pop_front();
    const double span = now - samples_.front().first;
    const double rate = span > 0.5 ? (done - samples_.front().second) / span : 0;
    constexpr int kWidth = 30;
    const double fraction = total > 0 ? static_cast<double>(done) / total : 1;
    const int filled = static_cast<int>(fraction * kWidth);
    std::string bar(filled, '#');
    bar.resize(kWidth, '.');
    std::string eta = "-";
    if (done >= total) {
      eta = "done";
    } else if (rate > 0) {
      eta = Duration((total - done) / rate) + " left";
    }
    std::fprintf(stderr, "\r[%s] %lld/%lld %3d%%  ok %lld  failed %lld  running %lld  %.0f/s  %s\x1b[K",
                 bar.c_str(), static_cast<long long>(done), static_cast<long long>(total),
                 static_cast<int>(fraction * 100), static_cast<long long>(ok),
                 static_cast<long long>(failed), static_cast<long long>(running), rate, eta.c_str());
    std::fflush(stderr);
    drawn_ = true;
  }

  // Ends the bar's line, so what is printed next starts on its own.
  void Finish() {
    if (drawn_) std::fprintf(stderr, "\n");
    drawn_ = false;
  }

 private:
  static std::string Duration(double s) {
    char text[32];
    if (s < 60) {
      std::snprintf(text, sizeof text, "%.0fs", std::ceil(s));
    } else if (s < 3600) {
      std::snprintf(text, sizeof text, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
    } else {
      std::snprintf(text, sizeof text, "%dh%02dm", static_cast<int>(s) / 3600,
                    static_cast<int>(s) % 3600 / 60);
    }
    return text;
  }

  bool on_;
  bool drawn_ = false;
  double last_draw_ = 0;
  std::deque<std::pair<double, int64_t>> samples_;
};

// The records of `ids`, asked for in parts.
Result<std::vector<TaskInfo>> FetchInParts(Client& c, const std::vector<TaskId>& ids) {
  std::vector<TaskInfo> out;
  for (size_t at = 0; at < ids.size(); at += kAtOnce) {
    const std::vector<TaskId> part(ids.begin() + at,
                                   ids.begin() + std::min(ids.size(), at + kAtOnce));
    auto records = c.Fetch(part);
    if (!records.ok()) return records.status();
    for (auto& r : *records) out.push_back(std::move(r));
  }
  return out;
}

// In array order where tasks have an index; the others keep their order.
void SortByIndex(std::vector<TaskInfo>& records) {
  std::stable_sort(records.begin(), records.end(), [](const TaskInfo& a, const TaskInfo& b) {
    if (!a.array_index || !b.array_index) return false;
    return *a.array_index < *b.array_index;
  });
}

Status NoSuchJob(const std::string& job) {
  return Status::InvalidArgument("no job named '" + job + "' (taskctl jobs lists them)");
}

// Waits for the job's tasks, from its counts.
Status WaitJob(Client& c, const std::string& job, double timeout_s, ProgressBar& bar) {
  const double start = base::MonotonicSeconds();
  while (true) {
    auto jobs = c.Jobs(job);
    if (!jobs.ok()) return jobs.status();
    if (jobs->empty()) return NoSuchJob(job);
    const JobInfo& j = jobs->front();
    bar.Draw(j.total(), j.ok, j.failed, j.running);
    if (j.done()) return Status::Ok();
    if (timeout_s >= 0 && base::MonotonicSeconds() - start >= timeout_s) {
      return Status::TimedOut("job " + job + " did not finish within " +
                              std::to_string(timeout_s) + " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// Waits for tasks by id, drawing what their records say.
Status WaitIds(Client& c, const std::vector<TaskId>& ids, double timeout_s, ProgressBar& bar) {
  const double start = base::MonotonicSeconds();
  constexpr double kGrace = 3.0;  // for ids not recorded yet
  std::set<TaskId> pending(ids.begin(), ids.end());
  const auto total = static_cast<int64_t>(pending.size());
  int64_t ok = 0, failed = 0;
  while (!pending.empty()) {
    std::vector<TaskId> part;
    for (auto it = pending.begin(); it != pending.end() && part.size() < kAtOnce; ++it) {
      part.push_back(*it);
    }
    auto records = c.FetchWhen(part, /*finished=*/true, 0.25);
    if (!records.ok()) {
      if (records.status().code() != Status::Code::kNotFound || base::MonotonicSeconds() - start > kGrace) {
        return records.status();
      }
      continue;
    }
    int64_t running = 0;
    for (const auto& r : *records) {
      if (r.finished()) {
        pending.erase(r.id);
        ++(r.ok() ? ok : failed);
      } else if (r.status == TaskState::kRunning) {
        ++running;
      }
    }
    bar.Draw(total, ok, failed, running);
    if (!pending.empty() && timeout_s >= 0 && base::MonotonicSeconds() - start >= timeout_s) {
      return Status::TimedOut(std::to_string(pending.size()) + " tasks did not finish within " +
                              std::to_string(timeout_s) + " s");
    }
  }
  return Status::Ok();
}

std::string When(const std::optional<double>& t) {
  if (!t) return "-";
  const auto seconds = static_cast<std::time_t>(*t);
  std::tm local{};
  localtime_r(&seconds, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local);
  return text;
}

// A record's status as `taskctl list` shows it: a failed task submitted
// again is "replaced", one not (yet) is "failed".
std::string_view ListedStatus(const TaskInfo& r) {
  if (r.replaced_by) return "replaced";
  if (r.status == TaskState::kError) return TaskFilterName(TaskFilter::kFailed);
  return TaskStateName(r.status);
}

// The ids given, or a job, for wait and abort.
struct Selection {
  std::vector<std::string> texts;
  std::vector<TaskId> ids;
  std::string job;
  Status Check(const char* what) {
    if (!texts.empty() && !job.empty()) {
      return Status::InvalidArgument(std::string(what) + " takes task ids or --job, not both");
    }
    if (texts.empty() && job.empty()) {
      return Status::InvalidArgument(std::string(what) + " needs task ids or --job NAME");
    }
    auto parsed = ParseIds(texts);
    if (!parsed.ok()) return parsed.status();
    ids = std::move(*parsed);
    return Status::Ok();
  }
};

}  // namespace

int WaitAndPrint(Client& c, const std::string& job, const std::vector<TaskId>& ids,
                 double timeout_s, bool progress, double unreachable_s) {
  Status waited = Status::Ok();
  {
    ProgressBar bar(progress);
    const double start = base::MonotonicSeconds();
    double unreachable_since = -1;
    bool said = false;
    while (true) {
      const double left = timeout_s < 0 ? -1 : std::max(0.0, timeout_s - (base::MonotonicSeconds() - start));
      const double began = base::MonotonicSeconds();
      if (!job.empty()) {
        waited = WaitJob(c, job, left, bar);
      } else if (progress) {
        waited = WaitIds(c, ids, left, bar);
      } else {
        waited = c.Wait(ids, left);
      }
      // Unavailable: the hub did not answer a request (it gives up after
      // about 6 s). Waited for again, up to the limit, counted from the
      // first request it left unanswered.
      if (waited.code() != Status::Code::kUnavailable) break;
      if (unreachable_since < 0) unreachable_since = std::max(began, base::MonotonicSeconds() - kHubSilentS);
      const double away = base::MonotonicSeconds() - unreachable_since;
      if (away >= unreachable_s) {
        waited = Status::Unavailable(waited.message() + "; gave up after " +
                                     std::to_string(static_cast<int>(away)) +
                                     " s without an answer (--unreachable-timeout)");
        break;
      }
      if (timeout_s >= 0 && base::MonotonicSeconds() - start >= timeout_s) {
        waited = Status::TimedOut("the hub did not answer within --timeout " +
                                  std::to_string(timeout_s) + " s");
        break;
      }
      if (!said) {
        said = true;
        std::fprintf(stderr, "taskctl: %s; waiting for it up to %g s (--unreachable-timeout)\n",
                     waited.message().c_str(), unreachable_s);
      }
      // A refusal that came at once is not asked again at once.
      if (base::MonotonicSeconds() - began < 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  if (!waited.ok() && waited.code() != Status::Code::kTimedOut) return Error(waited);
  auto records = job.empty() ? FetchInParts(c, ids) : c.List(job);
  if (!records.ok()) return Error(records.status());
  // A failed task submitted again is the new task's business.
  std::erase_if(*records, [](const TaskInfo& r) { return r.replaced_by.has_value(); });
  SortByIndex(*records);
  const int code = PrintRecords(*records);
  return waited.ok() ? code : Error(waited);
}

void AddWait(CLI::App& app, Subcommands& out) {
  struct Flags {
    Selection which;
    double timeout = -1;
    bool progress = false;
    double unreachable = kUnreachableS;
  };
  auto f = std::make_shared<Flags>();
  auto* sub = app.add_subcommand(
      "wait", "wait for tasks or a job; prints their records as JSON lines");
  sub->add_option("ids", f->which.texts, "task ids");
  sub->add_option("--job", f->which.job, "every task of this job");
  sub->add_option("--timeout", f->timeout, "give up after this many seconds (exit 3)");
  sub->add_flag("--progress", f->progress, "a progress bar on a terminal (stderr)");
  sub->add_option("--unreachable-timeout", f->unreachable,
                  "give up after the hub has not answered for this many seconds (exit 2)")
      ->capture_default_str()
      ->check(kPositiveNumber);
  out.push_back({sub, [f] { return f->which.Check("wait"); }, [f](Client& c) {
                   return WaitAndPrint(c, f->which.job, f->which.ids, f->timeout, f->progress,
                                       f->unreachable);
                 }});
}

void AddJobs(CLI::App& app, Subcommands& out) {
  struct Flags {
    bool json = false;
    std::string name;
  };
  auto f = std::make_shared<Flags>();
  auto* sub = app.add_subcommand("jobs", "the jobs and their tasks' counts");
  sub->add_flag("--json", f->json, "print JSON lines");
  sub->add_option("name", f->name, "one job only");
  out.push_back({sub, nullptr, [f](Client& c) {
                   auto jobs = c.Jobs(f->name);
                   if (!jobs.ok()) return Error(jobs.status());
                   if (!f->name.empty() && jobs->empty()) return Error(NoSuchJob(f->name));
                   if (f->json) {
                     for (const auto& j : *jobs) std::printf("%s\n", j.ToJson().dump().c_str());
                     return kOk;
                   }
                   std::printf("%-16s %8s %8s %8s %8s %8s  %-19s  %-19s\n", "job", "total",
                               "waiting", "running", "ok", "failed", "first submit",
                               "last finish");
                   for (const auto& j : *jobs) {
                     std::printf("%-16s %8lld %8lld %8lld %8lld %8lld  %-19s  %-19s\n",
                                 j.name.c_str(), static_cast<long long>(j.total()),
                                 static_cast<long long>(j.waiting),
                                 static_cast<long long>(j.running), static_cast<long long>(j.ok),
                                 static_cast<long long>(j.failed), When(j.first_submit).c_str(),
                                 When(j.last_finish).c_str());
                   }
                   return kOk;
                 }});
}

void AddList(CLI::App& app, Subcommands& out) {
  struct Flags {
    bool json = false;
    std::string job, status;
    TaskFilter filter = TaskFilter::kAll;
  };
  auto f = std::make_shared<Flags>();
  auto* sub = app.add_subcommand("list", "the tasks of a job (or every task), in array order");
  sub->add_option("--job", f->job, "the job's tasks only");
  sub->add_option("--status", f->status, "waiting, running, ok or failed");
  sub->add_flag("--json", f->json, "print the records as JSON lines");
  out.push_back(
      {sub,
       [f] {
         if (f->status.empty()) return Status::Ok();
         const auto filter = ParseTaskFilter(f->status);
         if (!filter) {
           return Status::InvalidArgument("--status takes waiting, running, ok or failed, not '" +
                                          f->status + "'");
         }
         f->filter = *filter;
         return Status::Ok();
       },
       [f](Client& c) {
         if (!f->job.empty()) {
           auto jobs = c.Jobs(f->job);
           if (!jobs.ok()) return Error(jobs.status());
           if (jobs->empty()) return Error(NoSuchJob(f->job));
         }
         auto records = c.List(f->job, f->filter);
         if (!records.ok()) return Error(records.status());
         SortByIndex(*records);
         if (f->json) {
           for (const auto& r : *records) std::printf("%s\n", r.ToJson().dump().c_str());
           return kOk;
         }
         std::printf("%-32s %-8s %6s %6s %4s  %-20s %s\n", "id", "status", "index", "engine",
                     "exit", "label", "error");
         for (const auto& r : *records) {
           const std::string status(ListedStatus(r));
           std::string error;
           if (r.status == TaskState::kError) {
             error = std::string(ErrorTypeName(r.error_type)) + ": " + r.error_message;
             if (error.size() > 72) error = error.substr(0, 69) + "...";
           }
           std::printf("%-32s %-8s %6s %6s %4s  %-20s %s\n", r.id.ToHex().c_str(), status.c_str(),
                       r.array_index ? std::to_string(*r.array_index).c_str() : "-",
                       r.engine_id ? std::to_string(*r.engine_id).c_str() : "-",
                       r.exit_code ? std::to_string(*r.exit_code).c_str() : "-", r.label.c_str(),
                       error.c_str());
         }
         return kOk;
       }});
}

void AddAbort(CLI::App& app, Subcommands& out) {
  auto which = std::make_shared<Selection>();
  auto* sub = app.add_subcommand("abort", "abort tasks (or a job's) that have not started");
  sub->add_option("ids", which->texts, "task ids");
  sub->add_option("--job", which->job, "every task of this job that has not started");
  out.push_back({sub, [which] { return which->Check("abort"); }, [which](Client& c) {
                   if (which->job.empty()) {
                     auto r = c.Abort(which->ids);
                     if (!r.ok()) return Error(r.status());
                     for (const auto& id : r->aborted) std::printf("%s aborted\n", id.ToHex().c_str());
                     for (const auto& id : r->running) {
                       std::printf("%s running (not aborted)\n", id.ToHex().c_str());
                     }
                     for (const auto& id : r->finished) {
                       std::printf("%s finished (not aborted)\n", id.ToHex().c_str());
                     }
                     if (!r->unknown.empty()) return Error("unknown task id " + r->unknown[0].ToHex());
                     return kOk;
                   }
                   auto jobs = c.Jobs(which->job);
                   if (!jobs.ok()) return Error(jobs.status());
                   if (jobs->empty()) return Error(NoSuchJob(which->job));
                   auto waiting = c.List(which->job, TaskFilter::kWaiting);
                   if (!waiting.ok()) return Error(waiting.status());
                   size_t aborted = 0, started = 0;
                   for (size_t at = 0; at < waiting->size(); at += kAtOnce) {
                     std::vector<TaskId> part;
                     for (size_t i = at; i < std::min(waiting->size(), at + kAtOnce); ++i) {
                       part.push_back((*waiting)[i].id);
                     }
                     auto r = c.Abort(part);
                     if (!r.ok()) return Error(r.status());
                     aborted += r->aborted.size();
                     started += r->running.size() + r->finished.size();
                   }
                   std::printf("%zu tasks of job %s aborted", aborted, which->job.c_str());
                   if (started) std::printf(" (%zu had started: not aborted)", started);
                   std::printf("\n");
                   return kOk;
                 }});
}

namespace {

// The positions of `tasks` in an order where each comes after those of them
// it depends on (Kahn's, by position; dependencies on tasks not among them
// do not count).
std::vector<size_t> DependencyOrder(const std::vector<const TaskInfo*>& tasks) {
  std::unordered_map<TaskId, size_t, TaskIdHash> position;
  for (size_t i = 0; i < tasks.size(); ++i) position[tasks[i]->id] = i;
  std::vector<std::vector<size_t>> dependents(tasks.size());
  std::vector<size_t> unmet(tasks.size(), 0);
  for (size_t i = 0; i < tasks.size(); ++i) {
    for (const auto* deps : {&tasks[i]->after.ids, &tasks[i]->follow.ids}) {
      for (const TaskId& dep : *deps) {
        if (auto it = position.find(dep); it != position.end()) {
          dependents[it->second].push_back(i);
          ++unmet[i];
        }
      }
    }
  }
  std::vector<size_t> order;
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (unmet[i] == 0) order.push_back(i);
  }
  for (size_t k = 0; k < order.size(); ++k) {
    for (size_t d : dependents[order[k]]) {
      if (--unmet[d] == 0) order.push_back(d);
    }
  }
  return order;
}

// The failed tasks again, in the same job, each marked as replacing the
// one it stands for; a dependency on another task submitted again becomes
// a dependency on its replacement, and they go in dependency order.
int Resubmit(Client& c, const std::string& job, bool json) {
  auto jobs = c.Jobs(job);
  if (!jobs.ok()) return Error(jobs.status());
  if (jobs->empty()) return Error(NoSuchJob(job));
  auto failed = c.List(job, TaskFilter::kFailed);
  if (!failed.ok()) return Error(failed.status());
  SortByIndex(*failed);
  std::unordered_map<TaskId, TaskId, TaskIdHash> replacement;
  std::vector<const TaskInfo*> again;
  size_t skipped = 0;
  for (const auto& r : *failed) {
    if (!r.spec) {
      ++skipped;
      continue;
    }
    replacement[r.id] = TaskId::New();
    again.push_back(&r);
  }
  if (skipped) {
    std::fprintf(stderr,
                 "taskctl: %zu failed tasks cannot be submitted again from here (Python tasks, or "
                 "recorded by an earlier version)\n",
                 skipped);
  }
  const std::vector<size_t> order = DependencyOrder(again);
  std::vector<TaskOptions> tasks;
  std::vector<TaskId> ids;
  for (size_t i : order) {
    TaskOptions t = *again[i]->spec;
    for (auto* deps : {&t.after.ids, &t.follow.ids}) {
      for (TaskId& dep : *deps) {
        if (auto it = replacement.find(dep); it != replacement.end()) dep = it->second;
      }
    }
    t.job = job;
    t.replaces = again[i]->id;
    tasks.push_back(std::move(t));
    ids.push_back(replacement[again[i]->id]);
  }
  if (!tasks.empty()) {
    auto sent = c.SubmitMany(tasks, ids);
    if (!sent.ok()) return Error(sent.status());
    if (auto recorded = AwaitRecorded(c, ids); !recorded.ok()) return Error(recorded);
  }
  for (size_t k = 0; k < order.size(); ++k) {
    const TaskId& old_id = again[order[k]]->id;
    if (json) {
      std::printf("%s\n", Value({{"id", ids[k].ToHex()}, {"replaces", old_id.ToHex()}}).dump().c_str());
    } else {
      std::printf("%s replaces %s\n", ids[k].ToHex().c_str(), old_id.ToHex().c_str());
    }
  }
  if (!json) std::fprintf(stderr, "taskctl: %zu tasks submitted again in job %s\n", tasks.size(), job.c_str());
  return kOk;
}

}  // namespace

void AddResubmit(CLI::App& app, Subcommands& out) {
  struct Flags {
    std::string job, status = "failed";
    bool json = false;
  };
  auto f = std::make_shared<Flags>();
  auto* sub = app.add_subcommand(
      "resubmit", "submit a job's failed tasks again; prints each new id with the one it replaces");
  sub->add_option("--job", f->job, "the job")->required();
  sub->add_option("--status", f->status, "which tasks: failed (the default)");
  sub->add_flag("--json", f->json, "print JSON lines");
  out.push_back({sub,
                 [f] {
                   if (ParseTaskFilter(f->status) != TaskFilter::kFailed) {
                     return Status::InvalidArgument(
                         "--status failed is the only tasks resubmit takes, not '" + f->status + "'");
                   }
                   return Status::Ok();
                 },
                 [f](Client& c) { return Resubmit(c, f->job, f->json); }});
}

}  // namespace ztask::ctl
