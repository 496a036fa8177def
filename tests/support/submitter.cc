// A client that submits a stream of tasks and says each id once Submit has
// returned, for tests that kill a submitting client mid-stream.
//
//   test_submitter PROFILE COUNT MARKS
//
// Task i is a command that appends its id to MARKS; every fifth task comes
// after the one before it. Prints "ID\n" per task, flushed.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ztask/client.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: test_submitter PROFILE COUNT MARKS\n");
    return 2;
  }
  auto client = ztask::Client::Connect(argv[1]);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  (*client)->set_max_in_flight(50);
  const long count = std::strtol(argv[2], nullptr, 10);
  const std::string marks = argv[3];
  ztask::TaskId previous;
  for (long i = 0; i < count; ++i) {
    ztask::TaskOptions o;
    o.command = {"/bin/sh", "-c", "echo $ZTASK_TASK_ID >> " + marks + "; sleep 0.01"};
    if (i % 5 == 4) o.after.ids = {previous};
    auto id = (*client)->Submit(o);
    if (!id.ok()) {
      std::fprintf(stderr, "%s\n", id.status().ToString().c_str());
      return 1;
    }
    previous = *id;
    std::printf("%s\n", id->ToHex().c_str());
    std::fflush(stdout);
  }
  return 0;
}
