// allreduce-lab gui (and allreduce-lab with no command): the lab's window. With --autorun it
// runs the setup once, saves a screenshot of the whole window once the run is drawn, and
// exits: 0 when the run completed and the picture was written, 1 when either failed. With
// --screenshot alone it saves the window as it opens (the plan of the setup, before any run).
#include <QApplication>
#include <QDir>
#include <QFileInfo>
#include <QIcon>
#include <QKeyEvent>
#include <QPixmap>
#include <QTextDocumentFragment>
#include <QTimer>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "base/input_file.h"
#include "base/limits.h"
#include "charts/chart_data.h"
#include "charts/charts_panel.h"
#include "cli_util.h"
#include "commands.h"
#include "exec/collective_library.h"
#include "export/export.h"
#include "lessons/lessons_panel.h"
#include "lessons/play_rank_panel.h"
#include "model_choice.h"
#include "schedule/generators.h"
#include "schedule/msccl_import.h"
#include "topology/topology_pane.h"
#include "window/error_banner.h"
#include "window/flight_record_view.h"
#include "window/main_window.h"
#include "window/runtime_types.h"
#include "window/setup.h"

namespace arl::app {

namespace {

constexpr const char* kProg = "allreduce-lab gui";
// A scripted run that has not ended by then is reported as hung.
constexpr int kAutorunTimeoutMs = 300'000;

struct GuiArgs {
  std::optional<int> workers;
  std::optional<int> expect;          // remote workers to wait for
  std::optional<std::string> listen;  // the control endpoint they join
  std::optional<std::string> algorithm;
  // --schedule FILE.xml: an MSCCL file's text, its algorithm name, collective and ranks.
  std::string scheduleXml;
  Collective scheduleCollective = Collective::AllReduce;
  int scheduleRanks = 0;
  std::optional<uint64_t> size;
  std::optional<ui::SweepRange> sizes;  // -b, -e, -f
  std::optional<uint64_t> slice;
  std::optional<int> inflight;
  std::optional<int> window;  // --window: ring's window of slices
  std::optional<int> radix;
  std::optional<int> iterations;
  std::optional<int> warmup;
  std::optional<LinkShaping> shaping;
  ControlSecurity security;  // --keys, --allow, --insecure
  bool insecure = false;
  std::string topology;  // --topology, as topologyName() spells it
  int chartsTab = -1;    // the charts tab the screenshot shows; -1: the window's default
  std::optional<ui::BandwidthOf> bandwidthOf;  // --bandwidth: what the bandwidth charts show
  std::string screenshot;
  std::string recording;
  std::string beside;       // --beside: a file charted beside the recording
  std::string trainRecord;  // --train-record: a training record to show at start
  int settleMs = 1500;
  bool autorun = false;
  bool projector = false;  // start in projector mode (View -> Projector)
  std::string lesson;      // open the Lessons dock at this lesson
  std::string answer;      // ... answer it with this option and run it
  std::string play;        // --play ALGO[:N[:RANK]]: open Play a rank with this game
  std::string playKeys;    // ... and type these keys into it
};

// The setup of a window started with options: the defaults, with what they say on top.
ui::SessionSetup initialSetup(const GuiArgs& a) {
  ui::SessionSetup s;
  if (a.workers) s.localWorkers = *a.workers;
  if (a.expect) s.remoteWorkers = *a.expect;
  if (a.listen) s.listen = *a.listen;
  if (a.algorithm) s.algorithm = *a.algorithm;
  if (!a.scheduleXml.empty()) {
    s.scheduleXml = a.scheduleXml;
    s.collective = a.scheduleCollective;
    if (!a.workers) s.localWorkers = a.scheduleRanks;
  }
  if (a.size) {
    s.size.on = false;
    s.size.single = *a.size;
  }
  if (a.sizes) s.size = *a.sizes;
  if (a.slice) s.slice = {false, *a.slice, s.slice.min, s.slice.max, s.slice.factor};
  if (a.inflight) {
    s.inflight = {false, static_cast<uint64_t>(*a.inflight), s.inflight.min, s.inflight.max,
                  s.inflight.factor};
  }
  if (a.window) s.window = *a.window;
  if (a.radix) s.radix = *a.radix;
  if (a.iterations) s.iterations = *a.iterations;
  if (a.warmup) s.warmup = *a.warmup;
  s.topology = a.topology;
  if (a.shaping) {
    const LinkShaping& sh = *a.shaping;
    s.portMBps = sh.portBytesPerSecond / 1e6;
    s.latencyUs = sh.addedLatencySeconds * 1e6;
    if (!sh.rankPortBytesPerSecond.empty()) {
      s.slowRank = sh.rankPortBytesPerSecond.begin()->first;
      s.slowRankMBps = sh.rankPortBytesPerSecond.begin()->second / 1e6;
    }
    if (!sh.linkBytesPerSecond.empty()) {
      s.slowLinkFrom = sh.linkBytesPerSecond.begin()->first.first;
      s.slowLinkTo = sh.linkBytesPerSecond.begin()->first.second;
      s.slowLinkMBps = sh.linkBytesPerSecond.begin()->second / 1e6;
    }
  }
  return s;
}

// The charts tabs by the names --charts takes, in the panel's order, then the Training view.
const std::vector<std::string>& chartsTabNames() {
  static const std::vector<std::string> names = {"busbw",   "algbw",  "slice", "timeline",
                                                 "heatmap", "spread", "map",   "training"};
  return names;
}

// The charts tab (or the Training view) --charts names; nothing for -1.
void showChartsTab(ui::MainWindow& w, int tab) {
  if (tab >= 0 && chartsTabNames()[static_cast<size_t>(tab)] == "training") {
    w.showTraining();
  } else if (tab >= 0) {
    w.chartsPanel()->setCurrentIndex(tab);
  }
}

// Whether Qt has somewhere to show the window: a display, or a platform named explicitly
// (offscreen, vnc, ...).
bool hasDisplay() {
  for (const char* v : {"DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"}) {
    const char* s = std::getenv(v);
    if (s && *s) return true;
  }
  return false;
}

int saveScreenshot(QWidget& window, const std::string& path) {
  const QPixmap shot = window.grab();
  if (shot.isNull() || !shot.save(QString::fromStdString(path), "PNG")) {
    std::fprintf(stderr, "%s: could not write the screenshot to %s\n", kProg, path.c_str());
    return 1;
  }
  std::fprintf(stderr, "%s: wrote %s (%dx%d)\n", kProg, path.c_str(), shot.width(), shot.height());
  return 0;
}

// The run a screenshot shows: the largest whose chunks travel as one slice each (its steps
// follow one another, so the strips fill step by step), else the last.
size_t rowToShow(const BenchReport& report) {
  size_t best = report.rows.empty() ? 0 : report.rows.size() - 1;
  uint64_t bestSize = 0;
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const SweepRow& r = report.rows[i];
    const uint64_t n = static_cast<uint64_t>(std::max(r.result.nranks, 1));
    if (r.result.state == RunState::Done && r.sizeBytes <= r.result.request.sliceBytes * n &&
        r.sizeBytes > bestSize) {
      best = i;
      bestSize = r.sizeBytes;
    }
  }
  return best;
}

// "shot-flight.png" for "shot.png": where a failed run's flight record view is saved.
std::string flightShotPath(const std::string& path) {
  const size_t dot = path.rfind('.');
  const size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) {
    return path + "-flight";
  }
  return path.substr(0, dot) + "-flight" + path.substr(dot);
}

