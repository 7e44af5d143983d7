// Outside files are read with a bound and only when regular; results are written whole or
// not at all (base/input_file.h).
#include "base/input_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

namespace arl {
namespace {

namespace fs = std::filesystem;

class InputFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("arl-input-file-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string refusal(const std::string& p, size_t limit = 1 << 20) const {
    try {
      readInputFile(p, limit);
    } catch (const InputFileError& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(InputFile, ReadsARegularFileWhole) {
  std::ofstream(path("a.txt")) << "hello\nworld";
  EXPECT_EQ(readInputFile(path("a.txt"), 11), "hello\nworld");
  EXPECT_EQ(nonRegularKind(path("a.txt")), "");
}

TEST_F(InputFile, RefusesWhatIsNotARegularFileNamingWhatItIs) {
  EXPECT_EQ(refusal(dir_.string()), dir_.string() + " is a folder, not a regular file");
  EXPECT_EQ(refusal("/dev/zero"), "/dev/zero is a character device, not a regular file");
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  // A FIFO with no writer would block a plain open() forever.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(refusal(path("fifo")), path("fifo") + " is a FIFO, not a regular file");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(nonRegularKind(path("fifo")), "a FIFO");
  EXPECT_EQ(nonRegularKind(path("none")), "missing");
  EXPECT_NE(refusal(path("none")).find(path("none") + ": cannot be opened: No such file"),
            std::string::npos);
}

TEST_F(InputFile, RefusesAFileOverTheLimitByWhatIsRead) {
  std::ofstream(path("big")) << std::string(3000, 'x');
  EXPECT_EQ(refusal(path("big"), 2048), path("big") + " is over the 2 KiB limit");
  EXPECT_EQ(readInputFile(path("big"), 3000).size(), 3000u);
  EXPECT_EQ(byteLimitText(size_t{64} << 20), "64 MiB");
  EXPECT_EQ(byteLimitText(100), "100 bytes");
}

TEST_F(InputFile, WritesWholeAndReplacesAnOldFile) {
  writeFileAtomically(path("out.json"), "first");
  writeFileAtomically(path("out.json"), "second, longer");
  EXPECT_EQ(readInputFile(path("out.json"), 100), "second, longer");
  struct stat st {};
  ASSERT_EQ(::stat(path("out.json").c_str(), &st), 0);
  EXPECT_NE(st.st_mode & S_IRUSR, 0u);
  // Nothing but the file itself is left in the folder.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST_F(InputFile, AFailedWriteLeavesTheOldFileAndNoTemporary) {
  writeFileAtomically(path("keep"), "old");
  fs::create_directories(dir_ / "folder" / "inner");
  // rename() of a file over a non-empty folder fails after the data is written.
  EXPECT_THROW(writeFileAtomically(path("folder"), "new"), std::runtime_error);
  EXPECT_THROW(writeFileAtomically(path("missing/out"), "new"), std::runtime_error);
  EXPECT_EQ(readInputFile(path("keep"), 10), "old");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 2);  // keep, folder
}

}  // namespace
}  // namespace arl
