// The lab's key files (runtime/key_store.h): modes, no silent overwrite, the allow-list's
// format, and the lines that say what is wrong.
#include "runtime/key_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/errors.h"

namespace arl {
namespace {

namespace fs = std::filesystem;

std::string freshDir(const std::string& name) {
  const fs::path p =
      fs::path(::testing::TempDir()) / ("keys_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

mode_t modeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

void writeText(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(KeyStore, WritesThePairWithTheSecretForItsOwnerAlone) {
  const std::string dir = freshDir("modes") + "/nested";
  const CurveKeyPair keys = makeCurveKeyPair();
  const KeyFiles f = writeKeyPair(dir, keys, false);
  EXPECT_EQ(modeOf(dir), 0700u);
  EXPECT_EQ(modeOf(f.secretPath), 0600u);
  EXPECT_EQ(modeOf(f.publicPath), 0644u);
  const auto loaded = loadKeyPair(dir);
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->secretKey, keys.secretKey);
  EXPECT_EQ(loaded->publicKey, keys.publicKey);
  EXPECT_EQ(readServerKey(f.publicPath), keys.publicKey);
  EXPECT_EQ(readServerKey(keys.publicKey), keys.publicKey);
}

// A path of 40 characters, all of them in Z85's alphabet, is still a path when the file is
// there (scripts/hosts' temporary folders made such paths).
TEST(KeyStore, AServerKeyFileWhosePathLooksLikeAKeyIsRead) {
  const CurveKeyPair keys = makeCurveKeyPair();
  std::string path = "/tmp/arl-z85-" + std::to_string(::getpid()) + "-";
  path += std::string(40 - path.size(), 'k');
  writeText(path, "# a key\n" + keys.publicKey + "\n");
  EXPECT_EQ(readServerKey(path), keys.publicKey);
  std::remove(path.c_str());
}

TEST(KeyStore, RefusesToReplaceAPairUnlessForced) {
  const std::string dir = freshDir("force");
  const CurveKeyPair first = makeCurveKeyPair();
  writeKeyPair(dir, first, false);
  try {
    writeKeyPair(dir, makeCurveKeyPair(), false);
    FAIL() << "replaced without --force";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("give --force"), std::string::npos) << e.what();
  }
  EXPECT_EQ(loadKeyPair(dir)->publicKey, first.publicKey);
  const CurveKeyPair second = makeCurveKeyPair();
  writeKeyPair(dir, second, true);
  EXPECT_EQ(loadKeyPair(dir)->publicKey, second.publicKey);
  EXPECT_EQ(modeOf(dir + "/" + kSecretKeyFile), 0600u);
}

TEST(KeyStore, ASecretOthersMayReadIsRefused) {
  const std::string dir = freshDir("open");
  writeKeyPair(dir, makeCurveKeyPair(), false);
  ASSERT_EQ(::chmod((dir + "/" + kSecretKeyFile).c_str(), 0644), 0);
  EXPECT_THROW(loadKeyPair(dir), ConfigError);
  EXPECT_FALSE(loadKeyPair(freshDir("none")).has_value());
}

TEST(KeyStore, AllowListTakesOneKeyALineWithComments) {
  const std::string dir = freshDir("allow");
  std::filesystem::create_directories(dir);
  const CurveKeyPair a = makeCurveKeyPair(), b = makeCurveKeyPair();
  writeText(dir + "/allowed",
            "# the classroom\n\n" + a.publicKey + "  # alice\n  " + b.publicKey + "\n");
  const auto keys = loadAllowList(dir + "/allowed");
  ASSERT_TRUE(keys);
  EXPECT_EQ(keys->size(), 2u);
  EXPECT_TRUE(keys->count(a.publicKey));
  EXPECT_TRUE(keys->count(b.publicKey));
  EXPECT_FALSE(loadAllowList(dir + "/missing").has_value());
  writeText(dir + "/bad", a.publicKey + "\nnot-a-key\n");
  try {
    loadAllowList(dir + "/bad");
    FAIL() << "a bad line was taken";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("bad:2: not a Z85 CURVE public key"), std::string::npos)
        << e.what();
  }
}

TEST(KeyStore, ConfigFolderFollowsXdg) {
  const char* old = std::getenv("XDG_CONFIG_HOME");
  const std::string saved = old ? old : "";
  ::setenv("XDG_CONFIG_HOME", "/somewhere", 1);
  EXPECT_EQ(configFolder(), "/somewhere/allreduce-lab");
  EXPECT_EQ(keysFolder("/mine"), "/mine");
  if (old) {
    ::setenv("XDG_CONFIG_HOME", saved.c_str(), 1);
  } else {
    ::unsetenv("XDG_CONFIG_HOME");
  }
}

TEST(KeyStore, AServerKeyThatIsNeitherKeyNorFileIsNamed) {
  try {
    readServerKey("/no/such/file");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("neither a Z85 key"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace arl