// A failed run with --screenshot: the window with its error banner, and the flight record
// view beside it (flightShotPath) when the run left one. Exits 1: the run failed.
void failedShot(ui::MainWindow& w, const GuiArgs& a) {
  QTimer::singleShot(a.settleMs, &w, [&w, a] {
    saveScreenshot(w, a.screenshot);
    ui::FlightRecordDialog* d =
        w.banner()->flightRecordAvailable() ? w.showFlightRecord() : nullptr;
    if (d == nullptr) {
      QApplication::exit(1);
      return;
    }
    QTimer::singleShot(200, &w, [d, a] {
      saveScreenshot(*d, flightShotPath(a.screenshot));
      QApplication::exit(1);
    });
  });
}

// Runs the setup once; `settleMs` after the session ended (the charts have drawn it), shows
// one run paused mid-flight and saves the screenshot.
void autorun(ui::MainWindow& w, const GuiArgs& a) {
  QObject::connect(&w, &ui::MainWindow::sessionEnded, &w, [&w, a](const ui::SessionEnd& end) {
    if (!end.error.empty()) {
      std::fprintf(stderr, "%s: the run failed: %s\n", kProg, end.error.c_str());
      if (a.screenshot.empty()) {
        QApplication::exit(1);
      } else {
        failedShot(w, a);
      }
      return;
    }
    QTimer::singleShot(a.settleMs, &w, [&w, a] {
      // A still of one run mid-flight, rather than wherever its replay has got to.
      w.showRow(rowToShow(w.report()));
      w.topologyPane()->pauseAtBusiestMoment();
      showChartsTab(w, a.chartsTab);
      QTimer::singleShot(100, &w, [&w, a] {
        QApplication::exit(a.screenshot.empty() ? 0 : saveScreenshot(w, a.screenshot));
      });
    });
  });
  QTimer::singleShot(0, &w, [&w] {
    if (w.run()) return;
    for (const ui::SetupProblem& p : w.problems()) {
      std::fprintf(stderr, "%s: %s\n", kProg, p.rule.c_str());
    }
    QApplication::exit(2);
  });
  QTimer::singleShot(kAutorunTimeoutMs, &w, [] {
    std::fprintf(stderr, "%s: the run did not end within %d s\n", kProg, kAutorunTimeoutMs / 1000);
    QApplication::exit(1);
  });
}

