// A network partition between one process and a server endpoint, made with
// a TCP forwarder in the test process: the process connects to endpoint()
// instead of the server's. Cut() holds every byte both ways without closing
// anything, as a cut cable or a dead switch does (the process goes on
// running and sending; nothing reaches the other side); Heal() lets what was
// held flow again, as TCP does once the network is back. Break() closes the
// connections, as a reset does.
#ifndef ZTASK_TESTS_SUPPORT_PARTITION_H_
#define ZTASK_TESTS_SUPPORT_PARTITION_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ztask::testing {

class Partition {
 public:
  // upstream: "tcp://127.0.0.1:PORT".
  explicit Partition(const std::string& upstream)
      : upstream_port_(static_cast<uint16_t>(std::stoi(upstream.substr(upstream.rfind(':') + 1)))) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr = Loopback(0);
    ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::listen(listener_, 16);
    socklen_t len = sizeof addr;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~Partition() {
    stop_.store(true);
    thread_.join();
    for (const Link& l : links_) {
      ::close(l.inside);
      ::close(l.outside);
    }
    ::close(listener_);
  }
  Partition(const Partition&) = delete;
  Partition& operator=(const Partition&) = delete;

  std::string endpoint() const { return "tcp://127.0.0.1:" + std::to_string(port_); }
  void Cut() { cut_.store(true); }
  void Heal() { cut_.store(false); }
  // Closes every connection through here, as a peer's reset does; the
  // process sees its connection break and makes a new one (refused while
  // cut).
  void Break() { break_.store(true); }

 private:
  struct Link {
    int inside, outside;  // the process's connection, ours to the server
  };

  static sockaddr_in Loopback(uint16_t port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return addr;
  }

  // Moves what one side has to the other; false when a side closed.
  static bool Forward(int from, int to) {
    char buffer[1 << 16];
    const ssize_t n = ::recv(from, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return false;
    for (ssize_t done = 0; n > 0 && done < n;) {
      const ssize_t w = ::send(to, buffer + done, static_cast<size_t>(n - done), MSG_NOSIGNAL);
      if (w < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (w < 0) return false;
      done += w;
    }
    return true;
  }

  void Run() {
    while (!stop_.load()) {
      if (break_.exchange(false)) {
        for (const Link& l : links_) {
          ::close(l.inside);
          ::close(l.outside);
        }
        links_.clear();
      }
      std::vector<pollfd> fds = {{listener_, POLLIN, 0}};
      const bool cut = cut_.load();
      for (const Link& l : links_) {
        // Cut: nothing is read, so nothing passes and the senders' buffers fill.
        fds.push_back({l.inside, static_cast<short>(cut ? 0 : POLLIN), 0});
        fds.push_back({l.outside, static_cast<short>(cut ? 0 : POLLIN), 0});
      }
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      // The links polled (an accept below adds one); none while cut.
      const size_t polled = cut ? 0 : (fds.size() - 1) / 2;
      for (size_t i = 0; i < polled; ++i) {
        const Link l = links_[i];
        bool open = true;
        if (fds[1 + 2 * i].revents & (POLLIN | POLLHUP | POLLERR)) {
          open = Forward(l.inside, l.outside);
        }
        if (open && (fds[2 + 2 * i].revents & (POLLIN | POLLHUP | POLLERR))) {
          open = Forward(l.outside, l.inside);
        }
        if (!open) {
          ::close(l.inside);
          ::close(l.outside);
          links_.erase(links_.begin() + static_cast<std::ptrdiff_t>(i));
          break;  // the poll set changed: poll again
        }
      }
      if (fds[0].revents & POLLIN) Accept();
    }
  }

  void Accept() {
    const int inside = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (inside < 0) return;
    if (cut_.load()) {  // no new connection passes a cut either
      ::close(inside);
      return;
    }
    const int outside = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr = Loopback(upstream_port_);
    if (::connect(outside, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(inside);
      ::close(outside);
      return;
    }
    links_.push_back({inside, outside});
  }

  uint16_t upstream_port_;
  uint16_t port_ = 0;
  int listener_ = -1;
  std::vector<Link> links_;  // the forwarding thread's
  std::atomic<bool> cut_{false}, break_{false}, stop_{false};
  std::thread thread_;
};

}  // namespace ztask::testing

#endif  // ZTASK_TESTS_SUPPORT_PARTITION_H_
