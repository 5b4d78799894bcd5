// Copyright dreplay authors.

#include "protocol/host_port.h"

#include <string>

#include "gtest/gtest.h"

namespace dreplay::protocol {
namespace {

TEST(ParseHostPortTest, SplitsAtTheLastColonAndNamesBadValues) {
  std::string host;
  uint16_t port = 0;
  ASSERT_TRUE(ParseHostPort("10.0.0.2:7471", &host, &port).ok());
  EXPECT_EQ(host, "10.0.0.2");
  EXPECT_EQ(port, 7471);
  ASSERT_TRUE(ParseHostPort("127.0.0.1:0", &host, &port).ok());
  EXPECT_EQ(port, 0);
  for (const char* bad : {"localhost", ":80", "host:", "host:65536", "host:x1"}) {
    const absl::Status s = ParseHostPort(bad, &host, &port);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(bad), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace dreplay::protocol
