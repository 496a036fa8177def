// An engine built with the engine library, for tests: the built-ins, and
// `runs_on` N, which runs only on engine N and answers unmet elsewhere.
#include "ztask/engine.h"

int main(int argc, char** argv) {
  ztask::Engine engine;
  ztask::RegisterBuiltins(engine);
  engine.Register("runs_on", [](const ztask::Value& wanted, const ztask::TaskContext& context) {
    if (wanted.get<int>() != context.engine_id) {
      throw ztask::UnmetDependency("this is engine " + std::to_string(context.engine_id) +
                                   ", not " + wanted.dump());
    }
    return ztask::Value(context.engine_id);
  });
  return engine.Main(argc, argv);
}
