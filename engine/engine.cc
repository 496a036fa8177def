// The engine's loop: registration and heartbeats with the hub, tasks from
// the scheduler, and one worker thread that runs them so that heartbeats go
// on while a task runs.
#include "ztask/engine.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <zmq.hpp>

#include "base/clock.h"
#include "base/reactor.h"
#include "base/signals.h"
#include "engine/capacity.h"
#include "engine/command.h"
#include "engine/ledger.h"
#include "engine/python_path.h"
#include "engine/python_worker.h"
#include "protocol/codec.h"
#include "protocol/connection_file.h"
#include "protocol/placeholders.h"
#include "protocol/request.h"
#include "protocol/resources.h"
#include "protocol/security.h"
#include "protocol/wire.h"

namespace ztask {
namespace {

using protocol::Frames;
using protocol::MsgType;

std::string SecondsText(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", s);
  return text;
}

using base::MonotonicMicros;

struct Job {
  protocol::Header header;
  protocol::RoutingMeta meta;
  protocol::TaskSpec spec;
  protocol::DispatchInfo dispatch;
  // Why the task cannot be read, or "": such a job is answered BadTask.
  std::string unreadable;
};

struct Done {
  protocol::Header request;
  protocol::ReplyMeta meta;
  protocol::TaskResult result;
};

// Runs tasks one at a time: the worker thread's own (an engine of one
// slot), or one thread of the pool (more). What a running task needs of
// its own: the process group of its command, a Python worker, a socket for
// the hub's queries.
struct Runner {
  std::atomic<int> group{0};
  std::unique_ptr<engine::PythonWorker> python;
  std::atomic<engine::PythonWorker*> python_for_kill{nullptr};
  std::unique_ptr<zmq::socket_t> query;
  std::thread thread;  // the pool's runners only

  // The command and the Python worker of the task running here die now.
  void Kill() {
    if (const int g = group.load(); g > 0) ::kill(-g, SIGKILL);
    if (engine::PythonWorker* p = python_for_kill.load()) p->Kill();
  }
};

// A task given to the pool, and what it holds.
struct Work {
  Job job;
  engine::Grant grant;
};
struct Finished {
  Done done;
  engine::Grant grant;
};

std::string Hostname() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

}  // namespace

bool TaskContext::OutOfTime() const { return deadline_us > 0 && base::MonotonicMicros() >= deadline_us; }

class EngineLoop final : public Stoppable {
 public:
  EngineLoop(const EngineOptions& options, const std::map<std::string, Function>& functions,
             protocol::ConnectionInfo info)
      : options_(options),
        functions_(functions),
        info_(std::move(info)),
        signer_(info_.key),
        uuid_(TaskId::Random().ToHex()),
        hub_(context_, zmq::socket_type::dealer),
        scheduler_(context_, zmq::socket_type::dealer),
        wake_loop_(context_, zmq::socket_type::pair),
        wake_worker_(context_, zmq::socket_type::pair),
        capacity_(options_.slots, options_.resources) {}

  ~EngineLoop() {
    if (done_fd_ >= 0) ::close(done_fd_);
  }

  Status Start() {
    // Started by mpiexec or srun: the rank names the engine across restarts
    // of the job.
    std::string launcher;
    if (const char* rank = std::getenv("OMPI_COMM_WORLD_RANK")) {
      mpi_rank_ = std::atoi(rank);
      launcher = "mpi";
    } else if (const char* proc = std::getenv("SLURM_PROCID")) {
      mpi_rank_ = std::atoi(proc);
      launcher = "slurm";
    }
    if (options_.name.empty()) {
      const std::string prefix =
          options_.name_prefix.empty() ? Hostname() + "-" + launcher + "-" : options_.name_prefix;
      options_.name = mpi_rank_ ? prefix + std::to_string(*mpi_rank_)
                                : Hostname() + "-" + std::to_string(::getpid());
    }
    for (auto* s : {&hub_, &scheduler_}) {
      s->set(zmq::sockopt::linger, 2000);
      protocol::SecureClient(*s, info_);
    }
    wake_loop_.bind("inproc://worker-" + uuid_);
    wake_worker_.connect("inproc://worker-" + uuid_);
    ZTASK_RETURN_IF_ERROR(protocol::Connect(hub_, info_.hub.registration));
    ZTASK_RETURN_IF_ERROR(Register());
    ZTASK_RETURN_IF_ERROR(protocol::Connect(scheduler_, info_.scheduler.engine));
    scheduler_watch_ = std::make_unique<protocol::ReconnectWatch>(context_, scheduler_);
    runners_.push_back(std::make_unique<Runner>());
    if (Pooled()) {
      done_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
      if (done_fd_ < 0) return Status::Unavailable("cannot make an eventfd for the task pool");
      for (int32_t i = 1; i < options_.slots; ++i) runners_.push_back(std::make_unique<Runner>());
      for (auto& runner : runners_) {
        Runner* r = runner.get();
        r->thread = std::thread([this, r] { PoolMain(*r); });
      }
    }
    SendReady(std::nullopt);
    worker_ = std::thread([this] { WorkerMain(); });
    return Status::Ok();
  }

