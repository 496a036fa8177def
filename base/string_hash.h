// A hash of std::string keys that also takes std::string_view, so that a map
// keyed by strings is looked up without making a string (C++20 transparent
// lookup).
#ifndef ZTASK_BASE_STRING_HASH_H_
#define ZTASK_BASE_STRING_HASH_H_

#include <functional>
#include <string_view>

namespace ztask::protocol {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

}  // namespace ztask::protocol

#endif  // ZTASK_BASE_STRING_HASH_H_
