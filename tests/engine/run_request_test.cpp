// resolveRunRequest: the one check of a run's parameters, shared by plan, bench and the
// coordinator. Each refusal names its field, the refused value and the accepted range.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "exec/run_request.h"
#include "schedule/schedule.h"

namespace arl {
namespace {

std::vector<std::string> oneHost(int n) {
  return std::vector<std::string>(static_cast<size_t>(n), "h");
}

RunRequest valid() {
  RunRequest q;
  q.count = 1000;
  q.sliceBytes = 256;
  return q;
}

struct Refusal {
  const char* name;
  std::function<void(RunRequest&)> edit;
  int ranks;
  RunField field;
  const char* message;  // the whole of what()
};

TEST(RunRequest, EachRefusalNamesItsFieldValueAndRange) {
  const Refusal cases[] = {
      {"no ranks", [](RunRequest&) {}, 0, RunField::Ranks, "ranks 0: must be in 1..64"},
      {"65 ranks", [](RunRequest&) {}, 65, RunField::Ranks, "ranks 65: must be in 1..64"},
      {"unknown algorithm", [](RunRequest& q) { q.algorithm = "nope"; }, 4, RunField::Algorithm,
       nullptr},
      {"unsupported collective",
       [](RunRequest& q) {
         q.algorithm = "recursive-doubling";
         q.collective = Collective::Reduce;
       },
       4, RunField::Collective,
       "collective reduce: algorithm recursive-doubling does not implement it (it implements "
       "allreduce)"},
      {"radix 1", [](RunRequest& q) { q.radix = 1; }, 4, RunField::Radix,
       "knomial radix 1: must be in 2..4"},
      {"radix above the ranks", [](RunRequest& q) { q.radix = 5; }, 4, RunField::Radix,
       "knomial radix 5: must be in 2..4"},
      {"negative radix", [](RunRequest& q) { q.radix = -2; }, 4, RunField::Radix,
       "knomial radix -2: must be in 2..4"},
      {"zero slice", [](RunRequest& q) { q.sliceBytes = 0; }, 4, RunField::SliceBytes,
       "slice size in bytes 0: must be a whole number, at least 1, of float elements (4 bytes "
       "each)"},
      {"slice of one and a half floats", [](RunRequest& q) { q.sliceBytes = 6; }, 4,
       RunField::SliceBytes,
       "slice size in bytes 6: must be a whole number, at least 1, of float elements (4 bytes "
       "each)"},
      {"too many slices",
       [](RunRequest& q) {
         q.count = uint64_t{1} << 22;
         q.sliceBytes = 4;
       },
       4, RunField::SliceBytes, nullptr},
      {"count past the offsets", [](RunRequest& q) { q.count = uint64_t{1} << 60; }, 8,
       RunField::Count, nullptr},
      {"root", [](RunRequest& q) { q.root = 4; }, 4, RunField::Root, "root 4: must be in 0..3"},
      {"ranks per host above the ranks", [](RunRequest& q) { q.ranksPerHost = 5; }, 4,
       RunField::RanksPerHost, "ranks per host 5: must be in 0..4"},
      {"inflight", [](RunRequest& q) { q.inflight = 2000; }, 4, RunField::Inflight,
       "slices in flight 2000: must be in 1..1024"},
      {"no inflight", [](RunRequest& q) { q.inflight = 0; }, 4, RunField::Inflight,
       "slices in flight 0: must be in 1..1024"},
      {"iterations", [](RunRequest& q) { q.iterations = 0; }, 4, RunField::Iterations,
       "iterations 0: must be in 1..1000000"},
      {"warm-up", [](RunRequest& q) { q.warmup = -1; }, 4, RunField::Warmup,
       "warm-up iterations -1: must be in 0..1000000"},
      {"stall timeout", [](RunRequest& q) { q.stallTimeout = std::chrono::milliseconds(0); }, 4,
       RunField::StallTimeout, "stall timeout 0 ms: must be in 1..3600000 ms"},
      {"ring too short",
       [](RunRequest& q) {
         q.ringOrder = {0, 2, 1};
       },
       4, RunField::RingOrder,
       "ring order 0,2,1: must name each of the 4 ranks 0..3 once (it names 3)"},
      {"ring repeats",
       [](RunRequest& q) {
         q.ringOrder = {0, 2, 2, 3};
       },
       4, RunField::RingOrder,
       "ring order 0,2,2,3: must name each of the 4 ranks 0..3 once (2 comes twice)"},
      {"ring names no rank",
       [](RunRequest& q) {
         q.ringOrder = {0, 1, 2, 4};
       },
       4, RunField::RingOrder,
       "ring order 0,1,2,4: must name each of the 4 ranks 0..3 once (4 is not a rank)"},
      // The shaping: each part is its own field, so that a client names the flag or the
      // control that set it, not the shaping as a whole.
      {"negative port rate", [](RunRequest& q) { q.shaping.portBytesPerSecond = -5e6; }, 4,
       RunField::PortRate, "port rate -5e+06 bytes/s: a rate must be positive"},
      {"negative latency", [](RunRequest& q) { q.shaping.addedLatencySeconds = -1e-3; }, 4,
       RunField::AddedLatency, "added latency -0.001 s: must be zero or more"},
      {"slow rank beyond the world",
       [](RunRequest& q) {
         q.shaping.portBytesPerSecond = 200e6;
         q.shaping.rankPortBytesPerSecond[7] = 50e6;
       },
       4, RunField::SlowRank, "slow rank 7: rank 7 is out of range for 4 ranks (0..3)"},
      {"slow rank at 0", [](RunRequest& q) { q.shaping.rankPortBytesPerSecond[1] = 0; }, 4,
       RunField::SlowRank, "slow rank 1: rate 0 bytes/s must be positive"},
      {"slow link beyond the world",
       [](RunRequest& q) {
         q.shaping.linkBytesPerSecond[{1, 4}] = 50e6;
       },
       4, RunField::SlowLink, "slow link 1-4: rank 4 is out of range for 4 ranks (0..3)"},
      {"slow link to itself",
       [](RunRequest& q) {
         q.shaping.linkBytesPerSecond[{2, 2}] = 50e6;
       },
       4, RunField::SlowLink, "slow link 2-2: a link joins two different ranks"},
  };
  for (const Refusal& c : cases) {
    RunRequest q = valid();
    c.edit(q);
    try {
      resolveRunRequest(q, oneHost(c.ranks));
      ADD_FAILURE() << c.name << ": accepted";
    } catch (const RunRequestError& e) {
      EXPECT_EQ(e.field, c.field) << c.name << ": " << e.what();
      if (c.message) {
        EXPECT_EQ(std::string(e.what()), c.message) << c.name;
      }
      EXPECT_EQ(std::string(e.what()),
                std::string(describe(e.field)) + " " + e.value + ": " + e.rule);
    }
  }
}

TEST(RunRequest, HierarchicalRefusesUnevenHostsUnlessToldTheirSize) {
  RunRequest q = valid();
  q.algorithm = "hierarchical";
  const std::vector<std::string> hosts = {"a", "a", "b"};
  try {
    resolveRunRequest(q, hosts);
    ADD_FAILURE() << "accepted";
  } catch (const RunRequestError& e) {
    EXPECT_EQ(e.field, RunField::RanksPerHost);
    EXPECT_NE(e.value.find("a: 2, b: 1"), std::string::npos) << e.what();
  }
  q.ranksPerHost = 2;
  EXPECT_EQ(resolveRunRequest(q, hosts).ranksPerHost, 2);
  q.algorithm = "ring";
  q.ranksPerHost = 0;
  EXPECT_EQ(resolveRunRequest(q, hosts).ranksPerHost, 3);  // uneven: one group of all ranks
}

TEST(RunRequest, ResolvesRingRanksPerHostAndTheSchedule) {
  RunRequest q = valid();
  q.ringOrder = {0, 2, 1, 3};
  Schedule s;
  const ResolvedRun run = resolveRunRequest(q, {"a", "a", "b", "b"}, &s);
  EXPECT_EQ(run.nranks, 4);
  EXPECT_EQ(run.ranksPerHost, 2);
  EXPECT_EQ(run.ringOrder, (std::vector<int>{0, 2, 1, 3}));
  EXPECT_EQ(run.sliceElems, 64u);
  EXPECT_EQ(s.nranks, 4);
  EXPECT_EQ(run.steps, s.nsteps);
  // The ring's order decides the peers: rank 0 sends to 2, and receives from 3.
  bool sendsTo2 = false, recvsFrom3 = false;
  for (const Op& op : s.ranks[0]) {
    sendsTo2 |= opSends(op.kind) && op.sendPeer == 2;
    recvsFrom3 |= opRecvs(op.kind) && op.recvPeer == 3;
  }
  EXPECT_TRUE(sendsTo2);
  EXPECT_TRUE(recvsFrom3);
  ASSERT_EQ(run.bytesSent.size(), 4u);
  EXPECT_GT(run.bytesSent[0], 0u);
  EXPECT_EQ(ranksPerHost(0, {"a", "b", "b"}), 3);
  EXPECT_EQ(ranksPerHost(0, {"a", "b"}), 1);
  EXPECT_EQ(ranksPerHost(3, {"a", "b"}), 3);
}

// The radix reaches the generator: k = 2 is binomial (log2 n rounds each way), a larger k
// fewer rounds; unset, it is 4, or n when there are fewer ranks.
TEST(RunRequest, RadixResolvesAndShapesTheKnomialTree) {
  RunRequest q = valid();
  q.algorithm = "knomial";
  const auto steps = [&](int radix, int n) {
    q.radix = radix;
    Schedule s;
    const ResolvedRun run = resolveRunRequest(q, oneHost(n), &s);
    EXPECT_EQ(run.steps, s.nsteps);
    return std::pair{run.radix, s.nsteps};
  };
  EXPECT_EQ(steps(2, 16), (std::pair{2, 8u}));  // 4 rounds up, 4 down
  EXPECT_EQ(steps(4, 16), (std::pair{4, 4u}));
  EXPECT_EQ(steps(16, 16), (std::pair{16, 2u}));
  EXPECT_EQ(steps(0, 16), (std::pair{4, 4u}));
  EXPECT_EQ(steps(0, 3), (std::pair{3, 2u}));
  EXPECT_EQ(steps(0, 1).first, 2);
  EXPECT_EQ(resolveRadix(0, 64), kDefaultRadix);
  EXPECT_EQ(resolveRadix(7, 64), 7);
}

}  // namespace
}  // namespace arl
