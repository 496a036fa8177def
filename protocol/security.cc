#include "protocol/security.h"

#include <cstdio>

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>

#include "base/clock.h"
#include "base/reactor.h"
#include "protocol/wire.h"

namespace ztask::protocol {
namespace fs = std::filesystem;

namespace {

constexpr char kZapEndpoint[] = "inproc://zeromq.zap.01";
constexpr char kZapDomain[] = "ztask";
constexpr int kRefusalLinesPerSecond = 10;

std::string WhyHandshakeFailed(uint16_t event, uint32_t value) {
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
    if (value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) {
      return "the peer does not use CURVE (it has no connection file of this cluster, or an old "
             "one)";
    }
    if (value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC) {
      return "the peer's CURVE handshake does not decrypt (it has the wrong server key)";
    }
    char code[16];
    std::snprintf(code, sizeof code, "0x%08x", value);
    return std::string("protocol error ") + code + " in the handshake";
  }
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
    return "the peer's client key is not this cluster's";
  // The peer hung up first, having found the mismatch itself.
  return std::string(
             "the peer broke off the handshake: it does not use CURVE, or has the wrong "
             "server key (") +
         std::strerror(static_cast<int>(value)) + ")";
}

}  // namespace

bool IsLoopback(std::string_view ip) {
  return ip == "localhost" || ip == "::1" || ip == "[::1]" || ip.rfind("127.", 0) == 0;
}

bool CurveWanted(std::string_view ip, bool curve, bool no_encryption, const char* process) {
  if (curve) return true;
  if (IsLoopback(ip)) return false;
  if (no_encryption) {
    std::fprintf(stderr,
                 "%s: warning: binding %.*s without encryption (--no-encryption): anyone on "
                 "the network can read every task and result\n",
                 process, static_cast<int>(ip.size()), ip.data());
    return false;
  }
  return true;
}

Status EnableCurve(const fs::path& profile_dir, ConnectionInfo& info) {
  std::array<char, 41> server_public{}, server_secret{}, client_public{}, client_secret{};
  if (zmq_curve_keypair(server_public.data(), server_secret.data()) != 0 ||
      zmq_curve_keypair(client_public.data(), client_secret.data()) != 0) {
    return Status::Unavailable("this libzmq cannot make CURVE keys (built without libsodium?)");
  }
  std::error_code ec;
  fs::create_directories(profile_dir, ec);
  const fs::path path = profile_dir / kCurveSecretFileName;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IoError("cannot write " + path.string() + ": " + std::strerror(errno));
  ::fchmod(fd, 0600);
  const std::string text = std::string(server_secret.data()) + "\n";
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!written) return Status::IoError("cannot write " + path.string());
  info.curve = {server_public.data(), client_public.data(), client_secret.data()};
  return Status::Ok();
}

void SecureClient(zmq::socket_t& socket, const ConnectionInfo& info) {
  if (!info.curve.enabled()) return;
  socket.set(zmq::sockopt::curve_serverkey, info.curve.server_public);
  socket.set(zmq::sockopt::curve_publickey, info.curve.client_public);
  socket.set(zmq::sockopt::curve_secretkey, info.curve.client_secret);
}

Result<std::unique_ptr<ServerSecurity>> ServerSecurity::Create(zmq::context_t& context,
                                                               const ConnectionInfo& info,
                                                               const fs::path& profile_dir,
                                                               std::string process) {
  if (!info.curve.enabled()) {
    return std::unique_ptr<ServerSecurity>(new ServerSecurity(context, "", "", std::move(process)));
  }
  const fs::path path = profile_dir / kCurveSecretFileName;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Status::NotFound("the cluster uses CURVE but " + path.string() +
                            " is missing; start the cluster again with --curve");
  }
  if ((st.st_mode & 077) != 0) {
    return Status::PermissionDenied(path.string() + " can be read by others; run chmod 600 on it");
  }
  std::ifstream in(path);
  std::string secret;
  in >> secret;
  if (secret.size() != 40) {
    return Status::InvalidArgument(path.string() + " does not hold a 40-character Z85 key");
  }
  std::string allowed(32, '\0');
  if (zmq_z85_decode(reinterpret_cast<uint8_t*>(allowed.data()),
                     info.curve.client_public.c_str()) == nullptr) {
    return Status::InvalidArgument("the connection file's curve.client_public is not Z85");
  }
  return std::unique_ptr<ServerSecurity>(
      new ServerSecurity(context, std::move(secret), std::move(allowed), std::move(process)));
}

ServerSecurity::ServerSecurity(zmq::context_t& context, std::string secret, std::string allowed,
                               std::string process)
    : context_(context),
      secret_(std::move(secret)),
      allowed_client_(std::move(allowed)),
      process_(std::move(process)) {}

