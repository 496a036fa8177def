// The hub's decisions (hub_core.h): engines coming, beating and going, the
// monitor's messages applied to the records, the events they make. Must
// not: touch a socket, encode a message, log or write the store's file.
#include "hub/hub_core.h"

#include <algorithm>

#include "base/clock.h"

namespace ztask::hub {

using protocol::EventKind;
using protocol::MsgType;


protocol::Event* HubCore::NewEvent(EventKind kind, HubActions* out) {
  if (!listening_) return nullptr;
  protocol::Event& event = out->events.emplace_back();
  event.kind = kind;
  event.at_us = clock_->WallMicros();
  event.seq = ++events_made_;
  return &event;
}

void HubCore::Register(const protocol::RegistrationRequest& request, HubActions* out) {
  if (registry_.size() >= options_.max_engines && !registry_.UuidOfName(request.name)) {
    ++refused_registrations_;
    if (refused_registrations_ == 1 || refused_registrations_ % 1000 == 0) {
      Log(LogLine::Level::kWarning,
          "refused " + std::to_string(refused_registrations_) + " registrations: " +
              std::to_string(options_.max_engines) +
              " engines is the limit (taskhub --max-engines)",
          out);
    }
    out->registration_reply = protocol::RegistrationReply{
        false, -1,
        "the hub has " + std::to_string(registry_.size()) +
            " engines, its limit (taskhub --max-engines)",
        0, std::nullopt};
    return;
  }
  auto registered =
      registry_.Register(request, clock_->MonotonicMicros(), clock_->WallMicros());
  if (registered.replaced) EngineGone(*registered.replaced, "restarted", out);
  // The period, in ms, at which the engines send kMostHeartbeatsPerSecond.
  const int64_t engines = static_cast<int64_t>(registry_.alive().size());
  const int64_t stretched =
      (engines * 1000 + kMostHeartbeatsPerSecond - 1) / kMostHeartbeatsPerSecond;
  heartbeat_ms_ = static_cast<int>(std::max<int64_t>(heartbeat_ms_, stretched));
  out->registration_reply = protocol::RegistrationReply{true, registered.id, "", heartbeat_ms_,
                                                        options_.heartbeat_misses};
  const protocol::EngineInfo& info = registry_.alive().at(registered.id).info;
  out->notices.push_back({MsgType::kEngineRegistered, info, {}});
  Log(LogLine::Level::kInfo,
      "engine " + std::to_string(info.id) + " registered: " + info.name + " on " + info.host +
          " (pid " + std::to_string(info.pid) + ")",
      out);
  if (protocol::Event* event = NewEvent(EventKind::kEngineRegistered, out)) {
    event->engine_id = info.id;
    event->text = info.name;
  }
}

void HubCore::Heartbeat(const protocol::EngineRef& ref, HubActions* out) {
  if (registry_.Touch(ref.uuid, clock_->MonotonicMicros())) {
    // The answer tells the period now: it stretched since the engine
    // registered when many registered after it.
    out->heartbeat = protocol::HeartbeatBody{ref.engine_id, ref.uuid, heartbeat_ms_};
    return;
  }
  // Not (or no longer) registered: tell it to register again.
  out->registration_reply =
      protocol::RegistrationReply{false, -1, "not registered", 0, std::nullopt};
}

void HubCore::Unregister(const protocol::EngineRef& ref, HubActions* out) {
  if (auto gone = registry_.Unregister(ref.uuid)) {
    EngineGone({gone->info.id, gone->info.uuid}, "unregistered", out);
  }
}

void HubCore::EngineReported(const protocol::EngineStateReport& report, HubActions* out) {
  registry_.SetSupervised(report);
  Log(LogLine::Level::kInfo,
      "engine " + report.name + " is " + std::string(EngineStateName(report.state)) + ": " +
          report.text,
      out);
  // Draining: the scheduler stops giving it tasks, and retires it when it
  // has none left.
  if (report.state == EngineState::kDraining) {
    if (auto uuid = registry_.UuidOfName(report.name)) {
      out->notices.push_back(
          {MsgType::kEngineDraining, {}, protocol::EngineRef{registry_.IdOfName(report.name), *uuid}});
    }
  }
  // Its supervisor saw the process end: no need to wait for missed
  // heartbeats before its tasks go elsewhere.
  if (report.state == EngineState::kRestarting || report.state == EngineState::kFailed) {
    if (auto uuid = registry_.UuidOfName(report.name)) {
      if (auto gone = registry_.Unregister(*uuid)) {
        EngineGone({gone->info.id, gone->info.uuid}, "its supervisor saw it exit", out);
      }
    }
  }
  if (protocol::Event* event = NewEvent(EventKind::kEngineState, out)) {
    event->status = protocol::EventStatusOf(report.state);
    event->text = report.name + ": " + report.text;
  }
}

void HubCore::EngineGone(const protocol::EngineRef& ref, const std::string& why,
                         HubActions* out) {
  Log(LogLine::Level::kInfo, "engine " + std::to_string(ref.engine_id) + " is gone: " + why, out);
  activity_.EngineGone(ref.engine_id);
  out->notices.push_back({MsgType::kEngineUnregistered, {}, ref});
  if (protocol::Event* event = NewEvent(EventKind::kEngineUnregistered, out)) {
    event->engine_id = ref.engine_id;
    event->text = why;
  }
}

void HubCore::Tick(HubActions* out) {
  const int64_t expiry = int64_t{heartbeat_ms_} * options_.heartbeat_misses * 1000;
  // A hub that could not look for a while (stopped, its host stalled) could
  // not hear the engines either: their heartbeats wait in its socket, or
  // in the kernel behind it, not yet read when it goes on. What it missed
  // beyond a quarter of the wait does not count against them, or every
  // engine would be lost at once, with its tasks, for the hub's own pause.
  const int64_t now = clock_->MonotonicMicros();
  if (last_tick_us_ > 0 && now - last_tick_us_ > expiry / 4) {
    registry_.Postpone(now - last_tick_us_ - expiry / 4);
    Log(LogLine::Level::kWarning,
        "the hub did not run for " + std::to_string((now - last_tick_us_) / 1000) +
            " ms; engines are given that long again to be heard from",
        out);
  }
  last_tick_us_ = now;
  // Four looks a period: an engine is lost within a quarter period of its
  // last miss, and 10,000 engines are not walked twenty times a second.
  if (now >= next_expiry_look_us_) {
    for (const auto& gone : registry_.Expire(now, expiry)) {
      EngineGone({gone.info.id, gone.info.uuid}, "missed its heartbeats", out);
    }
    next_expiry_look_us_ = now + int64_t{heartbeat_ms_} * 1000 / 4;
  }
  if (clock_->MonotonicMicros() >= next_announce_us_) {
    Announce(out);
    next_announce_us_ = clock_->MonotonicMicros() + int64_t{heartbeat_ms_} * 1000;
  }
}

// Notices are idempotent: repeating them lets a scheduler that started (or
// restarted) after an engine registered learn of it.
void HubCore::Announce(HubActions* out) {
  for (const auto& [id, record] : registry_.alive()) {
    out->notices.push_back({MsgType::kEngineRegistered, record.info, {}});
  }
  // So are the draining ones: a scheduler that missed the notice (it was
  // restarting, or had not linked the engine yet) still retires it.
  for (const protocol::EngineInfo& e : registry_.Listing()) {
    if (e.state == EngineState::kDraining && !e.uuid.empty()) {
      out->notices.push_back({MsgType::kEngineDraining, {}, protocol::EngineRef{e.id, e.uuid}});
    }
  }
}

void HubCore::Flushed(const Status& status, HubActions* out) {
  if (!status.ok() && !flush_failing_) {
    Log(LogLine::Level::kError,
        status.message() +
            " (records stay in memory, and are not durable until a write succeeds; retrying)",
        out);
    if (protocol::Event* event = NewEvent(EventKind::kStoreError, out)) {
      event->text = status.message();
    }
  }
  if (status.ok() && flush_failing_) {
    Log(LogLine::Level::kInfo, "the task database is written again", out);
  }
  flush_failing_ = !status.ok();
}

void HubCore::Submitted(const protocol::Header& request, const Result<protocol::RoutingMeta>& meta,
                        const Result<protocol::TaskSpec>& spec, KeptRequest request_frames,
                        int64_t hold_since_us, HubActions* out) {
  const TaskId& id = request.id;
  if (!meta.ok() || !spec.ok()) {
    Log(LogLine::Level::kWarning,
        "task " + id.ToHex() + ": its " + (meta.ok() ? "body" : "metadata") +
            " cannot be read (" + (meta.ok() ? spec.status() : meta.status()).message() +
            "): recorded without it",
        out);
  }
  const protocol::TaskSpec no_spec{};
  const protocol::TaskSpec& taken = spec.ok() ? *spec : no_spec;
  if (!store_->Submitted(request, meta.ok() ? *meta : protocol::RoutingMeta{}, taken,
                         std::move(request_frames), hold_since_us)) {
    return;
  }
  out->noted.emplace_back(id, false);
  activity_.Submitted(taken.label);
  if (protocol::Event* event = NewEvent(EventKind::kTaskSubmitted, out)) {
    event->task_id = id;
    event->text = taken.label;
  }
}

void HubCore::Assigned(const TaskId& id, const protocol::Assignment& assignment,
                       HubActions* out) {
  if (!store_->Assigned(id, assignment)) return;
  out->noted.emplace_back(id, false);
  activity_.Assigned(assignment.engine_id, id);
  if (protocol::Event* event = NewEvent(EventKind::kTaskAssigned, out)) {
    event->task_id = id;
    event->engine_id = assignment.engine_id;
    event->attempt = assignment.attempt;
  }
}

void HubCore::Outcome(const TaskId& id, protocol::OutcomeMeta meta,
                      Result<protocol::TaskResult> result, HubActions* out) {
  if (!result.ok()) {
    const std::string why = result.status().message();
    Log(LogLine::Level::kWarning,
        "task " + id.ToHex() + ": its result cannot be read (" + why + "): recorded as BadTask",
        out);
    meta.ok = false;
    meta.error_type = ErrorType::kBadTask;
    result = protocol::TaskResult{};
    result->error_message = "the hub cannot read its result: " + why;
  }
  if (!store_->Outcome(id, meta, *result, clock_->WallMicros())) return;
  out->noted.emplace_back(id, meta.final);
  if (!meta.final) {
    activity_.Requeued(meta.engine_id, id, !meta.ok);
  } else {
    protocol::TaskRecord scratch;
    if (const auto* r = store_->Find(id, &scratch)) activity_.Finished(*r);
  }
  // Not final and not failed: sent ahead and not run, waiting again.
  const EventKind kind = meta.final ? EventKind::kTaskFinished
                         : meta.ok  ? EventKind::kTaskReturned
                                    : EventKind::kTaskRetried;
  if (protocol::Event* event = NewEvent(kind, out)) {
    event->task_id = id;
    event->engine_id = meta.engine_id;
    event->attempt = meta.attempt;
    event->status = protocol::EventStatusOf(meta.ok);
    event->error_type = meta.error_type;
    event->text = result->error_message;
  }
}

}  // namespace ztask::hub
