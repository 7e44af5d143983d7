// NCCL as a collective library (exec/collective_library.h): one rank's communicator for one
// run, made from the unique id rank 0 passed through the coordinator, with NCCL_ALGO set to
// the run's algorithm (Ring or Tree) before it is made, and the run's collective issued on a
// stream of its own. The communicator is non-blocking (ncclConfig_t::blocking = 0), so that
// joining and every collective are waited for by polling, with the run's abort looked at
// between polls: an aborted run ends the communicator with ncclCommAbort instead of waiting
// forever for a peer that is gone (NCCL's documentation, "Fault tolerance" and "Non-blocking
// communicators").
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "exec/collective_library.h"

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

 private:
  struct State;
  std::unique_ptr<State> st_;
};

}  // namespace arl::gpu
