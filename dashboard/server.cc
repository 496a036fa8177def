#include "dashboard/server.h"

#include <civetweb.h>
#include <sodium.h>
#include <unistd.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "dashboard/assets.h"
#include "dashboard/model.h"
#include "protocol/connection_file.h"
#include "protocol/security.h"
#include "ztask/client.h"
#include "base/clock.h"

namespace ztask::dashboard {
namespace {


// Graphs are drawn up to this many tasks.
constexpr size_t kMaxGraph = 3000;
// Finished tasks asked of the hub per poll, at most: past that (2,000 a
// second) the hub sends a sample, every failure first, so that what it
// encodes for an open dashboard does not grow with the task rate.
constexpr int32_t kFeedPerPoll = 500;

bool SameSecret(const std::string& a, const std::string& b) {
  return a.size() == b.size() && sodium_memcmp(a.data(), b.data(), a.size()) == 0;
}

// A query parameter, or "" (also when it is too long to be one of ours).
std::string Param(const mg_request_info* ri, const char* name) {
  if (!ri->query_string) return "";
  char buffer[512];
  const int n = mg_get_var(ri->query_string, std::strlen(ri->query_string), name, buffer,
                           sizeof buffer);
  return n < 0 ? "" : std::string(buffer, static_cast<size_t>(n));
}

std::optional<int64_t> IntParam(const mg_request_info* ri, const char* name) {
  const std::string text = Param(ri, name);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

void Send(mg_connection* c, int status, const char* type, std::string_view body,
          const std::string& headers = "") {
  const char* reason = status == 200   ? "OK"
                       : status == 400 ? "Bad Request"
                       : status == 403 ? "Forbidden"
                       : status == 404 ? "Not Found"
                       : status == 405 ? "Method Not Allowed"
                       : status == 503 ? "Service Unavailable"
                                       : "Error";
  mg_printf(c,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
            "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
            "X-Frame-Options: DENY\r\nReferrer-Policy: no-referrer\r\n"
            "Content-Security-Policy: default-src 'self'; img-src 'self' data:; "
            "frame-ancestors 'none'\r\n%s\r\n",
            status, reason, type, body.size(), headers.c_str());
  mg_write(c, body.data(), body.size());
}

void SendJson(mg_connection* c, const Value& v, int status = 200) {
  Send(c, status, "application/json", v.dump(-1, ' ', false, Value::error_handler_t::replace));
}

void SendError(mg_connection* c, int status, const std::string& message) {
  SendJson(c, Value{{"error", message}}, status);
}

}  // namespace

class DashServer::Impl {
 public:
  explicit Impl(DashOptions options) : options_(std::move(options)) {}

  ~Impl() { Stop(); }

  Status Start() {
    if (sodium_init() < 0) return Status::Internal("libsodium cannot start");
    if (!options_.token_file.empty()) {
      std::ifstream in(options_.token_file);
      std::getline(in, options_.token);
      if (options_.token.empty()) {
        return Status::InvalidArgument("no token in " + options_.token_file.string());
      }
    }
    if (options_.token.empty()) options_.token = protocol::GenerateToken();
    auto poll = Client::Connect(options_.profile_dir);
    if (!poll.ok()) return poll.status();
    poll_client_ = std::move(*poll);
    auto query = Client::Connect(options_.profile_dir);
    if (!query.ok()) return query.status();
    query_client_ = std::move(*query);
    // The first answer before serving: a page never shows a blank that
    // is not the cluster's.
    PollOnce(/*with_engines=*/true);

    mg_init_library(0);
    const std::string ports = options_.ip + ":" + std::to_string(options_.port);
    const std::string threads = std::to_string(options_.max_streams + 8);
    const char* config[] = {"listening_ports",   ports.c_str(),   "num_threads",
                            threads.c_str(),     "request_timeout_ms", "10000",
                            "enable_keep_alive", "yes",           nullptr};
    mg_callbacks callbacks{};
    callbacks.log_message = [](const mg_connection*, const char* message) {
      spdlog::warn("http: {}", message);
      return 1;
    };
    ctx_ = mg_start(&callbacks, this, config);
    if (!ctx_) {
      return Status::Unavailable("cannot listen on " + ports +
                                 " (is the port taken? choose another with --port)");
    }
    mg_set_request_handler(ctx_, "/", &Impl::Handle, this);
    mg_server_port bound[4];
    const int n = mg_get_server_ports(ctx_, 4, bound);
    port_ = n > 0 ? bound[0].port : options_.port;
    poller_ = std::thread([this] { PollLoop(); });
    return Status::Ok();
  }

