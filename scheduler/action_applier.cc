// The core's actions carried out (action_applier.h).
#include "scheduler/action_applier.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cassert>

namespace ztask::scheduler {
namespace {

using protocol::MsgType;

}  // namespace

void ActionApplier::ApplyAll(Msg reply) {
  // Local: applying an action may apply others (then this call's buffers
  // stay its own).
  std::vector<Action> batch = std::move(spare_);
  while (true) {
    core_.TakeActions(&batch);  // the core keeps batch's room for its next
    if (batch.empty()) break;
    for (const Action& a : batch) Apply(a, reply);
  }
  spare_ = std::move(batch);
  SendTakeBacks();
}

void ActionApplier::Apply(const Action& a, Msg reply) {
  if (a.kind == Action::Kind::kRetire) return Retire(a);
  if (a.kind == Action::Kind::kTakeBack) return TakeBack(a);
  const PackedRequest* request = requests_.Find(a.task);
  if (!request) {
    spdlog::error("no request kept for task {}: a bug", a.task.ToHex());
    return;
  }
  switch (a.kind) {
    case Action::Kind::kDispatch:
      return Dispatch(a, *request);
    case Action::Kind::kDeliver:
      Deliver(a, *request, reply);
      return requests_.Forget(a.task, *request);
    case Action::Kind::kFail:
      Fail(a, *request);
      return requests_.Forget(a.task, *request);
    case Action::Kind::kRetry:
      return Retried(a, *request, reply);
    case Action::Kind::kReturned:
    case Action::Kind::kUnmet:
      return Returned(a, *request);
    case Action::Kind::kRetire:
    case Action::Kind::kTakeBack:
      return;  // handled above
  }
}

void ActionApplier::Retire(const Action& a) {
  const std::string uuid = engines_.UuidOf(a.slot);
  // On the connection the engine proved; none: it is gone already.
  const std::string* route = targets_.engine_routes.RouteOf(uuid);
  if (!route) return;
  const std::string_view prefix[] = {*route};
  const protocol::Header header = builder_.NewHeader(MsgType::kEngineRetire);
  // A drained engine holds no task, so nothing of ours fills its queue;
  // one that cannot take this is gone, and is removed as any engine gone.
  (void)protocol::SendEncoded(
      targets_.engine_socket, prefix,
      protocol::EncodeMessage(signer_, header, std::nullopt, protocol::Empty{},
                              protocol::EngineRef{a.engine_id, uuid}));
  spdlog::info("engine {} is drained and retires", a.engine_id);
}

void ActionApplier::TakeBack(const Action& a) { take_back_.emplace_back(a.slot, a.task); }

void ActionApplier::SendTakeBacks() {
  if (take_back_.empty()) return;
  std::sort(take_back_.begin(), take_back_.end());
  for (size_t i = 0; i < take_back_.size();) {
    const EngineSlot slot = take_back_[i].first;
    protocol::TaskIdList ids;
    for (; i < take_back_.size() && take_back_[i].first == slot; ++i) {
      ids.task_ids.push_back(take_back_[i].second);
    }
    // Through the engines' outbox, so that it leaves after every batch that
    // carried these tasks, this turn's included: asked back before it came,
    // a task would stay queued behind the long one.
    protocol::Frames out;
    out.push_back(protocol::Frame(engines_.UuidOf(slot)));
    builder_.Append(out, MsgType::kTaskTakeBack,
                    protocol::Frame(protocol::EncodeParent(std::nullopt)),
                    protocol::Frame(protocol::EncodeBody(protocol::Empty{})),
                    protocol::Frame(protocol::EncodeBody(ids)));
    targets_.engines.Send(out);
    spdlog::debug("asked {} tasks back from an engine stuck on a long one", ids.task_ids.size());
  }
  take_back_.clear();
}

void ActionApplier::Dispatch(const Action& a, const PackedRequest& request) {
  // The request as the client sent it, from its header on: the batch's
  // signature covers it.
  protocol::DispatchInfo dispatch{a.attempt, static_cast<int32_t>(core_.live_engines())};
  if (!a.run_after.IsZero()) dispatch.run_after = a.run_after;
  hub_.RecordAssigned(a.task, a.slot, a.engine_id, a.attempt);
  request.From(1 + protocol::kFrameHeader, &frames_);
  targets_.engines.Batch(engines_.UuidOf(a.slot), frames_, &dispatch);
}

void ActionApplier::Deliver(const Action& a, const PackedRequest& request, Msg reply) {
  assert(!reply.empty());  // only an engine's reply finishes a task well
  hub_.RecordOutcome(a, /*final=*/true, reply[1 + protocol::kFrameParent],
                     reply[1 + protocol::kFrameContent], reply.subspan(1 + protocol::kFirstBuffer));
  // A reply for the client: header, parent, metadata, content, buffers.
  targets_.clients.Batch(request[0], reply.subspan(1 + protocol::kFrameHeader));
}

void ActionApplier::Fail(const Action& a, const PackedRequest& request) {
  protocol::ReplyMeta meta{false, a.error, std::nullopt, a.attempt};
  if (a.engine_id >= 0) meta.engine_id = a.engine_id;
  protocol::TaskResult result;
  result.error_message = a.message;
  const std::string content = protocol::EncodeBody(result);
  const std::string_view parent = request[1 + protocol::kFrameHeader];
  hub_.RecordOutcome(a, /*final=*/true, parent, content);
  const std::string header = protocol::EncodeHeader(builder_.NewHeader(MsgType::kTaskReply));
  const std::string encoded_meta = protocol::EncodeBody(meta);
  const std::string_view out[] = {header, parent, encoded_meta, content};
  targets_.clients.Batch(request[0], out);
}

void ActionApplier::Retried(const Action& a, const PackedRequest& request, Msg reply) {
  if (a.from_reply) {
    assert(!reply.empty());
    hub_.RecordOutcome(a, /*final=*/false, reply[1 + protocol::kFrameParent],
                       reply[1 + protocol::kFrameContent],
                       reply.subspan(1 + protocol::kFirstBuffer));
    return;
  }
  protocol::TaskResult result;
  result.error_message = a.message;
  hub_.RecordOutcome(a, /*final=*/false, request[1 + protocol::kFrameHeader],
                     protocol::EncodeBody(result));
}

// Sent ahead and not run: the hub records the task as waiting again.
void ActionApplier::Returned(const Action& a, const PackedRequest& request) {
  protocol::TaskResult result;
  result.error_message =
      a.kind == Action::Kind::kUnmet
          ? "engine " + std::to_string(a.engine_id) + " cannot run it: " + a.message
      : !a.message.empty() ? a.message
                           : "sent ahead to engine " + std::to_string(a.engine_id) +
                                 ", not run there: its dependency did not succeed there";
  hub_.RecordOutcome(a, /*final=*/false, request[1 + protocol::kFrameHeader],
                     protocol::EncodeBody(result));
}

}  // namespace ztask::scheduler