// A replay with --screenshot: once the recording is drawn, pauses its run at the busiest moment,
// saves the picture and exits (2 when the recording is refused, with the reader's message).
void replayShot(ui::MainWindow& w, const GuiArgs& a) {
  QObject::connect(&w, &ui::MainWindow::recordingRefused, &w, [](const QString& e) {
    std::fprintf(stderr, "%s: %s\n", kProg, e.toStdString().c_str());
    QApplication::exit(2);
  });
  auto shown = std::make_shared<int>(0);
  QObject::connect(&w, &ui::MainWindow::recordingShown, &w, [&w, a, shown] {
    // With --beside, the picture waits for the second file.
    if (++*shown < (a.beside.empty() ? 1 : 2)) return;
    QTimer::singleShot(a.settleMs, &w, [&w, a] {
      w.topologyPane()->pauseAtBusiestMoment();
      showChartsTab(w, a.chartsTab);
      QTimer::singleShot(100, &w, [&w, a] { QApplication::exit(saveScreenshot(w, a.screenshot)); });
    });
  });
}

// --screenshot alone: the window as it opens, once it has settled, then exits.
void openShot(ui::MainWindow& w, const GuiArgs& a) {
  const auto shoot = [&w, a] {
    QTimer::singleShot(a.settleMs, &w, [&w, a] {
      showChartsTab(w, a.chartsTab);
      QTimer::singleShot(100, &w, [&w, a] { QApplication::exit(saveScreenshot(w, a.screenshot)); });
    });
  };
  if (a.trainRecord.empty()) {
    shoot();
    return;
  }
  // The record is read off the GUI thread: the settling starts once it is shown.
  QObject::connect(&w, &ui::MainWindow::trainingRecordShown, &w, shoot);
}

