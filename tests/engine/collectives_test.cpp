// Every algorithm, run for real (runLocal: threads over the loopback transport, CPU backend),
// against the serial expected result of check.h, with #wrong == 0.
//
// Coverage: each (algorithm, collective) pair it supports runs the full grid of ranks
// {1, 2, 3, 4, 5, 8} x counts {0, 1, 3, 1001} x in place / out of place for one type, and
// every type x operator (operators only for reducing collectives) on every rank count,
// rotating through counts, placements, slice sizes, roots, window sizes and host groupings
// (ranks per host 0, 2, 3 for the hierarchical algorithm). About 3 000 runs; the grid is
// sampled so that the whole file stays within seconds on a 2-core machine.
#include <gtest/gtest.h>

#include <iterator>
#include <ostream>
#include <string>
#include <vector>

#include "base/errors.h"
#include "exec/check.h"
#include "exec/local_run.h"
#include "schedule/generators.h"

namespace arl {
namespace {

using namespace std::chrono_literals;

struct Pair {
  std::string algo;
  Collective coll;
};

void PrintTo(const Pair& p, std::ostream* os) { *os << p.algo << " " << toString(p.coll); }

std::vector<Pair> supportedPairs() {
  std::vector<Pair> out;
  for (const std::string& a : algorithmNames()) {
    for (Collective c : kAllCollectives) {
      if (algorithmSupports(a, c)) out.push_back({a, c});
    }
  }
  return out;
}

struct Case {
  DataType dtype = DataType::Float;
  RedOp op = RedOp::Sum;
  int n = 1;
  uint64_t count = 0;
  uint64_t slice = 1;
  bool inPlace = false;
  int root = 0;
  int ranksPerHost = 0;
  int inflight = 4;
  int window = 1;  // ring's window of slices; other algorithms take 1 (slicesWindowOf)
  int iterations = 1;
};

std::string describe(const Pair& p, const Case& c) {
  return p.algo + " " + std::string(toString(p.coll)) + " " + std::string(toString(c.dtype)) + " " +
         std::string(toString(c.op)) + " ranks=" + std::to_string(c.n) +
         " count=" + std::to_string(c.count) + " slice=" + std::to_string(c.slice) +
         (c.inPlace ? " in-place" : " out-of-place") + " root=" + std::to_string(c.root) +
         " ranks-per-host=" + std::to_string(c.ranksPerHost) +
         " inflight=" + std::to_string(c.inflight) + " window=" + std::to_string(c.window) +
         " iterations=" + std::to_string(c.iterations);
}

LocalRunResult runCase(const Pair& p, const Case& c) {
  GenParams gp;
  gp.collective = p.coll;
  gp.nranks = c.n;
  gp.count = c.count;
  gp.sliceElems = c.slice;
  gp.root = c.root;
  gp.ranksPerHost = c.ranksPerHost;
  gp.window = slicesWindowOf(p.algo, c.window);
  const Schedule s = generate(p.algo, gp);
  LocalRunOptions o;
  o.dtype = c.dtype;
  o.op = c.op;
  o.inPlace = c.inPlace;
  o.inflight = c.inflight;
  o.iterations = c.iterations;
  o.stallTimeout = 20s;  // generous: a loaded machine must not turn slowness into failure
  return runLocal(s, o);
}

void expectExact(const Pair& p, const Case& c) {
  SCOPED_TRACE(describe(p, c));
  LocalRunResult r;
  ASSERT_NO_THROW(r = runCase(p, c));
  EXPECT_EQ(r.wrong, 0u);
  ASSERT_EQ(r.outputs.size(), static_cast<size_t>(c.n + helperWorkers(p.algo)));
}

constexpr int kRanks[] = {1, 2, 3, 4, 5, 8};
constexpr uint64_t kCounts[] = {0, 1, 3, 1001};

// Slice sizes that make the large count pipeline (several slices per chunk), fit whole, or
// split unevenly; tiny counts get tiny slices.
uint64_t sliceFor(uint64_t count, size_t k) {
  if (count <= 3) return 1 + k % 2;
  constexpr uint64_t kSlices[] = {64, 100, 333, 4096};
  return kSlices[k % 4];
}

class Collectives : public ::testing::TestWithParam<Pair> {};

TEST_P(Collectives, EveryRankCountAndPlacement) {
  const Pair& p = GetParam();
  size_t k = 0;
  for (int n : kRanks) {
    if (!rankCountRefusal(p.algo, n).empty()) continue;
    for (uint64_t count : kCounts) {
      for (bool inPlace : {false, true}) {
        Case c;
        c.dtype = collectiveReduces(p.coll) ? DataType::Float : DataType::Int32;
        c.op = RedOp::Sum;
        c.n = n;
        c.count = count;
        c.slice = sliceFor(count, k);
        c.inPlace = inPlace;
        c.root = static_cast<int>(k % static_cast<size_t>(n));
        c.ranksPerHost = static_cast<int>(k % 3) + 1 == 1 ? 0 : static_cast<int>(k % 3) + 1;
        c.inflight = 1 + static_cast<int>(k % 3) * 3;  // 1, 4, 7
        c.window =
            k % 4 < 2 ? 1 : 3 + static_cast<int>(k % 4) * 2;  // 1, 1, 7, 9: wider than inflight
        c.iterations = 1 + static_cast<int>(k % 2);
        expectExact(p, c);
        ++k;
      }
    }
  }
}

TEST_P(Collectives, EveryTypeAndOperator) {
  const Pair& p = GetParam();
  std::vector<RedOp> ops(std::begin(kAllRedOps), std::end(kAllRedOps));
  if (!collectiveReduces(p.coll)) ops = {RedOp::Sum};  // the operator plays no part
  size_t k = 0;
  for (DataType t : kAllDataTypes) {
    for (RedOp op : ops) {
      // Every rank count; the count, placement and the rest rotate from run to run (the
      // large count comes first so that every combination meets it at least once).
      for (size_t v = 0; v < std::size(kRanks); ++v, ++k) {
        Case c;
        c.dtype = t;
        c.op = op;
        c.n = kRanks[(k + v) % std::size(kRanks)];
        c.count = kCounts[(std::size(kCounts) - 1 + v) % std::size(kCounts)];
        c.slice = sliceFor(c.count, k);
        c.inPlace = (k + v / 2) % 2 == 1;
        c.root = static_cast<int>((k * 7) % static_cast<size_t>(c.n));
        c.ranksPerHost = static_cast<int>(k % 3) + 1 == 1 ? 0 : static_cast<int>(k % 3) + 1;
        c.inflight = 1 + static_cast<int>(k % 4) * 2;
        if (!rankCountRefusal(p.algo, c.n).empty()) continue;
        expectExact(p, c);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, Collectives, ::testing::ValuesIn(supportedPairs()),
                         [](const ::testing::TestParamInfo<Pair>& info) {
                           std::string name =
                               info.param.algo + "_" + std::string(toString(info.param.coll));
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

// Ring and tree combine the ranks in different orders; with check.h's inputs they must still
// agree bit for bit, on every rank, for every type and operator.
TEST(CollectivesBitwise, RingAndTreeAllReduceAgreeOnEveryRank) {
  for (DataType t : kAllDataTypes) {
    for (RedOp op : kAllRedOps) {
      Case c;
      c.dtype = t;
      c.op = op;
      c.n = 5;
      c.count = 1001;
      c.slice = 100;
      const LocalRunResult ring = runCase({"ring", Collective::AllReduce}, c);
      const LocalRunResult tree = runCase({"tree", Collective::AllReduce}, c);
      SCOPED_TRACE(std::string(toString(t)) + " " + std::string(toString(op)));
      EXPECT_EQ(ring.wrong, 0u);
      EXPECT_EQ(tree.wrong, 0u);
      for (int r = 0; r < c.n; ++r) {
        EXPECT_EQ(ring.outputs[static_cast<size_t>(r)], ring.outputs[0]) << "ring rank " << r;
        EXPECT_EQ(tree.outputs[static_cast<size_t>(r)], ring.outputs[0]) << "tree rank " << r;
      }
    }
  }
}

// The check itself must be able to fail: a corrupted output is counted.
TEST(CollectivesBitwise, CountWrongSeesACorruptedElement) {
  Case c;
  c.n = 3;
  c.count = 10;
  c.slice = 4;
  LocalRunResult r = runCase({"ring", Collective::AllReduce}, c);
  ASSERT_EQ(r.wrong, 0u);
  std::vector<unsigned char> expected(r.outputs[1].size());
  ASSERT_TRUE(fillExpected(expected.data(), Collective::AllReduce, DataType::Float, RedOp::Sum, 1,
                           3, 10, 0));
  EXPECT_EQ(countWrong(r.outputs[1].data(), expected.data(), DataType::Float, 10), 0u);
  r.outputs[1][4 * 7] ^= 1;
  EXPECT_EQ(countWrong(r.outputs[1].data(), expected.data(), DataType::Float, 10), 1u);
}

}  // namespace
}  // namespace arl
