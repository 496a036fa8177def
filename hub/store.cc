// The store (store.h): the records in memory joined to their SQLite file.
// Must not: hold a rule of the records (records.cc) or a statement of the
// file (store_file.cc).
#include "hub/store.h"

#include <algorithm>

namespace ztask::hub {

Result<std::unique_ptr<TaskStore>> TaskStore::Open(const std::string& path,
                                                   StoreOptions options) {
  if (path == ":memory:") {
    if (options.max_finished_records > 0 || options.drop_finished_after_s > 0) {
      return Status::InvalidArgument(
          "a bound on the finished records needs a database file, not :memory:");
    }
    return std::unique_ptr<TaskStore>(new TaskStore(std::move(options), nullptr));
  }
  auto file = StoreFile::Open(path, options.power, options.progress);
  if (!file.ok()) return file.status();
  std::unique_ptr<TaskStore> store(new TaskStore(std::move(options), std::move(*file)));
  if (store->retains()) store->book_.GuardDependencies();
  ZTASK_RETURN_IF_ERROR(store->file_->Load(&store->book_, store->options_.keep_finished));
  return store;
}

TaskStore::~TaskStore() {
  if (file_) (void)Flush();
}

std::vector<TaskId> TaskStore::IdsAfter(const std::optional<TaskId>& after, size_t limit,
                                        const std::optional<std::string>& job) const {
  std::vector<TaskId> ids = book_.IdsAfter(after, limit, job);
  if (!book_.has_evicted()) return ids;
  file_->IdsAfter(after, limit, job, &ids);
  RecordBook::KeepFirst(&ids, limit);
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

// With records in the file only, Purge(all) deletes them there first, in
// one transaction, after writing what is not written yet; when the file
// cannot be written, what is in memory goes.
size_t TaskStore::Purge(const std::vector<TaskId>& ids, bool all) {
  if (all && book_.has_evicted() && Flush().ok()) {
    if (auto purged = file_->PurgeFinished()) {
      book_.ForgetFinished();
      return *purged;
    }
  }
  return book_.Purge(ids, all);
}

Status TaskStore::Flush(int64_t release_until_us) {
  book_.ReleaseHeld(release_until_us);
  if (!file_) {  // nothing to write: forget what changed
    book_.Clean();
    return Status::Ok();
  }
  if (!book_.HasChanges()) return Status::Ok();
  auto written = file_->Write(book_);
  if (!written.ok()) return written.status();  // the records stay changed: the next flush retries
  added_since_drop_ += written->rows.size();
  book_.Committed(*written);
  return Status::Ok();
}

Result<size_t> TaskStore::DropFinished(int64_t now_us) {
  if (!file_ || !retains() || book_.HasChanges()) return size_t{0};
  StoreFile::Retention bound;
  bound.max_finished = options_.max_finished_records;
  // An age past the clock's reading (inf, 1e300) keeps everything; cast to
  // int64_t it would overflow.
  const double age_us = options_.drop_finished_after_s * 1e6;
  if (age_us > 0 && age_us < static_cast<double>(now_us)) {
    bound.finished_before_us = now_us - static_cast<int64_t>(age_us);
  }
  bound.most = options_.drop_per_turn + added_since_drop_;
  std::vector<TaskId> dropped;
  ZTASK_RETURN_IF_ERROR(file_->DropFinished(
      bound, [this](const TaskId& id) { return book_.Awaited(id); }, &dropped));
  book_.Dropped(dropped);
  added_since_drop_ = 0;
  return dropped.size();
}

}  // namespace ztask::hub
