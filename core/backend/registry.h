// The backends the lab knows, as the algorithm registry lists the algorithms: each one's name
// (what users type: CLI, window, recordings), what it supports, and whether this build has it.
// Every "backend not available" message comes from here, so all clients say the same thing.
// `cuda` and `nccl` are known but come with the GPU library (gpu/), which registers them.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "base/types.h"

namespace arl {

using BackendFactory = std::function<std::unique_ptr<Backend>()>;
// Whether device `device` (-1: the backend's default) of this host can run the backend for
// `sharers` processes at once (the local workers given that device): nullopt, or the one-line
// reason ("backend 'cuda': no CUDA device (...)").
using DeviceCheck = std::function<std::optional<std::string>(int device, int sharers)>;

struct BackendInfo {
  std::string_view name;
  std::string_view summary;  // one line for --help and the window
  MemoryKind memory = MemoryKind::Host;
  std::string_view needs;      // what a build needs to have it ("CUDA"); "" = always built
  std::string_view buildFlag;  // the CMake option that asks for it ("ARL_WITH_CUDA")
  std::vector<DataType> dtypes;
  std::vector<RedOp> ops;
  BackendFactory make;  // empty: not in this program
  // Looks at this host's devices (empty: nothing to look at, or not in this program). The GPU
  // library registers it, so that the window and bench ask core, not gpu/.
  DeviceCheck deviceCheck;
  // Built into this build's worker (allreduce-worker links the GPU library; the lab itself
  // does not): set from ARL_GPU_BACKENDS at compile time, so that the lab and the bench
  // accept a backend their own process cannot make.
  bool inWorker = false;

  bool built() const { return static_cast<bool>(make); }
  // Whether a worker of this build can run it: made here, or built into the worker.
  bool available() const { return built() || inWorker; }
  bool supports(DataType t) const;
  bool supports(RedOp op) const;
};

// Every known backend, built or not, in display order (cpu, cuda, nccl).
std::span<const BackendInfo> backends();
// The known backend called `name`, or null.
const BackendInfo* findBackend(std::string_view name);
// Names of the backends this build has ("cpu", ...).
std::vector<std::string_view> builtBackendNames();

// nullopt when this build's workers have backend `name` (BackendInfo::available); else the
// one-line reason, e.g. "backend 'cuda'
// needs a build with CUDA (ARL_WITH_CUDA); this build has: cpu".
std::optional<std::string> backendUnavailable(std::string_view name);
// nullopt when backend `name` (built) runs `t` with `op`; else the one-line reason.
std::optional<std::string> backendRefuses(std::string_view name, DataType t, RedOp op);
// Throws ConfigError with backendUnavailable()'s message.
void requireBackend(std::string_view name);
// A new backend `name`. Throws ConfigError when this program cannot make it (not in the
// build, or built into the worker only).
std::unique_ptr<Backend> makeBackend(std::string_view name);

// Marks a known backend as built and says how to make it: called once at start-up by the
// library that implements it (the GPU library for cuda and nccl). Throws ConfigError for a
// name the registry does not know.
void registerBackend(std::string_view name, BackendFactory make);

// Says how to check this host's devices for backend `name` (registered by the library that
// implements it, at start-up). Throws ConfigError for a name the registry does not know.
void registerDeviceCheck(std::string_view name, DeviceCheck check);

// nullopt when backend `name` can run `workers` local workers on the devices of `devices` of
// this host (empty: all on the backend's default device; one: all on it; else one per
// worker), when it needs no device, or when this program has no check for it; else the first
// reason found. What bench and the window ask before they start local workers (remote
// workers check their own host when they start).
std::optional<std::string> localDevicesProblem(std::string_view name,
                                               const std::vector<int>& devices, int workers = 1);

}  // namespace arl
