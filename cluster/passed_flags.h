// The flags taskcluster passes on to the daemons it starts, each declared
// once: its name, who takes it, what it means and what values it takes.
// Each daemon binds the flags it takes to its own options (AddPassedFlag);
// `taskcluster start` declares every one of them, bound to the words it
// passes on, so that taskcluster refuses at once what a daemon would refuse
// at its start, with the same message.
//
// Must not: hold a daemon's own flags that taskcluster does not pass on
// (those stay in the daemon's main). Thread safety: the table is immutable.
#ifndef ZTASK_CLUSTER_PASSED_FLAGS_H_
#define ZTASK_CLUSTER_PASSED_FLAGS_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace ztask::cluster {

// taskcontroller is the hub and the scheduler: it takes what either takes.
enum Daemon : unsigned { kHub = 1, kScheduler = 2, kEngine = 4, kController = kHub | kScheduler };

struct PassedFlag {
  std::string name;  // "--heartbeat-ms"
  unsigned daemons;  // Daemon bits: who takes it
  std::string help;
  // What taskcluster's --help adds, since it has no default of its own.
  std::string default_text;
  // Adds the flag's checks to an option; empty: any value.
  std::function<void(CLI::Option*)> check;
  bool repeated = false;  // may be given more than once (each is passed on)
};

// Every flag taskcluster passes on, in the order its --help lists them.
const std::vector<PassedFlag>& PassedFlags();
// The entry named `name`. REQUIRES: it is in the table.
const PassedFlag& PassedFlagNamed(std::string_view name);

// Declares the flag `name` on `app`, bound to `value`, with its help and
// checks, for a daemon that takes it. REQUIRES: `name` is in the table.
template <class T>
CLI::Option* AddPassedFlag(CLI::App& app, std::string_view name, T& value) {
  const PassedFlag& flag = PassedFlagNamed(name);
  CLI::Option* option = app.add_option(flag.name, value, flag.help);
  if (flag.check) flag.check(option);
  return option;
}

// Every flag of the table on taskcluster's `start`, each bound to the words
// given for it (`given[i]` for PassedFlags()[i]).
void AddEveryPassedFlag(CLI::App& start, std::vector<std::vector<std::string>>& given);
// The words for `daemon`'s command line from what was given (each flag
// once, for taskcontroller too).
std::vector<std::string> PassedOnTo(Daemon daemon,
                                    const std::vector<std::vector<std::string>>& given);

}  // namespace ztask::cluster

#endif  // ZTASK_CLUSTER_PASSED_FLAGS_H_
