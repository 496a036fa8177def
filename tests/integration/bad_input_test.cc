// Bad input end to end: every bound socket of a running cluster gets
// garbage, truncated messages, a wrong key, an unknown type, oversized
// messages, raw bytes that are not ZeroMQ, and a flood of registrations under
// made-up names. Every process stays up, the real clients and engines are
// served, and the drops are counted in the logs.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <zmq.hpp>

#include "base/clock.h"
#include "protocol/codec.h"
#include "protocol/connection_file.h"
#include "protocol/wire.h"
#include "tests/support/cluster_fixture.h"
#include "tests/support/ports.h"

namespace ztask::testing {
namespace {

using protocol::MsgType;

// The largest N in "<before>N dropped messages" anywhere in `text`.
uint64_t DroppedCount(const std::string& text, const std::string& before = "") {
  const std::string suffix = " dropped messages";
  uint64_t most = 0;
  for (size_t at = text.find(suffix); at != std::string::npos; at = text.find(suffix, at + 1)) {
    size_t start = at;
    while (start > 0 && std::isdigit(static_cast<unsigned char>(text[start - 1]))) --start;
    if (start == at || start < before.size() ||
        text.compare(start - before.size(), before.size(), before) != 0) {
      continue;
    }
    most = std::max<uint64_t>(most, std::stoull(text.substr(start, at - start)));
  }
  return most;
}

void SendAll(zmq::socket_t& socket, const std::vector<std::string>& frames) {
  protocol::Frames out;
  for (const auto& f : frames) out.push_back(protocol::Frame(f));
  ASSERT_TRUE(protocol::SendFrames(socket, out).ok());
}

// Raw bytes on a connection (TCP, or a Unix socket): not even ZeroMQ's
// greeting.
void SendRaw(const std::string& endpoint) {
  const int fd = ConnectRaw(endpoint);
  ASSERT_GE(fd, 0) << endpoint;
  const std::string junk = "GET / HTTP/1.1\r\n\r\n" + std::string(4096, '\xff');
  [[maybe_unused]] ssize_t n = ::write(fd, junk.data(), junk.size());
  ::close(fd);
}

std::vector<std::string> Registration(const protocol::Signer& signer, int i) {
  protocol::RegistrationRequest request;
  request.uuid = "fake-" + std::to_string(i);
  request.name = "made-up-" + std::to_string(i);
  request.host = "nowhere";
  request.pid = 1;
  return protocol::EncodeMessage(
      signer, {TaskId::Random(), MsgType::kRegistrationRequest, "flood", base::WallMicros()},
      std::nullopt, protocol::Empty{}, request);
}

TEST_F(ClusterTest, GarbageFromAnyPeerIsDroppedCountedAndServiceGoesOn) {
  StartCluster(2);
  auto info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile()));
  ASSERT_TRUE(info.ok());
  const protocol::Signer right(info->key), wrong(protocol::GenerateKey());
  std::string control;
  std::ifstream(std::filesystem::path(profile()) / "cluster.control") >> control;
  ASSERT_FALSE(control.empty());

