#include "backend/registry.h"

#include <algorithm>
#include <iterator>

#include "backend/cpu/cpu_backend.h"
#include "base/errors.h"

namespace arl {

namespace {

std::vector<DataType> allDataTypes() {
  return {std::begin(kAllDataTypes), std::end(kAllDataTypes)};
}
std::vector<RedOp> allRedOps() { return {std::begin(kAllRedOps), std::end(kAllRedOps)}; }

std::vector<BackendInfo> makeRegistry() {
  std::vector<BackendInfo> r;
  r.push_back({"cpu", "host memory, reductions on the CPU (vectorised kernels)", MemoryKind::Host,
               "", "", allDataTypes(), allRedOps(),
               [] { return std::unique_ptr<Backend>(std::make_unique<CpuBackend>()); }});
  r.push_back({"cuda", "device memory, reductions in CUDA kernels", MemoryKind::Device, "CUDA",
               "ARL_WITH_CUDA", allDataTypes(), allRedOps(), nullptr});
  r.push_back({"nccl", "NCCL's own collectives on device memory (the reference)",
               MemoryKind::Device, "CUDA and NCCL", "ARL_WITH_CUDA", allDataTypes(), allRedOps(),
               nullptr});
  r.push_back({"mpi",
               "host memory under mpirun: the lab's algorithms on the CPU, and Open MPI's "
               "collectives (mpi-*)",
               MemoryKind::Host, "Open MPI", "install libopenmpi-dev and rebuild", allDataTypes(),
               allRedOps(), nullptr});
  return r;
}

// The backends this build's worker has beyond cpu, as CMake found them (gpu/CMakeLists.txt
// sets ARL_GPU_BACKENDS on this library, e.g. "nccl" or "cuda,nccl").
#ifndef ARL_GPU_BACKENDS
#define ARL_GPU_BACKENDS ""
#endif
// Likewise the CPU engines' backends (core/engines/*/CMakeLists.txt), e.g. "mpi".
#ifndef ARL_ENGINE_BACKENDS
#define ARL_ENGINE_BACKENDS ""
#endif

bool inList(std::string_view list, std::string_view name) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    if (list.substr(0, comma) == name) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

bool inWorkerBuild(std::string_view name) {
  return inList(ARL_GPU_BACKENDS, name) || inList(ARL_ENGINE_BACKENDS, name);
}

// Written by registerBackend() at start-up, before any run; read-only afterwards.
std::vector<BackendInfo>& registry() {
  static std::vector<BackendInfo> r = [] {
    std::vector<BackendInfo> made = makeRegistry();
    for (BackendInfo& b : made) b.inWorker = inWorkerBuild(b.name);
    return made;
  }();
  return r;
}

std::string joined(const std::vector<std::string_view>& names) {
  std::string s;
  for (std::string_view n : names) s += (s.empty() ? "" : ", ") + std::string(n);
  return s.empty() ? "none" : s;
}

std::vector<std::string_view> knownNames() {
  std::vector<std::string_view> names;
  for (const BackendInfo& b : registry()) names.push_back(b.name);
  return names;
}

}  // namespace

bool BackendInfo::supports(DataType t) const {
  return std::find(dtypes.begin(), dtypes.end(), t) != dtypes.end();
}

bool BackendInfo::supports(RedOp op) const {
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

std::span<const BackendInfo> backends() { return registry(); }

const BackendInfo* findBackend(std::string_view name) {
  for (const BackendInfo& b : registry()) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

std::vector<std::string_view> builtBackendNames() {
  std::vector<std::string_view> names;
  for (const BackendInfo& b : registry()) {
    if (b.available()) names.push_back(b.name);
  }
  return names;
}

std::optional<std::string> backendUnavailable(std::string_view name) {
  const BackendInfo* b = findBackend(name);
  const std::string has = "this build has: " + joined(builtBackendNames());
  if (b == nullptr) {
    return "unknown backend '" + std::string(name) + "' (known: " + joined(knownNames()) + "; " +
           has + ")";
  }
  if (b->available()) return std::nullopt;
  return "backend '" + std::string(name) + "' needs a build with " + std::string(b->needs) + " (" +
         std::string(b->buildFlag) + "); " + has;
}

std::optional<std::string> backendRefuses(std::string_view name, DataType t, RedOp op) {
  if (auto why = backendUnavailable(name)) return why;
  const BackendInfo& b = *findBackend(name);
  if (!b.supports(t)) {
    return "backend '" + std::string(name) + "' does not support dtype " + std::string(toString(t));
  }
  if (!b.supports(op)) {
    return "backend '" + std::string(name) + "' does not support op " + std::string(toString(op));
  }
  return std::nullopt;
}

void requireBackend(std::string_view name) {
  if (auto why = backendUnavailable(name)) throw ConfigError(*why);
}

std::unique_ptr<Backend> makeBackend(std::string_view name) {
  requireBackend(name);
  const BackendInfo& b = *findBackend(name);
  if (!b.built()) {
    throw ConfigError("backend '" + std::string(name) +
                      "' is built into allreduce-worker, not into this program");
  }
  return b.make();
}

void registerBackend(std::string_view name, BackendFactory make) {
  ARL_ENFORCE(static_cast<bool>(make), "registerBackend(" << name << ") without a factory");
  for (BackendInfo& b : registry()) {
    if (b.name == name) {
      b.make = std::move(make);
      return;
    }
  }
  throw ConfigError("registerBackend: unknown backend '" + std::string(name) +
                    "' (known: " + joined(knownNames()) + ")");
}

void registerDeviceCheck(std::string_view name, DeviceCheck check) {
  ARL_ENFORCE(static_cast<bool>(check), "registerDeviceCheck(" << name << ") without a check");
  for (BackendInfo& b : registry()) {
    if (b.name == name) {
      b.deviceCheck = std::move(check);
      return;
    }
  }
  throw ConfigError("registerDeviceCheck: unknown backend '" + std::string(name) +
                    "' (known: " + joined(knownNames()) + ")");
}

std::optional<std::string> localDevicesProblem(std::string_view name,
                                               const std::vector<int>& devices, int workers) {
  const BackendInfo* b = findBackend(name);
  if (b == nullptr || !b->deviceCheck) return std::nullopt;
  if (devices.size() <= 1) return b->deviceCheck(devices.empty() ? -1 : devices[0], workers);
  // Each device once, in the order the workers name them first, with how many share it.
  std::vector<std::pair<int, int>> shared;
  for (int d : devices) {
    auto it =
        std::find_if(shared.begin(), shared.end(), [d](const auto& s) { return s.first == d; });
    if (it == shared.end()) {
      shared.emplace_back(d, 1);
    } else {
      ++it->second;
    }
  }
  for (const auto& [d, sharers] : shared) {
    if (auto why = b->deviceCheck(d, sharers)) return why;
  }
  return std::nullopt;
}

}  // namespace arl
