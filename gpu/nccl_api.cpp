#include "gpu/nccl_api.h"

#include <dlfcn.h>

#include <mutex>
#include <optional>
#include <string>
#include <variant>

#include "base/errors.h"
#include "gpu/nccl_loader.h"
#include "gpu/nccl_register.h"

namespace arl::gpu {

namespace {

// Sets `fn` to symbol `name` of `lib`; false when it is missing.
template <typename Fn>
bool resolve(const NcclLoaded& lib, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(::dlsym(lib.handle, name));
  return fn != nullptr;
}

std::variant<NcclApi, std::string> load() {
  std::string why;
  const NcclLoaded* lib = ncclLibrary(&why);
  if (lib == nullptr) return why;
  NcclApi api;
  api.version = lib->version;
  const struct {
    const char* name;
    bool found;
  } symbols[] = {
      {"ncclGetUniqueId", resolve(*lib, "ncclGetUniqueId", api.getUniqueId)},
      {"ncclCommInitRankConfig", resolve(*lib, "ncclCommInitRankConfig", api.commInitRankConfig)},
      {"ncclCommFinalize", resolve(*lib, "ncclCommFinalize", api.commFinalize)},
      {"ncclCommDestroy", resolve(*lib, "ncclCommDestroy", api.commDestroy)},
      {"ncclCommAbort", resolve(*lib, "ncclCommAbort", api.commAbort)},
      {"ncclCommGetAsyncError", resolve(*lib, "ncclCommGetAsyncError", api.commGetAsyncError)},
      {"ncclGetErrorString", resolve(*lib, "ncclGetErrorString", api.getErrorString)},
      {"ncclGetLastError", resolve(*lib, "ncclGetLastError", api.getLastError)},
      {"ncclAllReduce", resolve(*lib, "ncclAllReduce", api.allReduce)},
      {"ncclReduceScatter", resolve(*lib, "ncclReduceScatter", api.reduceScatter)},
      {"ncclAllGather", resolve(*lib, "ncclAllGather", api.allGather)},
      {"ncclReduce", resolve(*lib, "ncclReduce", api.reduce)},
      {"ncclBroadcast", resolve(*lib, "ncclBroadcast", api.broadcast)},
  };
  for (const auto& s : symbols) {
    if (!s.found) {
      return "NCCL " + ncclVersionString(lib->version) + " from " + lib->path + " has no " +
             s.name + " (the nccl backend needs NCCL 2.14 or later)";
    }
  }
  return api;
}

const std::variant<NcclApi, std::string>& loaded() {
  static std::once_flag once;
  static std::variant<NcclApi, std::string> result;
  std::call_once(once, [] { result = load(); });
  return result;
}

}  // namespace

const NcclApi& ncclApi() {
  const auto& r = loaded();
  if (const auto* why = std::get_if<std::string>(&r)) throw ConfigError(*why);
  return std::get<NcclApi>(r);
}

std::optional<std::string> ncclApiProblem() {
  const auto& r = loaded();
  if (const auto* why = std::get_if<std::string>(&r)) return *why;
  return std::nullopt;
}

}  // namespace arl::gpu
