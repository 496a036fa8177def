// taskengine: the stock engine, with the built-in functions.
#include "ztask/engine.h"

int main(int argc, char** argv) {
  ztask::Engine engine;
  ztask::RegisterBuiltins(engine);
  return engine.Main(argc, argv);
}
