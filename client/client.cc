// The public Client: connecting to a cluster by its profile, and each
// public call forwarded to Client::Impl (client_impl.h says which file owns
// which concept).
//
// Must not: hold logic of its own beyond checking a call's arguments; no
// ZeroMQ or msgpack type leaks into ztask/client.h. Thread safety: a Client
// and its Impl are owned by one thread.
#include "ztask/client.h"

#include "client/client_impl.h"
#include "protocol/security.h"

namespace ztask {

Client::Impl::Impl(protocol::ConnectionInfo info, std::string profile)
    : info_(std::move(info)),
      profile_(std::move(profile)),
      signer_(info_.key),
      session_(TaskId::Random().ToHex()),
      scheduler_(context_, zmq::socket_type::dealer),
      hub_(context_, zmq::socket_type::dealer),
      hub_peer_{&hub_, "hub", info_.hub.query, std::chrono::seconds(5)},
      scheduler_peer_{&scheduler_, "scheduler", info_.scheduler.client, std::chrono::seconds(10)},
      waiter_(signer_, session_, profile_,
              {.notice = [this] { Notice(); },
               .on_other = [this](const protocol::Header& h,
                                  std::span<const std::string_view> views) {
                 NoteReplies(h, views);
               }}) {
  for (auto* s : {&scheduler_, &hub_}) {
    s->set(zmq::sockopt::linger, 1000);  // time to send what is queued at exit
    s->set(zmq::sockopt::sndhwm, 1000000);
    protocol::SecureClient(*s, info_);
  }
  // No routing id of our own: the scheduler replies on the connection
  // that last carried a signed message of this session (a restarted
  // scheduler learns it from the unanswered tasks sent again).
  scheduler_.connect(info_.scheduler.client);
  scheduler_watch_ = std::make_unique<protocol::ReconnectWatch>(context_, scheduler_);
  hub_.connect(info_.hub.query);
}

Result<std::unique_ptr<Client>> Client::Connect(const std::filesystem::path& profile_dir) {
  std::error_code ec;
  const bool is_file = std::filesystem::is_regular_file(profile_dir, ec);
  const auto profile = profile_dir.empty() ? protocol::DefaultProfileDir()
                       : is_file           ? profile_dir.parent_path()
                                           : profile_dir;
  const auto path = is_file ? profile_dir : protocol::ConnectionFilePath(profile);
  auto info = protocol::ReadConnectionFile(path);
  if (!info.ok()) {
    if (info.status().code() == Status::Code::kNotFound) {
      return Status::NotFound("no cluster is running with profile " + profile.string() +
                              ": start one with: taskcluster start --profile-dir " +
                              profile.string());
    }
    return info.status();
  }
  ZTASK_RETURN_IF_ERROR(protocol::CheckAuthenticated(*info, /*allow_insecure=*/true, path));
  if (info->hub.query.empty() || info->scheduler.client.empty()) {
    return Status::Unavailable("the cluster in " + profile.string() +
                               " has not finished starting (no hub or scheduler endpoint yet)");
  }
  try {
    return std::unique_ptr<Client>(new Client(std::make_unique<Impl>(*info, profile.string())));
  } catch (const zmq::error_t& e) {
    return Status::Unavailable(std::string("cannot connect: ") + e.what());
  }
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;
Result<TaskId> Client::Submit(const TaskOptions& options) {
  auto ids = impl_->SubmitMany({options}, nullptr);
  if (!ids.ok()) return ids.status();
  return ids->front();
}
Result<std::vector<TaskId>> Client::SubmitMany(const std::vector<TaskOptions>& tasks) {
  return impl_->SubmitMany(tasks, nullptr);
}
Result<std::vector<TaskId>> Client::SubmitMany(const std::vector<TaskOptions>& tasks,
                                               const std::vector<TaskId>& ids) {
  if (ids.size() != tasks.size()) {
    return Status::InvalidArgument("SubmitMany needs one id for each task");
  }
  return impl_->SubmitMany(tasks, &ids);
}
bool Client::Ready(const TaskId& id) { return impl_->Ready(id); }
std::optional<ErrorType> Client::ReplyOf(const TaskId& id) { return impl_->ReplyOf(id); }
void Client::set_max_in_flight(size_t n) { impl_->set_max_in_flight(n); }
void Client::set_keep_answered(size_t n) { impl_->set_keep_answered(n); }
Status Client::WaitReplies(const std::vector<TaskId>& ids, double timeout_s) {
  return impl_->WaitReplies(ids, timeout_s);
}
Status Client::Wait(const std::vector<TaskId>& ids, double timeout_s) {
  return impl_->Wait(ids, timeout_s);
}
Result<std::vector<TaskInfo>> Client::Fetch(const std::vector<TaskId>& ids) {
  if (ids.empty()) return std::vector<TaskInfo>{};
  impl_->Notice();
  return impl_->Fetch(ids, false, nullptr);
}
Result<std::vector<TaskInfo>> Client::FetchWhen(const std::vector<TaskId>& ids, bool finished,
                                                double timeout_s) {
  if (ids.empty()) return std::vector<TaskInfo>{};
  impl_->Notice();
  return impl_->FetchWhen(ids, finished, timeout_s);
}
Result<std::vector<TaskInfo>> Client::List(const std::string& job, TaskFilter filter) {
  impl_->Notice();
  return impl_->List(job, filter);
}
Result<std::string> Client::NewJob() { return impl_->NewJob(); }
Result<std::vector<JobInfo>> Client::Jobs(const std::string& name) { return impl_->Jobs(name); }
Result<std::vector<TaskInfo>> Client::FetchAll() {
  impl_->Notice();
  return impl_->Fetch({}, true, nullptr);
}
Result<AbortResult> Client::Abort(const std::vector<TaskId>& ids) { return impl_->Abort(ids); }
Result<QueueStatus> Client::Queue() { return impl_->Queue(); }
Result<ClusterStats> Client::Stats(std::optional<int64_t> feed_after, int32_t limit, bool sample) {
  return impl_->Stats(feed_after, limit, sample);
}
Result<std::vector<EngineStatus>> Client::Engines() { return impl_->Engines(); }
Status Client::Shutdown() { return impl_->Shutdown(); }
Status Client::ReportEngineState(const std::string& name, EngineState state,
                                 int32_t restarts, const std::string& why) {
  return impl_->ReportEngineState(name, state, restarts, why);
}
Result<int64_t> Client::Purge(const std::vector<TaskId>& ids, bool all) {
  return impl_->Purge(ids, all);
}
Status Client::Watch(const std::function<bool(const Value&)>& on_event) {
  return impl_->Watch(on_event);
}

Status Client::WaitForEngines(int n, double timeout_s) {
  return impl_->WaitForEngines(n, timeout_s);
}

}  // namespace ztask
