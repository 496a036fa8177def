// taskcontroller's command line: every flag of taskhub and of
// taskscheduler, each declared once; a flag both take (--profile-dir,
// --ip, --durability, --keep-finished, --replay-window, --insecure,
// --log-level) goes to both.
//
// The hub's and the scheduler's own declarations (hub/flags.h,
// scheduler/flags.h) parse their part, with their checks and defaults, so
// the three programs never differ on what a flag means.
#ifndef ZTASK_CONTROLLER_COMMAND_LINE_H_
#define ZTASK_CONTROLLER_COMMAND_LINE_H_

#include <optional>
#include <string>
#include <vector>

#include "hub/flags.h"
#include "scheduler/flags.h"

namespace ztask::controller {

struct ControllerFlags {
  hub::HubFlags hub;
  scheduler::SchedulerFlags scheduler;
};

// Parses `words` (the arguments after the program's name) into `flags`.
// The exit code when the command line asks for none of the work (--help,
// --version: 0) or is wrong (one line on stderr: 2); nullopt to serve.
std::optional<int> ParseControllerFlags(const std::vector<std::string>& words,
                                        ControllerFlags& flags);

}  // namespace ztask::controller

#endif  // ZTASK_CONTROLLER_COMMAND_LINE_H_
