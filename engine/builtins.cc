// The functions every stock engine has.
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
    while (!until.expired()) {
      if (context.OutOfTime()) throw TimeLimitReached();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
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
