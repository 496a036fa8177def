// The few pieces of SQLite's C interface the hub's file uses, made safe to
// hold: a prepared statement that finalizes itself and binds a row and
// steps in one call, values to bind, a column's bytes, a task id as its key.
// Must not: know a table of the hub's file (store_file.cc owns them).
//
// Thread safety: as the connection they are made on (one thread).
#ifndef ZTASK_HUB_SQLITE_STATEMENT_H_
#define ZTASK_HUB_SQLITE_STATEMENT_H_

#include <sqlite3.h>

#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ztask/status.h"
#include "ztask/task_id.h"

namespace ztask::hub::sqlite {

inline Status SqlError(sqlite3* db, const std::string& what) {
  return Status::IoError(what + ": " + (db ? sqlite3_errmsg(db) : "no database"));
}

// Values bound to a statement's parameters. The bytes must stay until the
// statement is stepped.
struct Blob {
  std::string_view bytes;
};
struct Text {
  std::string_view text;
};
struct Null {};

// A prepared statement, finalized when it goes.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) { sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  sqlite3_stmt* get() { return stmt_; }
  bool ok() const { return stmt_ != nullptr; }

  // Binds `values` to ?1, ?2, … in order, runs the statement once and
  // readies it for the next row; false when the step failed.
  template <class... Values>
  bool Run(const Values&... values) {
    int index = 0;
    (Bind(++index, values), ...);
    const bool done = sqlite3_step(stmt_) == SQLITE_DONE;
    sqlite3_reset(stmt_);
    return done;
  }

  // The first row's first column as text, or "".
  std::string TextOr() {
    const bool row = ok() && sqlite3_step(stmt_) == SQLITE_ROW;
    const unsigned char* text = row ? sqlite3_column_text(stmt_, 0) : nullptr;
    std::string value = text ? reinterpret_cast<const char*>(text) : "";
    if (ok()) sqlite3_reset(stmt_);
    return value;
  }
  // The first row's first column as an integer, or `otherwise`.
  int64_t ScalarOr(int64_t otherwise) {
    const bool row = ok() && sqlite3_step(stmt_) == SQLITE_ROW;
    const int64_t value = row ? sqlite3_column_int64(stmt_, 0) : otherwise;
    if (ok()) sqlite3_reset(stmt_);
    return value;
  }

 private:
  template <std::integral T>
  void Bind(int index, T value) {
    sqlite3_bind_int64(stmt_, index, static_cast<sqlite3_int64>(value));
  }
  void Bind(int index, Blob blob) {
    sqlite3_bind_blob(stmt_, index, blob.bytes.data(), static_cast<int>(blob.bytes.size()),
                      SQLITE_STATIC);
  }
  void Bind(int index, Text text) {
    sqlite3_bind_text(stmt_, index, text.text.data(), static_cast<int>(text.text.size()),
                      SQLITE_STATIC);
  }
  void Bind(int index, Null) { sqlite3_bind_null(stmt_, index); }
  void Bind(int index, const std::optional<std::string>& text) {
    if (text) {
      Bind(index, Text{*text});
    } else {
      Bind(index, Null{});
    }
  }

  sqlite3_stmt* stmt_ = nullptr;
};

// A column's bytes, valid until the statement steps again.
inline std::string_view Column(sqlite3_stmt* stmt, int k) {
  const void* blob = sqlite3_column_blob(stmt, k);
  return {static_cast<const char*>(blob), static_cast<size_t>(sqlite3_column_bytes(stmt, k))};
}

// A task id as its 16-byte key, on the stack.
struct Key {
  explicit Key(const TaskId& id) { id.ToBytes(bytes); }
  Blob blob() const { return {{bytes, sizeof bytes}}; }
  char bytes[16];
};

inline bool Exec(sqlite3* db, const char* sql) {
  return sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK;
}

}  // namespace ztask::hub::sqlite

#endif  // ZTASK_HUB_SQLITE_STATEMENT_H_
