// The run report of a cluster, from its hub: engines started and restarted,
// tasks ok and failed, and the time from all engines registered to the last
// task finished.
#ifndef ZTASK_CLUSTER_REPORT_H_
#define ZTASK_CLUSTER_REPORT_H_

#include <string>

#include "ztask/client.h"

namespace ztask::cluster {

// A few lines for people.
Result<std::string> RunReport(Client& client);

}  // namespace ztask::cluster

#endif  // ZTASK_CLUSTER_REPORT_H_
