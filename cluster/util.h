// Small helpers of the cluster's supervisor.
#ifndef ZTASK_CLUSTER_UTIL_H_
#define ZTASK_CLUSTER_UTIL_H_

#include <filesystem>
#include <string>
#include <vector>

#include "base/path_search.h"
#include "ztask/status.h"

namespace ztask::cluster {

// "ssh -p 22 -i key" -> {"ssh", "-p", "22", "-i", "key"}
std::vector<std::string> SplitWords(const std::string& text);
// `program` on PATH, or `program` unchanged when not found (so that the
// error, when it runs, names what was asked for).
inline std::string Which(const std::string& program) {
  std::string found = FindOnPath(program);
  return found.empty() ? program : found;
}

// `text` as one word for a POSIX shell: single-quoted, with each ' written
// as '\''. For command lines a remote shell (ssh) or a batch script runs.
std::string ShellQuote(const std::string& text);

// An ssh host spec, HOST or HOST:COUNT. A host is a name or address of
// letters, digits and . _ - @ that does not begin with '-' (ssh would read
// it as an option); anything else is refused, whoever sent it.
struct HostSpec {
  std::string host;
  int count = 1;
};
Result<HostSpec> ParseHostSpec(const std::string& spec);
// Every spec parsed; the first bad one is the error.
Result<std::vector<HostSpec>> ParseHostSpecs(const std::vector<std::string>& specs);
// <profile>/cluster.control: the supervisor's control endpoint.
inline std::filesystem::path ControlFile(const std::filesystem::path& profile) {
  return profile / "cluster.control";
}

}  // namespace ztask::cluster

#endif  // ZTASK_CLUSTER_UTIL_H_
