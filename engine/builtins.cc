// The functions every stock engine has.
#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>

#include "base/clock.h"
#include "ztask/engine.h"

namespace ztask {

void RegisterBuiltins(Engine& engine) {
  engine.Register("noop", [](const Value&, const TaskContext&) { return Value(); });
  engine.Register("echo", [](const Value& args, const TaskContext&) { return args; });
  engine.Register("sleep", [](const Value& args, const TaskContext& context) {
    const Value& seconds = args.is_array() && !args.empty() ? args[0] : args;
    if (!seconds.is_number()) throw std::invalid_argument("sleep takes a number of seconds");
    const base::Deadline until(
        std::chrono::microseconds(static_cast<int64_t>(seconds.get<double>() * 1e6)));
    // In steps of at most 5 ms, to see a time limit; the last one ends on
    // time (a sleep of 1 ms takes 1 ms).
    while (!until.expired()) {
      if (context.OutOfTime()) throw TimeLimitReached();
      const int64_t left_us = until.at_us() - base::MonotonicMicros();
      std::this_thread::sleep_for(std::chrono::microseconds(std::clamp<int64_t>(left_us, 1, 5000)));
    }
    return Value();
  });
  // Adds numbers, arrays of numbers, arrays of those...: a reduce step.
  // Integers add up to an integer.
  engine.Register("sum", [](const Value& args, const TaskContext&) {
    bool integral = true;
    std::function<double(const Value&)> add = [&](const Value& v) -> double {
      if (v.is_number()) {
        integral = integral && v.is_number_integer();
        return v.get<double>();
      }
      if (!v.is_array()) throw std::invalid_argument("sum takes numbers and arrays of them");
      double total = 0;
      for (const auto& x : v) total += add(x);
      return total;
    };
    const double total = add(args);
    return integral ? Value(static_cast<int64_t>(total)) : Value(total);
  });
  engine.Register("fail", [](const Value& args, const TaskContext&) -> Value {
    throw std::runtime_error(args.is_string() ? args.get<std::string>() : "failed on request");
  });
}

}  // namespace ztask
