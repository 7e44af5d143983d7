// Start-up of the NCCL part of the GPU library: what allreduce-worker calls once, before it
// reads its options, to gain --backend nccl and NCCL's collectives (nccl-ring, nccl-tree).
#pragma once

namespace arl::gpu {

// Registers the nccl backend (backend/registry.h) and NCCL as the collective library "nccl"
// (exec/collective_library.h). Needs no GPU: a missing device shows when a run starts.
void registerNccl();

}  // namespace arl::gpu
