// CurveZMQ for a cluster started with --curve: every socket encrypted, and
// only peers holding the cluster's client key let in.
//
// Keys: `taskcluster start --curve` (or a taskhub creating the connection
// file with --curve) makes two key pairs. The connection file carries the
// servers' public key and the client pair, so whoever holds the file (mode
// 0600, like the HMAC key it also holds) can connect; the servers' secret key
// stays in <profile>/curve-server.secret (0600), read by the processes that
// bind: taskhub, taskscheduler and taskcluster's control socket.
//
// A server process runs one ServerSecurity: it makes its bound sockets CURVE
// servers, answers libzmq's authentication requests (ZAP) in a thread of its
// own, letting in only the cluster's client key, and watches each socket's
// failed handshakes. Refusals are logged (rate-limited) with the reason.
//
// Thread safety: SecureClient is a plain function; a ServerSecurity is set up
// (Secure, Start) on the thread that owns the sockets, then runs its own
// thread until destroyed. Destroy it before the context.
#ifndef ZTASK_PROTOCOL_SECURITY_H_
#define ZTASK_PROTOCOL_SECURITY_H_

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "protocol/connection_file.h"
#include "ztask/status.h"

namespace ztask::protocol {

inline constexpr std::string_view kCurveSecretFileName = "curve-server.secret";

// Whether `ip` (an address sockets bind to) is this machine's loopback
// only: 127.0.0.0/8, ::1 or localhost.
bool IsLoopback(std::string_view ip);

// Whether a cluster made with sockets bound to `ip` uses CurveZMQ: when
// asked for, and by default whenever `ip` is beyond loopback (signing alone
// lets anyone on the network read tasks and results), unless
// `no_encryption`, which `process` then warns about on stderr.
bool CurveWanted(std::string_view ip, bool curve, bool no_encryption, const char* process);

// Makes both key pairs, writes the servers' secret into the profile
// directory and the rest into `info`.
Status EnableCurve(const std::filesystem::path& profile_dir, ConnectionInfo& info);

// A connecting socket: a CURVE client with the cluster's keys, when the
// cluster uses CURVE; otherwise nothing changes.
void SecureClient(zmq::socket_t& socket, const ConnectionInfo& info);

class ServerSecurity {
 public:
  // For a cluster without CURVE every call is a no-op.
  // REQUIRES: `context` outlives this object.
  static Result<std::unique_ptr<ServerSecurity>> Create(zmq::context_t& context,
                                                        const ConnectionInfo& info,
                                                        const std::filesystem::path& profile_dir,
                                                        std::string process);
  ~ServerSecurity();

  // Before binding: makes `socket` a CURVE server and watches its handshakes.
  Status Secure(zmq::socket_t& socket, const std::string& name);
  // After every Secure: starts the authentication thread.
  Status Start();

  bool enabled() const { return !secret_.empty(); }
  // Connections refused so far (a wrong key, or no CURVE at all).
  uint64_t refused() const { return refused_.load(); }

 private:
  ServerSecurity(zmq::context_t& context, std::string secret, std::string allowed,
                 std::string process);
  void Run(zmq::socket_t& zap, std::vector<zmq::socket_t>& monitors);
  void AnswerZap(zmq::socket_t& zap);
  void ReadEvent(zmq::socket_t& monitor, size_t index);
  void Refused(const std::string& where, const std::string& why);

  zmq::context_t& context_;
  std::string secret_;          // Z85; empty: CURVE off
  std::string allowed_client_;  // 32 raw bytes
  std::string process_;
  std::vector<std::string> monitor_endpoints_, names_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> refused_{0};
  int64_t window_start_us_ = 0;
  int lines_in_window_ = 0;
};

}  // namespace ztask::protocol

#endif  // ZTASK_PROTOCOL_SECURITY_H_
