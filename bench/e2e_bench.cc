// usage: e2e_bench [--engines N] [--hwm H] [--tasks N] [--latency N] [--chain N] [--db PATH]
//
// The whole cluster, end to end, beside the floor ZeroMQ itself sets on this
// machine in the same run: a cluster (taskcluster, real taskengine
// processes) runs no-op tasks as fast as one client submits them, one at a
// time (round-trip latency), and as a chain; then a bare relay (client ->
// ROUTER/ROUTER broker that parses nothing -> echo workers -> back) does the
// same with empty messages. Prints a table and one JSON line.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "cluster/child_process.h"
#include "ztask/client.h"

namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Options {
  int engines = 2, hwm = 64, tasks = 20000, latency = 2000, chain = 2000;
  std::string db;
};

struct Latency {
  double p50 = 0, p99 = 0, max = 0;
};

Latency Summarize(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  if (us.empty()) return {};
  return {us[us.size() / 2], us[us.size() * 99 / 100], us.back()};
}

std::string BinDir() {
  char path[4096];
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  return std::filesystem::path(std::string(path, n > 0 ? static_cast<size_t>(n) : 0))
      .parent_path()
      .string();
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "e2e_bench: %s\n", what.c_str());
  return 1;
}

// ---- the floor: a relay that parses nothing --------------------------------

struct RelayResult {
  double tasks_per_s = 0;
  Latency rtt;
};

