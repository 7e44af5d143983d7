// allreduce-worker: joins a coordinator and runs the collectives it is sent. The work is in
// core (worker_runtime.h); this file parses the command line and maps errors to exit codes.
#include <cstdio>
#include <string>
#include <vector>

#include "arl/errors.h"
#include "arl/worker_runtime.h"

int main(int argc, char** argv) {
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
