// taskhub's command line: the flags and what main does before serving, so
// that taskcontroller (the hub and the scheduler in one process) takes the
// same flags with the same checks.
#ifndef ZTASK_HUB_FLAGS_H_
#define ZTASK_HUB_FLAGS_H_

#include <CLI/CLI.hpp>
#include <string>

#include "hub/server.h"

namespace ztask::hub {

struct HubFlags {
  HubOptions options;
  std::string log_level = "info";
};

// Declares every flag of taskhub on `app`, bound to `flags`.
void AddHubFlags(CLI::App& app, HubFlags& flags);

// What the process needs before a hub serves in it: SIGXFSZ ignored (a
// write past a file size limit fails with EFBIG, which the store reports,
// instead of killing the process) and the open-file limit raised (each
// engine's connection holds a descriptor; `per_engine` of them, 2 when the
// scheduler is in the process too), said in the log when it caps the
// engines.
void PrepareHubProcess(const HubOptions& options, uint64_t per_engine = 1);

}  // namespace ztask::hub

#endif  // ZTASK_HUB_FLAGS_H_