  void Run() {
    base::Reactor reactor;
    reactor.Add(hub_, [this] { OnHub(); });
    reactor.Add(wake_loop_, [this] {
      // "flush" (replies wait while a task runs), or "retire" (stop_ is set).
      Frames frames;
      while (protocol::TryReceive(wake_loop_, frames)) {
      }
    });
    int64_t next_heartbeat = 0;
    while (!stop_.load()) {
      const int64_t now = base::MonotonicMicros();
      if (now >= next_heartbeat) {
        const protocol::Header sent = Send(hub_, MsgType::kHeartbeat, std::nullopt,
                                           protocol::Empty{}, protocol::EngineRef{engine_id_, uuid_});
        beats_sent_.emplace_back(sent.date_us, now);
        if (beats_sent_.size() > kBeatsKept) beats_sent_.pop_front();
        next_heartbeat = now + int64_t{heartbeat_ms_} * 1000;
      }
      // While the worker runs a task with replies not sent yet, they are
      // looked at every millisecond (FlushForWorker).
      const int64_t wait_us = flush_asked_.load() ? std::min<int64_t>(next_heartbeat - now, 1000)
                                                  : next_heartbeat - now;
      if (!reactor.Turn(std::chrono::microseconds(wait_us)).ok()) break;
      if (flush_asked_.load()) FlushForWorker();
    }
    Send(hub_, MsgType::kUnregistration, std::nullopt, protocol::Empty{},
         protocol::EngineRef{engine_id_, uuid_});
    // A command still running dies with the engine (its task is failed over
    // by the scheduler when the hub reports the engine gone).
    for (auto& runner : runners_) runner->Kill();
    stop_.store(true);
    wake_loop_.send(zmq::str_buffer("stop"), zmq::send_flags::dontwait);
    if (worker_.joinable()) worker_.join();
    {
      // Taken after stop_ was set: a runner is either before its check of
      // stop_ or waiting, and then woken.
      std::lock_guard<std::mutex> lock(pool_mutex_);
    }
    pool_wake_.notify_all();
    for (auto& runner : runners_) {
      if (runner->thread.joinable()) runner->thread.join();
    }
    spdlog::info("engine {} stopped", engine_id_);
  }

  void RequestStop() override { stop_.store(true); }

 private:
  // Returns the header sent.
  template <class Meta, class Content>
  protocol::Header Send(zmq::socket_t& socket, MsgType type,
                        const std::optional<protocol::Header>& parent, const Meta& meta,
                        const Content& content) {
    protocol::Header header{TaskId::Random(), type, uuid_, base::WallMicros()};
    (void)protocol::SendEncoded(socket, {},
                                protocol::EncodeMessage(signer_, header, parent, meta, content));
    return header;
  }

  // engine_ready: this engine's capacity (absent when one slot and no
  // resources), and after a reconnection the tasks it holds.
  void SendReady(std::optional<std::vector<TaskId>> held) {
    protocol::EngineReady ready{engine_id_, uuid_, std::move(held), std::nullopt, std::nullopt};
    if (options_.slots != 1) ready.slots = options_.slots;
    if (!options_.resources.empty()) ready.resources = options_.resources;
    Send(scheduler_, MsgType::kEngineReady, std::nullopt, protocol::Empty{}, ready);
  }

  Status Register() {
    protocol::RegistrationRequest request{uuid_,      options_.name, Hostname(),
                                          ::getpid(), std::nullopt,  std::nullopt, std::nullopt, std::nullopt};
    request.mpi_rank = mpi_rank_;
    if (options_.slots != 1) request.slots = options_.slots;
    if (!options_.resources.empty()) request.resources = options_.resources;
    if (engine_id_ >= 0) request.engine_id = engine_id_;  // a restarted hub gives it back
    // Only the answer to this request: refusals of earlier heartbeats may
    // still be on their way.
    const protocol::Header sent{TaskId::Random(), MsgType::kRegistrationRequest, uuid_,
                                base::WallMicros()};
    const int64_t sent_us = base::MonotonicMicros();
    protocol::AskOptions options;
    options.timeout = std::chrono::milliseconds(options_.register_timeout_ms);
    options.stop = &stop_;
    auto reply = protocol::Ask<MsgType::kRegistrationReply>(hub_, signer_, sent, request, options);
    if (!reply.ok()) {
      return Status::TimedOut("the hub at " + info_.hub.registration + " did not answer within " +
                              std::to_string(options_.register_timeout_ms) + " ms");
    }
    if (!reply->content.ok) return Status::Unavailable("the hub refused: " + reply->content.error);
    engine_id_ = reply->content.engine_id;
    registered_at_us_ = sent.date_us;
    heartbeat_ms_ = reply->content.heartbeat_ms > 0 ? reply->content.heartbeat_ms : 1000;
    const int32_t misses = std::max(1, reply->content.heartbeat_misses.value_or(3));
    fence_us_.store(int64_t{heartbeat_ms_} * misses * 1000);
    HeardFromHub(sent_us);
    spdlog::info("registered as engine {} ({})", engine_id_, options_.name);
    return Status::Ok();
  }