  std::string url() const {
    // Bound to every address: the host's name is what others dial.
    std::string host = options_.ip;
    if (host == "0.0.0.0" || host == "*") {
      char name[256] = {};
      host = ::gethostname(name, sizeof name - 1) == 0 && name[0] ? name : "127.0.0.1";
    }
    std::string url = "http://" + host + ":" + std::to_string(port_) + "/";
    if (!options_.token.empty()) url += "?token=" + options_.token;
    return url;
  }

  void Wait() {
    std::unique_lock lock(mu_);
    changed_.wait(lock, [this] { return stop_.load(); });
  }

  void Stop() {
    {
      std::lock_guard lock(mu_);
      if (stopped_) return;
      stopped_ = true;
      stop_.store(true);
    }
    changed_.notify_all();
    if (poller_.joinable()) poller_.join();
    if (ctx_) mg_stop(ctx_);
    ctx_ = nullptr;
  }

 private:
  // ---- the hub ---------------------------------------------------------------

  void PollOnce(bool with_engines) {
    auto stats = poll_client_->Stats(hub_after_, kFeedPerPoll, /*sample=*/true);
    if (!stats.ok()) {
      std::lock_guard lock(mu_);
      model_.SetError(stats.status().message());
      return;
    }
    if (stats->feed < hub_after_) {  // a new hub: its feed starts again
      hub_after_ = 0;
      return PollOnce(with_engines);
    }
    hub_after_ = stats->feed;
    std::optional<std::vector<EngineStatus>> engines;
    std::optional<QueueStatus> queue;
    if (with_engines) {
      auto e = poll_client_->Engines();
      auto q = poll_client_->Queue();
      if (e.ok() && q.ok()) {
        engines = std::move(*e);
        queue = std::move(*q);
      }
    }
    {
      std::lock_guard lock(mu_);
      model_.ApplyStats(*stats, base::MonotonicSeconds());
      if (engines) model_.ApplyEngines(*engines, *queue);
    }
    changed_.notify_all();
  }

  void PollLoop() {
    auto next_engines = base::MonotonicNow() + std::chrono::seconds(1);
    while (!stop_.load()) {
      const auto next = base::MonotonicNow() + std::chrono::milliseconds(options_.interval_ms);
      {
        std::unique_lock lock(mu_);
        changed_.wait_until(lock, next, [this] { return stop_.load(); });
      }
      if (stop_.load()) return;
      const bool engines = base::MonotonicNow() >= next_engines;
      if (engines) next_engines = base::MonotonicNow() + std::chrono::seconds(1);
      PollOnce(engines);
    }
  }

  // ---- HTTP ------------------------------------------------------------------

  static int Handle(mg_connection* c, void* self) {
    static_cast<Impl*>(self)->Serve(c);
    return 1;
  }

  // Whether the request carries the token; one in the
  // URL sets a cookie, so that the page's own requests carry it.
  bool Authorized(mg_connection* c, const mg_request_info* ri, std::string* set_cookie) {
    if (SameSecret(Param(ri, "token"), options_.token)) {
      *set_cookie = "Set-Cookie: ztask_token=" + options_.token +
                    "; Path=/; HttpOnly; SameSite=Strict\r\n";
      return true;
    }
    if (const char* cookies = mg_get_header(c, "Cookie")) {
      char value[128];
      const int n = mg_get_cookie(cookies, "ztask_token", value, sizeof value);
      if (n > 0 && SameSecret(std::string(value, static_cast<size_t>(n)), options_.token)) {
        return true;
      }
    }
    if (const char* auth = mg_get_header(c, "Authorization")) {
      std::string_view a = auth;
      for (std::string_view scheme : {"token ", "Bearer "}) {
        if (a.starts_with(scheme) && SameSecret(std::string(a.substr(scheme.size())), options_.token)) {
          return true;
        }
      }
    }
    return false;
  }

