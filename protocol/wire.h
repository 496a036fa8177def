// The ZeroMQ side of the protocol: receiving and sending multipart messages
// without copying, binding to port 0 and reading the endpoint back. Every
// cppzmq exception stops here and becomes a Status.
//
// Thread safety: like the sockets it takes, owned by one thread.
#ifndef ZTASK_PROTOCOL_WIRE_H_
#define ZTASK_PROTOCOL_WIRE_H_

#include <chrono>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>
#include <zmq.hpp>

#include "protocol/codec.h"
#include "protocol/replay_guard.h"
#include "ztask/status.h"

namespace ztask::protocol {

using Frames = std::vector<zmq::message_t>;

// Receives one whole multipart message without waiting. Returns false when
// none is queued (or the socket failed); `frames` then is empty.
bool TryReceive(zmq::socket_t& socket, Frames& frames);

// Receives and handles up to `most` queued messages, one at a time, into
// `frames` (reused, to keep its capacity), so one busy socket cannot starve
// the others of a poll loop.
template <class Handle>
void Drain(zmq::socket_t& socket, Frames& frames, size_t most, Handle&& handle) {
  for (size_t i = 0; i < most && TryReceive(socket, frames); ++i) handle(frames);
}

// Views of frames[from..], valid while `frames` lives.
std::vector<std::string_view> Views(const Frames& frames, size_t from = 0);

// Sends every frame, moving them into the socket (they are empty after).
// With ROUTER_MANDATORY, an unroutable identity is kUnavailable; a full
// queue (would block) is kTimedOut (IsQueueFull), and the first frame is
// then left as it was, so the message may be sent again later.
Status SendFrames(zmq::socket_t& socket, Frames& frames);
inline bool IsQueueFull(const Status& s) { return s.code() == Status::Code::kTimedOut; }
// Sends `prefix` frames (routing ids) then copies of the encoded frames.
Status SendEncoded(zmq::socket_t& socket, std::span<const std::string_view> prefix,
                   const std::vector<std::string>& encoded);

// Verifies frames[first..] (frame count, size, signature), decodes the
// header and, with a bound socket's `guard`, refuses a replay. `views` gets
// views of frames[first..], valid while `frames` lives.
Result<Header> OpenMessage(const Signer& signer, const Limits& limits, const Frames& frames,
                           size_t first, ReplayGuard* guard, std::vector<std::string_view>* views);

// Signs a message in place: frames[first + kFrameHmac] becomes the HMAC of
// frames[first + kFrameHeader..]. `first` skips routing ids.
void SignFrames(const Signer& signer, Frames& frames, size_t first = 0);
// A frame holding a copy of `bytes`.
inline zmq::message_t Frame(std::string_view bytes) { return {bytes.data(), bytes.size()}; }
// A frame that takes over `bytes` (moved from) without copying them.
zmq::message_t FrameOf(std::string&& bytes);
// A second reference to `m` (shares the data of large messages).
zmq::message_t Share(zmq::message_t& m);

// Binds and returns the actual endpoint ("tcp://127.0.0.1:41234" for
// "tcp://127.0.0.1:*").
// A context whose sockets give each received message memory of its own.
// By default libzmq lets small messages share the buffer it read them into,
// so one message kept keeps the whole buffer: a server that holds many
// messages (the scheduler's waiting requests, the hub's queued batches)
// would hold kilobytes for each. Create it before the sockets. A prefix
// other than 0 names its threads "PREFIX/ZMQbg/..." (to tell two contexts
// of one process apart in /proc).
zmq::context_t OwnBuffersContext(int thread_name_prefix = 0);

// Binds `endpoint`; a Unix socket ("ipc://PATH") another process listens
// on is refused (EADDRINUSE), where libzmq would take its path.
Result<std::string> Bind(zmq::socket_t& socket, const std::string& endpoint);
// A process that restarts binds where it was before, so that its peers'
// sockets reconnect on their own: `previous` (from the connection file) is
// taken when `endpoint` asks for any port on the same host, and a Unix
// socket's one path always. While another process holds that address,
// this waits for it (saying so in the log every 10 s) until a stop signal;
// only when a port's address itself is gone does it bind a new port.
Result<std::string> BindPreferring(zmq::socket_t& socket, const std::string& endpoint,
                                   const std::string& previous);
Status Connect(zmq::socket_t& socket, const std::string& endpoint);

// Tells when a connecting socket's connection was lost and made again (its
// peer restarted, or the network came back), through a socket monitor.
class ReconnectWatch {
 public:
  // REQUIRES: `socket` lives longer than the watch, and both stay on one thread.
  ReconnectWatch(zmq::context_t& context, zmq::socket_t& socket);
  // Stops the watching before the socket closes (see wire.cc).
  ~ReconnectWatch();
  ReconnectWatch(const ReconnectWatch&) = delete;
  ReconnectWatch& operator=(const ReconnectWatch&) = delete;
  // True once for each reconnection since the last call. Never waits.
  bool Reconnected();
  // The monitor's socket, to watch with the others (base/reactor.h).
  zmq::socket_t& socket() { return monitor_; }

 private:
  void* watched_;  // the socket's handle
  zmq::socket_t monitor_;
  bool lost_ = false;
};

// Counts the messages dropped from peers, per peer and per reason, and logs
// them so that a flood cannot fill the log: the first drop of each peer (of
// up to 4096 peers), at most 10 lines a second in all, and a summary every
// 10 seconds while drops go on (call Report from the loop).
class DropLog {
 public:
  explicit DropLog(std::string process) : process_(std::move(process)) {}
  // A message refused by the codec or a guard: the reason is the status code.
  void Drop(std::string_view peer, const Status& why);
  // A well-formed message that makes no sense where it came.
  void Drop(std::string_view peer, const std::string& why);
  // Logs a summary when drops happened since the last one and `now_us` is
  // 10 s past it (steady clock).
  void Report(int64_t now_us);
  uint64_t count() const { return count_; }
  // Drops counted for `peer` (0 for one never seen or not remembered).
  uint64_t count_of(std::string_view peer) const;
  // "BadSignature 3, Malformed 1": counts per reason.
  std::string Summary() const;

 private:
  void Record(std::string_view peer, std::string_view reason, const std::string& why);

  std::string process_;
  uint64_t count_ = 0;
  uint64_t reported_ = 0;
  uint64_t suppressed_ = 0;
  int64_t last_report_us_ = 0;
  int64_t window_start_us_ = 0;
  int lines_in_window_ = 0;
  std::unordered_map<std::string, uint64_t> per_peer_;
  std::map<std::string, uint64_t, std::less<>> per_reason_;
};

// Up to 16 bytes of a routing id, printable.
std::string PrintablePeer(std::string_view peer);

inline std::string_view View(const zmq::message_t& m) {
  return {static_cast<const char*>(m.data()), m.size()};
}

}  // namespace ztask::protocol

#endif  // ZTASK_PROTOCOL_WIRE_H_
