// Journal: the scheduler's write-ahead copy of the monitor batches the hub
// has not acknowledged yet, in files of the profile directory. A batch is
// appended before anything it records (a dispatch, a reply) leaves the
// scheduler, so a scheduler killed at any moment leaves the hub nothing it
// does not know of: the next scheduler sends the journal's batches to the
// hub before it asks the hub what was in flight.
//
// The journal is a run of segments, `PATH.1`, `PATH.2`, ...: appends go to
// the newest, and a new one is begun once it holds segment_bytes. A segment
// none of whose batches waits for the hub any more is deleted (the newest
// is emptied instead), so the files hold the segments of what is
// unacknowledged (the latest batches, but for one the hub never takes) and
// the newest, and nothing is ever copied from one file to another. A batch
// whose append failed is appended again by its caller (MonitorLink) before
// the next; a segment whose sync failed is kept whole until a next
// scheduler reads it. (A single file rewritten with the live batches once it grew
// past 64 MiB cost a sixth of the scheduler's time under a stream of
// no-ops: the hub acknowledges in its own time, and most of the file was
// still live at each rewrite.) `PATH` itself, the journal of earlier
// versions, is read as the oldest segment and deleted once acknowledged.
//
// Beside the batches it holds each turn's notes of the dispatches the hub
// has no record of yet (dispatch_log.h), written with the turn's batch in
// one write; the journal tells them apart only by their frames, and
// releases each record, batch or notes, on its own.
//
// A spill directory, when given, takes the segments the journal's own
// directory refuses (its disk is full): an append whose write fails begins
// a segment there and writes again, so that a kill while the disk is full
// loses nothing the scheduler recorded. The directory is in a shared place
// (memory, tmpfs): it is made when first needed, with its parent, and
// read or written only while both are this account's alone. It survives
// the process, not the machine. A spilled segment is closed at its size
// like any, and the next is begun in the journal's directory again.
//
// Writes go to the kernel, not to the disk (no fsync): they survive the
// process, not the machine; opened with `sync`, each append (one per turn
// of the scheduler's loop: a group commit) is synced to the disk before it
// returns, and so is the directory when a segment is begun (an append
// that cannot sync it fails), and survives a power loss.
//
// Record: the 4-byte length of the rest, the 4-byte number of frames, then
// each frame as its 4-byte length and its bytes (lengths little-endian; the
// frames are written from where they are, with the lengths between them). A record
// cut short by a crash ends its segment; after a failed append the next one
// begins a new segment.
//
// Thread safety: owned by the scheduler's loop thread.
#ifndef ZTASK_SCHEDULER_JOURNAL_H_
#define ZTASK_SCHEDULER_JOURNAL_H_

#include <sys/uio.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "protocol/wire.h"
#include "ztask/status.h"

namespace ztask::scheduler {

class Journal {
 public:
  static constexpr size_t kSegmentBytes = size_t{4} << 20;

  // A batch an earlier scheduler left, and the segment that holds it.
  struct Found {
    protocol::Frames batch;
    int64_t segment;
  };

  // Opens the journal at `path` (its segments, those spilled to `spill`,
  // and the file of earlier versions) and begins a new segment. The
  // batches already there stay until released, and are given once by
  // TakeFound(). An empty `spill`: none.
  static Result<std::unique_ptr<Journal>> Open(const std::filesystem::path& path, bool sync = false,
                                               size_t segment_bytes = kSegmentBytes,
                                               const std::filesystem::path& spill = {});
  ~Journal();

  // Whether a journal was there before Open: an earlier scheduler of this
  // profile ran.
  bool existed() const { return existed_; }
  // The batches an earlier scheduler left unacknowledged, oldest first.
  std::vector<Found> TakeFound() { return std::move(found_); }
  // Appends a batch; returns the segment that holds it, to release it by.
  Result<int64_t> Append(const protocol::Frames& batch) {
    const protocol::Frames* records[] = {&batch};
    return Append(records);
  }
  // Appends records in one write; returns the segment that holds them all,
  // to release each by.
  Result<int64_t> Append(std::span<const protocol::Frames* const> records);
  // A batch of `segment` (from Append or TakeFound) is acknowledged: a
  // segment left with none is deleted, the newest emptied. Less than 0:
  // nothing (a batch the journal does not hold).
  void Release(int64_t segment);
  // The bytes in every segment.
  size_t bytes() const { return bytes_; }
  // The segments' files there are now.
  size_t segments() const { return segments_.size(); }
  // Of them, those in the spill directory.
  size_t spilled_segments() const;
  // Whether appends go to the spill directory now, and which it is.
  bool spilling() const;
  std::filesystem::path spill_directory() const { return spill_.parent_path(); }

 private:
  struct Segment {
    size_t batches = 0;  // not yet released
    size_t bytes = 0;
    bool pinned = false;  // holds a copy not counted (its sync failed): kept
    bool spilled = false;  // in the spill directory
  };
  Journal(std::filesystem::path path, size_t segment_bytes, std::filesystem::path spill)
      : path_(std::move(path)), spill_(std::move(spill)), segment_bytes_(segment_bytes) {}
  std::filesystem::path PathOf(int64_t segment, bool spilled) const;
  std::filesystem::path PathOf(int64_t segment) const;
  // Closes the newest segment (deleted if nothing in it waits) and begins
  // segment `next`, in the spill directory if `spilled`.
  Status Begin(int64_t next, bool spilled = false);
  void Remove(int64_t segment);
  // Writes `records` to the newest segment, begun anew first if it must be
  // or if `spill` and it is not spilled (then in the spill directory);
  // returns their bytes.
  Result<size_t> Write(std::span<const protocol::Frames* const> records, bool spill);
  // Adds a batch to the parts of the next write: its lengths at the end of
  // buffer_, its frames where they are. Returns the bytes it adds.
  size_t Record(const protocol::Frames& batch);

  std::filesystem::path path_;
  std::filesystem::path spill_;  // the same name in the spill directory; empty: none
  const size_t segment_bytes_;
  int fd_ = -1;              // the newest segment's
  int64_t newest_ = 0;       // its number
  bool begin_anew_ = false;  // an append failed part way: the next begins a segment
  size_t bytes_ = 0;
  bool existed_ = false;
  bool sync_ = false;
  std::map<int64_t, Segment> segments_;
  std::string buffer_;        // the lengths of the records of an append
  std::vector<iovec> parts_;  // what an append writes, in order
  std::vector<Found> found_;
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_JOURNAL_H_
