#include "cluster/util.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>

namespace ztask::cluster {

std::vector<std::string> SplitWords(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  for (char c : text + " ") {
    if (c == ' ') {
      if (!word.empty()) words.push_back(std::move(word));
      word.clear();
    } else {
      word += c;
    }
  }
  return words;
}

std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

Result<HostSpec> ParseHostSpec(const std::string& spec) {
  HostSpec parsed;
  const auto colon = spec.rfind(':');
  parsed.host = spec.substr(0, colon);
  if (colon != std::string::npos) {
    const std::string count = spec.substr(colon + 1);
    char* end = nullptr;
    const long n = std::strtol(count.c_str(), &end, 10);
    if (count.empty() || *end != '\0' || n < 1 || n > 100000) {
      return Status::InvalidArgument("bad host '" + spec + "': COUNT in HOST:COUNT is 1 or more");
    }
    parsed.count = static_cast<int>(n);
  }
  const bool allowed = std::all_of(parsed.host.begin(), parsed.host.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
           c == '@';
  });
  if (parsed.host.empty() || parsed.host[0] == '-' || !allowed) {
    return Status::InvalidArgument(
        "bad host '" + spec +
        "': give HOST or HOST:COUNT, a host of letters, digits and . _ - @ not beginning with -");
  }
  return parsed;
}

Result<std::vector<HostSpec>> ParseHostSpecs(const std::vector<std::string>& specs) {
  std::vector<HostSpec> parsed;
  for (const auto& spec : specs) {
    auto one = ParseHostSpec(spec);
    if (!one.ok()) return one.status();
    parsed.push_back(*one);
  }
  return parsed;
}


}  // namespace ztask::cluster
