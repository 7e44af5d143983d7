// The worker's log lines (runtime/worker_log.h).
#include "runtime/worker_log.h"

#include <cstdio>
#include <utility>

namespace arl {

namespace {
std::string g_logPrefix = "allreduce-worker";
}  // namespace

void workerLog(const std::string& text) {
  const std::string line = g_logPrefix + ": " + text + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

void setWorkerLogPrefix(std::string prefix) { g_logPrefix = std::move(prefix); }

}  // namespace arl
