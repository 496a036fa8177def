#include "client/array_spec.h"

#include <charconv>
#include <unordered_set>

namespace ztask {
namespace {

std::optional<int64_t> Number(std::string_view text) {
  int64_t n = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return n;
}

Status TooMany() {
  return Status::InvalidArgument("an array holds at most " + std::to_string(kMaxArrayTasks) +
                                 " tasks: split it");
}

}  // namespace

std::string ArrayEntry::text() const {
  if (!entry) return std::to_string(index);
  return line ? entry->get<std::string>() : entry->dump();
}

Result<std::vector<int64_t>> ParseArraySpec(std::string_view spec) {
  std::vector<int64_t> out;
  std::unordered_set<int64_t> seen;
  size_t at = 0;
  while (at <= spec.size()) {
    size_t comma = spec.find(',', at);
    if (comma == std::string_view::npos) comma = spec.size();
    const std::string_view part = spec.substr(at, comma - at);
    const auto bad = [&](const std::string& why) {
      return Status::InvalidArgument("--array '" + std::string(spec) + "': '" + std::string(part) +
                                     "' " + why +
                                     " (write FIRST-LAST[:STEP] or N, comma-separated)");
    };
    std::string_view range = part, step_text;
    if (const size_t colon = part.find(':'); colon != std::string_view::npos) {
      range = part.substr(0, colon);
      step_text = part.substr(colon + 1);
    }
    // A dash after the first character separates FIRST and LAST (so a
    // negative FIRST would be "-3-5": indices are not negative anyway).
    const size_t dash = range.find('-', 1);
    const auto first = Number(range.substr(0, dash));
    const auto last = dash == std::string_view::npos ? first : Number(range.substr(dash + 1));
    if (!first || !last) return bad("is not a range of numbers");
    if (*first < 0 || *last < 0) return bad("has a negative index");
    if (*last < *first) return bad("ends before it starts");
    int64_t step = 1;
    if (part.find(':') != std::string_view::npos) {
      const auto s = Number(step_text);
      if (!s || *s <= 0) return bad("has a step that is not a positive number");
      step = *s;
    }
    if ((*last - *first) / step + 1 > static_cast<int64_t>(kMaxArrayTasks)) return TooMany();
    for (int64_t i = *first; i <= *last; i += step) {
      if (!seen.insert(i).second) continue;
      out.push_back(i);
      if (out.size() > kMaxArrayTasks) return TooMany();
    }
    at = comma + 1;
  }
  return out;
}

Result<std::vector<ArrayEntry>> EntriesOfLines(std::string_view text) {
  std::vector<ArrayEntry> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.push_back({static_cast<int64_t>(out.size()), Value(std::string(line)), true});
    if (out.size() > kMaxArrayTasks) return TooMany();
    at = end + 1;
  }
  return out;
}

Result<std::vector<ArrayEntry>> EntriesOfJson(std::string_view text) {
  Value doc = Value::parse(text, nullptr, false);
  if (doc.is_discarded()) return Status::InvalidArgument("not valid JSON");
  if (!doc.is_array()) return Status::InvalidArgument("not a JSON array (one task per element)");
  if (doc.size() > kMaxArrayTasks) return TooMany();
  std::vector<ArrayEntry> out;
  out.reserve(doc.size());
  for (auto& element : doc) {
    out.push_back({static_cast<int64_t>(out.size()), std::move(element), false});
  }
  return out;
}

std::vector<ArrayEntry> SelectEntries(const std::vector<ArrayEntry>& entries,
                                      const std::vector<int64_t>& indices) {
  std::vector<ArrayEntry> out;
  for (int64_t i : indices) {
    if (i >= 0 && static_cast<size_t>(i) < entries.size()) out.push_back(entries[i]);
  }
  return out;
}

}  // namespace ztask
