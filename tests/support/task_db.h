// The hub's task database as a test or a benchmark looks at it from
// outside, through a connection of its own: its rows and its bytes on disk.
// No gtest, so that bench/soak.cc reads it the same way.
#ifndef ZTASK_TESTS_SUPPORT_TASK_DB_H_
#define ZTASK_TESTS_SUPPORT_TASK_DB_H_

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace ztask::testing {

// Rows of the tasks table in the database at `path`; -1 when it cannot be
// read (waits up to 5 s for the hub's write lock).
inline int64_t TaskRowsIn(const std::string& path) {
  sqlite3* db = nullptr;
  int64_t rows = -1;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt* count = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM tasks", -1, &count, nullptr) == SQLITE_OK &&
        sqlite3_step(count) == SQLITE_ROW) {
      rows = sqlite3_column_int64(count, 0);
    }
    sqlite3_finalize(count);
  }
  sqlite3_close(db);
  return rows;
}

// The bytes of the database at `path` on disk: its file and its WAL.
inline int64_t TaskDbBytes(const std::string& path) {
  int64_t bytes = 0;
  for (const std::string& file : {path, path + "-wal"}) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(file, ec);
    if (!ec) bytes += static_cast<int64_t>(size);
  }
  return bytes;
}

}  // namespace ztask::testing

#endif  // ZTASK_TESTS_SUPPORT_TASK_DB_H_