  void OnHub() {
    Frames frames;
    while (protocol::TryReceive(hub_, frames)) {
      auto views = protocol::Views(frames);
      if (!protocol::CheckFrames(signer_, {}, views).ok()) continue;
      auto header = protocol::DecodeHeader(views[protocol::kFrameHeader]);
      if (header.ok() && header->type == MsgType::kHeartbeat) {
        OnHeartbeatAnswer(views);
        continue;
      }
      auto reply = protocol::DecodeMessage<MsgType::kRegistrationReply>(signer_, {}, views);
      // The hub lost us (it restarted, or we were silent too long): it
      // refuses a heartbeat sent since we last registered.
      if (reply.ok() && !reply->content.ok && reply->parent &&
          reply->parent->type == MsgType::kHeartbeat &&
          reply->parent->date_us > registered_at_us_) {
        if (Fenced()) {
          // Silent past the hub's window: it removed this engine, and the
          // scheduler gave its tasks to others or failed them. What it
          // holds is dropped, not run (Resume), once it is registered again.
          spdlog::warn("the hub removed this engine while it was not heard from; registering "
                       "again, and the tasks it holds go back unstarted");
          drop_held_.store(true);
        } else {
          spdlog::warn("the hub no longer knows this engine; registering again");
        }
        if (Register().ok()) {
          // The scheduler heard that this engine was gone: it is ready again.
          wake_loop_.send(zmq::str_buffer("ready"), zmq::send_flags::dontwait);
        }
      }
    }
  }

  // ---- the fence ------------------------------------------------------------
  //
  // The hub removes an engine it has not heard from for heartbeat_misses
  // heartbeats, and the scheduler then gives its tasks to others (or fails
  // them). An engine that has had no answer to a heartbeat sent within that
  // window cannot know it was not removed, so it starts nothing until the
  // hub answers one again (it was not removed: it carries on) or it has
  // registered again (it was: what it held is dropped, answered "not run").
  // The window is counted from when the answered heartbeat left, not when
  // its answer came: the hub touched the engine after that, so the engine
  // always fences itself no later than the hub can remove it, and answers
  // that waited in its socket through a pause (SIGSTOP) do not count as
  // fresh. A task already running is not stopped (docs/reliability.md).

  // Any thread: whether tasks may start.
  bool Fenced() const {
    return drop_held_.load() || base::MonotonicMicros() - hub_heard_us_.load() > fence_us_.load();
  }

  // The loop thread: the hub answered what this engine sent at `sent_us`.
  void HeardFromHub(int64_t sent_us) {
    int64_t heard = hub_heard_us_.load();
    while (sent_us > heard && !hub_heard_us_.compare_exchange_weak(heard, sent_us)) {
    }
  }

  void OnHeartbeatAnswer(const std::vector<std::string_view>& views) {
    auto parent = protocol::DecodeParent(views[protocol::kFrameParent]);
    if (!parent.ok() || !*parent) return;
    for (const auto& [date_us, sent_us] : beats_sent_) {
      if (date_us != (*parent)->date_us) continue;
      const bool was_fenced = Fenced();
      HeardFromHub(sent_us);
      if (was_fenced && !Fenced()) spdlog::info("the hub answers again; starting tasks again");
      return;
    }
  }

  // ---- the worker thread ------------------------------------------------

  // The worker thread owns the scheduler socket from the moment it starts:
  // it takes the tasks that came, runs them one by one and replies, with no
  // hand-off between threads. The loop thread keeps heartbeating the hub
  // meanwhile. Between tasks it reads what else came, and notices when the
  // connection to the scheduler was made again (Resume).
  //
  // The worker holds io_mutex_ (the scheduler socket and the replies not
  // sent yet) at all times but while a task runs: then the loop thread may
  // send the replies that wait (FlushForWorker), so that a reply never
  // waits for the task after it.
  //
  // An engine of many slots runs its tasks in a pool of runner threads
  // instead (PoolMain): the worker thread starts each queued task, in the
  // order they came, once its slots and resources are free, and sends the
  // replies the runners hand back.
  void WorkerMain() {
    std::unique_lock<std::mutex> io(io_mutex_);
    const bool pooled = Pooled();
    bool ready_again = false, woken = false, finished = false;
    base::Reactor reactor;
    // Tasks (TakeTasks) and a reconnection (scheduler_watch_) are looked
    // at after every turn: these only end the wait.
    reactor.Add(scheduler_, [] {});
    reactor.Add(wake_worker_, [&] {
      woken = true;
      zmq::message_t word;
      while (wake_worker_.recv(word, zmq::recv_flags::dontwait)) {
        ready_again = ready_again || protocol::View(word) == "ready";
      }
    });
    reactor.Add(scheduler_watch_->socket(), [] {});
    if (pooled) reactor.Add(done_fd_, [&] { finished = true; });
    // With tasks queued, the other sockets are looked at once a
    // millisecond, not between every two tasks: each look is a few system
    // calls, a visible share of a no-op's cost.
    int64_t looked_us = 0;
    while (!stop_.load()) {
      const int64_t now = base::MonotonicMicros();
      const bool fenced = Fenced();
      if (!pooled && !queue_.empty() && !fenced && now - looked_us < kLookEveryUs) {
        TakeTasks();
        RunNext(io);
        continue;
      }
      looked_us = now;
      if (pooled) StartWhatFits();
      // Nothing left to run here: what is answered goes before this waits.
      if (pooled || queue_.empty() || fenced) FlushReplies();
      // Fenced with tasks held: looked at again shortly (the loop thread
      // lifts the fence when the hub answers).
      const auto wait = std::chrono::milliseconds(
          queue_.empty() ? -1 : fenced ? kFencedLookMs : pooled ? -1 : 0);
      ready_again = woken = finished = false;
      if (!reactor.Turn(wait).ok()) break;
      if (woken && stop_.load()) break;  // the loop says stop
      if (scheduler_watch_->Reconnected()) {
        Resume(/*resend_replies=*/true);
      } else if (ready_again) {
        Resume(/*resend_replies=*/false);
      }
      if (finished) CollectFinished();
      TakeTasks();
      if (!pooled) RunNext(io);
    }
    FlushReplies();
    runners_[0]->query.reset();
  }

