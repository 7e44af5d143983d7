#include "base/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace arl {

namespace {

std::string kindOf(mode_t mode) {
  if (S_ISREG(mode)) return "";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string errnoText(int e) { return std::strerror(e); }

// Closes the descriptor on every path out.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string byteLimitText(size_t bytes) {
  if (bytes >= (size_t{1} << 20) && bytes % (size_t{1} << 20) == 0) {
    return std::to_string(bytes >> 20) + " MiB";
  }
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

std::string nonRegularKind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "missing";
  return kindOf(st.st_mode);
}

std::string readInputFile(const std::string& path, size_t maxBytes) {
  // O_NONBLOCK: opening a FIFO without a writer must not block before fstat can say what it
  // is; regular files ignore the flag.
  Fd f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (f.fd < 0) throw InputFileError(path + ": cannot be opened: " + errnoText(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw InputFileError(path + ": " + errnoText(errno));
  if (const std::string kind = kindOf(st.st_mode); !kind.empty()) {
    throw InputFileError(path + " is " + kind + ", not a regular file");
  }
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InputFileError(path + ": read failed: " + errnoText(errno));
    }
    if (out.size() + static_cast<size_t>(n) > maxBytes) {
      throw InputFileError(path + " is over the " + byteLimitText(maxBytes) + " limit");
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

void writeFileAtomically(const std::string& path, std::string_view text) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmp = (dir / ("." + target.filename().string() + ".XXXXXX")).string();
  Fd f{::mkstemp(tmp.data())};
  if (f.fd < 0) throw std::runtime_error("cannot write '" + path + "': " + errnoText(errno));
  auto fail = [&](const std::string& what) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error("writing '" + path + "' failed (" + what + ": " + errnoText(e) +
                             "); the file is unchanged");
  };
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(f.fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write");
    done += static_cast<size_t>(n);
  }
  // mkstemp makes the file 0600; a result file is as readable as any other the user writes.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(f.fd, 0666 & ~mask) != 0) fail("chmod");
  if (::fsync(f.fd) != 0) fail("fsync");
  if (::close(f.fd) != 0) {
    f.fd = -1;
    fail("close");
  }
  f.fd = -1;
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("rename");
}

}  // namespace arl
