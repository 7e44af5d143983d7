// The bruck, pat, swing, swing-latency and knomial generators: every collective each supports
// is proven by the symbolic verifier (out of place and in place, channel capacity 1) at every
// rank count 1..33 it accepts, with empty vectors, vectors shorter than the rank count, counts
// not divisible by it, and several slice sizes; the counts it refuses are refused by name.
// Then the step counts and bytes per rank are checked against the closed forms in the
// generators' file comments, and the distances each algorithm uses against its definition.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "model/model.h"
#include "schedule/generators.h"
#include "schedule/play_rank.h"
#include "schedule/verifier.h"

namespace arl {
namespace {

GenParams params(Collective c, int n, uint64_t count, uint64_t slice, int radix = 4) {
  GenParams p;
  p.collective = c;
  p.nranks = n;
  p.count = count;
  p.sliceElems = slice;
  p.radix = radix;
  return p;
}

std::string describe(const std::string& algo, const GenParams& p) {
  return algo + " " + std::string(toString(p.collective)) + " n=" + std::to_string(p.nranks) +
         " count=" + std::to_string(p.count) + " slice=" + std::to_string(p.sliceElems) +
         " root=" + std::to_string(p.root) + " radix=" + std::to_string(p.radix);
}

// Counts: empty, one element, fewer than the ranks, 7, and 1000 (rarely divisible by n);
// slices of 1, 3, 64 and 1024 elements (the fine ones only for the small counts).
std::vector<std::pair<uint64_t, uint64_t>> sizesFor(int n) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (uint64_t count :
       {uint64_t{0}, uint64_t{1}, static_cast<uint64_t>(n - 1), uint64_t{7}, uint64_t{1000}}) {
    for (uint64_t slice : {uint64_t{1}, uint64_t{3}, uint64_t{64}, uint64_t{1024}}) {
      if (count == 1000 && slice < 64) continue;
      out.emplace_back(count, slice);
    }
  }
  return out;
}

void expectVerifies(const std::string& algo, const GenParams& p) {
  const Schedule s = generate(algo, p);
  const VerifyResult v = verify(s);
  EXPECT_TRUE(v.ok) << describe(algo, p) << ": " << v.message;
  EXPECT_EQ(s.algorithm, algo);
}

int ceilLog(int n, int k) {
  int r = 0;
  for (long d = 1; d < n; d *= k) ++r;
  return r;
}

void sweep(const std::string& algo, Collective c, int radix = 4) {
  for (int n = 1; n <= 33; ++n) {
    const bool rooted = c == Collective::Reduce || c == Collective::Broadcast;
    std::vector<int> roots{0};
    if (rooted && n > 1) roots = {0, n / 2, n - 1};
    for (int root : roots) {
      for (const auto& [count, slice] : sizesFor(n)) {
        GenParams p = params(c, n, count, slice, radix);
        p.root = root;
        expectVerifies(algo, p);
      }
    }
  }
}

TEST(GenModern, AlgorithmNamesListTheNewGenerators) {
  const auto& names = algorithmNames();
  for (const char* a : {"bruck", "pat", "swing", "swing-latency", "knomial"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), a), names.end()) << a;
    EXPECT_TRUE(algorithmSupports(a, Collective::AllReduce)) << a;
  }
  EXPECT_TRUE(algorithmSupports("bruck", Collective::AllGather));
  EXPECT_TRUE(algorithmSupports("pat", Collective::ReduceScatter));
  EXPECT_FALSE(algorithmSupports("pat", Collective::Broadcast));
  EXPECT_TRUE(algorithmSupports("knomial", Collective::Reduce));
  EXPECT_FALSE(algorithmSupports("knomial", Collective::AllGather));
  EXPECT_FALSE(algorithmSupports("swing", Collective::ReduceScatter));
}

TEST(GenModern, BruckVerifiesEveryCollectiveAtEveryRankCount) {
  for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter}) {
    sweep("bruck", c);
  }
}

TEST(GenModern, PatVerifiesEveryCollectiveAtEveryRankCount) {
  for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter}) {
    sweep("pat", c);
  }
}

// Every count 1..64: a power of two as the paper, an even count by the overlapping reach sets,
// an odd one with rank n-1 folded in; swing-latency folds the ranks beyond a power of two.
TEST(GenModern, SwingVerifiesAtEveryRankCount) {
  for (const std::string algo : {"swing", "swing-latency"}) {
    for (int n = 1; n <= 64; ++n) {
      for (const auto& [count, slice] : sizesFor(n)) {
        if (n > 33 && count != 1000) continue;
        expectVerifies(algo, params(Collective::AllReduce, n, count, slice));
      }
    }
  }
}

