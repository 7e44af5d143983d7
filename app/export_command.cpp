// allreduce-lab export: renders every chart of a recording headlessly (no display needed) and
// writes the chosen formats: charts as PNG, SVG and PDF, the results as CSV and JSON, the runs
// as a Perfetto trace (ui/export/export_session.h).
#include <CLI/CLI.hpp>

#include <QApplication>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cli_util.h"
#include "commands.h"
#include "export/export_session.h"
#include "export/nccl_tests.h"

namespace arl::app {
namespace {

constexpr const char* kProg = "allreduce-lab export";

constexpr const char* kAbout =
    "Reads a recording (bench --record FILE.arlrec) and writes, into DIR, every chart "
    "(busbw and algbw against size, busbw against slice size, the per-step timeline and the "
    "per-link heat map of the last run with telemetry, the spread of iteration times) in "
    "each chosen image format, and the data in each chosen data format. With no format "
    "flag, all six. Prints the files written, one per line. Needs no display: without one "
    "it draws on Qt's offscreen platform.\n"
    "Exit status: 0 when every file was written, 1 when one could not be, 2 on bad "
    "arguments or an unreadable recording.";

class ExportCommand final : public Command {
 public:
  ExportCommand(CLI::App& lab, const std::vector<std::string>& args);
  int run() override;

 private:
  ui::ExportOptions parse() const;

  Options opts_;
  std::string file_;
  bool png_ = false, svg_ = false, pdf_ = false, csv_ = false, json_ = false, trace_ = false;
};

ExportCommand::ExportCommand(CLI::App& lab, const std::vector<std::string>& args)
    : opts_(lab.add_subcommand("export", "render a recording's charts and data to files"), args) {
  app = lab.get_subcommand("export");
  app->footer(wrap(kAbout, 92) + "\n");
  app->add_option("FILE", file_, "a recording, FILE.arlrec")->required();
  opts_.value("--out", "DIR", "the directory to write into (created when missing)");
  opts_.group("Formats (none given: all)");
  opts_.flag("--png", &png_, "each chart as PNG");
  opts_.flag("--svg", &svg_, "each chart as SVG");
  opts_.flag("--pdf", &pdf_, "each chart as PDF");
  opts_.flag("--csv", &csv_, "the results as CSV (results.csv, bench --csv's columns)");
  opts_.flag("--json", &json_, "the results as JSON (results.json, bench --json's shape)");
  opts_.flag("--trace", &trace_, "the runs as a Perfetto trace (trace.json)");
  opts_.value("--bandwidth", "mean|median",
              "what the bandwidth charts measure a run by: the mean over its timed iterations, "
              "as nccl-tests and the CSV and JSON do (default), or its median iteration (p50), "
              "which the cost model's prediction is calibrated to");
  opts_.group("Chart size");
  opts_.value("--width", "W", "width in logical pixels, 200..10000 (default 1200)");
  opts_.value("--height", "H", "height in logical pixels, 200..10000 (default 750)");
  opts_.value("--scale", "S",
              "pixels per logical pixel in PNGs, 0.5..8 (default 2); SVG and PDF are vector");
}

double parseScale(const Arg& a) {
  char* end = nullptr;
  const double v = std::strtod(a.text.c_str(), &end);
  if (end == a.text.c_str() || *end != '\0' || !(v >= ui::kMinImageScale) ||
      !(v <= ui::kMaxImageScale)) {
    throw refuse(a, "must be a number in 0.5..8");
  }
  return v;
}

ui::ExportOptions ExportCommand::parse() const {
  ui::ExportOptions o;
  const std::optional<Arg> out = opts_.get("--out");
  if (!out || out->text.empty()) throw UsageError{"--out DIR is required"};
  o.directory = out->text;
  o.formats.clear();
  const std::pair<bool, ui::ExportFormat> flags[] = {
      {png_, ui::ExportFormat::Png},   {svg_, ui::ExportFormat::Svg},
      {pdf_, ui::ExportFormat::Pdf},   {csv_, ui::ExportFormat::Csv},
      {json_, ui::ExportFormat::Json}, {trace_, ui::ExportFormat::Trace}};
  for (const auto& [on, f] : flags) {
    if (on) o.formats.insert(f);
  }
  if (o.formats.empty()) {
    for (const auto& [on, f] : flags) o.formats.insert(f);
  }
  if (auto w = opts_.get("--width"))
    o.image.width = parseInt(*w, ui::kMinImageSide, ui::kMaxImageSide);
  if (auto h = opts_.get("--height"))
    o.image.height = parseInt(*h, ui::kMinImageSide, ui::kMaxImageSide);
  if (auto s = opts_.get("--scale")) o.image.scale = parseScale(*s);
  if (auto b = opts_.get("--bandwidth")) {
    const auto of = ui::parseBandwidthOf(b->text);
    if (!of) throw refuse(*b, "expected mean or median");
    o.bandwidthOf = *of;
  }
  return o;
}

// Qt's offscreen platform when no display is there, unless the user chose a platform.
void chooseHeadlessPlatform() {
  const auto unset = [](const char* name) {
    const char* v = std::getenv(name);
    return v == nullptr || *v == '\0';
  };
  if (unset("QT_QPA_PLATFORM") && unset("DISPLAY") && unset("WAYLAND_DISPLAY")) {
    setenv("QT_QPA_PLATFORM", "offscreen", 1);
  }
}

// The offscreen platform warns once per chart that it cannot propagate size hints (charts are
// shown off screen to be laid out); that says nothing to the user, every other message passes.
QtMessageHandler previousHandler = nullptr;
void quietOffscreen(QtMsgType type, const QMessageLogContext& context, const QString& text) {
  if (text.contains(QLatin1String("does not support propagateSizeHints"))) return;
  if (previousHandler != nullptr) previousHandler(type, context, text);
}

}  // namespace

int ExportCommand::run() {
  ui::ExportOptions options;
  BenchReport report;
  const int refused = runChecked(kProg, [&] {
    options = parse();
    try {
      report = readSessionFile(file_);
    } catch (const RecordingError& e) {
      throw UsageError{e.what()};
    } catch (const ImportError& e) {
      throw UsageError{e.what()};
    }
    return 0;
  });
  if (refused != 0) return refused;

  chooseHeadlessPlatform();
  static int argc = 1;
  static char name[] = "allreduce-lab";
  static char* argv[] = {name, nullptr};
  std::unique_ptr<QApplication> qapp;
  if (QApplication::instance() == nullptr) qapp = std::make_unique<QApplication>(argc, argv);
  previousHandler = qInstallMessageHandler(quietOffscreen);
  try {
    for (const std::string& path : ui::exportSession(report, options)) {
      std::printf("%s\n", path.c_str());
    }
  } catch (const ui::ExportError& e) {
    std::fprintf(stderr, "%s: %s\n", kProg, e.what());
    return 1;
  }
  return 0;
}

std::unique_ptr<Command> addExportCommand(CLI::App& lab, const std::vector<std::string>& args) {
  return std::make_unique<ExportCommand>(lab, args);
}

}  // namespace arl::app
