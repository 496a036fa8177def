#include "scheduler/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "protocol/codec.h"

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

}  // namespace

Result<std::unique_ptr<Journal>> Journal::Open(const std::filesystem::path& path) {
  std::error_code ec;
  const bool existed = std::filesystem::exists(path, ec);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Status::IoError("cannot open the journal " + path.string() + ": " +
                           std::strerror(errno));
  }
  std::unique_ptr<Journal> journal(new Journal(path, fd));
  journal->existed_ = existed;
  std::string content;
  char buffer[1 << 16];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::IoError("cannot read the journal " + path.string());
    content.append(buffer, static_cast<size_t>(n));
  }
  size_t at = 0;
  while (content.size() - at >= 4) {
    uint32_t length;
    std::memcpy(&length, content.data() + at, 4);
    if (content.size() - at - 4 < length) break;  // cut short by a crash
    auto list = protocol::DecodeBody<protocol::FrameList>({content.data() + at + 4, length});
    if (!list.ok()) break;
    protocol::Frames frames;
    for (const std::string& f : list->frames) frames.push_back(protocol::Frame(f));
    journal->found_.push_back(std::move(frames));
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

std::string Journal::Record(const protocol::Frames& batch) {
  protocol::FrameList list;
  list.frames.reserve(batch.size());
  for (const auto& f : batch) list.frames.emplace_back(protocol::View(f));
  const std::string body = protocol::EncodeBody(list);
  const auto length = static_cast<uint32_t>(body.size());
  std::string record(4, '\0');
  std::memcpy(record.data(), &length, 4);
  return record + body;
}

Status Journal::Append(const protocol::Frames& batch) {
  const std::string record = Record(batch);
  ZTASK_RETURN_IF_ERROR(WriteAll(fd_, record, path_));
  bytes_ += record.size();
  return Status::Ok();
}

Status Journal::Rewrite(const std::vector<const protocol::Frames*>& batches) {
  if (::ftruncate(fd_, 0) != 0 || ::lseek(fd_, 0, SEEK_SET) != 0) {
    return Status::IoError("cannot empty the journal " + path_.string() + ": " +
                           std::strerror(errno));
  }
  bytes_ = 0;
  for (const protocol::Frames* batch : batches) ZTASK_RETURN_IF_ERROR(Append(*batch));
  return Status::Ok();
}

}  // namespace ztask::scheduler
