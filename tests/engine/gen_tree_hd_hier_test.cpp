// The tree, halving-doubling and hierarchical generators: every collective they support is
// proven by the symbolic verifier (out of place and in place, channel capacity 1) over rank
// counts 1..16, 31 and 64, empty / tiny / odd / large vectors and several slice sizes, every
// root for small rank counts, and uneven host sizes; then the shape of each algorithm is
// checked: tree depth and the complementarity of the two trees, halving-doubling's step count
// and traffic, hierarchical's step count and how much of it crosses hosts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "schedule/generators.h"
#include "schedule/verifier.h"

namespace arl {
namespace {

constexpr uint64_t kLarge = 1000003;

std::vector<int> rankCounts() {
  std::vector<int> v;
  for (int n = 1; n <= 16; ++n) {
    v.push_back(n);
  }
  v.push_back(31);
  v.push_back(64);
  return v;
}

// (count, slice) pairs for n ranks: empty, one element, fewer elements than ranks, 7 and a
// large odd count, each with slices of 1, 3, 1K and 64K elements. Fine slices of the large
// vector and (at 31 and 64 ranks) everything but the coarsest slicing of it are left out:
// their schedules hold millions of ops and teach nothing the small cases do not.
// `perRankTrees` marks collectives that run one tree per rank (reducescatter, allgather),
// whose schedules grow with n^2.
std::vector<std::pair<uint64_t, uint64_t>> sizesFor(int n, bool perRankTrees) {
  std::vector<uint64_t> counts{0, 1, 7, kLarge};
  if (n > 2) {
    counts.push_back(static_cast<uint64_t>(n - 1));
  }
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (uint64_t count : counts) {
    for (uint64_t slice : {uint64_t{1}, uint64_t{3}, uint64_t{1024}, uint64_t{65536}}) {
      if (count == kLarge && slice < 1024) {
        continue;
      }
      if (count == kLarge && slice == 1024 && (n > 16 || perRankTrees)) {
        continue;
      }
      if (n > 16 && count > 1 && slice == 1 && perRankTrees) {
        continue;
      }
      out.emplace_back(count, slice);
    }
  }
  return out;
}

std::string describe(const std::string& algo, const GenParams& p) {
  return algo + " " + std::string(toString(p.collective)) + " n=" + std::to_string(p.nranks) +
         " count=" + std::to_string(p.count) + " slice=" + std::to_string(p.sliceElems) +
         " root=" + std::to_string(p.root) + " ranksPerHost=" + std::to_string(p.ranksPerHost);
}

void expectVerifies(const std::string& algo, const GenParams& p) {
  const Schedule s = generate(algo, p);
  const VerifyResult v = verify(s);
  EXPECT_TRUE(v.ok) << describe(algo, p) << ": " << v.message;
  EXPECT_EQ(s.algorithm, algo);
  EXPECT_EQ(s.count, p.count);
}

GenParams params(Collective c, int n, uint64_t count, uint64_t slice) {
  GenParams p;
  p.collective = c;
  p.nranks = n;
  p.count = count;
  p.sliceElems = slice;
  return p;
}

int ceilLog2(int n) {
  int d = 0;
  while ((1 << d) < n) {
    ++d;
  }
  return d;
}

// --- correctness sweeps -----------------------------------------------------------------

TEST(TreeGenerator, VerifiesEveryCollective) {
  for (Collective c : kAllCollectives) {
    const bool perRank = c == Collective::ReduceScatter || c == Collective::AllGather;
    for (int n : rankCounts()) {
      for (const auto& [count, slice] : sizesFor(n, perRank)) {
        GenParams p = params(c, n, count, slice);
        p.root = n / 2;
        expectVerifies("tree", p);
      }
    }
  }
}

TEST(TreeGenerator, VerifiesReduceAndBroadcastFromEveryRoot) {
  for (Collective c : {Collective::Reduce, Collective::Broadcast}) {
    for (int n = 1; n <= 9; ++n) {
      for (int root = 0; root < n; ++root) {
        for (uint64_t count : {uint64_t{1}, uint64_t{5}, uint64_t{100}}) {
          GenParams p = params(c, n, count, 7);
          p.root = root;
          expectVerifies("tree", p);
        }
      }
    }
  }
}

TEST(HalvingDoublingGenerator, VerifiesAllReduce) {
  for (int n : rankCounts()) {
    for (const auto& [count, slice] : sizesFor(n, false)) {
      expectVerifies("halving-doubling", params(Collective::AllReduce, n, count, slice));
    }
  }
}

TEST(HierarchicalGenerator, VerifiesAllReduceForEveryHostSize) {
  for (int rph : {0, 1, 2, 3, 4, 8}) {
    for (int n : rankCounts()) {
      for (const auto& [count, slice] : sizesFor(n, false)) {
        GenParams p = params(Collective::AllReduce, n, count, slice);
        p.ranksPerHost = rph;
        expectVerifies("hierarchical", p);
      }
    }
  }
}

TEST(HierarchicalGenerator, VerifiesUnevenLastHosts) {
  // Every last-host size from 1 to K - 1, with counts that leave some shards a slice short.
  for (int rph = 2; rph <= 6; ++rph) {
    for (int hosts = 1; hosts <= 3; ++hosts) {
      for (int last = 1; last < rph; ++last) {
        const int n = hosts * rph + last;
        for (uint64_t count : {uint64_t{1}, uint64_t{5}, uint64_t{37}, uint64_t{1001}}) {
          for (uint64_t slice : {uint64_t{1}, uint64_t{4}, uint64_t{64}}) {
            GenParams p = params(Collective::AllReduce, n, count, slice);
            p.ranksPerHost = rph;
            expectVerifies("hierarchical", p);
          }
        }
      }
    }
  }
}

// --- parameters -------------------------------------------------------------------------

TEST(TreeHdHierGenerators, RefuseBadParameters) {
  for (const char* algo : {"tree", "halving-doubling", "hierarchical"}) {
    EXPECT_THROW(generate(algo, params(Collective::AllReduce, 4, 10, 0)), GenError) << algo;
    EXPECT_THROW(generate(algo, params(Collective::AllReduce, 0, 10, 1)), GenError) << algo;
    EXPECT_THROW(generate(algo, params(Collective::AllReduce, 65, 10, 1)), GenError) << algo;
  }
  GenParams p = params(Collective::Reduce, 4, 10, 1);
  p.root = 4;
  EXPECT_THROW(treeSchedule(p), GenError);
  for (Collective c : {Collective::ReduceScatter, Collective::AllGather, Collective::Reduce,
                       Collective::Broadcast}) {
    EXPECT_THROW(halvingDoublingAllReduce(params(c, 4, 10, 1)), GenError);
    EXPECT_THROW(hierarchicalAllReduce(params(c, 4, 10, 1)), GenError);
  }
  GenParams h = params(Collective::AllReduce, 4, 10, 1);
  h.ranksPerHost = -1;
  EXPECT_THROW(hierarchicalAllReduce(h), GenError);
}

TEST(TreeHdHierGenerators, EmptyVectorHasNoOps) {
  for (const char* algo : {"tree", "halving-doubling", "hierarchical"}) {
    for (int n : {1, 2, 5}) {
      const Schedule s = generate(algo, params(Collective::AllReduce, n, 0, 4));
      for (const auto& ops : s.ranks) {
        EXPECT_TRUE(ops.empty()) << algo << " n=" << n;
      }
      EXPECT_EQ(s.nsteps, 0U) << algo;
    }
  }
}

// --- tree shape -------------------------------------------------------------------------

// Ranks that receive in the reduction of tree t (chunk t) of an all-reduce: its interior ranks.
std::set<int> interiorRanks(const Schedule& s, uint32_t tree) {
  std::set<int> out;
  for (int r = 0; r < s.nranks; ++r) {
    for (const Op& op : s.ranks[static_cast<size_t>(r)]) {
      if (op.phase == Phase::Reduce && op.chunk == tree && op.recvPeer >= 0) {
        out.insert(r);
      }
    }
  }
  return out;
}

TEST(TreeGenerator, DepthIsLogarithmic) {
  for (int n = 2; n <= 64; ++n) {
    const int depth = ceilLog2(n);
    const Schedule ar = treeSchedule(params(Collective::AllReduce, n, 2, 1));
    EXPECT_EQ(ar.nsteps, static_cast<uint32_t>(2 * depth)) << "n=" << n;
    for (Collective c : {Collective::Reduce, Collective::Broadcast, Collective::ReduceScatter,
                         Collective::AllGather}) {
      const Schedule s = treeSchedule(params(c, n, 1, 1));
      EXPECT_EQ(s.nsteps, static_cast<uint32_t>(depth)) << toString(c) << " n=" << n;
    }
  }
}

TEST(TreeGenerator, TwoTreesAreComplementary) {
  for (int n = 2; n <= 64; ++n) {
    const Schedule s = treeSchedule(params(Collective::AllReduce, n, 2 * n, 1));
    const std::set<int> a = interiorRanks(s, 0);
    const std::set<int> b = interiorRanks(s, 1);
    std::vector<int> both;
    std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
    // Each tree has ceil(n/2) interior ranks (its root and the even positions), so for even n
    // they can be disjoint and for odd n exactly one rank must be interior in both.
    EXPECT_EQ(a.size(), static_cast<size_t>((n + 1) / 2)) << "n=" << n;
    EXPECT_EQ(b.size(), static_cast<size_t>((n + 1) / 2)) << "n=" << n;
    EXPECT_EQ(both.size(), static_cast<size_t>(n % 2)) << "n=" << n;
  }
}

TEST(TreeGenerator, EveryRankHasAtMostTwoChildrenPerTree) {
  for (int n : {3, 8, 13, 64}) {
    const Schedule s = treeSchedule(params(Collective::AllReduce, n, 2, 1));
    for (int r = 0; r < n; ++r) {
      std::set<int> children[2];
      for (const Op& op : s.ranks[static_cast<size_t>(r)]) {
        if (op.phase == Phase::Reduce && op.recvPeer >= 0) {
          children[op.chunk].insert(op.recvPeer);
        }
      }
      EXPECT_LE(children[0].size(), 2U) << "n=" << n << " rank " << r;
      EXPECT_LE(children[1].size(), 2U) << "n=" << n << " rank " << r;
    }
  }
}

TEST(TreeGenerator, AllReduceSendsAboutTwiceTheVectorPerRank) {
  // Each half goes up once and down at most twice per rank; leaves of one tree are interior in
  // the other, so no rank sends more than 2 x count, and all ranks together send what n - 1
  // up-edges and n - 1 down-edges per tree carry.
  for (int n : {2, 4, 7, 16}) {
    const uint64_t count = 1000;
    const Schedule s = treeSchedule(params(Collective::AllReduce, n, count, 64));
    uint64_t total = 0;
    for (int r = 0; r < n; ++r) {
      const uint64_t sent = bytesSent(s, r, DataType::Float) / 4;
      EXPECT_LE(sent, 2 * count) << "n=" << n << " rank " << r;
      total += sent;
    }
    EXPECT_EQ(total, 2 * static_cast<uint64_t>(n - 1) * count) << "n=" << n;
  }
}

TEST(TreeGenerator, ReduceLeavesOutputOfOtherRanksUntouched) {
  // In place, a non-root rank's Output is its Input: partial sums must go to Scratch.
  const Schedule s = treeSchedule(params(Collective::Reduce, 8, 100, 16));
  for (int r = 1; r < 8; ++r) {
    for (const Op& op : s.ranks[static_cast<size_t>(r)]) {
      if (opWritesDst(op.kind)) {
        EXPECT_NE(op.dst.buf, Buffer::Output) << "rank " << r;
      }
    }
  }
  EXPECT_EQ(s.scratchElems, 100U);
}

// --- halving-doubling ---------------------------------------------------------------------

TEST(HalvingDoublingGenerator, StepCount) {
  for (int n = 2; n <= 64; ++n) {
    int pp = 1;
    int logp = 0;
    while (pp * 2 <= n) {
      pp *= 2;
      ++logp;
    }
    const Schedule s = halvingDoublingAllReduce(params(Collective::AllReduce, n, 4096, 256));
    EXPECT_EQ(s.nsteps, static_cast<uint32_t>(2 * logp + (pp == n ? 0 : 2))) << "n=" << n;
  }
}

TEST(HalvingDoublingGenerator, PowerOfTwoSendsTwoTimesPMinusOneOverP) {
  for (int p : {2, 4, 8, 16, 32, 64}) {
    const uint64_t count = 1024 * static_cast<uint64_t>(p);
    const Schedule s = halvingDoublingAllReduce(params(Collective::AllReduce, p, count, 333));
    for (int r = 0; r < p; ++r) {
      EXPECT_EQ(bytesSent(s, r, DataType::Float),
                2 * (static_cast<uint64_t>(p) - 1) * (count / static_cast<uint64_t>(p)) * 4)
          << "p=" << p << " rank " << r;
    }
    // An odd count cannot split evenly, but each halving is within an element per piece.
    const Schedule odd = halvingDoublingAllReduce(params(Collective::AllReduce, p, kLarge, 65536));
    const double ideal = 2.0 * (p - 1) / p * static_cast<double>(kLarge);
    for (int r = 0; r < p; ++r) {
      const double sent = static_cast<double>(bytesSent(odd, r, DataType::Float)) / 4.0;
      EXPECT_NEAR(sent, ideal, 2.0 * p) << "p=" << p << " rank " << r;
    }
  }
}

TEST(HalvingDoublingGenerator, FoldingPairsExchangeTheWholeVector) {
  // n = 6: p' = 4, ranks 0 and 2 fold into 1 and 3, then only receive the result.
  const uint64_t count = 400;
  const Schedule s = halvingDoublingAllReduce(params(Collective::AllReduce, 6, count, 64));
  for (int r : {0, 2}) {
    EXPECT_EQ(bytesSent(s, r, DataType::Float), count * 4) << "rank " << r;
    for (const Op& op : s.ranks[static_cast<size_t>(r)]) {
      if (opSends(op.kind)) {
        EXPECT_EQ(op.sendPeer, r + 1);
      }
      if (opRecvs(op.kind)) {
        EXPECT_EQ(op.recvPeer, r + 1);
      }
    }
  }
  // The others run the power-of-two algorithm among 4 (plus the unfold for 1 and 3).
  for (int r : {4, 5}) {
    EXPECT_EQ(bytesSent(s, r, DataType::Float), 2 * 3 * (count / 4) * 4) << "rank " << r;
  }
  for (int r : {1, 3}) {
    EXPECT_EQ(bytesSent(s, r, DataType::Float), (2 * 3 * (count / 4) + count) * 4) << "rank " << r;
  }
}

TEST(HalvingDoublingGenerator, PartnersDoubleInDistance) {
  // Power of two: at reduce-scatter step k a rank talks only to rank ^ 2^k.
  const int n = 16;
  const Schedule s = halvingDoublingAllReduce(params(Collective::AllReduce, n, 1600, 50));
  for (int r = 0; r < n; ++r) {
    for (const Op& op : s.ranks[static_cast<size_t>(r)]) {
      const int k = op.step < 4 ? static_cast<int>(op.step) : 7 - static_cast<int>(op.step);
      const int peer = opSends(op.kind) ? op.sendPeer : op.recvPeer;
      EXPECT_EQ(peer, r ^ (1 << k)) << "rank " << r << " step " << op.step;
    }
  }
}

// --- hierarchical -------------------------------------------------------------------------

int hostOf(int rank, int rph) { return rank / rph; }

TEST(HierarchicalGenerator, StepCount) {
  for (int n : {4, 8, 12, 13, 16, 31}) {
    for (int rph : {1, 2, 3, 4, 8}) {
      const int k = std::min(rph, n);
      const int hosts = (n + k - 1) / k;
      GenParams p = params(Collective::AllReduce, n, 100000, 1024);
      p.ranksPerHost = rph;
      const Schedule s = hierarchicalAllReduce(p);
      EXPECT_EQ(s.nsteps, static_cast<uint32_t>(2 * (k - 1) + 2 * (hosts - 1)))
          << "n=" << n << " ranksPerHost=" << rph;
    }
  }
  GenParams one = params(Collective::AllReduce, 6, 600, 64);
  EXPECT_EQ(hierarchicalAllReduce(one).nsteps, 10U);  // one host: plain ring, 2(n-1) steps
}

TEST(HierarchicalGenerator, OnlyAShardCrossesHosts) {
  // Full hosts: inside a host each rank sends 2(K-1)/K of the vector, across hosts
  // 2(H-1)/H of its shard of count/K elements.
  for (auto [n, rph] : {std::pair{8, 4}, std::pair{12, 4}, std::pair{16, 8}, std::pair{16, 2}}) {
    const int hosts = n / rph;
    const uint64_t count = 4096 * static_cast<uint64_t>(rph * hosts);
    GenParams p = params(Collective::AllReduce, n, count, 512);
    p.ranksPerHost = rph;
    const Schedule s = hierarchicalAllReduce(p);
    const uint64_t shard = count / static_cast<uint64_t>(rph);
    for (int r = 0; r < n; ++r) {
      uint64_t inside = 0;
      uint64_t across = 0;
      for (const Op& op : s.ranks[static_cast<size_t>(r)]) {
        if (!opSends(op.kind)) {
          continue;
        }
        (hostOf(op.sendPeer, rph) == hostOf(r, rph) ? inside : across) += op.count;
      }
      EXPECT_EQ(inside, 2 * (static_cast<uint64_t>(rph) - 1) * shard) << "n=" << n << " r=" << r;
      EXPECT_EQ(across, 2 * (static_cast<uint64_t>(hosts) - 1) * (shard / hosts))
          << "n=" << n << " r=" << r;
    }
  }
}

TEST(HierarchicalGenerator, UnevenHostOwnsSeveralShards) {
  // 4 ranks per host, 10 ranks: the last host holds ranks 8 and 9; rank 8 owns shards 0 and 2,
  // rank 9 owns shards 1 and 3, so each talks across hosts to two owners per neighbour host.
  GenParams p = params(Collective::AllReduce, 10, 4000, 100);
  p.ranksPerHost = 4;
  const Schedule s = hierarchicalAllReduce(p);
  for (int r : {8, 9}) {
    std::set<int> remote;
    for (const Op& op : s.ranks[static_cast<size_t>(r)]) {
      if (opSends(op.kind) && hostOf(op.sendPeer, 4) != 2) {
        remote.insert(op.sendPeer);
      }
    }
    const std::set<int> want = r == 8 ? std::set<int>{0, 2} : std::set<int>{1, 3};
    EXPECT_EQ(remote, want) << "rank " << r;  // sends go to host 0, the next in the ring
  }
}

}  // namespace
}  // namespace arl
