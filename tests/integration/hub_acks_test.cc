// The hub's acknowledgements of monitor batches, against a real hub, with a
// stand-in scheduler speaking the monitor protocol by hand. The hub holds a
// new task's record back from its file for up to a second; it acknowledges
// batches in the order they came, so that a batch is never acknowledged
// while one before it waits (a hub killed then would be sent the earlier
// one again without the later: a task's submission without its outcome).
#include <algorithm>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "protocol/codec.h"
#include "protocol/connection_file.h"
#include "tests/support/cluster_fixture.h"
#include "tests/support/raw_peer.h"

namespace ztask::testing {
namespace {

using protocol::MsgType;

class MonitorPeer {
 public:
  MonitorPeer(const std::string& endpoint, const std::string& key)
      : peer_(endpoint), signer_(key) {}

  // A monitor_batch numbered `seq` of these messages (each its header,
  // parent, metadata and content frames).
  void SendBatch(int64_t seq, const std::vector<std::vector<std::string>>& messages) {
    std::vector<std::string> frames;
    frames.emplace_back(protocol::kProtocolSignature);
    frames.emplace_back();
    frames.push_back(protocol::EncodeHeader(Header(MsgType::kMonitorBatch, TaskId::Random())));
    frames.push_back(protocol::EncodeParent(std::nullopt));
    frames.push_back(protocol::EncodeBody(protocol::BatchMeta{seq}));
    frames.push_back(protocol::EncodeBody(protocol::MonitorBatch{}));
    std::string& records = frames.emplace_back();
    for (const auto& message : messages) {
      const std::vector<std::string_view> views(message.begin(), message.end());
      protocol::AppendRecord(records, views);
    }
    const std::vector<std::string_view> views(frames.begin(), frames.end());
    frames[protocol::kFrameHmac] = signer_.Sign(views);
    peer_.Send(frames);
  }

  std::vector<std::string> Submitted(const TaskId& id) {
    protocol::TaskSpec spec;
    spec.kind = "command";
    spec.argv = {"true"};
    return protocol::EncodeInner(Header(MsgType::kTaskSubmitted, TaskId::Random()),
                                 Header(MsgType::kTaskRequest, id), protocol::RoutingMeta{}, spec);
  }
  std::vector<std::string> Finished(const TaskId& id) {
    return protocol::EncodeInner(
        Header(MsgType::kTaskOutcome, TaskId::Random()), Header(MsgType::kTaskRequest, id),
        protocol::OutcomeMeta{true, true, ErrorType::kNone, 0, 1}, protocol::TaskResult{});
  }

  // The sequence numbers of the acknowledgements that came within `ms`, in
  // the order they came.
  std::vector<int64_t> Acks(int ms) {
    std::vector<int64_t> seqs;
    protocol::Frames frames;
    const auto deadline = base::MonotonicNow() + std::chrono::milliseconds(ms);
    while (base::MonotonicNow() < deadline) {
      if (!peer_.Receive(frames, 5)) continue;
      std::vector<std::string_view> views;
      for (const auto& f : frames) views.push_back(protocol::View(f));
      if (views.size() <= protocol::kFrameContent) continue;
      auto header = protocol::DecodeHeader(views[protocol::kFrameHeader]);
      if (!header.ok() || header->type != MsgType::kMonitorAck) continue;
      auto ack = protocol::DecodeBody<protocol::MonitorAck>(views[protocol::kFrameContent]);
      if (ack.ok()) seqs.insert(seqs.end(), ack->seqs.begin(), ack->seqs.end());
    }
    return seqs;
  }

 private:
  protocol::Header Header(MsgType type, const TaskId& id) {
    date_ = std::max(date_ + 1, base::WallMicros());
    return {id, type, "stand-in-scheduler", date_};
  }

  RawPeer peer_;
  protocol::Signer signer_;
  int64_t date_ = 0;
};

// A hub started alone in a temporary profile.
struct LoneHub {
  bool Started() {
    return WaitFor([&] {
      auto read = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile));
      if (read.ok() && !read->hub.monitor.empty()) info = *read;
      return info.has_value();
    });
  }
  TempDir dir;
  const std::string profile = (dir.path() / "p").string();
  ChildProcess process{{kBin + "/taskhub", "--profile-dir", profile}, dir.path() / "hub.log"};
  std::optional<protocol::ConnectionInfo> info;
};

TEST(HubAcks, ABatchIsNeverAcknowledgedBeforeAnEarlierOne) {
  LoneHub hub;
  ASSERT_TRUE(hub.Started()) << hub.process.Log();
  MonitorPeer scheduler(hub.info->hub.monitor, hub.info->key);

  // 1: two tasks come (their records held back); 2: the first ends (its
  // record written at once, final); then a stream of new tasks, so that
  // the monitor is never quiet long enough for the hub to write every
  // held record at once.
  const TaskId first = TaskId::New(), second = TaskId::New();
  scheduler.SendBatch(1, {scheduler.Submitted(first), scheduler.Submitted(second)});
  scheduler.SendBatch(2, {scheduler.Finished(first)});
  std::vector<int64_t> acked;
  int64_t seq = 2;
  const auto deadline = base::MonotonicNow() + std::chrono::seconds(30);
  while (std::find(acked.begin(), acked.end(), 2) == acked.end() &&
         base::MonotonicNow() < deadline) {
    scheduler.SendBatch(++seq, {scheduler.Submitted(TaskId::New())});
    for (int64_t s : scheduler.Acks(10)) acked.push_back(s);
  }
  const auto at = [&](int64_t s) {
    return std::find(acked.begin(), acked.end(), s) - acked.begin();
  };
  ASSERT_LT(at(2), static_cast<ptrdiff_t>(acked.size())) << "batch 2 never acknowledged\n"
                                                         << hub.process.Log();
  ASSERT_LT(at(1), static_cast<ptrdiff_t>(acked.size()))
      << "batch 2 acknowledged while batch 1 was not";
  EXPECT_LE(at(1), at(2));
}

// A scheduler sends a batch again when the hub was slow to acknowledge it:
// the hub keeps one acknowledgement to send for it, not one a copy.
TEST(HubAcks, ABatchSentAgainWhileItWaitsIsAcknowledgedOnce) {
  LoneHub hub;
  ASSERT_TRUE(hub.Started()) << hub.process.Log();
  MonitorPeer scheduler(hub.info->hub.monitor, hub.info->key);
  const TaskId id = TaskId::New();
  scheduler.SendBatch(1, {scheduler.Submitted(TaskId::New())});
  scheduler.SendBatch(2, {scheduler.Submitted(id)});
  scheduler.SendBatch(2, {scheduler.Submitted(id)});
  std::vector<int64_t> acked;
  const auto deadline = base::MonotonicNow() + std::chrono::seconds(30);
  while (std::count(acked.begin(), acked.end(), 2) == 0 && base::MonotonicNow() < deadline) {
    for (int64_t s : scheduler.Acks(50)) acked.push_back(s);
  }
  EXPECT_EQ(std::count(acked.begin(), acked.end(), 2), 1) << hub.process.Log();
  EXPECT_EQ(std::count(acked.begin(), acked.end(), 1), 1);
}

}  // namespace
}  // namespace ztask::testing
