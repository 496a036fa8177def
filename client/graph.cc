// Whole graphs: parsing the JSON form, checking it with Boost.Graph, and
// submitting in topological order; map and map_reduce on top.
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/depth_first_search.hpp>
#include <boost/graph/topological_sort.hpp>
#include <unordered_map>

#include "protocol/resources.h"
#include "ztask/client.h"

namespace ztask {
namespace {

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;

// Records the first back edge: its target is a node on a cycle.
struct CycleFinder : boost::default_dfs_visitor {
  explicit CycleFinder(std::optional<size_t>* on_cycle) : on_cycle(on_cycle) {}
  void back_edge(Graph::edge_descriptor e, const Graph& g) {
    if (!*on_cycle) *on_cycle = boost::target(e, g);
  }
  std::optional<size_t>* on_cycle;
};

Status Invalid(const std::string& what) { return Status::InvalidArgument(what); }

template <class T>
Status Read(const Value& node, const char* key, T& out, const std::string& where) {
  auto it = node.find(key);
  if (it == node.end() || it->is_null()) return Status::Ok();
  try {
    out = it->get<T>();
  } catch (const std::exception&) {
    return Invalid(where + ": \"" + key + "\" has the wrong type");
  }
  return Status::Ok();
}

Status ReadDependencySettings(const Value& node, const char* prefix, DependencySet& set,
                              const std::string& where) {
  std::string mode, outcome;
  ZTASK_RETURN_IF_ERROR(Read(node, (std::string(prefix) + "_mode").c_str(), mode, where));
  ZTASK_RETURN_IF_ERROR(Read(node, (std::string(prefix) + "_outcome").c_str(), outcome, where));
  if (!mode.empty()) {
    auto m = ParseDependencyMode(mode);
    if (!m) return Invalid(where + ": " + prefix + "_mode must be all or any");
    set.mode = *m;
  }
  if (!outcome.empty()) {
    auto o = ParseAcceptedOutcome(outcome);
    if (!o) return Invalid(where + ": " + prefix + "_outcome must be success, failure or either");
    set.outcome = *o;
  }
  return Status::Ok();
}

Result<GraphNode> ParseNode(const Value& node, size_t index) {
  std::string where = "task #" + std::to_string(index + 1);
  if (!node.is_object()) return Invalid(where + " is not an object");
  GraphNode out;
  ZTASK_RETURN_IF_ERROR(Read(node, "name", out.name, where));
  if (out.name.empty()) return Invalid(where + " has no \"name\"");
  where = "task '" + out.name + "'";
  TaskOptions& o = out.options;
  ZTASK_RETURN_IF_ERROR(Read(node, "command", o.command, where));
  ZTASK_RETURN_IF_ERROR(Read(node, "fn", o.function, where));
  if (auto args = node.find("args"); args != node.end()) o.args = *args;
  ZTASK_RETURN_IF_ERROR(Read(node, "after", out.after, where));
  ZTASK_RETURN_IF_ERROR(Read(node, "follow", out.follow, where));
  ZTASK_RETURN_IF_ERROR(Read(node, "targets", o.targets, where));
  ZTASK_RETURN_IF_ERROR(Read(node, "timeout", o.timeout, where));
  ZTASK_RETURN_IF_ERROR(Read(node, "time_limit", o.time_limit, where));
  ZTASK_RETURN_IF_ERROR(Read(node, "retries", o.retries, where));
  ZTASK_RETURN_IF_ERROR(Read(node, "priority", o.priority, where));
  ZTASK_RETURN_IF_ERROR(Read(node, "slots", o.slots, where));
  ZTASK_RETURN_IF_ERROR(Read(node, "resources", o.resources, where));
  if (std::string e = protocol::AmountsError(o.slots, o.resources, 1); !e.empty()) {
    return Invalid(where + ": " + e);
  }
  ZTASK_RETURN_IF_ERROR(Read(node, "label", o.label, where));
  ZTASK_RETURN_IF_ERROR(Read(node, "cwd", o.cwd, where));
  ZTASK_RETURN_IF_ERROR(Read(node, "env", o.env, where));
  ZTASK_RETURN_IF_ERROR(ReadDependencySettings(node, "after", o.after, where));
  ZTASK_RETURN_IF_ERROR(ReadDependencySettings(node, "follow", o.follow, where));
  if (o.command.empty() == o.function.empty()) {
    return Invalid(where + " needs exactly one of \"command\" and \"fn\"");
  }
  if (o.label.empty()) o.label = out.name;
  return out;
}

}  // namespace

Result<std::vector<GraphNode>> ParseGraph(const std::string& json_text) {
  Value root = Value::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return Invalid("the graph is not valid JSON");
  if (!root.is_object() || !root.contains("tasks") || !root["tasks"].is_array()) {
    return Invalid("the graph must be an object with a \"tasks\" array");
  }
  std::vector<GraphNode> nodes;
  for (size_t i = 0; i < root["tasks"].size(); ++i) {
    auto node = ParseNode(root["tasks"][i], i);
    if (!node.ok()) return node.status();
    nodes.push_back(std::move(*node));
  }
  return nodes;
}

Result<std::vector<size_t>> TopologicalOrder(const std::vector<GraphNode>& nodes) {
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!index.emplace(nodes[i].name, i).second) {
      return Invalid("the graph names task '" + nodes[i].name + "' twice");
    }
  }
  Graph graph(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const auto* deps : {&nodes[i].after, &nodes[i].follow}) {
      for (const std::string& dep : *deps) {
        auto it = index.find(dep);
        if (it == index.end()) {
          return Invalid("task '" + nodes[i].name + "' depends on '" + dep +
                         "', which the graph does not have");
        }
        boost::add_edge(it->second, i, graph);
      }
    }
  }
  std::optional<size_t> on_cycle;
  boost::depth_first_search(graph, boost::visitor(CycleFinder(&on_cycle)));
  if (on_cycle) {
    return Invalid("the graph has a cycle through task '" + nodes[*on_cycle].name + "'");
  }
  std::vector<size_t> reversed;
  boost::topological_sort(graph, std::back_inserter(reversed));
  return std::vector<size_t>(reversed.rbegin(), reversed.rend());
}

