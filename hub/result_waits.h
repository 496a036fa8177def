// ResultWaits: result_requests that asked to be answered once their tasks
// are recorded, or final (protocol.md, "wait"), held by the hub until they
// are or until their time is up. No I/O: the hub's loop parks a request,
// tells it what happened to a task, and answers what comes out.
//
// Bounded: at most kMaxWaits requests and kMaxIds ids held in all; past
// either, Park refuses and the request is answered at once.
//
// Thread safety: none; owned by the hub's loop thread.
#ifndef ZTASK_HUB_RESULT_WAITS_H_
#define ZTASK_HUB_RESULT_WAITS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "protocol/messages.h"
#include "ztask/task_id.h"

namespace ztask::hub {

class ResultWaits {
 public:
  static constexpr size_t kMaxWaits = 10000;
  static constexpr size_t kMaxIds = 100000;
  // The longest a request may be held.
  static constexpr int64_t kMaxWaitUs = 60'000'000;

  enum class Until { kRecorded, kFinal };

  struct Wait {
    std::string route;        // the asker's routing id on the query socket
    protocol::Header header;  // the request's, for the reply's parent
    protocol::TaskIdList request;
    Until until = Until::kFinal;
    int64_t deadline_us = 0;
  };

  // "recorded" or "final"; anything else is nullopt.
  static std::optional<Until> Parse(std::string_view word);

  // Holds `wait` until each of `pending` (those of its ids not there yet)
  // is; false (nothing held) when full.
  bool Park(Wait wait, const std::vector<TaskId>& pending);
  // The hub applied a monitor message to `id`'s record (`final`: its final
  // outcome). Returns the waits that have all they asked for now.
  std::vector<Wait> Noted(const TaskId& id, bool final);
  // The waits whose time is up at `now_us`, to be answered as things are.
  std::vector<Wait> Expired(int64_t now_us);
  // The earliest deadline, or INT64_MAX when nothing waits.
  int64_t NextDeadline() const;

  size_t size() const { return held_.size(); }
  size_t ids_held() const { return ids_; }

 private:
  struct Held {
    Wait wait;
    size_t remaining = 0;
  };
  // Takes `key` out of held_ and its ids out of by_id_.
  Wait Release(uint64_t key);

  uint64_t next_key_ = 1;
  std::map<uint64_t, Held> held_;
  std::unordered_map<TaskId, std::vector<uint64_t>, TaskIdHash> by_id_;  // ids not there yet
  std::multimap<int64_t, uint64_t> by_deadline_;
  size_t ids_ = 0;
};

}  // namespace ztask::hub

#endif  // ZTASK_HUB_RESULT_WAITS_H_
