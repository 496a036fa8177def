// Replays one fuzz target under the ordinary compiler: every file of its
// committed corpus, then a deterministic stream of mutations of them (bit
// flips, truncations, splices, random bytes). The target traps on a broken
// invariant, so a finding fails the test. Built once per target, with its
// corpus directory in ZTASK_CORPUS_DIR.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace ztask::fuzz {
namespace {

std::vector<std::string> Corpus() {
  std::vector<std::string> inputs;
  for (const auto& entry : std::filesystem::directory_iterator(ZTASK_CORPUS_DIR)) {
    std::ifstream in(entry.path(), std::ios::binary);
    inputs.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return inputs;
}

int RunTarget(const std::string& input) {
  return LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

TEST(FuzzCorpus, EveryCorpusFileRunsClean) {
  const auto corpus = Corpus();
  ASSERT_FALSE(corpus.empty()) << "the corpus in " << ZTASK_CORPUS_DIR << " is empty";
  for (const auto& input : corpus) EXPECT_EQ(RunTarget(input), 0);
}

TEST(FuzzCorpus, MutationsOfTheCorpusRunClean) {
  const auto corpus = Corpus();
  ASSERT_FALSE(corpus.empty());
  std::mt19937_64 rng(20261121);
  for (int i = 0; i < ZTASK_MUTATIONS; ++i) {
    std::string input = corpus[rng() % corpus.size()];
    if (input.empty()) input = "x";
    switch (rng() % 4) {
      case 0:
        for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k) {
          input[rng() % input.size()] ^= static_cast<char>(1 << (rng() % 8));
        }
        break;
      case 1: input.resize(rng() % input.size()); break;
      case 2: {
        const std::string& other = corpus[rng() % corpus.size()];
        input.insert(rng() % input.size(), other.substr(0, 1 + rng() % (other.size() + 1)));
        break;
      }
      default: input[rng() % input.size()] = static_cast<char>(rng()); break;
    }
    ASSERT_EQ(RunTarget(input), 0);
  }
}

}  // namespace
}  // namespace ztask::fuzz
