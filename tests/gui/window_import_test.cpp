// The window opens nccl-tests' and NCCL Inspector's files as File -> Open does: their results
// are charted beside the session shown, named after their source, and the topology pane says
// that they hold no chunk telemetry instead of animating.
#include <gtest/gtest.h>

#include <QString>
#include <algorithm>
#include <memory>

#include "charts/charts_panel.h"
#include "topology/topology_pane.h"
#include "wait_until.h"
#include "window/main_window.h"

namespace arl::ui {
namespace {

std::unique_ptr<MainWindow> makeWindow() {
  WindowOptions o;
  o.workerBinary = ARL_WORKER_BINARY;
  o.persistSettings = false;
  SessionSetup s;  // ranks the window waits for: no worker starts
  s.localWorkers = 0;
  s.remoteWorkers = 4;
  o.setup = s;
  auto w = std::make_unique<MainWindow>(o);
  w->show();
  return w;
}

bool hasSeries(const XYChartData& d, const std::string& name) {
  return std::any_of(d.series.begin(), d.series.end(),
                     [&](const ChartSeries& s) { return s.name.find(name) != std::string::npos; });
}

// Opens `path` and waits until the window has shown it.
void open(MainWindow& w, const QString& path) {
  int shown = 0;
  auto c = QObject::connect(&w, &MainWindow::recordingShown, &w, [&] { ++shown; });
  w.openRecording(path);
  ASSERT_TRUE(waitUntil([&] { return shown > 0; }));
  QObject::disconnect(c);
}

TEST(WindowImport, NcclTestsResultsAreChartedBesideARecording) {
  auto w = makeWindow();
  open(*w, QStringLiteral(ARL_SOURCE_DIR "/resources/samples/tree-4.arlrec"));
  const size_t labRows = w->report().rows.size();
  open(*w, QStringLiteral(ARL_SOURCE_DIR "/tests/data/nccl_tests_allreduce_periter.json"));
  EXPECT_EQ(w->report().rows.size(), labRows + 2);
  const SessionCharts c = w->chartsPanel()->charts();
  EXPECT_TRUE(hasSeries(c.busbw, "tree"));
  EXPECT_TRUE(hasSeries(c.busbw, "nccl-tests (2 hosts, NVIDIA A100-SXM4-80GB)"));
  EXPECT_TRUE(hasSeries(c.algbw, "nccl-tests (2 hosts"));
  const TopologyPane& pane = *w->topologyPane();
  EXPECT_TRUE(pane.captionText().contains(QStringLiteral("no chunk telemetry")))
      << pane.captionText().toStdString();
  EXPECT_EQ(pane.eventsHeld(), 0u);
}

TEST(WindowImport, AnInspectorFileAloneIsCharted) {
  auto w = makeWindow();
  open(*w, QStringLiteral(ARL_SOURCE_DIR "/tests/data/inspector_allreduce.jsonl"));
  EXPECT_EQ(w->report().rows.size(), 2u);
  EXPECT_TRUE(hasSeries(w->chartsPanel()->charts().busbw, "NCCL Inspector (gpu-node-7)"));
}

TEST(WindowImport, ABrokenFileIsRefusedWithItsLine) {
  auto w = makeWindow();
  QString why;
  QObject::connect(w.get(), &MainWindow::recordingRefused, w.get(),
                   [&](const QString& e) { why = e; });
  w->openRecording(QStringLiteral(ARL_SOURCE_DIR "/docs/import.md"));
  ASSERT_TRUE(waitUntil([&] { return !why.isEmpty(); }));
  EXPECT_TRUE(why.contains(QStringLiteral("no result line"))) << why.toStdString();
}

}  // namespace
}  // namespace arl::ui
