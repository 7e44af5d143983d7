// `allreduce-lab replay FILE --screenshot PNG` as a user runs it (offscreen): every sample
// recording is drawn and the picture written; a damaged recording and a missing FILE are
// refused with exit code 2 and a message, never a crash.
#include <gtest/gtest.h>

#include <QDir>
#include <QFile>
#include <QImage>
#include <QProcess>
#include <QTemporaryDir>

namespace {

struct Ran {
  int code = -1;
  QString err;
};

Ran lab(const QStringList& args) {
  QProcess p;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
  p.setProcessEnvironment(env);
  p.start(QStringLiteral(ARL_LAB_BINARY), args);
  if (!p.waitForFinished(120000)) return {};
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
          QString::fromUtf8(p.readAllStandardError())};
}

TEST(ReplayCli, EverySampleIsDrawnAndPictured) {
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  const QDir samples(QStringLiteral(ARL_SOURCE_DIR "/resources/samples"));
  const QStringList files = samples.entryList({QStringLiteral("*.arlrec")}, QDir::Files);
  ASSERT_GE(files.size(), 6);
  for (const QString& f : files) {
    SCOPED_TRACE(f.toStdString());
    const QString shot = dir.filePath(f + QStringLiteral(".png"));
    const Ran r = lab({QStringLiteral("replay"), samples.filePath(f), QStringLiteral("--settle"),
                       QStringLiteral("100"), QStringLiteral("--screenshot"), shot});
    EXPECT_EQ(r.code, 0) << r.err.toStdString();
    const QImage img(shot);
    EXPECT_GT(img.width(), 600);
  }
}

TEST(ReplayCli, ADamagedRecordingIsRefusedWithTheReason) {
  QTemporaryDir dir;
  const QString bad = dir.filePath(QStringLiteral("bad.arlrec"));
  QFile out(bad);
  ASSERT_TRUE(out.open(QIODevice::WriteOnly));
  out.write(R"({"format":"allreduce-lab-recording","version":1,"config":)");
  out.close();
  const Ran r = lab({QStringLiteral("replay"), bad, QStringLiteral("--screenshot"),
                     dir.filePath(QStringLiteral("x.png"))});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.err.contains(QStringLiteral("bad.arlrec"))) << r.err.toStdString();
  EXPECT_FALSE(QFile::exists(dir.filePath(QStringLiteral("x.png"))));
  const Ran none = lab({QStringLiteral("replay")});
  EXPECT_EQ(none.code, 2);
  EXPECT_TRUE(none.err.contains(QStringLiteral("needs a recording"))) << none.err.toStdString();
}

}  // namespace
