// The README's example: submit two tasks, one after the other, through the
// client library, wait, and print what they did. usage: client_example PROFILE_DIR
#include <cstdio>
#include <string>

#include "ztask/client.h"

int main(int argc, char** argv) {
  auto client = ztask::Client::Connect(argc > 1 ? argv[1] : "");
  if (!client.ok()) return std::fprintf(stderr, "%s\n", client.status().message().c_str()), 2;
  ztask::TaskOptions greet;
  greet.command = {"sh", "-c", "echo hello from engine $ZTASK_ENGINE_ID"};
  auto first = (*client)->Submit(greet);
  ztask::TaskOptions total;
  total.function = "sum";                 // a built-in of every engine
  total.args = {1, 2, 3};
  total.after.ids = {*first};             // runs once `greet` succeeded
  auto second = (*client)->Submit(total);
  if (auto s = (*client)->Wait({*first, *second}, 60); !s.ok()) return 1;
  auto tasks = (*client)->Fetch({*first, *second});
  if (!tasks.ok()) return 1;
  for (const auto& task : *tasks) {
    // A command's output, or a function's result: each task has one of them.
    std::string what = task.stdout_text;
    while (!what.empty() && what.back() == '\n') what.pop_back();
    if (what.empty()) what = task.result.dump();
    std::printf("%s %s engine %d: %s\n", task.id.ToHex().c_str(),
                std::string(TaskStateName(task.status)).c_str(), task.engine_id.value_or(-1),
                what.c_str());
  }
}
