// `allreduce-lab --autorun ... --screenshot FILE` as a user runs it (offscreen).
#include <gtest/gtest.h>

#include <QImage>
#include <QProcess>
#include <QSet>
#include <QTemporaryDir>

namespace {

QProcessEnvironment offscreen() {
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
  return env;
}

TEST(WindowAutorun, RunsOnceAndWritesANonBlankScreenshot) {
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  const QString shot = dir.filePath(QStringLiteral("ring.png"));
  QProcess lab;
  lab.setProcessEnvironment(offscreen());
  lab.start(QStringLiteral(ARL_LAB_BINARY),
            {QStringLiteral("--autorun"), QStringLiteral("--workers"), QStringLiteral("4"),
             QStringLiteral("--algo"), QStringLiteral("ring"), QStringLiteral("--size"),
             QStringLiteral("256K"), QStringLiteral("--settle"), QStringLiteral("200"),
             QStringLiteral("--screenshot"), shot});
  ASSERT_TRUE(lab.waitForFinished(180000));
  EXPECT_EQ(lab.exitStatus(), QProcess::NormalExit);
  EXPECT_EQ(lab.exitCode(), 0) << lab.readAllStandardError().toStdString();
  const QImage img(shot);
  ASSERT_FALSE(img.isNull());
  EXPECT_GT(img.width(), 600);
  EXPECT_GT(img.height(), 400);
  QSet<QRgb> colours;
  for (int y = 0; y < img.height(); y += 7) {
    for (int x = 0; x < img.width(); x += 7) colours.insert(img.pixel(x, y));
  }
  EXPECT_GT(colours.size(), 16);
}

// --screenshot alone: the window as it opens (the setup's plan), no run, no worker needed
// to finish.
TEST(WindowAutorun, AScreenshotAloneShowsTheWindowAsItOpens) {
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  const QString shot = dir.filePath(QStringLiteral("open.png"));
  QProcess lab;
  lab.setProcessEnvironment(offscreen());
  lab.start(
      QStringLiteral(ARL_LAB_BINARY),
      {QStringLiteral("gui"), QStringLiteral("--algo"), QStringLiteral("tree"),
       QStringLiteral("--settle"), QStringLiteral("200"), QStringLiteral("--screenshot"), shot});
  ASSERT_TRUE(lab.waitForFinished(60000));
  EXPECT_EQ(lab.exitCode(), 0) << lab.readAllStandardError().toStdString();
  const QImage img(shot);
  ASSERT_FALSE(img.isNull());
  EXPECT_GT(img.width(), 600);
  QSet<QRgb> colours;
  for (int y = 0; y < img.height(); y += 7) {
    for (int x = 0; x < img.width(); x += 7) colours.insert(img.pixel(x, y));
  }
  EXPECT_GT(colours.size(), 16);
  QProcess nowhere;
  nowhere.setProcessEnvironment(offscreen());
  nowhere.start(QStringLiteral(ARL_LAB_BINARY),
                {QStringLiteral("gui"), QStringLiteral("--screenshot"),
                 dir.filePath(QStringLiteral("no/such/dir/open.png"))});
  ASSERT_TRUE(nowhere.waitForFinished(30000));
  EXPECT_EQ(nowhere.exitCode(), 2);
  EXPECT_TRUE(nowhere.readAllStandardError().contains("does not exist"));
  QProcess charts;
  charts.setProcessEnvironment(offscreen());
  charts.start(QStringLiteral(ARL_LAB_BINARY),
               {QStringLiteral("gui"), QStringLiteral("--charts"), QStringLiteral("spread")});
  ASSERT_TRUE(charts.waitForFinished(30000));
  EXPECT_EQ(charts.exitCode(), 2);
  EXPECT_TRUE(charts.readAllStandardError().contains(
      "--charts spread: needs --screenshot, --autorun or a recording"));
}

TEST(WindowAutorun, BadArgumentsExitWithTwoAndAMessage) {
  QProcess lab;
  lab.setProcessEnvironment(offscreen());
  lab.start(QStringLiteral(ARL_LAB_BINARY),
            {QStringLiteral("--autorun"), QStringLiteral("--algo"), QStringLiteral("nope")});
  ASSERT_TRUE(lab.waitForFinished(30000));
  EXPECT_EQ(lab.exitCode(), 2);
  EXPECT_TRUE(lab.readAllStandardError().contains("--algo nope"));
  QProcess median;
  median.setProcessEnvironment(offscreen());
  median.start(QStringLiteral(ARL_LAB_BINARY),
               {QStringLiteral("--autorun"), QStringLiteral("--bandwidth"), QStringLiteral("p99")});
  ASSERT_TRUE(median.waitForFinished(30000));
  EXPECT_EQ(median.exitCode(), 2);
  EXPECT_TRUE(median.readAllStandardError().contains("--bandwidth p99: expected mean or median"));
  QProcess window;
  window.setProcessEnvironment(offscreen());
  window.start(QStringLiteral(ARL_LAB_BINARY),
               {QStringLiteral("--autorun"), QStringLiteral("--window"), QStringLiteral("0")});
  ASSERT_TRUE(window.waitForFinished(30000));
  EXPECT_EQ(window.exitCode(), 2);
  EXPECT_TRUE(window.readAllStandardError().contains("--window 0: must be in 1..1024"));
}

}  // namespace
