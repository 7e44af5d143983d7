// TCP endpoints (base/endpoint.h): split into host and port, IPv6 hosts in brackets, the
// host as an address, and the wildcard hosts that only a bind may use.
#include "base/endpoint.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace arl {
namespace {

TEST(Endpoint, SplitsAtTheLastColon) {
  const auto ep = splitTcp("tcp://10.0.0.5:41234");
  ASSERT_TRUE(ep);
  EXPECT_EQ(ep->host, "10.0.0.5");
  EXPECT_EQ(ep->port, "41234");
  const auto named = splitTcp("tcp://node-3.lab:*");
  ASSERT_TRUE(named);
  EXPECT_EQ(named->host, "node-3.lab");
  EXPECT_EQ(named->port, "*");
  // The port is the caller's to check.
  const auto empty = splitTcp("tcp://host:");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->port, "");
}

// An IPv6 host keeps its brackets, so host and port join into the endpoint again.
TEST(Endpoint, AnIPv6HostKeepsItsBrackets) {
  const auto ep = splitTcp("tcp://[fe80::1:2]:5555");
  ASSERT_TRUE(ep);
  EXPECT_EQ(ep->host, "[fe80::1:2]");
  EXPECT_EQ(ep->port, "5555");
  EXPECT_EQ("tcp://" + ep->host + ":" + ep->port, "tcp://[fe80::1:2]:5555");
  // ZeroMQ's unbracketed form of the wildcard.
  const auto wild = splitTcp("tcp://:::5555");
  ASSERT_TRUE(wild);
  EXPECT_EQ(wild->host, "::");
  EXPECT_EQ(wild->port, "5555");
}

TEST(Endpoint, RefusesWhatIsNotHostColonPortOverTcp) {
  for (const char* bad :
       {"ipc:///tmp/x.sock", "inproc://a", "10.0.0.5:5555", "tcp://", "tcp://host", "tcp://:5555",
        "tcp://[::1]", "tcp://[::1:5555", "tcp://::1]:5555", "tcp://[]:5555", "TCP://host:1"}) {
    EXPECT_FALSE(splitTcp(bad).has_value()) << bad;
  }
}

TEST(Endpoint, TheHostOfAnEndpointIsAnAddressWithoutBrackets) {
  EXPECT_EQ(tcpHostOf("tcp://10.0.0.5:41234"), "10.0.0.5");
  EXPECT_EQ(tcpHostOf("tcp://[::1]:5555"), "::1");
  EXPECT_EQ(tcpHostOf("tcp://node-3.lab:*"), "node-3.lab");
  EXPECT_EQ(tcpHostOf("ipc:///tmp/arl/rank0.sock"), "");
  EXPECT_EQ(tcpHostOf("tcp://[::1]"), "");
}

TEST(Endpoint, WildcardHostsAreEveryInterface) {
  for (const char* w : {"*", "0.0.0.0", "::", "[::]"}) EXPECT_TRUE(isWildcardHost(w)) << w;
  for (const char* h : {"127.0.0.1", "[::1]", "::1", "localhost", "", "0.0.0.1"}) {
    EXPECT_FALSE(isWildcardHost(h)) << h;
  }
}

// What a listen needs no keys for (docs/security.md): this machine alone.
TEST(Endpoint, LoopbackHostsAreThisMachineAlone) {
  for (const char* h : {"127.0.0.1", "127.1.2.3", "[::1]", "::1", "localhost"}) {
    EXPECT_TRUE(isLoopbackHost(h)) << h;
  }
  for (const char* h : {"*", "0.0.0.0", "10.0.0.5", "::", "[::]", "example.org", ""}) {
    EXPECT_FALSE(isLoopbackHost(h)) << h;
  }
}

}  // namespace
}  // namespace arl
