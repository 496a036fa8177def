// An engine built with the engine library, for tests: the built-ins, and
// `runs_on` N, which runs only on engine N and answers unmet elsewhere.
// With ZTASK_TEST_MARKS set to a directory, each answer of `runs_on` is a
// line "ENGINE ATTEMPT" in the file named by the task's id there.
#include <cstdlib>
#include <fstream>
#include <string>

#include "ztask/engine.h"

int main(int argc, char** argv) {
  ztask::Engine engine;
  ztask::RegisterBuiltins(engine);
  const char* marks = std::getenv("ZTASK_TEST_MARKS");
  const std::string marks_dir = marks ? marks : "";
  engine.Register("runs_on", [marks_dir](const ztask::Value& wanted,
                                         const ztask::TaskContext& context) {
    if (!marks_dir.empty()) {
      std::ofstream(marks_dir + "/" + context.task_id.ToHex(), std::ios::app)
          << context.engine_id << " " << context.attempt << "\n";
    }
    if (wanted.get<int>() != context.engine_id) {
      throw ztask::UnmetDependency("this is engine " + std::to_string(context.engine_id) +
                                   ", not " + wanted.dump());
    }
    return ztask::Value(context.engine_id);
  });
  return engine.Main(argc, argv);
}
