// A HubCore driven by a fake clock over a store in memory, no sockets, with
// helpers that read its actions. Shared by the hub's logic tests.
#ifndef ZTASK_TESTS_HUB_HUB_CORE_FIXTURE_H_
#define ZTASK_TESTS_HUB_HUB_CORE_FIXTURE_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "hub/hub_core.h"

namespace ztask::hub {

using FakeClock = base::ManualClock;

class HubCoreTest : public ::testing::Test {
 protected:
  void SetUp() override { Make({}); }
  void Make(HubCoreOptions options) {
    auto store = TaskStore::Open(":memory:");
    ASSERT_TRUE(store.ok());
    store_ = std::move(*store);
    core_ = std::make_unique<HubCore>(options, store_.get(), &clock_);
    core_->SetListening(true);
  }

  // Each event goes in with fresh actions, which the test then reads.
  HubActions& Register(const std::string& name, const std::string& uuid) {
    out_.Clear();
    protocol::RegistrationRequest request;
    request.uuid = uuid;
    request.name = name;
    request.host = "host";
    request.pid = 1;
    core_->Register(request, &out_);
    return out_;
  }
  HubActions& Heartbeat(int32_t id, const std::string& uuid) {
    out_.Clear();
    core_->Heartbeat({id, uuid}, &out_);
    return out_;
  }
  HubActions& Tick() {
    out_.Clear();
    core_->Tick(&out_);
    return out_;
  }

  // The kinds of the events in `actions`, in order.
  static std::vector<protocol::EventKind> Kinds(const HubActions& actions) {
    std::vector<protocol::EventKind> kinds;
    for (const auto& e : actions.events) kinds.push_back(e.kind);
    return kinds;
  }
  // The notices of `type` in `actions`.
  static size_t NoticesOf(const HubActions& actions, protocol::MsgType type) {
    size_t n = 0;
    for (const Notice& notice : actions.notices) n += notice.type == type;
    return n;
  }

  FakeClock clock_;
  std::unique_ptr<TaskStore> store_;
  std::unique_ptr<HubCore> core_;
  HubActions out_;
};

}  // namespace ztask::hub

#endif  // ZTASK_TESTS_HUB_HUB_CORE_FIXTURE_H_
