// client::KeptRequests: a task's request read back from the message it was
// sent in (alone or in a batch), the order they were sent in, and a
// message let go of with its last unanswered task.
#include "client/kept_requests.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "protocol/codec.h"

namespace ztask::client {
namespace {

const protocol::Signer kSigner("kept-requests-test-key");

// The inner frames of a request for `id`: header, parent, meta, content.
std::vector<std::string> InnerOf(const TaskId& id) {
  const protocol::Header header{id, protocol::MsgType::kTaskRequest, "session", 1};
  return {protocol::EncodeHeader(header), protocol::EncodeParent(std::nullopt),
          "meta-" + id.ToHex(), "content-" + id.ToHex()};
}

std::vector<std::string> Alone(const TaskId& id) {
  std::vector<std::string> frames{std::string(protocol::kProtocolSignature), "hmac"};
  for (auto& f : InnerOf(id)) frames.push_back(std::move(f));
  return frames;
}

std::vector<std::string> Batch(const std::vector<TaskId>& ids) {
  std::vector<std::vector<std::string>> inner;
  for (const TaskId& id : ids) inner.push_back(InnerOf(id));
  const protocol::Header header{TaskId::Random(), protocol::MsgType::kTaskBatch, "session", 1};
  return protocol::EncodeBatch(kSigner, header, inner);
}

void ExpectRequestOf(KeptRequests& kept, const TaskId& id) {
  const std::vector<std::string> want = InnerOf(id);
  const std::vector<std::string_view> got = kept.Request(id);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << i;
}

TEST(KeptRequests, ReadsEachRequestBackAloneOrFromItsBatch) {
  KeptRequests kept;
  const std::vector<TaskId> batch{TaskId{1, 1}, TaskId{1, 2}, TaskId{1, 3}};
  const TaskId alone{2, 1};
  kept.Keep(Batch(batch), batch);
  kept.Keep(Alone(alone), std::span(&alone, 1));
  EXPECT_EQ(kept.size(), 4u);
  for (const TaskId& id : batch) ExpectRequestOf(kept, id);
  ExpectRequestOf(kept, alone);
  EXPECT_TRUE(kept.Request(TaskId{9, 9}).empty());
}

TEST(KeptRequests, SortsAsSent) {
  KeptRequests kept;
  const std::vector<TaskId> first{TaskId{5, 1}, TaskId{3, 1}};
  const TaskId second{1, 1};
  kept.Keep(Batch(first), first);
  kept.Keep(Alone(second), std::span(&second, 1));
  std::vector<TaskId> ids{second, first[1], first[0]};
  kept.SortAsSent(ids);
  EXPECT_EQ(ids, (std::vector<TaskId>{first[0], first[1], second}));
}

TEST(KeptRequests, ForgetsEachOnceAndKeepsTheRestOfABatch) {
  KeptRequests kept;
  const std::vector<TaskId> batch{TaskId{1, 1}, TaskId{1, 2}};
  kept.Keep(Batch(batch), batch);
  EXPECT_TRUE(kept.Forget(batch[0]));
  EXPECT_FALSE(kept.Forget(batch[0]));
  EXPECT_FALSE(kept.contains(batch[0]));
  ExpectRequestOf(kept, batch[1]);
  EXPECT_TRUE(kept.Forget(batch[1]));
  EXPECT_TRUE(kept.empty());
  // Messages after the freed ones are still found.
  const std::vector<TaskId> later{TaskId{4, 1}, TaskId{4, 2}};
  kept.Keep(Batch(later), later);
  ExpectRequestOf(kept, later[1]);
  ExpectRequestOf(kept, later[0]);
}

TEST(KeptRequests, AnIdKeptAlreadyKeepsItsFirstRequest) {
  KeptRequests kept;
  const TaskId id{7, 7};
  kept.Keep(Alone(id), std::span(&id, 1));
  const std::vector<TaskId> again{id, TaskId{7, 8}};
  kept.Keep(Batch(again), again);
  EXPECT_EQ(kept.size(), 2u);
  EXPECT_TRUE(kept.Forget(id));
  ExpectRequestOf(kept, again[1]);
  EXPECT_TRUE(kept.Forget(again[1]));
  EXPECT_TRUE(kept.empty());
}

}  // namespace
}  // namespace ztask::client
