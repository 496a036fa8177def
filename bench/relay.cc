#include "bench/relay.h"
#include "base/clock.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

namespace ztask::bench {
namespace {

using Clock = base::MonotonicClock;
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(base::MonotonicNow() - t).count();
}

}  // namespace

Latency Summarize(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  if (us.empty()) return {};
  return {us[us.size() / 2], us[us.size() * 99 / 100], us.back()};
}

namespace {

// A worker: says ready, then sends back each message as it came, until
// "stop".
void RelayWorker(zmq::context_t& ctx, const std::string& back_ep) {
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
}

// The broker: each message from the front goes to the next worker in
// turn, each answer back to its sender; "stop" stops it and the workers.
void RelayBroker(zmq::socket_t& front, zmq::socket_t& back) {
  std::vector<std::string> ready;
  size_t next = 0;
  // The bare ZeroMQ floor: its own zmq::poll on purpose, with nothing of
  // ztask's (base/reactor.h) between the sockets and the measure.
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
}

// The client's side: `tasks` in messages of `per_message`, a window of
// them in flight, then `latency_tasks` round trips one at a time.
RelayResult MeasureRelay(zmq::socket_t& client, int tasks, int latency_tasks, int per_message) {
  const std::string payload(32 * static_cast<size_t>(per_message), 't');
  RelayResult result;
  const int messages = std::max(tasks / per_message, 1);
  const int window = std::max(1000 / per_message, 1);  // messages in flight
  int sent = 0, got = 0;
  zmq::message_t reply;
  auto start = base::MonotonicNow();
  while (got < messages) {
    while (sent < messages && sent - got < window) {
      client.send(zmq::buffer(payload), zmq::send_flags::none);
      ++sent;
    }
    if (!client.recv(reply)) {
      std::fprintf(stderr, "e2e_bench: the relay stalled after %d of %d\n", got, messages);
      std::_Exit(1);
    }
    ++got;
  }
  result.tasks_per_s = static_cast<double>(messages) * per_message / Since(start);
  std::vector<double> rtt;
  for (int i = 0; i < latency_tasks; ++i) {
    auto t = base::MonotonicNow();
    client.send(zmq::buffer(payload.data(), 32), zmq::send_flags::none);
    (void)client.recv(reply);
    rtt.push_back(Since(t) * 1e6);
  }
  result.rtt = Summarize(rtt);
  return result;
}

}  // namespace

RelayResult RunRelay(int workers, int tasks, int latency_tasks, int per_message) {
  per_message = std::max(per_message, 1);
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
    threads.emplace_back([&ctx, back_ep] { RelayWorker(ctx, back_ep); });
  }
  std::thread broker([&] { RelayBroker(front, back); });
  zmq::socket_t client(ctx, zmq::socket_type::dealer);
  unbounded(client);
  client.set(zmq::sockopt::rcvtimeo, 30000);  // a stall is an error, not a hang
  client.connect(front_ep);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // workers say ready
  const RelayResult result = MeasureRelay(client, tasks, latency_tasks, per_message);
  client.send(zmq::str_buffer("stop"), zmq::send_flags::none);
  broker.join();
  for (auto& t : threads) t.join();
  return result;
}

}  // namespace ztask::bench