  void Serve(mg_connection* c) {
    const mg_request_info* ri = mg_get_request_info(c);
    const std::string method = ri->request_method ? ri->request_method : "";
    const std::string path = ri->local_uri ? ri->local_uri : "";
    if (method != "GET" && method != "HEAD") return SendError(c, 405, "only GET is served");
    std::string cookie;
    const bool open_metrics = options_.metrics_without_token && path == "/metrics";
    if (!open_metrics && !Authorized(c, ri, &cookie)) {
      return Send(c, 403, "text/plain; charset=utf-8",
                  "403: this dashboard needs its token: open the URL taskdash printed "
                  "(with ?token=...)\n");
    }
    if (path == "/" || path == "/index.html") {
      return Send(c, 200, "text/html; charset=utf-8", kIndexHtml, cookie);
    }
    if (path == "/app.js") return Send(c, 200, "text/javascript; charset=utf-8", kAppJs);
    if (path == "/app.css") return Send(c, 200, "text/css; charset=utf-8", kAppCss);
    if (path == "/favicon.ico") return Send(c, 200, "image/svg+xml", kFavicon);
    if (path == "/metrics") {
      std::string text;
      {
        std::lock_guard lock(mu_);
        text = model_.Metrics();
      }
      return Send(c, 200, "text/plain; version=0.0.4; charset=utf-8", text);
    }
    if (path == "/events") return Events(c);
    if (path == "/api/overview") return SendJson(c, Locked([](const DashModel& m) { return m.Overview(); }));
    if (path == "/api/engines") return SendJson(c, Locked([](const DashModel& m) { return m.Engines(); }));
    if (path == "/api/labels") return SendJson(c, Locked([](const DashModel& m) { return m.Labels(); }));
    if (path == "/api/stream") {
      const int64_t after = IntParam(ri, "after").value_or(0);
      const auto limit = static_cast<size_t>(
          std::clamp<int64_t>(IntParam(ri, "limit").value_or(2000), 1, DashModel::kStreamSize));
      return SendJson(c, Locked([&](const DashModel& m) { return m.Stream(after, limit); }));
    }
    if (path == "/api/tasks") {
      std::optional<int32_t> engine;
      if (auto e = IntParam(ri, "engine")) engine = static_cast<int32_t>(*e);
      const std::string state = Param(ri, "state"), label = Param(ri, "label");
      std::string q = Param(ri, "q");
      std::transform(q.begin(), q.end(), q.begin(), [](unsigned char ch) { return std::tolower(ch); });
      const auto limit = static_cast<size_t>(
          std::clamp<int64_t>(IntParam(ri, "limit").value_or(500), 1, 5000));
      if (!state.empty() && state != "ok" && state != "failed" && state != "running") {
        return SendError(c, 400, "state is ok, failed or running, not '" + state + "'");
      }
      return SendJson(c, Locked([&](const DashModel& m) {
        return m.Tasks(state, label, engine, q, limit);
      }));
    }
    if (path == "/api/task") return TaskDetail(c, ri);
    if (path == "/api/graph") return Graph(c, ri);
    return SendError(c, 404, "no such page: " + path);
  }

  template <class F>
  Value Locked(F&& f) {
    std::lock_guard lock(mu_);
    return f(model_);
  }

  // Server-sent events: a snapshot, then a delta whenever the model
  // changed, no more often than interval_ms. A browser that stops reading
  // is let go when a write cannot finish (civetweb's request timeout).
  void Events(mg_connection* c) {
    if (streams_.fetch_add(1) >= options_.max_streams) {
      streams_.fetch_sub(1);
      return SendError(c, 503, "too many pages follow this dashboard; close one");
    }
    mg_printf(c,
              "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
              "X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n");
    DashModel::Cursor cursor;
    auto last = base::MonotonicNow() - std::chrono::hours(1);
    while (!stop_.load()) {
      std::optional<Value> delta;
      {
        std::unique_lock lock(mu_);
        const auto pace = last + std::chrono::milliseconds(options_.interval_ms);
        changed_.wait_until(lock, std::max(pace, base::MonotonicNow() + std::chrono::seconds(15)), [&] {
          return stop_.load() || (model_.version() != cursor.version && base::MonotonicNow() >= pace);
        });
        if (stop_.load()) break;
        if (base::MonotonicNow() < pace) continue;  // woken early: wait out the pace
        delta = model_.Delta(&cursor);
      }
      // A comment line when nothing changed: proxies and browsers keep the
      // connection, and a gone browser is noticed.
      const std::string text =
          delta ? "data: " + delta->dump(-1, ' ', false, Value::error_handler_t::replace) + "\n\n"
                : std::string(": idle\n\n");
      if (mg_write(c, text.data(), text.size()) <= 0) break;
      last = base::MonotonicNow();
    }
    streams_.fetch_sub(1);
  }

