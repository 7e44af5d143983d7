// allreduce-worker: joins a coordinator and runs the collectives it is sent. The work is in
// core (worker_runtime.h); this file parses the command line and maps errors to exit codes.
#include <malloc.h>

#include <cstdio>

#include "base/errors.h"
#include "worker_options.h"
#if ARL_WITH_GLOO
#include "engines/gloo/gloo_library.h"
#endif
#if ARL_WITH_NCCL
#include "gpu/nccl_loader.h"
#include "gpu/nccl_register.h"
#endif
#if ARL_WITH_MPI
#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>

#include "engines/mpi/mpi_engine.h"
#endif

namespace {

// A worker on --backend nccl says which NCCL it opened, and whether NCCL's profiler will call
// the lab's plugin. Whether there is an NCCL the backend can use was asked with the device
// (gpu/gpu_backends.h), which refused the backend otherwise.
void reportNccl([[maybe_unused]] const arl::WorkerOptions& opt) {
#if ARL_WITH_NCCL
  if (opt.backend != "nccl") return;
  if (const arl::gpu::NcclLoaded* nccl = arl::gpu::ncclLibrary()) {
    std::fprintf(stderr, "allreduce-worker: %s\n", arl::gpu::describeNccl(*nccl).c_str());
  }
#endif
}

// A worker that mpirun started joins MPI's world before anything else (MPI_Init wants to be
// early, on the main thread), and any worker of backend mpi must be such a one.
void startMpiIfLaunched() {
#if ARL_WITH_MPI
  if (arl::mpi::launchedByMpirun()) arl::mpi::startMpi();
#endif
}

// Under mpirun, the worker watches mpirun, not the lab: mpirun is its parent, and it dies with
// it (the lab starts mpirun as a child that dies with the lab).
void checkMpiLaunch([[maybe_unused]] arl::WorkerOptions& opt) {
#if ARL_WITH_MPI
  if (arl::mpi::launchedByMpirun()) {
    opt.watchPid = static_cast<int64_t>(::getppid());
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    return;
  }
#endif
  if (opt.backend == "mpi") {
    throw arl::ConfigError(
        "--backend mpi: start the worker with mpirun (allreduce-lab does so itself for its "
        "local workers)");
  }
}

int finish(int rc) {
#if ARL_WITH_MPI
  // A worker that leaves with an error leaves alone: MPI_Finalize could wait for the others.
  arl::mpi::stopMpi(rc == 0);
#endif
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  // Keep freed memory in the process. ZeroMQ mallocs every received message; glibc would
  // serve chunks of 128 KiB and more with mmap and unmap them on free, so every iteration
  // would fault the same pages in again (docs/performance.md, "Page faults on receive").
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 64 * 1024 * 1024);
  // One arena. Each run has a thread of its own; glibc gives threads arenas of their own (up
  // to 8 per core), and each kept the high-water mark of the runs it served: a worker's RSS
  // climbed in steps to 45-50 MiB over a 1,000-configuration soak, and stayed at 3 MiB with one
  // arena (docs/reliability.md, "Soak"), at the same bench times within the noise.
  mallopt(M_ARENA_MAX, 1);
#if ARL_WITH_NCCL
  arl::gpu::registerNccl();
#endif
#if ARL_WITH_GLOO
  arl::gloo_engine::registerGloo();
#endif
  CLI::App app("", "allreduce-worker");
  arl::worker::WorkerArgs args;
  arl::worker::declareOptions(app, args);
  arl::WorkerOptions opt;
  try {
    startMpiIfLaunched();
    app.parse(argc, argv);
    arl::worker::registerGpuBackends(args);
    opt = arl::worker::toOptions(args);
    checkMpiLaunch(opt);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return finish(0);
  } catch (const CLI::ParseError& e) {
    // CLI11 exits with its own codes (105 and up); bad arguments exit with 2 here.
    std::fprintf(stderr, "allreduce-worker: %s (see --help)\n", e.what());
    return finish(2);
  } catch (const arl::ConfigError& e) {
    std::fprintf(stderr, "allreduce-worker: %s (see --help)\n", e.what());
    return finish(2);
  }
  reportNccl(opt);
  return finish(arl::runWorker(opt));
}
