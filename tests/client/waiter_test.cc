// client::Waiter, the client's one way to wait: Until's turns, deadline and
// notice hook, and Ask's reply, its hand-off of other messages and the
// error that names a silent peer. Real sockets on 127.0.0.1 and inproc; a
// peer thread answers (or does not).
#include "client/waiter.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include "base/clock.h"
#include "base/reactor.h"
#include "protocol/wire.h"

namespace ztask::client {
namespace {

using protocol::MsgType;
using std::chrono::milliseconds;

const protocol::Signer kSigner("waiter-test-key");
constexpr char kProfile[] = "/tmp/waiter-test-profile";

int64_t ElapsedMs(int64_t since_us) { return (base::MonotonicMicros() - since_us) / 1000; }

class WaiterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    router_.set(zmq::sockopt::linger, 0);
    dealer_.set(zmq::sockopt::linger, 0);
    auto endpoint = protocol::Bind(router_, "tcp://127.0.0.1:*");
    ASSERT_TRUE(endpoint.ok());
    endpoint_ = *endpoint;
    ASSERT_TRUE(protocol::Connect(dealer_, endpoint_).ok());
  }
  void TearDown() override {
    if (peer_.joinable()) peer_.join();
  }

  Waiter MakeWaiter() {
    Waiter::Hooks hooks;
    hooks.notice = [this] { ++notices_; };
    hooks.on_other = [this](const protocol::Header& h, std::span<const std::string_view>) {
      others_.push_back(h.type);
    };
    return Waiter(kSigner, "waiter-test", kProfile, std::move(hooks));
  }

  Peer HubPeer(milliseconds answer_within) {
    return {&dealer_, "hub", endpoint_, answer_within};
  }

  // The peer: takes one request, waits `delay`, then, unless `answer` is
  // false, sends a message of another type and the reply (count 7).
  void Serve(milliseconds delay, bool answer = true) {
    peer_ = std::thread([this, delay, answer] {
      protocol::Frames frames;
      const base::Deadline until(std::chrono::seconds(20));
      while (!until.expired()) {
        base::WaitReady(router_, ZMQ_POLLIN, milliseconds(100));
        if (!protocol::TryReceive(router_, frames)) continue;
        auto asked = protocol::DecodeHeader(protocol::View(frames[1 + protocol::kFrameHeader]));
        if (!asked.ok() || !answer) return;
        std::this_thread::sleep_for(delay);
        const std::string peer(protocol::View(frames[0]));
        Send(peer, MsgType::kQueueRequest, *asked);
        Send(peer, MsgType::kPurgeReply, *asked);
        return;
      }
    });
  }

  void Send(const std::string& peer, MsgType type, const protocol::Header& parent) {
    const std::string_view prefix[] = {peer};
    (void)protocol::SendEncoded(
        router_, prefix,
        protocol::EncodeMessage(
            kSigner, protocol::Header{TaskId::Random(), type, "peer", base::WallMicros()}, parent,
            protocol::Empty{}, protocol::Count{7}));
  }

  zmq::context_t context_{1};
  zmq::socket_t router_{context_, zmq::socket_type::router};
  zmq::socket_t dealer_{context_, zmq::socket_type::dealer};
  std::string endpoint_;
  std::thread peer_;
  int notices_ = 0;
  std::vector<MsgType> others_;
};

TEST_F(WaiterTest, UntilNoticesBeforeEachTurnAndEndsWithTheTurnsOutcome) {
  Waiter waiter = MakeWaiter();
  int turns = 0;
  Status s = waiter.Until(
      [&] {
        EXPECT_EQ(notices_, turns + 1) << "the notice hook runs before each turn";
        return ++turns == 3 ? Turn::Done(Status::NotFound("gone")) : Turn::Again(milliseconds(1));
      },
      DeadlineAfter(10), [] { return Status::TimedOut("expired"); }, dealer_);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_EQ(turns, 3);
}

