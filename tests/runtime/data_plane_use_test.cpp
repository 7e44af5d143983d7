// dataPlaneUse: what the bench header, the results JSON and the window say of the planes a
// world's pairs use, as the workers choose them (runtime/run_job.cpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/sweep.h"

namespace arl {
namespace {

std::vector<WorkerInfo> world(const std::vector<std::string>& hosts,
                              std::vector<uint64_t> namespaces = {}) {
  std::vector<WorkerInfo> out;
  for (size_t r = 0; r < hosts.size(); ++r) {
    WorkerInfo w;
    w.rank = static_cast<int>(r);
    w.host = hosts[r];
    w.pidNamespace = namespaces.empty() ? 1 : namespaces[r];
    out.push_back(w);
  }
  return out;
}

TEST(DataPlaneUse, OneHostIsSharedMemory) {
  const DataPlaneUse u = dataPlaneUse(DataPlaneKind::Auto, world({"a", "a", "a"}));
  EXPECT_EQ(u.insideHosts, "shm");
  EXPECT_EQ(u.acrossHosts, "");
  EXPECT_EQ(u.hosts, 1);
  EXPECT_EQ(u.text, "shm (auto)");
}

TEST(DataPlaneUse, SeveralHostsSplitThePairs) {
  const DataPlaneUse u = dataPlaneUse(DataPlaneKind::Auto, world({"a", "a", "b", "b"}));
  EXPECT_EQ(u.insideHosts, "shm");
  EXPECT_EQ(u.acrossHosts, "tcp");
  EXPECT_EQ(u.hosts, 2);
  EXPECT_EQ(u.text, "shm inside hosts, tcp across (2 hosts)");
}

TEST(DataPlaneUse, HostsOfOneRankOnlyCross) {
  const DataPlaneUse u = dataPlaneUse(DataPlaneKind::Auto, world({"a", "b"}));
  EXPECT_EQ(u.insideHosts, "");
  EXPECT_EQ(u.text, "tcp across (2 hosts, one rank each)");
}

TEST(DataPlaneUse, AHostOfSeveralPidNamespacesIsTcp) {
  const DataPlaneUse one = dataPlaneUse(DataPlaneKind::Auto, world({"a", "a"}, {1, 2}));
  EXPECT_EQ(one.insideHosts, "tcp");
  EXPECT_EQ(one.text, "tcp (auto: several pid namespaces)");
}

TEST(DataPlaneUse, AnExplicitPlaneIsEveryPair) {
  const DataPlaneUse u = dataPlaneUse(DataPlaneKind::Zmq, world({"a", "a", "b", "b"}));
  EXPECT_EQ(u.insideHosts, "zmq");
  EXPECT_EQ(u.acrossHosts, "zmq");
  EXPECT_EQ(u.text, "zmq");
}

TEST(DataPlaneUse, TcpSplitsThePairsAcrossHosts) {
  const DataPlaneUse u = dataPlaneUse(DataPlaneKind::Tcp, world({"a", "a", "b", "b"}));
  EXPECT_EQ(u.insideHosts, "shm");
  EXPECT_EQ(u.acrossHosts, "tcp");
  EXPECT_EQ(u.text, "shm inside hosts, tcp across (2 hosts)");
}

TEST(DataPlaneUse, TcpOnOneHostIsEveryPair) {
  const DataPlaneUse u = dataPlaneUse(DataPlaneKind::Tcp, world({"a", "a", "a"}));
  EXPECT_EQ(u.insideHosts, "tcp");
  EXPECT_EQ(u.acrossHosts, "");
  EXPECT_EQ(u.text, "tcp");
}

}  // namespace
}  // namespace arl
