// The real main window, offscreen, with real local workers: a sweep from Run to the charts and
// the topology, Stop, a killed worker, closing mid-run.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFont>
#include <QToolButton>
#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <set>

#include "base/clock.h"
#include "charts/charts_panel.h"
#include "model/model.h"
#include "runtime/process.h"
#include "runtime/sweep.h"
#include "topology/run_model.h"
#include "topology/topology_pane.h"
#include "topology/topology_view.h"
#include "wait_until.h"
#include "window/error_banner.h"
#include "window/flight_record_view.h"
#include "window/main_window.h"
#include "window/setup_fields.h"
#include "window/setup_panel.h"
#include "window/worker_list_model.h"

namespace arl::ui {
namespace {

SessionSetup smallSweep() {
  SessionSetup s;
  s.localWorkers = 4;
  s.size = {true, 0, 4 << 10, 64 << 10, 4};
  s.slice = {false, 16 << 10, 0, 0, 2};
  s.iterations = 2;
  s.warmup = 1;
  return s;
}

// One run long enough to act on while it runs.
SessionSetup longRun() {
  SessionSetup s = smallSweep();
  s.size = {false, uint64_t{16} << 20, 0, 0, 2};
  s.slice = {false, 64 << 10, 0, 0, 2};
  s.iterations = 2000;
  return s;
}

// What the window handed its views, in order.
struct Feed {
  std::vector<uint64_t> runs;  // run ids shown, in order
  std::vector<SweepRow> rows;
  uint64_t events = 0;
  bool eventsInOrder = true;  // per run and rank, in time order, after the run was shown
  bool eventsOfShownRun = true;
  std::map<std::pair<uint64_t, int>, int64_t> lastT;
  std::optional<SessionEnd> end;

