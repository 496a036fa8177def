// The codec fuzz target's input format, shared with its replay runner.
#ifndef ZTASK_TESTS_FUZZ_CODEC_FUZZ_H_
#define ZTASK_TESTS_FUZZ_CODEC_FUZZ_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ztask::protocol::fuzz {

std::vector<std::string> SplitFrames(const uint8_t* data, size_t size, bool* resign);
std::string JoinFrames(const std::vector<std::string>& frames, bool resign);
int FuzzOne(const uint8_t* data, size_t size);

}  // namespace ztask::protocol::fuzz

#endif  // ZTASK_TESTS_FUZZ_CODEC_FUZZ_H_
