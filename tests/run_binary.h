// Running one of the lab's programs from a test as a user would, through the shell, with its
// exit status and everything it printed on stdout and stderr.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace arl::testutil {

struct Result {
  int rc = -1;  // the exit status; -1: killed by a signal
  std::string out;
  std::string err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs `binary` with `args` (already shell-safe words), capturing stdout and stderr.
inline Result runBinary(const std::string& binary, const std::string& args) {
  static std::atomic<int> calls{0};
  const std::string base =
      ::testing::TempDir() + "run_" + std::to_string(::getpid()) + "_" + std::to_string(calls++);
  const std::string out = base + ".out", err = base + ".err";
  const std::string cmd = "'" + binary + "' " + args + " >'" + out + "' 2>'" + err + "'";
  const int status = std::system(cmd.c_str());
  Result r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  std::remove(out.c_str());
  std::remove(err.c_str());
  return r;
}

}  // namespace arl::testutil
