#include "tests/support/standins.h"

#include "base/clock.h"
#include "base/reactor.h"
#include "protocol/wire.h"

namespace ztask::testing {
namespace {

using protocol::Frames;
using protocol::MsgType;

protocol::Header NewHeader(MsgType type, const std::string& session) {
  return {TaskId::Random(), type, session, base::WallMicros()};
}

bool ReceiveWithin(zmq::socket_t& socket, Frames& frames, milliseconds wait) {
  if (protocol::TryReceive(socket, frames)) return true;
  base::WaitReady(socket, ZMQ_POLLIN, wait);
  return protocol::TryReceive(socket, frames);
}

void Send(zmq::socket_t& socket, std::vector<std::string> frames) {
  Status s = protocol::SendEncoded(socket, {}, std::move(frames));
  if (!s.ok()) throw std::runtime_error("stand-in send failed: " + s.ToString());
}

}  // namespace

zmq::context_t& SharedContext() {
  static zmq::context_t context(1);
  return context;
}

StandInHub::StandInHub(const std::filesystem::path& profile_dir)
    : path_(protocol::ConnectionFilePath(profile_dir)),
      signer_(),
      notifier_(SharedContext(), zmq::socket_type::pub),
      monitor_socket_(SharedContext(), zmq::socket_type::router) {
  notifier_.set(zmq::sockopt::linger, 0);
  monitor_socket_.set(zmq::sockopt::linger, 0);
  protocol::ConnectionInfo info;
  info.key = protocol::GenerateKey();
  signer_ = protocol::Signer(info.key);
  info.hub.notifier = *protocol::Bind(notifier_, "tcp://127.0.0.1:*");
  info.hub.monitor = *protocol::Bind(monitor_socket_, "tcp://127.0.0.1:*");
  Status written = protocol::WriteConnectionFile(path_, info);
  if (!written.ok()) throw std::runtime_error(written.ToString());
}

protocol::SchedulerEndpoints StandInHub::SchedulerEndpoints() const {
  auto info = protocol::ReadConnectionFile(path_);
  return info.ok() ? info->scheduler : protocol::SchedulerEndpoints{};
}

void StandInHub::AnnounceEngine(int32_t id, const std::string& uuid) {
  protocol::EngineInfo info{id, uuid, "standin-" + std::to_string(id), "127.0.0.1", 0,
                            EngineState::kRunning, base::WallMicros(), std::nullopt, std::nullopt,
                            std::nullopt, std::nullopt};
  Send(notifier_, protocol::EncodeMessage(signer_, NewHeader(MsgType::kEngineRegistered, "hub"),
                                          std::nullopt, protocol::Empty{}, info));
}

void StandInHub::RetireEngine(int32_t id, const std::string& uuid) {
  Send(notifier_,
       protocol::EncodeMessage(signer_, NewHeader(MsgType::kEngineUnregistered, "hub"),
                               std::nullopt, protocol::Empty{}, protocol::EngineRef{id, uuid}));
}

void StandInHub::DrainEngine(int32_t id, const std::string& uuid) {
  Send(notifier_,
       protocol::EncodeMessage(signer_, NewHeader(MsgType::kEngineDraining, "hub"), std::nullopt,
                               protocol::Empty{}, protocol::EngineRef{id, uuid}));
}

size_t StandInHub::PumpMonitor(milliseconds wait) {
  size_t count = 0;
  Frames frames;
  while (ReceiveWithin(monitor_socket_, frames, count == 0 ? wait : milliseconds(0))) {
    auto views = protocol::Views(frames, 1);  // skip the scheduler's routing id
    if (!protocol::CheckFrames(signer_, protocol::Limits{}, views).ok()) {
      ++bad_monitor_;
      continue;
    }
    auto header = protocol::DecodeHeader(views[protocol::kFrameHeader]);
    if (header.ok() && header->type == MsgType::kResultRequest) {
      // A lookup of dependencies the scheduler does not know: this hub
      // records nothing, so none is known.
      auto asked = protocol::DecodeBody<protocol::TaskIdList>(views[protocol::kFrameContent]);
      if (!asked.ok()) {
        ++bad_monitor_;
        continue;
      }
      ++lookups_;
      const std::string_view peer[] = {protocol::View(frames[0])};
      (void)protocol::SendEncoded(
          monitor_socket_, peer,
          protocol::EncodeMessage(signer_, NewHeader(MsgType::kResultReply, "hub"), *header,
                                  protocol::Empty{},
                                  protocol::ResultReply{{}, asked->task_ids, false}));
      continue;
    }
    if (header.ok() && header->type == MsgType::kSchedulerStats) {
      auto stats = protocol::DecodeBody<protocol::SchedulerStats>(views[protocol::kFrameContent]);
      if (!stats.ok()) ++bad_monitor_;
      continue;  // its counts, once a second: nothing to record
    }
    if (!header.ok() || header->type != MsgType::kMonitorBatch) {
      ++bad_monitor_;  // the scheduler sends its monitor messages in batches
      continue;
    }
    auto messages = protocol::UnpackBatch(views);
    auto meta = protocol::DecodeBody<protocol::BatchMeta>(views[protocol::kFrameMeta]);
    if (!messages.ok() || !meta.ok() || !meta->seq) {
      ++bad_monitor_;
      continue;
    }
    // Acknowledged at once, as the hub does once the batch is recorded.
    const std::string_view peer[] = {protocol::View(frames[0])};
    const protocol::Header ack{TaskId::Random(), MsgType::kMonitorAck, "hub",
                               base::WallMicros()};
    (void)protocol::SendEncoded(monitor_socket_, peer,
                                protocol::EncodeMessage(signer_, ack, std::nullopt,
                                                        protocol::Empty{},
                                                        protocol::MonitorAck{{*meta->seq}}));
    for (const auto& message : *messages) {
      if (AddMonitorMessage(message)) {
        ++count;
      } else {
        ++bad_monitor_;
      }
    }
  }
  return count;
}

bool StandInHub::AddMonitorMessage(std::span<const std::string_view> views) {
  auto header = protocol::DecodeHeader(views[protocol::kFrameHeader]);
  auto parent = protocol::DecodeParent(views[protocol::kFrameParent]);
  if (!header.ok() || !parent.ok() || !*parent) return false;
  MonitorMessage m{header->type, (*parent)->id, std::nullopt, 0, false, false, ErrorType::kNone};
  if (header->type == MsgType::kTaskAssigned) {
    auto a = protocol::DecodeBody<protocol::Assignment>(views[protocol::kFrameMeta]);
    if (!a.ok()) return false;
    m.engine_id = a->engine_id;
    m.attempt = a->attempt;
  } else if (header->type == MsgType::kTaskOutcome) {
    auto o = protocol::DecodeBody<protocol::OutcomeMeta>(views[protocol::kFrameMeta]);
    if (!o.ok()) return false;
    m.engine_id = o->engine_id;
    m.attempt = o->attempt;
    m.final = o->final;
    m.ok = o->ok;
    m.error = o->error_type;
  } else if (header->type == MsgType::kTaskSubmitted) {
    if (!protocol::DecodeBody<protocol::TaskSpec>(views[protocol::kFrameContent]).ok()) {
      return false;
    }
  } else {
    return false;
  }
  monitor_.push_back(m);
  return true;
}

StandInEngine::StandInEngine(const std::string& endpoint, const protocol::Signer& signer,
                             int32_t id)
    : signer_(signer),
      id_(id),
      uuid_(TaskId::Random().ToHex()),
      socket_(SharedContext(), zmq::socket_type::dealer) {
  socket_.set(zmq::sockopt::linger, 0);
  socket_.connect(endpoint);
}

void StandInEngine::SendReady() {
  Send(socket_, protocol::EncodeMessage(signer_, NewHeader(MsgType::kEngineReady, uuid_),
                                        std::nullopt, protocol::Empty{},
                                        protocol::EngineReady{id_, uuid_, std::nullopt, std::nullopt, std::nullopt}));
}

std::optional<ReceivedTask> StandInEngine::Receive(milliseconds wait) {
  if (received_.empty()) {
    Frames frames;
    if (!ReceiveWithin(socket_, frames, wait)) return std::nullopt;
    ++messages_;
    auto views = protocol::Views(frames);
    Status checked = protocol::CheckFrames(signer_, protocol::Limits{}, views);
    if (!checked.ok()) throw std::runtime_error("engine got a bad message: " + checked.ToString());
    protocol::TaskBatch batch;
    auto tasks = protocol::UnpackBatch(views, &batch);
    if (!tasks.ok() || !batch.dispatch) {
      throw std::runtime_error("engine got no task_batch with dispatch: " +
                               tasks.status().ToString());
    }
    for (size_t i = 0; i < tasks->size(); ++i) {
      const auto& task = (*tasks)[i];
      auto header = protocol::DecodeHeader(task[protocol::kFrameHeader]);
      auto meta = protocol::DecodeBody<protocol::RoutingMeta>(task[protocol::kFrameMeta]);
      auto spec = protocol::DecodeBody<protocol::TaskSpec>(task[protocol::kFrameContent]);
      if (!header.ok() || header->type != MsgType::kTaskRequest || !meta.ok() || !spec.ok()) {
        throw std::runtime_error("engine got a bad task in a batch");
      }
      received_.push_back(ReceivedTask{*header, std::string(task[protocol::kFrameHeader]), *meta,
                                       *spec, (*batch.dispatch)[i]});
    }
  }
  ReceivedTask task = std::move(received_.front());
  received_.pop_front();
  return task;
}

void StandInEngine::Reply(const ReceivedTask& task, bool ok, ErrorType error, std::string message,
                          protocol::RawValue result) {
  protocol::ReplyMeta meta{ok, ok ? ErrorType::kNone : error, id_, task.dispatch.attempt};
  meta.run_us = run_us_;
  protocol::TaskResult content;
  content.error_message = std::move(message);
  content.result = std::move(result);
  content.started_us = content.completed_us = base::WallMicros();
  auto frames = protocol::EncodeMessage(signer_, NewHeader(MsgType::kTaskReply, uuid_),
                                        task.header, meta, content);
  Send(socket_, std::move(frames));
}

void StandInEngine::ReplyAll(const std::vector<ReceivedTask>& tasks) {
  std::vector<std::vector<std::string>> replies;
  for (const ReceivedTask& task : tasks) {
    protocol::ReplyMeta meta{true, ErrorType::kNone, id_, task.dispatch.attempt};
    meta.run_us = run_us_;
    protocol::TaskResult content;
    content.started_us = content.completed_us = base::WallMicros();
    replies.push_back(protocol::EncodeInner(NewHeader(MsgType::kTaskReply, uuid_), task.header,
                                            meta, content));
  }
  Send(socket_,
       protocol::EncodeBatch(signer_, NewHeader(MsgType::kTaskBatch, uuid_), replies));
}

RawClient::RawClient(const std::string& endpoint, const protocol::Signer& signer)
    : signer_(signer),
      session_(TaskId::Random().ToHex()),
      socket_(SharedContext(), zmq::socket_type::dealer) {
  socket_.set(zmq::sockopt::linger, 0);
  socket_.connect(endpoint);
}

TaskId RawClient::Submit(const protocol::RoutingMeta& meta, const protocol::TaskSpec& spec,
                         TaskId id) {
  protocol::Header header{id, MsgType::kTaskRequest, session_, base::WallMicros()};
  Send(socket_, protocol::EncodeMessage(signer_, header, std::nullopt, meta, spec));
  return id;
}

void RawClient::SubmitBatch(const std::vector<std::pair<TaskId, protocol::TaskSpec>>& tasks,
                            std::optional<size_t> foreign) {
  std::vector<std::vector<std::string>> requests;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const std::string session = foreign == i ? "someone-else" : session_;
    protocol::Header header{tasks[i].first, MsgType::kTaskRequest, session, base::WallMicros()};
    requests.push_back(
        protocol::EncodeInner(header, std::nullopt, protocol::RoutingMeta{}, tasks[i].second));
  }
  Send(socket_,
       protocol::EncodeBatch(signer_, NewHeader(MsgType::kTaskBatch, session_), requests));
}

