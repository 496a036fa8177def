// The README's example: the scheduling rules as a library. Two engines,
// a task that fails, and what happens to the tasks that depend on it.
#include <cstdio>

#include "scheduler/core.h"

using namespace ztask;
using namespace ztask::scheduler;

// The core reads the time from what it is given; here it stands still.
ztask::base::ManualClock clock0;

int main() {
  SchedulerCore core({.hwm = 1}, MakeScheme("leastload", 1), &clock0);
  const EngineSlot e0 = core.EngineAdded(0);
  core.EngineAdded(1);
  const TaskId fetch = TaskId::Random(), clean = TaskId::Random(), use = TaskId::Random();
  Submission first, second, third;
  first.id = fetch;
  second.id = use;                // runs after fetch succeeds
  second.after.ids = {fetch};
  third.id = clean;               // runs after fetch fails
  third.after.ids = {fetch};
  third.after.outcome = AcceptedOutcome::kFailure;
  for (const auto& s : {first, second, third}) core.Submit(s);
  core.TaskFinished(e0, fetch, /*success=*/false, ErrorType::kTaskFailed);

  std::vector<Action> actions;
  core.TakeActions(&actions);
  const char* kinds[] = {"dispatch", "deliver", "fail", "retry"};
  for (const Action& a : actions) {
    const char* who = a.task == fetch ? "fetch" : a.task == use ? "use" : "clean";
    std::printf("%-8s %-5s engine %2d  %s\n", kinds[static_cast<int>(a.kind)], who, a.engine_id,
                std::string(ErrorTypeName(a.error)).c_str());
  }
}