  bool Pooled() const { return options_.slots > 1; }

  // What a task holds while it runs (an unreadable one: one slot; it is
  // answered BadTask).
  static int32_t SlotsOf(const Job& job) { return std::max(1, job.meta.slots.value_or(1)); }
  static const protocol::ResourceMap& ResourcesOf(const Job& job) {
    static const protocol::ResourceMap kNone;
    return job.meta.resources ? *job.meta.resources : kNone;
  }

  // Why `job` can never run here (it asks more than this engine has), or "".
  std::string NeverFits(const Job& job) const {
    return capacity_.NeverFits(SlotsOf(job), ResourcesOf(job));
  }

  Done Unsatisfiable(const Job& job, const std::string& why) const {
    Done done{job.header, {false, ErrorType::kUnsatisfiable, engine_id_, job.dispatch.attempt}, {}};
    done.result.error_message = "engine " + std::to_string(engine_id_) + ": the task " + why;
    done.result.started_us = done.result.completed_us = base::WallMicros();
    return done;
  }

  engine::Grant Take(const Job& job) { return capacity_.Take(SlotsOf(job), ResourcesOf(job)); }

  // On the worker thread (pooled): hands the runners each queued task, in
  // order, while the first one's slots and resources are free.
  void StartWhatFits() {
    while (!queue_.empty() && !stop_.load() && !Fenced()) {
      Job& job = queue_.front();
      std::optional<Done> answer;
      if (!ledger_.MayRun(job.dispatch.run_after)) {
        answer = NotRun(job);
      } else if (std::string why = NeverFits(job); !why.empty()) {
        answer = Unsatisfiable(job, why);
      } else if (!capacity_.FitsNow(SlotsOf(job), ResourcesOf(job))) {
        return;  // the first waits for what it needs: no task overtakes it
      }
      if (answer) {
        ledger_.Dequeued(job.header.id);
        Reply(*answer);
        queue_.pop_front();
        continue;
      }
      engine::Grant grant = Take(job);
      running_ids_.insert(job.header.id);
      {
        std::lock_guard<std::mutex> lock(pool_mutex_);
        work_.push_back({std::move(job), std::move(grant)});
      }
      queue_.pop_front();
      pool_wake_.notify_one();
    }
  }

  // On the worker thread (pooled): the replies of what the runners finished.
  void CollectFinished() {
    uint64_t count = 0;
    (void)!::read(done_fd_, &count, sizeof count);
    std::deque<Finished> finished;
    {
      std::lock_guard<std::mutex> lock(pool_mutex_);
      finished.swap(finished_);
    }
    for (Finished& f : finished) {
      capacity_.Give(f.grant);
      ledger_.Dequeued(f.done.request.id);
      running_ids_.erase(f.done.request.id);
      Reply(f.done);
    }
  }

  // A runner thread of the pool: runs what it is given until the engine stops.
  void PoolMain(Runner& runner) {
    for (;;) {
      Work work;
      {
        std::unique_lock<std::mutex> lock(pool_mutex_);
        pool_wake_.wait(lock, [&] { return stop_.load() || !work_.empty(); });
        if (stop_.load()) break;
        work = std::move(work_.front());
        work_.pop_front();
      }
      // Handed over just before the fence: not started, answered not run.
      Done done = Fenced() ? NotRun(work.job) : Execute(work.job, runner, work.grant);
      {
        std::lock_guard<std::mutex> lock(pool_mutex_);
        finished_.push_back({std::move(done), std::move(work.grant)});
      }
      const uint64_t one = 1;
      (void)!::write(done_fd_, &one, sizeof one);
    }
    runner.query.reset();
  }

  static constexpr int64_t kLookEveryUs = 1000;
  static constexpr int kFencedLookMs = 20;

  // Runs the first queued task, if any, and queues its reply. `io` is
  // released while the task runs.
  void RunNext(std::unique_lock<std::mutex>& io) {
    if (queue_.empty() || stop_.load() || Fenced()) return;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    ledger_.Dequeued(job.header.id);
    if (!ledger_.MayRun(job.dispatch.run_after)) return Reply(NotRun(job));
    if (std::string why = NeverFits(job); !why.empty()) return Reply(Unsatisfiable(job, why));
    if (ledger_.has_unsent()) {
      if (ledger_.FlushBeforeRun(job.spec.kind == "command", base::MonotonicMicros())) {
        FlushReplies();
      } else if (!flush_asked_.exchange(true)) {
        // If this task runs long, the loop thread sends what waits.
        wake_worker_.send(zmq::str_buffer("flush"), zmq::send_flags::dontwait);
      }
    }
    const engine::Grant grant = Take(job);
    io.unlock();
    Done done = Execute(job, *runners_[0], grant);
    io.lock();
    capacity_.Give(grant);
    Reply(done);
  }

  // On the loop thread: the replies that waited long enough go, when the
  // worker is running a task (it holds io_mutex_ otherwise, and sends them
  // itself).
  void FlushForWorker() {
    std::unique_lock<std::mutex> io(io_mutex_, std::try_to_lock);
    if (!io.owns_lock()) return;
    if (!ledger_.has_unsent()) {
      flush_asked_.store(false);
      return;
    }
    if (ledger_.FlushWhileRunning(base::MonotonicMicros())) FlushReplies();
  }

  // Sends the replies not sent yet, in task_batches within the protocol's
  // limits. REQUIRES: io_mutex_.
  void FlushReplies() {
    while (ledger_.has_unsent()) SendBatch(ledger_.TakeUnsent());
  }

