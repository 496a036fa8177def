// Open-file limits (base/open_files.h).
#include "base/open_files.h"

#include <sys/resource.h>

namespace ztask::base {

uint64_t RaiseOpenFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) ::getrlimit(RLIMIT_NOFILE, &limit);
  }
  return limit.rlim_cur;
}

uint64_t RaiseOpenFileLimitTo(uint64_t wanted) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < wanted) {
    const rlimit raised{wanted, wanted};
    // Refused without the privilege: the hard limit stays.
    (void)::setrlimit(RLIMIT_NOFILE, &raised);
  }
  return RaiseOpenFileLimit();
}

}  // namespace ztask::base
