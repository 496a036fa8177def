// Task arrays as taskctl reads them: index ranges (`--array 1-100:2,200`),
// the lines of a file (`--each-line`) and the elements of a JSON array
// (`--from-json`). No I/O: callers read the files.
#ifndef ZTASK_CLIENT_ARRAY_SPEC_H_
#define ZTASK_CLIENT_ARRAY_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ztask/client.h"

namespace ztask {

// Most tasks in one array.
inline constexpr size_t kMaxArrayTasks = 1000000;

// One task of an array: its index, and for lines and elements the entry.
struct ArrayEntry {
  int64_t index = 0;
  std::optional<Value> entry;  // a line is a JSON string
  bool line = false;           // from --each-line
  // ZTASK_ENTRY: a line as it is, an element as compact JSON.
  std::string text() const;
  const Value& value() const { return *entry; }
};

// "FIRST-LAST[:STEP]" or "N", comma-separated, in the order given; each
// index once. Errors say what is wrong with which part.
Result<std::vector<int64_t>> ParseArraySpec(std::string_view spec);
// One entry per line (index = line number from 0); a last empty line (the
// file's final newline) is not an entry; a "\r" before "\n" is dropped.
Result<std::vector<ArrayEntry>> EntriesOfLines(std::string_view text);
// One entry per element of a JSON array.
Result<std::vector<ArrayEntry>> EntriesOfJson(std::string_view text);
// The entries at `indices`, in that order (those past the end left out).
std::vector<ArrayEntry> SelectEntries(const std::vector<ArrayEntry>& entries,
                                      const std::vector<int64_t>& indices);

}  // namespace ztask

#endif  // ZTASK_CLIENT_ARRAY_SPEC_H_