RelayResult RunRelay(int workers, int tasks, int latency_tasks) {
  zmq::context_t ctx(1);
  // No high-water marks: a ROUTER drops what a full peer cannot take, and the
  // client's window already bounds what is in flight.
  auto unbounded = [](zmq::socket_t& s) {
    s.set(zmq::sockopt::sndhwm, 0);
    s.set(zmq::sockopt::rcvhwm, 0);
  };
  zmq::socket_t front(ctx, zmq::socket_type::router), back(ctx, zmq::socket_type::router);
  unbounded(front);
  unbounded(back);
  front.bind("tcp://127.0.0.1:*");
  back.bind("tcp://127.0.0.1:*");
  const std::string front_ep = front.get(zmq::sockopt::last_endpoint);
  const std::string back_ep = back.get(zmq::sockopt::last_endpoint);
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&ctx, back_ep] {
      zmq::socket_t s(ctx, zmq::socket_type::dealer);
      s.set(zmq::sockopt::sndhwm, 0);
      s.set(zmq::sockopt::rcvhwm, 0);
      s.connect(back_ep);
      s.send(zmq::str_buffer("ready"), zmq::send_flags::none);
      while (true) {
        std::vector<zmq::message_t> parts;
        if (!zmq::recv_multipart(s, std::back_inserter(parts))) return;
        if (parts.size() == 1) return;  // "stop"
        zmq::send_multipart(s, parts);
      }
    });
  }
  std::thread broker([&] {
    std::vector<std::string> ready;
    size_t next = 0;
    zmq::pollitem_t items[] = {{front.handle(), 0, ZMQ_POLLIN, 0}, {back.handle(), 0, ZMQ_POLLIN, 0}};
    while (true) {
      zmq::poll(items, 2, std::chrono::milliseconds(-1));
      if (items[1].revents & ZMQ_POLLIN) {
        std::vector<zmq::message_t> parts;
        (void)zmq::recv_multipart(back, std::back_inserter(parts));
        if (parts.size() == 2) {
          ready.push_back(parts[0].to_string());
        } else {
          parts.erase(parts.begin());  // the worker's id; then client id, payload
          zmq::send_multipart(front, parts);
        }
      }
      if (items[0].revents & ZMQ_POLLIN) {
        std::vector<zmq::message_t> parts;
        (void)zmq::recv_multipart(front, std::back_inserter(parts));
        if (parts.size() == 2 && parts[1].to_string() == "stop") break;
        std::vector<zmq::message_t> out;
        out.emplace_back(ready[next++ % ready.size()]);
        for (auto& p : parts) out.push_back(std::move(p));
        zmq::send_multipart(back, out);
      }
    }
    for (const auto& id : ready) {
      zmq::message_t to(id);
      back.send(to, zmq::send_flags::sndmore);
      back.send(zmq::str_buffer("stop"), zmq::send_flags::none);
    }
  });
  zmq::socket_t client(ctx, zmq::socket_type::dealer);
  unbounded(client);
  client.set(zmq::sockopt::rcvtimeo, 30000);  // a stall is an error, not a hang
  client.connect(front_ep);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // workers say ready
  RelayResult result;
  const int window = 1000;
  int sent = 0, got = 0;
  zmq::message_t reply;
  auto start = Clock::now();
  while (got < tasks) {
    while (sent < tasks && sent - got < window) {
      client.send(zmq::str_buffer("t"), zmq::send_flags::none);
      ++sent;
    }
    if (!client.recv(reply)) {
      std::fprintf(stderr, "e2e_bench: the relay stalled after %d of %d\n", got, tasks);
      std::_Exit(1);
    }
    ++got;
  }
  result.tasks_per_s = tasks / Since(start);
  std::vector<double> rtt;
  for (int i = 0; i < latency_tasks; ++i) {
    auto t = Clock::now();
    client.send(zmq::str_buffer("t"), zmq::send_flags::none);
    (void)client.recv(reply);
    rtt.push_back(Since(t) * 1e6);
  }
  result.rtt = Summarize(rtt);
  client.send(zmq::str_buffer("stop"), zmq::send_flags::none);
  broker.join();
  for (auto& t : threads) t.join();
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* v = argv[i + 1];
    if (flag == "--engines") o.engines = std::atoi(v);
    else if (flag == "--hwm") o.hwm = std::atoi(v);
    else if (flag == "--tasks") o.tasks = std::atoi(v);
    else if (flag == "--latency") o.latency = std::atoi(v);
    else if (flag == "--chain") o.chain = std::atoi(v);
    else if (flag == "--db") o.db = v;
    else return Fail("unknown flag " + flag + " (see the usage line at the top of e2e_bench.cc)");
  }
  char pattern[] = "/tmp/ztask-bench-XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  const std::string profile = dir + "/profile";
  std::vector<std::string> start = {BinDir() + "/taskcluster", "start", "-n", std::to_string(o.engines),
                                    "--hwm", std::to_string(o.hwm), "--profile-dir", profile,
                                    "--daemonize"};
  if (!o.db.empty()) start.insert(start.end(), {"--db", o.db});
  ztask::cluster::ChildProcess starter(start, dir + "/start.log");
  if (starter.Wait(std::chrono::seconds(60)) != 0) return Fail("the cluster did not start: " + starter.Log());
  auto client = ztask::Client::Connect(profile);
  if (!client.ok()) return Fail(client.status().message());
  ztask::Client& c = **client;

  ztask::TaskOptions noop;
  noop.function = "noop";
  std::vector<ztask::TaskId> ids;
  ids.reserve(static_cast<size_t>(o.tasks));
  auto t0 = Clock::now();
  for (int i = 0; i < o.tasks; ++i) ids.push_back(*c.Submit(noop));
  if (!c.WaitReplies(ids, 600).ok()) return Fail("throughput run did not finish");
  const double throughput = o.tasks / Since(t0);

  std::vector<double> rtt;
  for (int i = 0; i < o.latency; ++i) {
    auto t = Clock::now();
    auto id = c.Submit(noop);
    if (!c.WaitReplies({*id}, 60).ok()) return Fail("latency run stalled");
    rtt.push_back(Since(t) * 1e6);
  }
  const Latency latency = Summarize(rtt);

  ztask::TaskOptions link = noop;
  std::vector<ztask::TaskId> chain;
  auto t1 = Clock::now();
  for (int i = 0; i < o.chain; ++i) {
    link.after.ids = chain.empty() ? std::vector<ztask::TaskId>{} : std::vector<ztask::TaskId>{chain.back()};
    chain.push_back(*c.Submit(link));
  }
  if (!c.WaitReplies(chain, 600).ok()) return Fail("chain did not finish");
  const double chain_rate = o.chain / Since(t1);
  ztask::cluster::ChildProcess stopper({BinDir() + "/taskcluster", "stop", "--profile-dir", profile},
                                       dir + "/stop.log");
  stopper.Wait(std::chrono::seconds(60));
  std::filesystem::remove_all(dir);

  const RelayResult relay = RunRelay(o.engines, o.tasks * 5, o.latency);
  std::printf("configuration: %d engines, hwm %d, db %s, leastload, signed\n", o.engines, o.hwm,
              o.db.empty() ? "sqlite" : o.db.c_str());
  std::printf("%-28s %14s %10s %10s %10s\n", "workload", "tasks/s", "p50 us", "p99 us", "max us");
  std::printf("%-28s %14.0f %10s %10s %10s\n", "ztask no-op throughput", throughput, "", "", "");
  std::printf("%-28s %14s %10.0f %10.0f %10.0f\n", "ztask round trip", "", latency.p50, latency.p99,
              latency.max);
  std::printf("%-28s %14.0f %10s %10s %10s\n", "ztask chain", chain_rate, "", "", "");
  std::printf("%-28s %14.0f %10.0f %10.0f %10.0f\n", "bare relay (floor)", relay.tasks_per_s,
              relay.rtt.p50, relay.rtt.p99, relay.rtt.max);
  std::printf("ratios: throughput %.3f of the floor, round trip %.2fx the floor's\n",
              throughput / relay.tasks_per_s, latency.p50 / relay.rtt.p50);
  std::printf("{\"engines\": %d, \"ztask_hwm\": %d, \"ztask_tasks_per_s\": %.0f, \"ztask_p50_us\": %.0f, "
              "\"ztask_chain_tasks_per_s\": %.0f, \"relay_tasks_per_s\": %.0f, \"relay_p50_us\": %.0f}\n",
              o.engines, o.hwm, throughput, latency.p50, chain_rate, relay.tasks_per_s, relay.rtt.p50);
  return 0;
}
