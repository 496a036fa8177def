// A temporary directory removed with everything in it when the object goes
// (kept when ZTASK_TEST_KEEP is set).
#ifndef ZTASK_TESTS_SUPPORT_TEMP_DIR_H_
#define ZTASK_TESTS_SUPPORT_TEMP_DIR_H_

#include <stdlib.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace ztask::testing {

class TempDir {
 public:
  // Throws (the test fails saying so) when the directory cannot be made:
  // a full disk, say.
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "ztask-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("cannot make a temporary directory " + pattern + ": " +
                               std::strerror(errno));
    }
    path_ = pattern;
  }
  ~TempDir() {
    // ZTASK_TEST_KEEP=1 keeps it (with the cluster's logs) to look into a failure.
    if (const char* keep = std::getenv("ZTASK_TEST_KEEP"); keep && *keep && *keep != '0') {
      std::fprintf(stderr, "kept %s\n", path_.c_str());
      return;
    }
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace ztask::testing

#endif  // ZTASK_TESTS_SUPPORT_TEMP_DIR_H_
