// The table of flags taskcluster passes on (cluster/passed_flags.h).
#include "cluster/passed_flags.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <memory>

#include "base/usage.h"
#include "protocol/resources.h"

namespace ztask::cluster {
namespace {

void Positive(CLI::Option* o) { o->check(kPositiveNumber); }
void NonNegative(CLI::Option* o) { o->check(kNonNegativeNumber); }

// What CLI11 reads as a bool, and nothing else.
void Boolean(CLI::Option* o) {
  o->check(CLI::Validator(
      [](std::string& text) {
        std::string word = text;
        std::transform(word.begin(), word.end(), word.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        for (const char* yes : {"true", "false", "1", "0", "yes", "no", "on", "off"}) {
          if (word == yes) return std::string();
        }
        return "'" + text + "' is not true or false";
      },
      "true|false"));
}

// A number of slots, refused with the words every other place that checks
// slots uses (protocol::AmountsError).
void SlotCount(CLI::Option* o) {
  o->check(CLI::Validator(
      [](std::string& text) {
        int32_t slots = 0;
        if (!CLI::detail::lexical_cast(text, slots)) {
          return "slots must be a whole number from 1 to " + std::to_string(protocol::kMaxSlots) +
                 ", not '" + text + "'";
        }
        return protocol::AmountsError(slots, {}, 1);
      },
      "1.." + std::to_string(protocol::kMaxSlots)));
}

std::vector<PassedFlag> MakeTable() {
  return {
      {"--slots", kEngine,
       "tasks an engine runs at once, each holding the slots it asks (taskctl submit --slots)", "1",
       SlotCount},
      {"--resource", kEngine,
       "a countable resource an engine has, NAME=COUNT (gpus=4: units 0-3, given to tasks "
       "that ask for them); may be repeated",
       "",
       [](CLI::Option* o) {
         o->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
         o->check([seen = std::make_shared<protocol::ResourceMap>()](const std::string& text) {
           std::string error;  // also when a name comes twice
           return protocol::ParseResource(text, 1, seen.get(), &error) ? std::string() : error;
         });
       },
       true},
      {"--keep-finished", kHub | kScheduler,
       "finished tasks the hub keeps in memory and whose outcomes the scheduler remembers; "
       "older ones are read from the hub's database when asked for",
       "hub 100000, scheduler 1000000",
       [](CLI::Option* o) { o->check(WholeNumberIn(1, int64_t{1} << 40)); }},
      {"--max-finished-records", kHub,
       "finished task records the hub's database keeps, at most: the oldest recorded go "
       "first, never one a waiting task depends on (a dropped one is unknown to queries "
       "and to new dependents); 0 keeps every one. A finished no-op's record takes about "
       "750 bytes of the file",
       "0", [](CLI::Option* o) { o->check(WholeNumberIn(0, int64_t{1} << 40)); }},
      {"--drop-finished-after", kHub,
       "seconds a finished task's record stays in the hub's database once it ended (never "
       "one a waiting task depends on); 0 keeps them",
       "0", NonNegative},
      {"--durability", kHub | kScheduler,
       "what acknowledged records and the scheduler's journal survive: a process crash "
       "(process) or a power loss too (power: synced to disk, once per turn)",
       "process",
       [](CLI::Option* o) {
         o->check(CLI::IsMember({"process", "power"}));
       }},
      {"--heartbeat-ms", kHub,
       "engines heartbeat this often (milliseconds; stretched so that all engines send at most "
       "2,000 heartbeats a second)",
       "1000", [](CLI::Option* o) { o->check(WholeNumberIn(10, 600000)); }},
      {"--heartbeat-misses", kHub, "an engine silent for this many periods is lost", "3",
       [](CLI::Option* o) { o->check(WholeNumberIn(1, 1000)); }},
      {"--record-running-after", kScheduler,
       "seconds a task runs before the hub records it as running (one that ends sooner costs "
       "the hub two records, not three)",
       "0.05", NonNegative},
      {"--recover-grace", kScheduler,
       "after a scheduler restart, seconds engines holding tasks have to come back, and a "
       "task may wait for a dependency not seen yet",
       "10", NonNegative},
      {"--send-ahead", kScheduler,
       "send a task waiting for one last dependency to the engine running it, to run there "
       "once it succeeds (true or false)",
       "true", Boolean},
      {"--socket-hwm", kScheduler,
       "ZeroMQ high-water mark of the scheduler's client and engine sockets (messages; what a "
       "peer will not take waits in the scheduler)",
       "1000000", [](CLI::Option* o) { o->check(WholeNumberIn(1, 100000000)); }},
      {"--replay-window", kHub | kScheduler,
       "seconds a message's date may differ from this host's clock (replay protection); 0: "
       "no check",
       "300", NonNegative},
      {"--max-task-bytes", kScheduler,
       "largest task (content and buffers) a client may submit; a larger one fails with "
       "TaskRejected",
       "", Positive},
      {"--max-dependencies", kScheduler, "most after+follow ids of a task", "", Positive},
      {"--max-queued-per-client", kScheduler, "most tasks of one client waiting or running at once",
       "", Positive},
      {"--max-result-bytes", kEngine, "largest result of a function; a larger one fails the task",
       "", Positive},
      {"--max-output-bytes", kEngine, "bytes of stdout and of stderr kept per command", "",
       Positive},
  };
}

}  // namespace

const std::vector<PassedFlag>& PassedFlags() {
  static const std::vector<PassedFlag> table = MakeTable();
  return table;
}

const PassedFlag& PassedFlagNamed(std::string_view name) {
  const auto& table = PassedFlags();
  auto it = std::find_if(table.begin(), table.end(),
                         [&](const PassedFlag& f) { return f.name == name; });
  assert(it != table.end());
  return *it;
}

void AddEveryPassedFlag(CLI::App& start, std::vector<std::vector<std::string>>& given) {
  const auto& table = PassedFlags();
  given.assign(table.size(), {});
  for (size_t i = 0; i < table.size(); ++i) {
    const PassedFlag& flag = table[i];
    std::string help = flag.help;
    if (!flag.default_text.empty()) help += " (default " + flag.default_text + ")";
    CLI::Option* option = start.add_option(flag.name, given[i], help);
    if (flag.check) flag.check(option);
    if (!flag.repeated) option->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }
}

std::vector<std::string> PassedOnTo(Daemon daemon,
                                    const std::vector<std::vector<std::string>>& given) {
  std::vector<std::string> words;
  const auto& table = PassedFlags();
  for (size_t i = 0; i < table.size() && i < given.size(); ++i) {
    if (!(table[i].daemons & daemon)) continue;
    for (const std::string& value : given[i]) words.insert(words.end(), {table[i].name, value});
  }
  return words;
}

}  // namespace ztask::cluster
