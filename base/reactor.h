// The reactor: the one poll loop with deadlines of every ztask process. It
// owns no socket: the thread that owns the sockets registers them with a
// handler each, and turns the reactor; a turn waits until a socket or
// descriptor is ready, a timer is due or the turn's own limit passes, then
// runs the handlers of what is ready and of the timers due, in the order
// they were added. A signal that interrupts the wait is a turn with nothing
// ready. WaitReady is the same wait for one socket (a request and its
// reply, a full queue waited out).
//
// Must not: decide anything about messages (handlers do), or be shared:
// owned by one thread, with the sockets it watches.
#ifndef ZTASK_BASE_REACTOR_H_
#define ZTASK_BASE_REACTOR_H_

#include <poll.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>
#include <zmq.hpp>

#include "ztask/status.h"

namespace ztask::base {

class Reactor {
 public:
  using Handler = std::function<void()>;

  // Runs `on_readable` in each turn in which `socket` has a message.
  // REQUIRES: the socket outlives the reactor.
  void Add(zmq::socket_t& socket, Handler on_readable);
  // The same for a descriptor (a pipe, an eventfd, a pidfd).
  void Add(int fd, Handler on_readable);
  // A socket whose wanted events change from turn to turn: `events` is
  // asked before each wait (ZMQ_POLLIN, ZMQ_POLLOUT, or 0 to leave it out
  // of this turn); `on_ready` gets the events that came.
  void Add(zmq::socket_t& socket, std::function<short()> events,
           std::function<void(short)> on_ready);
  // Runs `on_due` every `period` from now (the first time one period on).
  void Every(std::chrono::microseconds period, Handler on_due);

  // One turn, waiting at most `max_wait` (0: look without waiting; less
  // than 0: until something is ready or due). Returns an error only when
  // polling itself is broken.
  Status Turn(std::chrono::microseconds max_wait);
  // Turns until `stop` holds, running `after_turn` (when given) after each.
  Status Run(const std::atomic<bool>& stop, const Handler& after_turn = {},
             std::chrono::microseconds max_wait = std::chrono::seconds(1));

 private:
  struct Watched {
    void* socket = nullptr;
    int fd = -1;                    // the descriptor, or the socket's (ZMQ_FD)
    std::function<short()> events;  // empty: ZMQ_POLLIN always
    std::function<void(short)> on_ready;
  };
  struct Timer {
    int64_t period_us;
    int64_t due_us;
    Handler on_due;
  };
  void RunTimers();

  std::vector<Watched> watched_;
  // A turn's scratch: per watched, the events wanted and ready; the
  // descriptors polled, and the watched each stands for.
  std::vector<short> wanted_, ready_;
  std::vector<pollfd> pollfds_;
  std::vector<size_t> polled_;
  std::vector<Timer> timers_;
};

// Waits until `socket` is ready for `events` (ZMQ_POLLIN, ZMQ_POLLOUT) or
// `timeout` passes; true when it is ready. An interrupted wait is false.
bool WaitReady(zmq::socket_t& socket, short events, std::chrono::milliseconds timeout);

// A descriptor that any thread (the signal thread asking a server to stop)
// makes readable, so that the thread turning a reactor that watches it wakes
// at once. An eventfd, never read: its servers end their loop once it is
// readable.
class Wakeup {
 public:
  Wakeup();
  ~Wakeup();
  Wakeup(const Wakeup&) = delete;
  Wakeup& operator=(const Wakeup&) = delete;

  // False when no eventfd could be made (out of descriptors).
  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // Thread-safe.
  void Wake();

 private:
  int fd_ = -1;
};

}  // namespace ztask::base

#endif  // ZTASK_BASE_REACTOR_H_
