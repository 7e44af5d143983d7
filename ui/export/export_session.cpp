#include "export/export_session.h"

#include <QDir>
#include <QFileInfo>
#include <QImage>
#include <QPageSize>
#include <QPainter>
#include <QPdfWriter>
#include <QSaveFile>
#include <QSvgGenerator>
#include <cmath>

#include "charts/chart_render.h"

namespace arl::ui {
namespace {

// Logical pixels per inch of SVG and PDF exports, as on a standard screen, so that fonts in
// points come out at the size a PNG shows them.
constexpr int kDpi = 96;

QString qs(const std::string& s) { return QString::fromStdString(s); }

void checkImage(const ImageOptions& o) {
  auto side = [](const char* name, int v) {
    if (v < kMinImageSide || v > kMaxImageSide) {
      throw ExportError(std::string(name) + " " + std::to_string(v) + ": must be in " +
                        std::to_string(kMinImageSide) + ".." + std::to_string(kMaxImageSide));
    }
  };
  side("width", o.width);
  side("height", o.height);
  if (!(o.scale >= kMinImageScale && o.scale <= kMaxImageScale)) {
    throw ExportError("scale " + std::to_string(o.scale) + ": must be in 0.5..8");
  }
}

// Opens `path` for writing through a temporary file that commit() renames over it, so that a
// failed export (a full disk) leaves any earlier file whole and no truncated one.
void openSaveFile(QSaveFile& f, const std::string& path, const char* kind) {
  f.setFileName(qs(path));
  if (!f.open(QIODevice::WriteOnly)) {
    throw ExportError(path + ": cannot write the " + kind + " (" + f.errorString().toStdString() +
                      ")");
  }
}

void commitSaveFile(QSaveFile& f, const std::string& path, const char* kind) {
  if (!f.commit()) {
    throw ExportError(path + ": writing the " + kind + " failed (" + f.errorString().toStdString() +
                      "); the file is unchanged");
  }
}

const std::string& chartTitle(const SessionCharts& c, ChartKind k) {
  if (const XYChartData* d = c.xy(k)) return d->title;
  return k == ChartKind::StepTimeline ? c.timeline.title : c.heatMap.title;
}

void writePng(const SessionCharts& c, ChartKind k, const std::string& path, const ImageOptions& o) {
  QImage img(static_cast<int>(std::lround(o.width * o.scale)),
             static_cast<int>(std::lround(o.height * o.scale)),
             QImage::Format_ARGB32_Premultiplied);
  img.setDevicePixelRatio(o.scale);
  img.fill(Qt::white);
  {
    QPainter p(&img);
    renderChart(c, k, p, QRectF(0, 0, o.width, o.height));
  }
  QSaveFile f;
  openSaveFile(f, path, "PNG");
  if (!img.save(&f, "PNG")) {
    f.cancelWriting();
    throw ExportError(path + ": cannot write the PNG");
  }
  commitSaveFile(f, path, "PNG");
}

void writeSvg(const SessionCharts& c, ChartKind k, const std::string& path, const ImageOptions& o) {
  QSaveFile f;
  openSaveFile(f, path, "SVG");
  QSvgGenerator gen;
  gen.setOutputDevice(&f);
  gen.setSize(QSize(o.width, o.height));
  gen.setViewBox(QRect(0, 0, o.width, o.height));
  gen.setResolution(kDpi);
  gen.setTitle(qs(chartTitle(c, k)));
  gen.setDescription(qs(c.subtitle));
  QPainter p;
  if (!p.begin(&gen)) throw ExportError(path + ": cannot write the SVG");
  renderChart(c, k, p, QRectF(0, 0, o.width, o.height));
  p.end();
  commitSaveFile(f, path, "SVG");
}

void writePdf(const SessionCharts& c, ChartKind k, const std::string& path, const ImageOptions& o) {
  QSaveFile f;
  openSaveFile(f, path, "PDF");
  QPdfWriter pdf(&f);
  pdf.setResolution(kDpi);
  pdf.setPageSize(QPageSize(QSizeF(o.width * 72.0 / kDpi, o.height * 72.0 / kDpi), QPageSize::Point,
                            QString(), QPageSize::ExactMatch));
  pdf.setPageMargins(QMarginsF(0, 0, 0, 0));
  pdf.setTitle(qs(chartTitle(c, k)));
  pdf.setCreator(QStringLiteral("allreduce-lab"));
  QPainter p;
  if (!p.begin(&pdf)) throw ExportError(path + ": cannot write the PDF");
  renderChart(c, k, p, QRectF(0, 0, pdf.width(), pdf.height()));
  p.end();
  commitSaveFile(f, path, "PDF");
}

void writeText(const std::string& path, const std::string& text) {
  try {
    writeTextFile(path, text);
  } catch (const std::exception& e) {
    throw ExportError(e.what());
  }
}

}  // namespace

std::string toString(ExportFormat f) {
  switch (f) {
    case ExportFormat::Png: return "png";
    case ExportFormat::Svg: return "svg";
    case ExportFormat::Pdf: return "pdf";
    case ExportFormat::Csv: return "csv";
    case ExportFormat::Json: return "json";
    case ExportFormat::Trace: return "trace";
    case ExportFormat::Recording: return "recording";
  }
  return "?";
}

void exportChart(const SessionCharts& charts, ChartKind k, const std::string& path,
                 ExportFormat format, const ImageOptions& image) {
  checkImage(image);
  switch (format) {
    case ExportFormat::Png: return writePng(charts, k, path, image);
    case ExportFormat::Svg: return writeSvg(charts, k, path, image);
    case ExportFormat::Pdf: return writePdf(charts, k, path, image);
    default:
      throw ExportError(path + ": a chart exports to png, svg or pdf, not " + toString(format));
  }
}

std::vector<std::string> exportSession(const BenchReport& report, const ExportOptions& options) {
  checkImage(options.image);
  const QString dir = qs(options.directory);
  if (dir.isEmpty()) throw ExportError("no output directory given");
  if (!QDir().mkpath(dir)) throw ExportError(options.directory + ": cannot create the directory");
  if (!QFileInfo(dir).isDir() || !QFileInfo(dir).isWritable()) {
    throw ExportError(options.directory + ": not a writable directory");
  }
  auto pathOf = [&](const std::string& name) { return QDir(dir).filePath(qs(name)).toStdString(); };
  std::vector<std::string> written;
  const auto has = [&](ExportFormat f) { return options.formats.count(f) > 0; };
  if (has(ExportFormat::Png) || has(ExportFormat::Svg) || has(ExportFormat::Pdf)) {
    const SessionCharts charts = sessionCharts(report, nullptr, options.bandwidthOf);
    for (const ExportFormat f : {ExportFormat::Png, ExportFormat::Svg, ExportFormat::Pdf}) {
      if (!has(f)) continue;
      for (int i = 0; i < kChartKinds; ++i) {
        const auto k = static_cast<ChartKind>(i);
        const std::string path = pathOf(chartSlug(k) + "." + toString(f));
        exportChart(charts, k, path, f, options.image);
        written.push_back(path);
      }
    }
  }
  const std::pair<ExportFormat, std::pair<const char*, std::string (*)(const BenchReport&)>>
      data[] = {
          {ExportFormat::Csv, {"results.csv", &benchResultsCsv}},
          {ExportFormat::Json, {"results.json", &benchResultsJson}},
          {ExportFormat::Trace,
           {"trace.json", [](const BenchReport& r) { return chromeTraceJson(r); }}},
          {ExportFormat::Recording, {"session.arlrec", &recordingJson}},
      };
  for (const auto& [f, what] : data) {
    if (!has(f)) continue;
    const std::string path = pathOf(what.first);
    writeText(path, what.second(report));
    written.push_back(path);
  }
  return written;
}

}  // namespace arl::ui