// --lesson NAME [--answer ID]: opens the lesson; with an answer, runs it. With --screenshot the
// window is saved at the replay's first pause (or once the replay, or a training lesson's
// record, has settled), or, without an answer, once the question is shown. False (the reason
// printed) for an unknown lesson or option.
bool lessonShot(ui::MainWindow& w, const GuiArgs& a) {
  if (!w.openLesson(QString::fromStdString(a.lesson))) {
    std::fprintf(stderr, "%s: no lesson '%s' (see allreduce-lab lesson list)\n", kProg,
                 a.lesson.c_str());
    return false;
  }
  ui::LessonsPanel* panel = w.lessonsPanel();
  if (!a.answer.empty() && !panel->choose(QString::fromStdString(a.answer))) {
    std::fprintf(stderr, "%s: lesson '%s' has no option '%s'\n", kProg, a.lesson.c_str(),
                 a.answer.c_str());
    return false;
  }
  auto shoot = [&w, a] {
    QTimer::singleShot(300, &w, [&w, a] { QApplication::exit(saveScreenshot(w, a.screenshot)); });
  };
  if (a.answer.empty()) {
    if (!a.screenshot.empty()) QTimer::singleShot(a.settleMs, &w, shoot);
    return true;
  }
  if (!a.screenshot.empty()) {
    auto done = std::make_shared<bool>(false);
    QObject::connect(w.topologyPane(), &ui::TopologyPane::pausedAtQuestion, &w,
                     [done, shoot](const QString&) {
                       if (!*done) shoot();
                       *done = true;
                     });
    QObject::connect(&w, &ui::MainWindow::recordingShown, &w, [&w, a, done, shoot] {
      if (w.topologyPane()->pauseCount() > 0) return;  // shot at the first pause
      QTimer::singleShot(a.settleMs, &w, [done, shoot] {
        if (!*done) shoot();
        *done = true;
      });
    });
    // A lesson of training runs shows their record instead of a replay.
    QObject::connect(&w, &ui::MainWindow::trainingRecordShown, &w, [&w, a, done, shoot] {
      QTimer::singleShot(a.settleMs, &w, [done, shoot] {
        if (!*done) shoot();
        *done = true;
      });
    });
  }
  QTimer::singleShot(0, &w, [panel] { panel->runLesson(); });
  QTimer::singleShot(kAutorunTimeoutMs, &w, [] {
    std::fprintf(stderr, "%s: the lesson did not end within %d s\n", kProg,
                 kAutorunTimeoutMs / 1000);
    QApplication::exit(1);
  });
  return true;
}

// --play ALGO[:N[:RANK]] [--play-keys KEYS]: opens Play a rank with that game and types the keys
// into it (0-9 a c s e n r as the panel reads them, [ and ] for Left and Right). With
// --screenshot the window is saved while the last move is drawn moving, or, when the keys end
// with r (the real run), once its replay has settled.
bool playShot(ui::MainWindow& w, const GuiArgs& a) {
  const QStringList parts = QString::fromStdString(a.play).split(QLatin1Char(':'));
  const int n = parts.size() > 1 ? parts[1].toInt() : 4;
  const int rank = parts.size() > 2 ? parts[2].toInt() : 1;
  w.openPlayRank();
  ui::PlayRankPanel* panel = w.playRankPanel();
  if (!panel->start(parts[0], n, rank)) {
    std::fprintf(
        stderr, "%s: --play %s: %s\n", kProg, a.play.c_str(),
        QTextDocumentFragment::fromHtml(panel->feedback()).toPlainText().toUtf8().constData());
    return false;
  }
  const bool realRun =
      !a.playKeys.empty() && (a.playKeys.back() == 'r' || a.playKeys.back() == 'R');
  QTimer::singleShot(500, &w, [&w, panel, a, realRun] {
    for (const char c : a.playKeys) {
      int key = 0;
      if (c >= '0' && c <= '9')
        key = Qt::Key_0 + (c - '0');
      else if (c == '[')
        key = Qt::Key_Left;
      else if (c == ']')
        key = Qt::Key_Right;
      else if (std::isalpha(static_cast<unsigned char>(c)))
        key = Qt::Key_A + (std::toupper(c) - 'A');
      if (key == 0) continue;
      QKeyEvent press(QEvent::KeyPress, key, Qt::NoModifier, QString(QChar(c)));
      QApplication::sendEvent(panel, &press);
    }
    if (a.screenshot.empty()) return;
    if (!realRun) {
      QTimer::singleShot(350, &w, [&w, a] { QApplication::exit(saveScreenshot(w, a.screenshot)); });
      return;
    }
    QObject::connect(&w, &ui::MainWindow::recordingShown, &w, [&w, a] {
      QTimer::singleShot(a.settleMs, &w,
                         [&w, a] { QApplication::exit(saveScreenshot(w, a.screenshot)); });
    });
    QTimer::singleShot(kAutorunTimeoutMs, &w, [] {
      std::fprintf(stderr, "%s: the real run did not end within %d s\n", kProg,
                   kAutorunTimeoutMs / 1000);
      QApplication::exit(1);
    });
  });
  return true;
}

