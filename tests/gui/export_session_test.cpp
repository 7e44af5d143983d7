// Exports of the sample recording (ui/export/export_session.h): images that decode and show
// the chart, SVGs that parse and name the series, PDFs whose text holds the axis titles, and
// data that reads back to the same figures.
#include <gtest/gtest.h>

#include <QColor>
#include <QFile>
#include <QImage>
#include <QProcess>
#include <QSvgRenderer>
#include <QTemporaryDir>
#include <QXmlStreamReader>
#include <fstream>
#include <set>
#include <sstream>

#include "charts_fixture.h"
#include "export/export_session.h"
#include "export/json.h"
#include "style/palette.h"

namespace arl::ui {
namespace {

using testing::samplePath;

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class ExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.isValid());
    report_ = readRecording(samplePath());
    charts_ = sessionCharts(report_);
  }
  std::string path(const char* name) const {
    return dir_.filePath(QString::fromUtf8(name)).toStdString();
  }

  QTemporaryDir dir_;
  BenchReport report_;
  SessionCharts charts_;
};

TEST_F(ExportTest, PngHasTheChosenSizeAndDrawsTheSeries) {
  const ImageOptions o{900, 600, 1.5};
  const std::string file = path("busbw.png");
  exportChart(charts_, ChartKind::BusbwVsSize, file, ExportFormat::Png, o);
  QImage img;
  ASSERT_TRUE(img.load(QString::fromStdString(file)));
  EXPECT_EQ(img.width(), 1350);
  EXPECT_EQ(img.height(), 900);
  const QColor ring = algorithmColor(QStringLiteral("ring"));
  int nonWhite = 0, ringLike = 0;
  for (int y = 0; y < img.height(); y += 2) {
    for (int x = 0; x < img.width(); x += 2) {
      const QColor c = img.pixelColor(x, y);
      if (c != QColor(Qt::white)) ++nonWhite;
      if (std::abs(c.red() - ring.red()) + std::abs(c.green() - ring.green()) +
              std::abs(c.blue() - ring.blue()) <
          30) {
        ++ringLike;
      }
    }
  }
  EXPECT_GT(nonWhite, 2000) << "the chart is blank";
  EXPECT_GT(ringLike, 50) << "no line in the ring's colour";
  EXPECT_EQ(img.pixelColor(2, 2), QColor(Qt::white)) << "exports are on white";
}

TEST_F(ExportTest, EveryChartExportsToANonBlankPng) {
  for (int i = 0; i < kChartKinds; ++i) {
    const auto k = static_cast<ChartKind>(i);
    const std::string file = path((chartSlug(k) + ".png").c_str());
    exportChart(charts_, k, file, ExportFormat::Png, {640, 400, 1});
    QImage img;
    ASSERT_TRUE(img.load(QString::fromStdString(file))) << chartSlug(k);
    std::set<QRgb> colours;
    for (int y = 0; y < img.height(); y += 3) {
      for (int x = 0; x < img.width(); x += 3) colours.insert(img.pixel(x, y));
    }
    EXPECT_GT(colours.size(), 8U) << chartSlug(k) << " looks blank";
  }
}

TEST_F(ExportTest, SvgParsesAndNamesTheSeries) {
  const std::string file = path("busbw.svg");
  exportChart(charts_, ChartKind::BusbwVsSize, file, ExportFormat::Svg);
  const QString name = QString::fromStdString(file);
  EXPECT_TRUE(QSvgRenderer(name).isValid());
  QFile f(name);
  ASSERT_TRUE(f.open(QIODevice::ReadOnly));
  QXmlStreamReader xml(&f);
  QString text;
  while (!xml.atEnd()) {
    if (xml.readNext() == QXmlStreamReader::Characters) text += xml.text();
  }
  EXPECT_FALSE(xml.hasError()) << xml.errorString().toStdString();
  ASSERT_FALSE(charts_.busbw.series.empty());
  for (const ChartSeries& s : charts_.busbw.series) {
    EXPECT_TRUE(text.contains(QString::fromStdString(s.name))) << s.name;
  }
  for (const char* s : {"busbw (GB/s", "message size"}) {
    EXPECT_TRUE(text.contains(QString::fromUtf8(s))) << s;
  }
}

