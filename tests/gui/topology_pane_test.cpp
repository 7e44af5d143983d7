// The topology pane, offscreen, fed real telemetry from in-process runs (exec/local_run.h).
#include <gtest/gtest.h>

#include <QApplication>
#include <QRegularExpression>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "base/clock.h"
#include "exec/check.h"
#include "exec/run_request.h"
#include "exec/timeline.h"
#include "playback/playback_bar.h"
#include "playback/playback_clock.h"
#include "schedule/generators.h"
#include "schedule/verifier.h"
#include "topology/arithmetic.h"
#include "topology/explain_panel.h"
#include "topology/run_model.h"
#include "topology/scene_items.h"
#include "topology/topology_pane.h"
#include "topology/topology_view.h"
#include "topology_local_run.h"

namespace arl::ui {
namespace {

using testing::LocalRecording;
using testing::recordLocal;

int hostsFor(const std::string& algo, int n) {
  return algo == "hierarchical" ? (n == 4 ? 2 : (n == 16 ? 4 : 8)) : 0;
}

struct LayoutCase {
  std::string algorithm;
  int nranks;
};

class TopologyLayouts : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(TopologyLayouts, DrawsEveryRankAndEveryLinkTheRunUsed) {
  const auto& c = GetParam();
  const LocalRecording rec = recordLocal(c.algorithm, c.nranks, static_cast<uint64_t>(c.nranks) * 4,
                                         hostsFor(c.algorithm, c.nranks));
  TopologyPane pane;
  pane.resize(1280, 800);
  pane.showRun(rec.run, rec.events);
  const TopologyView& view = *pane.view();
  const Layout& layout = view.layout();
  std::set<int> ranks;
  for (const LayoutNode& node : layout.nodes) ranks.insert(node.rank);
  EXPECT_EQ(static_cast<int>(ranks.size()), c.nranks);
  EXPECT_EQ(view.rankItems(), static_cast<int>(layout.nodes.size()));
  EXPECT_EQ(view.linkItems(), static_cast<int>(layout.links.size()));
  // Every message of the run travels along a drawn link.
  const auto& transfers = pane.model().timeline().transfers();
  ASSERT_FALSE(transfers.empty());
  for (const Transfer& x : transfers) {
    const auto [a, b] = layout.route(x.sender, x.receiver, x.chunk);
    ASSERT_GE(a, 0) << x.sender << "->" << x.receiver;
    ASSERT_GE(b, 0) << x.sender << "->" << x.receiver;
    const auto key = std::minmax(a, b);
    EXPECT_TRUE(layout.linkIndex.count({key.first, key.second}))
        << c.algorithm << " " << c.nranks << ": no link " << x.sender << "->" << x.receiver;
  }
  // Each node sits inside the scene and no two nodes of one group overlap.
  for (size_t i = 0; i < layout.nodes.size(); ++i) {
    for (size_t j = i + 1; j < layout.nodes.size(); ++j) {
      const QPointF d = layout.nodes[i].pos - layout.nodes[j].pos;
      EXPECT_GT(std::hypot(d.x(), d.y()), 1.9 * layout.nodeRadius) << "nodes " << i << ", " << j;
    }
  }
}

std::vector<LayoutCase> layoutCases() {
  std::vector<LayoutCase> cases;
  for (const char* a : {"ring", "tree", "halving-doubling", "parameter-server", "hierarchical"}) {
    for (int n : {4, 16, 64}) cases.push_back({a, n});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Algorithms, TopologyLayouts, ::testing::ValuesIn(layoutCases()),
                         [](const auto& info) {
                           std::string name =
                               info.param.algorithm + "_" + std::to_string(info.param.nranks);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

class TopologyPlan : public ::testing::TestWithParam<std::string> {};

// Before a run the pane draws the plan: exactly the messages of the schedule's first step that
// moves data (one per sender, receiver and chunk, its slices' bytes together), each as a token
// on a drawn link, and nothing measured.
TEST_P(TopologyPlan, IsTheFirstStepOfTheSchedule) {
  const std::string algo = GetParam();
  int plans = 0;
  for (int n : {1, 2, 3, 4, 5, 8, 16}) {
    SCOPED_TRACE(algo + " on " + std::to_string(n));
    TopologyRun run;
    run.nranks = n;
    run.request.algorithm = algo;
    run.request.count = static_cast<uint64_t>(n) * 96 + 5;
    run.request.sliceBytes = 64;  // several slices per chunk
    run.request.ranksPerHost = algo == "hierarchical" && n % 2 == 0 ? 2 : 0;
    Schedule s;
    try {
      resolveRunRequest(run.request, std::vector<std::string>(static_cast<size_t>(n), "h"), &s);
    } catch (const std::exception&) {
      continue;  // refused: no plan to draw
    }
    annotate(s);
    uint32_t first = UINT32_MAX;
    for (const auto& ops : s.ranks)
      for (const Op& op : ops)
        if (op.sendPeer >= 0) first = std::min(first, op.step);
    std::map<std::tuple<int, int, uint32_t>, uint64_t> expected;  // -> bytes
    for (int r = 0; r < n; ++r) {
      for (const Op& op : s.ranks[static_cast<size_t>(r)]) {
        if (op.sendPeer >= 0 && op.step == first)
          expected[{r, op.sendPeer, op.chunk}] += op.count * 4;
      }
    }
    ++plans;
    TopologyPane pane;
    pane.resize(1280, 800);
    pane.showPlan(run, QStringLiteral("note"));
    const RunModel& m = pane.model();
    ASSERT_TRUE(m.planned());
    ASSERT_NE(m.schedule(), nullptr) << m.scheduleError();
    EXPECT_EQ(pane.eventsHeld(), 0u);
    std::map<std::tuple<int, int, uint32_t>, uint64_t> drawn;
    for (const Transfer& x : m.timeline().transfers()) {
      EXPECT_EQ(x.step, first);
      drawn[{x.sender, x.receiver, x.chunk}] += x.bytes;
    }
    EXPECT_EQ(drawn, expected);
    EXPECT_EQ(pane.view()->tokens().size(), expected.size());
    if (n == 1) {
      EXPECT_TRUE(pane.captionDetail().contains(QStringLiteral("nothing moves")));
    } else {
      EXPECT_TRUE(pane.captionText().contains(QStringLiteral("the plan · step 1 of ")))
          << pane.captionText().toStdString();
      EXPECT_TRUE(pane.captionDetail().endsWith(QStringLiteral(" · note")));
    }
  }
  EXPECT_GE(plans, 4);  // most counts resolve for every algorithm
}

INSTANTIATE_TEST_SUITE_P(Algorithms, TopologyPlan, ::testing::ValuesIn(algorithmNames()),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// A run after a plan draws only what it measured.
TEST(TopologyPlan, ARunEndsThePlan) {
  const LocalRecording rec = recordLocal("ring", 4, 64);
  TopologyPane pane;
  TopologyRun planned = rec.run;
  pane.showPlan(planned, {});
  ASSERT_TRUE(pane.showsPlan());
  pane.showRun(rec.run, rec.events);
  EXPECT_FALSE(pane.showsPlan());
  EXPECT_FALSE(pane.model().planned());
  EXPECT_EQ(pane.eventsHeld(), rec.events.size());
  EXPECT_FALSE(pane.captionText().contains(QStringLiteral("plan")));
  EXPECT_TRUE(pane.playbackBar()->isEnabled());
}

TEST(TopologyPane, ReceivesEachRanksEventsInOrder) {
  const LocalRecording rec = recordLocal("ring", 4, 64);
  TopologyPane pane;
  pane.beginRun(rec.run);
  // As the coordinator hands them over: one rank's batch at a time, in time order.
  std::map<int, std::vector<TelemetryEvent>> byRank;
  for (const TelemetryEvent& e : rec.events) byRank[e.rank].push_back(e);
  for (const auto& [rank, events] : byRank) pane.appendEvents(rank, events);
  TelemetryEvent other = rec.events.front();
  other.runId = rec.run.runId + 1;
  pane.appendEvents(0, {other});  // another run's batch is ignored
  pane.endRun();
  EXPECT_EQ(pane.eventsHeld(), rec.events.size());
  EXPECT_EQ(pane.eventsDropped(), 0u);
  EXPECT_EQ(pane.eventsOutOfOrder(), 0u);
  std::map<int, std::vector<TelemetryEvent>> held;
  for (const TelemetryEvent& e : pane.model().events()) held[e.rank].push_back(e);
  EXPECT_EQ(held, byRank);

  // A batch that goes back in time is counted.
  TopologyPane shuffled;
  shuffled.beginRun(rec.run);
  std::vector<TelemetryEvent> reversed = byRank[1];
  std::reverse(reversed.begin(), reversed.end());
  shuffled.appendEvents(1, reversed);
  EXPECT_GT(shuffled.eventsOutOfOrder(), 0u);
}

TEST(TopologyPane, KeepsAtMostItsBoundAndCountsTheRest) {
  const LocalRecording rec = recordLocal("ring", 4, 64);
  ASSERT_GT(rec.events.size(), 100u);
  TopologyPane pane;
  pane.setMaxEventsHeld(100);
  pane.showRun(rec.run, rec.events);
  EXPECT_EQ(pane.eventsHeld(), 100u);
  EXPECT_EQ(pane.eventsDropped(), rec.events.size() - 100);
  EXPECT_EQ(pane.maxEventsHeld(), 100u);
}

TEST(TopologyPane, LiveRebuildsFromTheNewestEventsAndTheWholeRunAtItsEnd) {
  const LocalRecording rec = recordLocal("ring", 4, 64);
  TopologyPane pane;
  pane.beginRun(rec.run);
  // The same run's telemetry again and again, later each time, as a long run would send it.
  const int64_t span = rec.events.back().tNs - rec.events.front().tNs + 1000;
  uint64_t total = 0;
  for (uint32_t lap = 0; total <= RunModel::kLiveWindow + 1000; ++lap) {
    std::vector<TelemetryEvent> batch = rec.events;
    for (TelemetryEvent& e : batch) {
      e.tNs += static_cast<int64_t>(lap) * span;
      e.iteration += lap;
    }
    total += batch.size();
    pane.appendEvents(0, batch);
  }
  pane.flushEvents();
  EXPECT_TRUE(pane.model().windowed());
  const size_t liveTransfers = pane.model().timeline().transfers().size();
  pane.endRun();
  EXPECT_FALSE(pane.model().windowed());
  EXPECT_EQ(pane.eventsHeld(), total);
  EXPECT_GT(pane.model().timeline().transfers().size(), liveTransfers);
}

TEST(TopologyPane, StepForwardAndBackMoveAcrossStepBoundaries) {
  const LocalRecording rec = recordLocal("ring", 4, 64);
  TopologyPane pane;
  pane.showRun(rec.run, rec.events);
  pane.pause();
  const std::vector<int64_t> bounds = pane.model().boundaries();
  ASSERT_EQ(bounds.size(), 6u);  // 2(n - 1) steps of one iteration
  pane.seek(pane.model().startNs());
  pane.setSpeed(1.0);
  pane.stepForward();
  EXPECT_TRUE(pane.playing());
  // The strips stay as they were at the step's start while its messages move.
  const uint64_t before = pane.view()->strips().mask(1, 0);
  pane.advanceFrame((bounds[0] - pane.model().startNs()) / 2);
  EXPECT_EQ(pane.view()->strips().mask(1, 0), before);
  for (int i = 0; i < 1000 && pane.playing(); ++i) pane.advanceFrame(1'000'000);
  EXPECT_EQ(pane.playbackTimeNs(), bounds[0]);
  EXPECT_EQ(pane.captionText(), QStringLiteral("reduce-scatter · step 1 of 3"));
  pane.stepForward();
  pane.stepForward();  // finishes the step under way at once, then starts the next
  for (int i = 0; i < 1000 && pane.playing(); ++i) pane.advanceFrame(1'000'000);
  EXPECT_EQ(pane.playbackTimeNs(), bounds[2]);
  pane.stepForward();
  for (int i = 0; i < 1000 && pane.playing(); ++i) pane.advanceFrame(1'000'000);
  EXPECT_EQ(pane.playbackTimeNs(), bounds[3]);
  EXPECT_EQ(pane.captionText(), QStringLiteral("all-gather · step 1 of 3"));
  pane.stepBack();
  EXPECT_EQ(pane.playbackTimeNs(), bounds[2]);
  EXPECT_EQ(pane.captionText(), QStringLiteral("reduce-scatter · step 3 of 3"));
  pane.stepBack();
  pane.stepBack();
  pane.stepBack();
  EXPECT_EQ(pane.playbackTimeNs(), pane.model().startNs());
}

TEST(TopologyPane, TokensAreTheMessagesInFlight) {
  const LocalRecording rec = recordLocal("ring", 4, 4096);
  TopologyPane pane;
  pane.showRun(rec.run, rec.events);
  const Timeline& tl = pane.model().timeline();
  ASSERT_FALSE(tl.transfers().empty());
  int seen = 0;
  for (const Transfer& x : tl.transfers()) {
    const int64_t t = (x.sendStartNs + x.recvEndNs) / 2;
    pane.seek(t);
    EXPECT_EQ(pane.view()->tokenTransfers(), tl.inFlightAt(t));
    EXPECT_EQ(pane.view()->tokens().size(), tl.inFlightAt(t).size());
    seen += static_cast<int>(pane.view()->tokens().size());
  }
  EXPECT_GT(seen, 0);
  // A token sits between its ends, as far along as the message is.
  const Transfer& x = tl.transfers().front();
  pane.seek(x.sendStartNs);
  ASSERT_FALSE(pane.view()->tokens().empty());
  const TokenDraw& first = pane.view()->tokens().front();
  EXPECT_EQ(first.sender, x.sender);
  EXPECT_EQ(first.provenance, x.provenance);
}

// Live, the view shows the moment PlaybackClock::kLiveDelayNs ago, with the messages in flight
// then, and says how far behind the ranks it is; when the telemetry is late it waits at the
// newest and says so. The recorded run is stretched in time so that one of its messages
// spans the present less the delay for seconds, as on a slow link.
TEST(TopologyPane, LiveShowsTheMessagesInFlightHalfASecondAgo) {
  constexpr int64_t kDelay = PlaybackClock::kLiveDelayNs;
  const LocalRecording rec = recordLocal("ring", 4, 4096);
  const Timeline recorded(rec.events);
  ASSERT_FALSE(recorded.transfers().empty());
  const Transfer& x = recorded.transfers()[recorded.transfers().size() / 2];
  const int64_t mid = (x.sendStartNs + x.recvEndNs) / 2;
  const double stretch =
      20e9 / static_cast<double>(std::max<int64_t>(x.recvEndNs - x.sendStartNs, 1));
  const auto live = [&](int64_t anchorNs) {
    std::vector<TelemetryEvent> events = rec.events;
    for (TelemetryEvent& e : events) {
      e.tNs = anchorNs + static_cast<int64_t>(static_cast<double>(e.tNs - mid) * stretch);
    }
    return events;
  };
  TopologyPane pane;
  pane.beginRun(rec.run);
  pane.appendEvents(0, live(steadyNowNs() - kDelay));
  pane.flushEvents();
  const int64_t before = steadyNowNs();
  pane.advanceFrame(16'000'000);
  const int64_t after = steadyNowNs();
  const int64_t t = pane.playbackTimeNs();
  EXPECT_GE(t, before - kDelay);
  EXPECT_LE(t, after - kDelay);
  const Timeline& tl = pane.model().timeline();
  EXPECT_FALSE(pane.view()->tokenTransfers().empty());
  EXPECT_EQ(pane.view()->tokenTransfers(), tl.inFlightAt(t));
  EXPECT_FALSE(pane.captionText().isEmpty());
  EXPECT_TRUE(pane.captionDetail().contains(QStringLiteral("live · 0.5 s behind")))
      << pane.captionDetail().toStdString();

  // The step of the messages in flight has not ended on any rank yet (its StepEnds are still
  // to come, as in a live run whose slices are still going through it): the caption names it
  // all the same.
  std::map<std::pair<uint32_t, uint32_t>, int> inFlight;  // (iteration, step) -> tokens
  for (size_t i : pane.view()->tokenTransfers()) {
    ++inFlight[{tl.transfers()[i].iteration, tl.transfers()[i].step}];
  }
  const auto [iteration, step] =
      std::max_element(inFlight.begin(), inFlight.end(), [](const auto& a, const auto& b) {
        return a.second < b.second;
      })->first;
  std::vector<TelemetryEvent> open = live(steadyNowNs() - kDelay);
  std::erase_if(open, [&](const TelemetryEvent& e) {
    return e.kind == EventKind::StepEnd && e.iteration == iteration && e.step == step;
  });
  TopologyPane underWay;
  underWay.beginRun(rec.run);
  underWay.appendEvents(0, open);
  underWay.flushEvents();
  underWay.advanceFrame(16'000'000);
  ASSERT_EQ(underWay.model().markOf(iteration, step), nullptr);
  ASSERT_NE(underWay.model().markUnderWay(iteration, step), nullptr);
  EXPECT_EQ(underWay.captionText().toStdString(), pane.captionText().toStdString());

  // Telemetry late by seconds: the view waits at its newest moment and says how far behind.
  TopologyPane late;
  late.beginRun(rec.run);
  std::vector<TelemetryEvent> old = rec.events;
  const int64_t shift = steadyNowNs() - 3'000'000'000 - old.back().tNs;
  for (TelemetryEvent& e : old) e.tNs += shift;  // the newest, 3 s ago
  late.appendEvents(0, old);
  late.flushEvents();
  late.advanceFrame(16'000'000);
  EXPECT_EQ(late.playbackTimeNs(), late.model().endNs());
  EXPECT_TRUE(late.captionDetail().contains(
      QRegularExpression(QStringLiteral("live · 3\\.[0-9] s behind"))))
      << late.captionDetail().toStdString();
}

// Live, ranks ship their telemetry independently: a rebuild can add strip updates before the
// time already drawn. The strips then start over, so that none of them is skipped.
TEST(TopologyPane, StripsTakeUpdatesThatLandBeforeTheTimeDrawn) {
  const auto update = [](int64_t t, int rank, int cell, uint64_t mask) {
    CellUpdate u;
    u.tNs = t;
    u.rank = rank;
    u.first = cell;
    u.last = cell;
    u.mask = mask;
    return u;
  };
  StripState strips;
  strips.reset(2, 2, true);
  std::vector<CellUpdate> updates = {update(10, 0, 1, 0b10), update(30, 1, 1, 0b01)};
  strips.applyUntil(updates, 20);
  EXPECT_EQ(strips.mask(0, 1), 0b11u);
  EXPECT_EQ(strips.mask(1, 1), 0b10u);
  updates.insert(updates.begin() + 1, update(15, 1, 0, 0b01));  // a late batch's
  strips.applyUntil(updates, 20);
  EXPECT_EQ(strips.mask(1, 0), 0b11u);
  EXPECT_EQ(strips.mask(0, 1), 0b11u);
  EXPECT_EQ(strips.mask(1, 1), 0b10u);
  updates.erase(updates.begin());  // the live window dropped the oldest
  strips.applyUntil(updates, 40);
  EXPECT_EQ(strips.mask(0, 1), 0b01u);
  EXPECT_EQ(strips.mask(1, 1), 0b11u);
}

class TopologyStrips : public ::testing::TestWithParam<std::string> {};

TEST_P(TopologyStrips, FillToCompleteAfterAFullAllReduce) {
  const int n = 4;
  const LocalRecording rec = recordLocal(GetParam(), n, 64, hostsFor(GetParam(), n), 2);
  TopologyPane pane;
  pane.showRun(rec.run, rec.events);
  pane.seek(pane.model().startNs());
  const StripState& strips = pane.view()->strips();
  int complete = 0;
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < strips.cells(); ++c) complete += strips.mask(r, c) == allRanksMask(n);
  }
  EXPECT_EQ(complete, 0) << "nothing is reduced before the run starts";
  pane.seek(pane.model().endNs());
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < strips.cells(); ++c) {
      EXPECT_EQ(strips.mask(r, c), allRanksMask(n)) << "rank " << r << " cell " << c;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, TopologyStrips,
                         ::testing::Values("ring", "tree", "halving-doubling", "parameter-server",
                                           "hierarchical", "recursive-doubling",
                                           "reduce-broadcast"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// The step line says which clock timed the step's ends: the host's for the CPU backend, the
// GPU's for a device backend's, and how many ranks each when they differ.
TEST(TopologyPane, SaysWhichClockTimedEachStep) {
  const LocalRecording rec = recordLocal("ring", 4, 64);
  const auto stepLine = [&](const std::vector<TelemetryEvent>& events) {
    TopologyPane pane;
    pane.showRun(rec.run, events);
    pane.pause();
    pane.seek(pane.model().boundaries().front());
    return pane.explanation()->stepText();
  };
  EXPECT_TRUE(stepLine(rec.events).contains(QStringLiteral("timed by the host clock")))
      << stepLine(rec.events).toStdString();
  std::vector<TelemetryEvent> device = rec.events;
  for (TelemetryEvent& e : device) {
    if (e.kind == EventKind::StepEnd) e.clock = ClockSource::Device;
  }
  EXPECT_TRUE(stepLine(device).contains(QStringLiteral("timed by the GPU clock<")));
  for (TelemetryEvent& e : device) {
    if (e.rank >= 2) e.clock = ClockSource::Host;
  }
  EXPECT_TRUE(stepLine(device).contains(
      QStringLiteral("timed by the GPU clock on 2 of 4 ranks, the host clock on the rest")))
      << stepLine(device).toStdString();
}

TEST(TopologyPane, ShowsTheValuesAndTheirArithmeticAtSmallCounts) {
  const int n = 4;
  const uint64_t count = 8;
  const LocalRecording rec = recordLocal("ring", n, count);
  TopologyPane pane;
  pane.showRun(rec.run, rec.events);
  pane.seek(pane.model().endNs());
  const QString log = pane.explanation()->logText();
  EXPECT_TRUE(log.contains(QStringLiteral("RS 1 · rank"))) << log.toStdString();
  EXPECT_TRUE(log.contains(QStringLiteral(" + "))) << log.toStdString();
  EXPECT_TRUE(log.contains(QStringLiteral("AG 3 · rank"))) << log.toStdString();
  EXPECT_TRUE(log.contains(QStringLiteral(" from rank"))) << log.toStdString();
  // The reduce-scatter's last step reduces (RecvReduceCopySend): no copy is logged before the
  // all-gather.
  for (const QString& line : log.split(QChar('\n'))) {
    if (line.startsWith(QStringLiteral("RS"))) {
      EXPECT_FALSE(line.contains(QStringLiteral(" from rank"))) << line.toStdString();
    }
  }
  // Each full sum equals the expected result of the run's check.
  std::vector<float> expected(count);
  ASSERT_TRUE(fillExpected(expected.data(), Collective::AllReduce, DataType::Float, RedOp::Sum, 0,
                           n, count, 0));
  const Arithmetic arithmetic(rec.run);
  ASSERT_TRUE(arithmetic.enabled());
  for (uint64_t e = 0; e < count; ++e) EXPECT_EQ(arithmetic.value(allRanksMask(n), e), expected[e]);
  // Rank 2's input alone, element 3, is what the check filled in.
  std::vector<float> input(count);
  fillInput(input.data(), Collective::AllReduce, DataType::Float, RedOp::Sum, 2, n, count);
  EXPECT_EQ(arithmetic.value(uint64_t{1} << 2, 3), input[3]);
  EXPECT_TRUE(pane.explanation()->ruleText().contains(QStringLiteral("mod n")));
}

TEST(TopologyPane, ReplaysAtTheChosenSpeedAndShowsIt) {
  const LocalRecording rec = recordLocal("ring", 4, 64);
  TopologyPane pane;
  pane.showRun(rec.run, rec.events);
  EXPECT_TRUE(pane.playing());
  EXPECT_LT(pane.speed(), 1.0);  // slow motion by default
  pane.setSpeed(0.001);
  EXPECT_TRUE(pane.playbackBar()->speedLabel().contains(QStringLiteral("0.001")));
  const int64_t t0 = pane.playbackTimeNs();
  pane.advanceFrame(1'000'000);  // 1 ms of wall time at 0.001x: 1 us of the run
  EXPECT_EQ(pane.playbackTimeNs() - t0, 1000);
  pane.pause();
  pane.advanceFrame(1'000'000);
  EXPECT_EQ(pane.playbackTimeNs() - t0, 1000);
  pane.seek(pane.model().endNs());
  pane.play();  // from the end plays again from the start
  EXPECT_EQ(pane.playbackTimeNs(), pane.model().startNs());
}

}  // namespace
}  // namespace arl::ui

namespace arl::ui {
namespace {

// The caption is fitted to the view (its font shrunk, its lines elided) once for what it
// depends on, not in every frame: again only when the caption, the view's size or the mode
// changes.
TEST(TopologyView, FitsTheCaptionOnlyWhenItOrTheViewChanges) {
  TopologyView view;
  view.resize(640, 480);
  view.show();
  QApplication::processEvents();
  view.setCaption(QStringLiteral("reduce-scatter · step 1 of 3"), QStringLiteral("4 messages"));
  const auto paint = [&] {
    for (int i = 0; i < 5; ++i) view.viewport()->repaint();
  };
  const uint64_t frames = view.framesPainted();
  paint();
  EXPECT_GE(view.framesPainted(), frames + 5);
  EXPECT_EQ(view.captionFits(), 1u);
  view.setCaption(QStringLiteral("reduce-scatter · step 1 of 3"), QStringLiteral("4 messages"));
  paint();
  EXPECT_EQ(view.captionFits(), 1u) << "the same caption again";
  view.setCaption(QStringLiteral("reduce-scatter · step 2 of 3"), QStringLiteral("4 messages"));
  paint();
  EXPECT_EQ(view.captionFits(), 2u);
  view.resize(500, 480);
  QApplication::processEvents();
  paint();
  EXPECT_EQ(view.captionFits(), 3u);
  view.setProjector(true);
  paint();
  EXPECT_EQ(view.captionFits(), 4u);
}

// Projector mode at 1920x1080 with 16 ranks: legible from the back of a room (the caption at
// least 36 px, rank labels at least 24 px on screen), and back to normal when switched off.
TEST(TopologyPane, ProjectorModeIsLegibleAt1080pWith16Ranks) {
  const testing::LocalRecording rec = testing::recordLocal("ring", 16, 16 * 64, 0);
  TopologyPane pane;
  pane.resize(1920, 1000);
  pane.show();
  pane.showRun(rec.run, rec.events);
  QApplication::processEvents();
  const double normalLabel = pane.view()->rankLabelPx();
  const int normalCaption = pane.captionPx(true);
  pane.setProjector(true);
  QApplication::processEvents();
  EXPECT_TRUE(pane.projector());
  EXPECT_GE(pane.captionPx(true), 36);
  EXPECT_GE(pane.captionPx(false), 24);
  EXPECT_GE(pane.view()->rankLabelPx(), 24.0);
  EXPECT_GT(pane.view()->rankLabelPx(), normalLabel);
  EXPECT_EQ(pane.view()->rankItems(), 16);
  pane.setProjector(false);
  QApplication::processEvents();
  EXPECT_EQ(pane.captionPx(true), normalCaption);
  EXPECT_DOUBLE_EQ(pane.view()->rankLabelPx(), normalLabel);
}

}  // namespace
}  // namespace arl::ui