class GuiCommand final : public Command {
 public:
  GuiCommand(CLI::App& lab, const std::vector<std::string>& args)
      : sub_(lab.add_subcommand("gui", "the lab's window (the default command)")),
        opts_(sub_, args) {
    app = sub_;
    app->footer(
        wrap("Opens the window: set up a run, watch the chunks move between the workers, read "
             "the charts. 'allreduce-lab' with no command, or with only these options, "
             "opens it too. With --autorun it runs once, saves --screenshot and exits "
             "(0 on success, 1 when the run or the screenshot failed, 2 on bad arguments; a "
             "failed run's screenshot shows the error banner, and FILE-flight.png its flight "
             "record); "
             "with --screenshot alone it saves the window as it opens (the setup's plan, "
             "before any run) and exits.",
             92) +
        "\n");
    app->add_option("recording", recording_,
                    "a recording (.arlrec) to replay at start, or nccl-tests' output (-J JSON or "
                    "its table) or NCCL Inspector's JSON lines to chart (docs/import.md)");
    opts_.value("--beside", "FILE",
                "with a recording: a second file (nccl-tests, Inspector or a recording) opened "
                "after it and charted beside its runs");
    opts_.flag("--autorun", &a_.autorun, "run the setup once, then exit");
    opts_.value("--lesson", "NAME", "open the Lessons panel at this lesson (see lesson list)");
    opts_.value("--answer", "ID",
                "with --lesson: choose this option and run the lesson (with --screenshot: saved "
                "at the replay's first pause, or once the replay, or a training lesson's record "
                "in the Training view, is drawn)");
    opts_.value("--play", "ALGO[:N[:RANK]]",
                "open Play a rank: be RANK (default 1) of ALGO (ring, tree, halving-doubling, "
                "bruck, pat, swing, knomial, or any other all-reduce) on N ranks (default 4)");
    opts_.value("--play-keys", "KEYS",
                "with --play: type these keys (0-9 chunk, [ ] rank, s send, a add, c copy, e end "
                "the step, r the real run)");
    opts_.flag("--projector", &a_.projector,
               "start in projector mode: large type, high contrast, thicker links (View -> "
               "Projector, F8)");
    opts_.value("--workers", "N", "local worker processes (default 4; 0 with --expect)");
    opts_.value("--expect", "N", "remote workers to wait for (default 0)");
    opts_.value("--listen", "tcp://ADDR:PORT",
                "control endpoint the remote workers join (default tcp://127.0.0.1, a free port)");
    opts_.value("--algo", "NAME",
                "algorithm, or 'all'. Known: " + algorithmList() +
                    "; the libraries' (timed whole, no animation): " + libraryAlgorithmList());
    opts_.value("--schedule", "FILE.xml",
                "an MSCCL algorithm file to run and animate instead of --algo (docs/msccl.md); "
                "its ranks are the default --workers");
    opts_.value("--size", "SIZE", "one message size, e.g. 1M (default: a sweep 4K..16M)");
    opts_.value("-b,--minbytes", "SIZE", "or sweep sizes from SIZE (with -e)");
    opts_.value("-e,--maxbytes", "SIZE", "... to SIZE");
    opts_.value("-f,--stepfactor", "F", "... multiplying by F (default 4)");
    opts_.value("--slice", "SIZE", "slice size (default 256K)");
    opts_.value("--inflight", "K", "slices in flight (default 4)");
    opts_.value("--window", "W",
                "ring's window: slices it takes through each step together, 1..1024 (default 1)");
    opts_.value("--radix", "K", "knomial's radix, 2..ranks (default 4, or ranks when fewer)");
    opts_.value("-n,--iters", "N", "timed iterations per run (default 5)");
    opts_.value("-w,--warmup", "N", "untimed iterations before them (default 1)");
    opts_.value("--screenshot", "FILE",
                "save a PNG of the whole window, then exit: after --autorun's run, a recording's "
                "replay, a lesson or a game; alone, the window as it opens");
    opts_.value("--charts", "TAB",
                "with --screenshot: the charts tab it shows: busbw, algbw, slice, timeline, "
                "heatmap, spread, map (the model's crossover map), or training (the Training "
                "view)");
    opts_.value("--train-record", "FILE",
                "show this training record (the JSON allreduce-lab train writes) in the "
                "Training view; with --screenshot, the window showing it");
    opts_.value("--settle", "MS",
                "wait this long before the screenshot: after the run, the replay drawn, or the "
                "window opened (default 1500)");
    declareShaping(opts_);
    opts_.group("Keys (docs/security.md)");
    declareSecurity(opts_, &a_.insecure);
    opts_.group("Options");
    declareModelOption(opts_);
    opts_.value("--bandwidth", "mean|median",
                "what the bandwidth charts measure a run by: the mean over its timed iterations "
                "(nccl-tests; default) or its median iteration, which the model predicts");
  }

