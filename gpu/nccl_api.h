// NCCL's host functions as the nccl backend calls them, with nccl.h's types, so that a call is
// checked as if NCCL were linked. It is not: gpu/nccl_loader.h opens the library when a
// program runs and looks the functions up (refusing an NCCL that lacks one), so that a
// program with --backend nccl built in starts where NCCL is absent. Private to gpu/ (it
// includes nccl.h).
#pragma once

#include <nccl.h>

#include "gpu/nccl_loader.h"

namespace arl::gpu {

struct NcclApi {
  decltype(&::ncclGetUniqueId) getUniqueId = nullptr;
  decltype(&::ncclCommInitRankConfig) commInitRankConfig = nullptr;
  decltype(&::ncclCommFinalize) commFinalize = nullptr;
  decltype(&::ncclCommDestroy) commDestroy = nullptr;
  decltype(&::ncclCommAbort) commAbort = nullptr;
  decltype(&::ncclCommGetAsyncError) commGetAsyncError = nullptr;
  decltype(&::ncclGetErrorString) getErrorString = nullptr;
  decltype(&::ncclGetLastError) getLastError = nullptr;
  decltype(&::ncclAllReduce) allReduce = nullptr;
  decltype(&::ncclReduceScatter) reduceScatter = nullptr;
  decltype(&::ncclAllGather) allGather = nullptr;
  decltype(&::ncclReduce) reduce = nullptr;
  decltype(&::ncclBroadcast) broadcast = nullptr;
};

// The functions `nccl` resolved (ncclLibrary() holds every one), with their types.
NcclApi ncclApi(const NcclLoaded& nccl);

}  // namespace arl::gpu
