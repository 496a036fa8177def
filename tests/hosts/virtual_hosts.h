// Hosts on one machine for tests: each a Linux network namespace with one
// interface (eth0, 10.77.0.N/24) on a bridge that lives in a namespace of
// its own (the switch), so that nothing is added to the machine's own
// network and two runs at once never meet. Only the network is separate:
// every host sees the same files. Programs run on a host through
// `ip netns exec`; the calling thread can move onto one (Enter), and the
// sockets it makes from then on, and the threads it starts, are that host's.
//
// Namespaces are named ztask-h<PID>-<host>; the destructor kills every
// process left on them and removes them, and a later run removes those of
// a run whose process is gone (killed by its timeout, say).
//
// Needs root and iproute2's `ip`; Unavailable() says, in one line, why not.
//
// Thread safety: owned by one thread.
#ifndef ZTASK_TESTS_HOSTS_VIRTUAL_HOSTS_H_
#define ZTASK_TESTS_HOSTS_VIRTUAL_HOSTS_H_

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cluster/child_process.h"

namespace ztask::testing {

class VirtualHosts {
 public:
  // The path of `ip`, or "" when there is none.
  static std::string IpProgram() {
    for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
      if (::access(p, X_OK) == 0) return p;
    }
    return "";
  }
  // Why hosts cannot be made on this machine, or "" when they can (as far
  // as can be told before making one: Add() may still fail).
  static std::string Unavailable() {
    if (::geteuid() != 0) return "network namespaces need root";
    if (IpProgram().empty()) return "no `ip` program (iproute2)";
    return "";
  }

  VirtualHosts() : prefix_("ztask-h" + std::to_string(::getpid()) + "-") {
    RemoveAbandoned();
    home_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  }
  ~VirtualHosts() {
    Leave();
    for (const auto& [name, number] : hosts_) Remove(Namespace(name));
    if (switched_) Remove(prefix_ + "switch");
    if (home_ >= 0) ::close(home_);
  }
  VirtualHosts(const VirtualHosts&) = delete;
  VirtualHosts& operator=(const VirtualHosts&) = delete;

  // Makes host `name` (at most 8 letters) at 10.77.0.N, N its rank among
  // the hosts made (kept when it is made again after Vanish). Returns ""
  // or what failed, in one line.
  std::string Add(const std::string& name) {
    if (!switched_) {
      const std::string sw = prefix_ + "switch";
      if (std::string e = Ip({"netns", "add", sw}); !e.empty()) return e;
      switched_ = true;
      if (std::string e = Ip({"-n", sw, "link", "add", "br0", "type", "bridge"}); !e.empty()) {
        return e;
      }
      if (std::string e = Ip({"-n", sw, "link", "set", "br0", "up"}); !e.empty()) return e;
    }
    if (name.empty() || name.size() > 8 ||
        name.find_first_not_of("abcdefghijklmnopqrstuvwxyz") != std::string::npos) {
      return "a host's name is 1 to 8 lower-case letters, not '" + name + "'";
    }
    hosts_.emplace(name, static_cast<int>(hosts_.size()) + 1);  // a name made again keeps N
    const std::string ns = Namespace(name), port = "p-" + name, sw = prefix_ + "switch";
    for (const std::vector<std::string>& step : std::vector<std::vector<std::string>>{
             {"netns", "add", ns},
             {"-n", sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns},
             {"-n", sw, "link", "set", port, "master", "br0", "up"},
             {"-n", ns, "link", "set", "lo", "up"},
             {"-n", ns, "addr", "add", Address(name) + "/24", "dev", "eth0"},
             {"-n", ns, "link", "set", "eth0", "up"}}) {
      if (std::string e = Ip(step); !e.empty()) return e;
    }
    return "";
  }

  std::string Address(const std::string& name) const {
    return "10.77.0." + std::to_string(hosts_.at(name));
  }
  std::string Namespace(const std::string& name) const { return prefix_ + name; }

