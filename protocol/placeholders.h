// The placeholders of a task's output paths: %{TASK_ID}, %{JOB} and
// %{ARRAY_INDEX}. Clients check a path before sending (CheckPlaceholders);
// the engine replaces them (ExpandPlaceholders) when the task runs.
#ifndef ZTASK_PROTOCOL_PLACEHOLDERS_H_
#define ZTASK_PROTOCOL_PLACEHOLDERS_H_

#include <array>
#include <map>
#include <string>
#include <string_view>

#include "ztask/status.h"

namespace ztask::protocol {

inline constexpr std::array<std::string_view, 3> kPlaceholders = {"TASK_ID", "JOB", "ARRAY_INDEX"};

// Calls f(name) for each %{name} in `text`, and f(text after "%{") for an
// unclosed one; f returns the replacement. Anything else is kept as it is.
template <class F>
std::string ForEachPlaceholder(std::string_view text, F&& f) {
  std::string out;
  size_t at = 0;
  while (true) {
    const size_t open = text.find("%{", at);
    if (open == std::string_view::npos) break;
    const size_t close = text.find('}', open + 2);
    out.append(text.substr(at, open - at));
    if (close == std::string_view::npos) {
      out.append(f(text.substr(open + 2), false));
      return out;
    }
    out.append(f(text.substr(open + 2, close - open - 2), true));
    at = close + 1;
  }
  out.append(text.substr(at));
  return out;
}

inline std::string ExpandPlaceholders(std::string_view text,
                                      const std::map<std::string, std::string>& values) {
  return ForEachPlaceholder(text, [&](std::string_view name, bool closed) -> std::string {
    auto it = closed ? values.find(std::string(name)) : values.end();
    return it != values.end() ? it->second : "%{" + std::string(name) + (closed ? "}" : "");
  });
}

// An error naming the first placeholder that is not one of kPlaceholders.
inline Status CheckPlaceholders(std::string_view what, std::string_view text) {
  Status status = Status::Ok();
  ForEachPlaceholder(text, [&](std::string_view name, bool closed) -> std::string {
    bool known = false;
    for (auto p : kPlaceholders) known = known || (closed && p == name);
    if (!known && status.ok()) {
      status = Status::InvalidArgument(
          std::string(what) + " has an unknown placeholder %{" + std::string(name) +
          (closed ? "}" : " (no closing brace)") + ": use %{TASK_ID}, %{JOB} or %{ARRAY_INDEX}");
    }
    return {};
  });
  return status;
}

}  // namespace ztask::protocol

#endif  // ZTASK_PROTOCOL_PLACEHOLDERS_H_
