// NCCL's host functions as the nccl backend calls them: looked up with dlsym in the library
// gpu/nccl_loader.h opened, never linked, so that a program with --backend nccl built in
// starts where NCCL is absent. The types are nccl.h's, so a call is checked as if linked.
// Private to gpu/ (it includes nccl.h).
#pragma once

#include <nccl.h>

namespace arl::gpu {

struct NcclApi {
  int version = 0;  // ncclGetVersion's code
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

// This process's NCCL functions, resolved once (thread-safe). Throws ConfigError with the
// one-line reason when NCCL cannot be loaded or lacks one of them (ncclApiProblem(),
// gpu/nccl_register.h, says it without throwing).
const NcclApi& ncclApi();

}  // namespace arl::gpu
