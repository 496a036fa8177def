#include "protocol/wire.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/clock.h"
#include "base/signals.h"
#include "protocol/codec.h"

namespace ztask::protocol {

bool TryReceive(zmq::socket_t& socket, Frames& frames) {
  frames.clear();
  try {
    while (true) {
      zmq::message_t part;
      auto got =
          socket.recv(part, frames.empty() ? zmq::recv_flags::dontwait : zmq::recv_flags::none);
      if (!got) return false;
      const bool more = part.more();
      frames.push_back(std::move(part));
      if (!more) return true;
    }
  } catch (const zmq::error_t&) {
    frames.clear();
    return false;
  }
}

std::vector<std::string_view> Views(const Frames& frames, size_t from) {
  std::vector<std::string_view> views;
  views.reserve(frames.size() > from ? frames.size() - from : 0);
  for (size_t i = from; i < frames.size(); ++i) views.push_back(View(frames[i]));
  return views;
}

Status SendFrames(zmq::socket_t& socket, Frames& frames) {
  try {
    for (size_t i = 0; i < frames.size(); ++i) {
      auto flags = zmq::send_flags::dontwait;
      if (i + 1 < frames.size()) flags = flags | zmq::send_flags::sndmore;
      if (!socket.send(frames[i], flags)) return Status::TimedOut("send queue full");
    }
  } catch (const zmq::error_t& e) {
    return Status::Unavailable(e.what());
  }
  return Status::Ok();
}

Status SendEncoded(zmq::socket_t& socket, std::span<const std::string_view> prefix,
                   const std::vector<std::string>& encoded) {
  Frames frames;
  frames.reserve(prefix.size() + encoded.size());
  for (auto p : prefix) frames.emplace_back(p.data(), p.size());
  for (auto& e : encoded) frames.emplace_back(e.data(), e.size());
  return SendFrames(socket, frames);
}

Result<Header> OpenMessage(const Signer& signer, const Limits& limits, const Frames& frames,
                           size_t first, ReplayGuard* guard, std::vector<std::string_view>* views) {
  if (frames.size() < first) return Status::Malformed("no routing id");
  *views = Views(frames, first);
  ZTASK_RETURN_IF_ERROR(CheckFrames(signer, limits, *views));
  auto header = DecodeHeader((*views)[kFrameHeader]);
  if (header.ok()) ZTASK_RETURN_IF_ERROR(CheckFrameCount(header->type, views->size()));
  if (header.ok() && guard) ZTASK_RETURN_IF_ERROR(guard->Admit(*header, base::WallMicros()));
  return header;
}

void SignFrames(const Signer& signer, Frames& frames, size_t first) {
  std::vector<std::string_view> views = Views(frames, first);
  const std::string mac = signer.Sign(views);
  frames[first + kFrameHmac] = Frame(mac);
}

zmq::message_t FrameOf(std::string&& bytes) {
  if (bytes.size() < 256) return Frame(bytes);  // a copy costs less than a second allocation
  auto* held = new std::string(std::move(bytes));
  return zmq::message_t(
      held->data(), held->size(), [](void*, void* hint) { delete static_cast<std::string*>(hint); },
      held);
}

zmq::message_t Share(zmq::message_t& m) {
  zmq::message_t copy;
  copy.copy(m);
  return copy;
}

std::string PrintablePeer(std::string_view peer) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : peer.substr(0, 16)) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += kDigits[c >> 4];
      out += kDigits[c & 0xf];
    }
  }
  return out.empty() ? "(anonymous)" : out;
}

namespace {
constexpr size_t kMaxPeers = 4096;
constexpr int kLinesPerSecond = 10;
constexpr int64_t kReportEveryUs = 10'000'000;
}  // namespace

void DropLog::Drop(std::string_view peer, const Status& why) {
  Record(peer, Status::CodeName(why.code()), why.message());
}

void DropLog::Drop(std::string_view peer, const std::string& why) {
  Record(peer, "Unexpected", why);
}

