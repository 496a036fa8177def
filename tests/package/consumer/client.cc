// A client of a ztask user: submits a graph whose first task runs a C++
// function on the engine named ENGINE_NAME, and checks every result.
// usage: consumer_client PROFILE_DIR ENGINE_NAME
#include <ztask/client.h>
#include <ztask/version.h>

#include <cstdio>
#include <string>

int Fail(const std::string& what) {
  std::fprintf(stderr, "consumer: %s\n", what.c_str());
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 3) return Fail("usage: consumer_client PROFILE_DIR ENGINE_NAME");
  if (std::string(ztask::LibraryVersion()) != ZTASK_VERSION_STRING) {
    return Fail(std::string("library ") + ztask::LibraryVersion() + ", headers " +
                ZTASK_VERSION_STRING);
  }
  auto client = ztask::Client::Connect(argv[1]);
  if (!client.ok()) return Fail(client.status().message());
  if (auto s = (*client)->WaitForEngines(2, 60); !s.ok()) return Fail(s.message());
  auto engines = (*client)->Engines();
  if (!engines.ok()) return Fail(engines.status().message());
  int32_t ours = -1;
  for (const auto& e : *engines) {
    if (e.name == argv[2]) ours = e.id;
  }
  if (ours < 0) return Fail(std::string("no engine named ") + argv[2]);

  std::vector<ztask::GraphNode> graph(3);
  graph[0].name = "square";
  graph[0].options.function = "square";
  graph[0].options.args = 7;
  graph[0].options.targets = {ours};
  graph[1].name = "sum";
  graph[1].options.function = "sum";
  graph[1].options.args = {1, 2, 3};
  graph[1].after = {"square"};
  graph[2].name = "echo";
  graph[2].options.command = {"echo", "graph done"};
  graph[2].after = {"square", "sum"};
  auto submitted = (*client)->SubmitGraph(graph);
  if (!submitted.ok()) return Fail(submitted.status().message());
  std::vector<ztask::TaskId> ids;
  for (const auto& [name, id] : *submitted) ids.push_back(id);
  if (auto s = (*client)->Wait(ids, 60); !s.ok()) return Fail(s.message());
  auto tasks = (*client)->Fetch(ids);
  if (!tasks.ok()) return Fail(tasks.status().message());
  std::string seen;
  for (size_t i = 0; i < tasks->size(); ++i) {
    const ztask::TaskInfo& t = (*tasks)[i];
    if (!t.ok()) return Fail((*submitted)[i].first + " failed: " + t.error_message);
    seen += (*submitted)[i].first + "=" + (t.stdout_text.empty() ? t.result.dump() : t.stdout_text);
    seen += " ";
  }
  std::printf("consumer %s: %s\n", ztask::LibraryVersion(), seen.c_str());
  return 0;
}
