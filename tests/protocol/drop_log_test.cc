#include <gtest/gtest.h>

#include "protocol/wire.h"

namespace ztask::protocol {
namespace {

TEST(DropLog, CountsPerPeerAndPerReason) {
  DropLog log("test");
  log.Drop("alice", Status::BadSignature("wrong key"));
  log.Drop("alice", Status::BadSignature("wrong key"));
  log.Drop("bob", Status::Malformed("truncated"));
  log.Drop("bob", std::string("a heartbeat on the query socket"));
  EXPECT_EQ(log.count(), 4u);
  EXPECT_EQ(log.count_of("alice"), 2u);
  EXPECT_EQ(log.count_of("bob"), 2u);
  EXPECT_EQ(log.count_of("carol"), 0u);
  EXPECT_EQ(log.Summary(), "BadSignature 2, Malformed 1, Unexpected 1");
}

TEST(DropLog, AFloodFromManyPeersStaysBounded) {
  DropLog log("test");
  for (int i = 0; i < 100000; ++i) log.Drop("peer" + std::to_string(i), Status::Malformed("x"));
  EXPECT_EQ(log.count(), 100000u);
  EXPECT_EQ(log.count_of("peer1"), 1u);
  EXPECT_EQ(log.count_of("peer99999"), 0u);  // past the peers remembered: counted in all only
}

}  // namespace
}  // namespace ztask::protocol
