// The supervisor's control socket (internal to the cluster library).
#ifndef ZTASK_CLUSTER_CONTROL_H_
#define ZTASK_CLUSTER_CONTROL_H_

#include <cstdio>
#include <zmq.hpp>

#include "cluster/local_cluster.h"
#include "protocol/codec.h"
#include "protocol/replay_guard.h"
#include "protocol/security.h"
#include "protocol/wire.h"

namespace ztask::cluster {

struct LocalCluster::Control {
  explicit Control(const std::string& key) : signer(key) {}
  ~Control() {
    security.reset();  // before the socket and context
    if (drops.count() > 0) {
      std::fprintf(stderr, "taskcluster control: %llu dropped messages (%s)\n",
                   static_cast<unsigned long long>(drops.count()), drops.Summary().c_str());
    }
  }
  protocol::Signer signer;
  protocol::DropLog drops{"taskcluster control"};
  protocol::ReplayGuard guard;
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::router};
  std::unique_ptr<protocol::ServerSecurity> security;
};

}  // namespace ztask::cluster

#endif  // ZTASK_CLUSTER_CONTROL_H_
