// allreduce-worker: joins a coordinator and runs the collectives it is sent. The work is in
// core (worker_runtime.h); this file parses the command line and maps errors to exit codes.
#include <malloc.h>

#include <cstdio>
#include <string>
#include <vector>

#include "base/errors.h"
#include "runtime/worker_runtime.h"

int main(int argc, char** argv) {
  // Keep freed memory in the process. ZeroMQ mallocs every received message; glibc would
  // serve chunks of 128 KiB and more with mmap and unmap them on free, so every iteration
  // would fault the same pages in again (docs/performance.md, "Page faults on receive").
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 64 * 1024 * 1024);
  const std::vector<std::string> args(argv + 1, argv + argc);
  arl::WorkerOptions opt;
  try {
    bool help = false;
    opt = arl::parseWorkerArgs(args, &help);
    if (help) {
      std::fputs(arl::workerUsage().c_str(), stdout);
      return 0;
    }
  } catch (const arl::ConfigError& e) {
    std::fprintf(stderr, "allreduce-worker: %s (see --help)\n", e.what());
    return 2;
  }
  return arl::runWorker(opt);
}
