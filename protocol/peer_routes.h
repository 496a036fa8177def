// PeerRoutes: which connection of a bound ROUTER socket speaks for a session.
//
// Peers never choose their routing ids: ZeroMQ gives each connection its
// own, which no peer can claim (it begins with a zero byte, which a peer's
// ROUTING_ID may not). A connection is bound to a session (an engine's uuid,
// a client's session) only by a message of that session that was signed
// with the cluster's key and passed the replay guard, received on that very
// connection. Work and results go only to that connection; a later signed
// message of the same session on another connection (a reconnection) moves
// the session there. So whoever lacks the key can neither receive a
// session's messages nor take its place, whatever ids it reads on the
// notifier or the event stream (docs/security.md).
//
// At most `max_sessions` are kept; past that the half proved longest ago
// is forgotten (each costs about 150 bytes). A forgotten session is bound
// again by its next message; until then what is for it counts as
// undeliverable, as for a peer that went away.
//
// Thread safety: none; owned by the thread that owns the socket.
#ifndef ZTASK_PROTOCOL_PEER_ROUTES_H_
#define ZTASK_PROTOCOL_PEER_ROUTES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/string_hash.h"

namespace ztask::protocol {

class PeerRoutes {
 public:
  explicit PeerRoutes(size_t max_sessions = 65536) : max_sessions_(max_sessions) {}

  // `route` (the routing id ZeroMQ gave the connection) carried a verified
  // message of `session`. REQUIRES: the message passed MAC and replay checks.
  void Prove(std::string_view session, std::string_view route);

  // The connection that speaks for `session`, or nullptr.
  const std::string* RouteOf(std::string_view session) const;

  // Sending on the route failed (the connection is gone).
  void Forget(std::string_view session);

  size_t size() const { return routes_.size(); }

 private:
  struct Entry {
    std::string route;
    uint64_t proved = 0;  // a counter, not a clock
  };
  void Evict();

  size_t max_sessions_;
  uint64_t counter_ = 0;
  std::unordered_map<std::string, Entry, StringHash, std::equal_to<>> routes_;
};

}  // namespace ztask::protocol

#endif  // ZTASK_PROTOCOL_PEER_ROUTES_H_
