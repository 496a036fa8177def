// The records in memory (records.h): their changes, counts and retention.
// Must not: read or write a file (a record let go of is read back through
// the RecordSource).
#include "hub/records.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>

#include "base/prefetch.h"
#include "protocol/codec.h"

namespace ztask::hub {
namespace {

// A packed record read back.
Result<protocol::TaskRecord> Unpack(const RecordBook::Kept& packed) {
  return protocol::DecodeStored<protocol::TaskRecord>(
      static_cast<const RecordBook::Packed&>(packed).bytes);
}

}  // namespace

KeptRequest::KeptRequest(std::span<const std::string_view> frames)
    : stored_(protocol::EncodeFrameList(frames)) {}

const std::string& KeptRequest::NoFrames() {
  static const std::string bytes = protocol::EncodeFrameList({});
  return bytes;
}

std::optional<KeptRequest> KeptRequest::FromStored(std::string_view bytes) {
  if (!protocol::DecodeBody<protocol::FrameList>(bytes).ok()) return std::nullopt;
  return KeptRequest(Stored{}, std::string(bytes));
}

std::vector<std::string> KeptRequest::frames() const {
  if (stored_.empty()) return {};
  auto list = protocol::DecodeBody<protocol::FrameList>(stored_);
  return list.ok() ? std::move(list->frames) : std::vector<std::string>{};
}

bool RecordBook::Submitted(const protocol::Header& request, const protocol::RoutingMeta& meta,
                           const protocol::TaskSpec& spec, KeptRequest request_frames,
                           int64_t hold_since_us) {
  bool made;
  Kept& kept = KeptOf(request.id, &made);
  if (kept.finished()) return false;
  Entry& e = static_cast<Entry&>(kept);
  const bool hold = made && hold_since_us > 0;
  if (!hold) Touch(e);
  protocol::TaskRecord& r = e.record;
  Tally(r, -1);
  r.label = spec.label;
  r.client = request.session;
  if (r.state == TaskState::kNone) r.state = TaskState::kWaiting;  // what came later for it stays
  r.submitted_us = request.date_us;
  r.routing = meta;
  r.job = spec.job;
  r.array_index = spec.array_index;
  // What it runs, to be submitted again: not a Python task's (its pickled
  // function and arguments could be large, and only Python can send it).
  if (protocol::ParseTaskKind(spec.kind) != protocol::TaskKind::kPython) r.spec = spec;
  Tally(r, +1);
  Guard(e, true);
  if (spec.replaces && *spec.replaces != request.id) Replace(*spec.replaces, request.id);
  if (!e.has_request) {
    e.request = std::move(request_frames);
    e.has_request = true;
    e.request_changed = true;
  }
  if (hold) Hold(e, hold_since_us);
  return true;
}

void RecordBook::Hold(Entry& e, int64_t since_us) {
  e.held = true;
  held_.push_back({e.record.id, since_us});
  ++held_count_;
}

void RecordBook::ReleaseHeld(int64_t until_us) {
  while (!held_.empty()) {
    const Held& front = held_.front();
    const std::unique_ptr<Kept>* slot = entries_.find(front.id);
    Entry* e = slot && !(*slot)->packed ? static_cast<Entry*>(slot->get()) : nullptr;
    if (e && e->held) {
      if (front.since_us > until_us) break;
      Touch(*e);
    }
    held_.pop_front();
  }
}

int64_t RecordBook::OldestHeldUs() const {
  return held_count_ == 0 || held_.empty() ? INT64_MAX : held_.front().since_us;
}

void RecordBook::Replace(const TaskId& old_id, const TaskId& by) {
  bool made;
  Kept& kept = KeptOf(old_id, &made);
  if (made) {  // never recorded: nothing to mark
    entries_.erase(old_id);
    return;
  }
  const auto replaceable = [](const protocol::TaskRecord& r) {
    return r.state == TaskState::kError && !r.replaced_by;
  };
  if (kept.packed) {  // left packed unless it changes
    const auto known = Unpack(kept);
    if (!known.ok() || !replaceable(*known)) return;
  }
  Entry& old = Whole(old_id, kept);
  protocol::TaskRecord& record = old.record;
  if (!replaceable(record)) return;
  Touch(old);
  Tally(record, -1);
  record.replaced_by = by;
  Tally(record, +1);
}

std::string RecordBook::NewJobName() {
  for (;;) {
    std::string name = std::to_string(++last_job_number_);
    if (!jobs_.contains(name)) return name;
  }
}

void RecordBook::DropRequest(Entry& e) {
  if (!e.has_request) return;
  e.request.Release();
  e.has_request = false;
  e.request_changed = true;
}

// The monitor may repeat itself, and after a restart of the hub deliver an
// older batch after a newer one: a change applies only when it is news. An
// attempt's assignment comes before its outcome, so an assignment of an
// attempt already counted is old.
bool RecordBook::Assigned(const TaskId& id, const protocol::Assignment& assignment) {
  bool made;
  Kept& kept = KeptOf(id, &made);
  if (kept.finished()) return false;
  Entry& e = static_cast<Entry&>(kept);
  if (!made && assignment.attempt <= e.record.attempts) return false;
  Touch(e);
  protocol::TaskRecord& r = e.record;
  Tally(r, -1);
  r.state = TaskState::kRunning;
  r.engine_id = assignment.engine_id;
  r.attempts = assignment.attempt;
  Tally(r, +1);
  return true;
}

bool RecordBook::Outcome(const TaskId& id, const protocol::OutcomeMeta& meta,
                         const protocol::TaskResult& result, int64_t now_us) {
  bool made;
  Kept& kept = KeptOf(id, &made);
  if (kept.finished()) return false;  // final already
  Entry& e = static_cast<Entry&>(kept);
  const protocol::TaskRecord& known = e.record;
  if (!made && !meta.final &&
      (meta.attempt < known.attempts ||
       (meta.attempt == known.attempts && known.state == TaskState::kWaiting))) {
    return false;  // a retry of an attempt already counted
  }
  Touch(e);
  protocol::TaskRecord& r = e.record;
  Tally(r, -1);
  r.attempts = std::max(r.attempts, meta.attempt);
  r.error_type = meta.error_type;
  r.error_message = result.error_message;
  if (meta.engine_id) r.engine_id = meta.engine_id;
  if (!meta.final) {
    r.state = TaskState::kWaiting;  // queued again for another attempt
    Tally(r, +1);
    return true;
  }
  DropRequest(e);
  Guard(e, false);
  if (source_) finished_order_.push_back(id);
  r.state = meta.ok ? TaskState::kOk : TaskState::kError;
  r.result = result.result;
  r.exit_code = result.exit_code;
  r.stdout_text = result.stdout_text;
  r.stderr_text = result.stderr_text;
  r.stdout_truncated = result.stdout_truncated;
  r.stderr_truncated = result.stderr_truncated;
  if (result.started_us) r.started_us = result.started_us;
  r.completed_us = result.completed_us ? result.completed_us : now_us;
  Tally(r, +1);
  return true;
}

void RecordBook::Tally(const protocol::TaskRecord& r, int delta) {
  if (r.state == TaskState::kWaiting) {
    waiting_ += delta;
  } else if (r.engine_id) {
    if (r.state == TaskState::kRunning) by_engine_[*r.engine_id].running += delta;
    if (r.finished()) {
      by_engine_[*r.engine_id].finished += delta;
      tally_changed_.insert(*r.engine_id);
    }
  }
  if (r.finished()) {
    (r.state == TaskState::kOk ? ok_ : failed_) += delta;
    outcomes_changed_ = true;
  }
  if (!r.job || r.state == TaskState::kNone) return;
  protocol::JobSummary& j = jobs_[*r.job];
  if (j.name.empty()) j.name = *r.job;
  if (r.replaced_by) {
    j.replaced += delta;
  } else {
    switch (r.state) {
      case TaskState::kWaiting: j.waiting += delta; break;
      case TaskState::kRunning: j.running += delta; break;
      case TaskState::kOk: j.ok += delta; break;
      case TaskState::kError: j.failed += delta; break;
      case TaskState::kNone: break;
    }
  }
  if (delta > 0) {
    if (r.submitted_us > 0 && (j.first_submit_us == 0 || r.submitted_us < j.first_submit_us)) {
      j.first_submit_us = r.submitted_us;
    }
    if (r.finished() && r.completed_us)
      j.last_finish_us = std::max(j.last_finish_us, *r.completed_us);
  }
  if (r.finished()) jobs_changed_.insert(*r.job);
}

size_t RecordBook::Purge(const std::vector<TaskId>& ids, bool all) {
  std::vector<TaskId> doomed;
  if (all) {
    entries_.for_each([&](const TaskId& id, const std::unique_ptr<Kept>& k) {
      if (k->finished()) doomed.push_back(id);
    });
  } else {
    for (const TaskId& id : ids) {
      bool made;
      const Kept& k = KeptOf(id, &made);  // brings back one let go of
      if (made) {
        entries_.erase(id);
      } else if (k.finished()) {
        doomed.push_back(id);
      }
    }
  }
  std::sort(doomed.begin(), doomed.end());
  doomed.erase(std::unique(doomed.begin(), doomed.end()), doomed.end());  // listed twice
  bool dirty_purged = false;
  for (const TaskId& id : doomed) {
    Kept& k = **entries_.find(id);
    TallyKept(k, -1);
    if (k.row != 0) deleted_rows_.push_back(k.row);
    if (!k.packed && static_cast<Entry&>(k).dirty) {
      static_cast<Entry&>(k).dirty = false;  // marks it for taking out of dirty_ below
      dirty_purged = true;
    }
  }
  if (dirty_purged) {
    std::erase_if(dirty_, [](const Entry* e) { return !e->dirty; });
  }
  for (const TaskId& id : doomed) entries_.erase(id);
  return doomed.size();
}

// A record that names one task twice (after and follow) counts it twice,
// and is uncounted the same way.
void RecordBook::Guard(Entry& e, bool on) {
  if (!guard_ || e.guards == on) return;
  e.guards = on;
  for (const auto* set : {&e.record.routing.after.ids, &e.record.routing.follow.ids}) {
    for (const TaskId& dep : *set) {
      if (on) {
        ++*awaited_.try_emplace(dep, 0).first;
      } else if (int32_t* n = awaited_.find(dep); n && --*n <= 0) {
        awaited_.erase(dep);
      }
    }
  }
}

void RecordBook::Dropped(const std::vector<TaskId>& ids) {
  assert(!HasChanges());
  for (const TaskId& id : ids) {
    const Kept* k = FindKept(id);
    // finished_order_ may still list it: Evict passes over what is gone.
    if (k && k->finished()) entries_.erase(id);
  }
}

void RecordBook::ForgetFinished() {
  std::vector<TaskId> gone;
  entries_.for_each([&](const TaskId& id, const std::unique_ptr<Kept>& k) {
    if (k->finished()) gone.push_back(id);
  });
  for (const TaskId& id : gone) entries_.erase(id);
  for (auto& [engine, tally] : by_engine_) tally.finished = 0;
  ok_ = failed_ = 0;
  for (auto& [name, job] : jobs_) job.ok = job.failed = job.replaced = 0;
  finished_order_.clear();
  has_evicted_ = false;
}

void RecordBook::Committed(Written& written) {
  for (const auto& [e, row] : written.rows) {
    e->row = row;
    largest_stored_ = std::max(largest_stored_, e->record.id);
  }
  Clean();
  // Written a while ago, the entries are cold: each is looked up (its
  // entry, then its slot) a few ahead, as Evict does.
  std::vector<std::pair<Entry*, std::string>>& finished = written.finished;
  for (size_t i = 0; i < finished.size(); ++i) {
    if (i + kPrefetchAhead < finished.size()) PrefetchLine(finished[i + kPrefetchAhead].first);
    if (i + kPrefetchAhead / 2 < finished.size()) {
      entries_.prefetch(finished[i + kPrefetchAhead / 2].first->record.id);
    }
    auto& [e, stored] = finished[i];
    auto packed = std::make_unique<Packed>();
    packed->row = e->row;
    packed->bytes = std::move(stored);
    if (e->record.job) packed->job = &jobs_.find(*e->record.job)->first;  // Tally made it
    *entries_.find(e->record.id) = std::move(packed);                     // the entry is gone
  }
  Evict();
}

RecordBook::Entry& RecordBook::Whole(const TaskId& id, Kept& kept) {
  if (!kept.packed) return static_cast<Entry&>(kept);
  auto decoded = Unpack(kept);
  auto entry = std::make_unique<Entry>();
  entry->row = kept.row;
  if (decoded.ok()) {
    entry->record = std::move(*decoded);
  } else {
    // Bytes this book packed itself decode; were they ever not to, the
    // record says so rather than pass for another.
    entry->record.state = TaskState::kError;
    entry->record.error_type = ErrorType::kBadTask;
    entry->record.error_message = "the hub could not read its record back";
  }
  entry->record.id = id;
  Entry& whole = *entry;
  *entries_.find(id) = std::move(entry);  // `kept` is gone
  return whole;
}

void RecordBook::TallyKept(const Kept& kept, int delta) {
  if (!kept.packed) return Tally(static_cast<const Entry&>(kept).record, delta);
  if (auto decoded = Unpack(kept); decoded.ok()) Tally(*decoded, delta);
}

void RecordBook::Evict() {
  // The oldest finished records are cold: each is looked up a few ahead.
  while (finished_order_.size() > keep_finished_) {
    const size_t leaving = finished_order_.size() - keep_finished_;
    if (leaving > kPrefetchAhead) Prefetch(finished_order_[kPrefetchAhead]);
    if (leaving > kPrefetchAhead / 2) PrefetchRecord(finished_order_[kPrefetchAhead / 2]);
    const TaskId id = finished_order_.front();
    finished_order_.pop_front();
    const Kept* k = FindKept(id);
    // Purged already, or not written (a failed write left it dirty).
    if (!k || k->row == 0 || !k->finished() ||
        (!k->packed && static_cast<const Entry*>(k)->dirty)) {
      continue;
    }
    entries_.erase(id);
    has_evicted_ = true;
  }
}

RecordBook::Kept& RecordBook::KeptOf(const TaskId& id, bool* made) {
  auto [slot, inserted] = entries_.try_emplace(id);
  *made = inserted;
  if (!inserted) return **slot;
  auto entry = std::make_unique<Entry>();
  Entry& e = *entry;
  *slot = std::move(entry);
  e.record.id = id;
  // A record let go of is finished: it comes back (to be let go again) so
  // that what comes for it is checked against it, never written twice.
  if (MayBeStored(id) && source_->ReadStored(id, &e.record, &e.row)) {
    *made = false;
    if (e.record.finished()) finished_order_.push_back(id);
  }
  return e;
}

void RecordBook::Touch(Entry& e) {
  if (e.held) {
    e.held = false;
    --held_count_;
  }
  if (!e.dirty) {
    e.dirty = true;
    dirty_.push_back(&e);
  }
}

void RecordBook::Clean() {
  for (Entry* e : dirty_) e->dirty = e->request_changed = false;
  dirty_.clear();
  deleted_rows_.clear();
  tally_changed_.clear();
  jobs_changed_.clear();
  outcomes_changed_ = false;
}

const RecordBook::Kept* RecordBook::FindKept(const TaskId& id) const {
  const std::unique_ptr<Kept>* slot = entries_.find(id);
  return slot ? slot->get() : nullptr;
}

const KeptRequest* RecordBook::RequestOf(const TaskId& id) const {
  const Kept* k = FindKept(id);
  if (!k || k->packed) return nullptr;
  const Entry& e = static_cast<const Entry&>(*k);
  return e.has_request ? &e.request : nullptr;
}

const protocol::TaskRecord* RecordBook::Find(const TaskId& id,
                                             protocol::TaskRecord* scratch) const {
  if (const Kept* k = FindKept(id)) {
    if (!k->packed) return &static_cast<const Entry*>(k)->record;
    auto decoded = Unpack(*k);
    if (!decoded.ok()) return nullptr;
    *scratch = std::move(*decoded);
    return scratch;
  }
  int64_t row;
  if (MayBeStored(id) && source_->ReadStored(id, scratch, &row)) return scratch;
  return nullptr;
}

void RecordBook::KeepFirst(std::vector<TaskId>* ids, size_t limit) {
  const size_t n = std::min(ids->size(), limit);
  std::partial_sort(ids->begin(), ids->begin() + static_cast<std::ptrdiff_t>(n), ids->end());
  ids->resize(n);
}

std::vector<TaskId> RecordBook::IdsAfter(const std::optional<TaskId>& after, size_t limit,
                                         const std::optional<std::string>& job) const {
  // Every record when none was let go; otherwise those not yet written (the
  // file has the rest, in the order of its index).
  std::vector<TaskId> ids;
  const auto of_job = [&job](const Kept& k) {
    if (!k.packed) return static_cast<const Entry&>(k).record.job == job;
    const std::string* packed_job = static_cast<const Packed&>(k).job;
    return packed_job != nullptr && *packed_job == *job;
  };
  entries_.for_each([&](const TaskId& id, const std::unique_ptr<Kept>& k) {
    if ((!after || *after < id) && (!has_evicted_ || k->row == 0) && (!job || of_job(*k))) {
      ids.push_back(id);
    }
  });
  KeepFirst(&ids, limit);
  return ids;
}

void RecordBook::RestoreJob(protocol::JobSummary job) {
  std::string name = job.name;
  jobs_[std::move(name)] = std::move(job);
}

void RecordBook::RestoreUnfinished(protocol::TaskRecord record, int64_t row,
                                   std::optional<KeptRequest> request) {
  bool made;
  const TaskId id = record.id;
  Entry& e = Whole(id, KeptOf(id, &made));
  e.row = row;
  e.record = std::move(record);
  Tally(e.record, +1);  // finished ones are counted in the file's counts
  Guard(e, true);
  if (request) {
    e.request = std::move(*request);
    e.has_request = true;
  }
}

void RecordBook::RestoreFinished(protocol::TaskRecord record, int64_t row) {
  bool made;
  const TaskId id = record.id;
  Entry& e = Whole(id, KeptOf(id, &made));
  e.row = row;
  e.record = std::move(record);
  finished_order_.push_front(id);  // read newest first
}

void RecordBook::Restored(bool evicted, std::optional<TaskId> largest) {
  tally_changed_.clear();
  jobs_changed_.clear();
  for (const auto& [name, job] : jobs_) {
    char* end = nullptr;
    const long long n = std::strtoll(name.c_str(), &end, 10);
    if (!name.empty() && *end == '\0' && n > last_job_number_) last_job_number_ = n;
  }
  has_evicted_ = evicted;
  if (largest) {
    largest_stored_ = *largest;
  } else if (has_evicted_) {
    largest_stored_ = TaskId{~uint64_t{0}, ~uint64_t{0}};  // unknown: any id may be there
  }
}

}  // namespace ztask::hub
