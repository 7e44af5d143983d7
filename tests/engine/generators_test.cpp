// Every generator, for every collective it supports, over a sweep of rank counts, vector sizes
// (empty, smaller than the number of ranks, odd, large) and slice sizes, is proven correct by
// the symbolic verifier, out of place and in place, at channel capacity 1.
#include "schedule/generators.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include "base/clock.h"
#include "schedule/verifier.h"

namespace arl {
namespace {

struct SweepCase {
  std::string algo;
  Collective collective = Collective::AllReduce;
  int nranks = 1;
};

std::vector<SweepCase> sweepCases() {
  std::vector<int> ranks;
  for (int n = 1; n <= 16; ++n) ranks.push_back(n);
  ranks.push_back(31);
  ranks.push_back(64);
  std::vector<SweepCase> cases;
  for (const std::string& algo : algorithmNames()) {
    for (Collective c : kAllCollectives) {
      if (!algorithmSupports(algo, c)) continue;
      for (int n : ranks) {
        if (rankCountRefusal(algo, n).empty()) cases.push_back({algo, c, n});
      }
    }
  }
  return cases;
}

std::string caseName(const testing::TestParamInfo<SweepCase>& info) {
  std::string name = info.param.algo + "_" + std::string(toString(info.param.collective)) + "_n" +
                     std::to_string(info.param.nranks);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

// (count, slice) pairs for collective c over n ranks. A million-element vector is sliced
// only as finely as keeps it to at most 16K slices of the whole data (which for reduce-scatter
// and all-gather is n times count), so the sweep stays in seconds.
std::vector<std::pair<uint64_t, uint64_t>> sizesFor(Collective c, int n) {
  const uint64_t kLarge = 1000003;
  const uint64_t kMaxSlices = 16384;
  std::vector<uint64_t> counts{0, 1, static_cast<uint64_t>(n - 1), 7, kLarge};
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  const bool perRank = c == Collective::ReduceScatter || c == Collective::AllGather;
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (uint64_t count : counts) {
    const uint64_t total = perRank ? count * static_cast<uint64_t>(n) : count;
    for (uint64_t slice : {uint64_t{1}, uint64_t{3}, uint64_t{1024}, uint64_t{65536}}) {
      if (count == kLarge && total / slice > kMaxSlices) continue;
      out.emplace_back(count, slice);
    }
  }
  return out;
}

// A root away from rank 0, to catch generators that assume it.
int rootFor(int n) { return n / 2; }

class GeneratorSweep : public testing::TestWithParam<SweepCase> {};

TEST_P(GeneratorSweep, VerifiesInAndOutOfPlace) {
  const SweepCase& c = GetParam();
  for (const auto& [count, slice] : sizesFor(c.collective, c.nranks)) {
    GenParams p;
    p.collective = c.collective;
    p.nranks = c.nranks;
    p.count = count;
    p.sliceElems = slice;
    p.root = rootFor(c.nranks);
    const Schedule s = generate(c.algo, p);
    SCOPED_TRACE("count " + std::to_string(count) + " slice " + std::to_string(slice));
    ASSERT_EQ(s.algorithm, c.algo);
    // The ranks and the workers that serve them (switch's switch).
    ASSERT_EQ(s.nranks, c.nranks + helperWorkers(c.algo));
    ASSERT_EQ(resultRanks(s), c.nranks);
    ASSERT_EQ(s.ranks.size(), static_cast<size_t>(s.nranks));
    const VerifyResult v = verify(s);
    ASSERT_TRUE(v.ok) << v.message;
    uint32_t maxStep = 0;
    bool any = false;
    for (const auto& ops : s.ranks) {
      for (const Op& op : ops) {
        ASSERT_GT(op.count, 0u);
        maxStep = std::max(maxStep, op.step);
        any = true;
      }
    }
    EXPECT_EQ(s.nsteps, any ? maxStep + 1 : 0u);
    if (count == 0) {
      EXPECT_EQ(s.nsteps, 0u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, GeneratorSweep, testing::ValuesIn(sweepCases()), caseName);

uint64_t elemsSent(const Schedule& s, int r) { return bytesSent(s, r, DataType::Float) / 4; }

TEST(RingGenerator, AllReduceTakesTwoNMinusOneStepsAndSendsTwiceTheVectorShare) {
  for (int n : {2, 3, 4, 5, 8, 13, 16, 64}) {
    for (uint64_t count : {uint64_t{7}, uint64_t{1000}, uint64_t{1000003}}) {
      GenParams p;
      p.nranks = n;
      p.count = count;
      p.sliceElems = 4096;
      const Schedule s = ringSchedule(p);
      EXPECT_EQ(s.nsteps, static_cast<uint32_t>(2 * (n - 1))) << "n=" << n;
      const double ideal = 2.0 * (n - 1) / n * static_cast<double>(count);
      for (int r = 0; r < n; ++r) {
        // Chunks differ from count/n by less than one element, and a rank skips two of them.
        EXPECT_NEAR(static_cast<double>(elemsSent(s, r)), ideal, 2.0)
            << "n=" << n << " count=" << count << " rank " << r;
      }
    }
  }
}

TEST(RingGenerator, AllReduceUsesNcclStepKindsInOrder) {
  GenParams p;
  p.nranks = 5;
  p.count = 5;  // one element per chunk, one slice
  p.sliceElems = 1;
  const Schedule s = ringSchedule(p);
  const std::vector<OpKind> want{
      OpKind::Send,           OpKind::RecvReduceSend,     OpKind::RecvReduceSend,
      OpKind::RecvReduceSend, OpKind::RecvReduceCopySend, OpKind::RecvCopySend,
      OpKind::RecvCopySend,   OpKind::RecvCopySend,       OpKind::Recv};
  for (int r = 0; r < 5; ++r) {
    ASSERT_EQ(s.ranks[static_cast<size_t>(r)].size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      const Op& op = s.ranks[static_cast<size_t>(r)][i];
      EXPECT_EQ(op.kind, want[i]) << "rank " << r << " op " << i;
      if (opSends(op.kind)) {
        EXPECT_EQ(op.sendPeer, (r + 1) % 5);
      }
      if (opRecvs(op.kind)) {
        EXPECT_EQ(op.recvPeer, (r + 4) % 5);
      }
    }
    // Rank r finishes the reduction of chunk r.
    EXPECT_EQ(s.ranks[static_cast<size_t>(r)][4].chunk, static_cast<uint32_t>(r));
  }
}

TEST(RingGenerator, OtherCollectivesSendWhatNcclTestsCounts) {
  const int n = 6;
  const uint64_t count = 1001;
  GenParams p;
  p.nranks = n;
  p.count = count;
  p.sliceElems = 100;
  p.root = 2;
  for (Collective c : {Collective::ReduceScatter, Collective::AllGather}) {
    p.collective = c;
    const Schedule s = ringSchedule(p);
    EXPECT_EQ(s.nsteps, static_cast<uint32_t>(n - 1));
    for (int r = 0; r < n; ++r) EXPECT_EQ(elemsSent(s, r), (n - 1) * count) << toString(c);
  }
  p.collective = Collective::Reduce;
  Schedule s = ringSchedule(p);
  EXPECT_EQ(s.nsteps, static_cast<uint32_t>(n - 1));
  for (int r = 0; r < n; ++r) EXPECT_EQ(elemsSent(s, r), r == p.root ? 0 : count);
  p.collective = Collective::Broadcast;
  s = ringSchedule(p);
  EXPECT_EQ(s.nsteps, static_cast<uint32_t>(n - 1));
  const int last = (p.root + n - 1) % n;
  for (int r = 0; r < n; ++r) EXPECT_EQ(elemsSent(s, r), r == last ? 0 : count);
}

TEST(RingGenerator, FollowsACustomRingOrder) {
  const std::vector<int> order{3, 0, 5, 1, 4, 2};
  for (Collective c : kAllCollectives) {
    GenParams p;
    p.collective = c;
    p.nranks = 6;
    p.count = 1000;
    p.sliceElems = 64;
    p.root = 5;
    p.ring = order;
    const Schedule s = ringSchedule(p);
    const VerifyResult v = verify(s);
    EXPECT_TRUE(v.ok) << toString(c) << ": " << v.message;
    for (size_t i = 0; i < order.size(); ++i) {
      const int me = order[i];
      const int next = order[(i + 1) % order.size()];
      for (const Op& op : s.ranks[static_cast<size_t>(me)]) {
        if (opSends(op.kind)) {
          EXPECT_EQ(op.sendPeer, next) << toString(c);
        }
      }
    }
  }
  GenParams bad;
  bad.nranks = 3;
  bad.count = 10;
  bad.sliceElems = 1;
  bad.ring = {0, 1, 1};
  EXPECT_THROW(ringSchedule(bad), GenError);
}

GenParams ringParams(Collective c, int n, uint64_t count, uint64_t slice, uint32_t window) {
  GenParams p;
  p.collective = c;
  p.nranks = n;
  p.count = count;
  p.sliceElems = slice;
  p.window = window;
  return p;
}

// The ops of one rank, as (kind, chunk, slice) in program order.
std::vector<std::tuple<OpKind, uint32_t, uint32_t>> opKeys(const std::vector<Op>& ops) {
  std::vector<std::tuple<OpKind, uint32_t, uint32_t>> k;
  for (const Op& o : ops) k.emplace_back(o.kind, o.chunk, o.slice);
  return k;
}

TEST(RingGenerator, AWindowTakesItsSlicesStepByStep) {
  // 3 ranks, 4 slices a chunk, windows of 2: rank 0 sends slices 0 and 1 of its first chunk,
  // then receives, reduces and forwards both, step by step; slices 2 and 3 follow.
  const Schedule s = ringSchedule(ringParams(Collective::AllReduce, 3, 12, 1, 2));
  EXPECT_EQ(s.window, 2u);
  const std::vector<Op>& ops = s.ranks[0];
  ASSERT_EQ(ops.size(), 4u * 5u);  // 2(n-1)+1 ops a slice
  for (size_t w = 0; w < 2; ++w) {
    for (size_t j = 0; j < 5; ++j) {
      for (size_t k = 0; k < 2; ++k) {
        const Op& o = ops[w * 10 + j * 2 + k];
        EXPECT_EQ(o.slice, w * 2 + k) << "op " << w * 10 + j * 2 + k;
        EXPECT_EQ(o.step, std::min<uint32_t>(static_cast<uint32_t>(j), 3u));
      }
    }
  }
  EXPECT_EQ(ops[0].kind, OpKind::Send);
  EXPECT_EQ(ops[1].kind, OpKind::Send);
  EXPECT_EQ(ops[2].kind, OpKind::RecvReduceSend);
  EXPECT_EQ(ops[9].kind, OpKind::Recv);
}

TEST(RingGenerator, AWindowReordersTheSameOpsAndNeedsItsCapacity) {
  for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather}) {
    for (int n : {2, 3, 5, 8}) {
      // Chunks of unequal length (count not a multiple of n), so some skip a slice.
      for (uint64_t count : {uint64_t{1}, uint64_t{37}, uint64_t{64}}) {
        const Schedule plain = ringSchedule(ringParams(c, n, count, 2, 1));
        for (uint32_t w : {2u, 3u, 8u}) {
          const std::string at = std::string(toString(c)) + " n=" + std::to_string(n) +
                                 " count=" + std::to_string(count) + " window=" + std::to_string(w);
          const Schedule s = ringSchedule(ringParams(c, n, count, 2, w));
          EXPECT_EQ(s.window, w) << at;
          for (int r = 0; r < n; ++r) {
            auto a = opKeys(plain.ranks[static_cast<size_t>(r)]);
            auto b = opKeys(s.ranks[static_cast<size_t>(r)]);
            std::sort(a.begin(), a.end());
            std::sort(b.begin(), b.end());
            EXPECT_EQ(a, b) << at << " rank " << r;
          }
          const VerifyResult v = verify(s);  // at the schedule's own capacity
          EXPECT_TRUE(v.ok) << at << ": " << v.message;
          // With a full first window every rank sends w messages before it reads one: at
          // capacity w - 1 they all wait for room.
          const uint64_t perRank =
              c == Collective::AllReduce ? count / static_cast<uint64_t>(n) : count;
          if (perRank / 2 >= w) {
            VerifyOptions less;
            less.channelCapacity = static_cast<int>(w) - 1;
            const VerifyResult d = verify(s, less);
            EXPECT_FALSE(d.ok) << at;
            EXPECT_NE(d.message.find("deadlock"), std::string::npos) << at << ": " << d.message;
          }
        }
      }
    }
  }
}

TEST(RingGenerator, WindowOneIsTheSliceBySliceOrder) {
  for (Collective c : kAllCollectives) {
    const Schedule a = ringSchedule(ringParams(c, 4, 29, 3, 1));
    GenParams p = ringParams(c, 4, 29, 3, 1);
    const Schedule b = generate("ring", p);
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(opKeys(a.ranks[static_cast<size_t>(r)]), opKeys(b.ranks[static_cast<size_t>(r)]));
    }
    // Slice-major: a rank's slices never go back.
    for (const auto& ops : a.ranks) {
      for (size_t i = 1; i < ops.size(); ++i) EXPECT_GE(ops[i].slice, ops[i - 1].slice);
    }
  }
  // Chains pipeline slice by slice already: a window leaves them as they are.
  for (Collective c : {Collective::Reduce, Collective::Broadcast}) {
    const Schedule s = ringSchedule(ringParams(c, 4, 29, 3, 8));
    EXPECT_EQ(s.window, 1u);
    const Schedule one = ringSchedule(ringParams(c, 4, 29, 3, 1));
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(opKeys(s.ranks[static_cast<size_t>(r)]), opKeys(one.ranks[static_cast<size_t>(r)]));
    }
  }
}

TEST(RingGenerator, WindowsOutOfRangeOrOffTheRingAreRefused) {
  GenParams p = ringParams(Collective::AllReduce, 4, 100, 10, 0);
  try {
    generate("ring", p);
    FAIL() << "no throw";
  } catch (const GenError& e) {
    EXPECT_NE(std::string(e.what()).find("window must be in 1..1024 slices (got 0)"),
              std::string::npos)
        << e.what();
  }
  p.window = 1025;
  EXPECT_THROW(generate("ring", p), GenError);
  p.window = 4;
  EXPECT_NO_THROW(generate("ring", p));
  try {
    generate("tree", p);
    FAIL() << "no throw";
  } catch (const GenError& e) {
    EXPECT_NE(std::string(e.what()).find("ring's alone; tree takes its slices one by one"),
              std::string::npos)
        << e.what();
  }
}

TEST(BaselineGenerators, StepCountsAndTraffic) {
  for (int n : {2, 5, 8, 12}) {
    GenParams p;
    p.nranks = n;
    p.count = 999;
    p.sliceElems = 100;
    int l = 0;
    while ((1 << l) < n) ++l;
    const Schedule rb = reduceBroadcastAllReduce(p);
    EXPECT_EQ(rb.nsteps, static_cast<uint32_t>(2 * l)) << n;
    EXPECT_EQ(elemsSent(rb, 0), static_cast<uint64_t>(l) * p.count) << n;

    const Schedule ps = parameterServerAllReduce(p);
    EXPECT_EQ(ps.nsteps, 2u);
    EXPECT_EQ(elemsSent(ps, 0), static_cast<uint64_t>(n - 1) * p.count);
    for (int r = 1; r < n; ++r) EXPECT_EQ(elemsSent(ps, r), p.count);

    int m = 0;
    while ((2 << m) <= n) ++m;
    const bool pow2 = (1 << m) == n;
    const Schedule rd = recursiveDoublingAllReduce(p);
    EXPECT_EQ(rd.nsteps, static_cast<uint32_t>(m + (pow2 ? 0 : 2))) << n;
    EXPECT_EQ(elemsSent(rd, (1 << m) - 1), static_cast<uint64_t>(m) * p.count) << n;
  }
}

TEST(GeneratorDispatch, NamesAndSupport) {
  const std::vector<std::string> want{"ring",
                                      "tree",
                                      "halving-doubling",
                                      "recursive-doubling",
                                      "reduce-broadcast",
                                      "parameter-server",
                                      "hierarchical",
                                      "bruck",
                                      "pat",
                                      "swing",
                                      "swing-latency",
                                      "knomial",
                                      "switch"};
  EXPECT_EQ(algorithmNames(), want);
  for (const std::string& a : want) {
    for (Collective c : kAllCollectives) {
      const bool all = a == "ring" || a == "tree";
      const bool gathers = (a == "bruck" || a == "pat") &&
                           (c == Collective::AllGather || c == Collective::ReduceScatter);
      const bool rooted = a == "knomial" && (c == Collective::Reduce || c == Collective::Broadcast);
      EXPECT_EQ(algorithmSupports(a, c), all || gathers || rooted || c == Collective::AllReduce)
          << a;
    }
  }
  EXPECT_FALSE(algorithmSupports("butterfly", Collective::AllReduce));
}

TEST(GeneratorDispatch, RefusesBadParametersByName) {
  GenParams p;
  p.nranks = 4;
  p.count = 100;
  p.sliceElems = 10;
  try {
    generate("butterfly", p);
    FAIL() << "no throw";
  } catch (const GenError& e) {
    EXPECT_NE(std::string(e.what()).find("butterfly"), std::string::npos) << e.what();
  }
  p.collective = Collective::Broadcast;
  try {
    generate("parameter-server", p);
    FAIL() << "no throw";
  } catch (const GenError& e) {
    EXPECT_NE(std::string(e.what()).find("broadcast"), std::string::npos) << e.what();
  }
  p.collective = Collective::AllReduce;
  p.sliceElems = 0;
  EXPECT_THROW(generate("ring", p), GenError);
  EXPECT_THROW(generate("recursive-doubling", p), GenError);
  p.sliceElems = 10;
  p.nranks = 0;
  EXPECT_THROW(generate("reduce-broadcast", p), GenError);
  p.nranks = 4;
  p.collective = Collective::Reduce;
  p.root = 4;
  EXPECT_THROW(generate("ring", p), GenError);
}

// Reports (does not assert) how long the verifier takes on the largest schedule of the sweep.
TEST(GeneratorTiming, LargestRingScheduleVerifies) {
  GenParams p;
  p.nranks = 64;
  p.count = 1000003;
  p.sliceElems = 1024;
  const Schedule s = ringSchedule(p);
  size_t ops = 0;
  for (const auto& r : s.ranks) ops += r.size();
  const auto t0 = SteadyClock::now();
  const VerifyResult v = verify(s);
  const auto t1 = SteadyClock::now();
  ASSERT_TRUE(v.ok) << v.message;
  const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  std::cout << "[ timing   ] ring allreduce, 64 ranks, count 1000003, slice 1024: " << ops
            << " ops verified (out of place and in place) in " << ms << " ms\n";
}

}  // namespace
}  // namespace arl
