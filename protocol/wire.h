// The ZeroMQ side of the protocol: receiving and sending multipart messages
// without copying, binding to port 0 and reading the endpoint back. Every
// cppzmq exception stops here and becomes a Status.
//
// Thread safety: like the sockets it takes, owned by one thread.
#ifndef ZTASK_PROTOCOL_WIRE_H_
#define ZTASK_PROTOCOL_WIRE_H_

#include <chrono>
#include <span>
#include <unordered_set>
#include <string>
#include <string_view>
#include <vector>
#include <zmq.hpp>

#include "ztask/status.h"

namespace ztask::protocol {

class Signer;
using Frames = std::vector<zmq::message_t>;

// Receives one whole multipart message without waiting. Returns false when
// none is queued (or the socket failed); `frames` then is empty.
bool TryReceive(zmq::socket_t& socket, Frames& frames);

// Views of frames[from..], valid while `frames` lives.
std::vector<std::string_view> Views(const Frames& frames, size_t from = 0);

// Sends every frame, moving them into the socket (they are empty after).
// With ROUTER_MANDATORY, an unroutable identity is kUnavailable; a full
// queue (would block) is kUnavailable too, with "full" in the message.
Status SendFrames(zmq::socket_t& socket, Frames& frames);
// Sends `prefix` frames (routing ids) then encoded frames.
Status SendEncoded(zmq::socket_t& socket, std::span<const std::string_view> prefix,
                   std::vector<std::string>&& encoded);

// Signs a message in place: frames[first + kFrameHmac] becomes the HMAC of
// frames[first + kFrameHeader..]. `first` skips routing ids.
void SignFrames(const Signer& signer, Frames& frames, size_t first = 0);
// A frame holding a copy of `bytes`.
inline zmq::message_t Frame(std::string_view bytes) { return {bytes.data(), bytes.size()}; }
// A second reference to `m` (shares the data of large messages).
zmq::message_t Share(zmq::message_t& m);

// Binds and returns the actual endpoint ("tcp://127.0.0.1:41234" for
// "tcp://127.0.0.1:*").
Result<std::string> Bind(zmq::socket_t& socket, const std::string& endpoint);
Status Connect(zmq::socket_t& socket, const std::string& endpoint);

// zmq::poll that treats an interrupted wait (a signal) as a wait with no
// events. Returns an error only when polling itself is broken.
Status Poll(zmq::pollitem_t* items, size_t count, std::chrono::milliseconds timeout);

// Counts messages dropped from peers and logs the first drop of each peer
// (up to a bound on the peers remembered), so that a flood cannot fill the log.
class DropLog {
 public:
  explicit DropLog(std::string process) : process_(std::move(process)) {}
  void Drop(std::string_view peer, const std::string& why);
  uint64_t count() const { return count_; }

 private:
  std::string process_;
  uint64_t count_ = 0;
  std::unordered_set<std::string> warned_;
};

// Up to 16 bytes of a routing id, printable.
std::string PrintablePeer(std::string_view peer);

inline std::string_view View(const zmq::message_t& m) {
  return {static_cast<const char*>(m.data()), m.size()};
}

}  // namespace ztask::protocol

#endif  // ZTASK_PROTOCOL_WIRE_H_
