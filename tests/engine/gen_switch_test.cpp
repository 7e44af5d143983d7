// The switch generator (in-network reduction): the verifier proves it at every rank count
// 2..33 and more, with many counts and slices, in and out of place; the switch's buffers
// hold no result and its Input is never read; each rank sends and receives S once; the
// verifier catches a switch that counts a rank twice or forgets one; the closed form agrees
// with the simulation of the schedule.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "model/model.h"
#include "schedule/generators.h"
#include "schedule/play_rank.h"
#include "schedule/verifier.h"

namespace arl {
namespace {

GenParams params(int n, uint64_t count, uint64_t slice) {
  GenParams p;
  p.nranks = n;
  p.count = count;
  p.sliceElems = slice;
  return p;
}

std::string describe(const GenParams& p) {
  return "n=" + std::to_string(p.nranks) + " count=" + std::to_string(p.count) +
         " slice=" + std::to_string(p.sliceElems);
}

TEST(GenSwitch, VerifiesAtEveryRankCountCountAndSlice) {
  for (int n = 1; n <= 33; ++n) {
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, static_cast<uint64_t>(n + 1), uint64_t{7},
                           uint64_t{100}, uint64_t{1000}}) {
      for (uint64_t slice : {uint64_t{1}, uint64_t{3}, uint64_t{64}, uint64_t{1024}}) {
        if (count == 1000 && slice < 64) continue;
        const GenParams p = params(n, count, slice);
        const Schedule s = generate("switch", p);
        const VerifyResult v = verify(s);
        EXPECT_TRUE(v.ok) << describe(p) << ": " << v.message;
        EXPECT_EQ(s.nranks, n + 1) << describe(p);
        EXPECT_EQ(s.nonResultRanks, 1) << describe(p);
        EXPECT_EQ(resultRanks(s), n) << describe(p);
      }
    }
  }
  // The last rank count the 64-bit rank sets hold beside a switch, and one past it.
  EXPECT_TRUE(verify(generate("switch", params(63, 100, 16))).ok);
  EXPECT_THROW(generate("switch", params(64, 100, 16)), GenError);
}

// Each rank sends S once and receives S once; the switch receives n S and sends n S. Two
// steps: the reduce into the switch and its multicast.
TEST(GenSwitch, EachRankSendsAndReceivesTheVectorOnce) {
  for (int n : {1, 2, 5, 16}) {
    const uint64_t count = 1000;
    const Schedule s = generate("switch", params(n, count, 64));
    EXPECT_EQ(s.nsteps, 2u);
    for (int r = 0; r <= n; ++r) {
      uint64_t sent = 0, received = 0, reduced = 0;
      for (const Op& op : s.ranks[static_cast<size_t>(r)]) {
        if (opSends(op.kind)) {
          sent += op.count;
          EXPECT_TRUE(r == n || op.sendPeer == n) << "rank " << r << " sends past the switch";
        }
        if (opRecvs(op.kind)) received += op.count;
        if (opReduces(op.kind)) reduced += op.count;
        if (r == n && opReadsSrc(op.kind)) {
          EXPECT_NE(op.src.buf, Buffer::Input) << "the switch reads an Input it does not have";
        }
      }
      const uint64_t ways = r == n ? static_cast<uint64_t>(n) : 1;
      EXPECT_EQ(sent, ways * count) << "n=" << n << " rank " << r;
      EXPECT_EQ(received, ways * count) << "n=" << n << " rank " << r;
      EXPECT_EQ(reduced, r == n ? (ways - 1) * count : 0) << "n=" << n << " rank " << r;
    }
    EXPECT_EQ(bytesSent(s, 0, DataType::Float), count * 4);
    EXPECT_EQ(bytesSent(s, n, DataType::Float), static_cast<uint64_t>(n) * count * 4);
  }
  EXPECT_EQ(helperWorkers("switch"), 1);
  EXPECT_EQ(helperWorkers("ring"), 0);
  EXPECT_TRUE(algorithmSupports("switch", Collective::AllReduce));
  EXPECT_FALSE(algorithmSupports("switch", Collective::Broadcast));
}

