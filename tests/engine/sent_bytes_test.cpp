// What each rank's telemetry says it sent (exec/sent_bytes.h), from real runs in process, beside
// the schedule's count and the algorithm's formula (sentFormula, model.h).
#include "exec/sent_bytes.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exec/local_run.h"
#include "model/model.h"
#include "schedule/generators.h"

namespace arl {
namespace {

struct Ran {
  Schedule schedule;
  std::vector<TelemetryEvent> events;
};

Ran runRing(const std::string& algo, int n, uint64_t count, TelemetryLevel level, int iterations) {
  GenParams g;
  g.nranks = n;
  g.count = count;
  g.sliceElems = count / static_cast<uint64_t>(n) / 4;
  Ran r{generate(algo, g), {}};
  BoundedSink sink(1 << 20);
  LocalRunOptions o;
  o.telemetry = level;
  o.sink = &sink;
  o.iterations = iterations;
  o.warmup = 1;
  EXPECT_EQ(runLocal(r.schedule, o).wrong, 0u);
  r.events = sink.take();
  return r;
}

TEST(SentBytes, ARingsRanksSendTheFormulaEveryIterationAsTheScheduleSays) {
  for (int n : {4, 8, 16}) {
    const uint64_t count = 16 * 1024;  // floats: S = 64 KiB
    const Ran r = runRing("ring", n, count, TelemetryLevel::Chunks, 3);
    const auto formula = sentFormula("ring", Collective::AllReduce, n, count * 4);
    ASSERT_TRUE(formula.has_value());
    EXPECT_EQ(formula->text, "2(n−1)/n·S");
    const std::vector<RankSent> sent = sentOf(r.events, n);
    ASSERT_EQ(sent.size(), static_cast<size_t>(n));
    for (int rank = 0; rank < n; ++rank) {
      const RankSent& s = sent[static_cast<size_t>(rank)];
      EXPECT_EQ(s.iterations, 3u) << n << " ranks, rank " << rank;
      EXPECT_EQ(s.bytes, bytesSent(r.schedule, rank, DataType::Float));
      EXPECT_DOUBLE_EQ(static_cast<double>(s.bytes), formula->bytes) << n << " ranks";
      EXPECT_FALSE(s.varies);
      EXPECT_EQ(s.sendEndBytes, 3 * s.bytes);  // counted send by send, the same
      EXPECT_GT(s.sendEnds, 0u);
    }
  }
}

TEST(SentBytes, AtStepsOnlyTheIterationsCountAndOffMeasuresNothing) {
  const Ran steps = runRing("ring", 4, 4096, TelemetryLevel::Steps, 2);
  const std::vector<RankSent> s = sentOf(steps.events, 4);
  EXPECT_EQ(s[2].iterations, 2u);
  EXPECT_EQ(s[2].bytes, 6u * 4096u);  // 2(n-1)/n of 16 KiB
  EXPECT_EQ(s[2].sendEnds, 0u);
  const Ran off = runRing("ring", 4, 4096, TelemetryLevel::Off, 2);
  EXPECT_TRUE(off.events.empty());
  for (const RankSent& r : sentOf(off.events, 4)) EXPECT_EQ(r, RankSent{});
}

TEST(SentBytes, BatchesInAnyOrderAddUpAndADifferingIterationIsNoted) {
  TelemetryEvent end;
  end.kind = EventKind::IterationEnd;
  end.rank = 1;
  end.bytes = 100;
  TelemetryEvent send;
  send.kind = EventKind::SendEnd;
  send.rank = 1;
  send.bytes = 40;
  SentTally t(3);
  t.add(1, std::vector<TelemetryEvent>{send, end});
  end.bytes = 120;
  t.add(end);
  const std::vector<RankSent> r = t.ranks();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0], RankSent{});
  EXPECT_EQ(r[1].iterations, 2u);
  EXPECT_EQ(r[1].bytes, 120u);  // the largest
  EXPECT_TRUE(r[1].varies);
  EXPECT_EQ(r[1].sendEnds, 1u);
  EXPECT_EQ(r[1].sendEndBytes, 40u);
  // A rank beyond the run's is not one of its ranks.
  end.rank = 5;
  t.add(end);
  t.add(5, std::vector<TelemetryEvent>{end});
  EXPECT_EQ(t.ranks().size(), 3u);
  // A batch is credited to its own rank, whatever rank its events name.
  end.rank = 2;
  t.add(1, std::vector<TelemetryEvent>{end});
  EXPECT_EQ(t.ranks()[1].iterations, 3u);
  EXPECT_EQ(t.ranks()[2], RankSent{});
}

TEST(SentBytes, TheFormulaIsGivenOnlyWhereEveryRankSendsTheSame) {
  EXPECT_EQ(sentFormula("ring", Collective::ReduceScatter, 4, 1000)->bytes, 750.0);
  EXPECT_EQ(sentFormula("halving-doubling", Collective::AllReduce, 8, 800)->bytes, 1400.0);
  EXPECT_EQ(sentFormula("recursive-doubling", Collective::AllReduce, 8, 800)->bytes, 2400.0);
  EXPECT_FALSE(sentFormula("halving-doubling", Collective::AllReduce, 6, 800));  // folds
  EXPECT_FALSE(sentFormula("tree", Collective::AllReduce, 8, 800));
  EXPECT_FALSE(sentFormula("parameter-server", Collective::AllReduce, 8, 800));
  EXPECT_FALSE(sentFormula("ring", Collective::Broadcast, 8, 800));
  EXPECT_FALSE(sentFormula("no-such", Collective::AllReduce, 8, 800));
  // The forms' text is docs/algorithms.md's, for every algorithm the model knows.
  EXPECT_EQ(closedFormText("ring", Collective::AllReduce),
            "2(n−1)·k(S/n)·α + 2(n−1)/n·S·β + (n−1)/n·S·γ");
  // A ring's window pays a step's latency once a window; other algorithms keep their form.
  EXPECT_EQ(closedFormText("ring", Collective::AllReduce, 8),
            "2(n−1)·⌈k(S/n)/W⌉·α + 2(n−1)/n·S·β + (n−1)/n·S·γ; W = 8");
  EXPECT_EQ(closedFormText("ring", Collective::AllGather, 4),
            "(n−1)·⌈k(S/n)/W⌉·α + (n−1)/n·S·β; W = 4");
  EXPECT_EQ(closedFormText("ring", Collective::Broadcast, 8),
            closedFormText("ring", Collective::Broadcast));
  EXPECT_EQ(closedFormText("tree", Collective::AllReduce, 8),
            closedFormText("tree", Collective::AllReduce));
  for (const std::string& a : algorithmNames()) {
    EXPECT_FALSE(closedFormText(a, Collective::AllReduce).empty()) << a;
  }
  EXPECT_TRUE(closedFormText("parameter-server", Collective::Broadcast).empty());
}

}  // namespace
}  // namespace arl
