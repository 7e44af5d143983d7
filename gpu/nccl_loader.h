// Finding NCCL when a program runs, not when it is built: the lab's programs do not link
// libnccl (218 MB, and absent from most machines), they open it with dlopen the first time a
// run or a check needs it, so that everything but --backend nccl runs without it.
//
// The search, in order (docs/gpu-nccl.md, "Where NCCL is looked for"):
//   1. ARL_NCCL_LIBRARY, the path of a libnccl.so: when set, it is the only candidate (a
//      choice the user made is not second-guessed by finding another NCCL);
//   2. libnccl.so.2 through the dynamic linker: LD_LIBRARY_PATH, /etc/ld.so.cache (the NVIDIA
//      packages' /usr/lib/<triplet>), /lib, /usr/lib;
//   3. a CUDA toolkit's lib64/ and lib/: CUDA_HOME, CUDA_PATH, /usr/local/cuda;
//   4. a Python wheel's folder (nvidia-nccl-cu12, nvidia-nccl-cu13): site-packages/nvidia/*/
//      lib/libnccl.so.2, in the site-packages or dist-packages of each Python prefix (a
//      virtualenv, a conda environment, the parent of every PATH folder that holds python3,
//      ~/.local, /usr/local, /usr) and in every PYTHONPATH folder. The wheel's layout has
//      changed between CUDA versions (nvidia/nccl/lib, nvidia/cu13/lib), hence the glob.
// The first candidate that loads, answers ncclGetVersion and has every function the nccl
// backend calls wins, so that one check (ncclLoadProblem) serves the worker, bench and the
// window alike: an NCCL too old for the backend is refused before any worker starts. Needs no
// CUDA or NCCL header.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace arl::gpu {

inline constexpr const char* kNcclLibraryEnv = "ARL_NCCL_LIBRARY";
// NCCL's profiler plugin interface version 5 (the one gpu/nccl_profiler.h implements) came
// with NCCL 2.28.0; older NCCL runs collectives but never calls the lab's plugin.
inline constexpr int kNcclProfilerV5Version = 22800;

// What the search looks in: read from the environment by ncclSearchFromEnvironment(); tests
// make their own.
struct NcclSearch {
  std::optional<std::string> explicitPath;  // ARL_NCCL_LIBRARY
  bool dynamicLinker = true;                // step 2
  std::vector<std::string> cudaRoots;       // step 3, in order
  std::vector<std::string> pythonPrefixes;  // step 4: prefixes, in order
  std::vector<std::string> pythonPaths;     // step 4: PYTHONPATH folders, after the prefixes
};

NcclSearch ncclSearchFromEnvironment();

// The files to try, in order, duplicates removed: the explicit path alone when there is one;
// else "libnccl.so.2" (for the dynamic linker), then the existing files of steps 3 and 4.
std::vector<std::string> ncclCandidates(const NcclSearch& search);

// The functions of NCCL that the nccl backend calls (gpu/nccl_api.h gives them their types),
// indexing NcclLoaded::functions; kNcclFunctionNames spells them in the same order.
enum class NcclFunction : uint8_t {
  GetUniqueId,
  CommInitRankConfig,
  CommFinalize,
  CommDestroy,
  CommAbort,
  CommGetAsyncError,
  GetErrorString,
  GetLastError,
  AllReduce,
  ReduceScatter,
  AllGather,
  Reduce,
  Broadcast,
};
inline constexpr std::array<const char*, 13> kNcclFunctionNames = {
    "ncclGetUniqueId", "ncclCommInitRankConfig", "ncclCommFinalize",   "ncclCommDestroy",
    "ncclCommAbort",   "ncclCommGetAsyncError",  "ncclGetErrorString", "ncclGetLastError",
    "ncclAllReduce",   "ncclReduceScatter",      "ncclAllGather",      "ncclReduce",
    "ncclBroadcast"};
static_assert(static_cast<size_t>(NcclFunction::Broadcast) + 1 == kNcclFunctionNames.size());
using NcclFunctions = std::array<void*, kNcclFunctionNames.size()>;

// Looks up every function of kNcclFunctionNames with `symbol` (dlsym on a library's handle)
// into `out`; nullopt when all were found, else the name of the first that was not.
std::optional<std::string> resolveNcclFunctions(const std::function<void*(const char*)>& symbol,
                                                NcclFunctions& out);

struct NcclLoaded {
  void* handle = nullptr;     // dlopen's, never closed
  std::string path;           // the file the dynamic linker opened
  int version = 0;            // ncclGetVersion's code: 22809 for 2.28.9
  NcclFunctions functions{};  // by NcclFunction; openNccl finds every one

  void* function(NcclFunction f) const { return functions[static_cast<size_t>(f)]; }
};

// Opens the candidates in order until one loads, answers ncclGetVersion and has every
// function of kNcclFunctionNames; else one line naming each candidate and why it failed ("NCCL
// not found (libnccl.so.2: cannot open shared object file: No such file or directory; ...);
// install it ...", or for an old NCCL "...: NCCL 2.12.12 has no ncclCommFinalize (the nccl
// backend needs NCCL 2.14 or later)"). `chosen`: the candidate is the user's
// ARL_NCCL_LIBRARY, and the line says so.
std::variant<NcclLoaded, std::string> openNccl(const std::vector<std::string>& candidates,
                                               bool chosen = false);

// This process's NCCL, searched for and opened once (thread-safe); null when there is none
// the nccl backend can use, with the reason in *why.
const NcclLoaded* ncclLibrary(std::string* why = nullptr);
// nullopt when ncclLibrary() found an NCCL the nccl backend can use; else the one-line reason.
// The one check of NCCL: the worker, bench and the window all ask it (gpu/gpu_backends.h).
std::optional<std::string> ncclLoadProblem();

// "2.28.9" for 22809 (and NCCL's older encoding, "2.8.4" for 2804).
std::string ncclVersionString(int code);
// One line for the log: "NCCL 2.28.9 from /usr/lib/x86_64-linux-gnu/libnccl.so.2; its profiler
// loads the lab's plugin (interface version 5)", or why NCCL's own events will not come.
std::string describeNccl(const NcclLoaded& nccl);

}  // namespace arl::gpu
