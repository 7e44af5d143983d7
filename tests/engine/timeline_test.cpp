// The timeline (exec/timeline.h) on real telemetry of in-process runs of every algorithm, and
// on hand-made events whose pairing is known: every message paired once with its own receive,
// lost halves counted and never paired with another message's, in-flight lookups as a brute
// force finds them.
#include "exec/timeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include "exec/local_run.h"
#include "schedule/generators.h"

namespace arl {
namespace {

struct RealRun {
  Schedule schedule;
  std::vector<TelemetryEvent> events;
  int iterations = 0;
};

// Chunk telemetry of a real run (threads over loopback, real buffers). Slices are smaller
// than chunks, so a chunk travels as several slices, and several are in flight.
RealRun realRun(const std::string& algo, Collective c, int n, uint64_t count) {
  RealRun r;
  GenParams p;
  p.collective = c;
  p.nranks = n;
  p.count = count;
  p.sliceElems = 16;
  p.ranksPerHost = 2;
  r.schedule = generate(algo, p);
  r.iterations = 2;
  BoundedSink sink(1'000'000);
  LocalRunOptions o;
  o.iterations = r.iterations;
  o.telemetry = TelemetryLevel::Chunks;
  o.sink = &sink;
  o.inflight = 4;
  o.runId = 9;
  runLocal(r.schedule, o);
  r.events = sink.take();
  return r;
}

uint64_t sendsIn(const Schedule& s) {
  uint64_t n = 0;
  for (const auto& ops : s.ranks) {
    for (const Op& op : ops) n += opSends(op.kind) ? 1 : 0;
  }
  return n;
}

// A transfer as the pair of events it joins, comparable across timelines of different event
// vectors (the events themselves, not their positions).
auto identity(const TelemetryEvent& e) {
  return std::make_tuple(e.rank, e.iteration, e.step, e.kind, e.peer, e.chunk, e.offset, e.tNs);
}
using Pair = std::pair<decltype(identity(TelemetryEvent())), decltype(identity(TelemetryEvent()))>;
std::set<Pair> pairsOf(const Timeline& tl, const std::vector<TelemetryEvent>& ev) {
  std::set<Pair> out;
  for (const Transfer& x : tl.transfers()) {
    out.insert({identity(ev[x.sendEvent]), identity(ev[x.recvEvent])});
  }
  return out;
}

TEST(Timeline, PairsEveryMessageOfEveryAlgorithm) {
  for (const std::string& algo : algorithmNames()) {
    for (int n : {3, 4, 5}) {
      if (!rankCountRefusal(algo, n).empty()) continue;
      const RealRun r = realRun(algo, Collective::AllReduce, n, 101);
      const Timeline tl(r.events);
      SCOPED_TRACE(algo + " on " + std::to_string(n) + " ranks");
      EXPECT_EQ(tl.transfers().size(), sendsIn(r.schedule) * r.iterations);
      EXPECT_EQ(tl.stats().unmatchedSends, 0u);
      EXPECT_EQ(tl.stats().unmatchedRecvs, 0u);
      EXPECT_EQ(tl.stats().unpairedSendEnds, 0u);
      for (const Transfer& x : tl.transfers()) {
        EXPECT_NE(x.sender, x.receiver);
        EXPECT_LE(x.sendStartNs, x.sendEndNs);
        EXPECT_LE(x.sendStartNs, x.recvEndNs);  // one clock in process
        EXPECT_NE(x.provenance, 0u);
        // The switch contributes nothing: what it sends is its ranks'.
        if (x.sender < resultRanks(r.schedule)) {
          EXPECT_TRUE(x.provenance >> x.sender & 1) << "the sender's contribution travels";
        }
        EXPECT_EQ(r.events[x.sendEvent].kind, EventKind::SendStart);
        EXPECT_EQ(r.events[x.recvEvent].kind, EventKind::RecvEnd);
      }
      EXPECT_TRUE(std::is_sorted(
          tl.transfers().begin(), tl.transfers().end(),
          [](const Transfer& a, const Transfer& b) { return a.sendStartNs < b.sendStartNs; }));
    }
  }
}

TEST(Timeline, RingPairsEveryCollective) {
  for (Collective c : {Collective::ReduceScatter, Collective::AllGather, Collective::Reduce,
                       Collective::Broadcast}) {
    const RealRun r = realRun("ring", c, 4, 100);
    const Timeline tl(r.events);
    EXPECT_EQ(tl.transfers().size(), sendsIn(r.schedule) * r.iterations) << toString(c);
    EXPECT_EQ(tl.stats().unmatchedSends + tl.stats().unmatchedRecvs, 0u) << toString(c);
  }
}

// Whatever is lost, every pair the timeline makes is one the full telemetry makes, and every
// kept send and receive is either paired or counted.
void expectNoMisPairing(const RealRun& r, const std::vector<TelemetryEvent>& kept) {
  const std::set<Pair> truth = pairsOf(Timeline(r.events), r.events);
  const Timeline tl(kept);
  for (const Pair& p : pairsOf(tl, kept)) {
    EXPECT_TRUE(truth.count(p)) << "rank " << std::get<0>(p.first) << " -> "
                                << std::get<0>(p.second) << " step " << std::get<2>(p.first)
                                << " was paired with another message's receive";
  }
  uint64_t sends = 0, recvs = 0;
  for (const TelemetryEvent& e : kept) {
    sends += e.kind == EventKind::SendStart;
    recvs += e.kind == EventKind::RecvEnd;
  }
  EXPECT_EQ(tl.transfers().size() + tl.stats().unmatchedSends, sends);
  EXPECT_EQ(tl.transfers().size() + tl.stats().unmatchedRecvs, recvs);
}

TEST(Timeline, LostSuffixLeavesOnlyTruePairs) {
  const RealRun r = realRun("ring", Collective::AllReduce, 4, 200);
  // What the coordinator keeps past --max-events: the first events in arrival order.
  for (size_t keep : {r.events.size() / 3, r.events.size() / 2, r.events.size() - 7}) {
    const std::vector<TelemetryEvent> kept(r.events.begin(),
                                           r.events.begin() + static_cast<std::ptrdiff_t>(keep));
    expectNoMisPairing(r, kept);
    EXPECT_GT(Timeline(kept).transfers().size(), 0u);
  }
}

// Loses events of the kinds in `kinds` with probability `lose`, and shuffles what is kept.
std::vector<TelemetryEvent> lose(const std::vector<TelemetryEvent>& events, double p,
                                 std::set<EventKind> kinds, std::mt19937& rng) {
  std::vector<TelemetryEvent> kept;
  std::bernoulli_distribution drop(p);
  for (const TelemetryEvent& e : events) {
    if (!kinds.count(e.kind) || !drop(rng)) kept.push_back(e);
  }
  std::shuffle(kept.begin(), kept.end(), rng);  // any order
  return kept;
}

TEST(Timeline, HalvesLostOnOneSideAreCountedNeverMisPaired) {
  for (const std::string algo : {"ring", "tree", "halving-doubling", "hierarchical"}) {
    const RealRun r = realRun(algo, Collective::AllReduce, 5, 160);
    std::mt19937 rng(7);
    for (double p : {0.05, 0.3, 0.7}) {
      SCOPED_TRACE(algo + ", lost " + std::to_string(p));
      expectNoMisPairing(r, lose(r.events, p, {EventKind::SendStart, EventKind::SendEnd}, rng));
      expectNoMisPairing(r, lose(r.events, p, {EventKind::RecvEnd}, rng));
    }
  }
}

TEST(Timeline, EventsLostAnywhereAreAllAccountedFor) {
  const RealRun r = realRun("ring", Collective::AllReduce, 5, 160);
  std::mt19937 rng(11);
  for (double p : {0.05, 0.3, 0.7}) {
    const std::vector<TelemetryEvent> kept =
        lose(r.events, p,
             {EventKind::SendStart, EventKind::SendEnd, EventKind::RecvEnd, EventKind::ReduceEnd,
              EventKind::StepEnd},
             rng);
    const Timeline tl(kept);
    uint64_t sends = 0, recvs = 0;
    for (const TelemetryEvent& e : kept) {
      sends += e.kind == EventKind::SendStart;
      recvs += e.kind == EventKind::RecvEnd;
    }
    EXPECT_EQ(tl.transfers().size() + tl.stats().unmatchedSends, sends) << p;
    EXPECT_EQ(tl.transfers().size() + tl.stats().unmatchedRecvs, recvs) << p;
    EXPECT_LT(tl.transfers().size(), sends) << p;
  }
}

TelemetryEvent ev(EventKind k, int rank, int peer, uint32_t chunk, uint64_t offset, int64_t t) {
  TelemetryEvent e;
  e.kind = k;
  e.rank = rank;
  e.peer = peer;
  e.step = 1;
  e.chunk = chunk;
  e.offset = offset;
  e.bytes = 64;
  e.provenance = 0b11;
  e.tNs = t;
  return e;
}

TEST(Timeline, SlicesOfOneChunkPairInOrderAndAMissingOneUnpairsTheChunk) {
  // Rank 0 sends chunk 3 to rank 1 as three slices, all in flight at once; then chunk 4.
  std::vector<TelemetryEvent> e = {
      ev(EventKind::SendStart, 0, 1, 3, 0, 100),  ev(EventKind::SendStart, 0, 1, 3, 16, 110),
      ev(EventKind::SendStart, 0, 1, 3, 32, 120), ev(EventKind::SendEnd, 0, 1, 3, 0, 130),
      ev(EventKind::SendEnd, 0, 1, 3, 16, 140),   ev(EventKind::SendEnd, 0, 1, 3, 32, 150),
      ev(EventKind::RecvEnd, 1, 0, 3, 0, 200),    ev(EventKind::RecvEnd, 1, 0, 3, 16, 210),
      ev(EventKind::RecvEnd, 1, 0, 3, 32, 220),   ev(EventKind::SendStart, 0, 1, 4, 48, 300),
      ev(EventKind::RecvEnd, 1, 0, 4, 48, 400)};
  const Timeline all(e);
  ASSERT_EQ(all.transfers().size(), 4u);
  for (size_t k = 0; k < 3; ++k) {
    const Transfer& x = all.transfers()[k];
    EXPECT_EQ(x.sendStartNs, 100 + 10 * static_cast<int64_t>(k));
    EXPECT_EQ(x.sendEndNs, 130 + 10 * static_cast<int64_t>(k));
    EXPECT_EQ(x.recvEndNs, 200 + 10 * static_cast<int64_t>(k));
    EXPECT_EQ(x.offset, 16 * k);
  }
  EXPECT_EQ(all.transfers()[3].sendEndNs, 300) << "a lost SendEnd ends the send where it began";
  EXPECT_EQ(all.inFlightAt(125), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(all.inFlightAt(205), (std::vector<size_t>{1, 2}));
  EXPECT_EQ(all.inFlightAt(350), (std::vector<size_t>{3}));
  EXPECT_TRUE(all.inFlightAt(250).empty());
  EXPECT_EQ(all.firstStartingAt(111), 2u);
  EXPECT_DOUBLE_EQ(Timeline::progress(all.transfers()[3], 325), 0.25);
  EXPECT_DOUBLE_EQ(Timeline::progress(all.transfers()[3], 500), 1.0);

  // Lose the middle slice's send: which receive was its cannot be known, so chunk 3 pairs
  // nothing; chunk 4 still pairs.
  e.erase(e.begin() + 1);
  const Timeline lost(e);
  ASSERT_EQ(lost.transfers().size(), 1u);
  EXPECT_EQ(lost.transfers()[0].chunk, 4u);
  EXPECT_EQ(lost.stats().unmatchedSends, 2u);
  EXPECT_EQ(lost.stats().unmatchedRecvs, 3u);
  EXPECT_EQ(lost.stats().unpairedSendEnds, 1u);
}

TEST(Timeline, ASliceLostOnEachSideIsCaughtByItsOffsets) {
  // Chunk 3's slices at offsets 0, 16, 32: the send of the middle one and the receive of the
  // first one are lost. Two of each remain, but pairing them in order would join the send at
  // 0 with the receive at 16.
  const std::vector<TelemetryEvent> e = {
      ev(EventKind::SendStart, 0, 1, 3, 0, 100), ev(EventKind::SendStart, 0, 1, 3, 32, 120),
      ev(EventKind::RecvEnd, 1, 0, 3, 16, 210), ev(EventKind::RecvEnd, 1, 0, 3, 32, 220)};
  const Timeline tl(e);
  EXPECT_TRUE(tl.transfers().empty());
  EXPECT_EQ(tl.stats().unmatchedSends, 2u);
  EXPECT_EQ(tl.stats().unmatchedRecvs, 2u);
}

TEST(Timeline, RunsNeverPairWithEachOther) {
  TelemetryEvent s = ev(EventKind::SendStart, 0, 1, 0, 0, 10);
  TelemetryEvent d = ev(EventKind::RecvEnd, 1, 0, 0, 0, 20);
  d.runId = 2;
  const Timeline tl({s, d});
  EXPECT_TRUE(tl.transfers().empty());
  EXPECT_EQ(tl.stats().unmatchedSends, 1u);
  EXPECT_EQ(tl.stats().unmatchedRecvs, 1u);
}

TEST(Timeline, IntervalsDescribeWhatEachRankDid) {
  std::vector<TelemetryEvent> e = {
      ev(EventKind::SendStart, 0, 1, 0, 0, 1000), ev(EventKind::SendEnd, 0, 1, 0, 0, 1500),
      ev(EventKind::RecvEnd, 1, 0, 0, 0, 2000), ev(EventKind::ReduceEnd, 1, 0, 0, 0, 2600)};
  TelemetryEvent step = ev(EventKind::StepEnd, 1, -1, 0, 0, 3000);
  TelemetryEvent iter = ev(EventKind::IterationEnd, 1, -1, 0, 0, 3100);
  e.push_back(step);
  e.push_back(iter);
  const Timeline tl(e, {{1, 0, 2600}});
  std::map<Activity, Interval> byKind;
  for (const Interval& x : tl.intervals()) byKind[x.activity] = x;
  ASSERT_EQ(byKind.size(), 5u);
  const auto span = [&](Activity a) { return std::make_pair(byKind[a].startNs, byKind[a].endNs); };
  EXPECT_EQ(span(Activity::Send), std::make_pair(int64_t{1000}, int64_t{1500}));
  EXPECT_EQ(span(Activity::Recv), std::make_pair(int64_t{1000}, int64_t{2000}));
  EXPECT_EQ(span(Activity::Reduce), std::make_pair(int64_t{2000}, int64_t{2600}));
  EXPECT_EQ(span(Activity::Iteration), std::make_pair(int64_t{500}, int64_t{3100}));
  EXPECT_EQ(span(Activity::Step), std::make_pair(int64_t{500}, int64_t{3000}))
      << "the first step starts with its iteration";
  EXPECT_EQ(byKind[Activity::Send].transfer, 0);
  EXPECT_EQ(byKind[Activity::Recv].transfer, 0);
  EXPECT_EQ(byKind[Activity::Reduce].transfer, -1);
  EXPECT_EQ(byKind[Activity::Recv].peer, 0);
  EXPECT_TRUE(
      std::is_sorted(tl.intervals().begin(), tl.intervals().end(),
                     [](const Interval& a, const Interval& b) { return a.startNs < b.startNs; }));
}

TEST(Timeline, InFlightAtAgreesWithABruteForce) {
  const RealRun r = realRun("ring", Collective::AllReduce, 4, 300);
  const Timeline tl(r.events);
  ASSERT_FALSE(tl.transfers().empty());
  const int64_t t0 = tl.transfers().front().sendStartNs;
  int64_t t1 = t0;
  for (const Transfer& x : tl.transfers()) t1 = std::max(t1, x.recvEndNs);
  size_t seen = 0;
  for (int k = 0; k <= 200; ++k) {
    const int64_t t = t0 - 10 + (t1 - t0 + 20) * k / 200;
    std::vector<size_t> brute;
    for (size_t i = 0; i < tl.transfers().size(); ++i) {
      const Transfer& x = tl.transfers()[i];
      if (x.sendStartNs <= t && t < x.recvEndNs) brute.push_back(i);
    }
    EXPECT_EQ(tl.inFlightAt(t), brute) << "t = " << t;
    seen += brute.size();
  }
  EXPECT_GT(seen, 0u);
}

TEST(Timeline, ExtremeTimestampsDoNotOverflow) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const Timeline tl(
      {ev(EventKind::SendStart, 0, 1, 0, 0, kMin), ev(EventKind::RecvEnd, 1, 0, 0, 0, kMax),
       ev(EventKind::IterationEnd, 1, -1, 0, 0, kMin)},
      {{1, 0, kMax}});
  ASSERT_EQ(tl.transfers().size(), 1u);
  EXPECT_EQ(tl.inFlightAt(0), (std::vector<size_t>{0}));
  EXPECT_EQ(tl.inFlightAt(kMin), (std::vector<size_t>{0}));
  EXPECT_DOUBLE_EQ(Timeline::progress(tl.transfers()[0], 0), 0.5);
}

// A training step's compute events become compute intervals from their start (end less
// length) to their end, beside the chunk events' intervals, and pair with no message.
TEST(Timeline, ComputeEventsAreIntervalsOfTheirOwnKind) {
  std::vector<TelemetryEvent> ev = realRun("ring", Collective::AllReduce, 3, 96).events;
  const size_t chunkEvents = ev.size();
  const Timeline plain(ev);
  const EventKind kinds[] = {EventKind::ComputeForward, EventKind::ComputeBackward,
                             EventKind::ComputeOptimizer};
  for (int k = 0; k < 3; ++k) {
    TelemetryEvent e;
    e.runId = 9;
    e.rank = 1;
    e.kind = kinds[k];
    e.chunk = static_cast<uint32_t>(2 - k);
    e.tNs = 5'000 + 1'000 * k;
    e.offset = 400;
    ev.push_back(e);
  }
  const Timeline tl(ev);
  EXPECT_EQ(tl.transfers().size(), plain.transfers().size());
  EXPECT_EQ(tl.intervals().size(), plain.intervals().size() + 3);
  const Activity want[] = {Activity::Forward, Activity::Backward, Activity::Optimizer};
  int seen = 0;
  for (const Interval& x : tl.intervals()) {
    if (!isComputeActivity(x.activity)) continue;
    ASSERT_LT(seen, 3);
    EXPECT_EQ(x.activity, want[seen]);
    EXPECT_EQ(x.rank, 1);
    EXPECT_EQ(x.peer, -1);
    EXPECT_EQ(x.startNs, 4'600 + 1'000 * seen);
    EXPECT_EQ(x.endNs, 5'000 + 1'000 * seen);
    EXPECT_EQ(x.event, chunkEvents + static_cast<size_t>(seen));
    EXPECT_FALSE(isNcclActivity(x.activity));
    ++seen;
  }
  EXPECT_EQ(seen, 3);
}

}  // namespace
}  // namespace arl