  int run() override {
    const int rc = runChecked(kProg, [&] {
      check();
      return 0;
    });
    if (rc != 0) return rc;
    if (!hasDisplay()) {
      std::fprintf(stderr,
                   "%s: no display (DISPLAY and WAYLAND_DISPLAY are unset); run it under "
                   "xvfb-run, set QT_QPA_PLATFORM=offscreen, or use the headless commands "
                   "(allreduce-lab --help)\n",
                   kProg);
      return 1;
    }
    static int argc = 1;
    static char name[] = "allreduce-lab";
    static char* argv[] = {name, nullptr};
    QApplication::setHighDpiScaleFactorRoundingPolicy(
        Qt::HighDpiScaleFactorRoundingPolicy::PassThrough);
    QApplication qapp(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("allreduce-lab"));
    QApplication::setApplicationName(QStringLiteral("allreduce-lab"));
    // The desktop file and icon resources/ installs (so the desktop groups the windows).
    QGuiApplication::setDesktopFileName(QStringLiteral("org.allreducelab.AllreduceLab"));
    QApplication::setWindowIcon(
        QIcon::fromTheme(QStringLiteral("org.allreducelab.AllreduceLab"),
                         QIcon(QStringLiteral(":/icons/org.allreducelab.AllreduceLab.svg"))));
    const bool scripted = a_.autorun || a_.workers || a_.expect || a_.listen || a_.algorithm ||
                          !a_.scheduleXml.empty() || a_.size || a_.sizes || a_.slice ||
                          a_.inflight || a_.window || a_.radix || a_.iterations || a_.warmup ||
                          a_.shaping;
    // A picture of the window as it opens: as a first start opens it (the saved setup and
    // layout neither read nor written), so that it shows the same on every machine.
    const bool openingShot = !a_.screenshot.empty() && !a_.autorun && a_.recording.empty() &&
                             a_.lesson.empty() && a_.play.empty();
    ui::WindowOptions wo;
    wo.persistSettings = !a_.autorun && !openingShot;
    if (scripted) wo.setup = initialSetup(a_);
    wo.model = model_.params;
    wo.modelSource = model_.source;
    wo.security = a_.security;
    ui::MainWindow w(wo);
    if (a_.bandwidthOf) w.chartsPanel()->setBandwidthOf(*a_.bandwidthOf);
    w.show();
    if (a_.projector) w.setProjector(true);
    if (!a_.trainRecord.empty()) {
      if (!a_.screenshot.empty()) {
        QObject::connect(&w, &ui::MainWindow::trainingRecordRefused, &w, [](const QString& e) {
          std::fprintf(stderr, "%s: %s\n", kProg, e.toUtf8().constData());
          QApplication::exit(2);
        });
      }
      w.openTrainingRecord(QString::fromStdString(a_.trainRecord));
    }
    if (!a_.recording.empty()) {
      if (!a_.screenshot.empty()) replayShot(w, a_);
      if (!a_.beside.empty()) {
        auto opened = std::make_shared<bool>(false);
        QObject::connect(&w, &ui::MainWindow::recordingShown, &w, [&w, b = a_.beside, opened] {
          if (std::exchange(*opened, true)) return;
          w.openRecording(QString::fromStdString(b));
        });
      }
      w.openRecording(QString::fromStdString(a_.recording));
    }
    if (a_.autorun) autorun(w, a_);
    if (openingShot) openShot(w, a_);
    if (!a_.lesson.empty() && !lessonShot(w, a_)) return 2;
    if (!a_.play.empty() && !playShot(w, a_)) return 2;
    return QApplication::exec();
  }

