#include "gpu/nccl_api.h"

namespace arl::gpu {

namespace {

template <typename Fn>
void take(const NcclLoaded& nccl, NcclFunction f, Fn& fn) {
  fn = reinterpret_cast<Fn>(nccl.function(f));
}

}  // namespace

NcclApi ncclApi(const NcclLoaded& nccl) {
  NcclApi api;
  take(nccl, NcclFunction::GetUniqueId, api.getUniqueId);
  take(nccl, NcclFunction::CommInitRankConfig, api.commInitRankConfig);
  take(nccl, NcclFunction::CommFinalize, api.commFinalize);
  take(nccl, NcclFunction::CommDestroy, api.commDestroy);
  take(nccl, NcclFunction::CommAbort, api.commAbort);
  take(nccl, NcclFunction::CommGetAsyncError, api.commGetAsyncError);
  take(nccl, NcclFunction::GetErrorString, api.getErrorString);
  take(nccl, NcclFunction::GetLastError, api.getLastError);
  take(nccl, NcclFunction::AllReduce, api.allReduce);
  take(nccl, NcclFunction::ReduceScatter, api.reduceScatter);
  take(nccl, NcclFunction::AllGather, api.allGather);
  take(nccl, NcclFunction::Reduce, api.reduce);
  take(nccl, NcclFunction::Broadcast, api.broadcast);
  return api;
}

}  // namespace arl::gpu