  void SendBatch(const std::vector<std::vector<std::string>>& replies) {
    protocol::Header header{TaskId::Random(), MsgType::kTaskBatch, uuid_, base::WallMicros()};
    const std::vector<std::string> frames = protocol::EncodeBatch(signer_, header, replies);
    // A full queue (the scheduler reads slower than engines answer) is
    // waited out: a reply is never dropped here.
    // Stopping, it is tried once more and left to the socket's linger.
    bool sent = false;
    while (!sent) {
      sent = !protocol::IsQueueFull(protocol::SendEncoded(scheduler_, {}, frames)) || stop_.load();
      if (sent) break;
      base::WaitReady(scheduler_, ZMQ_POLLOUT, std::chrono::milliseconds(100));
    }
  }

  Done NotRun(const Job& job) const {
    Done done{job.header, {false, ErrorType::kNone, engine_id_, job.dispatch.attempt}, {}};
    done.meta.not_run = true;
    return done;
  }

  // Reads every message that came from the scheduler into the queue.
  void TakeTasks() {
    Frames frames;
    while (!stop_.load() && protocol::TryReceive(scheduler_, frames)) {
      const std::vector<std::string_view> views = protocol::Views(frames);
      Status checked = protocol::CheckFrames(signer_, protocol::Limits{}, views);
      auto header = checked.ok() ? protocol::DecodeHeader(views[protocol::kFrameHeader])
                                 : Result<protocol::Header>(checked);
      if (header.ok() && header->type == MsgType::kEngineRetire) {
        spdlog::info("drained: the scheduler retires this engine");
        RequestStop();
        wake_worker_.send(zmq::str_buffer("retire"), zmq::send_flags::dontwait);
        continue;
      }
      protocol::TaskBatch batch;
      auto tasks = header.ok() && header->type == MsgType::kTaskBatch
                       ? protocol::UnpackBatch(views, &batch)
                       : Result<std::vector<std::vector<std::string_view>>>(
                             header.ok() ? Status::Malformed("a " +
                                                             std::string(protocol::MsgTypeName(
                                                                 header->type)) +
                                                             " on the scheduler socket")
                                         : header.status());
      if (tasks.ok() && !batch.dispatch) tasks = Status::Malformed("a task_batch with no dispatch");
      if (!tasks.ok()) {
        spdlog::warn("dropped a message from the scheduler: {}", tasks.status().ToString());
        continue;
      }
      for (size_t i = 0; i < tasks->size(); ++i) {
        auto job = ReadJob((*tasks)[i], (*batch.dispatch)[i]);
        if (!job.ok()) {
          spdlog::warn("dropped a message the engine cannot take as a task: {}",
                       job.status().ToString());
          continue;
        }
        // Sent again while queued here: taken once. Ran here already (a
        // restarted scheduler did not hear): its reply again, not a second run.
        switch (ledger_.Arrive(job->header.id, job->dispatch.attempt, base::MonotonicMicros())) {
          case engine::Ledger::Arrival::kQueued:
            queue_.push_back(std::move(*job));
            break;
          case engine::Ledger::Arrival::kAnswered:
            if (ledger_.BatchFull()) FlushReplies();
            break;
          case engine::Ledger::Arrival::kDuplicate:
            break;
        }
      }
    }
  }

  // A task of a batch from the scheduler (whose signature covers it). Once
  // its header is read it is a job, answered like any other: a body that
  // cannot be read (beyond the limits on values, say) makes a job that
  // fails with BadTask when its turn comes. Only what cannot be answered (no
  // valid header) is an error here.
  Result<Job> ReadJob(const std::vector<std::string_view>& views,
                      const protocol::DispatchInfo& dispatch) const {
    auto header = protocol::DecodeHeader(views[protocol::kFrameHeader]);
    if (!header.ok()) return header.status();
    if (header->type != MsgType::kTaskRequest) {
      return Status::Malformed("a " + std::string(protocol::MsgTypeName(header->type)) +
                               " where a task_request was expected");
    }
    Job job{*header, {}, {}, dispatch, {}};
    auto meta = protocol::DecodeBody<protocol::RoutingMeta>(views[protocol::kFrameMeta]);
    auto spec = protocol::DecodeBody<protocol::TaskSpec>(views[protocol::kFrameContent]);
    if (!meta.ok()) {
      job.unreadable = "its metadata: " + meta.status().message();
    } else if (!spec.ok()) {
      job.unreadable = "its body: " + spec.status().message();
    } else {
      job.meta = std::move(*meta);
      job.spec = std::move(*spec);
    }
    return job;
  }

  // The connection to the scheduler was made again (the scheduler may have
  // restarted and missed the latest replies: they go again, and a scheduler
  // that had them ignores them), or the hub had lost this engine and it
  // registered again (the scheduler forgot it meanwhile, and failed over
  // its tasks). Then engine_ready, with the list of tasks held here.
  void Resume(bool resend_replies) {
    TakeTasks();
    const size_t resent = resend_replies ? ledger_.ResendAll(base::MonotonicMicros()) : 0;
    if (Pooled()) CollectFinished();
    if (drop_held_.load()) DropHeld();
    std::vector<TaskId> held(running_ids_.begin(), running_ids_.end());
    for (const Job& job : queue_) held.push_back(job.header.id);
    FlushReplies();
    spdlog::info("ready again for the scheduler: {} recent replies sent again, holding {} tasks",
                 resent, held.size());
    SendReady(std::move(held));
  }

