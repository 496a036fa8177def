// DashServer: taskdash's process. One thread asks the hub (stats four times
// a second, engines and queues every second) and applies the answers to
// the model; civetweb's threads serve the page, /api/..., /events (server-
// sent events: a snapshot, then deltas at most every `interval_ms`) and
// /metrics from the model, under a mutex. Task details and graphs are
// asked of the hub on the request's thread, through a client of their own.
// Nothing here is on the scheduler's path: taskdash is one more reader of
// the hub, whose answers cost what they hold.
//
// Thread safety: Start, then Stop from any thread.
#ifndef ZTASK_DASHBOARD_SERVER_H_
#define ZTASK_DASHBOARD_SERVER_H_

#include <filesystem>
#include <memory>
#include <string>

#include "ztask/status.h"

namespace ztask::dashboard {

struct DashOptions {
  std::filesystem::path profile_dir;
  std::string ip = "127.0.0.1";
  int port = 0;  // 0: any free port
  // Required of every request (in the URL's `token`, a cookie set from
  // it, or an Authorization header), on every address, loopback included:
  // another account of the same host can reach a loopback port. Made at
  // random when none is given.
  std::string token;
  // A file whose first line is the token (a supervisor's, so that a
  // restarted taskdash keeps its URL).
  std::filesystem::path token_file;
  // /metrics answers without the token (for a Prometheus that cannot send
  // one). Default: false.
  bool metrics_without_token = false;
  int interval_ms = 250;  // between polls of the hub, and between deltas
  int max_streams = 16;   // browsers following /events at once
};

class DashServer {
 public:
  // Connects to the cluster and starts serving. Errors: the cluster is not
  // there, the port is taken.
  static Result<std::unique_ptr<DashServer>> Start(DashOptions options);
  ~DashServer();
  // The page's URL, with its token.
  std::string url() const;
  // Blocks until Stop() (or a signal handled by the caller calls it).
  void Wait();
  void Stop();

  class Impl;

 private:
  explicit DashServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ztask::dashboard

#endif  // ZTASK_DASHBOARD_SERVER_H_
