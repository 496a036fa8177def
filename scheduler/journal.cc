#include "scheduler/journal.h"

#include <endian.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

namespace ztask::scheduler {
namespace {

Status WriteAll(int fd, const std::string& bytes, const std::filesystem::path& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return Status::IoError("cannot write the journal " + path.string() + ": " +
                             std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

uint32_t ReadU32(std::string_view bytes, size_t at) {
  uint32_t v;
  std::memcpy(&v, bytes.data() + at, 4);
  return le32toh(v);
}

void AppendU32(std::string& out, size_t v) {
  const uint32_t le = htole32(static_cast<uint32_t>(v));
  out.append(reinterpret_cast<const char*>(&le), 4);
}

// A record's body, or nothing when it does not hold together.
std::optional<protocol::Frames> Decode(std::string_view body) {
  if (body.size() < 4) return std::nullopt;
  const uint32_t count = ReadU32(body, 0);
  size_t at = 4;
  protocol::Frames frames;
  for (uint32_t i = 0; i < count; ++i) {
    if (body.size() - at < 4) return std::nullopt;
    const uint32_t length = ReadU32(body, at);
    at += 4;
    if (body.size() - at < length) return std::nullopt;
    frames.push_back(protocol::Frame(body.substr(at, length)));
    at += length;
  }
  if (at != body.size()) return std::nullopt;
  return frames;
}

// Where a rewrite writes before it renames.
std::filesystem::path NewPath(const std::filesystem::path& path) {
  return path.string() + ".new";
}

}  // namespace

Result<std::unique_ptr<Journal>> Journal::Open(const std::filesystem::path& path, bool sync) {
  std::error_code ec;
  const bool existed = std::filesystem::exists(path, ec);
  // A rewrite cut short by a crash: the journal itself is whole.
  std::filesystem::remove(NewPath(path), ec);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Status::IoError("cannot open the journal " + path.string() + ": " +
                           std::strerror(errno));
  }
  ::fchmod(fd, 0600);  // made by an older version, or by hand
  std::unique_ptr<Journal> journal(new Journal(path, fd));
  journal->existed_ = existed;
  journal->sync_ = sync;
  std::string content;
  char buffer[1 << 16];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::IoError("cannot read the journal " + path.string());
    content.append(buffer, static_cast<size_t>(n));
  }
  size_t at = 0;
  while (content.size() - at >= 4) {
    const uint32_t length = ReadU32(content, at);
    if (content.size() - at - 4 < length) break;  // cut short by a crash
    auto frames = Decode(std::string_view(content).substr(at + 4, length));
    if (!frames) break;
    journal->found_.push_back(std::move(*frames));
    at += 4 + length;
  }
  // Appends go after the last whole record.
  if (::ftruncate(fd, static_cast<off_t>(at)) != 0 ||
      ::lseek(fd, static_cast<off_t>(at), SEEK_SET) < 0) {
    return Status::IoError("cannot set up the journal " + path.string() + ": " +
                           std::strerror(errno));
  }
  journal->bytes_ = at;
  return journal;
}

Journal::~Journal() { ::close(fd_); }

void Journal::Record(const protocol::Frames& batch) {
  size_t body = 4;
  for (const auto& f : batch) body += 4 + f.size();
  buffer_.clear();
  buffer_.reserve(4 + body);
  AppendU32(buffer_, body);
  AppendU32(buffer_, batch.size());
  for (const auto& f : batch) {
    AppendU32(buffer_, f.size());
    buffer_.append(static_cast<const char*>(f.data()), f.size());
  }
}

Status Journal::Append(const protocol::Frames& batch) {
  Record(batch);
  ZTASK_RETURN_IF_ERROR(WriteAll(fd_, buffer_, path_));
  if (sync_ && ::fdatasync(fd_) != 0) {
    return Status::IoError("cannot sync the journal " + path_.string() + ": " +
                           std::strerror(errno));
  }
  bytes_ += buffer_.size();
  // A burst of large batches leaves a large buffer: not kept for ever.
  if (buffer_.capacity() > (size_t{16} << 20)) std::string().swap(buffer_);
  return Status::Ok();
}

Status Journal::Rewrite(const std::vector<const protocol::Frames*>& batches) {
  if (batches.empty()) {
    // Nothing to keep: emptied in place (a crash leaves it empty or whole,
    // and whole only repeats what the hub has).
    if (::ftruncate(fd_, 0) != 0 || ::lseek(fd_, 0, SEEK_SET) != 0) {
      return Status::IoError("cannot empty the journal " + path_.string() + ": " +
                             std::strerror(errno));
    }
    bytes_ = 0;
    return Status::Ok();
  }
  // A new file, renamed over the old one once whole: a crash at any moment
  // leaves the old journal (everything it held) or the new one.
  const std::filesystem::path fresh = NewPath(path_);
  const int fd = ::open(fresh.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Status::IoError("cannot rewrite the journal " + fresh.string() + ": " +
                           std::strerror(errno));
  }
  const int old_fd = fd_;
  const size_t old_bytes = bytes_;
  fd_ = fd;
  bytes_ = 0;
  Status written = Status::Ok();
  const bool sync = std::exchange(sync_, false);  // one sync for the whole file
  for (const protocol::Frames* batch : batches) {
    written = Append(*batch);
    if (!written.ok()) break;
  }
  sync_ = sync;
  if (written.ok() && sync_ && ::fdatasync(fd) != 0) {
    written = Status::IoError("cannot sync the journal " + fresh.string() + ": " +
                              std::strerror(errno));
  }
  if (written.ok() && ::rename(fresh.c_str(), path_.c_str()) != 0) {
    written = Status::IoError("cannot replace the journal " + path_.string() + ": " +
                              std::strerror(errno));
  }
  if (written.ok() && sync_) {
    // The new name too must reach the disk.
    const int dir = ::open(path_.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      (void)::fsync(dir);
      ::close(dir);
    }
  }
  if (!written.ok()) {
    // The old file still holds every batch given (and more): kept.
    ::close(fd);
    ::unlink(fresh.c_str());
    fd_ = old_fd;
    bytes_ = old_bytes;
    return written;
  }
  ::close(old_fd);
  return Status::Ok();
}

}  // namespace ztask::scheduler