TEST_F(WaiterTest, UntilReturnsTheExpiredErrorOnceTheDeadlinePasses) {
  Waiter waiter = MakeWaiter();
  int turns = 0;
  const int64_t start = base::MonotonicMicros();
  Status s = waiter.Until(
      [&] {
        ++turns;
        return Turn::Again();
      },
      DeadlineAfter(0.3), [] { return Status::TimedOut("expired"); }, dealer_);
  EXPECT_EQ(s.code(), Status::Code::kTimedOut);
  EXPECT_EQ(s.message(), "expired");
  EXPECT_GE(ElapsedMs(start), 300);
  EXPECT_LT(ElapsedMs(start), 5000);
  EXPECT_GE(turns, 2) << "a turn at most every pause (100 ms)";
}

TEST_F(WaiterTest, ATurnThatEndsTheWaitWinsOverAPassedDeadline) {
  Waiter waiter = MakeWaiter();
  Status s = waiter.Until([] { return Turn::Done(); }, DeadlineAfter(0),
                          [] { return Status::TimedOut("expired"); }, dealer_);
  EXPECT_TRUE(s.ok());
}

TEST_F(WaiterTest, UntilWakesAsSoonAsTheSocketIsReady) {
  zmq::socket_t a(context_, zmq::socket_type::pair), b(context_, zmq::socket_type::pair);
  a.bind("inproc://waiter-test");
  b.connect("inproc://waiter-test");
  Waiter waiter = MakeWaiter();
  std::thread sender([&] {
    std::this_thread::sleep_for(milliseconds(100));
    b.send(zmq::str_buffer("hello"), zmq::send_flags::none);
  });
  const int64_t start = base::MonotonicMicros();
  bool got = false;
  Status s = waiter.Until(
      [&] {
        zmq::message_t m;
        got = a.recv(m, zmq::recv_flags::dontwait).has_value();
        return got ? Turn::Done() : Turn::Again(milliseconds(10000));
      },
      DeadlineAfter(20), [] { return Status::TimedOut("expired"); }, a);
  sender.join();
  EXPECT_TRUE(s.ok());
  EXPECT_TRUE(got);
  EXPECT_LT(ElapsedMs(start), 5000) << "woken by the message, not by the 10 s pause";
}

TEST_F(WaiterTest, AskReturnsTheReplyAndHandsOnOtherMessages) {
  Serve(milliseconds(0));
  Waiter waiter = MakeWaiter();
  auto reply = waiter.Ask<MsgType::kPurgeRequest, MsgType::kPurgeReply>(
      HubPeer(milliseconds(5000)), protocol::PurgeRequest{{}, true});
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->count, 7);
  ASSERT_EQ(others_.size(), 1u);
  EXPECT_EQ(others_[0], MsgType::kQueueRequest);
}

TEST_F(WaiterTest, ASilentPeerIsUnreachableNamingItsAddressAndTheProfile) {
  Serve(milliseconds(0), /*answer=*/false);
  Waiter waiter = MakeWaiter();
  const int64_t start = base::MonotonicMicros();
  auto reply = waiter.Ask<MsgType::kPurgeRequest, MsgType::kPurgeReply>(
      HubPeer(milliseconds(300)), protocol::PurgeRequest{{}, true});
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(reply.status().message(),
            "the hub at " + endpoint_ + " does not answer: is the cluster in " + kProfile +
                " running? (start one with: taskcluster start)");
  EXPECT_GE(ElapsedMs(start), 300);
  EXPECT_LT(ElapsedMs(start), 5000);
}

TEST_F(WaiterTest, AHeldRequestHasItsHoldOnTopOfThePeersTime) {
  Serve(milliseconds(300));
  Waiter waiter = MakeWaiter();
  auto reply = waiter.Ask<MsgType::kPurgeRequest, MsgType::kPurgeReply>(
      HubPeer(milliseconds(100)), protocol::PurgeRequest{{}, true}, milliseconds(3000));
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->count, 7);
}

TEST(DeadlineAfter, NegativeOrEndlessNeverPasses) {
  EXPECT_TRUE(DeadlineAfter(-1).never());
  EXPECT_TRUE(DeadlineAfter(1e300).never());
  EXPECT_FALSE(DeadlineAfter(0.5).never());
  EXPECT_TRUE(DeadlineAfter(0).expired());
}

}  // namespace
}  // namespace ztask::client
