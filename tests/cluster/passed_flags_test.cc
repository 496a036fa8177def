#include "cluster/passed_flags.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ztask::cluster {
namespace {

using Words = std::vector<std::string>;

// `taskcluster start` with `args`: what it would pass on, or the parse error.
struct Start {
  CLI::App app{"test"};
  CLI::App* start = app.add_subcommand("start");
  std::vector<std::vector<std::string>> given;
  Start() { AddEveryPassedFlag(*start, given); }
  std::string Parse(Words args) {
    args.insert(args.begin(), "start");
    std::vector<const char*> argv{"taskcluster"};
    for (const auto& a : args) argv.push_back(a.c_str());
    try {
      app.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::ParseError& e) {
      return e.what();
    }
    return "";
  }
};

// A daemon's own command line holding just `flag`, bound to a T.
template <class T>
std::string DaemonParse(const std::string& flag, const std::string& value) {
  CLI::App app{"daemon"};
  T bound{};
  AddPassedFlag(app, flag, bound);
  std::vector<const char*> argv{"daemon", flag.c_str(), value.c_str()};
  try {
    app.parse(3, argv.data());
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

TEST(PassedFlags, EachGoesOnlyToTheDaemonsThatTakeIt) {
  Start s;
  ASSERT_EQ(s.Parse({"--slots", "2", "--keep-finished", "5", "--heartbeat-ms", "100",
                     "--resource", "gpus=2", "--resource", "fpga=1", "--max-task-bytes", "9"}),
            "");
  EXPECT_EQ(PassedOnTo(kEngine, s.given),
            (Words{"--slots", "2", "--resource", "gpus=2", "--resource", "fpga=1"}));
  EXPECT_EQ(PassedOnTo(kHub, s.given), (Words{"--keep-finished", "5", "--heartbeat-ms", "100"}));
  EXPECT_EQ(PassedOnTo(kScheduler, s.given),
            (Words{"--keep-finished", "5", "--max-task-bytes", "9"}));
}

TEST(PassedFlags, NothingGivenPassesNothing) {
  Start s;
  ASSERT_EQ(s.Parse({}), "");
  for (Daemon d : {kHub, kScheduler, kEngine}) EXPECT_TRUE(PassedOnTo(d, s.given).empty());
}

TEST(PassedFlags, TaskclusterRefusesWhatTheDaemonRefusesWithTheSameWords) {
  struct Case {
    std::string flag, bad, good;
  };
  for (const Case& c : std::vector<Case>{{"--heartbeat-ms", "5", "100"},
                                         {"--heartbeat-misses", "0", "2"},
                                         {"--slots", "0", "4"},
                                         {"--socket-hwm", "0", "10"},
                                         {"--keep-finished", "0", "10"},
                                         {"--replay-window", "-1", "0"},
                                         {"--max-task-bytes", "0", "100"},
                                         {"--max-output-bytes", "-5", "100"}}) {
    SCOPED_TRACE(c.flag);
    Start bad;
    const std::string cluster_error = bad.Parse({c.flag, c.bad});
    const std::string daemon_error = DaemonParse<double>(c.flag, c.bad);
    EXPECT_NE(cluster_error, "");
    EXPECT_EQ(cluster_error, daemon_error);
    Start good;
    EXPECT_EQ(good.Parse({c.flag, c.good}), "");
    EXPECT_EQ(DaemonParse<double>(c.flag, c.good), "");
  }
  for (const char* value : {"process", "power"}) {
    EXPECT_EQ(DaemonParse<std::string>("--durability", value), "");
  }
  Start durability;
  EXPECT_EQ(durability.Parse({"--durability", "disk"}),
            DaemonParse<std::string>("--durability", "disk"));
  EXPECT_NE(DaemonParse<std::string>("--durability", "disk"), "");
  Start send_ahead;
  EXPECT_NE(send_ahead.Parse({"--send-ahead", "maybe"}), "");
  EXPECT_EQ(DaemonParse<bool>("--send-ahead", "off"), "");
}

TEST(PassedFlags, AResourceNamedTwiceIsRefused) {
  Start s;
  EXPECT_NE(s.Parse({"--resource", "gpus=2", "--resource", "gpus=4"}), "");
  Start bad;
  EXPECT_NE(bad.Parse({"--resource", "gpus"}), "");
}

}  // namespace
}  // namespace ztask::cluster
