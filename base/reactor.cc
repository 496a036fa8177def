// The one poll loop (base/reactor.h).
#include "base/reactor.h"

#include <algorithm>
#include <cerrno>
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

// Microseconds up to whole milliseconds, so that a wait never ends just
// before what it waits for.
std::chrono::milliseconds CeilMillis(int64_t us) {
  return std::chrono::milliseconds(us <= 0 ? 0 : (us + 999) / 1000);
}

}  // namespace

void Reactor::Add(zmq::socket_t& socket, Handler on_readable) {
  watched_.push_back({socket.handle(), -1, {}, [h = std::move(on_readable)](short) { h(); }});
}

void Reactor::Add(int fd, Handler on_readable) {
  watched_.push_back({nullptr, fd, {}, [h = std::move(on_readable)](short) { h(); }});
}

void Reactor::Add(zmq::socket_t& socket, std::function<short()> events,
                  std::function<void(short)> on_ready) {
  watched_.push_back({socket.handle(), -1, std::move(events), std::move(on_ready)});
}

void Reactor::Every(std::chrono::microseconds period, Handler on_due) {
  const int64_t period_us = std::max<int64_t>(1, period.count());
  timers_.push_back({period_us, MonotonicMicros() + period_us, std::move(on_due)});
}

Status Reactor::Turn(std::chrono::microseconds max_wait) {
  int64_t wait_us = max_wait.count() < 0 ? INT64_MAX : max_wait.count();
  if (!timers_.empty()) {
    const int64_t now = MonotonicMicros();
    for (const Timer& t : timers_)
      wait_us = std::min(wait_us, std::max<int64_t>(0, t.due_us - now));
  }
  const std::chrono::milliseconds timeout =
      wait_us == INT64_MAX ? std::chrono::milliseconds(-1) : CeilMillis(wait_us);
  items_.resize(watched_.size());
  for (size_t i = 0; i < watched_.size(); ++i) {
    const Watched& w = watched_[i];
    items_[i] = {w.socket, w.fd, w.events ? w.events() : static_cast<short>(ZMQ_POLLIN), 0};
  }
  ZTASK_RETURN_IF_ERROR(Poll(items_.data(), items_.size(), timeout));
  for (size_t i = 0; i < watched_.size(); ++i) {
    if (items_[i].revents & items_[i].events) watched_[i].on_ready(items_[i].revents);
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

}  // namespace ztask::base
