#include "controller/command_line.h"

#include <algorithm>
#include <cstdio>
#include <memory>

#include "base/usage.h"
#include "scheduler/scheme.h"

namespace ztask::controller {
namespace {

constexpr char kProgram[] = "taskcontroller";

// The union of both programs' flags, for the help, the completion and the
// first parse (names and counts of values); the values it binds are not used.
struct Union {
  CLI::App app{
      "taskcontroller: the hub and the scheduler of a ztask cluster in one process (two "
      "threads; the records between them go in memory). Takes every flag of taskhub and of "
      "taskscheduler; one both take applies to both.",
      kProgram};
  std::vector<std::unique_ptr<std::string>> values;

  // Adds `from`'s flags; one already there (both take it) says both
  // defaults when they differ.
  void Take(const CLI::App& from, const char* part) {
    for (const CLI::Option* option : from.get_options()) {
      if (option == from.get_help_ptr()) continue;
      const std::string name = option->get_name();
      if (CLI::Option* there = app.get_option_no_throw(name)) {
        const std::string mine = option->get_default_str(), theirs = there->get_default_str();
        if (mine != theirs) {
          there->default_str("");
          there->description(there->get_description() + " (default: " + first_part + " " +
                             theirs + ", " + part + " " + mine + ")");
        }
        continue;
      }
      values.push_back(std::make_unique<std::string>());
      CLI::Option* copy = option->get_items_expected_max() == 0
                              ? app.add_flag(name, option->get_description())
                              : app.add_option(name, *values.back(), option->get_description());
      copy->type_name(option->get_type_name());
      if (!option->get_default_str().empty()) copy->default_str(option->get_default_str());
    }
    if (first_part.empty()) first_part = part;
  }
  std::string first_part;
};

// CLI11 takes a vector of words last first.
void Parse(CLI::App& app, std::vector<std::string> words) {
  std::reverse(words.begin(), words.end());
  app.parse(words);
}

}  // namespace

std::optional<int> ParseControllerFlags(const std::vector<std::string>& words,
                                        ControllerFlags& flags) {
  CLI::App hub{"", kProgram}, scheduler{"", kProgram};
  hub::AddHubFlags(hub, flags.hub);
  scheduler::AddSchedulerFlags(scheduler, flags.scheduler);
  Union all;
  all.Take(hub, "hub");
  all.Take(scheduler, "scheduler");
  AddStandardFlags(all.app, kProgram);
  // Each word to the program(s) that declare its flag, with its value.
  std::vector<std::string> to_hub, to_scheduler;
  CLI::App* failed = &all.app;
  try {
    Parse(all.app, words);
    for (size_t i = 0; i < words.size(); ++i) {
      const std::string& word = words[i];
      const size_t equals = word.find('=');
      const std::string name = word.substr(0, equals);
      const CLI::Option* in_hub = hub.get_option_no_throw(name);
      const CLI::Option* in_scheduler = scheduler.get_option_no_throw(name);
      const CLI::Option* option = in_hub != nullptr ? in_hub : in_scheduler;
      const bool with_value = equals == std::string::npos && option != nullptr &&
                              option->get_items_expected_max() > 0 && i + 1 < words.size();
      for (auto [declared, to] : {std::pair{in_hub, &to_hub}, {in_scheduler, &to_scheduler}}) {
        if (declared == nullptr) continue;
        to->push_back(word);
        if (with_value) to->push_back(words[i + 1]);
      }
      if (with_value) ++i;
    }
    failed = &hub;
    Parse(hub, to_hub);
    failed = &scheduler;
    Parse(scheduler, to_scheduler);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return all.app.exit(e);
    return UsageExit(*failed, e, kProgram);
  }
  scheduler::ApplySchedulerFlags(flags.scheduler);
  // Refused before the hub starts, as taskscheduler refuses it.
  const std::vector<std::string> schemes = scheduler::SchemeNames();
  if (std::find(schemes.begin(), schemes.end(), flags.scheduler.options.scheme) == schemes.end()) {
    std::fprintf(stderr, "%s: unknown scheme '%s'; valid schemes: %s\n", kProgram,
                 flags.scheduler.options.scheme.c_str(), scheduler::SchemeList().c_str());
    return 2;
  }
  return std::nullopt;
}

}  // namespace ztask::controller
