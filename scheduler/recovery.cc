#include "scheduler/recovery.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "base/clock.h"
#include "protocol/codec.h"
#include "protocol/request.h"
#include "protocol/security.h"
#include "protocol/wire.h"

namespace ztask::scheduler {
namespace {

using protocol::MsgType;


constexpr int32_t kPageTasks = 2000;
constexpr int64_t kAskAgainMs = 2000;

// One recover_request and its reply, waited for up to `timeout_ms`.
auto AskPage(zmq::socket_t& hub, const protocol::Signer& signer, const std::string& session,
             const protocol::RecoverRequest& request, int64_t timeout_ms,
             const std::atomic<bool>& stop) {
  const protocol::Header header{TaskId::Random(), MsgType::kRecoverRequest, session,
                                base::WallMicros()};
  protocol::AskOptions options;
  options.timeout = std::chrono::milliseconds(timeout_ms);
  options.stop = &stop;
  options.on_unreadable = [](const Status& why) {
    spdlog::warn("a recovery page from the hub cannot be read: {}", why.message());
  };
  return protocol::Ask<MsgType::kRecoverReply>(hub, signer, header, request, options);
}

}  // namespace

Result<RecoveredState> FetchRecovery(zmq::context_t& context, const protocol::ConnectionInfo& info,
                                     const protocol::Signer& signer, int64_t timeout_ms,
                                     const std::atomic<bool>& stop) {
  auto connected = ConnectQuery(context, info);
  if (!connected.ok()) return connected.status();
  zmq::socket_t& hub = *connected;
  const std::string session = TaskId::Random().ToHex();
  RecoveredState state;
  // The unfinished tasks, page by page, with the outcomes they depend on.
  protocol::RecoverRequest request{std::nullopt, kPageTasks, std::nullopt};
  int64_t deadline = base::MonotonicMillis() + timeout_ms;
  size_t pages = 0;
  while (!stop.load()) {
    auto reply = AskPage(hub, signer, session, request, kAskAgainMs, stop);
    if (stop.load()) break;
    if (!reply.ok() && reply.status().code() != Status::Code::kTimedOut) {
      // Not even sent: no connection to ask on yet. Not a busy loop.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::optional<protocol::RecoverReply> page;
    if (reply.ok()) page = std::move(reply->content);
    if (!page) {
      // Without the hub's word the scheduler would run without the tasks in
      // flight, and their clients would wait for ever: it keeps asking.
      if (base::MonotonicMillis() >= deadline) {
        spdlog::error(
            "the hub at {} has not answered for {} s: the tasks an earlier scheduler had "
            "cannot be restored without it; still asking",
            info.hub.query, timeout_ms / 1000);
        deadline = base::MonotonicMillis() + timeout_ms;
      } else {
        spdlog::info("waiting for the hub to tell which tasks were in flight");
      }
      continue;
    }
    deadline = base::MonotonicMillis() + timeout_ms;  // it answers: each page gets the full time
    for (auto& f : page->finished) state.finished.push_back(f);
    for (auto& t : page->tasks) state.tasks.push_back(std::move(t));
    // The latest page's engines, unless a page could not name them.
    if (pages == 0 || state.engines) state.engines = std::move(page->engines);
    // Outcomes of other finished tasks are not read: a task naming one is
    // looked up when it comes, so a start costs the tasks in flight, not the
    // length of the history.
    if (page->done || page->tasks.empty()) return state;
    request.after = state.tasks.back().id;
    if (++pages % 10 == 0) {
      spdlog::info("recovering: {} unfinished tasks read so far", state.tasks.size());
    }
  }
  return Status::Unavailable("stopped while recovering");
}

Result<zmq::socket_t> ConnectQuery(zmq::context_t& context, const protocol::ConnectionInfo& info) {
  zmq::socket_t hub(context, zmq::socket_type::dealer);
  hub.set(zmq::sockopt::linger, 0);
  protocol::SecureClient(hub, info);
  ZTASK_RETURN_IF_ERROR(protocol::Connect(hub, info.hub.query));
  return hub;
}

std::optional<std::vector<int32_t>> FetchEngines(zmq::socket_t& hub, const protocol::Signer& signer,
                                                 int64_t timeout_ms,
                                                 const std::atomic<bool>& stop) {
  // A page after the last id there can be: no task, only the engines.
  const protocol::RecoverRequest request{TaskId{~uint64_t{0}, ~uint64_t{0}}, 1, std::nullopt};
  auto reply = AskPage(hub, signer, TaskId::Random().ToHex(), request, timeout_ms, stop);
  if (!reply.ok()) return std::nullopt;
  return std::move(reply->content.engines);
}

std::vector<const protocol::RecoveredTask*> DependencyOrder(const RecoveredState& state) {
  std::unordered_map<TaskId, const protocol::RecoveredTask*, TaskIdHash> by_id;
  for (const auto& t : state.tasks) by_id[t.id] = &t;
  std::vector<const protocol::RecoveredTask*> order;
  order.reserve(state.tasks.size());
  std::unordered_set<TaskId, TaskIdHash> placed;
  // Depth first over each task's dependencies among the recovered ones,
  // with an explicit stack: a chain of a million must not recurse.
  std::vector<std::pair<const protocol::RecoveredTask*, std::vector<TaskId>>> stack;
  auto deps_of = [](const protocol::RecoveredTask& t) {
    std::vector<TaskId> ids;
    if (t.request.size() < 2) return ids;
    auto meta = protocol::DecodeBody<protocol::RoutingMeta>(t.request[1]);
    if (!meta.ok()) return ids;
    ids = meta->after.ids;
    ids.insert(ids.end(), meta->follow.ids.begin(), meta->follow.ids.end());
    return ids;
  };
  std::unordered_set<TaskId, TaskIdHash> on_stack;
  for (const auto& root : state.tasks) {
    if (placed.count(root.id)) continue;
    stack.emplace_back(&root, deps_of(root));
    on_stack.insert(root.id);
    while (!stack.empty()) {
      auto& [task, deps] = stack.back();
      if (deps.empty()) {
        placed.insert(task->id);
        on_stack.erase(task->id);
        order.push_back(task);
        stack.pop_back();
        continue;
      }
      const TaskId dep = deps.back();
      deps.pop_back();
      auto it = by_id.find(dep);
      if (it == by_id.end() || placed.count(dep) || on_stack.count(dep)) continue;
      on_stack.insert(dep);
      stack.emplace_back(it->second, deps_of(*it->second));
    }
  }
  return order;
}

}  // namespace ztask::scheduler
