// What a program's main does with a command line it cannot parse: one line on
// stderr naming what was wrong, and exit code 2 (help and version as CLI11
// prints them, with its code); the number checks every command uses; and the
// flags every program has (--version, and the hidden --bash-completion that
// prints a completion script made from the program's own definitions, so
// that the installed completion never drifts from the options).
#ifndef ZTASK_BASE_USAGE_H_
#define ZTASK_BASE_USAGE_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace ztask {

// CLI11's PositiveNumber and NonNegativeNumber, with a message that says
// what is wanted ("-1 is not more than 0") instead of a range that ends at
// the largest double.
inline CLI::Validator NumberAbove(double least, bool inclusive) {
  return CLI::Validator(
      [least, inclusive](std::string& input) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(input, value)) return "'" + input + "' is not a number";
        if (inclusive ? value >= least : value > least) return std::string();
        return input + " is not " + (inclusive ? "0 or more" : "more than 0");
      },
      inclusive ? "NUMBER >= 0" : "NUMBER > 0");
}
inline const CLI::Validator kPositiveNumber = NumberAbove(0, false);
inline const CLI::Validator kNonNegativeNumber = NumberAbove(0, true);

// A whole number from `least` to `most`, with a message that says so ("'abc'
// is not a whole number from 1 to 100000") where CLI11's Range says "Value
// abc not in range".
CLI::Validator WholeNumberIn(int64_t least, int64_t most);

// The profile directory a name stands for, as IPython's --profile NAME
// names ~/.ipython/profile_NAME: ~/.ztask/profile_NAME (./.ztask without
// $HOME). "default" is where every program looks when given none.
std::filesystem::path NamedProfileDir(const std::string& name);

// Adds the two ways to say where a cluster's profile is: --profile-dir DIR,
// and --profile NAME (NamedProfileDir), one or the other, both into *dir.
// Given neither, *dir stays empty: $ZTASK_PROFILE_DIR, else the default
// profile (protocol::DefaultProfileDir).
template <class Dir>
CLI::Option* AddProfileFlags(CLI::App& app, Dir* dir, const std::string& what) {
  CLI::Option* by_dir = app.add_option("--profile-dir", *dir,
                                       what +
                                           " (default: $ZTASK_PROFILE_DIR, else "
                                           "~/.ztask/profile_default)");
  app.add_option_function<std::string>(
         "--profile",
         [dir](const std::string& name) { *dir = Dir(NamedProfileDir(name).string()); },
         "the profile named NAME: ~/.ztask/profile_NAME, as IPython's --profile")
      ->type_name("NAME")
      ->check(CLI::Validator(
          [](std::string& name) -> std::string {
            if (name.empty() || name == "." || name == ".." ||
                name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                       "0123456789._-") != std::string::npos) {
              return "'" + name +
                     "' is not a profile name (letters, digits, '.', '_', '-'); give a "
                     "directory with --profile-dir";
            }
            return std::string();
          },
          ""))
      ->excludes(by_dir);
  return by_dir;
}

// --hwm: "auto" (the default: learned per engine) or a whole number of
// tasks an engine may hold, 0 for no limit.
inline const CLI::Validator kHwmValue(
    [](std::string& input) -> std::string {
      if (input == "auto") return std::string();
      if (input.empty() || input.size() > 9 ||
          input.find_first_not_of("0123456789") != std::string::npos) {
        return "'" + input + "' is not auto or a whole number of tasks (0: no limit)";
      }
      return std::string();
    },
    "auto|N");

// "taskctl 0.2.0 (protocol ZTASK3)": what every program's --version prints.
std::string VersionLine(const std::string& program);

// Adds --version and the hidden --bash-completion to `app`. Call it after
// every option and subcommand is added: the script lists what is there then.
// Both end the parse with CLI11's exit code 0 (see UsageExit).
void AddStandardFlags(CLI::App& app, const std::string& program);

// A bash completion script for `app` and its subcommands, for `program`.
std::string BashCompletion(const CLI::App& app, const std::string& program);

// What was wrong, in a line: CLI11's own words, but where it could not
// convert a value ("Could not convert: --retries = abc"), what was wanted
// ("--retries: 'abc' is not a whole number").
std::string UsageMessage(const CLI::App& app, const CLI::ParseError& e);

inline int UsageExit(CLI::App& app, const CLI::ParseError& e, const char* program) {
  if (e.get_exit_code() == 0) return app.exit(e);
  std::fprintf(stderr, "%s: %s (see %s --help)\n", program, UsageMessage(app, e).c_str(), program);
  return 2;
}

}  // namespace ztask

#endif  // ZTASK_BASE_USAGE_H_