  // After the hub removed this engine: every task queued here goes back
  // unstarted (a scheduler that failed it over takes the answer as late; one
  // that did not, after a hub restart, runs it again without using a retry).
  // REQUIRES: io_mutex_, and this engine registered again.
  void DropHeld() {
    const size_t dropped = queue_.size();
    for (const Job& job : queue_) {
      ledger_.Dequeued(job.header.id);
      Reply(NotRun(job));
    }
    queue_.clear();
    drop_held_.store(false);
    spdlog::warn("dropped {} tasks held while the hub had removed this engine (not started)",
                 dropped);
  }

  void Reply(const Done& done) {
    protocol::Header header{TaskId::Random(), MsgType::kTaskReply, uuid_, base::WallMicros()};
    ledger_.Reply(done.request.id, done.meta.attempt, done.meta.ok && !done.meta.not_run,
                  protocol::EncodeInner(header, done.request, done.meta, done.result),
                  base::MonotonicMicros());
    if (ledger_.BatchFull()) FlushReplies();
  }

  Done Execute(const Job& job, Runner& runner, const engine::Grant& grant) {
    Done done{job.header, {true, ErrorType::kNone, engine_id_, job.dispatch.attempt}, {}};
    done.result.started_us = base::WallMicros();
    auto fail = [&](ErrorType type, std::string message) {
      done.meta.ok = false;
      done.meta.error_type = type;
      done.result.error_message = std::move(message);
    };
    if (!job.unreadable.empty()) {
      fail(ErrorType::kBadTask, "engine " + std::to_string(engine_id_) +
                                    " cannot read the task: " + job.unreadable);
    } else if (job.spec.kind == "command") {
      engine::CommandRequest request{job.spec.argv,
                                     job.spec.cwd,
                                     job.spec.env,
                                     job.meta.time_limit_s,
                                     options_.max_output_bytes,
                                     &runner.group,
                                     ExpandOutputPath(job.spec.stdout_path, job),
                                     ExpandOutputPath(job.spec.stderr_path, job)};
      request.env["ZTASK_TASK_ID"] = job.header.id.ToHex();
      request.env["ZTASK_ENGINE_ID"] = std::to_string(engine_id_);
      request.env["ZTASK_ATTEMPT"] = std::to_string(job.dispatch.attempt);
      request.env["ZTASK_NUM_ENGINES"] = std::to_string(job.dispatch.engines);
      request.env["ZTASK_UNMET_EXIT_CODE"] = std::to_string(kUnmetExitCode);
      for (auto& [name, value] : grant.Environment()) request.env[name] = std::move(value);
      if (mpi_rank_) request.env["ZTASK_MPI_RANK"] = std::to_string(*mpi_rank_);
      if (job.spec.job) request.env["ZTASK_JOB"] = *job.spec.job;
      if (job.spec.array_index) {
        request.env["ZTASK_ARRAY_INDEX"] = std::to_string(*job.spec.array_index);
      }
      engine::CommandOutcome outcome = engine::RunCommand(request);
      done.result.stdout_text = std::move(outcome.stdout_text);
      done.result.stderr_text = std::move(outcome.stderr_text);
      done.result.stdout_truncated = outcome.stdout_truncated;
      done.result.stderr_truncated = outcome.stderr_truncated;
      if (!outcome.spawn_error.empty()) {
        fail(ErrorType::kTaskFailed, outcome.spawn_error);
      } else {
        done.result.exit_code = outcome.exit_code;
        if (outcome.timed_out) {
          fail(ErrorType::kTimeLimitExceeded,
               "killed after its time limit of " + SecondsText(job.meta.time_limit_s));
        } else if (outcome.exit_code == kUnmetExitCode) {
          Unmet(&done, "the command exited with code " + std::to_string(kUnmetExitCode) +
                           " (its dependencies are unmet here)");
        } else if (outcome.exit_code != 0) {
          fail(ErrorType::kTaskFailed, "exited with code " + std::to_string(outcome.exit_code));
        }
      }
    } else if (job.spec.kind == "function") {
      RunFunction(job, runner, grant, &done, fail);
    } else if (job.spec.kind == "python") {
      RunPython(job, runner, grant, &done, fail);
    } else {
      fail(ErrorType::kTaskFailed, "unknown task kind '" + job.spec.kind + "'");
    }
    done.result.completed_us = base::WallMicros();
    return done;
  }

  // An output file's path with its placeholders replaced.
  static std::string ExpandOutputPath(const std::optional<std::string>& pattern, const Job& job) {
    if (!pattern) return {};
    return protocol::ExpandPlaceholders(
        *pattern, {{"TASK_ID", job.header.id.ToHex()},
                   {"JOB", job.spec.job.value_or("")},
                   {"ARRAY_INDEX", job.spec.array_index ? std::to_string(*job.spec.array_index)
                                                         : std::string()}});
  }

