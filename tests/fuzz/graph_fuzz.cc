// Fuzz target for the graph file parser (taskctl submit-graph): any text must
// give a graph or an error, and a graph's topological order, when there is
// one, must list every node once, each after what it depends on.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "ztask/client.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto graph = ztask::ParseGraph(text);
  if (!graph.ok()) return 0;
  auto order = ztask::TopologicalOrder(*graph);
  if (!order.ok()) return 0;
  if (order->size() != graph->size()) __builtin_trap();
  std::map<std::string, size_t> position;
  for (size_t i = 0; i < order->size(); ++i) {
    if ((*order)[i] >= graph->size()) __builtin_trap();
    if (!position.emplace((*graph)[(*order)[i]].name, i).second) __builtin_trap();
  }
  for (const auto& node : *graph) {
    for (const auto* names : {&node.after, &node.follow}) {
      for (const auto& name : *names) {
        auto dep = position.find(name);
        if (dep == position.end() || dep->second >= position[node.name]) __builtin_trap();
      }
    }
  }
  return 0;
}
