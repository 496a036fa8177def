// taskcontroller's command line: each flag reaches the part(s) that take it.
#include "controller/command_line.h"

#include <gtest/gtest.h>

namespace ztask::controller {
namespace {

TEST(ControllerFlags, AFlagBothTakeReachesBothAndTheRestTheirOwn) {
  ControllerFlags flags;
  ASSERT_EQ(ParseControllerFlags({"--durability", "power", "--profile-dir", "/p", "--db", "x.db",
                                  "--heartbeat-ms=200", "--scheme", "lru", "--hwm", "4",
                                  "--insecure", "--replay-window=0", "--log-level", "warn"},
                                 flags),
            std::nullopt);
  EXPECT_EQ(flags.hub.options.durability, "power");
  EXPECT_EQ(flags.scheduler.options.durability, "power");
  EXPECT_EQ(flags.hub.options.profile_dir, "/p");
  EXPECT_EQ(flags.scheduler.options.profile_dir, "/p");
  EXPECT_TRUE(flags.hub.options.insecure);
  EXPECT_TRUE(flags.scheduler.options.insecure);
  EXPECT_EQ(flags.hub.options.replay_window_s, 0);
  EXPECT_EQ(flags.scheduler.options.replay_window_s, 0);
  EXPECT_EQ(flags.hub.log_level, "warn");
  EXPECT_EQ(flags.scheduler.log_level, "warn");
  EXPECT_EQ(flags.hub.options.db, "x.db");
  EXPECT_EQ(flags.hub.options.heartbeat_ms, 200);
  EXPECT_EQ(flags.scheduler.options.scheme, "lru");
  EXPECT_EQ(flags.scheduler.options.hwm, 4u);
}

TEST(ControllerFlags, EachPartKeepsItsOwnDefaultUnlessTheFlagIsGiven) {
  ControllerFlags defaults;
  ASSERT_EQ(ParseControllerFlags({}, defaults), std::nullopt);
  EXPECT_EQ(defaults.hub.options.keep_finished, hub::HubOptions{}.keep_finished);
  EXPECT_EQ(defaults.scheduler.options.keep_finished, scheduler::SchedulerOptions{}.keep_finished);
  EXPECT_NE(defaults.hub.options.keep_finished, defaults.scheduler.options.keep_finished);
  EXPECT_EQ(defaults.scheduler.options.hwm, scheduler::kAdaptiveHwm);
  ControllerFlags given;
  ASSERT_EQ(ParseControllerFlags({"--keep-finished", "5000", "--ip", "127.0.0.2"}, given),
            std::nullopt);
  EXPECT_EQ(given.hub.options.keep_finished, 5000u);
  EXPECT_EQ(given.scheduler.options.keep_finished, 5000u);
  EXPECT_EQ(given.hub.options.ip, "127.0.0.2");
  EXPECT_EQ(given.scheduler.options.client_endpoint, "tcp://127.0.0.2:*");
  EXPECT_EQ(given.scheduler.options.engine_endpoint, "tcp://127.0.0.2:*");
}

TEST(ControllerFlags, AWrongCommandLineIsAUsageErrorAndHelpIsNot) {
  for (const std::vector<std::string>& wrong :
       std::vector<std::vector<std::string>>{{"--bogus"},
                                             {"stray"},
                                             {"--hwm", "x"},
                                             {"--heartbeat-ms", "x"},
                                             {"--keep-finished", "0"},
                                             {"--scheme", "nope"},
                                             {"--db"}}) {
    ControllerFlags flags;
    EXPECT_EQ(ParseControllerFlags(wrong, flags), 2) << wrong[0];
  }
  ControllerFlags flags;
  EXPECT_EQ(ParseControllerFlags({"--help"}, flags), 0);
  EXPECT_EQ(ParseControllerFlags({"--version"}, flags), 0);
}

}  // namespace
}  // namespace ztask::controller
