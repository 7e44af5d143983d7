// Where the lab's programs look for NCCL when they run (gpu/nccl_loader.h): the order of the
// search over a made-up tree of folders laid out as a CUDA toolkit and Python wheels lay them
// out, what it reads from the environment, and what loading says when it fails. None of this
// needs a GPU; loading the real NCCL needs one installed, and skips without it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "gpu/nccl_loader.h"
#include "gpu_test_util.h"

namespace arl::gpu {
namespace {

namespace fs = std::filesystem;

// A fresh folder under the test's temporary directory, removed at the end.
class Tree {
 public:
  Tree() : root_(fs::path(::testing::TempDir()) / ("nccl_tree_" + std::to_string(::getpid()))) {
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~Tree() { fs::remove_all(root_); }
  Tree(const Tree&) = delete;
  Tree& operator=(const Tree&) = delete;

  // Makes the file `rel` (and its folders); returns its path.
  std::string file(const std::string& rel) const {
    const fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << "not a library\n";
    return p.string();
  }
  std::string dir(const std::string& rel) const {
    fs::create_directories(root_ / rel);
    return (root_ / rel).string();
  }

 private:
  fs::path root_;
};

using gputest::Env;

TEST(NcclSearch, AnExplicitPathIsTheOnlyCandidate) {
  NcclSearch s;
  s.explicitPath = "/opt/nccl/lib/libnccl.so.2";
  s.cudaRoots = {"/usr/local/cuda"};
  s.pythonPrefixes = {"/usr"};
  EXPECT_EQ(ncclCandidates(s), std::vector<std::string>{"/opt/nccl/lib/libnccl.so.2"});
}

TEST(NcclSearch, TheDynamicLinkerThenToolkitsThenWheelsInEveryLayout) {
  const Tree t;
  const std::string lib64 = t.file("cuda/lib64/libnccl.so.2");
  const std::string lib = t.file("cuda/lib/libnccl.so.2");
  const std::string venv = t.file("venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2");
  const std::string conda =
      t.file("conda/lib/python3.11/site-packages/nvidia/cu13/lib/libnccl.so.2");
  const std::string debian = t.file("usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2");
  const std::string path = t.file("pythonpath/nvidia/nccl/lib/libnccl.so.2");
  (void)t.file("venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.13");
  (void)t.file("venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so");  // dev link
  NcclSearch s;
  s.cudaRoots = {t.dir("cuda"), t.dir("no-toolkit")};
  s.pythonPrefixes = {t.dir("venv"), t.dir("conda"), t.dir("usr"), t.dir("venv")};
  s.pythonPaths = {t.dir("pythonpath"), t.dir("venv/lib/python3.12/site-packages")};
  const std::vector<std::string> want = {"libnccl.so.2", lib64, lib, venv, conda, debian, path};
  EXPECT_EQ(ncclCandidates(s), want);
  s.dynamicLinker = false;
  EXPECT_EQ(ncclCandidates(s), std::vector<std::string>(want.begin() + 1, want.end()));
}

TEST(NcclSearch, NothingInstalledLeavesTheDynamicLinkerAlone) {
  const Tree t;
  NcclSearch s;
  s.cudaRoots = {t.dir("cuda")};
  s.pythonPrefixes = {t.dir("venv")};
  EXPECT_EQ(ncclCandidates(s), std::vector<std::string>{"libnccl.so.2"});
}

TEST(NcclSearch, ReadsTheEnvironment) {
  const Tree t;
  const std::string bin = t.dir("env/bin");
  (void)t.file("env/bin/python3");
  Env env;
  env.set("ARL_NCCL_LIBRARY", std::nullopt);
  env.set("CUDA_HOME", t.dir("cuda-home"));
  env.set("CUDA_PATH", std::nullopt);
  env.set("VIRTUAL_ENV", t.dir("venv"));
  env.set("CONDA_PREFIX", std::nullopt);
  env.set("PATH", t.dir("no-python/bin") + ":" + bin + "/");
  env.set("PYTHONPATH", t.dir("a") + "::" + t.dir("b"));
  env.set("HOME", t.dir("home"));
  const NcclSearch s = ncclSearchFromEnvironment();
  EXPECT_FALSE(s.explicitPath.has_value());
  EXPECT_TRUE(s.dynamicLinker);
  EXPECT_EQ(s.cudaRoots, (std::vector<std::string>{t.dir("cuda-home"), "/usr/local/cuda"}));
  ASSERT_GE(s.pythonPrefixes.size(), 3u);
  EXPECT_EQ(s.pythonPrefixes[0], t.dir("venv"));
  EXPECT_EQ(s.pythonPrefixes[1], t.dir("env")) << "PATH's folder with python3, its parent";
  EXPECT_NE(std::find(s.pythonPrefixes.begin(), s.pythonPrefixes.end(), t.dir("home") + "/.local"),
            s.pythonPrefixes.end());
  EXPECT_EQ(std::count(s.pythonPrefixes.begin(), s.pythonPrefixes.end(), t.dir("no-python")), 0);
  EXPECT_EQ(s.pythonPaths, (std::vector<std::string>{t.dir("a"), t.dir("b")}));

  env.set("ARL_NCCL_LIBRARY", "/somewhere/libnccl.so.2");
  EXPECT_EQ(ncclSearchFromEnvironment().explicitPath, "/somewhere/libnccl.so.2");
  env.set("ARL_NCCL_LIBRARY", "");
  EXPECT_FALSE(ncclSearchFromEnvironment().explicitPath.has_value()) << "empty is unset";
}

TEST(NcclOpen, SaysWhyEveryCandidateFailed) {
  const Tree t;
  const std::string fake = t.file("fake/libnccl.so.2");
  const auto r = openNccl({"/nonexistent/libnccl.so.2", fake, "libm.so.6"});
  ASSERT_TRUE(std::holds_alternative<std::string>(r));
  const std::string& why = std::get<std::string>(r);
  EXPECT_EQ(why.rfind("NCCL not found (/nonexistent/libnccl.so.2: cannot open shared object "
                      "file: No such file or directory; ",
                      0),
            0u)
      << why;
  EXPECT_NE(why.find(fake), std::string::npos) << why;
  EXPECT_NE(why.find("libm.so.6: no ncclGetVersion (not NCCL's library)"), std::string::npos)
      << why;
  EXPECT_NE(why.find("set ARL_NCCL_LIBRARY"), std::string::npos) << why;
  EXPECT_EQ(why.find('\n'), std::string::npos) << "one line";

  const auto chosen = openNccl({"/nonexistent/libnccl.so.2"}, true);
  ASSERT_TRUE(std::holds_alternative<std::string>(chosen));
  EXPECT_EQ(std::get<std::string>(chosen),
            "NCCL cannot be loaded from ARL_NCCL_LIBRARY: /nonexistent/libnccl.so.2: cannot open "
            "shared object file: No such file or directory");
}

// The functions the nccl backend calls are looked up when NCCL is opened, so that an NCCL
// lacking one is refused by the one check every program asks (ncclLoadProblem), before any
// worker starts, rather than by each worker.
TEST(NcclOpen, ResolvesEveryFunctionTheBackendCallsOrNamesTheFirstMissing) {
  // A stand-in for dlsym: each name's address is its own entry in kNcclFunctionNames.
  std::string absent;
  const auto symbol = [&](const char* name) -> void* {
    if (absent == name) return nullptr;
    for (const char* const& n : kNcclFunctionNames) {
      if (std::string(n) == name) return const_cast<char**>(&n);
    }
    return nullptr;
  };
  NcclFunctions f{};
  EXPECT_EQ(resolveNcclFunctions(symbol, f), std::nullopt);
  for (size_t i = 0; i < f.size(); ++i) {
    EXPECT_EQ(f[i], &kNcclFunctionNames[i]) << kNcclFunctionNames[i];
  }
  NcclLoaded lib;
  lib.functions = f;
  EXPECT_EQ(lib.function(NcclFunction::AllReduce), symbol("ncclAllReduce"));
  EXPECT_EQ(lib.function(NcclFunction::Broadcast), symbol("ncclBroadcast"));

  absent = "ncclCommInitRankConfig";  // NCCL before 2.14
  EXPECT_EQ(resolveNcclFunctions(symbol, f), "ncclCommInitRankConfig");
  absent = "ncclBroadcast";
  EXPECT_EQ(resolveNcclFunctions(symbol, f), "ncclBroadcast");
  EXPECT_EQ(resolveNcclFunctions([](const char*) -> void* { return nullptr; }, f),
            "ncclGetUniqueId");
}

TEST(NcclOpen, LoadsTheNcclOfThisMachine) {
  const NcclSearch s = ncclSearchFromEnvironment();
  const auto r = openNccl(ncclCandidates(s), s.explicitPath.has_value());
  if (const auto* why = std::get_if<std::string>(&r)) GTEST_SKIP() << *why;
  const NcclLoaded& nccl = std::get<NcclLoaded>(r);
  EXPECT_NE(nccl.handle, nullptr);
  EXPECT_GE(nccl.version, 20000) << "NCCL 2";
  EXPECT_NE(nccl.path.find("libnccl"), std::string::npos) << nccl.path;
  for (size_t i = 0; i < nccl.functions.size(); ++i) {
    EXPECT_NE(nccl.functions[i], nullptr) << kNcclFunctionNames[i];
  }
  EXPECT_EQ(
      describeNccl(nccl).rfind("NCCL " + ncclVersionString(nccl.version) + " from " + nccl.path, 0),
      0u);
  EXPECT_EQ(ncclLoadProblem(), std::nullopt);
}

TEST(NcclOpen, VersionsAndWhatTheyMeanForTheProfiler) {
  EXPECT_EQ(ncclVersionString(22809), "2.28.9");
  EXPECT_EQ(ncclVersionString(21903), "2.19.3");
  EXPECT_EQ(ncclVersionString(2804), "2.8.4");
  NcclLoaded n;
  n.path = "/x/libnccl.so.2";
  n.version = 22809;
  EXPECT_EQ(describeNccl(n),
            "NCCL 2.28.9 from /x/libnccl.so.2; its profiler loads the lab's plugin (interface "
            "version 5)");
  n.version = 22703;
  EXPECT_EQ(describeNccl(n),
            "NCCL 2.27.3 from /x/libnccl.so.2: older than 2.28.0, whose profiler interface "
            "(version 5) the lab's plugin implements: runs go on without NCCL's own events");
}

}  // namespace
}  // namespace arl::gpu
