#include "dashboard/model.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace ztask::dashboard {
namespace {

// The JSON of a task id: its 32 hex digits.
std::string Hex(const TaskId& id) { return id.ToHex(); }

// The tasks table's label filter: any part of the label.
bool LabelHas(const std::string& label, const std::string& wanted) {
  return label.find(wanted) != std::string::npos;
}

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  std::ostringstream out;
  out.precision(12);
  out << v;
  return out.str();
}

// A Prometheus label value, escaped.
std::string Quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace

void DashModel::ApplyStats(const ClusterStats& stats, double now_s) {
  error_.clear();
  ++version_;
  missed_ += stats.missed;
  for (const ClusterStats::Finished& f : stats.finished) {
    stream_.push_back(f);
    if (stream_.size() > kStreamSize) stream_.pop_front();
    if (!f.ok) {
      failures_.push_back(f);
      if (failures_.size() > kFailuresKept) failures_.pop_front();
    }
  }
  // Positions follow the hub's feed, so that a delta names what it holds;
  // a hub that restarted starts its feed again, and the stream goes on.
  stream_end_ += static_cast<int64_t>(stats.finished.size());
  const int64_t finished_total = stats.ok_total + stats.failed_total;
  if (last_sample_at_ < 0 || finished_total < last_finished_total_) {
    last_sample_at_ = now_s;  // the first sample, or a hub that restarted
    last_finished_total_ = finished_total;
    last_submitted_total_ = stats.submitted_total;
  } else if (now_s - last_sample_at_ >= 1.0) {
    const double dt = now_s - last_sample_at_;
    Point p;
    p.t = stats.now;
    p.finished_rate = static_cast<double>(finished_total - last_finished_total_) / dt;
    p.submitted_rate = static_cast<double>(stats.submitted_total - last_submitted_total_) / dt;
    p.queued = stats.scheduler ? stats.scheduler->waiting + stats.scheduler->ready : stats.waiting;
    p.running = stats.running;
    series_.push_back(p);
    if (series_.size() > kSeriesPoints) series_.pop_front();
    ++series_end_;
    last_sample_at_ = now_s;
    last_finished_total_ = finished_total;
    last_submitted_total_ = stats.submitted_total;
  }
  stats_ = stats;
  stats_->finished.clear();
}

void DashModel::ApplyEngines(const std::vector<EngineStatus>& engines, const QueueStatus& queue) {
  engines_ = engines;
  queues_.clear();
  for (const auto& q : queue.engines) queues_[q.id] = q;
  ++version_;
  ++engines_version_;
}

void DashModel::SetError(const std::string& error) {
  if (error_ == error) return;
  error_ = error;
  ++version_;
}

Value DashModel::CountsJson() const {
  Value c = Value::object();
  c["error"] = error_;
  if (!stats_) return c;
  const ClusterStats& s = *stats_;
  c["now"] = s.now;
  // Waiting splits into waiting for dependencies and ready (for an
  // engine) only in the scheduler's view.
  if (s.scheduler) {
    c["waiting"] = s.scheduler->waiting;
    c["ready"] = s.scheduler->ready;
    c["scheme"] = s.scheduler->scheme;
    c["hwm"] = s.scheduler->hwm;
    c["clients"] = s.scheduler->clients;
    c["scheduler_age"] = s.scheduler->age_s;
  } else {
    c["waiting"] = s.waiting;
    c["ready"] = nullptr;
  }
  c["running"] = s.running;
  c["ok"] = s.ok;
  c["failed"] = s.failed;
  c["submitted_total"] = s.submitted_total;
  c["finished_total"] = s.ok_total + s.failed_total;
  c["retries_total"] = s.retries_total;
  c["missed"] = missed_;
  c["rate"] = series_.empty() ? 0.0 : series_.back().finished_rate;
  return c;
}

