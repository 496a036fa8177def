// The scheduler socket and the worker thread that owns it
// (engine/scheduler_link.h).
#include "engine/scheduler_link.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <utility>

#include "base/clock.h"
#include "protocol/codec.h"
#include "protocol/security.h"

namespace ztask::engine {
namespace {

using protocol::MsgType;

// With tasks queued, the other sockets are looked at once a millisecond,
// not between every two tasks: each look is a few system calls, a visible
// share of a no-op's cost.
constexpr int64_t kLookEveryUs = 1000;
// Fenced with tasks held: looked at again this often (the loop thread lifts
// the fence when the hub answers).
constexpr int kFencedLookMs = 20;

}  // namespace

SchedulerLink::SchedulerLink(const RunnerSetup& setup, EngineCore& core, std::atomic<bool>& stop)
    : setup_(setup),
      core_(core),
      stop_(stop),
      scheduler_(*setup.context, zmq::socket_type::dealer),
      wake_(*setup.context, zmq::socket_type::pair),
      runner_(setup) {}

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
  if (setup_.options->slots > 1) {
    pool_ = std::make_unique<Pool>(setup_.options->slots, setup_, core_, stop_);
    ZTASK_RETURN_IF_ERROR(pool_->Start());
  }
  SendReady(std::nullopt);
  thread_ = std::thread([this] { Main(); });
  return Status::Ok();
}

void SchedulerLink::Join() {
  if (thread_.joinable()) thread_.join();
  if (pool_) pool_->Stop();
}

void SchedulerLink::KillTasks() {
  runner_.Kill();
  if (pool_) pool_->KillAll();
}

// The worker thread takes the tasks that came, runs them one by one and
// replies, with no hand-off between threads (one slot), or starts each
// queued task on the pool, in the order they came, once its slots and
// resources are free, and sends the replies the runners hand back (more).
// Between tasks it reads what else came, and notices when the connection to
// the scheduler was made again (Resume).
void SchedulerLink::Main() {
  std::unique_lock<std::mutex> io(io_mutex_);
  Woken woken;
  base::Reactor reactor;
  // Tasks (TakeTasks) and a reconnection (watch_) are looked at after every
  // turn: these only end the wait.
  reactor.Add(scheduler_, [] {});
  reactor.Add(wake_, [&] {
    woken.any = true;
    zmq::message_t word;
    while (wake_.recv(word, zmq::recv_flags::dontwait)) {
      woken.ready_again = woken.ready_again || protocol::View(word) == kReady;
    }
  });
  reactor.Add(watch_->socket(), [] {});
  if (pool_) reactor.Add(pool_->fd(), [&] { woken.finished = true; });
  int64_t looked_us = 0;
  while (!stop_.load()) {
    const int64_t now = base::MonotonicMicros();
    if (!pool_ && core_.HasQueued() && core_.MayStart() && now - looked_us < kLookEveryUs) {
      TakeTasks();
      RunNext(io);
      continue;
    }
    looked_us = now;
    if (!Turn(reactor, woken)) break;
    AfterTurn(woken, io);
  }
  FlushReplies();
  runner_.CloseSockets();
}

// Waits for what comes; false when the worker must end.
bool SchedulerLink::Turn(base::Reactor& reactor, Woken& woken) {
  if (pool_) StartWhatFits();
  const bool fenced = !core_.MayStart();
  // Nothing left to run here: what is answered goes before this waits.
  if (pool_ || !core_.HasQueued() || fenced) FlushReplies();
  const auto wait = std::chrono::milliseconds(!core_.HasQueued() ? -1
                                              : fenced            ? kFencedLookMs
                                              : pool_             ? -1
                                                                  : 0);
  woken = {};
  if (!reactor.Turn(wait).ok()) return false;
  return !(woken.any && stop_.load());  // the loop says stop
}

void SchedulerLink::AfterTurn(const Woken& woken, std::unique_lock<std::mutex>& io) {
  if (watch_->Reconnected()) {
    Resume(/*resend_replies=*/true);
  } else if (woken.ready_again) {
    Resume(/*resend_replies=*/false);
  }
  if (woken.finished) CollectFinished();
  TakeTasks();
  if (!pool_) RunNext(io);
}