Result<std::vector<std::pair<std::string, TaskId>>> Client::SubmitGraph(
    const std::vector<GraphNode>& nodes) {
  auto order = TopologicalOrder(nodes);
  if (!order.ok()) return order.status();
  // Ids are chosen here, so the whole graph goes in batches.
  std::unordered_map<std::string, TaskId> ids;
  for (const GraphNode& node : nodes) ids[node.name] = TaskId::New();
  std::vector<TaskOptions> tasks;
  std::vector<TaskId> task_ids;
  std::vector<std::pair<std::string, TaskId>> out;
  for (size_t i : *order) {
    TaskOptions options = nodes[i].options;
    for (const auto& dep : nodes[i].after) options.after.ids.push_back(ids.at(dep));
    for (const auto& dep : nodes[i].follow) options.follow.ids.push_back(ids.at(dep));
    tasks.push_back(std::move(options));
    task_ids.push_back(ids.at(nodes[i].name));
    out.emplace_back(nodes[i].name, task_ids.back());
  }
  auto sent = SubmitMany(tasks, task_ids);
  if (!sent.ok()) return sent.status();
  return out;
}

Result<std::vector<std::pair<int32_t, TaskId>>> Client::SubmitEachEngine(
    const TaskOptions& options) {
  auto engines = Engines();
  if (!engines.ok()) return engines.status();
  std::vector<int32_t> running;
  std::vector<TaskOptions> tasks;
  for (const auto& engine : *engines) {
    if (engine.state != EngineState::kRunning) continue;
    running.push_back(engine.id);
    tasks.push_back(options);
    tasks.back().targets = {engine.id};
  }
  if (tasks.empty()) return Status::Unavailable("no engine is running");
  auto ids = SubmitMany(tasks);
  if (!ids.ok()) return ids.status();
  std::vector<std::pair<int32_t, TaskId>> out;
  for (size_t i = 0; i < running.size(); ++i) out.emplace_back(running[i], (*ids)[i]);
  return out;
}

Result<std::vector<TaskId>> Client::Map(const std::string& function,
                                        const std::vector<Value>& inputs,
                                        const TaskOptions& base) {
  std::vector<TaskOptions> tasks;
  tasks.reserve(inputs.size());
  for (const Value& input : inputs) {
    TaskOptions& options = tasks.emplace_back(base);
    options.command.clear();
    options.function = function;
    options.args = input;
  }
  return SubmitMany(tasks);
}

Result<TaskId> Client::MapReduce(const std::string& map_function,
                                 const std::string& reduce_function,
                                 const std::vector<Value>& inputs, int fan_in,
                                 const TaskOptions& base) {
  if (fan_in < 2) return Invalid("map_reduce needs a fan-in of at least 2");
  if (inputs.empty()) return Invalid("map_reduce needs at least one input");
  auto level = Map(map_function, inputs, base);
  if (!level.ok()) return level.status();
  std::vector<TaskId> current = std::move(*level);
  // Reduce in a tree until one task is left; a single input still gets one
  // reduce, so the root always holds the reduced value.
  do {
    std::vector<TaskOptions> reduces;
    for (size_t at = 0; at < current.size(); at += static_cast<size_t>(fan_in)) {
      TaskOptions options = base;
      options.command.clear();
      options.function = reduce_function;
      options.args = nullptr;
      options.pass_results = true;
      const size_t end = std::min(current.size(), at + static_cast<size_t>(fan_in));
      options.after = {{current.begin() + static_cast<long>(at), current.begin() + static_cast<long>(end)},
                       DependencyMode::kAll, AcceptedOutcome::kSuccess};
      reduces.push_back(std::move(options));
    }
    auto next = SubmitMany(reduces);
    if (!next.ok()) return next.status();
    current = std::move(*next);
  } while (current.size() > 1);
  return current[0];
}

}  // namespace ztask
