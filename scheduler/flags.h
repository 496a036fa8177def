// taskscheduler's command line: the flags, and what they mean once parsed,
// so that taskcontroller (the hub and the scheduler in one process) takes
// the same flags with the same checks.
#ifndef ZTASK_SCHEDULER_FLAGS_H_
#define ZTASK_SCHEDULER_FLAGS_H_

#include <CLI/CLI.hpp>
#include <string>

#include "scheduler/server.h"

namespace ztask::scheduler {

struct SchedulerFlags {
  SchedulerOptions options;
  std::string ip;
  std::string log_level = "info";
  std::string hwm = "auto";
};

// The schemes' names, comma-separated, for help and errors.
std::string SchemeList();
// Declares every flag of taskscheduler on `app`, bound to `flags`.
void AddSchedulerFlags(CLI::App& app, SchedulerFlags& flags);
// After a parse: --hwm and --ip into the options.
void ApplySchedulerFlags(SchedulerFlags& flags);
// The line the log starts with: scheme, HWM, endpoints.
void LogServing(const SchedulerOptions& options, const SchedulerServer& server);

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_FLAGS_H_