// Off a power of two swing-latency's folding pairs are neighbours at the end (2p - n + 2i and
// the next), as the authors' library pairs them; swing folds only rank n-1 of an odd n, into
// n-2; an even n's steps pair every rank.
TEST(GenModern, SwingOffAPowerOfTwoFoldsNeighbours) {
  auto peersOf = [](const Schedule& s, int r, uint32_t step) {
    std::set<int> peers;
    for (const Op& op : s.ranks[static_cast<size_t>(r)]) {
      if (op.step == step && opSends(op.kind)) peers.insert(op.sendPeer);
    }
    return peers;
  };
  const Schedule lat = generate("swing-latency", params(Collective::AllReduce, 6, 60, 64));
  EXPECT_EQ(lat.nsteps, 4u);  // fold, log2 4 exchanges, unfold
  EXPECT_EQ(peersOf(lat, 3, 0), std::set<int>{2});
  EXPECT_EQ(peersOf(lat, 5, 0), std::set<int>{4});
  EXPECT_TRUE(peersOf(lat, 3, 1).empty());
  EXPECT_EQ(peersOf(lat, 2, 3), std::set<int>{3});
  for (int r : {0, 1}) EXPECT_TRUE(peersOf(lat, r, 0).empty()) << r;
  const Schedule odd = generate("swing", params(Collective::AllReduce, 7, 70, 64));
  EXPECT_EQ(odd.nsteps, 2u * (3 + 2));  // ceil(log2 6) exchanges and a fold and unfold a half
  EXPECT_EQ(peersOf(odd, 6, 0), std::set<int>{5});
  for (int r = 0; r < 6; ++r) EXPECT_TRUE(peersOf(odd, r, 0).empty()) << r;
  const Schedule even = generate("swing", params(Collective::AllReduce, 6, 60, 64));
  EXPECT_EQ(even.nsteps, 6u);
  for (uint32_t step = 0; step < 6; ++step) {
    for (int r = 0; r < 6; ++r) {
      const std::set<int> to = peersOf(even, r, step);
      ASSERT_EQ(to.size(), 1u) << "rank " << r << " step " << step;
      EXPECT_EQ(peersOf(even, *to.begin(), step), std::set<int>{r}) << r << " step " << step;
    }
  }
  const SwingStep first = swingStep(true, {}, 6, 0);
  EXPECT_EQ(first.role, SwingStep::Role::Fold);
  EXPECT_EQ(first.ranks, 4);
  EXPECT_EQ(swingStep(false, {}, 7, 9).role, SwingStep::Role::Unfold);
  EXPECT_EQ(swingStep(false, {}, 6, 5).k, 0);
  EXPECT_EQ(swingStep(false, {}, 6, 6).role, SwingStep::Role::None);
}

TEST(GenModern, KnomialVerifiesEveryCollectiveRootAndRadix) {
  for (int radix : {2, 3, 4, 8}) {
    for (Collective c : {Collective::AllReduce, Collective::Reduce, Collective::Broadcast}) {
      sweep("knomial", c, radix);
    }
  }
}

TEST(GenModern, KnomialRefusesRadixBelowTwo) {
  for (int radix : {1, 0, -3}) {
    try {
      generate("knomial", params(Collective::AllReduce, 4, 100, 16, radix));
      ADD_FAILURE() << "radix " << radix << " accepted";
    } catch (const GenError& e) {
      EXPECT_NE(std::string(e.what()).find("radix"), std::string::npos) << e.what();
    }
  }
}

// Steps: bruck and pat ceil(log2 n) per half, swing log2 n per half, swing-latency log2 n,
// knomial ceil(log_k n) per tree.
TEST(GenModern, StepCountsMatchTheClosedForms) {
  for (int n = 2; n <= 33; ++n) {
    const auto half = static_cast<uint32_t>(ceilLog(n, 2));
    for (const char* a : {"bruck", "pat"}) {
      EXPECT_EQ(generate(a, params(Collective::AllReduce, n, 1000, 64)).nsteps, 2 * half) << a << n;
      EXPECT_EQ(generate(a, params(Collective::AllGather, n, 10, 64)).nsteps, half) << a << n;
      EXPECT_EQ(generate(a, params(Collective::ReduceScatter, n, 10, 64)).nsteps, half) << a << n;
    }
    const bool pow2 = std::has_single_bit(static_cast<unsigned>(n));
    const auto swingHalf = n % 2 == 0 ? half : static_cast<uint32_t>(ceilLog(n - 1, 2)) + 2;
    EXPECT_EQ(generate("swing", params(Collective::AllReduce, n, 1000, 64)).nsteps, 2 * swingHalf)
        << n;
    EXPECT_EQ(generate("swing-latency", params(Collective::AllReduce, n, 1000, 64)).nsteps,
              pow2 ? half : half - 1 + 2)
        << n;
    for (int k : {2, 3, 4, 8}) {
      const auto rounds = static_cast<uint32_t>(ceilLog(n, k));
      EXPECT_EQ(generate("knomial", params(Collective::AllReduce, n, 100, 64, k)).nsteps,
                2 * rounds)
          << n << " k=" << k;
      EXPECT_EQ(generate("knomial", params(Collective::Reduce, n, 100, 64, k)).nsteps, rounds);
    }
  }
}

