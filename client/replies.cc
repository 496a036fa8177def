// Replies and waits: the scheduler's replies to this client's tasks, read
// whenever the client does anything, and the waits for them (WaitReplies)
// or for the hub's records of any task (Wait).
//
// Must not: send tasks (submission.cc sends, and sends again after a
// reconnection), or wait except through the Waiter. Thread safety: the
// client's one thread, like all of Client::Impl.
#include <algorithm>
#include <set>

#include "client/client_impl.h"
#include "protocol/codec.h"

namespace ztask {

using client::Turn;

void Client::Impl::Notice() {
  DrainReplies();
  if (reconnected_ && base::MonotonicSeconds() >= next_resync_) {
    Resync();  // the hub may have been away at the reconnection too
    next_resync_ = base::MonotonicSeconds() + kRecheckS;
  }
}

bool Client::Impl::Ready(const TaskId& id) {
  DrainReplies();
  return replied_.contains(id);
}

std::optional<ErrorType> Client::Impl::ReplyOf(const TaskId& id) {
  DrainReplies();
  const uint8_t* replied = replied_.find(id);
  if (!replied) return std::nullopt;
  return static_cast<ErrorType>(*replied - 1);
}

Status Client::Impl::WaitReplies(const std::vector<TaskId>& ids, double timeout_s) {
  const base::Deadline deadline = client::DeadlineAfter(std::max(0.0, timeout_s));
  // A task with neither a reply remembered nor one to come (answered long
  // ago, or submitted elsewhere) is waited for in the hub's record.
  std::vector<TaskId> elsewhere;
  for (const TaskId& id : ids) {
    if (!replied_.contains(id) && !unanswered_.contains(id)) elsewhere.push_back(id);
  }
  if (!elsewhere.empty()) ZTASK_RETURN_IF_ERROR(Wait(elsewhere, timeout_s));
  // After a reconnection, a reply the scheduler sent while this client was
  // not connected is only in the hub's record: the Waiter's notice looks
  // there too.
  size_t next = 0;  // ids[..next) have their reply
  return waiter_.Until(
      [&] {
        while (next < ids.size() &&
               (replied_.contains(ids[next]) || !unanswered_.contains(ids[next]))) {
          ++next;
        }
        return Turn::DoneIf(next == ids.size());
      },
      deadline,
      [&] { return Status::TimedOut("no reply within " + std::to_string(timeout_s) + " s"); },
      scheduler_);
}

namespace {

// The state of one Client::Wait between its rounds.
struct Awaited {
  // A task just submitted (here or by another process) may not have
  // reached the hub yet: an id is unknown for good once the hub has
  // recorded or finished none of the awaited tasks for this long (a hub
  // that is behind, still taking them in, is not a reason to give up).
  static constexpr double kGrace = 3.0;

  std::set<TaskId> pending;
  double progress_at = base::MonotonicSeconds();
  size_t last_unknown = SIZE_MAX, last_pending = 0;
  int backoff_ms = 1;

