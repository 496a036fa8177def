// The scheduler socket and the worker thread that owns it
// (engine/scheduler_link.h).
#include "engine/scheduler_link.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <utility>

#include "base/clock.h"
#include "protocol/codec.h"
#include "protocol/security.h"

namespace ztask::engine {
namespace {

using protocol::MsgType;

// While tasks wait (fenced, or for room), looked at again this often: the
// loop thread lifts the fence when the hub answers, and tells no one.
constexpr int64_t kFencedLookUs = 20'000;

}  // namespace

SchedulerLink::SchedulerLink(const RunnerSetup& setup, EngineCore& core, std::atomic<bool>& stop)
    : setup_(setup),
      core_(core),
      stop_(stop),
      scheduler_(*setup.context, zmq::socket_type::dealer),
      wake_(*setup.context, zmq::socket_type::pair) {}

SchedulerLink::~SchedulerLink() = default;

Status SchedulerLink::Connect(const std::string& wake_endpoint) {
  wake_.connect(wake_endpoint);
  scheduler_.set(zmq::sockopt::linger, 2000);
  protocol::SecureClient(scheduler_, *setup_.info);
  ZTASK_RETURN_IF_ERROR(protocol::Connect(scheduler_, setup_.info->scheduler.engine));
  watch_ = std::make_unique<protocol::ReconnectWatch>(*setup_.context, scheduler_);
  return Status::Ok();
}

Status SchedulerLink::Start() {
  pool_ = std::make_unique<Pool>(setup_.options->slots, setup_, core_, stop_);
  ZTASK_RETURN_IF_ERROR(pool_->Start());
  SendReady(std::nullopt);
  thread_ = std::thread([this] { Main(); });
  return Status::Ok();
}

void SchedulerLink::Join() {
  if (thread_.joinable()) thread_.join();
  if (pool_) pool_->Stop();
}

void SchedulerLink::KillTasks() {
  if (pool_) pool_->KillAll();
}

// The worker thread puts the tasks that came in the core for the runners,
// sends the replies when due, and notices when the connection to the
// scheduler was made again (Resume).
void SchedulerLink::Main() {
  Woken woken;
  base::Reactor reactor;
  // Tasks (TakeTasks) and a reconnection (watch_) are read after a turn
  // in which their socket had something (each look at an empty socket
  // costs system calls); the replies (Look) after every turn.
  reactor.Add(scheduler_, [&] { woken.tasks = true; });
  reactor.Add(wake_, [&] {
    woken.any = true;
    zmq::message_t word;
    while (wake_.recv(word, zmq::recv_flags::dontwait)) {
      woken.ready_again = woken.ready_again || protocol::View(word) == kReady;
    }
  });
  reactor.Add(watch_->socket(), [&] { woken.watch = true; });
  reactor.Add(pool_->fd(), [] {});
  while (!stop_.load()) {
    const int64_t wait_us = Look();
    woken = {};
    if (!reactor.Turn(std::chrono::microseconds(wait_us)).ok()) break;
    if (woken.any && stop_.load()) break;  // the loop says stop
    if (woken.watch && watch_->Reconnected()) {
      Resume(/*resend_replies=*/true);
    } else if (woken.ready_again) {
      Resume(/*resend_replies=*/false);
    }
    if (woken.tasks) TakeTasks();
  }
  FlushReplies();
}

// Wakes the runners for the tasks that may start, sends the replies that
// are due, and returns how long to wait (less than 0: for what comes).
int64_t SchedulerLink::Look() {
  std::vector<std::vector<Ledger::Frames>> due;
  int64_t wait_us = -1;
  if (ready_unsent_) {
    // As after a reconnection: every reply waiting goes before the
    // engine_ready that lists what is held, both taken at once, so that a
    // task is either answered or listed (a restarted scheduler takes one
    // neither answered nor listed as never run here).
    std::optional<std::vector<TaskId>> held;
    {
      std::lock_guard<std::mutex> lock(pool_->mutex());
      while (core_.HasUnsent()) due.push_back(core_.TakeUnsent());
      if (ready_with_held_) held = core_.Held();
    }
    for (const auto& batch : due) SendBatch(batch);
    due.clear();
    SendReady(std::move(held));
    if (ready_unsent_) wait_us = kFencedLookUs;
  }
  {
    std::lock_guard<std::mutex> lock(pool_->mutex());
    // While tasks wait, this looks again within kFencedLookUs: the fence
    // may close before a runner takes them (the runner then waits) and
    // lift later with nothing else to wake anyone.
    if (core_.HasQueued()) {
      wait_us = kFencedLookUs;
      if (core_.MayStart()) pool_->WakeRunners();
    }
    // Nothing runs here: what is answered goes before this waits.
    if (core_.HasUnsent() && (pool_->idle() || core_.FlushDue())) {
      while (core_.HasUnsent()) due.push_back(core_.TakeUnsent());
    }
    if (core_.HasUnsent()) {
      const int64_t until_due =
          std::max<int64_t>(0, core_.FlushDueAtUs() - base::MonotonicMicros());
      wait_us = wait_us < 0 ? until_due : std::min(wait_us, until_due);
    }
    pool_->Looked(core_.HasUnsent());
  }
  for (const auto& batch : due) SendBatch(batch);
  return wait_us;
}

// Reads every message that came from the scheduler into the core.
// Decoded before the core is locked: the runners wait only for Arrive.
void SchedulerLink::TakeTasks() {
  protocol::Frames frames;
  std::vector<Job> jobs;
  std::vector<TaskId> take_back;
  while (!stop_.load() && protocol::TryReceive(scheduler_, frames)) {
    OnMessage(frames, jobs, take_back);
  }
  if (jobs.empty() && take_back.empty()) return;
  size_t given = 0;
  {
    std::lock_guard<std::mutex> lock(pool_->mutex());
    for (Job& job : jobs) core_.Arrive(std::move(job));
    // After the tasks that came with them: asked back, a task has come.
    if (!take_back.empty()) given = core_.TakeBack(take_back);
  }
  if (!take_back.empty()) {
    spdlog::debug("the scheduler asked {} tasks back; {} had not started", take_back.size(), given);
  }
}

void SchedulerLink::OnMessage(const protocol::Frames& frames, std::vector<Job>& jobs,
                              std::vector<TaskId>& take_back) {
  const std::vector<std::string_view> views = protocol::Views(frames);
  Status checked = protocol::CheckFrames(*setup_.signer, protocol::Limits{}, views);
  auto header = checked.ok() ? protocol::DecodeHeader(views[protocol::kFrameHeader])
                             : Result<protocol::Header>(checked);
  if (header.ok() && header->type == MsgType::kEngineRetire) {
    spdlog::info("drained: the scheduler retires this engine");
    stop_.store(true);
    wake_.send(zmq::str_buffer("retire"), zmq::send_flags::dontwait);
    return;
  }
  if (header.ok() && header->type == MsgType::kTaskTakeBack) {
    auto ids = protocol::DecodeBody<protocol::TaskIdList>(views[protocol::kFrameContent]);
    if (!ids.ok()) {
      spdlog::warn("dropped a message from the scheduler: task_take_back: {}",
                   ids.status().ToString());
      return;
    }
    take_back.insert(take_back.end(), ids->task_ids.begin(), ids->task_ids.end());
    return;
  }
  protocol::TaskBatch batch;
  using Tasks = Result<protocol::BatchMessages>;
  Tasks tasks = !header.ok() ? Tasks(header.status())
                : header->type == MsgType::kTaskBatch
                    ? protocol::UnpackBatch(views, &batch)
                    : Tasks(Status::Malformed("a " +
                                              std::string(protocol::MsgTypeName(header->type)) +
                                              " on the scheduler socket"));
  if (tasks.ok() && !batch.dispatch) tasks = Status::Malformed("a task_batch with no dispatch");
  if (!tasks.ok()) {
    spdlog::warn("dropped a message from the scheduler: {}", tasks.status().ToString());
    return;
  }
  for (size_t i = 0; i < tasks->size(); ++i) {
    auto job = ReadJob((*tasks)[i], (*batch.dispatch)[i]);
    if (!job.ok()) {
      spdlog::warn("dropped a message the engine cannot take as a task: {}",
                   job.status().ToString());
      continue;
    }
    jobs.push_back(std::move(*job));
  }
}

// The connection to the scheduler was made again (the scheduler may have
// restarted and missed the latest replies: they go again, and a scheduler
// that had them ignores them), or the hub had lost this engine and it
// registered again (the scheduler forgot it meanwhile, and failed over its
// tasks). Then engine_ready, with the list of tasks held here.
void SchedulerLink::Resume(bool resend_replies) {
  TakeTasks();
  size_t resent = 0;
  std::optional<size_t> dropped;
  std::vector<TaskId> held;
  {
    std::lock_guard<std::mutex> lock(pool_->mutex());
    if (resend_replies) resent = core_.ResendReplies();
    dropped = core_.DropIfRemoved();
    held = core_.Held();
  }
  if (dropped) {
    spdlog::warn("dropped {} tasks held while the hub had removed this engine (not started)",
                 *dropped);
  }
  FlushReplies();
  spdlog::info("ready again for the scheduler: {} recent replies sent again, holding {} tasks",
               resent, held.size());
  SendReady(std::move(held));
}

// engine_ready: this engine's capacity (absent when one slot and no
// resources), and after a reconnection the tasks it holds.
void SchedulerLink::SendReady(std::optional<std::vector<TaskId>> held) {
  const EngineOptions& options = *setup_.options;
  protocol::EngineReady ready{core_.engine_id(), setup_.uuid, std::move(held), std::nullopt,
                              std::nullopt};
  if (options.slots != 1) ready.slots = options.slots;
  if (!options.resources.empty()) ready.resources = options.resources;
  protocol::Header header{TaskId::Random(), MsgType::kEngineReady, setup_.uuid, base::WallMicros()};
  ready_with_held_ = ready.held.has_value();
  Status sent = protocol::SendEncoded(
      scheduler_, {},
      protocol::EncodeMessage(*setup_.signer, header, std::nullopt, protocol::Empty{}, ready));
  if (!sent.ok() && !ready_unsent_) {
    spdlog::warn("engine_ready could not be sent ({}); it goes again until the scheduler takes it",
                 sent.message());
  }
  ready_unsent_ = !sent.ok();
}

// Sends the replies not sent yet, in task_batches within the protocol's
// limits.
void SchedulerLink::FlushReplies() {
  std::vector<std::vector<Ledger::Frames>> batches;
  {
    std::lock_guard<std::mutex> lock(pool_->mutex());
    while (core_.HasUnsent()) batches.push_back(core_.TakeUnsent());
  }
  for (const auto& batch : batches) SendBatch(batch);
}

void SchedulerLink::SendBatch(const std::vector<Ledger::Frames>& replies) {
  protocol::Header header{TaskId::Random(), MsgType::kTaskBatch, setup_.uuid, base::WallMicros()};
  std::vector<std::span<const std::string>> messages;
  messages.reserve(replies.size());
  for (const Ledger::Frames& reply : replies) messages.emplace_back(*reply);
  const std::vector<std::string> frames = protocol::EncodeBatch(*setup_.signer, header, messages);
  // A full queue (the scheduler reads slower than engines answer) is
  // waited out: a reply is never dropped here. Stopping, it is tried once
  // more and left to the socket's linger.
  for (;;) {
    if (!protocol::IsQueueFull(protocol::SendEncoded(scheduler_, {}, frames)) || stop_.load()) {
      return;
    }
    base::WaitReady(scheduler_, ZMQ_POLLOUT, std::chrono::milliseconds(100));
  }
}

}  // namespace ztask::engine
