#include "scheduler/dispatch_log.h"

#include <endian.h>

#include <cstring>

namespace ztask::scheduler {
namespace {

void AppendI32(std::string& out, int32_t v) {
  const uint32_t le = htole32(static_cast<uint32_t>(v));
  out.append(reinterpret_cast<const char*>(&le), 4);
}

int32_t ReadI32(const char* at) {
  uint32_t v;
  std::memcpy(&v, at, 4);
  return static_cast<int32_t>(le32toh(v));
}

}  // namespace

void DispatchLog::Add(const TaskId& id, int32_t engine_id, int32_t attempt, int64_t serial) {
  pending_last_serial_ = serial;
  char bytes[16];
  id.ToBytes(bytes);
  pending_.append(bytes, sizeof bytes);
  AppendI32(pending_, engine_id);
  AppendI32(pending_, attempt);
}

protocol::Frames DispatchLog::Record() const {
  protocol::Frames record;
  record.push_back(protocol::Frame(kTag));
  record.push_back(protocol::Frame(pending_));
  return record;
}

void DispatchLog::Written(int64_t segment) {
  pending_.clear();
  const bool handing_over = hand_over_ == HandOverState::kWithNextWrite;
  if (handing_over) hand_over_ = HandOverState::kDone;
  if (segment < 0) return;  // and the adopted records stay, if handing over
  written_.push_back({segment, pending_last_serial_});
  if (handing_over) ReleaseAdopted();
}

void DispatchLog::HandOver() {
  if (hand_over_ != HandOverState::kNotYet) return;
  if (!pending_.empty()) {
    hand_over_ = HandOverState::kWithNextWrite;
    return;
  }
  hand_over_ = HandOverState::kDone;
  ReleaseAdopted();
}

void DispatchLog::ReleaseAdopted() {
  // Covered at the next Cover, released once what is sealed by then is
  // acknowledged.
  for (int64_t segment : adopted_) written_.push_front({segment, 0});
  adopted_.clear();
}

void DispatchLog::Cover(int64_t serial, int64_t seq) {
  while (!written_.empty() && written_.front().last_serial <= serial) {
    covered_.push_back({written_.front().segment, seq});
    written_.pop_front();
  }
}

void DispatchLog::AcknowledgedThrough(int64_t seq, Journal& journal) {
  while (!covered_.empty() && covered_.front().seq <= seq) {
    journal.Release(covered_.front().segment);
    covered_.pop_front();
  }
}

bool DispatchLog::IsRecord(const protocol::Frames& record) {
  return record.size() == 2 && record[0].to_string_view() == kTag;
}

bool DispatchLog::Read(const protocol::Frames& record, DispatchNotes& into) {
  if (!IsRecord(record)) return false;
  const std::string_view notes = record[1].to_string_view();
  if (notes.size() % kNoteBytes != 0) return false;
  for (size_t at = 0; at < notes.size(); at += kNoteBytes) {
    const TaskId id = TaskId::FromBytes(notes.substr(at, 16));
    const DispatchNote note{ReadI32(notes.data() + at + 16), ReadI32(notes.data() + at + 20)};
    DispatchNote& kept = into[id];
    if (note.attempt >= kept.attempt) kept = note;
  }
  return true;
}

}  // namespace ztask::scheduler