void DropLog::Record(std::string_view peer, std::string_view reason, const std::string& why) {
  ++count_;
  auto reason_it = per_reason_.find(reason);
  if (reason_it == per_reason_.end()) reason_it = per_reason_.emplace(reason, 0).first;
  ++reason_it->second;
  bool first = false;
  auto it = per_peer_.find(std::string(peer));
  if (it != per_peer_.end()) {
    ++it->second;
  } else if (per_peer_.size() < kMaxPeers) {
    per_peer_.emplace(std::string(peer), 1);
    first = true;
  }
  if (!first) return;
  const int64_t now = base::MonotonicMicros();
  if (now - window_start_us_ >= 1'000'000) {
    window_start_us_ = now;
    lines_in_window_ = 0;
  }
  if (lines_in_window_ >= kLinesPerSecond) {
    ++suppressed_;
    return;
  }
  ++lines_in_window_;
  spdlog::warn(
      "{}: dropped a message from peer {} ({}): {} (further drops from it are counted, "
      "not logged)",
      process_, PrintablePeer(peer), reason, why);
}

void DropLog::Report(int64_t now_us) {
  if (count_ == reported_ || now_us - last_report_us_ < kReportEveryUs) return;
  last_report_us_ = now_us;
  reported_ = count_;
  // The peers that sent the most, by routing id.
  std::vector<std::pair<uint64_t, std::string_view>> top;
  for (const auto& [peer, n] : per_peer_) top.emplace_back(n, peer);
  const size_t shown = std::min<size_t>(3, top.size());
  std::partial_sort(top.begin(), top.begin() + static_cast<std::ptrdiff_t>(shown), top.end(),
                    [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string most;
  for (size_t i = 0; i < shown; ++i) {
    most += (i ? ", " : "") + PrintablePeer(top[i].second) + " " + std::to_string(top[i].first);
  }
  spdlog::warn(
      "{}: {} messages dropped so far from {} peers ({}; most from {}); {} first-drop "
      "warnings suppressed by the rate limit",
      process_, count_, per_peer_.size(), Summary(), most, suppressed_);
}

uint64_t DropLog::count_of(std::string_view peer) const {
  auto it = per_peer_.find(std::string(peer));
  return it == per_peer_.end() ? 0 : it->second;
}

std::string DropLog::Summary() const {
  std::string out;
  for (const auto& [reason, n] : per_reason_) {
    if (!out.empty()) out += ", ";
    out += reason + " " + std::to_string(n);
  }
  return out.empty() ? "none" : out;
}

zmq::context_t OwnBuffersContext(int thread_name_prefix) {
  zmq::context_t context(1);
  constexpr int kZeroCopyRecv = 10;  // ZMQ_ZERO_COPY_RECV: named in zmq.h's draft part only
  (void)zmq_ctx_set(context.handle(), kZeroCopyRecv, 0);
  if (thread_name_prefix != 0) {
    (void)zmq_ctx_set(context.handle(), ZMQ_THREAD_NAME_PREFIX, thread_name_prefix);
  }
  return context;
}

namespace {

// bind(), and errno when it fails.
// Connections not yet accepted that a listening socket holds. ZeroMQ's 100
// drops the connections of thousands of engines that start together (a
// Slurm allocation), and each dropped one tries again only seconds later:
// 10,000 engines took 30 s to register instead of a few. The kernel caps it
// at net.core.somaxconn.
constexpr int kListenBacklog = 65535;

constexpr std::string_view kIpc = "ipc://";

// Whether a process listens on the Unix socket of an "ipc://PATH" endpoint:
// libzmq removes whatever is at PATH before it binds there, so a second
// process would take the address from a live one.
bool SomeoneListens(const std::string& endpoint) {
  const std::string path = endpoint.substr(kIpc.size());
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof address.sun_path) return false;
  std::memcpy(address.sun_path, path.data(), path.size());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool listening =
      ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return listening;
}

Result<std::string> BindOnce(zmq::socket_t& socket, const std::string& endpoint, int* error) {
  if (endpoint.starts_with(kIpc) && SomeoneListens(endpoint)) {
    *error = EADDRINUSE;
    return Status::Unavailable("cannot bind " + endpoint + ": another process listens there");
  }
  try {
    socket.set(zmq::sockopt::backlog, kListenBacklog);
    socket.bind(endpoint);
    return socket.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    *error = e.num();
    return Status::Unavailable("cannot bind " + endpoint + ": " + e.what());
  }
}

}  // namespace

Result<std::string> Bind(zmq::socket_t& socket, const std::string& endpoint) {
  int error = 0;
  return BindOnce(socket, endpoint, &error);
}

Result<std::string> BindPreferring(zmq::socket_t& socket, const std::string& endpoint,
                                   const std::string& previous) {
  const auto host = [](const std::string& e) { return e.substr(0, e.rfind(':')); };
  const bool any_port = endpoint.size() > 2 && endpoint.ends_with(":*");
  // A Unix socket has one address: it is waited for like a port.
  const bool unix_socket = endpoint.starts_with(kIpc);
  if (!unix_socket && (!any_port || previous.empty() || host(previous) != host(endpoint))) {
    return Bind(socket, endpoint);
  }
  // Every peer knows only `previous`: a new port would be one no engine or
  // client ever finds. While another process holds it, wait for it.
  const std::string& wanted = unix_socket ? endpoint : previous;
  const auto started = base::MonotonicNow();
  auto next_word = started;
  while (true) {
    int error = 0;
    auto bound = BindOnce(socket, wanted, &error);
    if (bound.ok()) {
      if (next_word != started) spdlog::info("bound {} again", wanted);
      return bound;
    }
    if (unix_socket && error != EADDRINUSE) return bound;
    if (error != EADDRINUSE) {
      // The address itself is gone (another network): nothing to wait for.
      spdlog::warn("cannot bind {} again ({}); peers must reconnect to a new port", previous,
                   bound.status().message());
      return Bind(socket, endpoint);
    }
    if (StopRequested()) {
      return Status::Unavailable("stopped while waiting for " + wanted + " to be free");
    }
    if (base::MonotonicNow() >= next_word) {
      spdlog::warn(
          "{} is taken by another process; waiting for it, since every engine and client of "
          "this cluster knows only that address ({} s so far; free it, or start a new cluster "
          "with taskcluster start)",
          wanted,
          std::chrono::duration_cast<std::chrono::seconds>(base::MonotonicNow() - started).count());
      next_word = base::MonotonicNow() + std::chrono::seconds(10);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

ReconnectWatch::ReconnectWatch(zmq::context_t& context, zmq::socket_t& socket)
    : watched_(socket.handle()), monitor_(context, zmq::socket_type::pair) {
  static std::atomic<uint64_t> counter{0};
  const std::string address = "inproc://reconnect-watch-" + std::to_string(counter.fetch_add(1)) +
                              "-" + std::to_string(reinterpret_cast<uintptr_t>(this));
  zmq_socket_monitor(socket.handle(), address.c_str(),
                     ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED);
  monitor_.set(zmq::sockopt::linger, 0);
  monitor_.connect(address);
}

// Left watching, the socket's closing would still send its events (each
// with the peer's address) to libzmq's own end of the pair, where nothing
// reads them once ours is closed, and they would never be freed: a leak
// that appears once an address is too long to be held inline (a Unix
// socket's path).
ReconnectWatch::~ReconnectWatch() {
  zmq_socket_monitor(watched_, nullptr, 0);
  zmq::message_t event;
  while (monitor_.recv(event, zmq::recv_flags::dontwait)) {
  }
}

bool ReconnectWatch::Reconnected() {
  bool again = false;
  zmq::message_t event, address;
  while (monitor_.recv(event, zmq::recv_flags::dontwait)) {
    if (event.more()) (void)monitor_.recv(address, zmq::recv_flags::dontwait);
    if (event.size() < 2) continue;
    uint16_t kind;
    std::memcpy(&kind, event.data(), sizeof kind);
    if (kind == ZMQ_EVENT_DISCONNECTED) {
      lost_ = true;
    } else if (kind == ZMQ_EVENT_CONNECTED && lost_) {
      lost_ = false;
      again = true;
    }
  }
  return again;
}

Status Connect(zmq::socket_t& socket, const std::string& endpoint) {
  try {
    socket.connect(endpoint);
  } catch (const zmq::error_t& e) {
    return Status::Unavailable("cannot connect to " + endpoint + ": " + e.what());
  }
  return Status::Ok();
}

}  // namespace ztask::protocol
