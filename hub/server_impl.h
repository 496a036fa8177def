// The taskhub process's loop (server.h), declared for the three files that
// define it: server.cc (the loop, engines' registrations and heartbeats,
// the store's flushes), intake.cc (the scheduler's monitor batches, their
// acknowledgements) and queries.cc (clients' and supervisors' requests).
// They decode what comes, hand it to the hub's core (hub_core.h), which
// decides, and carry out the actions it returns (Apply): the loop is a thin
// adapter, and holds no rule of engines or records.
//
// Thread safety: as HubServer.
#ifndef ZTASK_HUB_SERVER_IMPL_H_
#define ZTASK_HUB_SERVER_IMPL_H_

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <zmq.hpp>

#include "base/clock.h"
#include "base/reactor.h"
#include "hub/answers.h"
#include "hub/hub_core.h"
#include "hub/result_waits.h"
#include "hub/server.h"
#include "hub/store.h"
#include "protocol/codec.h"
#include "protocol/connection_file.h"
#include "protocol/replay_guard.h"
#include "protocol/security.h"
#include "protocol/wire.h"

namespace ztask::hub {

using protocol::Frames;
using protocol::MsgType;
using protocol::View;

class HubServer::Impl {
 public:
  Impl(const HubOptions& options, protocol::ConnectionInfo info, std::unique_ptr<TaskStore> store)
      : options_(options),
        info_(std::move(info)),
        signer_(info_.key),
        store_(std::move(store)),
        registration_(context_, zmq::socket_type::router),
        query_(context_, zmq::socket_type::router),
        monitor_(context_, zmq::socket_type::router),
        notifier_(context_, zmq::socket_type::pub),
        events_(context_, zmq::socket_type::xpub),
        session_(TaskId::Random()) {}
  // (core_ is made with the store, in its declaration below.)

  Result<protocol::HubEndpoints> Start(const std::filesystem::path& profile);
  Result<std::string> BindsAt(const std::filesystem::path& profile, const char* name,
                              bool published, const std::string& any) const;

  int synchronous_level() const { return store_->synchronous_level(); }
  void set_earlier_life(bool earlier) { earlier_life_ = earlier; }

  void Run();
  void RequestStop();
  zmq::context_t& context() { return context_; }

 private:
  static constexpr size_t kBatch = 512;

  void Drain(zmq::socket_t& socket, void (Impl::*handle)(Frames&), size_t most = kBatch) {
    protocol::Drain(socket, frames_, most, [&](Frames& f) { (this->*handle)(f); });
  }

  void Drop(std::string_view peer, const std::string& why) { drops_.Drop(peer, why); }
  void Drop(std::string_view peer, const Status& why) { drops_.Drop(peer, why); }

  // Verifies frames[1..] (after the routing id), decodes the header and
  // refuses a replay.
  Result<protocol::Header> Open(const Frames& frames, std::vector<std::string_view>* views,
                                protocol::ReplayGuard& guard, const protocol::Limits& limits) {
    if (frames.empty()) return Status::Malformed("no routing id");
    return protocol::OpenMessage(signer_, limits, frames, 1, &guard, views);
  }

  protocol::Header NewHeader(MsgType type) {
    return {TaskId{session_.hi, ++counter_}, type, "hub", base::WallMicros()};
  }

  template <class Content>
  void Reply(zmq::socket_t& socket, zmq::message_t& peer, MsgType type,
             const protocol::Header& request, const Content& content) {
    const std::string_view prefix[] = {View(peer)};
    // Only to a peer that does not read (its queue full) is one lost, and
    // each is asked for again: a registration reply by the engine's timeout
    // (it exits with an error, or its supervisor starts it again), a
    // heartbeat's answer by the next beat (the engine's fence counts only
    // answered beats, so a missed answer makes it careful, never reckless),
    // a result reply by the scheduler's ask, which times out and asks again.
    (void)protocol::SendEncoded(
        socket, prefix,
        protocol::EncodeMessage(signer_, NewHeader(type), request, protocol::Empty{}, content));
  }

