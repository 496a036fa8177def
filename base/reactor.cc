// The one poll loop (base/reactor.h).
#include "base/reactor.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "base/clock.h"

namespace ztask::base {
namespace {

// zmq::poll, with an interrupted wait taken as a wait in which nothing came.
Status Poll(zmq::pollitem_t* items, size_t count, std::chrono::milliseconds timeout) {
  try {
    zmq::poll(items, count, timeout);
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) return Status::Internal(std::string("poll failed: ") + e.what());
    for (size_t i = 0; i < count; ++i) items[i].revents = 0;
  }
  return Status::Ok();
}

// What a ZeroMQ socket has now (ZMQ_POLLIN, ZMQ_POLLOUT), or kInterrupted:
// a signal cut the look short, which may have taken the socket's news out
// of its descriptor all the same.
constexpr short kInterrupted = -1;
Result<short> Events(void* socket) {
  int events = 0;
  size_t size = sizeof events;
  if (zmq_getsockopt(socket, ZMQ_EVENTS, &events, &size) != 0) {
    if (zmq_errno() == EINTR) return kInterrupted;
    return Status::Internal(std::string("poll failed: ") + zmq_strerror(zmq_errno()));
  }
  return static_cast<short>(events & (ZMQ_POLLIN | ZMQ_POLLOUT));
}

// A descriptor's wanted events, as poll(2) and back, as zmq_poll maps them.
short ToPoll(short want) {
  short events = 0;
  if (want & ZMQ_POLLIN) events |= POLLIN;
  if (want & ZMQ_POLLOUT) events |= POLLOUT;
  if (want & ZMQ_POLLPRI) events |= POLLPRI;
  return events;
}
short FromPoll(short revents) {
  short events = 0;
  if (revents & POLLIN) events |= ZMQ_POLLIN;
  if (revents & POLLOUT) events |= ZMQ_POLLOUT;
  if (revents & POLLPRI) events |= ZMQ_POLLPRI;
  if (revents & ~(POLLIN | POLLOUT | POLLPRI)) events |= ZMQ_POLLERR;
  return events;
}

// Microseconds up to whole milliseconds, so that a wait never ends just
// before what it waits for.
std::chrono::milliseconds CeilMillis(int64_t us) {
  return std::chrono::milliseconds(us <= 0 ? 0 : (us + 999) / 1000);
}

// The descriptor that signals news on a socket (ZMQ_FD).
int DescriptorOf(zmq::socket_t& socket) { return socket.get(zmq::sockopt::fd); }

}  // namespace

void Reactor::Add(zmq::socket_t& socket, Handler on_readable) {
  watched_.push_back(
      {socket.handle(), DescriptorOf(socket), {}, [h = std::move(on_readable)](short) { h(); }});
}

void Reactor::Add(int fd, Handler on_readable) {
  watched_.push_back({nullptr, fd, {}, [h = std::move(on_readable)](short) { h(); }});
}

void Reactor::Add(zmq::socket_t& socket, std::function<short()> events,
                  std::function<void(short)> on_ready) {
  watched_.push_back(
      {socket.handle(), DescriptorOf(socket), std::move(events), std::move(on_ready)});
}

void Reactor::Every(std::chrono::microseconds period, Handler on_due) {
  const int64_t period_us = std::max<int64_t>(1, period.count());
  timers_.push_back({period_us, MonotonicMicros() + period_us, std::move(on_due)});
}

// A turn looks at each socket's events first (ZeroMQ's descriptor tells
// only of news since the socket last looked: a message may wait without
// it, left by a handler or brought in by a send), then, when nothing is
// ready, waits on the descriptors, and then asks only the sockets whose
// descriptor spoke: two system calls a socket that stayed quiet, where
// zmq_poll spends four, and no wait at all when a socket has something.
Status Reactor::Turn(std::chrono::microseconds max_wait) {
  int64_t wait_us = max_wait.count() < 0 ? INT64_MAX : max_wait.count();
  if (!timers_.empty()) {
    const int64_t now = MonotonicMicros();
    for (const Timer& t : timers_)
      wait_us = std::min(wait_us, std::max<int64_t>(0, t.due_us - now));
  }
  const int timeout_ms =
      wait_us == INT64_MAX
          ? -1
          : static_cast<int>(std::min<int64_t>(CeilMillis(wait_us).count(), INT32_MAX));
  const size_t n = watched_.size();
  wanted_.assign(n, 0);
  ready_.assign(n, 0);
  pollfds_.clear();
  polled_.clear();
  bool any = false;
  bool plain = false;
  for (size_t i = 0; i < n; ++i) {
    const Watched& w = watched_[i];
    const short want = w.events ? w.events() : static_cast<short>(ZMQ_POLLIN);
    wanted_[i] = want;
    if (want == 0) continue;
    if (w.socket) {
      auto events = Events(w.socket);
      if (!events.ok()) return events.status();
      if (*events == kInterrupted) {
        any = true;  // a turn with nothing ready, as zmq_poll's: the next one looks again
        continue;
      }
      ready_[i] = static_cast<short>(*events & want);
      any = any || ready_[i] != 0;
      pollfds_.push_back({w.fd, POLLIN, 0});
    } else {
      pollfds_.push_back({w.fd, ToPoll(want), 0});
      plain = true;
    }
    polled_.push_back(i);
  }
  // Something is ready: the descriptors are only looked at, not waited on
  // (and not at all when every one is a socket's, asked already).
  if (!any || plain) {
    const int rc = ::poll(pollfds_.data(), pollfds_.size(), any ? 0 : timeout_ms);
    if (rc < 0 && errno != EINTR) {
      return Status::Internal(std::string("poll failed: ") + std::strerror(errno));
    }
    for (size_t k = 0; rc > 0 && k < pollfds_.size(); ++k) {
      if (pollfds_[k].revents == 0) continue;
      const size_t i = polled_[k];
      const Watched& w = watched_[i];
      if (!w.socket) {
        ready_[i] = FromPoll(pollfds_[k].revents);
      } else if (ready_[i] == 0) {
        auto events = Events(w.socket);
        if (!events.ok()) return events.status();
        if (*events != kInterrupted) ready_[i] = static_cast<short>(*events & wanted_[i]);
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (ready_[i] & wanted_[i]) watched_[i].on_ready(ready_[i]);
  }
  RunTimers();
  return Status::Ok();
}

void Reactor::RunTimers() {
  if (timers_.empty()) return;
  const int64_t now = MonotonicMicros();
  for (Timer& t : timers_) {
    if (now < t.due_us) continue;
    t.due_us = now + t.period_us;
    t.on_due();
  }
}

Status Reactor::Run(const std::atomic<bool>& stop, const Handler& after_turn,
                    std::chrono::microseconds max_wait) {
  while (!stop.load()) {
    ZTASK_RETURN_IF_ERROR(Turn(max_wait));
    if (after_turn) after_turn();
  }
  return Status::Ok();
}

bool WaitReady(zmq::socket_t& socket, short events, std::chrono::milliseconds timeout) {
  zmq::pollitem_t item{socket.handle(), 0, events, 0};
  return Poll(&item, 1, timeout).ok() && (item.revents & events) != 0;
}

Wakeup::Wakeup() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

Wakeup::~Wakeup() {
  if (fd_ >= 0) ::close(fd_);
}

void Wakeup::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(fd_, &one, sizeof one);
}

}  // namespace ztask::base
