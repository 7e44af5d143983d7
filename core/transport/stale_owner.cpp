#include "transport/stale_owner.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <optional>

namespace arl {
namespace {

// Reads a run of decimal digits from `s` at `pos`; nullopt when empty or too long.
std::optional<uint64_t> readNumber(std::string_view s, size_t& pos) {
  uint64_t v = 0;
  const size_t start = pos;
  while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
    if (pos - start >= 19) return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(s[pos] - '0');
    ++pos;
  }
  if (pos == start) return std::nullopt;
  return v;
}

}  // namespace

uint64_t pidNamespaceId() {
  struct stat st {};
  if (::stat("/proc/self/ns/pid", &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

bool processGone(int64_t pid) {
  return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

std::string ownerTag() {
  return std::to_string(pidNamespaceId()) + "-" + std::to_string(::getpid());
}

bool ownerTagGone(std::string_view s) {
  size_t pos = 0;
  const auto ns = readNumber(s, pos);
  if (!ns || pos >= s.size() || s[pos] != '-') return false;
  ++pos;
  const auto pid = readNumber(s, pos);
  if (!pid || *pid == 0 || *pid > 0x3fffffff) return false;
  if (pos < s.size() && s[pos] != '-') return false;
  // Without /proc (ns 0) no namespace can be told apart: nothing is swept.
  if (*ns == 0 || *ns != pidNamespaceId()) return false;
  return processGone(static_cast<int64_t>(*pid));
}

}  // namespace arl