  template <class Content>
  void Publish(zmq::socket_t& socket, MsgType type, const Content& content) {
    // A publisher drops for a subscriber that does not read: the notices
    // to the scheduler are said again every heartbeat period (HubCore), and
    // the event stream is for watching, its figures kept by the hub.
    (void)protocol::SendEncoded(socket, {},
                                protocol::EncodeMessage(signer_, NewHeader(type), std::nullopt,
                                                        protocol::Empty{}, content));
  }

  // The events socket is an XPUB: it hears when the first monitor subscribes
  // and when the last one leaves, so that events are made only while someone
  // listens (each costs an encoding and an HMAC).
  void OnSubscriptions();

  // Carries out what the core decided: the answer to the engine `peer`
  // (when given) whose message had `request` as its header, the notices,
  // the events, the waits to answer, the log.
  void Apply(const HubActions& actions, zmq::message_t* peer = nullptr,
             const protocol::Header* request = nullptr);

  // ---- engines ----------------------------------------------------------

  void OnEngineMessage(Frames& frames);
  void Tick();
  // Writes what changed, and the records held back that came at or before
  // `release_until_us`.
  void FlushStore(int64_t release_until_us = INT64_MAX);
  // Deletes a bounded batch of finished records past the retention bounds,
  // at most every kRetainEveryUs, after a flush (never in the intake).
  void Retain();

  // ---- the scheduler's monitor -------------------------------------------

  // A new task's record is held back from the file for up to kHoldNewUs,
  // while the batches the scheduler keeps for the hub come to at most
  // kMaxUnacknowledgedBytes (below the scheduler's own bound,
  // scheduler/hub_link.h, at which it takes no new task). Long enough that
  // a task of a burst that waits its turn for seconds is still written
  // once, final (a burst of 200,000 no-ops wrote half of them twice with
  // one second); half the scheduler's patience before it sends again what
  // the hub has not acknowledged (MonitorLink::kResendAfterUs).
  static constexpr int64_t kHoldNewUs = 2'500'000;
  static constexpr size_t kMaxUnacknowledgedBytes = size_t{96} << 20;
  struct PendingAck {
    std::string peer;
    int64_t seq;
    int64_t arrived_us;  // batch_us_ when it came
    size_t bytes;        // its frames
  };

  void OnMonitor(Frames& frames);

  // Acknowledgements wait until the records they cover are in the database
  // (SendAcks after a flush), so the scheduler keeps every batch a crash of
  // the hub could lose. They go in the order the batches came: a batch
  // waits until no record held back came with it or before it (so that a
  // hub killed meanwhile is sent again every batch after the oldest such
  // record, and a task's outcome never without its submission: a finished
  // record retention or a purge took cannot come back as waiting). A batch
  // sent again while it waits is noted once.
  void NoteAck(PendingAck ack);
  void SendAcks();
  // The time up to which held records are written at the next flush: those
  // held kHoldNewUs, and the oldest others while the scheduler keeps more
  // than kMaxUnacknowledgedBytes of batches for the hub; all of them once
  // the monitor was quiet for a tick.
  int64_t ReleaseHeldUntil(int64_t now_us) const;

  // Answers the waits that have what they asked for now.
  void Noted(const TaskId& id, bool final);

  // One task_submitted, task_assigned or task_outcome, alone or from a batch.
  // `parent`: the message's parent header; null when it has none, or one
  // that does not read.
  // `hold_since_us` > 0: a new task's record may be held back (store.h).
  void OnMonitorMessage(std::string_view peer, const protocol::Header& header,
                        std::span<const std::string_view> views, const protocol::Header* parent,
                        int64_t hold_since_us = 0);

  // ---- client queries -----------------------------------------------------

  // A result_request with `wait`: answered now when every task is there,
  // else held (ResultWaits) until they are or its time is up.
  void AnswerWhen(std::string_view route, const protocol::Header& header,
                  protocol::TaskIdList request);
  void AnswerWait(const ResultWaits::Wait& wait);
  void OnQuery(Frames& frames);

