// HubServer: the taskhub process's loop. One thread owns every socket:
//
//   registration ROUTER <- registration_request, heartbeat, unregistration (engines)
//   query ROUTER        <- result/queue/engines/purge/shutdown requests (clients)
//   monitor ROUTER      <- task_submitted, task_assigned, task_outcome (scheduler)
//   notifier PUB        -> engine_registered / engine_unregistered (scheduler)
//   events PUB          -> event (monitors)
//
// Thread safety: Create and Run on one thread; RequestStop from anywhere,
// including a signal handler.
#ifndef ZTASK_HUB_SERVER_H_
#define ZTASK_HUB_SERVER_H_

#include <filesystem>
#include <memory>
#include <string>

#include "base/signals.h"
#include "ztask/status.h"

namespace zmq {
class context_t;
}

namespace ztask::hub {

struct HubOptions {
  // Where the connection file is. Default: ~/.ztask/profile_default.
  std::filesystem::path profile_dir;
  // Task records: a SQLite file, or ":memory:". Default: <profile>/tasks.db.
  std::string db;
  // Address every socket binds to, on free ports. Default: 127.0.0.1.
  std::string ip = "127.0.0.1";
  // On loopback, bind TCP ports instead of Unix sockets in the profile
  // (for peers that dial through a tunnel or a proxy). The notifier and
  // the event stream stay Unix sockets there whatever this says.
  bool tcp = false;
  // Engines heartbeat this often, and are lost after `heartbeat_misses`
  // periods of silence. Defaults: 1000 ms, 3 (a dead engine is found
  // within 3-4 s).
  int heartbeat_ms = 1000;
  // "process": what the hub acknowledged survives a crash of any process;
  // "power": it survives a power loss too (every commit synced to disk).
  std::string durability = "process";
  int heartbeat_misses = 3;
  // A message dated further than this from our clock is refused as a
  // possible replay (replay_guard.h); 0 turns the check off. Default: 300 s.
  double replay_window_s = 300;
  // Finished records kept in memory; older ones are read from the database
  // file when asked for (store.h).
  size_t keep_finished = 100000;
  // Retention of finished records in the database (StoreOptions): at most
  // this many (0: every one), none ended more than this many seconds ago
  // (0: forever), never one a waiting task depends on. Defaults: off.
  size_t max_finished_records = 0;
  double drop_finished_after_s = 0;
  // Engines registered at once; more are refused with a reason.
  size_t max_engines = 100000;
  // A connection file made here has no key (and needs this to be read back).
  bool insecure = false;
  // A connection file made here turns CurveZMQ on (security.h); it is on
  // also when `ip` is beyond loopback, unless `no_encryption`.
  bool curve = false;
  bool no_encryption = false;
  // Also bind the monitor and the notifier here: inproc endpoints, for a
  // scheduler in the same process (taskcontroller). Empty: none.
  std::string in_process_monitor, in_process_notifier;
};

class HubServer final : public Stoppable {
 public:
  // Opens the store, binds, writes the hub's endpoints into the connection
  // file (creating it, with a fresh key, when there is none).
  static Result<std::unique_ptr<HubServer>> Create(const HubOptions& options);
  ~HubServer();
  void Run();
  void RequestStop() override;
  // Where a scheduler in the same process makes its sockets to reach the
  // in-process endpoints. Lives as long as the server.
  zmq::context_t& context();

 private:
  class Impl;
  explicit HubServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ztask::hub

#endif  // ZTASK_HUB_SERVER_H_
