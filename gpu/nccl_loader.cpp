#include "gpu/nccl_loader.h"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <mutex>

namespace arl::gpu {

namespace {

constexpr const char* kSoname = "libnccl.so.2";

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read once, at the search
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::vector<std::string> splitPath(const std::string& list) {
  std::vector<std::string> out;
  size_t from = 0;
  while (from <= list.size()) {
    const size_t to = std::min(list.find(':', from), list.size());
    if (to > from) out.push_back(list.substr(from, to - from));
    from = to + 1;
  }
  return out;
}

bool isFile(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string parentOf(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return std::filesystem::path(dir).parent_path().string();
}

// The prefixes of the Python interpreters on PATH: a folder with python3 in it is its bin/,
// and so is the folder its symbolic link leads to (a virtualenv's python3 links to the
// interpreter it was made from).
std::vector<std::string> pythonPrefixesOnPath(const std::string& path) {
  std::vector<std::string> out;
  for (const std::string& dir : splitPath(path)) {
    const std::string python = dir + "/python3";
    if (!isFile(python)) continue;
    out.push_back(parentOf(dir));
    std::array<char, PATH_MAX> real{};
    if (::realpath(python.c_str(), real.data()) != nullptr) {
      out.push_back(parentOf(parentOf(std::string(real.data()))));
    }
  }
  return out;
}

// The files matching `pattern`, sorted (glob's order).
std::vector<std::string> globFiles(const std::string& pattern) {
  glob_t g{};
  std::vector<std::string> out;
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      if (isFile(g.gl_pathv[i])) out.emplace_back(g.gl_pathv[i]);
    }
  }
  ::globfree(&g);
  return out;
}

// libnccl.so.2 inside a wheel below `sitePackages` (nvidia/nccl/lib/, nvidia/cu13/lib/, ...).
std::vector<std::string> wheelFiles(const std::string& sitePackages) {
  return globFiles(sitePackages + "/nvidia/*/lib/" + kSoname);
}

void append(std::vector<std::string>& to, const std::vector<std::string>& more) {
  for (const std::string& s : more) {
    if (std::find(to.begin(), to.end(), s) == to.end()) to.push_back(s);
  }
}

std::string dlText() {
  const char* e = ::dlerror();
  return e != nullptr ? e : "unknown dlopen error";
}

// The file the dynamic linker opened for `handle`.
std::string loadedPath(void* handle, const std::string& asked) {
  link_map* map = nullptr;
  if (::dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      *map->l_name != '\0') {
    return map->l_name;
  }
  return asked;
}

}  // namespace

NcclSearch ncclSearchFromEnvironment() {
  NcclSearch s;
  s.explicitPath = env(kNcclLibraryEnv);
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (auto v = env(var)) s.cudaRoots.push_back(*v);
  }
  s.cudaRoots.emplace_back("/usr/local/cuda");
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    if (auto v = env(var)) s.pythonPrefixes.push_back(*v);
  }
  append(s.pythonPrefixes, pythonPrefixesOnPath(env("PATH").value_or("")));
  if (auto home = env("HOME")) s.pythonPrefixes.push_back(*home + "/.local");
  for (const char* p : {"/usr/local", "/usr", "/opt/conda"}) s.pythonPrefixes.emplace_back(p);
  if (auto pp = env("PYTHONPATH")) s.pythonPaths = splitPath(*pp);
  return s;
}

std::vector<std::string> ncclCandidates(const NcclSearch& search) {
  if (search.explicitPath) return {*search.explicitPath};
  std::vector<std::string> out;
  if (search.dynamicLinker) out.emplace_back(kSoname);
  for (const std::string& root : search.cudaRoots) {
    for (const char* lib : {"/lib64/", "/lib/"}) {
      if (isFile(root + lib + kSoname)) append(out, {root + lib + kSoname});
    }
  }
  for (const std::string& prefix : search.pythonPrefixes) {
    for (const char* packages : {"site-packages", "dist-packages"}) {
      append(out, wheelFiles(prefix + "/lib/python3*/" + packages));
    }
  }
  for (const std::string& dir : search.pythonPaths) append(out, wheelFiles(dir));
  return out;
}

