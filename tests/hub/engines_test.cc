// The hub's decisions about engines (hub/hub_core.h), with a fake clock and
// no sockets: registration, heartbeats, their expiry, supervisors' reports.
#include <gtest/gtest.h>

#include "tests/hub/hub_core_fixture.h"

namespace ztask::hub {
namespace {

using protocol::EventKind;
using protocol::MsgType;

TEST_F(HubCoreTest, ARegisteredEngineGetsItsIdAndTheSchedulerHearsOfIt) {
  HubActions& out = Register("a", "u1");
  ASSERT_TRUE(out.registration_reply.has_value());
  EXPECT_TRUE(out.registration_reply->ok);
  EXPECT_EQ(out.registration_reply->engine_id, 0);
  EXPECT_EQ(out.registration_reply->heartbeat_ms, 1000);
  ASSERT_EQ(out.notices.size(), 1u);
  EXPECT_EQ(out.notices[0].type, MsgType::kEngineRegistered);
  EXPECT_EQ(out.notices[0].info.name, "a");
  ASSERT_EQ(Kinds(out), (std::vector{EventKind::kEngineRegistered}));
  EXPECT_EQ(out.events[0].engine_id, 0);
  EXPECT_EQ(out.events[0].text, "a");
  EXPECT_EQ(out.events[0].seq, 1);
  EXPECT_EQ(out.events[0].at_us, clock_.WallMicros());
}

TEST_F(HubCoreTest, ARestartedEngineReplacesItsOldLifeWhichIsGoneFirst) {
  Register("a", "u1");
  HubActions& out = Register("a", "u2");
  EXPECT_EQ(out.registration_reply->engine_id, 0) << "the name keeps its id";
  ASSERT_EQ(out.notices.size(), 2u);
  EXPECT_EQ(out.notices[0].type, MsgType::kEngineUnregistered);
  EXPECT_EQ(out.notices[0].ref.uuid, "u1");
  EXPECT_EQ(out.notices[1].type, MsgType::kEngineRegistered);
  EXPECT_EQ(Kinds(out),
            (std::vector{EventKind::kEngineUnregistered, EventKind::kEngineRegistered}));
  EXPECT_EQ(out.events[0].text, "restarted");
}

TEST_F(HubCoreTest, RegistrationsPastTheLimitAreRefusedButRestartsAreNot) {
  Make({.max_engines = 1});
  Register("a", "u1");
  HubActions& refused = Register("b", "u2");
  ASSERT_TRUE(refused.registration_reply.has_value());
  EXPECT_FALSE(refused.registration_reply->ok);
  EXPECT_NE(refused.registration_reply->error.find("--max-engines"), std::string::npos);
  EXPECT_TRUE(refused.notices.empty());
  EXPECT_EQ(core_->refused_registrations(), 1u);
  ASSERT_EQ(refused.log.size(), 1u) << "the first refusal is logged";
  EXPECT_EQ(refused.log[0].level, LogLine::Level::kWarning);
  EXPECT_TRUE(Register("a", "u3").registration_reply->ok) << "a restart of a known name";
}

TEST_F(HubCoreTest, AHeartbeatIsEchoedOnlyForARegisteredEngine) {
  Register("a", "u1");
  HubActions& beat = Heartbeat(0, "u1");
  ASSERT_TRUE(beat.heartbeat.has_value());
  EXPECT_EQ(beat.heartbeat->uuid, "u1");
  EXPECT_FALSE(beat.registration_reply.has_value());
  HubActions& stranger = Heartbeat(5, "unknown");
  EXPECT_FALSE(stranger.heartbeat.has_value());
  ASSERT_TRUE(stranger.registration_reply.has_value()) << "told to register again";
  EXPECT_FALSE(stranger.registration_reply->ok);
  EXPECT_EQ(stranger.registration_reply->error, "not registered");
}

TEST_F(HubCoreTest, AnEngineSilentForItsMissedHeartbeatsIsLost) {
  Register("a", "u1");
  Register("b", "u2");
  clock_.AdvanceSeconds(2.5);
  Heartbeat(1, "u2");
  clock_.AdvanceSeconds(0.6);  // a: 3.1 s of silence; b: 0.6 s
  HubActions& out = Tick();
  ASSERT_EQ(NoticesOf(out, MsgType::kEngineUnregistered), 1u);
  EXPECT_EQ(out.notices[0].ref.uuid, "u1");
  EXPECT_EQ(Kinds(out), (std::vector{EventKind::kEngineUnregistered}));
  EXPECT_EQ(out.events[0].text, "missed its heartbeats");
  EXPECT_EQ(core_->registry().size(), 1u);
  EXPECT_FALSE(Heartbeat(0, "u1").heartbeat.has_value()) << "lost: it must register again";
}

TEST_F(HubCoreTest, TimeTheHubDidNotRunIsNotCountedAgainstTheEngines) {
  Register("a", "u1");
  Register("b", "u2");
  Tick();
  // The hub stopped for 10 s (a wait of 3 s): the engines' heartbeats of
  // that time wait unread. Its first look after is no loss.
  clock_.AdvanceSeconds(10);
  HubActions& after = Tick();
  EXPECT_EQ(NoticesOf(after, MsgType::kEngineUnregistered), 0u);
  EXPECT_EQ(core_->registry().size(), 2u);
  ASSERT_FALSE(after.log.empty());
  EXPECT_NE(after.log.back().text.find("did not run for 10000 ms"), std::string::npos)
      << after.log.back().text;
  // It runs again, looking every 50 ms: only "b" is heard from. The pause
  // counted as a quarter of the wait (0.75 s); "a" is lost once silent for
  // the rest of it (2.25 s) while the hub ran.
  for (int i = 0; i < 44; ++i) {
    clock_.AdvanceSeconds(0.05);
    Heartbeat(1, "u2");
    EXPECT_EQ(NoticesOf(Tick(), MsgType::kEngineUnregistered), 0u) << i;
  }
  bool lost = false;
  for (int i = 0; i < 40 && !lost; ++i) {
    clock_.AdvanceSeconds(0.05);
    Heartbeat(1, "u2");
    HubActions& look = Tick();
    lost = NoticesOf(look, MsgType::kEngineUnregistered) == 1;
    if (lost) {
      EXPECT_EQ(look.notices[0].ref.uuid, "u1");
    }
  }
  EXPECT_TRUE(lost) << "silent past the wait while the hub ran";
  EXPECT_EQ(core_->registry().size(), 1u);
}

TEST_F(HubCoreTest, ManyEnginesStretchTheHeartbeatPeriodWhichNeverShortens) {
  Register("e0", "u0");
  EXPECT_EQ(Heartbeat(0, "u0").heartbeat->heartbeat_ms, 1000) << "a few engines: as asked";
  // At 1.5 s, 3,000 engines send the most heartbeats a second.
  const int n = 3 * HubCore::kMostHeartbeatsPerSecond / 2;
  for (int i = 1; i < n; ++i) Register("e" + std::to_string(i), "u" + std::to_string(i));
  EXPECT_EQ(out_.registration_reply->heartbeat_ms, 1500)
      << "the last one is told the stretched period";
  EXPECT_EQ(core_->HeartbeatMs(), 1500);
  HubActions& beat = Heartbeat(0, "u0");
  ASSERT_TRUE(beat.heartbeat.has_value());
  EXPECT_EQ(beat.heartbeat->heartbeat_ms, 1500) << "an engine registered earlier learns it";
  // The wait for a silent engine stretches with it: 3 × 1.5 s.
  for (int i = 0; i < n; ++i) Heartbeat(i, "u" + std::to_string(i));
  clock_.AdvanceSeconds(4.4);
  EXPECT_EQ(NoticesOf(Tick(), MsgType::kEngineUnregistered), 0u);
  for (int i = 1; i < n; ++i) Heartbeat(i, "u" + std::to_string(i));
  clock_.AdvanceSeconds(0.4);
  EXPECT_EQ(NoticesOf(Tick(), MsgType::kEngineUnregistered), 1u)
      << "4.8 s silent: lost at the next look, a quarter period later";
  // Engines leaving do not shorten it: one still beating at the stretched
  // period would otherwise be taken for lost.
  for (int i = 2; i < n; ++i) core_->Unregister({i, "u" + std::to_string(i)}, &out_);
  EXPECT_EQ(core_->registry().size(), 1u);
  EXPECT_EQ(Heartbeat(1, "u1").heartbeat->heartbeat_ms, 1500);
}

TEST_F(HubCoreTest, LiveEnginesAreAnnouncedAgainEveryHeartbeatPeriod) {
  Register("a", "u1");
  EXPECT_EQ(NoticesOf(Tick(), MsgType::kEngineRegistered), 1u);
  clock_.AdvanceSeconds(0.5);
  Heartbeat(0, "u1");
  EXPECT_EQ(NoticesOf(Tick(), MsgType::kEngineRegistered), 0u) << "not yet";
  clock_.AdvanceSeconds(0.5);
  EXPECT_EQ(NoticesOf(Tick(), MsgType::kEngineRegistered), 1u);
}

TEST_F(HubCoreTest, ASupervisorsReportDrainsOrRemovesAnEngine) {
  Register("a", "u1");
  out_.Clear();
  core_->EngineReported({"a", EngineState::kDraining, 0, "scaling down"}, &out_);
  ASSERT_EQ(NoticesOf(out_, MsgType::kEngineDraining), 1u);
  ASSERT_EQ(Kinds(out_), (std::vector{EventKind::kEngineState}));
  EXPECT_EQ(out_.events[0].status, protocol::EventStatus::kDraining);
  EXPECT_EQ(NoticesOf(Tick(), MsgType::kEngineDraining), 1u) << "draining is announced again";
  out_.Clear();
  core_->EngineReported({"a", EngineState::kRestarting, 1, "exited"}, &out_);
  EXPECT_EQ(NoticesOf(out_, MsgType::kEngineUnregistered), 1u) << "no wait for heartbeats";
  EXPECT_EQ(Kinds(out_), (std::vector{EventKind::kEngineUnregistered, EventKind::kEngineState}));
  EXPECT_EQ(core_->registry().size(), 0u);
}

TEST_F(HubCoreTest, NoEventIsMadeWhileNobodyListens) {
  core_->SetListening(false);
  HubActions& out = Register("a", "u1");
  EXPECT_TRUE(out.events.empty());
  EXPECT_EQ(out.notices.size(), 1u) << "the scheduler hears of it all the same";
  core_->SetListening(true);
  EXPECT_EQ(Register("b", "u2").events.at(0).seq, 1) << "events are numbered as made";
}

TEST_F(HubCoreTest, AFailingStoreIsAnnouncedOnceUntilItIsWrittenAgain) {
  out_.Clear();
  core_->Flushed(Status::IoError("disk full"), &out_);
  ASSERT_EQ(Kinds(out_), (std::vector{EventKind::kStoreError}));
  EXPECT_EQ(out_.events[0].text, "disk full");
  out_.Clear();
  core_->Flushed(Status::IoError("disk full"), &out_);
  EXPECT_TRUE(out_.events.empty());
  EXPECT_TRUE(out_.log.empty());
  out_.Clear();
  core_->Flushed(Status::Ok(), &out_);
  ASSERT_EQ(out_.log.size(), 1u);
  EXPECT_EQ(out_.log[0].text, "the task database is written again");
}

}  // namespace
}  // namespace ztask::hub
