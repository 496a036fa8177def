// A request packed for keeping gives back every frame as it came: small ones
// copied into one allocation, large ones shared.
#include "scheduler/packed_request.h"

#include <gtest/gtest.h>

#include <string>

namespace ztask::scheduler {
namespace {

protocol::Frames FramesOf(const std::vector<std::string>& parts) {
  protocol::Frames frames;
  for (const std::string& p : parts) frames.push_back(protocol::Frame(p));
  return frames;
}

TEST(PackedRequest, GivesBackEveryFrameAsItCame) {
  const std::vector<std::string> parts = {
      "client-7", "ZTASK1", std::string(32, '\x01'), "", std::string(200, 'h'), "x"};
  protocol::Frames frames = FramesOf(parts);
  const PackedRequest packed(frames);
  ASSERT_EQ(packed.size(), parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    EXPECT_EQ(packed[i], parts[i]) << "frame " << i;
    zmq::message_t m = packed.Message(i);
    EXPECT_EQ(protocol::View(m), parts[i]) << "frame " << i;
  }
  // The frames it was made from are untouched.
  for (size_t i = 0; i < parts.size(); ++i) EXPECT_EQ(protocol::View(frames[i]), parts[i]);
}

TEST(PackedRequest, SharesLargeFramesAndKeepsTheOrderAroundThem) {
  const std::string big(PackedRequest::kShareFrom, 'b'), bigger(3 * PackedRequest::kShareFrom, 'B');
  const std::vector<std::string> parts = {"id", big, "between", "", bigger, "last"};
  protocol::Frames frames = FramesOf(parts);
  const void* big_data = frames[1].data();
  const PackedRequest packed(frames);
  frames.clear();  // the large frames live on in the packed request
  ASSERT_EQ(packed.size(), parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    EXPECT_EQ(packed[i], parts[i]) << "frame " << i;
    EXPECT_EQ(protocol::View(packed.Message(i)), parts[i]) << "frame " << i;
  }
  // Shared, not copied: the message given back holds the same bytes.
  EXPECT_EQ(packed.Message(1).data(), big_data);
  EXPECT_EQ(packed[1].data(), big_data);
}

TEST(PackedRequest, AnEmptyOneHasNoFrames) {
  EXPECT_EQ(PackedRequest().size(), 0u);
  protocol::Frames none;
  EXPECT_EQ(PackedRequest(none).size(), 0u);
}

}  // namespace
}  // namespace ztask::scheduler
