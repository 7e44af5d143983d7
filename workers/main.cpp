// allreduce-worker: joins a coordinator and runs the collectives it is sent. The work is in
// core (worker_runtime.h); this file parses the command line and maps errors to exit codes.
#include <malloc.h>

#include <cstdio>

#include "base/errors.h"
#include "worker_options.h"
#if ARL_WITH_NCCL
#include "gpu/nccl_loader.h"
#include "gpu/nccl_register.h"
#endif

namespace {

// A worker on --backend nccl says which NCCL it opened (and whether NCCL's profiler will call
// the lab's plugin), or, when that NCCL lacks a function the backend calls, refuses in one
// line and exits 2 before it joins. Whether NCCL loads at all was asked with the device.
int reportNccl([[maybe_unused]] const arl::WorkerOptions& opt) {
#if ARL_WITH_NCCL
  if (opt.backend != "nccl") return 0;
  if (auto why = arl::gpu::ncclApiProblem()) {
    std::fprintf(stderr, "allreduce-worker: --backend nccl: %s\n", why->c_str());
    return 2;
  }
  std::fprintf(stderr, "allreduce-worker: %s\n",
               arl::gpu::describeNccl(*arl::gpu::ncclLibrary()).c_str());
#endif
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Keep freed memory in the process. ZeroMQ mallocs every received message; glibc would
  // serve chunks of 128 KiB and more with mmap and unmap them on free, so every iteration
  // would fault the same pages in again (docs/performance.md, "Page faults on receive").
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 64 * 1024 * 1024);
#if ARL_WITH_NCCL
  arl::gpu::registerNccl();
#endif
  CLI::App app("", "allreduce-worker");
  arl::worker::WorkerArgs args;
  arl::worker::declareOptions(app, args);
  arl::WorkerOptions opt;
  try {
    app.parse(argc, argv);
    arl::worker::registerGpuBackends(args);
    opt = arl::worker::toOptions(args);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    // CLI11 exits with its own codes (105 and up); bad arguments exit with 2 here.
    std::fprintf(stderr, "allreduce-worker: %s (see --help)\n", e.what());
    return 2;
  } catch (const arl::ConfigError& e) {
    std::fprintf(stderr, "allreduce-worker: %s (see --help)\n", e.what());
    return 2;
  }
  if (const int rc = reportNccl(opt)) return rc;
  return arl::runWorker(opt);
}