 private:
  // The recording (or file to import) to open at start, and --beside.
  void checkFiles() {
    if (!recording_.empty()) {
      if (a_.autorun) throw UsageError{"a recording to replay and --autorun exclude each other"};
      if (!QFileInfo(QString::fromStdString(recording_)).isFile()) {
        throw UsageError{"recording '" + recording_ + "' is not a file"};
      }
      a_.recording = recording_;
    }
    if (auto v = opts_.get("--beside")) {
      if (recording_.empty()) throw refuse(*v, "needs a recording (or file) to open first");
      if (!QFileInfo(QString::fromStdString(v->text)).isFile()) throw refuse(*v, "is not a file");
      a_.beside = v->text;
    }
  }

  void checkSchedule(const Arg& v) {
    if (auto algo = opts_.get("--algo")) throw refuse(*algo, "cannot be given with --schedule");
    try {
      a_.scheduleXml = readInputFile(v.text, kMscclMaxFileBytes);
      const MscclProgram p = parseMscclProgram(a_.scheduleXml, v.text);
      a_.algorithm = mscclAlgorithmName(p);
      a_.scheduleCollective = p.collective;
      a_.scheduleRanks = p.ngpus;
    } catch (const InputFileError& e) {
      throw refuse(v, e.what());
    } catch (const MscclImportError& e) {
      throw UsageError{e.what()};
    }
  }