// Runs the first queued task, if any may start, and queues its reply. `io`
// is released while the task runs.
void SchedulerLink::RunNext(std::unique_lock<std::mutex>& io) {
  if (stop_.load()) return;
  std::optional<EngineCore::Start> start = core_.NextToRun();
  FlushIfFull();  // the answers of tasks that needed no run
  if (!start) return;
  switch (core_.FlushBeforeRun(start->job)) {
    case EngineCore::BeforeRun::kFlushNow:
      FlushReplies();
      break;
    case EngineCore::BeforeRun::kFlushIfItLasts:
      // If this task runs long, the loop thread sends what waits.
      if (!flush_asked_.exchange(true)) {
        wake_.send(zmq::str_buffer("flush"), zmq::send_flags::dontwait);
      }
      break;
    case EngineCore::BeforeRun::kNothingWaits:
      break;
  }
  io.unlock();
  Done done = runner_.Run(start->job, start->grant, core_.engine_id());
  io.lock();
  core_.Finished(done, start->grant);
  FlushIfFull();
}

void SchedulerLink::FlushWhileTaskRuns() {
  std::unique_lock<std::mutex> io(io_mutex_, std::try_to_lock);
  if (!io.owns_lock()) return;  // the worker holds them: it sends them itself
  if (!core_.HasUnsent()) {
    flush_asked_.store(false);
    return;
  }
  if (core_.FlushWhileRunning()) FlushReplies();
}

// Pooled: hands the runners each queued task the core starts.
void SchedulerLink::StartWhatFits() {
  if (stop_.load()) return;
  for (EngineCore::Start& start : core_.StartWhatFits()) pool_->Hand(std::move(start));
  FlushIfFull();
}

// Pooled: the replies of what the runners finished.
void SchedulerLink::CollectFinished() {
  for (Pool::Finished& f : pool_->TakeFinished()) {
    core_.Finished(f.done, f.grant);
    FlushIfFull();
  }
}

// Reads every message that came from the scheduler into the core.
void SchedulerLink::TakeTasks() {
  protocol::Frames frames;
  while (!stop_.load() && protocol::TryReceive(scheduler_, frames)) OnMessage(frames);
}

void SchedulerLink::OnMessage(const protocol::Frames& frames) {
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
  protocol::TaskBatch batch;
  using Tasks = Result<std::vector<std::vector<std::string_view>>>;
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
    core_.Arrive(std::move(*job));
    FlushIfFull();
  }
}

// The connection to the scheduler was made again (the scheduler may have
// restarted and missed the latest replies: they go again, and a scheduler
// that had them ignores them), or the hub had lost this engine and it
// registered again (the scheduler forgot it meanwhile, and failed over its
// tasks). Then engine_ready, with the list of tasks held here.
void SchedulerLink::Resume(bool resend_replies) {
  TakeTasks();
  const size_t resent = resend_replies ? core_.ResendReplies() : 0;
  if (pool_) CollectFinished();
  if (std::optional<size_t> dropped = core_.DropIfRemoved()) {
    spdlog::warn("dropped {} tasks held while the hub had removed this engine (not started)",
                 *dropped);
  }
  std::vector<TaskId> held = core_.Held();
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
  (void)protocol::SendEncoded(scheduler_, {},
                              protocol::EncodeMessage(*setup_.signer, header, std::nullopt,
                                                      protocol::Empty{}, ready));
}

// Sends the replies not sent yet, in task_batches within the protocol's
// limits. REQUIRES: io_mutex_.
void SchedulerLink::FlushReplies() {
  while (core_.HasUnsent()) SendBatch(core_.TakeUnsent());
}

void SchedulerLink::SendBatch(const std::vector<std::vector<std::string>>& replies) {
  protocol::Header header{TaskId::Random(), MsgType::kTaskBatch, setup_.uuid, base::WallMicros()};
  const std::vector<std::string> frames = protocol::EncodeBatch(*setup_.signer, header, replies);
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