Value DashModel::EntryJson(const ClusterStats::Finished& f) {
  Value e = Value::object();
  e["id"] = Hex(f.id);
  e["engine"] = f.engine_id ? Value(*f.engine_id) : Value(nullptr);
  e["ok"] = f.ok;
  e["error_type"] = f.ok ? "" : std::string(ErrorTypeName(f.error_type));
  e["attempts"] = f.attempts;
  e["label"] = f.label;
  e["submitted"] = f.submitted;
  e["started"] = f.started;
  e["completed"] = f.completed;
  e["deps"] = f.dependencies;
  return e;
}

Value DashModel::Overview() const {
  Value o = Value::object();
  o["counts"] = CountsJson();
  Value series = Value::array();
  for (const Point& p : series_) {
    series.push_back({p.t, p.finished_rate, p.submitted_rate, p.queued, p.running});
  }
  o["series"] = std::move(series);
  Value by_state = Value::object();
  for (const EngineStatus& e : engines_) {
    const std::string state(EngineStateName(e.state));
    by_state[state] = by_state.value(state, 0) + 1;
  }
  o["engines_by_state"] = std::move(by_state);
  return o;
}

Value DashModel::Engines() const {
  std::map<int32_t, TaskId> current;
  if (stats_) {
    for (const auto& [engine, id] : stats_->current) current[engine] = id;
  }
  std::map<int32_t, int32_t> hwm;
  if (stats_ && stats_->scheduler) {
    for (const auto& [engine, h] : stats_->scheduler->engine_hwms) hwm[engine] = h;
  }
  Value list = Value::array();
  for (const EngineStatus& e : engines_) {
    Value j = Value::object();
    j["id"] = e.id;
    j["name"] = e.name;
    j["host"] = e.host;
    j["pid"] = e.pid;
    j["state"] = EngineStateName(e.state);
    j["restarts"] = e.restarts;
    j["registered"] = e.registered;
    auto q = queues_.find(e.id);
    j["running"] = q == queues_.end() ? 0 : q->second.running;
    j["queued"] = q == queues_.end() ? 0 : q->second.queued;
    j["done"] = q == queues_.end() ? 0 : q->second.completed;
    // The learned HWM it has now (null: a fixed one, the same for all).
    auto h = hwm.find(e.id);
    j["hwm"] = h == hwm.end() ? Value(nullptr) : Value(h->second);
    auto c = current.find(e.id);
    j["current"] = c == current.end() ? Value(nullptr) : Value(Hex(c->second));
    list.push_back(std::move(j));
  }
  return list;
}

Value DashModel::Labels() const {
  Value list = Value::array();
  if (!stats_) return list;
  for (const auto& l : stats_->labels) {
    list.push_back({{"prefix", l.prefix},
                    {"submitted", l.submitted},
                    {"ok", l.ok},
                    {"failed", l.failed}});
  }
  return list;
}

Value DashModel::Stream(int64_t after, size_t limit) const {
  Value list = Value::array();
  const int64_t first = stream_end_ - static_cast<int64_t>(stream_.size()) + 1;
  const int64_t from = std::max({after + 1, first, stream_end_ - static_cast<int64_t>(limit) + 1});
  for (int64_t pos = from; pos <= stream_end_; ++pos) {
    list.push_back(EntryJson(stream_[static_cast<size_t>(pos - first)]));
  }
  return list;
}

Value DashModel::StreamSample(int64_t after, size_t limit, int64_t* skipped) const {
  const int64_t first = stream_end_ - static_cast<int64_t>(stream_.size()) + 1;
  const int64_t from = std::max(after + 1, first);
  const auto n = static_cast<size_t>(std::max<int64_t>(0, stream_end_ - from + 1));
  *skipped = 0;
  if (n <= limit) return Stream(after, limit);
  const auto at = [&](size_t i) -> const ClusterStats::Finished& {
    return stream_[static_cast<size_t>(from - first) + i];
  };
  std::vector<bool> taken(n, false);
  size_t left = limit;
  for (size_t i = 0; i < n && left > 0; ++i) {
    if (!at(i).ok) {
      taken[i] = true;
      --left;
    }
  }
  // The rest evenly spaced: the i-th of `left` picks is at i * n / left.
  for (size_t k = 0; k < left; ++k) {
    size_t i = k * n / left;
    while (i < n && taken[i]) ++i;
    if (i < n) taken[i] = true;
  }
  Value list = Value::array();
  for (size_t i = 0; i < n; ++i) {
    if (taken[i]) list.push_back(EntryJson(at(i)));
  }
  *skipped = static_cast<int64_t>(n - list.size());
  return list;
}

