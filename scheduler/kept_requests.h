// KeptRequests: the request of every task taken and not finished, as it
// came (packed_request.h), kept to go to an engine again on a retry or after
// an engine's loss, and how many tasks each client has waiting or running
// (TaskLimits::max_queued_per_client).
//
// It must not decide anything about a task: the core says when a request
// goes, and when it is forgotten (a final action).
//
// Thread safety: owned by the scheduler's loop thread.
#ifndef ZTASK_SCHEDULER_KEPT_REQUESTS_H_
#define ZTASK_SCHEDULER_KEPT_REQUESTS_H_

#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/flat_id_map.h"
#include "base/string_hash.h"
#include "scheduler/packed_request.h"
#include "ztask/task_id.h"

namespace ztask::scheduler {

class KeptRequests {
 public:
  // The request of a task kept here, or nullptr.
  const PackedRequest* Find(const TaskId& id) const { return requests_.find(id); }
  void Prefetch(const TaskId& id) const { requests_.prefetch(id); }

  // Keeps `request` (the client's session in request[0], then the message
  // as it came; copied) and counts it for its client. Returns false, and
  // keeps nothing, when a request of this id is kept already.
  bool Keep(const TaskId& id, std::span<const std::string_view> request) {
    auto [kept, added] = requests_.try_emplace(id);
    if (!added) return false;
    *kept = PackedRequest(request);
    // Looked up by the session's bytes, without making a string per task.
    auto queued = queued_per_client_.find(request[0]);
    if (queued == queued_per_client_.end()) {
      queued = queued_per_client_.emplace(request[0], 0).first;
    }
    ++queued->second;
    return true;
  }

  // Forgets the request of a task with its final outcome, and counts it
  // off its client's tasks. REQUIRES: `request` is Find(id).
  void Forget(const TaskId& id, const PackedRequest& request) {
    auto queued = queued_per_client_.find(request[0]);
    if (queued != queued_per_client_.end() && --queued->second == 0) {
      queued_per_client_.erase(queued);
    }
    requests_.erase(id);
  }

  // The tasks of `client` waiting or running.
  size_t QueuedFor(std::string_view client) const {
    auto queued = queued_per_client_.find(client);
    return queued == queued_per_client_.end() ? 0 : queued->second;
  }

 private:
  FlatIdMap<PackedRequest> requests_;
  std::unordered_map<std::string, size_t, protocol::StringHash, std::equal_to<>>
      queued_per_client_;
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_KEPT_REQUESTS_H_
