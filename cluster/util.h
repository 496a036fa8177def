// Small helpers of the cluster's supervisor.
#ifndef ZTASK_CLUSTER_UTIL_H_
#define ZTASK_CLUSTER_UTIL_H_

#include <filesystem>
#include <string>
#include <vector>

#include "protocol/path_search.h"

namespace ztask::cluster {

// "ssh -p 22 -i key" -> {"ssh", "-p", "22", "-i", "key"}
std::vector<std::string> SplitWords(const std::string& text);
// `program` on PATH, or `program` unchanged when not found (so that the
// error, when it runs, names what was asked for).
inline std::string Which(const std::string& program) {
  std::string found = FindOnPath(program);
  return found.empty() ? program : found;
}
double SteadySeconds();
// <profile>/cluster.control: the supervisor's control endpoint.
inline std::filesystem::path ControlFile(const std::filesystem::path& profile) {
  return profile / "cluster.control";
}

}  // namespace ztask::cluster

#endif  // ZTASK_CLUSTER_UTIL_H_