std::optional<Value> DashModel::Delta(Cursor* cursor) const {
  if (cursor->version == version_) return std::nullopt;
  Value d = Value::object();
  d["counts"] = CountsJson();
  const bool fresh = cursor->version == 0;
  if (fresh) d["reset"] = true;
  // Series points after the cursor's.
  Value points = Value::array();
  const int64_t first_point = series_end_ - static_cast<int64_t>(series_.size()) + 1;
  for (int64_t i = std::max(cursor->points + 1, first_point); i <= series_end_; ++i) {
    const Point& p = series_[static_cast<size_t>(i - first_point)];
    points.push_back({p.t, p.finished_rate, p.submitted_rate, p.queued, p.running});
  }
  d["series"] = std::move(points);
  int64_t skipped = 0;
  d["stream"] = StreamSample(cursor->stream, kDeltaStream, &skipped);
  d["stream_skipped"] = skipped;
  if (fresh || cursor->engines != engines_version_) {
    d["engines"] = Engines();
    cursor->engines = engines_version_;
  }
  d["labels"] = Labels();
  cursor->version = version_;
  cursor->stream = stream_end_;
  cursor->points = series_end_;
  return d;
}

Value DashModel::Tasks(const std::string& state, const std::string& label,
                       std::optional<int32_t> engine, const std::string& id_prefix,
                       size_t limit) const {
  Value list = Value::array();
  const auto wanted = [&](const ClusterStats::Finished& f) {
    if (state == "ok" && !f.ok) return false;
    if (state == "failed" && f.ok) return false;
    if (!label.empty() && !LabelHas(f.label, label)) return false;
    if (engine && f.engine_id != engine) return false;
    if (!id_prefix.empty() && Hex(f.id).rfind(id_prefix, 0) != 0) return false;
    return true;
  };
  if (state == "running") {
    if (!stats_) return list;
    for (const auto& [e, id] : stats_->current) {
      if (engine && e != *engine) continue;
      if (!id_prefix.empty() && Hex(id).rfind(id_prefix, 0) != 0) continue;
      list.push_back({{"id", Hex(id)}, {"engine", e}, {"state", "running"}});
    }
    return list;
  }
  // Failures are kept longer than the stream: look there first for them.
  const auto& source = state == "failed" ? failures_ : stream_;
  for (auto it = source.rbegin(); it != source.rend() && list.size() < limit; ++it) {
    if (!wanted(*it)) continue;
    Value e = EntryJson(*it);
    e["state"] = it->ok ? "ok" : "failed";
    list.push_back(std::move(e));
  }
  return list;
}

