// Status and Result<T>: the outcome of every operation that can fail at a
// boundary (network input, files, command lines, sockets). A Status is either
// OK or a code with a one-line message meant for a person. Result<T> holds a
// value or a non-OK Status.
//
// Thread safety: plain values; copy them freely, share them read-only.
#ifndef ZTASK_STATUS_H_
#define ZTASK_STATUS_H_

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace ztask {

class [[nodiscard]] Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,    // the caller's input is malformed
    kNotFound,           // a file, id or peer does not exist
    kPermissionDenied,   // e.g. a connection file readable by others
    kBadSignature,       // HMAC missing, wrong, or made with another key
    kVersionMismatch,    // frame 0 is not our protocol signature
    kMalformed,          // frames that do not decode to a message
    kTooLarge,           // beyond a configured size limit
    kIoError,            // the operating system refused
    kUnavailable,        // a peer or socket cannot be reached
    kTimedOut,           // a deadline passed first
    kInternal,           // a bug: should not happen
  };

  Status() = default;  // OK
  Status(Code code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) {
    return {Code::kInvalidArgument, std::move(m)};
  }
  static Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
  static Status PermissionDenied(std::string m) {
    return {Code::kPermissionDenied, std::move(m)};
  }
  static Status BadSignature(std::string m) {
    return {Code::kBadSignature, std::move(m)};
  }
  static Status VersionMismatch(std::string m) {
    return {Code::kVersionMismatch, std::move(m)};
  }
  static Status Malformed(std::string m) { return {Code::kMalformed, std::move(m)}; }
  static Status TooLarge(std::string m) { return {Code::kTooLarge, std::move(m)}; }
  static Status IoError(std::string m) { return {Code::kIoError, std::move(m)}; }
  static Status Unavailable(std::string m) {
    return {Code::kUnavailable, std::move(m)};
  }
  static Status TimedOut(std::string m) { return {Code::kTimedOut, std::move(m)}; }
  static Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "Malformed: header is not a map", or "OK".
  std::string ToString() const;
  static std::string_view CodeName(Code code);

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit on purpose
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    assert(!status_.ok() && "a Result built from a Status must hold an error");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  // REQUIRES: ok()
  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

inline std::string_view Status::CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: return "InvalidArgument";
    case Code::kNotFound: return "NotFound";
    case Code::kPermissionDenied: return "PermissionDenied";
    case Code::kBadSignature: return "BadSignature";
    case Code::kVersionMismatch: return "VersionMismatch";
    case Code::kMalformed: return "Malformed";
    case Code::kTooLarge: return "TooLarge";
    case Code::kIoError: return "IoError";
    case Code::kUnavailable: return "Unavailable";
    case Code::kTimedOut: return "TimedOut";
    case Code::kInternal: return "Internal";
  }
  return "Unknown";
}

inline std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(CodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

}  // namespace ztask

// Returns from the enclosing function when `expr` yields a non-OK Status.
#define ZTASK_RETURN_IF_ERROR(expr)            \
  do {                                         \
    ::ztask::Status _ztask_status = (expr);    \
    if (!_ztask_status.ok()) return _ztask_status; \
  } while (0)

#endif  // ZTASK_STATUS_H_