// Bytes per rank when n divides count: 2(n-1)/n x count for the bandwidth-optimal all-reduces,
// (n-1) x count for all-gather and reduce-scatter, log2 n x count for swing-latency.
TEST(GenModern, BytesPerRankMatchTheClosedForms) {
  constexpr uint64_t kElem = 4;
  for (int n = 2; n <= 33; ++n) {
    const uint64_t count = static_cast<uint64_t>(n) * 60;
    const bool pow2 = std::has_single_bit(static_cast<unsigned>(n));
    for (const char* a : {"bruck", "pat", "swing"}) {
      if (std::string(a) == "swing" && n % 2 == 1) continue;  // rank n-1 folds in
      const Schedule s = generate(a, params(Collective::AllReduce, n, count, 16));
      const Schedule ag = std::string(a) == "swing"
                              ? Schedule{}
                              : generate(a, params(Collective::AllGather, n, 60, 16));
      const Schedule rs = std::string(a) == "swing"
                              ? Schedule{}
                              : generate(a, params(Collective::ReduceScatter, n, 60, 16));
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(bytesSent(s, r, DataType::Float), 2 * (count / n) * (n - 1) * kElem) << a << n;
        if (ag.nranks == 0) continue;
        EXPECT_EQ(bytesSent(ag, r, DataType::Float), (n - 1) * 60 * kElem) << a << n;
        EXPECT_EQ(bytesSent(rs, r, DataType::Float), (n - 1) * 60 * kElem) << a << n;
      }
    }
    if (pow2) {
      const Schedule s = generate("swing-latency", params(Collective::AllReduce, n, count, 16));
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(bytesSent(s, r, DataType::Float), std::countr_zero(unsigned(n)) * count * kElem);
      }
    }
  }
}

// Reduce: every rank but the root sends count once. Broadcast: the root sends count to each
// child, (k-1) per round where the tree is full.
TEST(GenModern, KnomialTrafficFollowsTheTree) {
  constexpr uint64_t kCount = 100;
  const Schedule red = generate("knomial", params(Collective::Reduce, 16, kCount, 32, 4));
  const Schedule bc = generate("knomial", params(Collective::Broadcast, 16, kCount, 32, 4));
  for (int r = 0; r < 16; ++r) {
    EXPECT_EQ(bytesSent(red, r, DataType::Float), r == 0 ? 0 : kCount * 4) << r;
  }
  EXPECT_EQ(bytesSent(bc, 0, DataType::Float), 6 * kCount * 4);  // 3 children in each of 2 rounds
  EXPECT_EQ(bytesSent(bc, 4, DataType::Float), 3 * kCount * 4);  // 5, 6, 7
  EXPECT_EQ(bytesSent(bc, 5, DataType::Float), 0u);
}

// The distance of each step's messages, as (sender - receiver) mod n, in step order.
std::vector<int> sendDistances(const Schedule& s) {
  std::vector<int> d(s.nsteps, -1);
  for (const Op& op : s.ranks[0]) {
    if (op.sendPeer >= 0) d[op.step] = (0 - op.sendPeer + s.nranks) % s.nranks;
  }
  return d;
}

