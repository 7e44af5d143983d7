// The desktop integration resources/ installs: the .desktop file, the AppStream metainfo and the
// MIME type pass the freedesktop validators (desktop-file-utils, appstream; scripts/common.sh
// installs both), and they name one another consistently.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../run_binary.h"

namespace arl {
namespace {

const std::string kDesktop = std::string(ARL_SOURCE_DIR) + "/resources/desktop/";
const std::string kId = "org.allreducelab.AllreduceLab";

bool have(const std::string& tool) {
  return std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) == 0;
}

TEST(DesktopFiles, TheDesktopEntryValidates) {
  if (!have("desktop-file-validate")) GTEST_SKIP() << "desktop-file-validate is not installed";
  const auto r = testutil::runBinary("desktop-file-validate", "'" + kDesktop + kId + ".desktop'");
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("error"), std::string::npos) << r.out;
}

TEST(DesktopFiles, TheMetainfoValidates) {
  if (!have("appstreamcli")) GTEST_SKIP() << "appstreamcli is not installed";
  const auto r = testutil::runBinary("appstreamcli",
                                     "validate --no-net '" + kDesktop + kId + ".metainfo.xml'");
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
}

TEST(DesktopFiles, TheyNameOneAnother) {
  const std::string desktop = testutil::slurp(kDesktop + kId + ".desktop");
  const std::string meta = testutil::slurp(kDesktop + kId + ".metainfo.xml");
  const std::string mime = testutil::slurp(kDesktop + kId + ".mime.xml");
  EXPECT_NE(desktop.find("Icon=" + kId + "\n"), std::string::npos);
  EXPECT_NE(desktop.find("MimeType=application/x-allreduce-lab-recording;"), std::string::npos);
  EXPECT_NE(meta.find("<launchable type=\"desktop-id\">" + kId + ".desktop</launchable>"),
            std::string::npos);
  EXPECT_NE(mime.find("type=\"application/x-allreduce-lab-recording\""), std::string::npos);
  EXPECT_NE(mime.find("<glob pattern=\"*.arlrec\"/>"), std::string::npos);
}

// `cmake --install` of the build puts the programs, the desktop integration, the manual pages,
// the lessons and the samples where a desktop and `lesson` look for them.
TEST(DesktopFiles, TheInstallPutsEverythingInPlace) {
  const std::string prefix = ::testing::TempDir() + "arl_install_" + std::to_string(::getpid());
  // Removed however the test ends (an ASSERT returns early).
  struct Removed {
    std::string path;
    ~Removed() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  } removed{prefix};
  const auto r = testutil::runBinary(
      ARL_CMAKE, "--install '" + std::string(ARL_BINARY_DIR) + "' --prefix '" + prefix + "'");
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  for (const std::string& f : std::vector<std::string>{
           "bin/allreduce-lab", "bin/allreduce-worker", "share/applications/" + kId + ".desktop",
           "share/metainfo/" + kId + ".metainfo.xml", "share/mime/packages/" + kId + ".xml",
           "share/icons/hicolor/scalable/apps/" + kId + ".svg",
           "share/icons/hicolor/48x48/apps/" + kId + ".png",
           "share/icons/hicolor/256x256/apps/" + kId + ".png", "share/man/man1/allreduce-lab.1.gz",
           "share/man/man1/allreduce-worker.1.gz", "share/allreduce-lab/lessons/slow-link.json",
           "share/allreduce-lab/samples/tree-8.arlrec", "share/doc/allreduce-lab/copyright"}) {
    EXPECT_TRUE(std::ifstream(prefix + "/" + f).good()) << f << " was not installed";
  }
}

}  // namespace
}  // namespace arl