bool RawClient::ReceiveOne(milliseconds wait, std::optional<protocol::AbortReply>* abort) {
  Frames frames;
  if (!ReceiveWithin(socket_, frames, wait)) return false;
  ++messages_;
  auto views = protocol::Views(frames);
  if (!protocol::CheckFrames(signer_, protocol::Limits{}, views).ok()) {
    throw std::runtime_error("client got a message that fails its signature");
  }
  auto header = protocol::DecodeHeader(views[protocol::kFrameHeader]);
  if (header.ok() && header->type == MsgType::kAbortReply) {
    auto reply = protocol::DecodeMessage<MsgType::kAbortReply>(signer_, {}, views);
    if (reply.ok()) *abort = reply->content;
    return true;
  }
  if (!header.ok() || header->type != MsgType::kTaskBatch) {
    throw std::runtime_error("client got neither an abort_reply nor a task_batch");
  }
  auto replies = protocol::UnpackBatch(views);
  if (!replies.ok()) throw std::runtime_error("client got a bad batch: " + replies.status().ToString());
  for (const auto& r : *replies) {
    auto parent = protocol::DecodeParent(r[protocol::kFrameParent]);
    auto meta = protocol::DecodeBody<protocol::ReplyMeta>(r[protocol::kFrameMeta]);
    auto content = protocol::DecodeBody<protocol::TaskResult>(r[protocol::kFrameContent]);
    if (!parent.ok() || !*parent || !meta.ok() || !content.ok()) {
      throw std::runtime_error("client got a bad reply in a batch");
    }
    replies_.push_back({(*parent)->id, *meta, *content});
  }
  return true;
}

std::optional<RawClient::Reply> RawClient::Receive(milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (replies_.empty()) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() < 0) return std::nullopt;
    std::optional<protocol::AbortReply> ignored;
    ReceiveOne(left, &ignored);
  }
  Reply r = std::move(replies_.front());
  replies_.pop_front();
  return r;
}

std::optional<protocol::AbortReply> RawClient::Abort(const std::vector<TaskId>& ids,
                                                     milliseconds wait) {
  Send(socket_, protocol::EncodeMessage(signer_, NewHeader(MsgType::kAbortRequest, session_),
                                        std::nullopt, protocol::Empty{},
                                        protocol::AbortRequest{ids}));
  const auto deadline = std::chrono::steady_clock::now() + wait;
  std::optional<protocol::AbortReply> reply;
  while (!reply) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() < 0) return std::nullopt;
    ReceiveOne(left, &reply);
  }
  return reply;
}

void RawClient::SendRaw(const std::vector<std::string>& frames) { Send(socket_, frames); }

}  // namespace ztask::testing
