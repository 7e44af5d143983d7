// Start-up of the NCCL part of the GPU library: what allreduce-worker calls once, before it
// reads its options, to gain --backend nccl and NCCL's collectives (nccl-ring, nccl-tree).
#pragma once

#include <optional>
#include <string>

namespace arl::gpu {

// Registers the nccl backend (backend/registry.h) and NCCL as the collective library "nccl"
// (exec/collective_library.h). Needs no GPU: a missing device shows when a run starts.
void registerNccl();

// nullopt when this process's NCCL (found and opened as gpu/nccl_loader.h says) has every
// function the nccl backend calls; else the one-line reason. Resolved once.
std::optional<std::string> ncclApiProblem();

}  // namespace arl::gpu
