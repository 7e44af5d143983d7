// NCCL as a collective library (exec/collective_library.h): one rank's communicator for one
// run, made from the unique id rank 0 passed through the coordinator, with NCCL_ALGO set to
// the run's algorithm (Ring or Tree) before it is made, and the run's collective issued on a
// stream of its own. The communicator is non-blocking (ncclConfig_t::blocking = 0), so that
// joining and every collective are waited for by polling, with the run's abort looked at
// between polls: an aborted run ends the communicator with ncclCommAbort instead of waiting
// forever for a peer that is gone (NCCL's documentation, "Fault tolerance" and "Non-blocking
// communicators").
//
// NCCL's own events: with telemetry on, the communicator is made with NCCL's profiler plugin
// the worker carries (NCCL_PROFILER_PLUGIN=STATIC_PLUGIN, unless the user chose a plugin, and
// NCCL_PROFILE_EVENT_MASK for the run's level: gpu/nccl_profiler.h), and the GPU's global
// timer is paired with the worker's clock once the communicator is up (measureGpuClock).
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "exec/collective_library.h"
#include "exec/nccl_events.h"

namespace arl::gpu {

class NcclLibrary final : public CollectiveLibrary {
 public:
  // Selects spec.device on this thread (cudaSetDevice) and makes the stream. Throws
  // PeerError naming CUDA's reason when the device cannot be used (no GPU, no driver).
  explicit NcclLibrary(const LibraryRunSpec& spec);
  // Ends the communicator: finalised and destroyed after a run that went well, aborted
  // otherwise.
  ~NcclLibrary() override;
  NcclLibrary(const NcclLibrary&) = delete;
  NcclLibrary& operator=(const NcclLibrary&) = delete;

  std::string newBootstrap() override;
  void join(const std::string& bootstrap, const std::atomic<bool>& cancel) override;
  void run(const RankBuffers& b, const std::atomic<bool>& cancel) override;
  double tolerance() const override;
  // NCCL's events from the profiler plugin inside the worker (gpu/nccl_profiler.h); kernel
  // times are mapped from the GPU's global timer with the pairing join() measured.
  LibraryEventCounts collectEvents(TelemetrySink& sink, uint32_t warmup, int64_t clockOffsetNs,
                                   bool final) override;

 private:
  struct State;
  std::unique_ptr<State> st_;
};

// Pairs the GPU's global timer with the worker's steady clock on the current device: reads
// the host clock, runs a kernel that reads the global timer, waits, reads the host clock
// again; of `samples` such reads, the one that took least time gives the offset (the GPU's
// reading against the middle of the host's two) and half its duration bounds the error. The
// map is unknown (known = false) when the kernel cannot run.
NcclClockMap measureGpuClock(void* stream, int samples = 16);

}  // namespace arl::gpu
