// `allreduce-lab export`, run as the user runs it, with no display.
#include <gtest/gtest.h>

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>

#include "charts/chart_data.h"
#include "charts_fixture.h"
#include "export/export.h"

namespace arl::ui {
namespace {

struct Result {
  int code = -1;
  QString out, err;
};

// Runs the lab with no display and no platform chosen, as on a headless server.
Result lab(const QStringList& args) {
  QProcess p;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  for (const char* v : {"DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"})
    env.remove(QString::fromUtf8(v));
  p.setProcessEnvironment(env);
  p.start(QStringLiteral(ARL_LAB_BINARY), args);
  if (!p.waitForFinished(120000)) return {};
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
          QString::fromUtf8(p.readAllStandardOutput()),
          QString::fromUtf8(p.readAllStandardError())};
}

QString sample() { return QString::fromStdString(testing::samplePath()); }

TEST(ExportCommand, WritesEveryChartInEveryFormatWithoutADisplay) {
  QTemporaryDir dir;
  const QString out = dir.filePath(QStringLiteral("d"));
  const Result r = lab({QStringLiteral("export"), sample(), QStringLiteral("--out"), out,
                        QStringLiteral("--png"), QStringLiteral("--svg"), QStringLiteral("--pdf"),
                        QStringLiteral("--csv"), QStringLiteral("--width"), QStringLiteral("800"),
                        QStringLiteral("--height"), QStringLiteral("500"),
                        QStringLiteral("--scale"), QStringLiteral("1")});
  ASSERT_EQ(r.code, 0) << r.err.toStdString();
  const QStringList printed = r.out.split(QLatin1Char('\n'), Qt::SkipEmptyParts);
  EXPECT_EQ(printed.size(), kChartKinds * 3 + 1);
  for (int i = 0; i < kChartKinds; ++i) {
    for (const char* ext : {".png", ".svg", ".pdf"}) {
      const QString f = QDir(out).filePath(
          QString::fromStdString(chartSlug(static_cast<ChartKind>(i))) + QString::fromUtf8(ext));
      EXPECT_TRUE(printed.contains(f)) << f.toStdString();
      EXPECT_GT(QFileInfo(f).size(), 500) << f.toStdString();
    }
  }
  EXPECT_TRUE(QFileInfo(QDir(out).filePath(QStringLiteral("results.csv"))).isFile());
  EXPECT_FALSE(QFileInfo(QDir(out).filePath(QStringLiteral("results.json"))).exists())
      << "only the formats asked for";
}

// --bandwidth median: the bandwidth charts measured by the median iteration, which their
// note says (the SVG keeps the note as text); by default, the mean.
TEST(ExportCommand, BandwidthMedianChartsSayTheyAreOfTheMedianIteration) {
  QTemporaryDir dir;
  const auto busbwSvg = [&](const QString& sub, const QStringList& extra) {
    const QString out = dir.filePath(sub);
    const Result r = lab(QStringList{QStringLiteral("export"), sample(), QStringLiteral("--out"),
                                     out, QStringLiteral("--svg")} +
                         extra);
    EXPECT_EQ(r.code, 0) << r.err.toStdString();
    QFile f(QDir(out).filePath(QStringLiteral("busbw-vs-size.svg")));
    return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString();
  };
  const QString median =
      busbwSvg(QStringLiteral("median"), {QStringLiteral("--bandwidth"), QStringLiteral("median")});
  EXPECT_TRUE(median.contains(QStringLiteral("median iteration, p50")));
  EXPECT_FALSE(median.contains(QStringLiteral("mean over timed iterations")));
  const QString mean = busbwSvg(QStringLiteral("mean"), {});
  EXPECT_TRUE(mean.contains(QStringLiteral("mean over timed iterations")));
}

TEST(ExportCommand, NoFormatFlagWritesAllSix) {
  QTemporaryDir dir;
  const Result r =
      lab({QStringLiteral("export"), sample(), QStringLiteral("--out"), dir.path(),
           QStringLiteral("--width"), QStringLiteral("400"), QStringLiteral("--height"),
           QStringLiteral("300"), QStringLiteral("--scale"), QStringLiteral("1")});
  ASSERT_EQ(r.code, 0) << r.err.toStdString();
  EXPECT_EQ(r.out.split(QLatin1Char('\n'), Qt::SkipEmptyParts).size(), kChartKinds * 3 + 3);
  for (const char* f : {"results.csv", "results.json", "trace.json"}) {
    EXPECT_TRUE(QFileInfo(dir.filePath(QString::fromUtf8(f))).isFile()) << f;
  }
}

TEST(ExportCommand, RefusesBadInputWithAMessageNamingIt) {
  QTemporaryDir dir;
  const QString missing = dir.filePath(QStringLiteral("missing.arlrec"));
  Result r = lab({QStringLiteral("export"), missing, QStringLiteral("--out"), dir.path()});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.err.contains(missing)) << r.err.toStdString();

  const QString notRecording = dir.filePath(QStringLiteral("notes.arlrec"));
  writeTextFile(notRecording.toStdString(), "{\"format\": \"something else\"}");
  r = lab({QStringLiteral("export"), notRecording, QStringLiteral("--out"), dir.path()});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.err.contains(QStringLiteral("format"))) << r.err.toStdString();

  const QString file = dir.filePath(QStringLiteral("plain"));
  writeTextFile(file.toStdString(), "x");
  r = lab({QStringLiteral("export"), sample(), QStringLiteral("--out"), file + QStringLiteral("/d"),
           QStringLiteral("--csv")});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(r.err.contains(file)) << r.err.toStdString();

  r = lab({QStringLiteral("export"), sample(), QStringLiteral("--out"), dir.path(),
           QStringLiteral("--scale"), QStringLiteral("20")});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.err.contains(QStringLiteral("--scale 20"))) << r.err.toStdString();

  r = lab({QStringLiteral("export"), sample(), QStringLiteral("--out"), dir.path(),
           QStringLiteral("--bandwidth"), QStringLiteral("p99")});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.err.contains(QStringLiteral("--bandwidth p99: expected mean or median")))
      << r.err.toStdString();

  r = lab({QStringLiteral("export"), sample()});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.err.contains(QStringLiteral("--out"))) << r.err.toStdString();
}

}  // namespace
}  // namespace arl::ui