  template <class Fail>
  void RunFunction(const Job& job, Runner& runner, const engine::Grant& grant, Done* done,
                   Fail&& fail) {
    auto it = functions_.find(job.spec.function);
    if (it == functions_.end()) {
      return fail(ErrorType::kTaskFailed, "no function named '" + job.spec.function +
                                              "' on engine " + std::to_string(engine_id_));
    }
    TaskContext context{job.header.id, engine_id_, job.dispatch.attempt, job.dispatch.engines, 0,
                        grant.slots, grant.units};
    if (job.meta.time_limit_s > 0) {
      context.deadline_us = base::MonotonicMicros() + static_cast<int64_t>(job.meta.time_limit_s * 1e6);
    }
    try {
      Value args;
      if (job.spec.pass_results.value_or(false)) {
        auto results = ResultsOf(runner, job.meta.after.ids);
        if (!results.ok()) return fail(ErrorType::kTaskFailed, results.status().message());
        args = std::move(*results);
      } else if (!job.spec.args.bytes.empty()) {
        args = Value::from_msgpack(job.spec.args.bytes);
      }
      Value result = it->second(args, context);
      std::vector<uint8_t> packed = Value::to_msgpack(result);
      if (packed.size() > options_.max_result_bytes) {
        done->meta.no_retry = true;  // the same result anywhere
        return fail(ErrorType::kTaskFailed, "its result is " + std::to_string(packed.size()) +
                                                " bytes, over the engine's limit of " +
                                                std::to_string(options_.max_result_bytes) +
                                                " (taskengine --max-result-bytes)");
      }
      done->result.result.bytes.assign(packed.begin(), packed.end());
      // What no process could read is not sent: the task fails, recorded.
      if (Status s = protocol::CheckValue(done->result.result.bytes); !s.ok()) {
        done->result.result.bytes.clear();
        return fail(ErrorType::kBadTask,
                    "its result breaks the limits on values: " + s.message());
      }
    } catch (const UnmetDependency& e) {
      Unmet(done, e.what());
    } catch (const TimeLimitReached&) {
      fail(ErrorType::kTimeLimitExceeded,
           "stopped at its time limit of " + SecondsText(job.meta.time_limit_s));
    } catch (const std::exception& e) {
      fail(ErrorType::kTaskFailed, e.what());
    }
  }

  // The task cannot run here: the scheduler tries another engine.
  static void Unmet(Done* done, std::string why) {
    done->meta.ok = false;
    done->meta.unmet = true;
    done->result.error_message = std::move(why);
  }

  // A Python function task, in the engine's Python worker. Its arguments are
  // {"pickle": bytes}; so is its result.
  template <class Fail>
  void RunPython(const Job& job, Runner& runner, const engine::Grant& grant, Done* done,
                 Fail&& fail) {
    auto payload = protocol::PickledPayload(job.spec.args.bytes);
    if (!payload.ok()) {
      return fail(ErrorType::kBadTask, "a Python task whose arguments are not {pickle: bytes}: " +
                                           payload.status().message());
    }
    if (!runner.python) {
      runner.python = std::make_unique<engine::PythonWorker>(options_.python, options_.python_path);
      runner.python_for_kill.store(runner.python.get());
    }
    engine::PythonTask task{std::move(*payload),     job.header.id.ToHex(),
                            engine_id_,              job.dispatch.attempt,
                            job.meta.time_limit_s,   options_.max_output_bytes,
                            options_.max_result_bytes, grant.Environment()};
    engine::PythonOutcome outcome = runner.python->Run(task);
    done->result.stdout_text = std::move(outcome.stdout_text);
    done->result.stderr_text = std::move(outcome.stderr_text);
    done->result.stdout_truncated = outcome.stdout_truncated;
    done->result.stderr_truncated = outcome.stderr_truncated;
    using Kind = engine::PythonOutcome::Kind;
    switch (outcome.kind) {
      case Kind::kOk:
        done->result.result.bytes = protocol::PickledValue(outcome.result);
        if (done->result.result.bytes.size() > options_.max_result_bytes) {
          done->result.result.bytes.clear();
          done->meta.no_retry = true;  // the same result anywhere
          return fail(ErrorType::kTaskFailed,
                      "its result is over the engine's limit of " +
                          std::to_string(options_.max_result_bytes) +
                          " bytes (taskengine --max-result-bytes)");
        }
        return;
      case Kind::kError:
        done->result.result.bytes =
            protocol::RemoteException(outcome.ename, outcome.evalue, outcome.traceback);
        return fail(ErrorType::kTaskFailed, outcome.ename + ": " + outcome.evalue);
      case Kind::kUnmet:
        return Unmet(done, outcome.evalue);
      case Kind::kTimedOut:
        return fail(ErrorType::kTimeLimitExceeded,
                    "killed after its time limit of " + SecondsText(job.meta.time_limit_s) +
                        " (the engine's Python worker is started again)");
      case Kind::kWorkerLost:
        return fail(ErrorType::kEngineError, "engine " + std::to_string(engine_id_) + ": " +
                                                 outcome.evalue);
      case Kind::kTooLarge:
        // Its result, not a fault of the engine: it would be as large
        // anywhere, so it is not retried.
        done->meta.no_retry = true;
        return fail(ErrorType::kTaskFailed, outcome.evalue);
    }
  }

  // On the worker thread: the results of `ids`, in order, from the hub. The
  // scheduler may start this task a moment before the hub has recorded its
  // inputs' outcomes, so the hub is asked to answer once they are final.
  Result<Value> ResultsOf(Runner& runner, const std::vector<TaskId>& ids) {
    std::unique_ptr<zmq::socket_t>& query = runner.query;
    if (!query) {
      query = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::dealer);
      query->set(zmq::sockopt::linger, 0);
      protocol::SecureClient(*query, info_);
      query->connect(info_.hub.query);
    }
    // One request: the hub answers once every record is final, or after
    // 10 s.
    auto records = AskRecords(*query, ids, 10'000);
    if (!records.ok()) return records.status();
    std::map<TaskId, const protocol::TaskRecord*> by_id;
    for (const auto& r : *records) by_id[r.id] = &r;
    Value out = Value::array();
    for (const TaskId& id : ids) {
      auto it = by_id.find(id);
      if (it == by_id.end() || !IsFinal(it->second->state)) {
        return Status::Unavailable("the hub did not have the results of this task's dependencies");
      }
      const auto& bytes = it->second->result.bytes;
      out.push_back(bytes.empty() ? Value() : Value::from_msgpack(bytes));
    }
    return out;
  }

