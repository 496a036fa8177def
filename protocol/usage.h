// What a daemon's main does with a command line it cannot parse: one line on
// stderr naming what was wrong, and exit code 2 (help and version as CLI11
// prints them, with its code).
#ifndef ZTASK_PROTOCOL_USAGE_H_
#define ZTASK_PROTOCOL_USAGE_H_

#include <CLI/CLI.hpp>
#include <cstdio>

namespace ztask {

inline int UsageExit(CLI::App& app, const CLI::ParseError& e, const char* program) {
  if (e.get_exit_code() == 0) return app.exit(e);
  std::fprintf(stderr, "%s: %s (see %s --help)\n", program, e.what(), program);
  return 2;
}

}  // namespace ztask

#endif  // ZTASK_PROTOCOL_USAGE_H_
