// An engine binary of a ztask user: the built-ins and one C++ function.
#include <ztask/engine.h>

int main(int argc, char** argv) {
  ztask::Engine engine;
  ztask::RegisterBuiltins(engine);
  engine.Register("square", [](const ztask::Value& x, const ztask::TaskContext&) {
    return ztask::Value(x.get<double>() * x.get<double>());
  });
  return engine.Main(argc, argv);
}