  // The records of `ids`, once all are final or `wait_ms` passed.
  Result<std::vector<protocol::TaskRecord>> AskRecords(zmq::socket_t& query,
                                                       const std::vector<TaskId>& ids,
                                                       int32_t wait_ms) {
    protocol::Header header{TaskId::Random(), MsgType::kResultRequest, uuid_,
                            base::WallMicros()};
    protocol::TaskIdList request{ids, std::nullopt, std::nullopt, "final", wait_ms};
    protocol::AskOptions options;
    options.timeout = std::chrono::milliseconds(int64_t{wait_ms} + 5000);
    auto reply = protocol::Ask<MsgType::kResultReply>(query, signer_, header, request, options);
    if (!reply.ok()) return Status::Unavailable("the hub did not answer this engine's query");
    return std::move(reply->content.records);
  }

  EngineOptions options_;
  const std::map<std::string, Function>& functions_;
  protocol::ConnectionInfo info_;
  protocol::Signer signer_;
  std::string uuid_;
  // Written by the loop thread (registration), read by the worker.
  std::atomic<int32_t> engine_id_{-1};
  int64_t registered_at_us_ = 0;     // the date of the latest registration request
  // The fence (Fenced): when the latest heartbeat or registration the hub
  // answered left, how long the hub waits before it removes a silent
  // engine, and whether it did (set by the loop thread, cleared by the
  // worker once it dropped what it held). The loop thread's: the date and
  // time each recent heartbeat left.
  std::atomic<int64_t> hub_heard_us_{0};
  std::atomic<int64_t> fence_us_{3'000'000};
  std::atomic<bool> drop_held_{false};
  static constexpr size_t kBeatsKept = 64;
  std::deque<std::pair<int64_t, int64_t>> beats_sent_;
  std::optional<int32_t> mpi_rank_;  // from Open MPI's environment
  int heartbeat_ms_ = 1000;
  zmq::context_t context_{1};
  zmq::socket_t hub_, scheduler_, wake_loop_, wake_worker_;
  // The worker thread's: the scheduler socket's reconnections, the tasks
  // received and not run yet, the latest replies.
  std::unique_ptr<protocol::ReconnectWatch> scheduler_watch_;
  std::deque<Job> queue_;
  // The scheduler socket and the replies not sent yet (see WorkerMain).
  std::mutex io_mutex_;
  engine::Ledger ledger_;
  // The worker asked the loop thread to watch the replies that wait.
  std::atomic<bool> flush_asked_{false};
  // runners_[0] is the worker thread's (it runs the tasks of an engine of
  // one slot); with more slots each runs on a thread of its own. Made
  // before the threads start; the loop thread kills their tasks when the
  // engine stops. Each closes its query socket before it ends (a socket
  // left open would block the context's destruction).
  std::vector<std::unique_ptr<Runner>> runners_;
  // The worker thread's: what is free. Pooled: the tasks the runners run.
  engine::Capacity capacity_;
  std::unordered_set<TaskId, TaskIdHash> running_ids_;
  // Pooled: work handed to the runners, what they finished, and the eventfd
  // that wakes the worker thread when they did.
  std::mutex pool_mutex_;
  std::condition_variable pool_wake_;
  std::deque<Work> work_;
  std::deque<Finished> finished_;
  int done_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread worker_;
};

Engine::Engine() = default;
Engine::~Engine() = default;

void Engine::Register(const std::string& name, Function function) {
  functions_[name] = std::move(function);
}

Status Engine::Run(const EngineOptions& options) {
  const auto profile =
      options.profile_dir.empty() ? protocol::DefaultProfileDir() : options.profile_dir;
  auto info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile));
  if (!info.ok()) return info.status();
  ZTASK_RETURN_IF_ERROR(protocol::CheckAuthenticated(*info, /*allow_insecure=*/true,
                                                     protocol::ConnectionFilePath(profile)));
  if (info->hub.registration.empty() || info->scheduler.engine.empty()) {
    return Status::Unavailable("the cluster in " + profile.string() +
                               " has not started its hub and scheduler yet");
  }
  // A Python worker that died leaves a closed pipe: writing to it must be
  // an error to handle, not a signal that ends the engine (also when a
  // program runs the engine library without Main).
  ::signal(SIGPIPE, SIG_IGN);
  if (std::string e = protocol::AmountsError(options.slots, options.resources, 1); !e.empty()) {
    return Status::InvalidArgument("this engine's " + e);
  }
  EngineOptions with_defaults = options;
  if (with_defaults.python.empty()) {
    const char* env = std::getenv("ZTASK_PYTHON");
    with_defaults.python = env && *env                                ? env
                           : std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3"
                                                                         : "python3";
  }
  if (with_defaults.python_path.empty()) with_defaults.python_path = engine::BundledPythonPath();
  EngineLoop loop(with_defaults, functions_, *info);
  SetStopTarget(&loop);
  Status started = loop.Start();
  if (started.ok()) loop.Run();
  SetStopTarget(nullptr);
  return started;
}

}  // namespace ztask