ServerSecurity::~ServerSecurity() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

Status ServerSecurity::Secure(zmq::socket_t& socket, const std::string& name) {
  if (!enabled()) return Status::Ok();
  try {
    socket.set(zmq::sockopt::curve_server, 1);
    socket.set(zmq::sockopt::curve_secretkey, secret_);
    socket.set(zmq::sockopt::zap_domain, kZapDomain);
    const std::string endpoint =
        "inproc://ztask-handshakes-" + std::to_string(monitor_endpoints_.size());
    if (zmq_socket_monitor(socket.handle(), endpoint.c_str(),
                           ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) != 0) {
      return Status::Internal("cannot watch the handshakes of the " + name + " socket");
    }
    monitor_endpoints_.push_back(endpoint);
    names_.push_back(name);
  } catch (const zmq::error_t& e) {
    return Status::Internal("cannot make the " + name + " socket a CURVE server: " + e.what());
  }
  return Status::Ok();
}

Status ServerSecurity::Start() {
  if (!enabled()) return Status::Ok();
  // Sockets are made here, on this thread, and then handed to the new one;
  // the handler must be bound before any peer connects.
  auto zap = std::make_shared<zmq::socket_t>(context_, zmq::socket_type::rep);
  auto monitors = std::make_shared<std::vector<zmq::socket_t>>();
  try {
    zap->set(zmq::sockopt::linger, 0);
    zap->bind(kZapEndpoint);
    for (const std::string& endpoint : monitor_endpoints_) {
      monitors->emplace_back(context_, zmq::socket_type::pair);
      monitors->back().set(zmq::sockopt::linger, 0);
      monitors->back().connect(endpoint);
    }
  } catch (const zmq::error_t& e) {
    return Status::Internal(std::string("cannot start the CURVE authenticator: ") + e.what());
  }
  thread_ = std::thread([this, zap, monitors] { Run(*zap, *monitors); });
  spdlog::info("{}: CURVE on; only peers with this cluster's client key are let in", process_);
  return Status::Ok();
}

void ServerSecurity::Run(zmq::socket_t& zap, std::vector<zmq::socket_t>& monitors) {
  base::Reactor reactor;
  reactor.Add(zap, [&] { AnswerZap(zap); });
  for (size_t i = 0; i < monitors.size(); ++i) {
    reactor.Add(monitors[i], [this, &monitors, i] { ReadEvent(monitors[i], i); });
  }
  // The stop flag is looked at every 100 ms.
  (void)reactor.Run(stop_, {}, std::chrono::milliseconds(100));
}

// ZAP (RFC 27): version, request id, domain, address, identity, mechanism,
// credentials; the answer: version, request id, status, text, user, metadata.
void ServerSecurity::AnswerZap(zmq::socket_t& zap) {
  Frames request;
  if (!TryReceive(zap, request)) return;
  std::string status = "400", text = "malformed request";
  std::string request_id, address;
  if (request.size() >= 7 && View(request[0]) == "1.0") {
    request_id = std::string(View(request[1]));
    address = std::string(View(request[3]));
    if (View(request[5]) != "CURVE") {
      text = "not CURVE";
    } else if (View(request[6]) == allowed_client_) {
      status = "200";
      text = "OK";
    } else {
      text = "unknown client key";
    }
  }
  if (status != "200") Refused(address.empty() ? "a peer" : address, text);
  const std::string_view reply[] = {"1.0", request_id, status, text, "", ""};
  Frames frames;
  for (auto part : reply) frames.push_back(Frame(part));
  (void)SendFrames(zap, frames);
}

void ServerSecurity::ReadEvent(zmq::socket_t& monitor, size_t index) {
  Frames event;
  if (!TryReceive(monitor, event) || event.size() < 2 || event[0].size() < 6) return;
  uint16_t id = 0;
  uint32_t value = 0;
  std::memcpy(&id, event[0].data(), sizeof id);
  std::memcpy(&value, static_cast<const char*>(event[0].data()) + 2, sizeof value);
  // A failed authentication was reported by AnswerZap already.
  if (id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) return;
  Refused("a peer of the " + names_[index] + " socket", WhyHandshakeFailed(id, value));
}

void ServerSecurity::Refused(const std::string& where, const std::string& why) {
  ++refused_;
  const int64_t now = base::MonotonicMicros();
  if (now - window_start_us_ >= 1'000'000) {
    window_start_us_ = now;
    lines_in_window_ = 0;
  }
  if (++lines_in_window_ > kRefusalLinesPerSecond) return;
  spdlog::warn("{}: refused a connection from {}: {} ({} refused so far)", process_, where, why,
               refused_.load());
}

}  // namespace ztask::protocol
