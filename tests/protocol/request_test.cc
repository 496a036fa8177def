// protocol::Ask over real sockets: a DEALER asks, a ROUTER on 127.0.0.1
// answers (or does not) from another thread.
#include "base/clock.h"
#include "base/reactor.h"
#include "protocol/request.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

namespace ztask::protocol {
namespace {

const Signer kSigner("request-test-key");
const Signer kOtherSigner("someone-else");

class RequestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    router_.set(zmq::sockopt::linger, 0);
    dealer_.set(zmq::sockopt::linger, 0);
    auto endpoint = Bind(router_, "tcp://127.0.0.1:*");
    ASSERT_TRUE(endpoint.ok());
    ASSERT_TRUE(Connect(dealer_, *endpoint).ok());
  }
  void TearDown() override {
    if (peer_.joinable()) peer_.join();
  }

  // The peer: takes one request, then runs `answer` with its routing id
  // and decoded header.
  void Serve(std::function<void(zmq::socket_t&, const std::string&, const Header&)> answer) {
    peer_ = std::thread([this, answer = std::move(answer)] {
      Frames frames;
      const base::Deadline until(std::chrono::seconds(20));
      while (!until.expired()) {
        base::WaitReady(router_, ZMQ_POLLIN, std::chrono::milliseconds(100));
        if (!TryReceive(router_, frames)) continue;
        auto header = DecodeHeader(View(frames[1 + kFrameHeader]));
        if (!header.ok()) return;
        answer(router_, std::string(View(frames[0])), *header);
        return;
      }
    });
  }

  static void Answer(zmq::socket_t& router, const std::string& peer, const Signer& signer,
                     MsgType type, const std::optional<Header>& parent, const Count& content) {
    const std::string_view prefix[] = {peer};
    (void)SendEncoded(router, prefix,
                      EncodeMessage(signer, Header{TaskId::Random(), type, "peer", base::WallMicros()},
                                    parent, Empty{}, content));
  }

  zmq::context_t context_{1};
  zmq::socket_t router_{context_, zmq::socket_type::router};
  zmq::socket_t dealer_{context_, zmq::socket_type::dealer};
  std::thread peer_;
};

Header Request() { return {TaskId::Random(), MsgType::kPurgeRequest, "asker", base::WallMicros()}; }

TEST_F(RequestTest, TheReplyToThisRequestIsTakenAndEverythingElseIsSkipped) {
  int others = 0, unreadable = 0;
  Serve([&](zmq::socket_t& r, const std::string& peer, const Header& asked) {
    // A reply to another request, one signed with the wrong key, garbage,
    // another type of message, then the reply.
    Answer(r, peer, kSigner, MsgType::kPurgeReply, Request(), Count{1});
    Answer(r, peer, kOtherSigner, MsgType::kPurgeReply, asked, Count{2});
    const std::string_view prefix[] = {peer};
    (void)SendEncoded(r, prefix, {"not", "a", "message"});
    Answer(r, peer, kSigner, MsgType::kQueueRequest, asked, Count{3});
    Answer(r, peer, kSigner, MsgType::kPurgeReply, asked, Count{4});
  });
  AskOptions options;
  options.on_other = [&](const Header& h, std::span<const std::string_view>) {
    EXPECT_EQ(h.type, MsgType::kQueueRequest);
    ++others;
  };
  options.on_unreadable = [&](const Status&) { ++unreadable; };
  const Header header = Request();
  auto reply = Ask<MsgType::kPurgeReply>(dealer_, kSigner, header, PurgeRequest{{}, true}, options);
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->content.count, 4);
  ASSERT_TRUE(reply->parent.has_value());
  EXPECT_EQ(reply->parent->id, header.id);
  EXPECT_EQ(others, 1) << "a verified message of another type goes to on_other";
  EXPECT_EQ(unreadable, 0);
}

TEST_F(RequestTest, AReplyThatCannotBeDecodedIsReportedAndTheWaitGoesOn) {
  int unreadable = 0;
  Serve([&](zmq::socket_t& r, const std::string& peer, const Header& asked) {
    // Signed, of the reply's type, content not a map.
    std::vector<std::string> bad =
        EncodeMessage(kSigner, Header{TaskId::Random(), MsgType::kPurgeReply, "peer", base::WallMicros()},
                      asked, Empty{}, Count{5});
    bad[kFrameContent] = "\x01";
    std::vector<std::string_view> views(bad.begin(), bad.end());
    bad[kFrameHmac] = kSigner.Sign(views);
    const std::string_view prefix[] = {peer};
    (void)SendEncoded(r, prefix, bad);
    Answer(r, peer, kSigner, MsgType::kPurgeReply, asked, Count{6});
  });
  AskOptions options;
  options.on_unreadable = [&](const Status& why) {
    EXPECT_EQ(why.code(), Status::Code::kMalformed);
    ++unreadable;
  };
  auto reply =
      Ask<MsgType::kPurgeReply>(dealer_, kSigner, Request(), PurgeRequest{{}, true}, options);
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->content.count, 6);
  EXPECT_EQ(unreadable, 1);
}

TEST_F(RequestTest, NoAnswerIsTimedOutAfterTheTimeGiven) {
  Serve([](zmq::socket_t&, const std::string&, const Header&) {});  // takes it, says nothing
  AskOptions options;
  options.timeout = std::chrono::milliseconds(300);
  const auto start = std::chrono::steady_clock::now();
  auto reply =
      Ask<MsgType::kPurgeReply>(dealer_, kSigner, Request(), PurgeRequest{{}, true}, options);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), Status::Code::kTimedOut);
  EXPECT_NE(reply.status().message().find("purge_reply"), std::string::npos)
      << reply.status().message();
  EXPECT_GE(took, std::chrono::milliseconds(300));
  EXPECT_LT(took, std::chrono::seconds(5));
}

TEST_F(RequestTest, AStopEndsTheWaitEarly) {
  std::atomic<bool> stop{false};
  Serve([&](zmq::socket_t&, const std::string&, const Header&) { stop.store(true); });
  AskOptions options;
  options.timeout = std::chrono::seconds(30);
  options.stop = &stop;
  const auto start = std::chrono::steady_clock::now();
  auto reply =
      Ask<MsgType::kPurgeReply>(dealer_, kSigner, Request(), PurgeRequest{{}, true}, options);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), Status::Code::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace ztask::protocol
