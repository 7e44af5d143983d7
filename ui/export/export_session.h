// Exports of a session: each chart to PNG (chosen size and scale), SVG and PDF, the data to
// CSV and JSON (the bench's shapes, core/export/export.h), the runs to a Perfetto trace and to
// a recording (.arlrec). Used by the window's File > Export and by `allreduce-lab export`.
// Charts are drawn on white paper with their titles, axis titles, legend and the session's
// configuration as a subtitle, whatever the window's theme.
#pragma once

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "charts/chart_data.h"
#include "export/export.h"

namespace arl::ui {

enum class ExportFormat : uint8_t { Png, Svg, Pdf, Csv, Json, Trace, Recording };

// "png", "svg", "pdf", "csv", "json", "trace", "recording".
std::string toString(ExportFormat f);

// The size of a chart in logical pixels; a PNG has scale times as many pixels per side, an
// SVG and a PDF are vector drawings of that size (a PDF page of width x height at 96 dpi).
struct ImageOptions {
  int width = 1200;
  int height = 750;
  double scale = 2.0;
};

// The accepted ranges: width and height 200..10000, scale 0.5..8.
inline constexpr int kMinImageSide = 200;
inline constexpr int kMaxImageSide = 10000;
inline constexpr double kMinImageScale = 0.5;
inline constexpr double kMaxImageScale = 8.0;

struct ExportOptions {
  std::string directory;  // created when missing
  std::set<ExportFormat> formats = {ExportFormat::Png,      ExportFormat::Svg,  ExportFormat::Pdf,
                                    ExportFormat::Csv,      ExportFormat::Json, ExportFormat::Trace,
                                    ExportFormat::Recording};
  ImageOptions image;
  BandwidthOf bandwidthOf = BandwidthOf::Mean;  // what the bandwidth charts measure by
};

// A file could not be written, or the options are out of range; what() names the path or the
// option.
struct ExportError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Writes chart `k` of `charts` to `path` in `format` (Png, Svg or Pdf). Throws ExportError.
void exportChart(const SessionCharts& charts, ChartKind k, const std::string& path,
                 ExportFormat format, const ImageOptions& image = {});

// Writes every chosen format of `report` into options.directory: each chart as
// <chart-slug>.png/.svg/.pdf, results.csv, results.json, trace.json (Perfetto) and
// session.arlrec. Returns the paths written, in that order. Throws ExportError (RecordingError
// and ConfigError from core pass through as ExportError with their message).
std::vector<std::string> exportSession(const BenchReport& report, const ExportOptions& options);

}  // namespace arl::ui
