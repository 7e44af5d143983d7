// SplitTransport: each peer's messages go over the plane chosen for it, and nowhere else; the
// placement by host and pid namespace; the joined endpoints of a rank on both planes.
#include "transport/split_transport.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>

#include "base/errors.h"
#include "transport/loopback.h"

namespace arl {
namespace {

using namespace std::chrono_literals;

ChunkHeader header(int src, uint32_t step) {
  ChunkHeader h;
  h.src = src;
  h.step = step;
  return h;
}

int valueOf(const InMessage& m) {
  int v = 0;
  EXPECT_EQ(m.size(), sizeof v);
  std::memcpy(&v, m.data(), sizeof v);
  return v;
}

TEST(SplitTransport, SendsEachPeerOverItsOwnPlane) {
  LoopbackFabric near(4), far(4);
  // Rank 0 shares its host with rank 1; ranks 2 and 3 are elsewhere.
  SplitTransport t(near.transport(0), far.transport(0), {false, true, false, false});
  const int a = 11, b = 22;
  t.send(1, header(0, 0), &a, sizeof a);
  t.send(2, header(0, 0), &b, sizeof b);
  EXPECT_EQ(valueOf(*near.transport(1).recv(0, 0, 1s)), 11);
  EXPECT_EQ(valueOf(*far.transport(2).recv(0, 0, 1s)), 22);
  EXPECT_FALSE(far.transport(1).ready(0, 0)) << "nothing for rank 1 on the far plane";
  EXPECT_FALSE(near.transport(2).ready(0, 0)) << "nothing for rank 2 on the near plane";

  const int c = 33, d = 44;
  near.transport(1).send(0, header(1, 1), &c, sizeof c);
  far.transport(3).send(0, header(3, 1), &d, sizeof d);
  EXPECT_TRUE(t.ready(1, 1));
  EXPECT_EQ(valueOf(*t.recv(3, 1, 1s)), 44);
  EXPECT_EQ(valueOf(*t.recv(1, 1, 1s)), 33);
}

TEST(SplitTransport, AbortEndsWaitsOnBothPlanes) {
  LoopbackFabric near(2), far(2);
  SplitTransport t(near.transport(0), far.transport(0), {false, true});
  t.abort();
  EXPECT_THROW(t.recv(1, 0, 5s), PeerError);
  EXPECT_THROW(far.transport(0).recv(1, 0, 5s), PeerError);
}

// A far plane that holds sends back (the TCP plane's held sends) is flushed before this rank
// could wait on the near plane, and only then.
TEST(SplitTransport, FlushesTheFarPlaneBeforeWaitingOnTheNearOne) {
  LoopbackFabric near(3), far(3);
  int flushes = 0;
  SplitTransport t(near.transport(0), far.transport(0), {false, true, false}, [&] { ++flushes; });
  EXPECT_FALSE(t.ready(1, 0));
  EXPECT_EQ(flushes, 1) << "a near receive that would wait";
  EXPECT_FALSE(t.ready(2, 0));
  EXPECT_FALSE(t.arrived(2));
  EXPECT_EQ(flushes, 1) << "the far plane's own receives flush it themselves";
  const int a = 5;
  near.transport(1).send(0, header(1, 0), &a, sizeof a);
  EXPECT_TRUE(t.ready(1, 0));
  EXPECT_EQ(valueOf(*t.recv(1, 0, 1s)), 5);
  EXPECT_EQ(flushes, 1) << "nothing to wait for";
  EXPECT_FALSE(t.arrived(1));
  EXPECT_EQ(flushes, 2);
  near.transport(0).abort();
  EXPECT_THROW(t.recv(1, 1, 5s), PeerError);
  EXPECT_EQ(flushes, 3) << "a near receive that waits";
}

TEST(SplitTransport, RefusesPlanesOfDifferentWorlds) {
  LoopbackFabric near(2), far(3);
  EXPECT_THROW(SplitTransport(near.transport(0), far.transport(0), {false, true}), ConfigError);
  LoopbackFabric other(2);
  EXPECT_THROW(SplitTransport(near.transport(0), other.transport(0), {false}), ConfigError);
}

TEST(SplitTransport, PlacesPeersByHostAndPidNamespace) {
  const std::vector<std::string> hosts = {"a", "a", "b", "b", "a"};
  EXPECT_EQ(sameHostPeers(hosts, {}, 0), (std::vector<bool>{false, true, false, false, true}));
  EXPECT_EQ(sameHostPeers(hosts, {}, 3), (std::vector<bool>{false, false, true, false, false}));
  // Rank 4 is on host a but in a pid namespace of its own (a container).
  EXPECT_EQ(sameHostPeers(hosts, {7, 7, 7, 7, 9}, 0),
            (std::vector<bool>{false, true, false, false, false}));
}

TEST(SplitTransport, JoinsAndSplitsEndpoints) {
  const std::string both = joinEndpoints("shm://arl-dp-1-ns2-r0", "tcp://10.77.0.10:4000");
  EXPECT_EQ(both, "shm://arl-dp-1-ns2-r0,tcp://10.77.0.10:4000");
  EXPECT_EQ(endpointOfScheme(both, "shm://"), "shm://arl-dp-1-ns2-r0");
  EXPECT_EQ(endpointOfScheme(both, "tcp://"), "tcp://10.77.0.10:4000");
  EXPECT_EQ(joinEndpoints("", "tcp://h:1"), "tcp://h:1");
  EXPECT_EQ(joinEndpoints("shm://x", ""), "shm://x");
  EXPECT_EQ(endpointOfScheme("shm://x", "tcp://"), "");
}

}  // namespace
}  // namespace arl
