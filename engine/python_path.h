// Where an engine's Python worker finds the ztask package when no
// --python-path is given: in the install tree beside the program or the
// engine library (PREFIX/lib/python3/dist-packages, the layout of Debian's
// Python), found from where they are at run time, never from a path
// compiled in. The build tree has the same layout (its lib/python3/
// dist-packages is the source's python/), so one rule serves both.
//
// Thread safety: no state; safe anywhere.
#ifndef ZTASK_ENGINE_PYTHON_PATH_H_
#define ZTASK_ENGINE_PYTHON_PATH_H_

#include <string>

namespace ztask::engine {

// The first of PREFIX/lib/python3/dist-packages holding ztask_worker.py,
// PREFIX taken from this program (/proc/self/exe: PREFIX/bin/taskengine)
// and from the file holding the engine library (PREFIX/lib/libztask_engine.so
// or PREFIX/lib/MULTIARCH/...). Empty when there is none: the worker's
// Python then finds the package on its own path (an install in /usr).
std::string BundledPythonPath();

}  // namespace ztask::engine

#endif  // ZTASK_ENGINE_PYTHON_PATH_H_