namespace {

// A metric family's HELP and TYPE lines (Prometheus' text format).
void Family(std::ostream& m, const char* name, const char* type, const char* help) {
  m << "# HELP " << name << ' ' << help << '\n' << "# TYPE " << name << ' ' << type << '\n';
}

void TaskMetrics(std::ostream& m, const ClusterStats& s) {
  Family(m, "ztask_tasks", "gauge",
         "Tasks by state: waiting (dependencies unmet), ready (for an engine), running, "
         "ok, failed (records the hub holds).");
  if (s.scheduler) {
    m << "ztask_tasks{state=\"waiting\"} " << s.scheduler->waiting << '\n';
    m << "ztask_tasks{state=\"ready\"} " << s.scheduler->ready << '\n';
  } else {
    m << "ztask_tasks{state=\"waiting\"} " << s.waiting << '\n';
  }
  m << "ztask_tasks{state=\"running\"} " << s.running << '\n';
  m << "ztask_tasks{state=\"ok\"} " << s.ok << '\n';
  m << "ztask_tasks{state=\"failed\"} " << s.failed << '\n';
  Family(m, "ztask_tasks_submitted_total", "counter", "Tasks submitted since the hub started.");
  m << "ztask_tasks_submitted_total " << s.submitted_total << '\n';
  Family(m, "ztask_tasks_finished_total", "counter", "Tasks finished since the hub started.");
  m << "ztask_tasks_finished_total{status=\"ok\"} " << s.ok_total << '\n';
  m << "ztask_tasks_finished_total{status=\"failed\"} " << s.failed_total << '\n';
  Family(m, "ztask_task_retries_total", "counter",
         "Attempts that failed and were queued again, since the hub started.");
  m << "ztask_task_retries_total " << s.retries_total << '\n';
}

void EngineMetrics(std::ostream& m, const ClusterStats& s, const std::vector<EngineStatus>& engines) {
  Family(m, "ztask_engines", "gauge", "Engines by state.");
  std::map<std::string, int64_t> by_state{{"running", 0}};
  for (const EngineStatus& e : engines) ++by_state[std::string(EngineStateName(e.state))];
  for (const auto& [state, n] : by_state) {
    m << "ztask_engines{state=" << Quoted(state) << "} " << n << '\n';
  }
  if (s.scheduler) {
    Family(m, "ztask_clients", "gauge", "Client connections the scheduler knows.");
    m << "ztask_clients " << s.scheduler->clients << '\n';
    Family(m, "ztask_queue_depth", "gauge", "Tasks in the scheduler not yet sent to an engine.");
    m << "ztask_queue_depth " << s.scheduler->waiting + s.scheduler->ready << '\n';
  }
}

void DurationMetrics(std::ostream& m, const ClusterStats& s) {
  Family(m, "ztask_task_duration_seconds", "histogram",
         "Run time of the tasks finished since the hub started (started to completed).");
  int64_t cumulative = 0;
  for (size_t i = 0; i < s.duration_counts.size(); ++i) {
    cumulative += s.duration_counts[i];
    const std::string le =
        i < s.duration_bounds.size() ? Number(s.duration_bounds[i]) : std::string("+Inf");
    m << "ztask_task_duration_seconds_bucket{le=\"" << le << "\"} " << cumulative << '\n';
  }
  m << "ztask_task_duration_seconds_sum " << Number(s.duration_sum) << '\n';
  m << "ztask_task_duration_seconds_count " << cumulative << '\n';
}

void LabelMetrics(std::ostream& m, const ClusterStats& s) {
  Family(m, "ztask_label_tasks_total", "counter",
         "Tasks since the hub started by label prefix and outcome (submitted, ok, failed).");
  for (const auto& l : s.labels) {
    const std::string prefix = "ztask_label_tasks_total{prefix=" + Quoted(l.prefix);
    m << prefix << ",outcome=\"submitted\"} " << l.submitted << '\n';
    m << prefix << ",outcome=\"ok\"} " << l.ok << '\n';
    m << prefix << ",outcome=\"failed\"} " << l.failed << '\n';
  }
}

}  // namespace

std::string DashModel::Metrics() const {
  std::ostringstream m;
  Family(m, "ztask_up", "gauge", "1 when the hub answered taskdash's last question.");
  m << "ztask_up " << (error_.empty() && stats_ ? 1 : 0) << '\n';
  Family(m, "ztask_dropped_messages_total", "counter",
         "Messages dropped (unsigned, malformed or unexpected), by process.");
  if (!stats_) return m.str();
  m << "ztask_dropped_messages_total{process=\"taskhub\"} " << stats_->hub_dropped << '\n';
  if (stats_->scheduler) {
    m << "ztask_dropped_messages_total{process=\"taskscheduler\"} " << stats_->scheduler->dropped
      << '\n';
  }
  TaskMetrics(m, *stats_);
  EngineMetrics(m, *stats_, engines_);
  DurationMetrics(m, *stats_);
  LabelMetrics(m, *stats_);
  return m.str();
}

}  // namespace ztask::dashboard
