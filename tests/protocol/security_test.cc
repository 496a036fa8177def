#include "protocol/security.h"

#include <gtest/gtest.h>

namespace ztask::protocol {
namespace {

TEST(Security, OnlyLoopbackAddressesAreLoopback) {
  for (const char* ip : {"127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"}) {
    EXPECT_TRUE(IsLoopback(ip)) << ip;
  }
  for (const char* ip : {"0.0.0.0", "*", "10.0.0.5", "192.168.1.2", "::", "1270.0.0.1", ""}) {
    EXPECT_FALSE(IsLoopback(ip)) << ip;
  }
}

TEST(Security, CurveIsOnBeyondLoopbackUnlessRefusedAndWhenAskedFor) {
  EXPECT_FALSE(CurveWanted("127.0.0.1", false, false, "test"));
  EXPECT_TRUE(CurveWanted("127.0.0.1", true, false, "test"));
  EXPECT_TRUE(CurveWanted("0.0.0.0", false, false, "test"));
  EXPECT_TRUE(CurveWanted("10.1.2.3", false, false, "test"));
  EXPECT_FALSE(CurveWanted("0.0.0.0", false, true, "test"));
  EXPECT_TRUE(CurveWanted("0.0.0.0", true, true, "test")) << "--curve wins";
}

}  // namespace
}  // namespace ztask::protocol
