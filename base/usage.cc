// The flags every program has: --version, and a bash completion script made
// from the program's CLI11 definitions. Owns no state; touches no socket.
#include "base/usage.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "ztask/version.h"

namespace ztask {
namespace {

struct Node {
  std::string path;                // " job submit": the subcommands that lead here
  std::vector<std::string> words;  // what may follow: subcommands, then options
};

bool Hidden(const CLI::Option* option) { return option->get_group().empty(); }

void AddOptions(const CLI::App& app, std::vector<std::string>* words,
                std::set<std::string>* with_value, std::set<std::string>* directories) {
  for (const CLI::Option* option : app.get_options()) {
    if (option->get_positional() || Hidden(option)) continue;
    const bool takes_value = option->get_items_expected_max() > 0;  // not a flag
    std::vector<std::string> names;
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
    for (const std::string& name : option->get_snames()) names.push_back("-" + name);
    for (const std::string& name : names) {
      words->push_back(name);
      if (!takes_value) continue;
      with_value->insert(name);
      if (name.find("dir") != std::string::npos) directories->insert(name);
    }
  }
}

// Walks the tree of subcommands; options of a parent stay valid below it
// when the parent hands on what it does not know (fallthrough).
void Walk(const CLI::App& app, const std::string& path, std::vector<std::string> inherited,
          std::vector<Node>* nodes, std::set<std::string>* with_value,
          std::set<std::string>* directories) {
  Node node{path, {}};
  std::vector<const CLI::App*> subs =
      app.get_subcommands([](const CLI::App* a) { return !a->get_group().empty(); });
  for (const CLI::App* sub : subs) node.words.push_back(sub->get_name());
  std::vector<std::string> options;
  AddOptions(app, &options, with_value, directories);
  node.words.insert(node.words.end(), options.begin(), options.end());
  for (const std::string& word : inherited) {
    if (std::find(node.words.begin(), node.words.end(), word) == node.words.end()) {
      node.words.push_back(word);
    }
  }
  nodes->push_back(node);
  std::vector<std::string> handed_on = inherited;
  handed_on.insert(handed_on.end(), options.begin(), options.end());
  for (const CLI::App* sub : subs) {
    Walk(*sub, path + " " + sub->get_name(),
         sub->get_fallthrough() ? handed_on : std::vector<std::string>{}, nodes, with_value,
         directories);
  }
}

std::string Join(const std::set<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : "|") + name;
  return out;
}

std::string Function(const std::string& program) {
  std::string name = "_ztask_" + program;
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

// The option of `app` or of a subcommand below it named `name` ("--retries").
const CLI::Option* FindOption(const CLI::App& app, const std::string& name) {
  if (const CLI::Option* option = app.get_option_no_throw(name)) return option;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (const CLI::Option* option = FindOption(*sub, name)) return option;
  }
  return nullptr;
}

}  // namespace

std::string UsageMessage(const CLI::App& app, const CLI::ParseError& e) {
  const std::string what = e.what();
  static constexpr std::string_view kConvert = "Could not convert: ";
  const size_t equals = what.find(" = ");
  if (what.rfind(kConvert, 0) != 0 || equals == std::string::npos) return what;
  const std::string name = what.substr(kConvert.size(), equals - kConvert.size());
  const std::string value = what.substr(equals + 3);
  const CLI::Option* option = FindOption(app, name);
  const std::string type = option != nullptr ? option->get_type_name() : std::string();
  std::string wanted = "a valid value";
  if (type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0) {
    wanted = "a whole number";
  } else if (type.rfind("FLOAT", 0) == 0) {
    wanted = "a number";
  } else if (!type.empty()) {
    wanted = "a valid value (" + type + ")";
  }
  return name + ": '" + value + "' is not " + wanted;
}

CLI::Validator WholeNumberIn(int64_t least, int64_t most) {
  return CLI::Validator(
      [least, most](std::string& input) -> std::string {
        int64_t value = 0;
        if (CLI::detail::lexical_cast(input, value) && value >= least && value <= most) {
          return std::string();
        }
        return "'" + input + "' is not a whole number from " + std::to_string(least) + " to " +
               std::to_string(most);
      },
      "INT in [" + std::to_string(least) + " - " + std::to_string(most) + "]");
}

std::filesystem::path NamedProfileDir(const std::string& name) {
  const char* home = std::getenv("HOME");
  const std::filesystem::path base =
      (home && *home) ? std::filesystem::path(home) : std::filesystem::current_path();
  return base / ".ztask" / ("profile_" + name);
}

std::string VersionLine(const std::string& program) {
  return program + " " + LibraryVersion() + " (protocol " + ProtocolVersion() + ")";
}

void AddStandardFlags(CLI::App& app, const std::string& program) {
  app.set_version_flag("--version", VersionLine(program), "print the version and exit");
  app.add_flag_callback(
         "--bash-completion",
         [&app, program] {
           std::fputs(BashCompletion(app, program).c_str(), stdout);
           throw CLI::Success();
         },
         "print a bash completion script and exit")
      ->group("");  // hidden: for packaging, not for people
}

std::string BashCompletion(const CLI::App& app, const std::string& program) {
  std::vector<Node> nodes;
  std::set<std::string> with_value, directories;
  Walk(app, "", {}, &nodes, &with_value, &directories);
  std::set<std::string> paths;
  for (const Node& node : nodes) {
    if (!node.path.empty()) paths.insert("\"" + node.path + "\"");
  }
  const std::string function = Function(program);
  std::ostringstream out;
  out << "# bash completion for " << program << ", made by `" << program
      << " --bash-completion` from its own command line definitions.\n"
      << function << "() {\n"
      << "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
      << "  local path=\"\" i w\n"
      << "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      << "    w=${COMP_WORDS[i]}\n"
      << "    case \"$w\" in\n";
  if (!with_value.empty()) out << "      " << Join(with_value) << ") ((i++)); continue ;;\n";
  out << "    esac\n";
  if (!paths.empty()) {
    std::string alternatives;
    for (const std::string& p : paths) alternatives += (alternatives.empty() ? "" : "|") + p;
    out << "    case \"$path $w\" in\n"
        << "      " << alternatives << ") path=\"$path $w\" ;;\n"
        << "    esac\n";
  }
  out << "  done\n"
      << "  case \"$prev\" in\n";
  if (!directories.empty()) {
    out << "    " << Join(directories) << ") COMPREPLY=($(compgen -d -- \"$cur\")); return ;;\n";
  }
  std::set<std::string> files;
  for (const std::string& name : with_value) {
    if (!directories.count(name)) files.insert(name);
  }
  if (!files.empty()) {
    out << "    " << Join(files) << ") COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n";
  }
  out << "  esac\n"
      << "  local words=\"\"\n"
      << "  case \"$path\" in\n";
  for (const Node& node : nodes) {
    std::string words;
    for (const std::string& w : node.words) words += (words.empty() ? "" : " ") + w;
    out << "    \"" << node.path << "\") words=\"" << words << "\" ;;\n";
  }
  out << "  esac\n"
      << "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
      << "}\n"
      << "complete -o default -F " << function << " " << program << "\n";
  return out.str();
}

}  // namespace ztask
