#include "scheduler/journal.h"

#include <endian.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "protocol/connection_file.h"

namespace ztask::scheduler {
namespace {

// Writes every byte `parts` point to, in order, in as few calls as the
// kernel takes; `parts` is consumed.
Status WriteAll(int fd, std::vector<iovec>& parts, const std::filesystem::path& path) {
  size_t first = 0;
  while (first < parts.size()) {
    const int count = static_cast<int>(std::min<size_t>(parts.size() - first, IOV_MAX));
    ssize_t n = ::writev(fd, parts.data() + first, count);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return Status::IoError("cannot write the journal " + path.string() + ": " +
                             std::strerror(errno));
    }
    // Past what was written: whole parts, then into the one cut short.
    while (first < parts.size() && static_cast<size_t>(n) >= parts[first].iov_len) {
      n -= static_cast<ssize_t>(parts[first].iov_len);
      ++first;
    }
    if (n > 0) {
      parts[first].iov_base = static_cast<char*>(parts[first].iov_base) + n;
      parts[first].iov_len -= static_cast<size_t>(n);
    }
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

// What a rewrite of the earlier versions' journal left when cut short.
std::filesystem::path NewPath(const std::filesystem::path& path) {
  return path.string() + ".new";
}

// The whole records at the start of `content`, each given to `take`.
template <class F>
void ReadRecords(std::string_view content, F&& take) {
  size_t at = 0;
  while (content.size() - at >= 4) {
    const uint32_t length = ReadU32(content, at);
    if (content.size() - at - 4 < length) return;  // cut short by a crash
    auto frames = Decode(content.substr(at + 4, length));
    if (!frames) return;
    take(std::move(*frames));
    at += 4 + length;
  }
}

Result<std::string> ReadFile(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status::IoError("cannot read the journal " + path.string() + ": " +
                           std::strerror(errno));
  }
  std::string content;
  char buffer[1 << 16];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return Status::IoError("cannot read the journal " + path.string());
    }
    content.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return content;
}

// The number N of a segment file NAME.N of the journal NAME, or nothing.
std::optional<int64_t> SegmentNumber(const std::string& file, const std::string& name) {
  if (file.size() <= name.size() + 1 || file.compare(0, name.size(), name) != 0 ||
      file[name.size()] != '.') {
    return std::nullopt;
  }
  int64_t n = 0;
  for (size_t i = name.size() + 1; i < file.size(); ++i) {
    if (file[i] < '0' || file[i] > '9' || n > (int64_t{1} << 50)) return std::nullopt;
    n = n * 10 + (file[i] - '0');
  }
  return n > 0 ? std::optional<int64_t>(n) : std::nullopt;
}

// The spill directory and its parent (a shared place's account directory),
// made if missing, while both are this account's alone.
Status PrivateSpill(const std::filesystem::path& dir) {
  ZTASK_RETURN_IF_ERROR(protocol::OwnPrivateDirectory(dir.parent_path()).status());
  return protocol::OwnPrivateDirectory(dir).status();
}

void SyncDirectory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    (void)::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

Result<std::unique_ptr<Journal>> Journal::Open(const std::filesystem::path& path, bool sync,
                                               size_t segment_bytes,
                                               const std::filesystem::path& spill) {
  std::error_code ec;
  const std::string name = path.filename().string();
  std::unique_ptr<Journal> journal(
      new Journal(path, segment_bytes, spill.empty() ? spill : spill / name));
  journal->sync_ = sync;
  // A rewrite of an earlier version cut short by a crash: the journal
  // itself is whole.
  std::filesystem::remove(NewPath(path), ec);
  // The earlier versions' single file is segment 0, then the segments in
  // order, wherever each is (true: spilled).
  std::map<int64_t, std::pair<std::filesystem::path, bool>> files;
  if (std::filesystem::exists(path, ec)) files[0] = {path, false};
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  // A spill directory is read only while it is this account's alone (it is
  // in a shared place); else it is not used.
  if (!spill.empty() && std::filesystem::exists(spill, ec) && !PrivateSpill(spill).ok()) {
    journal->spill_.clear();
  }
  const std::filesystem::path spilled_to = journal->spill_.empty() ? "" : spill;
  for (const auto& [where, spilled] : {std::pair{dir, false}, std::pair{spilled_to, true}}) {
    if (where.empty()) continue;
    for (const auto& entry : std::filesystem::directory_iterator(where, ec)) {
      if (auto n = SegmentNumber(entry.path().filename().string(), name)) {
        files[*n] = {entry.path(), spilled};
      }
    }
  }
  journal->existed_ = !files.empty();
  for (const auto& [n, file] : files) {
    auto content = ReadFile(file.first);
    if (!content.ok()) return content.status();
    Segment& segment = journal->segments_[n];
    segment.bytes = content->size();
    segment.spilled = file.second;
    ReadRecords(*content, [&](protocol::Frames frames) {
      journal->found_.push_back({std::move(frames), n});
      ++segment.batches;
    });
    journal->bytes_ += segment.bytes;
    journal->newest_ = n;
  }
  // Files that hold nothing go now; appends begin a new segment.
  for (const auto& [n, file] : files) {
    if (journal->segments_[n].batches == 0) journal->Remove(n);
  }
  ZTASK_RETURN_IF_ERROR(journal->Begin(journal->newest_ + 1));
  return journal;
}

Journal::~Journal() {
  if (fd_ >= 0) ::close(fd_);
  if (spill_.empty()) return;
  // Nothing spilled left: the spill directory goes (else it stays for the
  // next scheduler).
  if (spilling() && segments_[newest_].batches == 0) Remove(newest_);
  ::rmdir(spill_directory().c_str());
}

size_t Journal::spilled_segments() const {
  return static_cast<size_t>(std::count_if(segments_.begin(), segments_.end(),
                                           [](const auto& s) { return s.second.spilled; }));
}

bool Journal::spilling() const {
  auto it = segments_.find(newest_);
  return it != segments_.end() && it->second.spilled;
}

std::filesystem::path Journal::PathOf(int64_t segment, bool spilled) const {
  const std::filesystem::path& base = spilled ? spill_ : path_;
  return segment == 0 ? base : std::filesystem::path(base.string() + "." + std::to_string(segment));
}

std::filesystem::path Journal::PathOf(int64_t segment) const {
  auto it = segments_.find(segment);
  return PathOf(segment, it != segments_.end() && it->second.spilled);
}

Status Journal::Begin(int64_t next, bool spilled) {
  const std::filesystem::path file = PathOf(next, spilled);
  // The spill directory is in a shared place: a link there is not followed.
  const int fd = ::open(
      file.c_str(),
      O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | (spilled ? O_NOFOLLOW : 0), 0600);
  if (fd < 0) {
    return Status::IoError("cannot open the journal " + file.string() + ": " +
                           std::strerror(errno));
  }
  ::fchmod(fd, 0600);  // an old file of that name, made by hand
  if (sync_) SyncDirectory(file.parent_path());
  if (fd_ >= 0) {
    ::close(fd_);
    if (segments_[newest_].batches == 0) Remove(newest_);
  }
  fd_ = fd;
  newest_ = next;
  segments_[next] = Segment{.spilled = spilled};
  begin_anew_ = false;
  return Status::Ok();
}

void Journal::Remove(int64_t segment) {
  auto it = segments_.find(segment);
  if (it == segments_.end()) return;
  const std::filesystem::path file = PathOf(segment, it->second.spilled);
  bytes_ -= it->second.bytes;
  segments_.erase(it);
  // Left behind (it could not be deleted), it only repeats to the next
  // scheduler what the hub has.
  ::unlink(file.c_str());
}

size_t Journal::Record(const protocol::Frames& batch) {
  // The lengths go into buffer_ (reserved for all of them by Append, so
  // that the parts pointing into it stay valid), the frames are pointed to.
  size_t body = 4;
  for (const auto& f : batch) body += 4 + f.size();
  auto lengths = [&](size_t at) { parts_.push_back({buffer_.data() + at, buffer_.size() - at}); };
  size_t at = buffer_.size();
  AppendU32(buffer_, body);
  AppendU32(buffer_, batch.size());
  for (const auto& f : batch) {
    AppendU32(buffer_, f.size());
    lengths(at);
    if (f.size() > 0) parts_.push_back({const_cast<void*>(f.data()), f.size()});
    at = buffer_.size();
  }
  if (batch.empty()) lengths(at);
  return 4 + body;
}

Result<size_t> Journal::Write(std::span<const protocol::Frames* const> records, bool spill) {
  const Segment& newest = segments_[newest_];
  if (begin_anew_ || newest.bytes >= segment_bytes_ || (spill && !newest.spilled)) {
    // The spill directory is made when first needed.
    if (spill) ZTASK_RETURN_IF_ERROR(PrivateSpill(spill_directory()));
    ZTASK_RETURN_IF_ERROR(Begin(newest_ + 1, spill));
  }
  buffer_.clear();
  parts_.clear();
  size_t lengths = 0;
  for (const protocol::Frames* record : records) lengths += 8 + 4 * record->size();
  buffer_.reserve(lengths);
  size_t size = 0;
  for (const protocol::Frames* record : records) size += Record(*record);
  const std::filesystem::path file = PathOf(newest_);
  Status written = WriteAll(fd_, parts_, file);
  if (written.ok() && sync_ && ::fdatasync(fd_) != 0) {
    written =
        Status::IoError("cannot sync the journal " + file.string() + ": " + std::strerror(errno));
  }
  if (!written.ok()) {
    // What it wrote of the record would end the segment: later records
    // go to the next one.
    begin_anew_ = true;
    return written;
  }
  return size;
}

Result<int64_t> Journal::Append(std::span<const protocol::Frames* const> records) {
  Result<size_t> size = Write(records, false);
  if (!size.ok() && !spill_.empty()) {
    // Refused (a full disk): the same records in a segment of the spill
    // directory.
    Result<size_t> spilled = Write(records, true);
    if (spilled.ok()) size = spilled;
  }
  if (!size.ok()) return size.status();
  Segment& segment = segments_[newest_];
  segment.bytes += *size;
  segment.batches += records.size();
  bytes_ += *size;
  return newest_;
}

void Journal::Release(int64_t segment) {
  auto it = segments_.find(segment);
  if (it == segments_.end() || it->second.batches == 0) return;
  if (--it->second.batches > 0) return;
  if (segment != newest_) return Remove(segment);
  // The newest: emptied in place (a crash leaves it empty or whole, and
  // whole only repeats what the hub has).
  if (::ftruncate(fd_, 0) == 0) {
    bytes_ -= it->second.bytes;
    it->second.bytes = 0;
  }
}

}  // namespace ztask::scheduler
