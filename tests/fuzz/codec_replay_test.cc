// Runs the codec fuzz target under the ordinary compiler: every file of the
// committed corpus, every sample message, and a deterministic stream of
// mutations of them (bit flips, truncations, splices).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "tests/fuzz/codec_fuzz.h"
#include "tests/fuzz/mutate.h"
#include "tests/protocol/sample_messages.h"

namespace ztask::protocol::fuzz {
namespace {

std::vector<std::string> Seeds() {
  std::vector<std::string> seeds;
  const Signer signer("fuzz key");
#define ZTASK_SEED(name, code, text, meta, content) \
  seeds.push_back(JoinFrames(testing::SampleFrames<MsgType::name>(signer), true));
  ZTASK_MESSAGE_TYPES(ZTASK_SEED)
#undef ZTASK_SEED
  return seeds;
}

int FuzzInput(const std::string& input) {
  return FuzzOne(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

TEST(CodecFuzzCorpus, EveryCorpusFileDecodesWithoutCrashing) {
  const std::filesystem::path dir = ZTASK_CORPUS_DIR;
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::string input((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(FuzzInput(input), 0) << entry.path();
    ++files;
  }
  EXPECT_GT(files, 0u) << "the corpus in " << dir << " is empty";
}

TEST(CodecFuzzCorpus, MutationsOfEveryMessageDecodeWithoutCrashing) {
  std::mt19937_64 rng(20261121);
  const auto seeds = Seeds();
  for (int i = 0; i < 20000; ++i) {
    const std::string input = ztask::fuzz::Mutate(seeds, rng);
    ASSERT_EQ(FuzzInput(input), 0);
  }
}

// Writes the sample messages as corpus files: codec_replay_test --write-seeds DIR
TEST(CodecFuzzCorpus, SeedsRoundTripThroughTheInputFormat) {
  for (const auto& seed : Seeds()) {
    bool resign = false;
    auto frames = SplitFrames(reinterpret_cast<const uint8_t*>(seed.data()), seed.size(), &resign);
    EXPECT_TRUE(resign);
    EXPECT_EQ(JoinFrames(frames, resign), seed);
  }
}

}  // namespace
}  // namespace ztask::protocol::fuzz

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--write-seeds") {
    int n = 0;
    for (const auto& seed : ztask::protocol::fuzz::Seeds()) {
      std::ofstream(std::filesystem::path(argv[2]) / ("seed-" + std::to_string(n++)),
                    std::ios::binary)
          << seed;
    }
    return 0;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
