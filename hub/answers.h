// The hub's answers to the queries that read its records: pages of records,
// recovery pages for a restarted scheduler, jobs, queues. Plain functions
// over the store and the registry, with no I/O: the query handlers
// (queries.cc) read the request, call these and send what they return.
// Must not: send, receive or log.
//
// Thread safety: as the store (one thread).
#ifndef ZTASK_HUB_ANSWERS_H_
#define ZTASK_HUB_ANSWERS_H_

#include <string_view>
#include <vector>

#include "hub/registry.h"
#include "hub/store.h"
#include "protocol/messages.h"

namespace ztask::hub {

// One page of the unfinished tasks, in id order, with the outcomes of the
// finished tasks they depend on. Pages keep each reply within the codec's
// limits whatever the history's length. (Other outcomes the scheduler
// looks up when a task names them: finished_only is not answered.) Tasks
// with no recorded request are left out and listed in *without_request.
protocol::RecoverReply Recover(const TaskStore& store, const protocol::RecoverRequest& request,
                               std::vector<TaskId>* without_request);

// The records of the listed tasks (and which are unknown); with no list,
// one page of every record in id order after request.after: at most
// request.limit (and kMaxPage), and no more than about kPageBytes of them.
// `lean`: without outputs and results (the scheduler needs outcomes only).
protocol::ResultReply Records(const TaskStore& store, const protocol::TaskIdList& request,
                              bool lean);

// A record in a status of a listing: waiting, running, ok, or failed (an
// error not replaced by a resubmission).
bool InStatus(const protocol::TaskRecord& r, std::string_view status);

// "new": a new job's name; "list": one job, or a page of them by name.
protocol::JobsReply Jobs(TaskStore& store, const protocol::JobsRequest& request);

// Per engine (live, or with records), what it runs, holds and finished.
protocol::QueueReply QueueStatus(const TaskStore& store, const EngineRegistry& registry);

}  // namespace ztask::hub

#endif  // ZTASK_HUB_ANSWERS_H_
