// Child processes and polling with a deadline, for tests: the cluster's own.
#ifndef ZTASK_TESTS_SUPPORT_PROCESS_H_
#define ZTASK_TESTS_SUPPORT_PROCESS_H_

#include "cluster/child_process.h"

namespace ztask::testing {
using cluster::ChildProcess;
using cluster::WaitFor;
}  // namespace ztask::testing

#endif  // ZTASK_TESTS_SUPPORT_PROCESS_H_