// The verifier holds non-result ranks to no result but to everything else.
TEST(GenSwitch, TheVerifierCatchesADoubleCountAndAMissingRank) {
  // One slice: rank 0 sends it twice, and the switch adds it a second time after rank 3's.
  Schedule twice = generate("switch", params(4, 10, 10));
  auto& rank0 = twice.ranks[0];
  rank0.insert(rank0.begin() + 1, rank0.front());
  auto& sw4 = twice.ranks[4];
  ASSERT_EQ(sw4[3].recvPeer, 3);
  Op again = sw4[3];
  again.recvPeer = 0;
  sw4.insert(sw4.begin() + 4, again);
  const VerifyResult bad = verify(twice);
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.message.find("double-counted contribution of rank 0"), std::string::npos)
      << bad.message;

  Schedule dropped = generate("switch", params(3, 10, 10));
  auto& sw = dropped.ranks[3];
  // The switch forgets rank 2: it neither takes its slice nor sends it the sum, and rank 2
  // neither sends nor receives.
  std::erase_if(sw, [](const Op& op) { return op.recvPeer == 2 || op.sendPeer == 2; });
  dropped.ranks[2].clear();
  const VerifyResult missing = verify(dropped);
  EXPECT_FALSE(missing.ok);
  EXPECT_NE(missing.message.find("missing"), std::string::npos) << missing.message;

  // A switch that reads its own Input reads what it never had.
  Schedule reads = generate("switch", params(2, 10, 10));
  reads.ranks[2].front() = Op{OpKind::RecvReduceCopy,
                              Phase::Reduce,
                              -1,
                              0,
                              {Buffer::Input, 0},
                              {Buffer::Output, 0},
                              10,
                              0,
                              0,
                              0,
                              0};
  const VerifyResult input = verify(reads);
  EXPECT_FALSE(input.ok);
  EXPECT_NE(input.message.find("holds no data"), std::string::npos) << input.message;
}

// Bandwidth-bound, the switch worker's egress carries n S + sigma per back-to-back iteration:
// the closed form and the simulation of the schedule agree within 10 %; with few bytes the
// two alpha terms dominate and they agree within 25 %.
TEST(GenSwitch, ClosedFormAgreesWithTheSimulation) {
  ModelParams p;
  p.beta = 1.0 / 200e6;
  for (int n : {2, 3, 4, 8, 16}) {
    for (uint64_t bytes : {uint64_t{4000}, uint64_t{1} << 20, uint64_t{16} << 20}) {
      CostQuery q;
      q.algorithm = "switch";
      q.nranks = n;
      q.bytes = bytes;
      q.sliceBytes = 64 << 10;
      const double closed = closedForm(q).seconds(p);
      const double sim = simulatedSeconds(q, p);
      const double tolerance = bytes >= (uint64_t{16} << 20) ? 0.1 : 0.25;
      EXPECT_NEAR(sim / closed, 1.0, tolerance) << "n=" << n << " bytes=" << bytes;
      EXPECT_EQ(closedForm(q).alphaCount, 2.0);
    }
  }
  // The switch's port bounds it: the ring's busiest port carries 2(n-1)/n S, the switch's n S.
  CostQuery ring;
  ring.algorithm = "ring";
  ring.nranks = 8;
  ring.bytes = uint64_t{16} << 20;
  ring.sliceBytes = 64 << 10;
  CostQuery sw = ring;
  sw.algorithm = "switch";
  EXPECT_GT(closedForm(sw).betaBytes, closedForm(ring).betaBytes * 3);
  EXPECT_LT(closedForm(sw).alphaCount, closedForm(ring).alphaCount);
}

// Play a rank: a rank of the collective sends its vector to the switch, then keeps what the
// switch multicasts, and ends with the full sum of the 4 ranks; the switch is no rank to play.
TEST(GenSwitch, PlayARankSendsToTheSwitchAndKeepsTheSum) {
  const Schedule s = RankGame::playSchedule("switch", 4);
  ASSERT_EQ(s.nranks, 5);
  RankGame g(s, 1);
  EXPECT_EQ(g.nsteps(), 2u);
  EXPECT_TRUE(g.play({PlayMove::Kind::Send, 0, 4, ArrivalAction::Add}).ok);
  EXPECT_TRUE(g.play({PlayMove::Kind::EndStep, 0, -1, ArrivalAction::Add}).ok);
  // Adding the sum to one's own vector would count rank 1 twice.
  const PlayVerdict add = g.play({PlayMove::Kind::Arrival, 0, 4, ArrivalAction::Add});
  EXPECT_FALSE(add.ok);
  EXPECT_EQ(add.right, (PlayMove{PlayMove::Kind::Arrival, 0, 4, ArrivalAction::Copy}));
  EXPECT_TRUE(g.play({PlayMove::Kind::EndStep, 0, -1, ArrivalAction::Add}).ok);
  EXPECT_TRUE(g.done());
  for (uint64_t e = 0; e < g.elements(); ++e) EXPECT_EQ(g.holds(e), 0xFu) << e;
  try {
    RankGame sw(s, 4);
    ADD_FAILURE() << "the switch was played";
  } catch (const GenError& e) {
    EXPECT_NE(std::string(e.what()).find("is the switch"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace arl
