#include "gpu/nccl_register.h"

#include <memory>

#include "backend/registry.h"
#include "exec/collective_library.h"
#include "gpu/nccl_backend.h"
#include "gpu/nccl_library.h"

namespace arl::gpu {

void registerNccl() {
  registerBackend("nccl", [] { return std::unique_ptr<Backend>(std::make_unique<NcclBackend>()); });
  registerCollectiveLibrary("nccl", [](const LibraryRunSpec& spec) {
    return std::unique_ptr<CollectiveLibrary>(std::make_unique<NcclLibrary>(spec));
  });
}

}  // namespace arl::gpu
