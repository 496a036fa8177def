// task_batch: many tasks (or replies) in one message under one signature,
// and the test vector docs/protocol.md gives for it.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "protocol/codec.h"

namespace ztask::protocol {
namespace {

std::vector<std::string_view> ViewsOf(const std::vector<std::string>& frames) {
  return {frames.begin(), frames.end()};
}

Header FixedHeader(MsgType type, uint64_t id, std::string session) {
  return {TaskId{0x0123456789abcdefULL, id}, type, std::move(session), 1'700'000'000'000'000};
}

// The batch of docs/protocol.md's test vector: two function tasks from the
// scheduler to an engine, the second sent ahead behind the first.
std::vector<std::string> DocumentedBatch() {
  const Signer signer("test-vector-key");
  TaskSpec noop;
  noop.kind = "function";
  noop.function = "noop";
  TaskSpec echo;
  echo.kind = "function";
  echo.function = "echo";
  echo.args.bytes = "\x93\x01\x02\x03";  // [1, 2, 3]
  std::vector<std::vector<std::string>> tasks = {
      EncodeInner(FixedHeader(MsgType::kTaskRequest, 1, "client-1"), std::nullopt,
                  RoutingMeta{}, noop),
      EncodeInner(FixedHeader(MsgType::kTaskRequest, 2, "client-1"), std::nullopt,
                  RoutingMeta{}, echo)};
  std::vector<DispatchInfo> dispatch = {{1, 2, std::nullopt},
                                        {1, 2, TaskId{0x0123456789abcdefULL, 1}}};
  return EncodeBatch(signer, FixedHeader(MsgType::kTaskBatch, 3, "scheduler-1"), tasks,
                     dispatch);
}

std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 0xf];
  }
  return out;
}

// The fixed layout, byte by byte (docs/protocol.md, "The header").
TEST(Header, IsItsFixedLayout) {
  const Header header = FixedHeader(MsgType::kTaskBatch, 3, "scheduler-1");
  const std::string frame = EncodeHeader(header);
  EXPECT_EQ(Hex(frame),
            "0107"                              // layout 1, task_batch
            "0123456789abcdef0000000000000003"  // id
            "00401e18240a0600"                  // date, little-endian
            "0b"                                // 11 bytes of session
            "7363686564756c65722d31");          // "scheduler-1"
  EXPECT_EQ(*DecodeHeader(frame), header);
  EXPECT_EQ(**DecodeParent(frame), header);
  EXPECT_EQ(EncodeParent(std::nullopt), "") << "no parent: an empty frame";
  EXPECT_FALSE(DecodeParent("")->has_value());
}

TEST(TaskBatch, CarriesEachTaskWithItsDispatchUnderOneSignature) {
  const std::vector<std::string> frames = DocumentedBatch();
  const Signer signer("test-vector-key");
  auto batch = DecodeMessage<MsgType::kTaskBatch>(signer, Limits{}, ViewsOf(frames));
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  TaskBatch content;
  auto tasks = UnpackBatch(ViewsOf(frames), &content);
  ASSERT_TRUE(tasks.ok()) << tasks.status().ToString();
  ASSERT_EQ(tasks->size(), 2u);
  ASSERT_TRUE(content.dispatch.has_value());
  EXPECT_EQ((*content.dispatch)[1].run_after, (TaskId{0x0123456789abcdefULL, 1}));
  auto second = DecodeBody<TaskSpec>((*tasks)[1][kFrameContent]);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->function, "echo");
  auto header = DecodeHeader((*tasks)[0][kFrameHeader]);
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->id, (TaskId{0x0123456789abcdefULL, 1}));
  // As a ROUTER socket receives it: the peer, then the message's frames.
  const auto received = tasks->WithPeer(1, "engine-7");
  ASSERT_EQ(received.size(), (*tasks)[1].size() + 1);
  EXPECT_EQ(received[0], "engine-7");
  EXPECT_EQ(received[1 + kFrameContent], (*tasks)[1][kFrameContent]);
  EXPECT_EQ(DecodeHeader((*tasks)[0][kFrameHeader])->id, header->id) << "its neighbour unchanged";
}

