#include "base/reactor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"

namespace ztask::base {
namespace {

// A pair of connected sockets over inproc.
struct Pair {
  zmq::context_t context{1};
  zmq::socket_t a{context, zmq::socket_type::pair};
  zmq::socket_t b{context, zmq::socket_type::pair};
  explicit Pair(const std::string& name) {
    a.bind("inproc://" + name);
    b.connect("inproc://" + name);
  }
};

std::string Take(zmq::socket_t& s) {
  zmq::message_t m;
  return s.recv(m, zmq::recv_flags::dontwait) ? m.to_string() : "";
}

TEST(Reactor, RunsTheHandlerOfEachReadySocketInTheOrderAdded) {
  Pair one("one"), two("two");
  Reactor reactor;
  std::vector<std::string> ran;
  reactor.Add(one.b, [&] { ran.push_back("one:" + Take(one.b)); });
  reactor.Add(two.b, [&] { ran.push_back("two:" + Take(two.b)); });
  two.a.send(zmq::str_buffer("x"));
  one.a.send(zmq::str_buffer("y"));
  ASSERT_TRUE(WaitReady(two.b, ZMQ_POLLIN, std::chrono::seconds(5)));
  ASSERT_TRUE(WaitReady(one.b, ZMQ_POLLIN, std::chrono::seconds(5)));
  ASSERT_TRUE(reactor.Turn(std::chrono::seconds(5)).ok());
  EXPECT_EQ(ran, (std::vector<std::string>{"one:y", "two:x"}));
  ran.clear();
  ASSERT_TRUE(reactor.Turn(std::chrono::milliseconds(0)).ok());
  EXPECT_TRUE(ran.empty()) << "nothing ready, nothing run";
}

// ZeroMQ's descriptor tells only of news since the socket last looked: a
// message a handler left, or one whose news a send on the same socket
// took in, waits without it. The next turn finds it and does not wait.
TEST(Reactor, AMessageThatWaitsWithoutNewsIsFoundAtOnce) {
  Pair p("left");
  Reactor reactor;
  std::vector<std::string> ran;
  reactor.Add(p.b, [&] { ran.push_back(Take(p.b)); });  // one message a turn
  p.a.send(zmq::str_buffer("1"), zmq::send_flags::none);
  p.a.send(zmq::str_buffer("2"), zmq::send_flags::none);
  ASSERT_TRUE(WaitReady(p.b, ZMQ_POLLIN, std::chrono::seconds(5)));
  ASSERT_TRUE(reactor.Turn(std::chrono::seconds(5)).ok());
  int64_t start = MonotonicMicros();
  ASSERT_TRUE(reactor.Turn(std::chrono::seconds(5)).ok());
  EXPECT_EQ(ran, (std::vector<std::string>{"1", "2"}));
  EXPECT_LT(MonotonicMicros() - start, 1'000'000) << "the second was there: no wait";

  p.a.send(zmq::str_buffer("3"), zmq::send_flags::none);
  ASSERT_TRUE(WaitReady(p.b, ZMQ_POLLIN, std::chrono::seconds(5)));
  p.b.send(zmq::str_buffer("back"), zmq::send_flags::none);  // a send looks too
  start = MonotonicMicros();
  ASSERT_TRUE(reactor.Turn(std::chrono::seconds(5)).ok());
  EXPECT_EQ(ran.back(), "3");
  EXPECT_LT(MonotonicMicros() - start, 1'000'000);
}

TEST(Reactor, ATurnEndsAtItsLimitOrAtTheNextTimer) {
  Reactor reactor;
  Pair idle("idle");
  reactor.Add(idle.b, [] { FAIL() << "nothing came"; });
  int64_t start = MonotonicMicros();
  ASSERT_TRUE(reactor.Turn(std::chrono::milliseconds(30)).ok());
  EXPECT_GE(MonotonicMicros() - start, 30000);

  int due = 0;
  reactor.Every(std::chrono::milliseconds(20), [&] { ++due; });
  start = MonotonicMicros();
  while (due < 3) ASSERT_TRUE(reactor.Turn(std::chrono::seconds(10)).ok());
  const int64_t took = MonotonicMicros() - start;
  EXPECT_GE(took, 60000) << "every 20 ms, the first one period on";
  EXPECT_LT(took, 5'000'000) << "the timer, not the 10 s limit, ended each turn";
}

TEST(Reactor, ASocketWhoseEventsAreNoneThisTurnIsLeftOut) {
  Pair p("gated");
  Reactor reactor;
  bool open = false;
  int ran = 0;
  reactor.Add(
      p.b, [&] { return static_cast<short>(open ? ZMQ_POLLIN : 0); },
      [&](short ready) {
        EXPECT_TRUE(ready & ZMQ_POLLIN);
        Take(p.b);
        ++ran;
      });
  p.a.send(zmq::str_buffer("m"));
  ASSERT_TRUE(WaitReady(p.b, ZMQ_POLLIN, std::chrono::seconds(5)));
  ASSERT_TRUE(reactor.Turn(std::chrono::milliseconds(10)).ok());
  EXPECT_EQ(ran, 0);
  open = true;
  ASSERT_TRUE(reactor.Turn(std::chrono::milliseconds(10)).ok());
  EXPECT_EQ(ran, 1);
}

TEST(Reactor, WatchesDescriptorsAndRunsUntilStopped) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  Reactor reactor;
  std::atomic<bool> stop{false};
  int turns = 0, read = 0;
  reactor.Add(fds[0], [&] {
    char c;
    if (::read(fds[0], &c, 1) == 1) ++read;
    if (read == 2) stop.store(true);
  });
  std::thread writer([&] { [[maybe_unused]] ssize_t n = ::write(fds[1], "ab", 2); });
  ASSERT_TRUE(reactor
                  .Run(
                      stop, [&] { ++turns; }, std::chrono::seconds(10))
                  .ok());
  writer.join();
  EXPECT_EQ(read, 2);
  EXPECT_GE(turns, 1);
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST(Reactor, ASignalDuringTheWaitIsATurnWithNothingReady) {
  struct sigaction action {};
  action.sa_handler = [](int) {};
  struct sigaction before {};
  ASSERT_EQ(::sigaction(SIGUSR1, &action, &before), 0);
  Pair p("signalled");
  Reactor reactor;
  reactor.Add(p.b, [] { FAIL() << "nothing came"; });
  const pthread_t self = ::pthread_self();
  std::thread signaller([self] {
    ::usleep(20000);
    ::pthread_kill(self, SIGUSR1);
  });
  EXPECT_TRUE(reactor.Turn(std::chrono::seconds(10)).ok());
  signaller.join();
  ::sigaction(SIGUSR1, &before, nullptr);
}

TEST(WaitReady, TellsWritableFromFullAndReadableFromEmpty) {
  Pair p("wait");
  EXPECT_FALSE(WaitReady(p.b, ZMQ_POLLIN, std::chrono::milliseconds(10)));
  EXPECT_TRUE(WaitReady(p.a, ZMQ_POLLOUT, std::chrono::milliseconds(10)));
  p.a.send(zmq::str_buffer("m"));
  EXPECT_TRUE(WaitReady(p.b, ZMQ_POLLIN, std::chrono::seconds(5)));
}

}  // namespace
}  // namespace ztask::base
