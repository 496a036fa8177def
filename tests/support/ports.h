// Ports for test daemons that cannot bind port 0 and report it back (sshd,
// slurmctld): ask the kernel for a free one, then let the daemon take it.
// And a connection by hand to a "tcp://127.0.0.1:PORT" or "ipc://PATH"
// endpoint, for tests that speak to it as an attacker would.
#ifndef ZTASK_TESTS_SUPPORT_PORTS_H_
#define ZTASK_TESTS_SUPPORT_PORTS_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace ztask::testing {

inline sockaddr_in LoopbackAddressOf(const std::string& endpoint) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port =
      htons(static_cast<uint16_t>(std::stoi(endpoint.substr(endpoint.rfind(':') + 1))));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

// A stream socket connected to `endpoint` (a TCP port on loopback, or a
// Unix socket), or -1.
inline int ConnectRaw(const std::string& endpoint) {
  constexpr std::string_view kIpc = "ipc://";
  int fd = -1;
  bool connected = false;
  if (endpoint.starts_with(kIpc)) {
    const std::string path = endpoint.substr(kIpc.size());
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (path.size() >= sizeof address.sun_path) return -1;
    std::memcpy(address.sun_path, path.data(), path.size());
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    connected =
        fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  } else {
    sockaddr_in address = LoopbackAddressOf(endpoint);
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    connected =
        fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  }
  if (!connected && fd >= 0) {
    ::close(fd);
    fd = -1;
  }
  return fd;
}

inline int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// True once something accepts TCP connections on 127.0.0.1:port.
inline bool Accepts(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

}  // namespace ztask::testing

#endif  // ZTASK_TESTS_SUPPORT_PORTS_H_