  // argv run on host `name` (for ChildProcess).
  std::vector<std::string> On(const std::string& name, const std::vector<std::string>& argv) const {
    std::vector<std::string> all = {IpProgram(), "netns", "exec", Namespace(name)};
    all.insert(all.end(), argv.begin(), argv.end());
    return all;
  }

  // The host's interface down (its cable cut: nothing leaves or reaches it,
  // and nothing is closed) or up again. Returns "" or what failed.
  std::string SetLink(const std::string& name, bool up) {
    return Ip({"-n", Namespace(name), "link", "set", "eth0", up ? "up" : "down"});
  }

  // The host is gone at once, as a machine that loses power: its interface
  // is removed first (so that no FIN or RST leaves it), then every process
  // on it is SIGKILLed, then its namespace is removed. Add() makes it again
  // at the same address.
  void Vanish(const std::string& name) {
    (void)Ip({"-n", Namespace(name), "link", "del", "eth0"});
    Remove(Namespace(name));
  }

  // Moves the calling thread onto host `name`; false when it could not.
  bool Enter(const std::string& name) {
    const int fd = ::open(("/run/netns/" + Namespace(name)).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool ok = ::setns(fd, CLONE_NEWNET) == 0;
    ::close(fd);
    return ok;
  }
  // Back onto the machine's own network.
  void Leave() {
    if (home_ >= 0) (void)::setns(home_, CLONE_NEWNET);
  }

  // The processes on a namespace.
  std::vector<pid_t> Pids(const std::string& ns) const {
    std::vector<pid_t> pids;
    std::istringstream out(Run({IpProgram(), "netns", "pids", ns}).second);
    for (pid_t pid; out >> pid;) pids.push_back(pid);
    return pids;
  }

 private:
  // Runs a program to its end: its exit code and what it printed (both
  // streams). The arguments are ours (names of letters, digits and '-').
  static std::pair<int, std::string> Run(const std::vector<std::string>& argv) {
    std::string command;
    for (const auto& a : argv) command += a + " ";
    command += "2>&1";
    FILE* pipe = ::popen(command.c_str(), "r");
    if (!pipe) return {-1, "popen failed"};
    std::string out;
    char buffer[512];
    while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
    const int status = ::pclose(pipe);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
  }
  // `ip ARGS`: "" on success, else the command and what it said, one line.
  static std::string Ip(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {IpProgram()};
    argv.insert(argv.end(), args.begin(), args.end());
    auto [code, out] = Run(argv);
    if (code == 0) return "";
    std::string line = "ip";
    for (const auto& a : args) line += " " + a;
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    for (char& c : out) c = c == '\n' ? ' ' : c;
    return line + ": " + out;
  }

  // Kills every process on namespace `ns` and removes it.
  void Remove(const std::string& ns) const {
    for (int round = 0; round < 50; ++round) {
      const std::vector<pid_t> pids = Pids(ns);
      if (pids.empty()) break;
      for (pid_t pid : pids) ::kill(pid, SIGKILL);
      cluster::WaitFor([&] { return Pids(ns).empty(); }, std::chrono::milliseconds(200));
    }
    (void)Ip({"netns", "del", ns});
  }

  // Namespaces left by a run of these tests whose process is gone.
  void RemoveAbandoned() const {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/run/netns", ec)) {
      const std::string name = entry.path().filename();
      if (name.rfind("ztask-h", 0) != 0) continue;
      const size_t dash = name.find('-', 7);
      if (dash == std::string::npos) continue;
      const std::string pid = name.substr(7, dash - 7);
      if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
      if (cluster::ProcessRunning(std::stoi(pid))) continue;
      Remove(name);
    }
  }

  std::string prefix_;
  std::map<std::string, int> hosts_;  // name -> N of 10.77.0.N
  bool switched_ = false;
  int home_ = -1;
};

}  // namespace ztask::testing

#endif  // ZTASK_TESTS_HOSTS_VIRTUAL_HOSTS_H_