  // Every one must finish: the first `most` are asked for, then the next,
  // so that the hub holds a bounded request.
  std::vector<TaskId> Next(size_t most) const {
    std::vector<TaskId> ask;
    for (auto it = pending.begin(); it != pending.end() && ask.size() < most; ++it) {
      ask.push_back(*it);
    }
    return ask;
  }
  // Whether the hub got further since the last round: fewer unknown or
  // fewer unfinished.
  void NoteProgress(size_t unknown) {
    if (unknown < last_unknown || pending.size() < last_pending) {
      progress_at = base::MonotonicSeconds();
    }
    last_unknown = unknown;
    last_pending = pending.size();
  }
  // A hub that could not hold the request (it holds at most so many)
  // answers at once: it is not asked again at once.
  std::chrono::milliseconds PauseAfter(double asked, int32_t held_ms) {
    if (base::MonotonicSeconds() - asked >= held_ms / 2000.0) {
      backoff_ms = 1;
      return std::chrono::milliseconds(0);
    }
    const std::chrono::milliseconds pause(backoff_ms);
    backoff_ms = std::min(backoff_ms * 2, 50);
    return pause;
  }
};

}  // namespace

Status Client::Impl::Wait(const std::vector<TaskId>& ids, double timeout_s) {
  const double start = base::MonotonicSeconds();
  Awaited awaited{{ids.begin(), ids.end()}};
  awaited.last_pending = awaited.pending.size();
  // The hub answers when they are all final, or after a second at most: no
  // polling, and unknown ids and the timeout are looked at each second.
  auto round = [&]() -> Turn {
    const double left = timeout_s < 0 ? 1.0 : timeout_s - (base::MonotonicSeconds() - start);
    const auto held_ms = static_cast<int32_t>(std::clamp(left, 0.0, 1.0) * 1000);
    const double asked = base::MonotonicSeconds();
    std::vector<TaskId> unknown;
    auto records = Fetch(awaited.Next(kWaitAtOnce), true, &unknown, client::HeldUntil::kFinal,
                         held_ms);
    if (!records.ok()) return Turn::Done(records.status());
    const auto pause = awaited.PauseAfter(asked, held_ms);
    for (const auto& r : *records) {
      if (r.finished()) awaited.pending.erase(r.id);
    }
    if (awaited.pending.empty()) return Turn::Done();
    awaited.NoteProgress(unknown.size());
    for (const TaskId& id : unknown) {
      if (base::MonotonicSeconds() - awaited.progress_at > Awaited::kGrace &&
          !submitted_.contains(id)) {
        return Turn::Done(Status::NotFound("unknown task id " + id.ToHex()));
      }
    }
    return Turn::Again(pause);
  };
  auto timed_out = [&] {
    return Status::TimedOut(std::to_string(awaited.pending.size()) + " of " +
                            std::to_string(ids.size()) + " tasks had not finished after " +
                            std::to_string(timeout_s) + " s");
  };
  return waiter_.Until(round, client::DeadlineAfter(timeout_s), timed_out, scheduler_);
}

// A verified task_reply, or a task_batch of them. A batch's replies are
// read first and counted after: the table entries of each are misses far
// apart, fetched meanwhile, all at once.
void Client::Impl::NoteReplies(const protocol::Header& header,
                               std::span<const std::string_view> views) {
  if (header.type == protocol::MsgType::kTaskReply) {
    if (auto reply = ReadReply(views)) Answered(reply->first, reply->second);
    return;
  }
  if (header.type != protocol::MsgType::kTaskBatch) return;
  auto replies = protocol::UnpackBatch(views);
  if (!replies.ok()) return;
  answers_.clear();
  for (const auto& r : *replies) {
    auto reply = ReadReply(r);
    if (!reply) continue;
    replied_.prefetch(reply->first);
    unanswered_.Prefetch(reply->first);
    answers_.push_back(*reply);
  }
  for (const auto& [id, error] : answers_) Answered(id, error);
}

std::optional<std::pair<TaskId, ErrorType>> Client::Impl::ReadReply(
    std::span<const std::string_view> views) {
  auto parent = protocol::DecodeParentId(views[protocol::kFrameParent]);
  auto meta = protocol::DecodeBody<protocol::ReplyMeta>(views[protocol::kFrameMeta]);
  if (!parent.ok() || !*parent || !meta.ok()) return std::nullopt;
  return std::pair{**parent, meta->ok ? ErrorType::kNone : meta->error_type};
}

// A reply may come twice (from the scheduler and from the hub after a
// reconnection): it counts once.
void Client::Impl::Answered(const TaskId& id, ErrorType error) {
  replied_.try_emplace(id, static_cast<uint8_t>(static_cast<uint8_t>(error) + 1));
  unanswered_.Forget(id);
  // Nothing is left that a reconnection could have lost a reply of.
  if (unanswered_.empty()) reconnected_ = false;
}

void Client::Impl::DrainReplies() {
  if (scheduler_watch_->Reconnected()) {
    reconnected_ = true;
    Resync();
    next_resync_ = base::MonotonicSeconds() + kRecheckS;
  }
  protocol::Frames frames;
  while (protocol::TryReceive(scheduler_, frames)) {
    auto views = protocol::Views(frames);
    if (!protocol::CheckFrames(signer_, protocol::Limits{}, views).ok()) continue;
    auto header = protocol::DecodeHeader(views[protocol::kFrameHeader]);
    if (header.ok()) NoteReplies(*header, views);
  }
}

}  // namespace ztask
