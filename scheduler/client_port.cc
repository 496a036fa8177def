// The client ROUTER, inbound: tasks and aborts (client_port.h).
#include "scheduler/client_port.h"

#include <spdlog/spdlog.h>

namespace ztask::scheduler {
namespace {

using protocol::MsgType;
using protocol::Share;
using protocol::View;

}  // namespace

size_t ClientPort::OnMessage(protocol::Frames& frames) {
  std::vector<std::string_view> views;
  auto header = inbound_.OpenFromPeer(frames, &views, &guard_, routes_);
  const std::string_view peer = frames.empty() ? "" : View(frames[0]);
  if (!header.ok()) {
    inbound_.Drop(peer, header.status());
    return 0;
  }
  switch (header->type) {
    case MsgType::kTaskRequest:
      OnTaskRequest(*header, protocol::Views(frames));
      return 1;
    case MsgType::kTaskBatch:
      return inbound_.ForEachInBatch(
          *header, views, frames, MsgType::kTaskRequest,
          [&](const protocol::Header& task, Msg request) { OnTaskRequest(task, request); },
          [&](const protocol::Header& task, Msg) { actions_.Prefetch(task.id); });
    case MsgType::kAbortRequest:
      OnAbortRequest(views, frames);
      return 0;
    default:
      inbound_.Drop(peer, "unexpected " + std::string(protocol::MsgTypeName(header->type)) +
                              " on the client socket");
      return 0;
  }
}

void ClientPort::OnTaskRequest(const protocol::Header& header, Msg msg) {
  const std::string_view peer = msg[0];
  auto meta = protocol::DecodeBody<protocol::RoutingMeta>(msg[1 + protocol::kFrameMeta]);
  if (!meta.ok()) return inbound_.Drop(peer, "task_request metadata: " + meta.status().message());
  // Duplicates first: a task sent again is not a new task, and must not be
  // rejected for a limit it already counts towards.
  if (const PackedRequest* known = requests_.Find(header.id)) {
    // A client sends again what it has no reply for after it reconnects:
    // the task is here already, and its reply will come.
    if ((*known)[0] == peer) {
      ++counters_.resubmitted;
      return;
    }
    ++counters_.duplicate_tasks;
    return inbound_.Drop(peer, "task " + header.id.ToHex() + " was submitted twice");
  }
  if (core_.HasFinished(header.id)) {
    // Finished here already (a client sending again what it had no reply
    // for finds its outcome in the hub).
    ++counters_.duplicate_tasks;
    return inbound_.Drop(peer, "task " + header.id.ToHex() + " was submitted twice");
  }
  if (std::string why = OverLimit(*meta, msg, peer); !why.empty()) {
    return Reject(header, msg, why);
  }
  // Monitor first, so the hub hears of the task before of its outcome.
  hub_.RecordCopy(MsgType::kTaskSubmitted, msg);
  requests_.Keep(header.id, msg);
  if (!core_.Submit(ToSubmission(header.id, *meta))) {
    // Finished here already (a client sending again what it had no reply
    // for finds its outcome in the hub).
    ++counters_.duplicate_tasks;
    inbound_.Drop(peer, "task " + header.id.ToHex() + " was submitted twice");
    return requests_.Forget(header.id, *requests_.Find(header.id));
  }
  actions_.ApplyAll(ActionApplier::kNoReply);
}

std::string ClientPort::OverLimit(const protocol::RoutingMeta& meta, Msg msg,
                                  std::string_view client) const {
  size_t bytes = 0;
  for (size_t i = 1 + protocol::kFrameContent; i < msg.size(); ++i) bytes += msg[i].size();
  if (bytes > limits_.max_task_bytes) {
    return "the task is " + std::to_string(bytes) + " bytes, over the limit of " +
           std::to_string(limits_.max_task_bytes) + " (taskscheduler --max-task-bytes)";
  }
  if (std::string e = protocol::AmountsError(meta.slots, meta.resources, 0); !e.empty()) {
    return "the task asks for " + e;
  }
  const size_t deps = meta.after.ids.size() + meta.follow.ids.size();
  if (deps > limits_.max_dependencies) {
    return "the task has " + std::to_string(deps) + " dependencies, over the limit of " +
           std::to_string(limits_.max_dependencies) + " (taskscheduler --max-dependencies)";
  }
  // A client with none waiting is never refused (even with a limit of 0).
  const size_t queued = requests_.QueuedFor(client);
  if (queued > 0 && queued >= limits_.max_queued_per_client) {
    return "this client has " + std::to_string(queued) +
           " tasks waiting or running, the limit (taskscheduler "
           "--max-queued-per-client); "
           "wait for some before submitting more";
  }
  return "";
}

void ClientPort::Reject(const protocol::Header& header, Msg msg, const std::string& why) {
  ++counters_.rejected;
  spdlog::warn("rejected task {} of client {}: {}", header.id.ToHex(),
               protocol::PrintablePeer(msg[0]), why);
  hub_.RecordCopy(MsgType::kTaskSubmitted, msg);
  Action a{.kind = Action::Kind::kFail,
           .task = header.id,
           .error = ErrorType::kTaskRejected,
           .message = why};
  actions_.Fail(a, PackedRequest(msg));
}

void ClientPort::OnAbortRequest(const std::vector<std::string_view>& views,
                                protocol::Frames& frames) {
  auto request = protocol::DecodeBody<protocol::AbortRequest>(views[protocol::kFrameContent]);
  if (!request.ok()) {
    return inbound_.Drop(View(frames[0]), "abort_request: " + request.status().message());
  }
  AbortOutcome outcome = core_.Abort(request->task_ids);
  actions_.ApplyAll(ActionApplier::kNoReply);
  protocol::AbortReply reply{outcome.aborted, outcome.running, outcome.finished, outcome.unknown};
  protocol::Frames out;
  out.push_back(std::move(frames[0]));
  builder_.Append(out, MsgType::kAbortReply, Share(frames[1 + protocol::kFrameHeader]),
                  protocol::Frame(protocol::EncodeBody(protocol::Empty{})),
                  protocol::Frame(protocol::EncodeBody(reply)));
  out_.Send(out);
}

}  // namespace ztask::scheduler
