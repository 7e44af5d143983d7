// allreduce-lab gui (and allreduce-lab with no command): the lab's window. With --autorun it
// runs the setup once, saves a screenshot of the whole window once the run is drawn, and
// exits: 0 when the run completed and the picture was written, 1 when either failed.
#include <QApplication>
#include <QDir>
#include <QFileInfo>
#include <QPixmap>
#include <QTimer>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "base/limits.h"
#include "cli_util.h"
#include "commands.h"
#include "schedule/generators.h"
#include "window/main_window.h"
#include "window/setup.h"

namespace arl::app {

namespace {

constexpr const char* kProg = "allreduce-lab gui";
// A scripted run that has not ended by then is reported as hung.
constexpr int kAutorunTimeoutMs = 300'000;

struct GuiArgs {
  std::optional<int> workers;
  std::optional<std::string> algorithm;
  std::optional<uint64_t> size;
  std::string screenshot;
  std::string recording;
  int settleMs = 1500;
  bool autorun = false;
};

// The setup of a window started with options: the defaults, with what they say on top.
ui::SessionSetup initialSetup(const GuiArgs& a) {
  ui::SessionSetup s;
  if (a.workers) s.localWorkers = *a.workers;
  if (a.algorithm) s.algorithm = *a.algorithm;
  if (a.size) {
    s.size.on = false;
    s.size.single = *a.size;
  }
  return s;
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

// Runs the setup once; saves the screenshot `settleMs` after the session ended, so that the
// charts and the topology have drawn it.
void autorun(ui::MainWindow& w, const GuiArgs& a) {
  QObject::connect(&w, &ui::MainWindow::sessionEnded, &w, [&w, a](const ui::SessionEnd& end) {
    if (!end.error.empty()) {
      std::fprintf(stderr, "%s: the run failed: %s\n", kProg, end.error.c_str());
      QApplication::exit(1);
      return;
    }
    QTimer::singleShot(a.settleMs, &w, [&w, a] {
      QApplication::exit(a.screenshot.empty() ? 0 : saveScreenshot(w, a.screenshot));
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
             "(0 on success, 1 when the run or the screenshot failed, 2 on bad arguments).",
             92) +
        "\n");
    app->add_option("recording", recording_, "a recording (.arlrec) to replay at start");
    opts_.flag("--autorun", &a_.autorun, "run the setup once, then exit");
    opts_.value("--workers", "N", "local worker processes (default 4)");
    opts_.value("--algo", "NAME", "algorithm, or 'all'. Known: " + algorithmList());
    opts_.value("--size", "SIZE", "one message size, e.g. 1M (default: a sweep 4K..16M)");
    opts_.value("--screenshot", "FILE", "with --autorun: save a PNG of the whole window");
    opts_.value(
        "--settle", "MS",
        "with --autorun: wait this long after the run before the screenshot (default 1500)");
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
    const bool scripted = a_.autorun || a_.workers || a_.algorithm || a_.size;
    ui::WindowOptions wo;
    wo.persistSettings = !a_.autorun;
    if (scripted) wo.setup = initialSetup(a_);
    ui::MainWindow w(wo);
    w.show();
    if (!a_.recording.empty()) w.openRecording(QString::fromStdString(a_.recording));
    if (a_.autorun) autorun(w, a_);
    return QApplication::exec();
  }

 private:
  void check() {
    if (auto v = opts_.get("--workers")) a_.workers = parseInt(*v, 1, kMaxRanks);
    if (auto v = opts_.get("--algo")) {
      const auto& names = algorithmNames();
      if (v->text != "all" && std::find(names.begin(), names.end(), v->text) == names.end()) {
        throw refuse(*v, "unknown algorithm (known: " + algorithmList() + ", all)");
      }
      a_.algorithm = v->text;
    }
    if (auto v = opts_.get("--size")) a_.size = parseSize(*v);
    if (auto v = opts_.get("--settle")) a_.settleMs = parseInt(*v, 0, 600'000);
    if (auto v = opts_.get("--screenshot")) {
      if (!a_.autorun) throw refuse(*v, "needs --autorun");
      const QFileInfo fi(QString::fromStdString(v->text));
      if (v->text.empty() || fi.isDir()) throw refuse(*v, "needs a file name");
      if (!fi.absoluteDir().exists()) {
        throw refuse(*v, "directory '" + fi.absolutePath().toStdString() + "' does not exist");
      }
      a_.screenshot = v->text;
    }
    if (!recording_.empty()) {
      if (a_.autorun) throw UsageError{"a recording to replay and --autorun exclude each other"};
      if (!QFileInfo(QString::fromStdString(recording_)).isFile()) {
        throw UsageError{"recording '" + recording_ + "' is not a file"};
      }
      a_.recording = recording_;
    }
  }

  CLI::App* sub_;
  Options opts_;
  GuiArgs a_;
  std::string recording_;
};

}  // namespace

std::unique_ptr<Command> addGuiCommand(CLI::App& lab, const std::vector<std::string>& args) {
  return std::make_unique<GuiCommand>(lab, args);
}

}  // namespace arl::app