std::optional<std::string> resolveNcclFunctions(const std::function<void*(const char*)>& symbol,
                                                NcclFunctions& out) {
  for (size_t i = 0; i < kNcclFunctionNames.size(); ++i) {
    out[i] = symbol(kNcclFunctionNames[i]);
    if (out[i] == nullptr) return std::string(kNcclFunctionNames[i]);
  }
  return std::nullopt;
}

namespace {

// Candidate `asked`, opened as `h`: NCCL with every function the backend calls, or why not.
std::variant<NcclLoaded, std::string> checkCandidate(void* h, const std::string& asked) {
  using GetVersion = int (*)(int*);  // ncclResult_t ncclGetVersion(int*): ncclSuccess is 0
  auto* get = reinterpret_cast<GetVersion>(::dlsym(h, "ncclGetVersion"));
  if (get == nullptr) return asked + ": no ncclGetVersion (not NCCL's library)";
  NcclLoaded lib{h, loadedPath(h, asked), 0, {}};
  if (get(&lib.version) != 0 || lib.version <= 0) return asked + ": ncclGetVersion failed";
  const auto missing =
      resolveNcclFunctions([h](const char* name) { return ::dlsym(h, name); }, lib.functions);
  if (missing) {
    return lib.path + ": NCCL " + ncclVersionString(lib.version) + " has no " + *missing +
           " (the nccl backend needs NCCL 2.14 or later)";
  }
  return lib;
}

}  // namespace

std::variant<NcclLoaded, std::string> openNccl(const std::vector<std::string>& candidates,
                                               bool chosen) {
  std::string tried;
  for (const std::string& c : candidates) {
    void* h = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    std::string why;
    if (h == nullptr) {
      why = dlText();
    } else {
      auto r = checkCandidate(h, c);
      if (std::holds_alternative<NcclLoaded>(r)) return r;
      why = std::get<std::string>(r);
      ::dlclose(h);
    }
    tried += (tried.empty() ? "" : "; ") + why;
  }
  if (chosen) return std::string("NCCL cannot be loaded from ") + kNcclLibraryEnv + ": " + tried;
  return "NCCL not found (" + tried +
         "); install it (Debian: libnccl2 from NVIDIA's "
         "repository; Python: pip install nvidia-nccl-cu13) or set " +
         kNcclLibraryEnv + " to its libnccl.so.2";
}

const NcclLoaded* ncclLibrary(std::string* why) {
  static std::once_flag once;
  static std::variant<NcclLoaded, std::string> result;
  std::call_once(once, [] {
    const NcclSearch search = ncclSearchFromEnvironment();
    result = openNccl(ncclCandidates(search), search.explicitPath.has_value());
  });
  if (const auto* loaded = std::get_if<NcclLoaded>(&result)) return loaded;
  if (why != nullptr) *why = std::get<std::string>(result);
  return nullptr;
}

std::optional<std::string> ncclLoadProblem() {
  std::string why;
  if (ncclLibrary(&why) != nullptr) return std::nullopt;
  return why;
}

std::string ncclVersionString(int code) {
  // NCCL_VERSION(X, Y, Z): X*10000 + Y*100 + Z from 2.9 on, X*1000 + Y*100 + Z before.
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? code % 10000 / 100 : code % 1000 / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

std::string describeNccl(const NcclLoaded& nccl) {
  std::string s = "NCCL " + ncclVersionString(nccl.version) + " from " + nccl.path;
  if (nccl.version >= kNcclProfilerV5Version) {
    return s + "; its profiler loads the lab's plugin (interface version 5)";
  }
  return s + ": older than " + ncclVersionString(kNcclProfilerV5Version) +
         ", whose profiler interface (version 5) the lab's plugin implements: runs go on "
         "without NCCL's own events";
}

}  // namespace arl::gpu
