#include "runtime/mpi_launch.h"

#include <unistd.h>

#include <cstdlib>
#include <string_view>

namespace arl {

std::string findMpirun() { return findOnPath("mpirun"); }

std::string findOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "";
  while (!dirs.empty()) {
    const size_t colon = dirs.find(':');
    std::string dir(dirs.substr(0, colon));
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string_view::npos) break;
    dirs.remove_prefix(colon + 1);
  }
  return {};
}

std::vector<std::string> mpirunCommand(const std::string& mpirun, int n, bool root,
                                       const std::vector<std::string>& extra,
                                       const std::vector<std::string>& worker) {
  std::vector<std::string> argv = {mpirun, "-np", std::to_string(n), "--oversubscribe",
                                   "--enable-recovery"};
  if (root) argv.emplace_back("--allow-run-as-root");
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.insert(argv.end(), worker.begin(), worker.end());
  return argv;
}

std::string shellLine(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& a : argv) {
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLM"
                                         "NOPQRSTUVWXYZ0123456789-_./:=,@+") == std::string::npos;
    std::string quoted = "'";
    for (char c : a) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    quoted += "'";
    line += (line.empty() ? "" : " ") + (plain ? a : quoted);
  }
  return line;
}

}  // namespace arl
