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
  return r;
}

// Written by registerBackend() at start-up, before any run; read-only afterwards.
std::vector<BackendInfo>& registry() {
  static std::vector<BackendInfo> r = makeRegistry();
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
    if (b.built()) names.push_back(b.name);
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
  if (b->built()) return std::nullopt;
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
  return findBackend(name)->make();
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

}  // namespace arl
