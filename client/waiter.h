// The one way the client library waits on its peers. Every call that asks
// the hub or the scheduler something and waits for the answer goes through
// Ask (a request and its reply, within the peer's time, an error naming the
// peer when it is silent); every call that waits for something to happen
// (replies, room to send, records to finish, engines to come) goes through
// Until (turns with a deadline, each of which first notices what the
// scheduler sent and heals a lost connection, then waits on one socket).
//
// Must not: know what is asked or waited for (its callers do), or decide
// when to send tasks again (the notice hook does). Thread safety: owned by
// the client's one thread, with the sockets it waits on.
#ifndef ZTASK_CLIENT_WAITER_H_
#define ZTASK_CLIENT_WAITER_H_

#include <chrono>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <zmq.hpp>

#include "base/clock.h"
#include "protocol/request.h"
#include "ztask/status.h"

namespace ztask::client {

// A peer the client asks: its socket, its name and address (for errors),
// and how long it has to answer a request it does not hold.
struct Peer {
  zmq::socket_t* socket = nullptr;
  std::string name;  // "hub", "scheduler"
  std::string endpoint;
  std::chrono::milliseconds answer_within{5000};
};

// What one turn of a wait found: the end of the wait, with its outcome, or
// not yet (then the wait goes on after at most `pause` on the socket).
struct Turn {
  static constexpr std::chrono::milliseconds kPause{100};
  static Turn Done(Status outcome = Status::Ok()) { return {std::move(outcome), {}}; }
  static Turn Again(std::chrono::milliseconds pause = kPause) { return {std::nullopt, pause}; }
  static Turn DoneIf(bool done) { return done ? Done() : Again(); }

  std::optional<Status> end;
  std::chrono::milliseconds pause{kPause};
};

// A deadline `seconds` from now; a negative one (or one past any
// reasonable wait) never passes.
inline base::Deadline DeadlineAfter(double seconds) {
  if (seconds < 0 || seconds > 1e9) return base::Deadline::Never();
  return base::Deadline(std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6)));
}

class Waiter {
 public:
  using OnOther = std::function<void(const protocol::Header&, std::span<const std::string_view>)>;
  struct Hooks {
    // Reads what came from the scheduler without waiting, and after a
    // reconnection sends again what may have been lost. Called before
    // every turn of Until.
    std::function<void()> notice;
    // Each verified message on an asked socket that is not the reply
    // (task replies coming on the scheduler's socket during an Ask).
    OnOther on_other;
  };

  // `profile`: the cluster's profile directory, named by Unreachable.
  Waiter(const protocol::Signer& signer, std::string session, std::string profile, Hooks hooks)
      : signer_(signer),
        session_(std::move(session)),
        profile_(std::move(profile)),
        hooks_(std::move(hooks)) {}

  // Turns until a turn ends the wait (returns its outcome) or `deadline`
  // passes (returns `expired()`). A turn: the notice hook, then `turn`;
  // unless that ended the wait and the deadline has not passed, a wait
  // until `socket` is ready for `events`, at most the turn's pause and
  // about what is left of the deadline.
  Status Until(const std::function<Turn()>& turn, const base::Deadline& deadline,
               const std::function<Status()>& expired, zmq::socket_t& socket,
               short events = ZMQ_POLLIN);

  // Sends `content` to `peer` as a kRequest and returns the content of its
  // kReply. `held`: how long the peer may hold the request before it
  // answers, on top of its answer_within. Unreachable when no reply came
  // in that time; Unavailable when the request could not be queued.
  template <protocol::MsgType kRequest, protocol::MsgType kReply>
  Result<typename protocol::Bodies<kReply>::Content> Ask(
      const Peer& peer, const typename protocol::Bodies<kRequest>::Content& content,
      std::chrono::milliseconds held = std::chrono::milliseconds(0)) {
    const protocol::Header header{TaskId::Random(), kRequest, session_, base::WallMicros()};
    protocol::AskOptions options;
    options.timeout = peer.answer_within + held;
    options.on_other = hooks_.on_other;
    auto reply = protocol::Ask<kReply>(*peer.socket, signer_, header, content, options);
    if (!reply.ok()) {
      if (reply.status().code() != Status::Code::kTimedOut) return reply.status();
      return Unreachable(peer);
    }
    return std::move(reply->content);
  }

  // "the hub at ENDPOINT does not answer: is the cluster in PROFILE
  // running? ...", Unavailable.
  Status Unreachable(const Peer& peer) const;

 private:
  const protocol::Signer& signer_;
  std::string session_;
  std::string profile_;
  Hooks hooks_;
};

}  // namespace ztask::client

#endif  // ZTASK_CLIENT_WAITER_H_
