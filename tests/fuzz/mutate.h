// The mutations the fuzz replay tests apply to their seeds under the
// ordinary compiler: bit flips, a truncation, a splice of another seed, or a
// random byte. Deterministic for a given generator.
#ifndef ZTASK_TESTS_FUZZ_MUTATE_H_
#define ZTASK_TESTS_FUZZ_MUTATE_H_

#include <random>
#include <string>
#include <vector>

namespace ztask::fuzz {

// One mutation of a seed picked from `seeds` (not empty).
inline std::string Mutate(const std::vector<std::string>& seeds, std::mt19937_64& rng) {
  std::string input = seeds[rng() % seeds.size()];
  if (input.empty()) input = "x";
  switch (rng() % 4) {
    case 0:
      for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k) {
        input[rng() % input.size()] ^= static_cast<char>(1 << (rng() % 8));
      }
      break;
    case 1: input.resize(rng() % input.size()); break;
    case 2: {
      const std::string& other = seeds[rng() % seeds.size()];
      input.insert(rng() % input.size(), other.substr(0, 1 + rng() % (other.size() + 1)));
      break;
    }
    default: input[rng() % input.size()] = static_cast<char>(rng()); break;
  }
  return input;
}

}  // namespace ztask::fuzz

#endif  // ZTASK_TESTS_FUZZ_MUTATE_H_
