// The explanation panel once a run has its row: the cost model's closed form with the
// session's parameters in it beside the measured time, busbw against the wire's rate, and the
// bytes each rank sent as its telemetry counted them, against the formula and the schedule.
// Real windows with real local workers, and the panel alone on rows made here.
#include <gtest/gtest.h>

#include <QTextDocument>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "export/export.h"
#include "model/model.h"
#include "runtime/sweep.h"
#include "topology/explain_panel.h"
#include "topology/run_model.h"
#include "topology/topology_pane.h"
#include "wait_until.h"
#include "window/main_window.h"

namespace arl::ui {
namespace {

// One ring all-reduce of `size` on 4 local workers, in slices of 64K.
SessionSetup oneRing(uint64_t size) {
  SessionSetup s;
  s.localWorkers = 4;
  s.algorithm = "ring";
  s.size = {false, size, 0, 0, 2};
  s.slice = {false, 64 << 10, 0, 0, 2};
  s.iterations = 2;
  s.warmup = 1;
  return s;
}

// Runs `setup` in a real window predicting with a calibration of known parameters (alpha
// 12 us, ports at 2.5 GB/s, reductions at 6 GB/s); the row it showed.
struct Shown {
  std::unique_ptr<MainWindow> window;
  std::optional<SweepRow> row;
  std::optional<SessionEnd> end;
};

void runInWindow(Shown& shown, const SessionSetup& setup) {
  WindowOptions options;
  options.model.alpha = 12e-6;
  options.model.beta = 1 / 2.5e9;
  options.model.gamma = 1 / 6e9;
  options.modelSource = "calibration /test/calibration.json (testhost, 2026-12-01T19:56:19Z)";
  options.workerBinary = ARL_WORKER_BINARY;
  options.persistSettings = false;
  options.setup = setup;
  shown.window = std::make_unique<MainWindow>(options);
  MainWindow& w = *shown.window;
  w.show();
  QObject::connect(&w, &MainWindow::rowShown, &w, [&](const SweepRow& r) { shown.row = r; });
  QObject::connect(&w, &MainWindow::sessionEnded, &w, [&](const SessionEnd& e) { shown.end = e; });
  ASSERT_TRUE(waitUntil([&] { return w.workers().size() >= 4; }, 30000));
  ASSERT_TRUE(w.problems().empty()) << w.problems().front().rule;
  ASSERT_TRUE(w.run());
  ASSERT_TRUE(waitUntil([&] { return shown.end.has_value(); }));
  ASSERT_EQ(shown.end->error, "");
  ASSERT_TRUE(shown.row.has_value());
  ASSERT_EQ(shown.row->result.state, RunState::Done) << shown.row->result.error;
}

ExplainPanel& panelOf(const Shown& s) { return *s.window->topologyPane()->explanation(); }

// What a reader sees of a section: its text, cells and lines run together with single spaces.
std::string plain(const QString& html) {
  QTextDocument doc;
  doc.setHtml(html);
  return doc.toPlainText()
      .replace(QChar(0xA0), QLatin1Char(' '))
      .remove(QChar(0x2060))  // the word joiners that keep "2(n−1)/n" on one line
      .simplified()
      .toStdString();
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ExplainPanel, ARingRunShowsTheFormulaWithTheCalibrationsNumbers) {
  Shown shown;
  runInWindow(shown, oneRing(1 << 20));
  if (HasFatalFailure()) return;
  const std::string model = plain(panelOf(shown).modelText());
  EXPECT_TRUE(has(model,
                  "ring allreduce, closed form with n = 4, S = 1M, s = 64K: "
                  "T = 2(n−1)·k(S/n)·α + 2(n−1)/n·S·β + (n−1)/n·S·γ"))
      << model;
  // 2(n − 1) steps of k(256K) = 4 slices each; 1.5 S through the port; 0.75 S reduced. Times
  // and rates to three significant digits, as every view of the window writes them.
  EXPECT_TRUE(has(model, "α 24 × 12 µs = 288 µs")) << model;
  EXPECT_TRUE(has(model, "β 1.57 MB ÷ 2.5 GB/s = 629 µs")) << model;
  EXPECT_TRUE(has(model, "γ 786.4 kB ÷ 6 GB/s = 131 µs")) << model;
  EXPECT_TRUE(has(model, "closed form 1.05 ms measured ")) << model;
  EXPECT_TRUE(has(model, " (mean of 2), ")) << model;
  EXPECT_NEAR(shown.row->predictedUs, 1048.2, 0.1);  // the prediction is that closed form
  EXPECT_FALSE(has(model, "simulation")) << model;
  EXPECT_TRUE(has(model,
                  "Parameters: calibration /test/calibration.json (testhost, "
                  "2026-12-01T19:56:19Z)."))
      << model;
  EXPECT_FALSE(has(model, "not calibrated"));
  const std::string busbw = plain(panelOf(shown).busbwText());
  EXPECT_TRUE(has(busbw, "wire 2.5 GB/s: the calibrated port rate 1/β")) << busbw;
}

TEST(ExplainPanel, ARingRunsBytesAsMeasuredEqualTheFormula) {
  Shown shown;
  runInWindow(shown, oneRing(1 << 20));
  if (HasFatalFailure()) return;
  // What every rank's telemetry counted: 2(n − 1)/n S = 1.5 MiB in each timed iteration, by
  // the iteration and send by send alike.
  const RunResult& res = shown.row->result;
  ASSERT_EQ(res.sent.size(), 4u);
  for (const RankSent& r : res.sent) {
    EXPECT_EQ(r.iterations, 2u);
    EXPECT_EQ(r.bytes, 1572864u);
    EXPECT_EQ(r.sendEndBytes, 2u * 1572864u);
  }
  const std::string sent = plain(panelOf(shown).sentText());
  EXPECT_TRUE(has(sent,
                  "measured 1536K every rank (telemetry) formula 2(n−1)/n·S = 1536K · "
                  "schedule 1536K Measured = formula = schedule."))
      << sent;
  EXPECT_TRUE(has(sent, "Counted send by send (SendEnd")) << sent;
  // Projector mode: one line each, the formula's detail left out; back again after.
  shown.window->setProjector(true);
  const std::string big = plain(panelOf(shown).modelText());
  EXPECT_EQ(big.rfind("Model 1.05 ms · measured ", 0), 0u) << big;
  EXPECT_EQ(plain(panelOf(shown).sentText()), "Each rank sent 1536K · formula 1536K");
  shown.window->setProjector(false);
  EXPECT_TRUE(has(plain(panelOf(shown).modelText()), "T = 2(n−1)·k(S/n)·α"));
}

TEST(ExplainPanel, AShapedRunHoldsBusbwAgainstTheShapedPortRate) {
  SessionSetup s = oneRing(256 << 10);
  s.portMBps = 200;
  Shown shown;
  runInWindow(shown, s);
  if (HasFatalFailure()) return;
  const std::string busbw = plain(panelOf(shown).busbwText());
  EXPECT_TRUE(has(busbw, "wire 200 MB/s: the shaped port rate (sets β)")) << busbw;
  const double ratio = shown.row->metrics.busbwGBps / 0.2;
  EXPECT_TRUE(has(busbw, "busbw / wire " + QString::number(ratio, 'f', 2).toStdString())) << busbw;
  EXPECT_TRUE(has(busbw, "equivalent flat fabric")) << busbw;
  const std::string model = plain(panelOf(shown).modelText());
  EXPECT_TRUE(has(model,
                  "Shaped network: the model costs by ports; β = 1 / 200 MB/s, the "
                  "shaped port rate."))
      << model;
  EXPECT_TRUE(has(model, "β 393.2 kB ÷ 200 MB/s = ")) << model;
}

// A row made here: 2 ranks of a ring, 1M, as the telemetry and the schedule say.
SweepRow madeRow(TelemetryLevel level, std::vector<RankSent> sent) {
  SweepRow row;
  row.sizeBytes = 1 << 20;
  row.count = (1 << 20) / 4;
  row.result.runId = 7;
  row.result.state = RunState::Done;
  row.result.nranks = 2;
  row.result.request.algorithm = "ring";
  row.result.request.count = row.count;
  row.result.request.telemetry = level;
  row.result.effective.nranks = 2;
  row.result.effective.ranksPerHost = 2;
  row.result.effective.bytesSent = {1 << 20, 1 << 20};
  row.result.sent = std::move(sent);
  row.metrics.timeUs = 900;
  row.predictedUs = 1000;
  row.predictedBy = PredictionMethod::ClosedForm;
  return row;
}

TEST(ExplainPanel, WithTelemetryOffNothingIsMeasured) {
  ExplainPanel panel;
  panel.setResult(madeRow(TelemetryLevel::Off, std::vector<RankSent>(2)),
                  {ModelParams{}, readModelSource("default parameters (--model default)"), false});
  const std::string sent = plain(panel.sentText());
  EXPECT_TRUE(
      has(sent, "measured nothing: telemetry was off formula 2(n−1)/n·S = 1M · schedule 1M"))
      << sent;
  EXPECT_FALSE(has(sent, "(telemetry)"));
  EXPECT_FALSE(has(sent, "Measured ="));
  EXPECT_TRUE(has(plain(panel.modelText()),
                  "Parameters: default, not calibrated (--model "
                  "default)."))
      << plain(panel.modelText());
}

TEST(ExplainPanel, AMeasurementThatIsNotTheSchedulesIsSaidToDiffer) {
  std::vector<RankSent> sent(2);
  sent[0] = {1, 1 << 20, false, 0, 0};
  sent[1] = {1, 1 << 19, false, 0, 0};
  ExplainPanel panel;
  panel.setResult(madeRow(TelemetryLevel::Steps, sent), {ModelParams{}, {}, false});
  const std::string text = plain(panel.sentText());
  EXPECT_TRUE(has(text, "measured 0: 1M, 1: 512K (telemetry)")) << text;
  EXPECT_TRUE(has(text, "Rank 1 sent 512K where its schedule says 1M: they differ.")) << text;
  EXPECT_FALSE(has(text, "× the formula"));  // the busiest rank's 1M is the formula's
  // Another run on the panel hides what belonged to this one.
  RunModel other;
  TopologyRun run;
  run.runId = 8;
  other.begin(run);
  panel.setRun(other);
  EXPECT_TRUE(panel.sentText().isEmpty());
  EXPECT_TRUE(panel.modelText().isEmpty());
}

// A slow link: busbw is held against the slowest link too, and a run above it is said to have
// kept bytes off it (as halving-doubling does), one at it to have been held back by it.
TEST(ExplainPanel, ASlowLinkHoldsBusbwAgainstTheSlowestLink) {
  SweepRow row = madeRow(TelemetryLevel::Steps, std::vector<RankSent>(2));
  row.result.request.algorithm = "halving-doubling";  // the ring's beta would be the slow link
  row.result.request.shaping.portBytesPerSecond = 400e6;
  row.result.request.shaping.linkBytesPerSecond[{1, 0}] = 25e6;
  row.metrics.busbwGBps = 0.036;
  row.metrics.algbwGBps = 0.036;
  ExplainPanel panel;
  panel.setResult(row, {ModelParams{}, {}, false});
  std::string text = plain(panel.busbwText());
  EXPECT_TRUE(has(text, "slowest link 1→0 25 MB/s: busbw / slowest 1.44")) << text;
  EXPECT_TRUE(has(text, "the algorithm sends less than 2(n−1)/n·S through the slow link")) << text;
  row.metrics.busbwGBps = 0.024;
  panel.setResult(row, {ModelParams{}, {}, false});
  text = plain(panel.busbwText());
  EXPECT_TRUE(has(text, "busbw / slowest 0.96")) << text;
  EXPECT_TRUE(has(text, "the slow link carries a full share and holds the run back")) << text;
  row.result.request.shaping.linkBytesPerSecond.clear();
  panel.setResult(row, {ModelParams{}, {}, false});
  EXPECT_FALSE(has(plain(panel.busbwText()), "slowest link")) << "uniform ports: no slow link";
}

// A collective library's run (NCCL's ring): the library moves the bytes, and the lab's executor,
// which counts them, never ran. The panel says so, not that telemetry was lost.
TEST(ExplainPanel, ALibrarysRunHasNoBytesPerRankToShow) {
  SweepRow row = madeRow(TelemetryLevel::Chunks, std::vector<RankSent>(2));
  row.result.request.algorithm = "nccl-ring";
  row.result.effective.bytesSent.clear();
  row.predictedUs = NAN;
  row.predictedBy.reset();
  ExplainPanel panel;
  panel.setResult(row, {ModelParams{}, {}, false});
  const std::string sent = plain(panel.sentText());
  EXPECT_TRUE(has(sent,
                  "measured nothing: nccl runs the collective whole and reports no bytes "
                  "per rank"))
      << sent;
  EXPECT_FALSE(has(sent, "IterationEnd")) << sent;
  EXPECT_FALSE(has(sent, "telemetry")) << sent;
  const std::string model = plain(panel.modelText());
  EXPECT_TRUE(has(model, "nccl-ring allreduce: the cost model has no closed form for it."))
      << model;
  EXPECT_TRUE(has(model, "measured 900 µs")) << model;
  panel.setProjector(true);
  EXPECT_EQ(plain(panel.sentText()), "Bytes sent: nccl reports none per rank");
  EXPECT_EQ(plain(panel.modelText()), "Model – · measured 900 µs");
}

// Every line the app names a model's source with (app/model_choice.cpp), and the window's own
// when nobody said, read into its parts.
TEST(ExplainPanel, AModelSourceIsReadIntoItsParts) {
  const ModelSource c = readModelSource(
      "calibration /home/t/calibration.json (vm, 2026-12-01T19:56:19Z, data plane shm, 4 "
      "workers)");
  EXPECT_EQ(c.kind, ModelSource::Kind::Calibration);
  EXPECT_EQ(c.file, "/home/t/calibration.json");
  EXPECT_EQ(c.machine, "vm");
  EXPECT_EQ(c.date, "2026-12-01T19:56:19Z");
  EXPECT_EQ(c.detail, "data plane shm, 4 workers");
  const ModelSource d = readModelSource("default parameters (no calibration at /x/c.json)");
  EXPECT_EQ(d.kind, ModelSource::Kind::Defaults);
  EXPECT_EQ(d.detail, "no calibration at /x/c.json");
  const ModelSource w = readModelSource(kDefaultModelSource);
  EXPECT_EQ(w.kind, ModelSource::Kind::Defaults);
  EXPECT_EQ(w.detail, "");
  EXPECT_EQ(readModelSource("").kind, ModelSource::Kind::Defaults);
  const ModelSource o = readModelSource("fitted by hand");
  EXPECT_EQ(o.kind, ModelSource::Kind::Other);
  EXPECT_EQ(o.line, "fitted by hand");
}

// The panel's line on the parameters reads as a sentence whatever the session named: no
// "default" said twice, no source line spliced into another.
TEST(ExplainPanel, TheParametersLineReadsWellForEverySource) {
  ModelParams calibrated;
  calibrated.alpha = 12e-6;
  const std::vector<std::tuple<ModelParams, std::string, std::string>> cases = {
      {{}, kDefaultModelSource, "Parameters: default, not calibrated."},
      {{},
       "default parameters (--model default)",
       "Parameters: default, not calibrated (--model default)."},
      {{},
       "default parameters (no calibration at /h/.config/allreduce-lab/calibration.json)",
       "Parameters: default, not calibrated (no calibration at "
       "/h/.config/allreduce-lab/calibration.json)."},
      {{},
       "default parameters (no calibration: neither $ARL_CALIBRATION nor $HOME is set)",
       "Parameters: default, not calibrated (no calibration: neither $ARL_CALIBRATION nor $HOME "
       "is set)."},
      {calibrated, "calibration /c.json (vm, 2026-12-01T19:56:19Z, data plane shm, 4 workers)",
       "Parameters: calibration /c.json (vm, 2026-12-01T19:56:19Z, data plane shm, 4 workers)."},
      {calibrated, kDefaultModelSource,
       "Parameters: not the defaults; the session names no source."},
  };
  for (const auto& [params, line, expected] : cases) {
    ExplainPanel panel;
    panel.setResult(madeRow(TelemetryLevel::Steps, std::vector<RankSent>(2)),
                    {params, readModelSource(line), false});
    const std::string model = plain(panel.modelText());
    EXPECT_TRUE(has(model, expected)) << line << "\n" << model;
    EXPECT_EQ(model.find("default parameters"), std::string::npos) << model;
  }
}

}  // namespace
}  // namespace arl::ui