TEST(TaskBatch, OneChangedByteInAnyTaskFailsTheWholeBatch) {
  const Signer signer("test-vector-key");
  const std::vector<std::string> original = DocumentedBatch();
  for (size_t i = kFrameHeader; i < original.size(); ++i) {
    if (original[i].empty()) continue;  // the parent: none
    std::vector<std::string> frames = original;
    frames[i][frames[i].size() / 2] ^= 0x01;
    EXPECT_EQ(CheckFrames(signer, Limits{}, ViewsOf(frames)).code(),
              Status::Code::kBadSignature)
        << "frame " << i;
  }
  // Nor may bytes move from the content to the records.
  std::vector<std::string> frames = original;
  frames[kFrameRecords].insert(0, 1, frames[kFrameContent].back());
  frames[kFrameContent].pop_back();
  EXPECT_EQ(CheckFrames(signer, Limits{}, ViewsOf(frames)).code(),
            Status::Code::kBadSignature);
}

TEST(TaskBatch, ADispatchForEveryTaskOrForNone) {
  const Signer signer("k");
  std::vector<std::vector<std::string>> tasks = {
      EncodeInner(FixedHeader(MsgType::kTaskRequest, 1, "c"), std::nullopt, RoutingMeta{},
                  TaskSpec{})};
  for (size_t dispatches : {0, 2}) {
    const auto frames = EncodeBatch(signer, FixedHeader(MsgType::kTaskBatch, 2, "s"), tasks,
                                    std::vector<DispatchInfo>(dispatches));
    EXPECT_EQ(UnpackBatch(ViewsOf(frames)).status().code(), Status::Code::kMalformed)
        << dispatches;
  }
  const auto without = EncodeBatch(signer, FixedHeader(MsgType::kTaskBatch, 2, "s"), tasks);
  EXPECT_TRUE(UnpackBatch(ViewsOf(without)).ok());
}

TEST(TaskBatch, NoMessageHasMoreFramesThanItsLimitInABatchOrOut) {
  const Signer signer("k");
  std::vector<std::string> buffers(kMaxMessageFrames, "b");
  const auto request = EncodeMessage(signer, FixedHeader(MsgType::kTaskRequest, 1, "c"),
                                     std::nullopt, RoutingMeta{}, TaskSpec{}, buffers);
  EXPECT_EQ(DecodeMessage<MsgType::kTaskRequest>(signer, Limits{}, ViewsOf(request))
                .status()
                .code(),
            Status::Code::kTooLarge);
  EXPECT_EQ(CheckFrameCount(MsgType::kTaskRequest, kMaxMessageFrames + 1).code(),
            Status::Code::kTooLarge);
  // A batch is exactly its six frames and the records.
  EXPECT_TRUE(CheckFrameCount(MsgType::kTaskBatch, kBatchFrames).ok());
  EXPECT_EQ(CheckFrameCount(MsgType::kTaskBatch, kBatchFrames + 1).code(),
            Status::Code::kMalformed);
  EXPECT_EQ(CheckFrameCount(MsgType::kMonitorBatch, kMinFrames).code(),
            Status::Code::kMalformed);
  // Nor may one task inside a batch.
  std::vector<std::string> task = EncodeInner(FixedHeader(MsgType::kTaskRequest, 1, "c"),
                                              std::nullopt, RoutingMeta{}, TaskSpec{});
  task.insert(task.end(), buffers.begin(), buffers.end());
  const auto batch = EncodeBatch(signer, FixedHeader(MsgType::kTaskBatch, 2, "c"), {task});
  EXPECT_EQ(UnpackBatch(ViewsOf(batch)).status().code(), Status::Code::kMalformed);
}

// docs/protocol.md gives a task_batch byte by byte, for implementations in
// other languages: it must be exactly what this codec makes.
TEST(TaskBatch, TheDocumentedTestVectorIsWhatTheCodecMakes) {
  std::ifstream doc(ZTASK_DOCS_DIR "/protocol.md");
  ASSERT_TRUE(doc) << "cannot read docs/protocol.md";
  std::stringstream text;
  text << doc.rdbuf();
  const std::string page = text.str();
  const std::string start = "```text task_batch test vector\n";
  const size_t from = page.find(start);
  ASSERT_NE(from, std::string::npos) << "docs/protocol.md has no task_batch test vector";
  const size_t end = page.find("```", from + start.size());
  ASSERT_NE(end, std::string::npos);
  const std::string documented = page.substr(from + start.size(), end - from - start.size());
  std::string expected;
  const std::vector<std::string> frames = DocumentedBatch();
  for (size_t i = 0; i < frames.size(); ++i) {
    // An empty frame (the parent: none) is its number alone.
    expected +=
        "frame " + std::to_string(i) + ":" + (frames[i].empty() ? "" : " " + Hex(frames[i])) + "\n";
  }
  EXPECT_EQ(documented, expected) << "the vector as the codec makes it:\n" << expected;
}

}  // namespace
}  // namespace ztask::protocol
