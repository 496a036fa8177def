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

#include "tests/fuzz/mutate.h"

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
    const std::string input = Mutate(corpus, rng);
    ASSERT_EQ(RunTarget(input), 0);
  }
}

}  // namespace
}  // namespace ztask::fuzz
