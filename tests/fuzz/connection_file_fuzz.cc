// Fuzz target for the connection-file parser: any text must give a value or
// an error, and what parses must serialize and parse back to the same.
#include <cstddef>
#include <cstdint>
#include <string>

#include "protocol/connection_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ztask::protocol;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto info = ParseConnectionFile(text, "fuzz.json");
  if (info.ok()) {
    auto again = ParseConnectionFile(SerializeConnectionFile(*info), "again.json");
    if (!again.ok() || !(*again == *info)) __builtin_trap();
  }
  return 0;
}