  void attach(MainWindow& w) {
    QObject::connect(&w, &MainWindow::runShown, &w,
                     [this](const TopologyRun& r) { runs.push_back(r.runId); });
    QObject::connect(&w, &MainWindow::telemetryShown, &w,
                     [this](const TelemetryBatches& b) { take(b); });
    QObject::connect(&w, &MainWindow::rowShown, &w,
                     [this](const SweepRow& r) { rows.push_back(r); });
    QObject::connect(&w, &MainWindow::sessionEnded, &w, [this](const SessionEnd& e) { end = e; });
  }
  void take(const TelemetryBatches& b) {
    for (const TelemetryBatchEvent& batch : b.batches) {
      eventsOfShownRun &= !runs.empty() && batch.runId == runs.back();
      for (const TelemetryEvent& e : batch.events) {
        auto [it, fresh] = lastT.try_emplace({batch.runId, batch.rank}, e.tNs);
        if (!fresh) {
          eventsInOrder &= e.tNs >= it->second;
          it->second = e.tNs;
        }
        eventsOfShownRun &= e.runId == batch.runId && e.rank == batch.rank;
        ++events;
      }
    }
  }
};

std::unique_ptr<MainWindow> makeWindow(const SessionSetup& s, WindowOptions o = {}) {
  o.workerBinary = ARL_WORKER_BINARY;
  o.persistSettings = false;
  o.setup = s;
  auto w = std::make_unique<MainWindow>(o);
  w->show();
  return w;
}

bool workersJoined(MainWindow& w, size_t n) {
  return waitUntil([&] { return w.workers().size() >= n; }, 30000);
}

// The pids of `pids` that still exist (not even as zombies).
std::vector<int64_t> alive(const std::vector<int64_t>& pids) {
  std::vector<int64_t> out;
  for (int64_t p : pids) {
    if (::kill(static_cast<pid_t>(p), 0) == 0) out.push_back(p);
  }
  return out;
}

// allreduce-worker processes whose parent is this test.
int workerChildren() {
  int n = 0;
  const QString me = QString::number(::getpid());
  for (const QString& pid : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs)) {
    QFile stat(QStringLiteral("/proc/%1/stat").arg(pid));
    if (!stat.open(QIODevice::ReadOnly)) continue;
    const QString line = QString::fromLatin1(stat.readAll());
    const int close = line.lastIndexOf(QLatin1Char(')'));
    const QStringList rest = line.mid(close + 2).split(QLatin1Char(' '));
    if (line.contains(QStringLiteral("(allreduce-worke")) && rest.size() > 1 && rest[1] == me) ++n;
  }
  return n;
}

TEST(WindowRun, ASweepReachesTheChartsAndTheTopologyInOrder) {
  auto w = makeWindow(smallSweep());
  Feed feed;
  feed.attach(*w);
  ASSERT_TRUE(w->problems().empty()) << w->problems().front().rule;
  ASSERT_TRUE(w->run());
  EXPECT_TRUE(w->isRunning());
  EXPECT_FALSE(w->runAction()->isEnabled());
  EXPECT_TRUE(w->stopAction()->isEnabled());
  ASSERT_TRUE(waitUntil([&] { return feed.end.has_value(); }, 120000));
  EXPECT_EQ(feed.end->error, "");
  ASSERT_EQ(feed.rows.size(), 3u);
  std::set<uint64_t> sizes;
  for (const SweepRow& r : feed.rows) {
    EXPECT_EQ(r.result.state, RunState::Done) << r.result.error;
    EXPECT_EQ(r.result.wrong, 0u);
    EXPECT_GT(r.metrics.busbwGBps, 0.0);
    sizes.insert(r.sizeBytes);
  }
  EXPECT_EQ(sizes, (std::set<uint64_t>{4 << 10, 16 << 10, 64 << 10}));
  // Every run was shown before its telemetry, which came in time order per rank.
  ASSERT_EQ(feed.runs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(feed.runs[i], feed.rows[i].result.runId);
  EXPECT_GT(feed.events, 0u);
  EXPECT_TRUE(feed.eventsInOrder);
  EXPECT_TRUE(feed.eventsOfShownRun);
  uint64_t delivered = 0;
  for (const SweepRow& r : feed.rows) delivered += r.result.telemetry.delivered;
  EXPECT_EQ(feed.events, delivered);
  // The topology pane holds the last run's telemetry, every event of it (under its bound),
  // each rank's in time order.
  const TopologyPane& pane = *w->topologyPane();
  const uint64_t lastRun = feed.rows.back().result.telemetry.delivered;
  ASSERT_LT(lastRun, pane.maxEventsHeld());
  EXPECT_GT(pane.eventsHeld(), 0u);
  EXPECT_EQ(pane.eventsHeld(), lastRun);
  EXPECT_EQ(pane.eventsDropped(), 0u);
  EXPECT_EQ(pane.eventsOutOfOrder(), 0u);
  EXPECT_FALSE(pane.model().timeline().transfers().empty());
  // The charts have a measured point for every size, and the per-run charts show a run.
  const SessionCharts charts = w->chartsPanel()->charts();
  const std::set<double> sizeXs = {12, 14, 16};  // log2 of 4K, 16K, 64K
  for (ChartKind k : {ChartKind::BusbwVsSize, ChartKind::AlgbwVsSize}) {
    std::set<double> xs;
    for (const ChartSeries& s : charts.xy(k)->series) {
      if (s.style != SeriesStyle::Measured) continue;
      for (const ChartPoint& p : s.points) {
        xs.insert(p.x);
        EXPECT_GT(p.y, 0.0) << chartTabTitle(k) << " at x " << p.x;
      }
    }
    EXPECT_EQ(xs, sizeXs) << chartTabTitle(k);
  }
  std::set<double> spreadXs;
  for (const ChartSeries& s : charts.spread.series) {
    for (const ChartPoint& p : s.points) spreadXs.insert(p.x);
  }
  EXPECT_EQ(spreadXs, sizeXs);
  EXPECT_EQ(charts.timeline.nranks, 4);
  EXPECT_FALSE(charts.timeline.bars.empty());
  EXPECT_GT(
      std::accumulate(charts.heatMap.loads.links.begin(), charts.heatMap.loads.links.end(),
                      uint64_t{0}, [](uint64_t sum, const LinkLoad& x) { return sum + x.bytes; }),
      0u);
  EXPECT_EQ(w->report().rows.size(), 3u);
  EXPECT_FALSE(w->isRunning());
  EXPECT_TRUE(w->runAction()->isEnabled());
  EXPECT_TRUE(w->banner()->isHidden());
}

// The window predicts every run with the model it was given (the saved calibration, when
// `allreduce-lab gui` finds one) and names where it came from beside the dashed lines.
TEST(WindowRun, RunsArePredictedWithTheWindowsModelAndItsSourceIsNamed) {
  WindowOptions o;
  o.model.alpha = 1e-3;  // a millisecond a message: far above the default's microseconds
  o.modelSource = "calibration /test/calibration.json (testhost)";
  SessionSetup s = smallSweep();
  s.size = {false, 16 << 10, 0, 0, 2};
  auto w = makeWindow(s, o);
  Feed feed;
  feed.attach(*w);
  ASSERT_TRUE(w->run());
  ASSERT_TRUE(waitUntil([&] { return feed.end.has_value(); }, 120000));
  ASSERT_EQ(feed.end->error, "");
  ASSERT_EQ(feed.rows.size(), 1u);
  const SweepRow& row = feed.rows.front();
  // A ring of 4 ranks sends 6 messages one after another on every rank: 6 ms at the least.
  EXPECT_GT(row.predictedUs, 6000.0);
  ModelParams defaults;
  CostQuery q = costQueryOf(row, {});
  EXPECT_LT(predict(q, defaults).seconds * 1e6, 1000.0);  // what the defaults would say
  EXPECT_EQ(w->report().model.alpha, 1e-3);
  EXPECT_EQ(w->report().modelSource, o.modelSource);
  const SessionCharts charts = w->chartsPanel()->charts();
  EXPECT_NE(charts.busbw.note.find("The model's parameters: " + o.modelSource + "."),
            std::string::npos)
      << charts.busbw.note;
  EXPECT_NE(charts.algbw.note.find(o.modelSource), std::string::npos) << charts.algbw.note;
}

// A run longer than a second (8 MiB on 50 MB/s ports: about 0.25 s an iteration) animates as
// it runs: before its row arrives the topology draws messages in flight, the caption follows
// the steps, and the view says it is live and how far behind the ranks, under a second.
TEST(WindowRun, ALongShapedRunAnimatesWhileItRuns) {
  SessionSetup s = smallSweep();
  s.size = {false, uint64_t{8} << 20, 0, 0, 2};
  s.slice = {false, 256 << 10, 0, 0, 2};
  s.iterations = 5;
  s.warmup = 1;
  s.portMBps = 50;
  auto w = makeWindow(s);
  Feed feed;
  feed.attach(*w);
  const TopologyPane& pane = *w->topologyPane();
  ASSERT_TRUE(w->run());
  int looksWithTokens = 0;
  std::set<QString> captions;
  int64_t mostBehindNs = 0;
  bool saysHowFarBehind = true;
  ASSERT_TRUE(waitUntil(
      [&] {
        if (feed.rows.empty() && !feed.runs.empty() && !pane.view()->tokenTransfers().empty()) {
          ++looksWithTokens;
          captions.insert(pane.captionText());
          mostBehindNs = std::max(mostBehindNs, steadyNowNs() - pane.playbackTimeNs());
          saysHowFarBehind &= pane.captionDetail().contains(QStringLiteral(" s behind"));
        }
        return feed.end.has_value();
      },
      120000));
  ASSERT_EQ(feed.end->error, "");
  ASSERT_EQ(feed.rows.size(), 1u);
  EXPECT_GT(looksWithTokens, 5) << "no messages drawn in flight while the run ran";
  EXPECT_GE(captions.size(), 3u) << "the caption did not follow the steps";
  EXPECT_LT(mostBehindNs, 1'000'000'000);
  EXPECT_TRUE(saysHowFarBehind);
}

TEST(WindowRun, StopEndsTheSessionAndTheNextOneRuns) {
  auto w = makeWindow(longRun());
  Feed feed;
  feed.attach(*w);
  ASSERT_TRUE(w->run());
  ASSERT_TRUE(waitUntil([&] { return feed.events > 0; }));
  w->stopAction()->trigger();
  ASSERT_TRUE(waitUntil([&] { return feed.end.has_value(); }));
  EXPECT_TRUE(feed.end->stoppedByUser);
  EXPECT_FALSE(w->isRunning());
  EXPECT_TRUE(w->banner()->isHidden()) << w->banner()->details().toStdString();
  ASSERT_EQ(feed.rows.size(), 1u);
  EXPECT_EQ(feed.rows[0].result.state, RunState::Aborted);
  Feed next;
  next.attach(*w);
  w->setupPanel()->setSetup(smallSweep());
  ASSERT_TRUE(w->run());
  ASSERT_TRUE(waitUntil([&] { return next.end.has_value(); }, 120000));
  EXPECT_EQ(next.end->error, "");
  EXPECT_EQ(next.rows.size(), 3u);
}

TEST(WindowRun, AKilledWorkerShowsTheBannerAndTheNextRunWorks) {
  auto w = makeWindow(longRun());
  Feed feed;
  feed.attach(*w);
  ASSERT_TRUE(workersJoined(*w, 4));
  ASSERT_TRUE(w->run());
  // Rank 1's telemetry has arrived: the banner can name the step it was in.
  ASSERT_TRUE(waitUntil([&] {
    return !feed.runs.empty() && feed.lastT.count({feed.runs.back(), 1}) > 0;
  }));
  int64_t victim = 0;
  for (const WorkerInfo& wi : w->workers()) {
    if (wi.rank == 1) victim = wi.pid;
  }
  ASSERT_GT(victim, 0);
  ASSERT_EQ(::kill(static_cast<pid_t>(victim), SIGKILL), 0);
  ASSERT_TRUE(waitUntil([&] { return feed.end.has_value(); }));
  EXPECT_FALSE(feed.end->error.empty());
  EXPECT_FALSE(w->isRunning());
  ASSERT_FALSE(w->banner()->isHidden());
  const QString headline = w->banner()->headline();
  EXPECT_TRUE(headline.contains(QStringLiteral("Rank 1")) &&
              headline.contains(QStringLiteral("step")))
      << headline.toStdString() << " / " << w->banner()->details().toStdString();
  EXPECT_TRUE(w->runAction()->isEnabled());
  // The banner's "Flight record" opens the survivors' records: rank 1 never reached the step
  // where the others stopped.
  ASSERT_TRUE(w->banner()->flightRecordAvailable());
  w->banner()->flightRecordButton()->click();
  const FlightRecordDialog* fr = w->findChild<FlightRecordDialog*>();
  ASSERT_NE(fr, nullptr);
  EXPECT_TRUE(fr->isVisible());
  const FlightAnalysis& fa = fr->model().analysis();
  ASSERT_TRUE(fa.found);
  EXPECT_EQ(fa.neverReached, std::vector<int>{1});
  ASSERT_EQ(fr->model().rowCount(), 4);
  EXPECT_EQ(fr->model().data(fr->model().index(1, FlightRecordModel::State)).toString(),
            QStringLiteral("no record"));
  EXPECT_EQ(fr->model().data(fr->model().index(1, FlightRecordModel::Note)).toString(),
            QStringLiteral("no record, the process is gone"));
  // The next run: a replacement worker has joined (or is joining) and the sweep completes.
  Feed next;
  next.attach(*w);
  w->setupPanel()->setSetup(smallSweep());
  ASSERT_TRUE(w->run());
  ASSERT_TRUE(waitUntil([&] { return next.end.has_value(); }, 120000));
  EXPECT_EQ(next.end->error, "");
  EXPECT_EQ(next.rows.size(), 3u);
  EXPECT_TRUE(w->banner()->isHidden());
  EXPECT_FALSE(w->banner()->flightRecordAvailable());
}

// The row of the worker called `name` in the setup panel's worker table, -1 when none.
int workerRow(const WorkerListModel& m, const QString& name) {
  for (int r = 0; r < m.rowCount(); ++r) {
    if (m.data(m.index(r, WorkerListModel::Name)).toString() == name) return r;
  }
  return -1;
}

TEST(WindowRun, AWorkerJoiningMidRunIsASpareAndTheNextRunUsesIt) {
  SessionSetup s = longRun();
  s.localWorkers = 2;
  auto w = makeWindow(s);
  Feed feed;
  feed.attach(*w);
  std::vector<int> ranksShown;
  QObject::connect(w.get(), &MainWindow::runShown, w.get(),
                   [&](const TopologyRun& r) { ranksShown.push_back(r.nranks); });
  ASSERT_TRUE(workersJoined(*w, 2));
  ASSERT_TRUE(w->run());
  ASSERT_TRUE(waitUntil([&] { return feed.events > 0; }));
  // "allreduce-worker --connect ENDPOINT": the latecomer joins as a remote worker would.
  const QString endpoint = w->setupPanel()->joinCommand().section(QLatin1Char(' '), 2, 2);
  ASSERT_TRUE(endpoint.startsWith(QStringLiteral("tcp://"))) << endpoint.toStdString();
  const int64_t late =
      spawnChild({ARL_WORKER_BINARY, "--connect", endpoint.toStdString(), "--name", "latecomer"});
  const WorkerListModel& m = *w->setupPanel()->workerModel();
  const QString name = QStringLiteral("latecomer");
  ASSERT_TRUE(waitUntil([&] { return workerRow(m, name) >= 0; }, 30000));
  const int row = workerRow(m, name);
  EXPECT_EQ(m.data(m.index(row, WorkerListModel::Rank)).toString(), QStringLiteral("spare"));
  EXPECT_EQ(m.data(m.index(row, WorkerListModel::State)).toString(),
            QStringLiteral("spare: joins the next run"));
  EXPECT_TRUE(m.data(m.index(row, WorkerListModel::Name), Qt::FontRole).value<QFont>().italic());
  EXPECT_EQ(m.data(m.index(0, WorkerListModel::State)).toString(), QStringLiteral("ranked"));
  EXPECT_TRUE(w->isRunning());
  EXPECT_EQ(w->setupPanel()->setup().remoteWorkers, 0);  // locked while the session runs

  w->stopAction()->trigger();
  ASSERT_TRUE(waitUntil([&] { return feed.end.has_value(); }));
  // The session is over: the spare has its rank, and the setup counts it.
  ASSERT_TRUE(waitUntil([&] {
    const int r = workerRow(m, name);
    return r >= 0 &&
           m.data(m.index(r, WorkerListModel::State)).toString() == QStringLiteral("ranked");
  }));
  EXPECT_EQ(w->setupPanel()->setup().remoteWorkers, 1);

  Feed next;
  next.attach(*w);
  ASSERT_TRUE(w->run());
  ASSERT_TRUE(waitUntil([&] { return next.events > 0; }, 60000));
  ASSERT_EQ(ranksShown.size(), 2u);
  EXPECT_EQ(ranksShown[0], 2);
  EXPECT_EQ(ranksShown[1], 3);  // the latecomer is rank 2 of the next run
  w->stopAction()->trigger();
  ASSERT_TRUE(waitUntil([&] { return next.end.has_value(); }));
  w.reset();  // tells every worker to leave, the latecomer too
  EXPECT_TRUE(waitFor(late, std::chrono::seconds(10)).has_value());
}

TEST(WindowRun, ClosingMidRunLeavesNoWorker) {
  auto w = makeWindow(longRun());
  Feed feed;
  feed.attach(*w);
  bool stopped = false;
  QObject::connect(w.get(), &MainWindow::runtimeStopped, w.get(), [&] { stopped = true; });
  ASSERT_TRUE(w->run());
  ASSERT_TRUE(waitUntil([&] { return feed.events > 0; }));
  std::vector<int64_t> pids;
  for (const WorkerInfo& wi : w->workers()) pids.push_back(wi.pid);
  ASSERT_EQ(pids.size(), 4u);
  EXPECT_EQ(workerChildren(), 4);
  w->close();
  ASSERT_TRUE(waitUntil([&] { return stopped; }, 30000));
  EXPECT_FALSE(w->isVisible());
  EXPECT_TRUE(alive(pids).empty());
  EXPECT_EQ(workerChildren(), 0);
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Before any run the charts say so and show the setup Run would measure, following it as the
// user edits it, never a default one.
TEST(WindowCharts, BeforeARunTheSubtitleFollowsTheSetupsSliceAndAlgorithm) {
  SessionSetup setup;
  setup.localWorkers = 4;
  setup.algorithm = "ring";
  setup.size = {false, uint64_t{4} << 20, 0, 0, 2};
  setup.slice = {false, uint64_t{256} << 10, 0, 0, 2};
  auto w = makeWindow(setup);
  const ChartsPanel& charts = *w->chartsPanel();
  const auto subtitle = [&] { return charts.charts().busbw.subtitle; };
  const std::string opened = subtitle();
  for (const char* part : {"No run yet", "4 ranks", "ring", "4M", "slice 256K"}) {
    EXPECT_TRUE(has(opened, part)) << part << " in " << opened;
  }
  EXPECT_FALSE(has(opened, "1M")) << "a default slice: " << opened;

  w->setupPanel()->sliceField()->singleEdit()->setCurrentText(QStringLiteral("64K"));
  EXPECT_TRUE(waitUntil([&] { return has(subtitle(), "slice 64K"); }, 5000)) << subtitle();
  EXPECT_FALSE(has(subtitle(), "256K")) << subtitle();

  QComboBox* algorithm = w->setupPanel()->algorithmBox();
  const int tree = algorithm->findData(QStringLiteral("tree"));
  ASSERT_GE(tree, 0);
  algorithm->setCurrentIndex(tree);
  EXPECT_TRUE(waitUntil([&] { return has(subtitle(), "tree"); }, 5000)) << subtitle();
  EXPECT_TRUE(has(charts.charts().heatMap.subtitle, "slice 64K")) << "every chart alike";
}

}  // namespace
}  // namespace arl::ui
