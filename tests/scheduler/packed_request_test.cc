// A request packed for keeping gives back every frame as it came, in one
// allocation of its own.
#include "scheduler/packed_request.h"

#include <gtest/gtest.h>

#include <string>

namespace ztask::scheduler {
namespace {

TEST(PackedRequest, GivesBackEveryFrameAsItCame) {
  std::vector<std::string> parts = {"client-7",
                                    "ZTASK3",
                                    std::string(32, '\x01'),
                                    "",
                                    std::string(200, 'h'),
                                    "x",
                                    std::string(100000, 'b'),
                                    ""};
  const std::vector<std::string_view> views(parts.begin(), parts.end());
  const PackedRequest packed(views);
  const std::vector<std::string> kept = parts;
  for (std::string& p : parts) std::fill(p.begin(), p.end(), '?');  // a copy, not a view
  ASSERT_EQ(packed.size(), kept.size());
  for (size_t i = 0; i < kept.size(); ++i) {
    EXPECT_EQ(packed[i], kept[i]) << "frame " << i;
  }
  std::vector<std::string_view> tail = {"left over"};
  packed.From(5, &tail);
  ASSERT_EQ(tail.size(), 3u);
  EXPECT_EQ(tail[0], "x");
  EXPECT_EQ(tail[1], kept[6]);
  EXPECT_EQ(tail[2], "");
}

TEST(PackedRequest, AnEmptyOneHasNoFrames) {
  EXPECT_EQ(PackedRequest().size(), 0u);
  EXPECT_EQ(PackedRequest(std::span<const std::string_view>{}).size(), 0u);
}

}  // namespace
}  // namespace ztask::scheduler