  void check() {
    if (auto v = opts_.get("--workers")) a_.workers = parseInt(*v, 0, kMaxRanks);
    if (auto v = opts_.get("--expect")) a_.expect = parseInt(*v, 0, kMaxRanks);
    if (a_.workers.value_or(1) + a_.expect.value_or(0) < 1) {
      throw refuse(*opts_.get("--workers"),
                   "leaves no rank to run on; start some or --expect some");
    }
    if (auto v = opts_.get("--listen")) {
      checkListen(*v);
      a_.listen = v->text;
    }
    if (auto v = opts_.get("--algo")) {
      const auto& names = algorithmNames();
      if (v->text != "all" && std::find(names.begin(), names.end(), v->text) == names.end() &&
          findLibraryAlgorithm(v->text) == nullptr) {
        throw refuse(*v, "unknown algorithm (known: " + algorithmList() +
                             ", all; the libraries': " + libraryAlgorithmList() + ")");
      }
      a_.algorithm = v->text;
    }
    if (auto v = opts_.get("--schedule")) checkSchedule(*v);
    if (auto v = opts_.get("--size")) a_.size = parseSize(*v);
    checkSweep();
    if (auto v = opts_.get("--slice")) a_.slice = parseSize(*v);
    if (auto v = opts_.get("--inflight")) a_.inflight = parseInt(*v, 1, 1024);
    if (auto v = opts_.get("--window")) a_.window = parseInt(*v, 1, 1024);
    if (auto v = opts_.get("--radix")) a_.radix = parseInt(*v, 2, kMaxRanks);
    if (auto v = opts_.get("--iters")) a_.iterations = parseInt(*v, 1, 1'000'000);
    if (auto v = opts_.get("--warmup")) a_.warmup = parseInt(*v, 0, 1'000'000);
    checkShaping();
    model_ = chooseModel(opts_.get("--model"));
    if (auto v = opts_.get("--bandwidth")) {
      a_.bandwidthOf = ui::parseBandwidthOf(v->text);
      if (!a_.bandwidthOf) throw refuse(*v, "expected mean or median");
    }
    checkFiles();
    if (auto v = opts_.get("--train-record")) {
      if (a_.autorun || !a_.recording.empty()) {
        throw refuse(*v, "excludes --autorun and a recording");
      }
      if (!QFileInfo(QString::fromStdString(v->text)).isFile()) throw refuse(*v, "is not a file");
      a_.trainRecord = v->text;
    }
    if (auto v = opts_.get("--lesson")) {
      if (a_.autorun || !a_.recording.empty())
        throw refuse(*v, "excludes --autorun and a recording");
      a_.lesson = v->text;
    }
    if (auto v = opts_.get("--answer")) {
      if (a_.lesson.empty()) throw refuse(*v, "needs --lesson");
      a_.answer = v->text;
    }
    if (auto v = opts_.get("--play")) {
      if (a_.autorun || !a_.recording.empty() || !a_.lesson.empty())
        throw refuse(*v, "excludes --autorun, --lesson and a recording");
      a_.play = v->text;
    }
    a_.security = parseSecurity(opts_, a_.insecure);
    if (auto v = opts_.get("--play-keys")) {
      if (a_.play.empty()) throw refuse(*v, "needs --play");
      a_.playKeys = v->text;
    }
    const bool scripted =
        a_.autorun || !a_.recording.empty() || !a_.lesson.empty() || !a_.play.empty();
    if (auto v = opts_.get("--charts")) {
      const auto& names = chartsTabNames();
      const auto it = std::find(names.begin(), names.end(), v->text);
      if (it == names.end()) {
        throw refuse(*v,
                     "unknown tab (known: busbw, algbw, slice, timeline, heatmap, spread, map, "
                     "training)");
      }
      if (!scripted && !opts_.get("--screenshot")) {
        throw refuse(*v, "needs --screenshot, --autorun or a recording");
      }
      a_.chartsTab = static_cast<int>(it - names.begin());
    }
    if (auto v = opts_.get("--settle")) a_.settleMs = parseInt(*v, 0, 600'000);
    if (auto v = opts_.get("--screenshot")) {
      const QFileInfo fi(QString::fromStdString(v->text));
      if (v->text.empty() || fi.isDir()) throw refuse(*v, "needs a file name");
      if (!fi.absoluteDir().exists()) {
        throw refuse(*v, "directory '" + fi.absolutePath().toStdString() + "' does not exist");
      }
      a_.screenshot = v->text;
    }
  }

  // -b, -e, -f: a sweep of sizes (not with --size).
  void checkSweep() {
    const auto b = opts_.get("--minbytes"), e = opts_.get("--maxbytes");
    const auto f = opts_.get("--stepfactor");
    if (!b && !e && !f) return;
    if (!b || !e) throw refuse(b ? *b : (e ? *e : *f), "a sweep needs both -b and -e");
    if (a_.size) throw refuse(*b, "is a sweep; --size is one size: give one or the other");
    ui::SweepRange r{true, 0, parseSize(*b), parseSize(*e), 4};
    if (f) r.factor = static_cast<uint64_t>(parseInt(*f, 2, 1024));
    if (r.max < r.min) throw refuse(*e, "must be at least -b (" + formatSize(r.min) + ")");
    a_.sizes = r;
  }

  // The shaping flags, as the setup panel holds them: one slow rank and one slow link at most,
  // or a topology.
  void checkShaping() {
    const int n = a_.workers.value_or(ui::SessionSetup{}.localWorkers) + a_.expect.value_or(0);
    LinkShaping sh = parseShaping(opts_, n);
    if (const auto t = parseTopologyFlag(opts_, n)) {
      // The panel holds the topology by name, and the per-hop latency as its added latency.
      a_.topology = topologyName(*t);
      LinkShaping held = parseUniformShaping(opts_);
      held.rankPortBytesPerSecond = sh.rankPortBytesPerSecond;
      sh = held;
    }
    if (sh.rankPortBytesPerSecond.size() > 1) {
      throw refuse(opts_.getAll("--slow-rank")[1], "the window slows one rank at most");
    }
    if (sh.linkBytesPerSecond.size() > 1) {
      throw refuse(opts_.getAll("--slow-link")[1], "the window slows one link at most");
    }
    if (!sh.empty()) a_.shaping = sh;
  }

  CLI::App* sub_;
  Options opts_;
  GuiArgs a_;
  ModelChoice model_;  // --model, or the saved calibration, as bench and plan choose it
  std::string recording_;
};

}  // namespace

std::unique_ptr<Command> addGuiCommand(CLI::App& lab, const std::vector<std::string>& args) {
  return std::make_unique<GuiCommand>(lab, args);
}

}  // namespace arl::app
