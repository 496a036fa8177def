// Finds the ztask Python package relative to this program or library.
#include "engine/python_path.h"

#include <dlfcn.h>

#include <filesystem>
#include <system_error>
#include <vector>

namespace ztask::engine {

std::string BundledPythonPath() {
  namespace fs = std::filesystem;
  std::error_code error;
  std::vector<fs::path> prefixes;
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  if (!error) prefixes.push_back(exe.parent_path().parent_path());
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&BundledPythonPath), &info) != 0 && info.dli_fname) {
    const fs::path library = fs::weakly_canonical(info.dli_fname, error);
    if (!error) {
      prefixes.push_back(library.parent_path().parent_path());
      prefixes.push_back(library.parent_path().parent_path().parent_path());
    }
  }
  for (const fs::path& prefix : prefixes) {
    const fs::path dir = prefix / "lib" / "python3" / "dist-packages";
    if (fs::exists(dir / "ztask_worker.py", error)) return dir.string();
  }
  return "";
}

}  // namespace ztask::engine