  zmq::context_t context(1);
  const std::vector<std::string> bound = {info->hub.registration, info->hub.query,
                                          info->hub.monitor,      info->scheduler.client,
                                          info->scheduler.engine, control};
  std::vector<zmq::socket_t> peers;
  for (const auto& endpoint : bound) {
    peers.emplace_back(context, zmq::socket_type::dealer);
    peers.back().set(zmq::sockopt::linger, 0);
    peers.back().connect(endpoint);
  }
  protocol::TaskSpec spec;
  spec.kind = "command";
  spec.argv = {"touch", (dir_.path() / "must-not-exist").string()};
  for (auto& peer : peers) {
    SendAll(peer, {"garbage"});
    SendAll(peer, {"ZTASK3", "not a mac", "not a header"});  // truncated
    SendAll(peer, protocol::EncodeMessage(
                      wrong, {TaskId::Random(), MsgType::kTaskRequest, "x", base::WallMicros()},
                      std::nullopt, protocol::RoutingMeta{}, spec));
    // Signed with the right key, but of a type that does not exist.
    auto unknown = protocol::EncodeMessage(
        right, {TaskId::Random(), MsgType::kTaskRequest, "y", base::WallMicros()}, std::nullopt,
        protocol::RoutingMeta{}, spec);
    std::string& header = unknown[protocol::kFrameHeader];
    header[1] = '\x63';  // the type's code: 99, no such type
    std::vector<std::string_view> views(unknown.begin(), unknown.end());
    unknown[protocol::kFrameHmac] = right.Sign(views);
    SendAll(peer, unknown);
  }
  // Oversized (over the 64 MiB default): the connection is cut, not read.
  {
    zmq::socket_t big(context, zmq::socket_type::dealer);
    big.set(zmq::sockopt::linger, 0);
    big.connect(info->scheduler.client);
    SendAll(big, {"ZTASK3", std::string((size_t{65} << 20), 'b')});
  }
  for (const auto& endpoint : bound) SendRaw(endpoint);
  // A flood of registrations under made-up names: with a wrong key (dropped)
  // and with the right one (registered, never heard from again, expired).
  for (int i = 0; i < 500; ++i) SendAll(peers[0], Registration(wrong, i));
  for (int i = 0; i < 50; ++i) SendAll(peers[0], Registration(right, 1000 + i));

  // Real work goes on, on the real engines only.
  auto engines = client_->Engines();
  ASSERT_TRUE(engines.ok());
  std::set<int32_t> real;
  for (const auto& e : *engines) {
    if (e.name.rfind("engine-", 0) == 0) real.insert(e.id);
  }
  ASSERT_EQ(real.size(), 2u);
  std::vector<TaskId> ids;
  for (int i = 0; i < 40; ++i) {
    TaskOptions o;
    o.function = "echo";
    o.args = i;
    auto id = client_->Submit(o);
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
  }
  ASSERT_TRUE(client_->Wait(ids, 60).ok());
  auto records = client_->Fetch(ids);
  ASSERT_TRUE(records.ok());
  for (size_t i = 0; i < records->size(); ++i) {
    EXPECT_TRUE((*records)[i].ok()) << (*records)[i].ToJson().dump();
    EXPECT_EQ((*records)[i].result, Value(static_cast<int>(i)));
    EXPECT_TRUE(real.count((*records)[i].engine_id.value_or(-1))) << "a made-up engine got work";
  }
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "must-not-exist"))
      << "a wrongly signed task ran";

  // The made-up engines are registered (the flood has been read: under load
  // it may still be on its way), then expire; the supervisor still answers
  // its control.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto now = client_->Engines();
        return now.ok() && now->size() > 2;
      },
      std::chrono::seconds(30)))
      << "the hub never registered the made-up engines";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  size_t listed = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    auto now = client_->Engines();
    ASSERT_TRUE(now.ok());
    listed = now->size();
    if (listed == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(listed, 2u) << "the made-up engines are forgotten";
  Ran scaled = RunProgram({kBin + "/taskcluster", "scale", "2", "--profile-dir", profile()}, dir_);
  EXPECT_EQ(scaled.code, 0) << scaled.err;

  // Every process was up to the end and counted what it dropped.
  client_.reset();
  Ran stopped = RunProgram({kBin + "/taskcluster", "stop", "--profile-dir", profile()}, dir_);
  ASSERT_EQ(stopped.code, 0) << stopped.err;
  running_ = false;
  const auto logs = std::filesystem::path(profile()) / "logs";
  const std::string scheduler = PartLog(profile(), "scheduler");
  const std::string hub = PartLog(profile(), "hub");
  const std::string cluster = ReadFile(logs / "cluster.log");
  EXPECT_GE(DroppedCount(scheduler), 8u) << scheduler;
  EXPECT_GE(DroppedCount(hub), 512u) << hub.substr(0, 4000);
  EXPECT_GE(DroppedCount(cluster, "control: "), 4u) << cluster;
  for (const std::string* log : {&scheduler, &hub}) {
    EXPECT_EQ(log->find("Aborted"), std::string::npos);
    EXPECT_EQ(log->find("terminate called"), std::string::npos);
  }
}

}  // namespace
}  // namespace ztask::testing
