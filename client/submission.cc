// Submission and sending again: a task's options checked and encoded as a
// task_request, requests sent in batches to the scheduler, the flow control
// that keeps at most max_in_flight tasks without a reply, and, after a
// reconnection, the requests a restarted scheduler never had sent again.
//
// Must not: read replies or records itself (replies.cc and queries.cc do),
// or wait except through the Waiter. Thread safety: the client's one
// thread, like all of Client::Impl.
#include <algorithm>

#include "client/client_impl.h"
#include "protocol/codec.h"
#include "protocol/placeholders.h"
#include "protocol/resources.h"

namespace ztask {

using client::Turn;

Result<std::vector<TaskId>> Client::Impl::SubmitMany(const std::vector<TaskOptions>& tasks,
                                                     const std::vector<TaskId>* ids) {
  std::vector<std::vector<std::string>> requests;
  requests.reserve(tasks.size());
  std::vector<TaskId> out;
  out.reserve(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) {
    const TaskId id = ids ? (*ids)[i] : TaskId::New();
    auto request = EncodeRequest(tasks[i], id);
    if (!request.ok()) {
      if (tasks.size() == 1) return request.status();
      return Status::InvalidArgument("task " + std::to_string(i + 1) + " of " +
                                     std::to_string(tasks.size()) + ": " +
                                     request.status().message());
    }
    requests.push_back(std::move(*request));
    out.push_back(id);
  }
  size_t first = 0, bytes = 0;  // the batch being gathered: requests[first..i)
  for (size_t i = 0; i < requests.size(); ++i) {
    if (unanswered_.size() + (i - first) >= max_in_flight_) {
      // No room for more without replies: what is gathered goes first.
      ZTASK_RETURN_IF_ERROR(SendRequests(requests, out, first, i));
      first = i;
      bytes = 0;
      ZTASK_RETURN_IF_ERROR(WaitForRoom());
    }
    for (const auto& f : requests[i]) bytes += f.size();
    if (i + 1 - first >= protocol::kMaxBatchTasks || bytes >= protocol::kMaxBatchBytes) {
      ZTASK_RETURN_IF_ERROR(SendRequests(requests, out, first, i + 1));
      first = i + 1;
      bytes = 0;
    }
  }
  ZTASK_RETURN_IF_ERROR(SendRequests(requests, out, first, requests.size()));
  return out;
}

namespace {

// The task's spec (what it runs), or what is wrong with it.
Result<protocol::TaskSpec> SpecOf(const TaskOptions& o) {
  if (!o.command.empty() && !o.function.empty()) {
    return Status::InvalidArgument("a task is a command or a function, not both");
  }
  if (o.command.empty() && o.function.empty()) {
    return Status::InvalidArgument("a task needs a command or a function");
  }
  protocol::TaskSpec spec;
  spec.kind = client::TaskKindName(o.command.empty() ? client::TaskKind::kFunction
                                                     : client::TaskKind::kCommand);
  spec.function = o.function;
  spec.argv = o.command;
  if (!o.args.is_null()) {
    std::vector<uint8_t> packed = Value::to_msgpack(o.args);
    spec.args.bytes.assign(packed.begin(), packed.end());
    // What the engine and the hub could not read is refused here, at once.
    if (Status s = protocol::CheckValue(spec.args.bytes); !s.ok()) {
      return Status::InvalidArgument("the task's arguments break the limits on values: " +
                                     s.message());
    }
  }
  spec.cwd = o.cwd;
  spec.env = o.env;
  spec.label = o.label;
  if (o.pass_results) spec.pass_results = true;
  if (!o.job.empty()) spec.job = o.job;
  spec.array_index = o.array_index;
  if (std::string e = protocol::AmountsError(o.slots, o.resources, 0); !e.empty()) {
    return Status::InvalidArgument("a task's " + e);
  }
  ZTASK_RETURN_IF_ERROR(protocol::CheckPlaceholders("--stdout", o.stdout_path));
  ZTASK_RETURN_IF_ERROR(protocol::CheckPlaceholders("--stderr", o.stderr_path));
  if (!o.stdout_path.empty()) spec.stdout_path = o.stdout_path;
  if (!o.stderr_path.empty()) spec.stderr_path = o.stderr_path;
  spec.replaces = o.replaces;
  return spec;
}

// Slots and resources absent when the defaults: a plain task's metadata
// stays as it was.
protocol::RoutingMeta RoutingOf(const TaskOptions& o) {
  return {client::ToWire(o.after),
          client::ToWire(o.follow),
          o.targets,
          o.timeout,
          o.time_limit,
          o.retries,
          o.priority,
          o.slots != 1 ? std::optional<int32_t>(o.slots) : std::nullopt,
          o.resources.empty() ? std::nullopt : std::optional(o.resources)};
}

}  // namespace

// A task_request's frames (signature, an empty HMAC, header, parent,
// metadata, content), or what is wrong with the task.
Result<std::vector<std::string>> Client::Impl::EncodeRequest(const TaskOptions& o,
                                                             const TaskId& id) {
  auto spec = SpecOf(o);
  if (!spec.ok()) return spec.status();
  std::vector<std::string> frames{std::string(protocol::kProtocolSignature), std::string()};
  for (auto& f : protocol::EncodeInner(RequestHeader(id), std::nullopt, RoutingOf(o), *spec)) {
    frames.push_back(std::move(f));
  }
  return frames;
}

// Sends requests[first..end): one alone as a task_request, more as one
// task_batch; they count as unanswered from then on.
Status Client::Impl::SendRequests(std::vector<std::vector<std::string>>& requests,
                                  const std::vector<TaskId>& ids, size_t first, size_t end) {
  if (first == end) return Status::Ok();
  // Each id's entries are far apart in tables past the cache: their
  // misses overlap while the message is made and sent.
  for (size_t i = first; i < end; ++i) {
    submitted_.prefetch(ids[i]);
    unanswered_.Prefetch(ids[i]);
  }
  std::vector<std::string> message;
  if (end - first == 1) {
    message = std::move(requests[first]);
    // Dated as it leaves: a batch of the same call, made later, may have
    // gone before it.
    message[protocol::kFrameHeader] = protocol::EncodeHeader(RequestHeader(ids[first]));
    std::vector<std::string_view> views(message.begin(), message.end());
    message[protocol::kFrameHmac] = signer_.Sign(views);
  } else {
    std::vector<std::vector<std::string>> inner;
    inner.reserve(end - first);
    for (size_t i = first; i < end; ++i) {
      inner.emplace_back(std::make_move_iterator(requests[i].begin() + protocol::kFrameHeader),
                         std::make_move_iterator(requests[i].end()));
    }
    const protocol::Header header{TaskId::Random(), protocol::MsgType::kTaskBatch, session_,
                                  base::WallMicros()};
    message = protocol::EncodeBatch(signer_, header, inner);
  }
  ZTASK_RETURN_IF_ERROR(SendToScheduler(message));
  for (size_t i = first; i < end; ++i) submitted_.try_emplace(ids[i], 1);
  unanswered_.Keep(std::move(message), std::span(ids).subspan(first, end - first));
  return Status::Ok();
}

// Flow control: at most max_in_flight_ tasks without a reply.
Status Client::Impl::WaitForRoom() {
  return waiter_.Until(
      [&] { return Turn::DoneIf(unanswered_.size() < max_in_flight_); },
      client::DeadlineAfter(kStalledS),
      [&] {
        return Status::Unavailable("no reply from the scheduler at " + info_.scheduler.client +
                                   " for " + std::to_string(static_cast<int>(kStalledS)) +
                                   " s with " + std::to_string(unanswered_.size()) +
                                   " tasks in flight");
      },
      scheduler_);
}

// A full send queue (the scheduler reads slower than this client writes)
// is waited out, not an error.
Status Client::Impl::SendToScheduler(const std::vector<std::string>& request) {
  Status sent = protocol::SendEncoded(scheduler_, {}, request);
  if (sent.ok()) return sent;  // the common case: no wait
  auto cannot_send = [&] {
    return Status::Unavailable("cannot send to the scheduler at " + info_.scheduler.client +
                               ": " + sent.message());
  };
  return waiter_.Until(
      [&] {
        if (!protocol::IsQueueFull(sent)) return Turn::Done(cannot_send());
        sent = protocol::SendEncoded(scheduler_, {}, request);
        return sent.ok() ? Turn::Done() : Turn::Again();
      },
      client::DeadlineAfter(kStalledS), cannot_send,
      scheduler_, ZMQ_POLLOUT);
}

// The connection to the scheduler was made again (it restarted, or the
// network came back). For each task with no reply yet, the hub says
// whether it finished (its record is the reply), is known (a restarted
// scheduler restored it from the hub and will reply), or was never
// recorded: that one the scheduler may never have had, so it goes again.
void Client::Impl::Resync() {
  if (unanswered_.empty()) return;
  const std::vector<TaskId> all = unanswered_.Ids();
  std::vector<TaskId> unknown;
  for (size_t at = 0; at < all.size(); at += kWaitAtOnce) {
    const std::vector<TaskId> ids(
        all.begin() + static_cast<std::ptrdiff_t>(at),
        all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), at + kWaitAtOnce)));
    auto records = Fetch(ids, true, &unknown);
    if (!records.ok()) return;  // the hub is away too: the next check asks again
    for (const TaskInfo& r : *records) {
      if (r.finished()) Answered(r.id, r.ok() ? ErrorType::kNone : r.error_type);
    }
  }
  SendAgain(std::move(unknown));
}

// Under the same ids (a scheduler that has one ignores it), in the order
// they were first sent: a task comes after those it depends on, which may
// be among them.
void Client::Impl::SendAgain(std::vector<TaskId> never_recorded) {
  std::erase_if(never_recorded, [&](const TaskId& id) { return !unanswered_.contains(id); });
  unanswered_.SortAsSent(never_recorded);
  for (const TaskId& id : never_recorded) {
    const std::vector<std::string_view> kept = unanswered_.Request(id);
    if (kept.empty()) continue;
    std::vector<std::string> frames{std::string(protocol::kProtocolSignature), std::string(),
                                    protocol::EncodeHeader(RequestHeader(id))};
    frames.insert(frames.end(), kept.begin() + 1, kept.end());
    std::vector<std::string_view> views(frames.begin(), frames.end());
    frames[protocol::kFrameHmac] = signer_.Sign(views);
    // Not waited out here (a wait would check for replies, and could come
    // back here): a full queue leaves the rest unanswered and unrecorded,
    // for the next check (kRecheckS) to send.
    if (!protocol::SendEncoded(scheduler_, {}, frames).ok()) return;
  }
}

}  // namespace ztask