  // A query that came: who asked, its header, its content.
  struct Query {
    zmq::message_t& peer;
    const protocol::Header& header;
    std::string_view content;
  };
  // The query's content as a `Body`; nullopt (and the query dropped) when
  // it cannot be read.
  template <class Body>
  std::optional<Body> Read(const Query& query) {
    auto body = protocol::DecodeBody<Body>(query.content);
    if (!body.ok()) {
      Drop(View(query.peer), body.status());
      return std::nullopt;
    }
    return std::move(*body);
  }
  template <class Content>
  void Answer(const Query& query, MsgType type, const Content& content) {
    Reply(query_, query.peer, type, query.header, content);
  }
  // One handler per query type (OnQuery dispatches).
  void OnResultRequest(const Query& query);
  void OnRecoverRequest(const Query& query);
  void OnStatsRequest(const Query& query);
  void OnJobsRequest(const Query& query);
  void OnEngineState(const Query& query);
  void OnPurgeRequest(const Query& query);
  void OnShutdownRequest(const Query& query);

  protocol::StatsReply Stats(const protocol::StatsRequest& request) const;

  HubOptions options_;
  protocol::ConnectionInfo info_;
  protocol::Signer signer_;
  protocol::Limits limits_;
  std::unique_ptr<TaskStore> store_;
  base::SystemClock clock_;
  HubCore core_{{options_.heartbeat_ms, options_.heartbeat_misses, options_.max_engines},
                store_.get(),
                &clock_};
  HubActions actions_;  // reused: see Apply
  ResultWaits waits_;
  // Batches wait in its queue. In a controller its threads are "1/ZMQbg/...",
  // told from the scheduler's.
  zmq::context_t context_{protocol::OwnBuffersContext(options_.in_process_monitor.empty() ? 0 : 1)};
  zmq::socket_t registration_, query_, monitor_, notifier_, events_;
  std::unique_ptr<protocol::ServerSecurity> security_;  // after the sockets: stops first
  // OnMonitor's, kept from batch to batch so that reading a header
  // allocates nothing: each message's parent (and whether it read), and
  // the header of the one at hand.
  std::vector<protocol::Header> parents_;
  std::vector<bool> parent_read_;
  protocol::Header inner_;
  TaskId session_;
  uint64_t counter_ = 0;
  base::Wakeup wake_;  // RequestStop, from the signal thread
  std::atomic<bool> stop_{false};
  Frames frames_;
  protocol::DropLog drops_{"taskhub"};
  // The monitor's messages may wait out a hub outage in the scheduler's
  // queue, so only their order is checked, not their age.
  protocol::ReplayGuard registration_guard_{protocol::ReplayWindowOf(options_.replay_window_s)},
      query_guard_{protocol::ReplayWindowOf(options_.replay_window_s)},
      monitor_guard_{protocol::ReplayWindowOf(0)};
  std::vector<PendingAck> acks_;  // to send
  // When the last batch came (its records held back are stamped with it:
  // each batch later than the one before), and whether one came since the
  // last tick.
  int64_t batch_us_ = 0;
  bool monitor_heard_ = false;
  int listeners_ = 0;  // subscriptions to the event stream, by topic
  int64_t next_retain_us_ = 0;
  // With many engines the registration socket (their heartbeats) is read
  // at most once every kPaceEngineReadsUs, from this time on.
  int64_t engine_reads_due_us_ = 0;
  // When this hub started, and whether it has an earlier life (its
  // database was there): then, until every live engine has had time to
  // register with it again, it cannot say which engines there are.
  const int64_t started_us_ = base::MonotonicMicros();
  bool earlier_life_ = false;
  bool retain_failing_ = false;  // logged once until a deletion succeeds
};

}  // namespace ztask::hub

#endif  // ZTASK_HUB_SERVER_IMPL_H_