TEST_F(ExportTest, PdfTextHoldsTheAxisTitles) {
  for (const ChartKind k : {ChartKind::BusbwVsSize, ChartKind::LinkHeatMap}) {
    const std::string file = path((chartSlug(k) + ".pdf").c_str());
    exportChart(charts_, k, file, ExportFormat::Pdf);
    QProcess p;
    p.start(QStringLiteral("pdftotext"), {QString::fromStdString(file), QStringLiteral("-")});
    ASSERT_TRUE(p.waitForFinished(30000));
    ASSERT_EQ(p.exitCode(), 0) << p.readAllStandardError().toStdString();
    const QString text = QString::fromUtf8(p.readAllStandardOutput());
    const QStringList expected =
        k == ChartKind::BusbwVsSize
            ? QStringList{QStringLiteral("message size"), QStringLiteral("busbw (GB/s")}
            : QStringList{QStringLiteral("receiver rank"), QStringLiteral("link busy")};
    for (const QString& e : expected)
      EXPECT_TRUE(text.contains(e)) << e.toStdString() << " in\n" << text.toStdString();
  }
}

TEST_F(ExportTest, CsvAndJsonReadBackToTheSameFigures) {
  ExportOptions o;
  o.directory = dir_.path().toStdString();
  o.formats = {ExportFormat::Csv, ExportFormat::Json};
  const std::vector<std::string> files = exportSession(report_, o);
  ASSERT_EQ(files.size(), 2U);
  const nlohmann::json j = parseJsonLimited(readAll(files[1]));
  ASSERT_EQ(j.at("results").size(), report_.rows.size());
  std::istringstream csv(readAll(files[0]));
  std::string line;
  std::getline(csv, line);
  std::vector<std::string> header;
  for (std::stringstream h(line); std::getline(h, line, ',');) header.push_back(line);
  const size_t busbwCol = std::find(header.begin(), header.end(), "busbw_gbps") - header.begin();
  const size_t sizeCol = std::find(header.begin(), header.end(), "size_bytes") - header.begin();
  ASSERT_LT(busbwCol, header.size());
  for (const SweepRow& row : report_.rows) {
    const size_t i = static_cast<size_t>(&row - report_.rows.data());
    EXPECT_EQ(j["results"][i]["busbw_gbps"].get<double>(), row.metrics.busbwGBps);
    EXPECT_EQ(j["results"][i]["size_bytes"].get<uint64_t>(), row.sizeBytes);
    ASSERT_TRUE(std::getline(csv, line));
    std::vector<std::string> f;
    for (std::stringstream r(line); std::getline(r, line, ',');) f.push_back(line);
    ASSERT_GT(f.size(), busbwCol);
    EXPECT_EQ(std::stod(f[busbwCol]), row.metrics.busbwGBps);
    EXPECT_EQ(std::stoull(f[sizeCol]), row.sizeBytes);
  }
}

TEST_F(ExportTest, SessionWritesEveryChartInEveryFormatAndTheRunData) {
  ExportOptions o;
  o.directory = path("out/nested");
  o.image = {640, 400, 1};
  const std::vector<std::string> files = exportSession(report_, o);
  EXPECT_EQ(files.size(), static_cast<size_t>(kChartKinds * 3 + 4));
  for (const std::string& f : files) EXPECT_GT(QFile(QString::fromStdString(f)).size(), 200) << f;
  const BenchReport back = readRecording(files.back());
  ASSERT_EQ(back.rows.size(), report_.rows.size());
  EXPECT_EQ(back.rows.back().result.events.size(), report_.rows.back().result.events.size());
  const nlohmann::json trace = parseJsonLimited(readAll(files[files.size() - 2]));
  EXPECT_GT(trace.at("traceEvents").size(), 100U);
}

TEST_F(ExportTest, BadOptionsAndUnwritablePlacesAreRefused) {
  writeTextFile(path("plain-file"), "x");
  ExportOptions o;
  o.directory = path("plain-file/sub");
  EXPECT_THROW(exportSession(report_, o), ExportError);
  o.directory = dir_.path().toStdString();
  o.image.width = 50;
  try {
    exportSession(report_, o);
    FAIL() << "a 50-pixel width was accepted";
  } catch (const ExportError& e) {
    EXPECT_NE(std::string(e.what()).find("width 50"), std::string::npos) << e.what();
  }
  EXPECT_THROW(exportChart(charts_, ChartKind::BusbwVsSize, path("x.csv"), ExportFormat::Csv),
               ExportError);
}

}  // namespace
}  // namespace arl::ui