  // A task's record, with its dependencies: /api/task?id=HEX.
  void TaskDetail(mg_connection* c, const mg_request_info* ri) {
    auto id = TaskId::FromHex(Param(ri, "id"));
    if (!id.ok()) return SendError(c, 400, "id: " + id.status().message());
    std::lock_guard lock(query_mu_);
    auto records = query_client_->Fetch({*id});
    if (!records.ok()) {
      return SendError(c, records.status().code() == Status::Code::kNotFound ? 404 : 503,
                       records.status().message());
    }
    const TaskInfo& r = records->front();
    Value v = r.ToJson();
    v["stdout_truncated"] = r.stdout_truncated;
    v["stderr_truncated"] = r.stderr_truncated;
    v["targets"] = r.targets;
    v["timeout"] = r.timeout;
    v["time_limit"] = r.time_limit;
    v["retries"] = r.retries;
    v["priority"] = r.priority;
    for (const auto& [name, deps] : {std::pair{"after", &r.after}, {"follow", &r.follow}}) {
      Value ids = Value::array();
      for (const TaskId& d : deps->ids) ids.push_back(d.ToHex());
      v[name] = {{"ids", ids},
                 {"mode", std::string(DependencyModeName(deps->mode))},
                 {"outcome", std::string(AcceptedOutcomeName(deps->outcome))}};
    }
    SendJson(c, v);
  }

  // Records of `ids`, those the hub still has.
  std::vector<TaskInfo> FetchKnown(const std::vector<TaskId>& ids) {
    if (ids.empty()) return {};
    auto all = query_client_->Fetch(ids);
    if (all.ok()) return std::move(*all);
    std::vector<TaskInfo> out;
    if (all.status().code() != Status::Code::kNotFound) return out;
    for (const TaskId& id : ids) {  // some were purged: one by one
      if (auto one = query_client_->Fetch({id}); one.ok()) out.push_back(std::move(one->front()));
    }
    return out;
  }

  // The graph a task belongs to, drawn from it upwards (what it depends
  // on, and so on), up to kMaxGraph tasks: /api/graph?id=HEX.
  void Graph(mg_connection* c, const mg_request_info* ri) {
    auto root = TaskId::FromHex(Param(ri, "id"));
    if (!root.ok()) return SendError(c, 400, "id: " + root.status().message());
    std::lock_guard lock(query_mu_);
    Value nodes = Value::array(), edges = Value::array();
    std::unordered_set<TaskId, TaskIdHash> seen{*root};
    std::vector<TaskId> frontier{*root};
    bool truncated = false;
    while (!frontier.empty()) {
      std::vector<TaskId> next;
      for (const TaskInfo& r : FetchKnown(frontier)) {
        nodes.push_back({{"id", r.id.ToHex()},
                         {"label", r.label},
                         {"status", std::string(TaskStateName(r.status))},
                         {"error_type", r.status == TaskState::kError
                                            ? std::string(ErrorTypeName(r.error_type))
                                            : std::string()},
                         {"engine", r.engine_id ? Value(*r.engine_id) : Value(nullptr)}});
        for (const auto& [kind, deps] : {std::pair{"after", &r.after}, {"follow", &r.follow}}) {
          for (const TaskId& d : deps->ids) {
            if (!seen.contains(d)) {
              if (seen.size() >= kMaxGraph) {
                truncated = true;
                continue;
              }
              seen.insert(d);
              next.push_back(d);
            }
            edges.push_back({{"from", d.ToHex()}, {"to", r.id.ToHex()}, {"kind", kind}});
          }
        }
      }
      frontier = std::move(next);
    }
    if (nodes.empty()) return SendError(c, 404, "unknown task id " + root->ToHex());
    SendJson(c, Value{{"nodes", nodes}, {"edges", edges}, {"truncated", truncated}});
  }

  DashOptions options_;
  std::unique_ptr<Client> poll_client_;   // the poll thread's
  std::unique_ptr<Client> query_client_;  // requests', under query_mu_
  std::mutex query_mu_;
  std::mutex mu_;  // guards model_, stopped_
  std::condition_variable changed_;
  DashModel model_;
  int64_t hub_after_ = 0;  // the hub feed's position read up to
  std::atomic<bool> stop_{false};
  bool stopped_ = false;
  std::atomic<int> streams_{0};
  std::thread poller_;
  mg_context* ctx_ = nullptr;
  int port_ = 0;
};

Result<std::unique_ptr<DashServer>> DashServer::Start(DashOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  ZTASK_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<DashServer>(new DashServer(std::move(impl)));
}

DashServer::DashServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DashServer::~DashServer() = default;
std::string DashServer::url() const { return impl_->url(); }
void DashServer::Wait() { impl_->Wait(); }
void DashServer::Stop() { impl_->Stop(); }

}  // namespace ztask::dashboard
