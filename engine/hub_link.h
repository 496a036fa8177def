// The engine's link to the hub, on the loop thread: the hub socket,
// registration (again when the hub lost this engine), heartbeats, and what
// their answers say to the fence (engine/fence.h: whether tasks may start,
// whether what is held must be dropped), and unregistration at the end.
//
// Must not: touch the scheduler socket or run tasks; a registration made
// again is told to the scheduler link through the caller (`registered_again`),
// never by sending on its socket. Thread safety: owned by the loop thread;
// made and Register()ed on the thread that starts the engine, before the
// loop runs.
#ifndef ZTASK_ENGINE_HUB_LINK_H_
#define ZTASK_ENGINE_HUB_LINK_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <zmq.hpp>

#include "engine/engine_core.h"
#include "engine/task_runner.h"
#include "ztask/status.h"

namespace ztask::engine {

class HubLink {
 public:
  // `setup` names the engine (options, uuid, rank) and the hub; `core` gets
  // the engine id and keeps the fence. REQUIRES: all outlive the link.
  HubLink(const RunnerSetup& setup, EngineCore& core, const std::atomic<bool>& stop);

  // Connects and registers: ok once the hub accepted this engine; else why
  // not (no answer within the registration timeout, or a refusal).
  Status Connect();
  // Sends a heartbeat.
  void Beat();
  // When the next heartbeat is due (monotonic): one period, as the hub asks
  // now, after the latest one; at once before the first. A registration
  // made again may shorten the period (a restarted hub starts at its base
  // one while this engine beat at the one its predecessor stretched), and
  // the next beat then comes that much sooner: a beat kept a stretched
  // period away would come after the new hub's wait, which removes the
  // engine just registered.
  int64_t NextBeatUs() const {
    return last_beat_us_ ? *last_beat_us_ + int64_t{heartbeat_ms_} * 1000 : 0;
  }
  // Reads what the hub sent; calls `registered_again` after this engine
  // registered again because the hub no longer knew it.
  void OnReadable(const std::function<void()>& registered_again);
  // Tells the hub this engine leaves.
  void Unregister();

  zmq::socket_t& socket() { return hub_; }

 private:
  Status Register();
  void OnHeartbeatAnswer(const std::vector<std::string_view>& views);
  void OnRefusal(int64_t parent_date_us, const std::function<void()>& registered_again);

  const RunnerSetup& setup_;
  EngineCore& core_;
  const std::atomic<bool>& stop_;
  zmq::socket_t hub_;
  int heartbeat_ms_ = 1000;  // as the hub asked at registration or since
  int heartbeat_misses_ = 3;
  std::optional<int64_t> last_beat_us_;  // when the latest heartbeat left
};

}  // namespace ztask::engine

#endif  // ZTASK_ENGINE_HUB_LINK_H_
