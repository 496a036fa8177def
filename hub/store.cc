// The store (store.h): the records in memory joined to their SQLite file.
// Must not: hold a rule of the records (records.cc) or a statement of the
// file (store_file.cc).
#include "hub/store.h"

#include <algorithm>

namespace ztask::hub {

Result<std::unique_ptr<TaskStore>> TaskStore::Open(const std::string& path,
                                                   StoreOptions options) {
  if (path == ":memory:") {
    return std::unique_ptr<TaskStore>(new TaskStore(std::move(options), nullptr));
  }
  auto file = StoreFile::Open(path, options.power, options.progress);
  if (!file.ok()) return file.status();
  std::unique_ptr<TaskStore> store(new TaskStore(std::move(options), std::move(*file)));
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

Status TaskStore::Flush() {
  if (!file_) {  // nothing to write: forget what changed
    book_.Clean();
    return Status::Ok();
  }
  if (!book_.HasChanges()) return Status::Ok();
  auto added = file_->Write(book_);
  if (!added.ok()) return added.status();  // the records stay changed: the next flush retries
  book_.Committed(*added);
  return Status::Ok();
}

}  // namespace ztask::hub
