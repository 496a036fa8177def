// KeptRequests: the requests of a client's tasks that have no reply yet,
// kept to be sent again after a reconnection, as the messages they were
// sent in: one task_batch (or task_request) per send, freed at once when
// the last of its tasks has its reply, and by id only where it is in which
// message. A reply then frees nothing, or one message for a whole batch,
// where a string per frame per task, freed one by one, was about 6% of the
// client's time per no-op task (e2e_bench, 2 engines). A message stays
// whole until the last of its tasks has its reply.
//
// Must not: send or sign (submission.cc does, with a fresh date).
// Thread safety: none; the client's one thread.
#ifndef ZTASK_CLIENT_KEPT_REQUESTS_H_
#define ZTASK_CLIENT_KEPT_REQUESTS_H_

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/flat_id_map.h"
#include "protocol/codec.h"

namespace ztask::client {

class KeptRequests {
 public:
  // Keeps `message`, as sent: a task_request for ids[0] when `ids` has one
  // id, else a task_batch holding the requests of `ids` in that order.
  // An id kept already keeps its earlier request.
  void Keep(std::vector<std::string> message, std::span<const TaskId> ids);
  // Lets go of id's request: false when it was not kept.
  bool Forget(const TaskId& id);

  bool contains(const TaskId& id) const { return places_.contains(id); }
  size_t size() const { return places_.size(); }
  bool empty() const { return places_.empty(); }
  // Starts reading the memory that Forget(id) or contains(id) reads, so
  // that the lookups of a batch of replies overlap.
  void Prefetch(const TaskId& id) const { places_.prefetch(id); }

  // Every kept id, in no order.
  std::vector<TaskId> Ids() const;
  // Orders kept ids as they were first sent.
  void SortAsSent(std::vector<TaskId>& ids) const;
  // The frames of id's request, as a task_request: header, parent,
  // metadata and content (as first sent; the caller dates and signs it).
  // Empty when id is not kept. Valid until the next Keep or Forget.
  std::vector<std::string_view> Request(const TaskId& id);

 private:
  struct Place {
    uint64_t message = 0;  // number, counted from the first kept
    uint32_t index = 0;    // of the request in its message
  };
  struct Message {
    std::vector<std::string> frames;
    uint32_t unanswered = 0;
    bool batch = false;  // else a task_request
  };
  static constexpr uint64_t kNone = UINT64_MAX;

  void DropAnswered();

  FlatIdMap<Place> places_;
  std::deque<Message> messages_;  // messages_[0] is number first_message_
  uint64_t first_message_ = 0;
  // The requests of the message last read by Request, as views into it.
  uint64_t unpacked_message_ = kNone;
  protocol::BatchMessages unpacked_;
};

}  // namespace ztask::client

#endif  // ZTASK_CLIENT_KEPT_REQUESTS_H_