TEST(GenModern, BruckDoublesTheDistanceAndPatHalvesIt) {
  const Schedule bruck = generate("bruck", params(Collective::AllGather, 16, 64, 64));
  const Schedule pat = generate("pat", params(Collective::AllGather, 16, 64, 64));
  EXPECT_EQ(sendDistances(bruck), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(sendDistances(pat), (std::vector<int>{8, 4, 2, 1}));
  // PAT's long hop carries one block, Bruck's eight.
  auto bytesAtStep = [](const Schedule& s, uint32_t step) {
    uint64_t b = 0;
    for (const Op& op : s.ranks[0]) {
      if (op.sendPeer >= 0 && op.step == step) b += op.count;
    }
    return b;
  };
  EXPECT_EQ(bytesAtStep(pat, 0), 64u);
  EXPECT_EQ(bytesAtStep(bruck, 3), 8 * 64u);
}

// rho(s) = 1, -1, 3, -5, 11, -21: rank 0 (even) talks to 0 + rho(s) mod 64.
TEST(GenModern, SwingPeersFollowRho) {
  const Schedule s = generate("swing-latency", params(Collective::AllReduce, 64, 64, 64));
  std::vector<int> peers;
  for (const Op& op : s.ranks[0]) {
    if (op.sendPeer >= 0) peers.push_back(op.sendPeer);
  }
  EXPECT_EQ(peers, (std::vector<int>{1, 63, 3, 59, 11, 43}));
  std::vector<int> odd;  // rank 5 (odd) talks to 5 - rho(s)
  for (const Op& op : s.ranks[5]) {
    if (op.sendPeer >= 0) odd.push_back(op.sendPeer);
  }
  EXPECT_EQ(odd, (std::vector<int>{4, 6, 2, 10, 58, 26}));
}

// On a torus the steps take the dimensions in turn: on 4x4, rank 0 (row 0, column 0) talks to
// row 1, column 1, row 3 (0 + rho(1) = -1), column 3, each one hop away, where the flat form
// reaches rank 11, three hops away.
TEST(GenModern, SwingOnATorusTakesTheDimensionsInTurn) {
  GenParams p = params(Collective::AllReduce, 16, 64, 64);
  p.torusDims = {4, 4};
  const Schedule s = generate("swing-latency", p);
  std::vector<int> peers;
  for (const Op& op : s.ranks[0]) {
    if (op.sendPeer >= 0) peers.push_back(op.sendPeer);
  }
  EXPECT_EQ(peers, (std::vector<int>{4, 1, 12, 3}));
  // Every peer of every rank is one hop away along one dimension of the 4x4 torus.
  for (int r = 0; r < 16; ++r) {
    for (const Op& op : s.ranks[static_cast<size_t>(r)]) {
      if (op.sendPeer < 0) continue;
      const int dr = std::abs(r / 4 - op.sendPeer / 4), dc = std::abs(r % 4 - op.sendPeer % 4);
      EXPECT_EQ(std::min(dr, 4 - dr) + std::min(dc, 4 - dc), 1) << r << " -> " << op.sendPeer;
    }
  }
}

// Every torus of power-of-two dimensions up to 64 ranks, both forms, proven by the verifier;
// dimensions that are not powers of two or do not hold the ranks are refused by name.
TEST(GenModern, SwingOnATorusVerifies) {
  const std::vector<std::vector<int>> tori = {{2, 2}, {2, 4}, {4, 2},    {4, 4},    {2, 8},
                                              {8, 4}, {8, 8}, {2, 2, 2}, {4, 2, 2}, {1, 8}};
  for (const std::vector<int>& dims : tori) {
    int n = 1;
    for (int d : dims) n *= d;
    for (const std::string algo : {"swing", "swing-latency"}) {
      for (const auto& [count, slice] : sizesFor(n)) {
        GenParams p = params(Collective::AllReduce, n, count, slice);
        p.torusDims = dims;
        expectVerifies(algo, p);
      }
    }
  }
  GenParams odd = params(Collective::AllReduce, 12, 64, 64);
  odd.torusDims = {3, 4};
  EXPECT_THROW(generate("swing", odd), GenError);
  GenParams wrong = params(Collective::AllReduce, 16, 64, 64);
  wrong.torusDims = {4, 2};
  try {
    generate("swing", wrong);
    ADD_FAILURE() << "a torus of 8 ranks for a run of 16 was taken";
  } catch (const GenError& e) {
    EXPECT_NE(std::string(e.what()).find("hold 8 ranks"), std::string::npos) << e.what();
  }
}

// Unsliced, a message pays one latency and a step lasts as long as its busiest rank's messages:
// the closed form's alpha count is, step by step, the most messages a rank sends (Bruck's wrap
// included). Bruck's reduce-scatter off a power of two splits one message more somewhere, where
// a rank's blocks are partly summed already, which the form leaves out.
size_t criticalMessages(const Schedule& s) {
  size_t total = 0;
  for (uint32_t step = 0; step < s.nsteps; ++step) {
    size_t most = 0;
    for (const auto& ops : s.ranks) {
      most = std::max<size_t>(most, std::count_if(ops.begin(), ops.end(), [&](const Op& op) {
                                return opSends(op.kind) && op.step == step;
                              }));
    }
    total += most;
  }
  return total;
}

TEST(GenModern, ClosedFormCountsTheSchedulesMessages) {
  for (int n = 2; n <= 33; ++n) {
    const bool pow2 = std::has_single_bit(static_cast<unsigned>(n));
    for (const std::string a : {"bruck", "pat", "swing", "swing-latency"}) {
      if (a != "bruck" && !pow2) continue;
      const uint64_t count = static_cast<uint64_t>(n) * 64;
      const Schedule s = generate(a, params(Collective::AllReduce, n, count, count));
      CostQuery q;
      q.algorithm = a;
      q.nranks = n;
      q.bytes = count * 4;
      q.sliceBytes = count * 4;
      const CostTerms t = closedForm(q);
      const auto messages = static_cast<double>(criticalMessages(s));
      if (pow2) {
        EXPECT_EQ(t.alphaCount, messages) << a << " n=" << n;
      } else {
        EXPECT_GE(t.alphaCount, messages - 1) << a << " n=" << n;
        EXPECT_LE(t.alphaCount, messages) << a << " n=" << n;
      }
      EXPECT_NEAR(t.betaBytes, static_cast<double>(bytesSent(s, 0, DataType::Float)), 1e-6)
          << a << " n=" << n;
    }
  }
}

TEST(GenModern, KnomialOfRadixTwoIsReduceBroadcastsBinomialTree) {
  for (int n = 2; n <= 33; ++n) {
    CostQuery q;
    q.nranks = n;
    q.bytes = 1 << 20;
    q.sliceBytes = 1 << 16;
    q.algorithm = "reduce-broadcast";
    const CostTerms rb = closedForm(q);
    q.algorithm = "knomial";
    q.radix = 2;
    const CostTerms kn = closedForm(q);
    EXPECT_EQ(kn.alphaCount, rb.alphaCount) << n;
    EXPECT_EQ(kn.betaBytes, rb.betaBytes) << n;
    EXPECT_EQ(kn.gammaBytes, rb.gammaBytes) << n;
    // A larger radix: fewer rounds, more children of the root.
    q.radix = 4;
    const CostTerms k4 = closedForm(q);
    EXPECT_LE(k4.alphaCount, kn.alphaCount) << n;
    EXPECT_GE(k4.betaBytes, kn.betaBytes) << n;
  }
}

// swing-latency sends log2 n x S per rank, more than busbw's 2(n-1)/n x S: the formula says so.
TEST(GenModern, SentFormulasOfTheNewAlgorithms) {
  const auto lat = sentFormula("swing-latency", Collective::AllReduce, 8, 800);
  ASSERT_TRUE(lat);
  EXPECT_EQ(lat->bytes, 3 * 800.0);
  EXPECT_EQ(sentFormula("swing", Collective::AllReduce, 8, 800)->bytes, 2 * 7 / 8.0 * 800);
  EXPECT_DOUBLE_EQ(sentFormula("swing", Collective::AllReduce, 6, 600)->bytes, 2 * 5 / 6.0 * 600);
  EXPECT_FALSE(sentFormula("swing", Collective::AllReduce, 7, 700));  // rank 6 folds in
  EXPECT_FALSE(sentFormula("swing-latency", Collective::AllReduce, 6, 600));
  EXPECT_EQ(sentFormula("bruck", Collective::AllGather, 5, 800)->bytes, 4 / 5.0 * 800);
  EXPECT_EQ(sentFormula("pat", Collective::AllReduce, 5, 800)->bytes, 2 * 4 / 5.0 * 800);
  EXPECT_FALSE(sentFormula("knomial", Collective::AllReduce, 8, 800));
  for (const char* a : {"bruck", "pat", "swing", "swing-latency", "knomial"}) {
    EXPECT_FALSE(closedFormText(a, Collective::AllReduce).empty()) << a;
  }
}

// Play a rank takes every new all-reduce: each rank's game is built from the verified schedule.
TEST(GenModern, EveryNewAlgorithmCanBePlayed) {
  for (const char* a : {"bruck", "pat", "swing", "swing-latency", "knomial"}) {
    for (int n : {2, 4, 8}) {
      const Schedule s = RankGame::playSchedule(a, n);
      for (int r = 0; r < n; ++r) EXPECT_NO_THROW(RankGame(s, r)) << a << " n=" << n;
    }
  }
  EXPECT_NO_THROW(RankGame(RankGame::playSchedule("swing", 6), 5));
  EXPECT_NO_THROW(RankGame(RankGame::playSchedule("swing-latency", 7), 6));
}

}  // namespace
}  // namespace arl
