// Journal: the scheduler's write-ahead copy of the monitor batches the hub
// has not acknowledged yet, in a file of the profile directory. A batch is
// appended before anything it records (a dispatch, a reply) leaves the
// scheduler, so a scheduler killed at any moment leaves the hub nothing it
// does not know of: the next scheduler sends the journal's batches to the
// hub before it asks the hub what was in flight.
//
// Writes go to the kernel, not to the disk (no fsync): they survive the
// process, not the machine; opened with `sync`, each append (one per turn
// of the scheduler's loop: a group commit) and each rewrite is synced to
// the disk before it returns, and survives a power loss. The file is emptied whenever every batch is
// acknowledged, and rewritten with only the unacknowledged ones when it
// grows past kCompactBytes and holds more than twice what they take. A
// rewrite writes a new file and renames it over the old one, so a crash
// mid-way leaves the old journal whole.
//
// Record: the 4-byte length of the rest, the 4-byte number of frames, then
// each frame as its 4-byte length and its bytes (lengths little-endian; the
// frames are copied once, into a buffer reused by every append). A record
// cut short by a crash ends the file.
//
// Thread safety: owned by the scheduler's loop thread.
#ifndef ZTASK_SCHEDULER_JOURNAL_H_
#define ZTASK_SCHEDULER_JOURNAL_H_

#include <filesystem>
#include <memory>
#include <vector>

#include "protocol/wire.h"
#include "ztask/status.h"

namespace ztask::scheduler {

class Journal {
 public:
  static constexpr size_t kCompactBytes = size_t{64} << 20;

  // Opens (creating) the file. The batches already in it stay there until
  // a Rewrite, and are given once by TakeFound().
  static Result<std::unique_ptr<Journal>> Open(const std::filesystem::path& path,
                                               bool sync = false);
  ~Journal();

  // Whether the file was there before Open: an earlier scheduler of this
  // profile ran.
  bool existed() const { return existed_; }
  // The batches an earlier scheduler left unacknowledged.
  std::vector<protocol::Frames> TakeFound() { return std::move(found_); }
  Status Append(const protocol::Frames& batch);
  // Replaces the file's content with these batches (none: empties it). On
  // an error the journal is as it was.
  Status Rewrite(const std::vector<const protocol::Frames*>& batches);
  size_t bytes() const { return bytes_; }

 private:
  Journal(std::filesystem::path path, int fd) : path_(std::move(path)), fd_(fd) {}
  // Encodes a batch into buffer_.
  void Record(const protocol::Frames& batch);

  std::filesystem::path path_;
  int fd_;
  size_t bytes_ = 0;
  bool existed_ = false;
  bool sync_ = false;
  std::string buffer_;
  std::vector<protocol::Frames> found_;
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_JOURNAL_H_
