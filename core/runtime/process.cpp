#include "runtime/process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>
#include <thread>

#include "base/clock.h"

namespace arl {

std::string ExitStatus::describe() const {
  if (!signaled) return "exited with code " + std::to_string(code);
  std::string s = "killed by signal " + std::to_string(signal);
  if (const char* abbrev = sigabbrev_np(signal)) s += std::string(" (SIG") + abbrev + ")";
  return s;
}

namespace {

ExitStatus fromWaitStatus(int st) {
  ExitStatus e;
  if (WIFSIGNALED(st)) {
    e.signaled = true;
    e.signal = WTERMSIG(st);
  } else if (WIFEXITED(st)) {
    e.code = WEXITSTATUS(st);
  }
  return e;
}

bool isExecutableFile(const std::string& p) {
  struct stat st {};
  return !p.empty() && ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         ::access(p.c_str(), X_OK) == 0;
}

}  // namespace

int64_t spawnChild(const std::vector<std::string>& argv) {
  if (argv.empty()) throw std::invalid_argument("spawnChild: empty command line");
  // Everything the child touches is prepared before fork: between fork and exec only
  // async-signal-safe calls are allowed in a multi-threaded parent.
  std::vector<char*> cargv;
  cargv.reserve(argv.size() + 1);
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) throw std::system_error(errno, std::generic_category(), "fork");
  if (pid == 0) {
    // SIGTERM, not SIGKILL: a worker's handler first takes its shared-memory segments' names
    // out of /dev/shm (worker_runtime.cpp), then ends the process as SIGTERM does.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    // The parent may have died before prctl took effect: then nobody would kill us.
    if (::getppid() != parent) ::_exit(127);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) {
      ::dup2(devnull, 0);
      if (devnull > 2) ::close(devnull);
    }
    // ZeroMQ's descriptors are close-on-exec already; this also covers any other library's.
    ::close_range(3, UINT_MAX, 0);
    // Unblock every signal: the parent's threads may have blocked some.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  return pid;
}

std::optional<ExitStatus> tryReap(int64_t pid) {
  int st = 0;
  const pid_t r = ::waitpid(static_cast<pid_t>(pid), &st, WNOHANG);
  if (r == 0) return std::nullopt;
  if (r < 0) {
    if (errno == EINTR) return std::nullopt;
    ExitStatus e;
    e.code = -1;
    return e;
  }
  return fromWaitStatus(st);
}

std::optional<ExitStatus> waitFor(int64_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  for (;;) {
    if (auto st = tryReap(pid)) return st;
    if (SteadyClock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

std::optional<ExitStatus> killAndReap(int64_t pid, std::chrono::milliseconds timeout) {
  if (auto st = tryReap(pid)) return st;
  // SIGKILL also ends a stopped process; SIGCONT is not needed.
  ::kill(static_cast<pid_t>(pid), SIGKILL);
  return waitFor(pid, timeout);
}

bool processAlive(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return false;
  // The state follows the parenthesised command name, which may itself contain ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  const char state = line[close + 2];
  return state != 'Z' && state != 'X';
}

std::string hostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

std::string localAddressToward(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || res == nullptr) return {};
  std::string out;
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    if (::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
      sockaddr_in local{};
      socklen_t len = sizeof local;
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
        char buf[INET_ADDRSTRLEN] = {};
        if (::inet_ntop(AF_INET, &local.sin_addr, buf, sizeof buf)) out = buf;
      }
    }
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return out;
}

std::string hostAddress() {
  // Any global address will do to find the default route; no packet is sent.
  std::string a = localAddressToward("8.8.8.8");
  if (!a.empty() && a.rfind("127.", 0) != 0 && a != "0.0.0.0") return a;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(hostName().c_str(), nullptr, &hints, &res) != 0) return {};
  std::string out;
  for (addrinfo* ai = res; ai != nullptr && out.empty(); ai = ai->ai_next) {
    char buf[INET_ADDRSTRLEN] = {};
    const auto* sin = reinterpret_cast<const sockaddr_in*>(ai->ai_addr);
    if (::inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof buf) &&
        std::string(buf).rfind("127.", 0) != 0) {
      out = buf;
    }
  }
  ::freeaddrinfo(res);
  return out;
}

std::string selfExeDir() {
  char buf[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  const auto slash = p.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : p.substr(0, slash));
}

std::string findWorkerBinary(const std::string& explicitPath) {
  if (!explicitPath.empty()) return isExecutableFile(explicitPath) ? explicitPath : std::string();
  const std::string dir = selfExeDir();
  for (const std::string& candidate :
       {dir + "/../workers/allreduce-worker", dir + "/allreduce-worker"}) {
    if (isExecutableFile(candidate)) return candidate;
  }
  return {};
}

}  // namespace arl
