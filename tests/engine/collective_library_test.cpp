// Library algorithms (NCCL's and Gloo's own collectives): their names, the runs the request check
// accepts for them, where their ranks may run, and the check's tolerance. No GPU and no NCCL
// needed: this is what the coordinator and bench decide before any worker is touched. This program
// registers no library, as a worker of a build without them.
#include "exec/collective_library.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/errors.h"
#include "exec/check.h"
#include "exec/numeric.h"
#include "exec/run_request.h"

namespace arl {
namespace {

std::string refusal(std::string_view algo, const std::vector<RankPlace>& places) {
  try {
    checkPlaces(algo, places);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(CollectiveLibrary, NamesNcclsRingAndTree) {
  EXPECT_EQ(libraryAlgorithmList().rfind("nccl-ring, nccl-tree, ", 0), 0u)
      << libraryAlgorithmList();
  EXPECT_NE(libraryAlgorithmList().find("gloo-ring, gloo-ring-chunked, gloo-halving-doubling, "
                                        "gloo-bcube"),
            std::string::npos)
      << libraryAlgorithmList();
  const LibraryAlgorithm* ring = findLibraryAlgorithm("nccl-ring");
  ASSERT_NE(ring, nullptr);
  EXPECT_EQ(ring->library, "nccl");
  EXPECT_EQ(ring->variant, "Ring");
  for (Collective c : kAllCollectives) EXPECT_TRUE(ring->supports(c)) << toString(c);
  const LibraryAlgorithm* tree = findLibraryAlgorithm("nccl-tree");
  ASSERT_NE(tree, nullptr);
  EXPECT_EQ(tree->variant, "Tree");
  EXPECT_TRUE(tree->supports(Collective::AllReduce));
  EXPECT_FALSE(tree->supports(Collective::Broadcast));
  EXPECT_EQ(findLibraryAlgorithm("ring"), nullptr);
}

// Each Gloo algorithm claims the collectives Gloo has for it, and no more.
TEST(CollectiveLibrary, NamesGloosAlgorithmsAndTheirCollectives) {
  const auto collectivesOf = [](std::string_view name) {
    const LibraryAlgorithm* a = findLibraryAlgorithm(name);
    std::string s;
    if (a == nullptr) return std::string("(none)");
    EXPECT_EQ(a->library, "gloo");
    EXPECT_EQ(a->memory, MemoryKind::Host);
    for (Collective c : kAllCollectives) {
      if (a->supports(c)) s += (s.empty() ? "" : ",") + std::string(toString(c));
    }
    return std::string(a->variant) + ": " + s;
  };
  EXPECT_EQ(collectivesOf("gloo-ring"), "AllreduceRing: allreduce,allgather,reduce,broadcast");
  EXPECT_EQ(collectivesOf("gloo-ring-chunked"), "AllreduceRingChunked: allreduce");
  EXPECT_EQ(collectivesOf("gloo-halving-doubling"),
            "AllreduceHalvingDoubling: allreduce,reducescatter");
  EXPECT_EQ(collectivesOf("gloo-bcube"), "AllreduceBcube: allreduce");
  EXPECT_EQ(findLibraryAlgorithm("nccl-ring")->memory, MemoryKind::Device);
}

TEST(CollectiveLibrary, GloosRanksAreCpuWorkersAndBcubesAPowerOfTwo) {
  const RankPlace cpu{"h1", "cpu", -1};
  EXPECT_EQ(refusal("gloo-ring", {cpu, cpu, cpu}), "");
  EXPECT_EQ(refusal("gloo-halving-doubling", {cpu, cpu, cpu, cpu, cpu}), "");
  EXPECT_EQ(refusal("gloo-bcube", {cpu, cpu, cpu, cpu}), "");
  EXPECT_EQ(refusal("gloo-bcube", {cpu, cpu, cpu}),
            "gloo-bcube runs on a power-of-two number of ranks (Gloo's AllreduceBcube with base "
            "2); this run has 3");
  EXPECT_EQ(refusal("gloo-ring", {cpu, {"h1", "cuda", 0}}),
            "gloo-ring needs every rank on a cpu worker (gloo works on host memory); rank 1 "
            "(host h1, backend cuda) is not: start the workers with --backend cpu");
}

// A build with Gloo has nothing to say; one without says how to get it.
TEST(CollectiveLibrary, SaysWhetherThisBuildHasGloo) {
  if (const auto why = libraryMissing("gloo")) {
    EXPECT_EQ(*why, "this build has no Gloo (install libgloo-dev and rebuild)");
  }
  EXPECT_EQ(libraryMissing("nccl"), std::nullopt);  // asked with its backend
}

TEST(CollectiveLibrary, RequestsResolveWithoutASchedule) {
  RunRequest q;
  q.algorithm = "nccl-ring";
  q.collective = Collective::AllGather;
  q.count = 1000;
  Schedule s;
  const ResolvedRun r = resolveRunRequest(q, {"a", "b", "c"}, &s);
  EXPECT_EQ(r.nranks, 3);
  EXPECT_EQ(r.steps, 0u);
  EXPECT_TRUE(r.bytesSent.empty());  // NCCL's traffic is its own
  EXPECT_EQ(s.algorithm, "nccl-ring");
  EXPECT_EQ(s.inputElems, 1000u);
  EXPECT_EQ(s.outputElems, 3000u);
  EXPECT_EQ(s.ranks.size(), 3u);
  for (const auto& ops : s.ranks) EXPECT_TRUE(ops.empty());

  q.algorithm = "nccl-tree";
  try {
    (void)resolveRunRequest(q, {"a", "b"});
    FAIL() << "nccl-tree accepted an all-gather";
  } catch (const RunRequestError& e) {
    EXPECT_EQ(e.field, RunField::Collective);
    EXPECT_NE(std::string(e.what()).find("algorithm nccl-tree does not implement it"),
              std::string::npos)
        << e.what();
  }
  q.algorithm = "nccl-mesh";
  try {
    (void)resolveRunRequest(q, {"a"});
    FAIL() << "an unknown algorithm was accepted";
  } catch (const RunRequestError& e) {
    EXPECT_NE(std::string(e.what()).find("NCCL's: nccl-ring, nccl-tree; Open MPI's: mpi-default"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("; Gloo's: gloo-ring, gloo-ring-chunked"),
              std::string::npos)
        << e.what();
  }
}

TEST(CollectiveLibrary, OneRankPerGpuOnEachHost) {
  EXPECT_EQ(refusal("nccl-ring", {{"h1", "nccl", 0}, {"h1", "nccl", 1}, {"h2", "nccl", 0}}), "");
  EXPECT_EQ(refusal("nccl-ring", {{"h1", "nccl", 0}, {"h2", "nccl", 1}, {"h1", "nccl", 0}}),
            "nccl-ring: ranks 0 and 2 are both on device 0 of host h1; NCCL refuses two ranks "
            "on one GPU (ncclInvalidUsage): give each rank a device of its own (--device)");
  EXPECT_EQ(refusal("nccl-tree", {{"h1", "cuda", 3}, {"h1", "nccl", 3}}).substr(0, 48),
            "nccl-tree: ranks 0 and 1 are both on device 3 of");
}

TEST(CollectiveLibrary, NeedsGpuRanksWithADevice) {
  EXPECT_EQ(refusal("nccl-ring", {{"h1", "nccl", 0}, {"h1", "cpu", -1}}),
            "nccl-ring needs every rank on a GPU backend (cuda or nccl); rank 1 (host h1, "
            "backend cpu) is not: start the workers with --backend nccl");
  EXPECT_EQ(refusal("nccl-ring", {{"h1", "cuda", -1}}),
            "nccl-ring: rank 0 (host h1, backend cuda) has no device; NCCL runs one rank per "
            "GPU: start it with --device N");
}

TEST(CollectiveLibrary, TheNcclBackendRunsNoScheduleOfTheLabs) {
  EXPECT_EQ(refusal("ring", {{"h1", "cpu", -1}, {"h1", "cpu", -1}}), "");
  EXPECT_EQ(refusal("tree", {{"h1", "cuda", 0}, {"h1", "cuda", 0}}), "");  // cuda shares a GPU
  EXPECT_EQ(refusal("ring", {{"h1", "nccl", 0}, {"h1", "nccl", 1}}),
            "algorithm ring: rank 0 (host h1, backend nccl) runs nccl's own collectives only "
            "(nccl-ring, nccl-tree)");
}

TEST(CollectiveLibrary, AProgramWithoutNcclSaysSo) {
  if (collectiveLibraryRegistered("nccl")) GTEST_SKIP() << "this program registered NCCL";
  LibraryRunSpec spec;
  spec.algorithm = findLibraryAlgorithm("nccl-ring");
  try {
    (void)makeCollectiveLibrary(spec);
    FAIL() << "made a library this program does not have";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "nccl-ring needs a build with nccl (CUDA and NCCL, ARL_WITH_CUDA); this program "
              "has none");
  }
  EXPECT_THROW(
      registerCollectiveLibrary(
          "mesh", [](const LibraryRunSpec&) { return std::unique_ptr<CollectiveLibrary>(); }),
      ConfigError);
}

// A worker without Gloo's factory refuses a gloo-* run with the line that says how to get it.
TEST(CollectiveLibrary, AProgramWithoutGlooSaysSo) {
  if (collectiveLibraryRegistered("gloo")) GTEST_SKIP() << "this program registered Gloo";
  LibraryRunSpec spec;
  spec.algorithm = findLibraryAlgorithm("gloo-ring");
  try {
    (void)makeCollectiveLibrary(spec);
    FAIL() << "made a library this program does not have";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "gloo-ring needs a build with Gloo; this build has no Gloo (install libgloo-dev "
              "and rebuild)");
  }
}

TEST(CollectiveLibrary, ToleranceAcceptsCloseValuesOnly) {
  const float expected[] = {0.5f, 1.0f, -0.25f, 0.0f};
  float got[] = {0.5f, 1.0f, -0.25f, 0.0f};
  EXPECT_EQ(countWrongWithin(got, expected, DataType::Float, 4, 1e-6), 0u);
  got[1] = 1.0f + 4e-7f;  // within
  got[3] = 3e-7f;         // within, though its bits are far from +0's
  EXPECT_EQ(countWrongWithin(got, expected, DataType::Float, 4, 1e-6), 0u);
  EXPECT_EQ(countWrongWithin(got, expected, DataType::Float, 4, 0), 2u);  // bits: exact
  got[2] = -0.25f + 2e-6f;                                                // beyond
  EXPECT_EQ(countWrongWithin(got, expected, DataType::Float, 4, 1e-6), 1u);
  got[0] = std::numeric_limits<float>::infinity();  // an infinity is never close
  EXPECT_EQ(countWrongWithin(got, expected, DataType::Float, 4, 1e-6), 2u);
}

TEST(CollectiveLibrary, NamesOpenMpisAlgorithms) {
  for (const char* name :
       {"mpi-default", "mpi-linear", "mpi-nonoverlapping", "mpi-recursive-doubling", "mpi-ring",
        "mpi-segmented-ring", "mpi-rabenseifner"}) {
    const LibraryAlgorithm* a = findLibraryAlgorithm(name);
    ASSERT_NE(a, nullptr) << name;
    EXPECT_EQ(a->library, "mpi");
    EXPECT_TRUE(a->supports(Collective::AllReduce)) << name;
  }
  EXPECT_TRUE(findLibraryAlgorithm("mpi-default")->supports(Collective::Broadcast));
  EXPECT_FALSE(findLibraryAlgorithm("mpi-ring")->supports(Collective::ReduceScatter));
}

// Open MPI's ranks are workers mpirun started (backend mpi); those workers run the lab's own
// schedules too, unlike nccl's.
TEST(CollectiveLibrary, MpiRanksAreOnWorkersOfMpirun) {
  const std::vector<RankPlace> mpi = {{"h", "mpi", -1}, {"h", "mpi", -1}, {"h", "mpi", -1}};
  EXPECT_EQ(refusal("mpi-ring", mpi), "");
  EXPECT_EQ(refusal("ring", mpi), "");
  const std::vector<RankPlace> mixed = {{"h", "mpi", -1}, {"h", "cpu", -1}};
  const std::string why = refusal("mpi-ring", mixed);
  EXPECT_NE(why.find("rank 1"), std::string::npos) << why;
  EXPECT_NE(why.find("mpirun"), std::string::npos) << why;
  EXPECT_NE(refusal("ring", {{"h", "nccl", 0}}), "");
}

TEST(CollectiveLibrary, BackendListExpandsEachLabAlgorithmToTheEngines) {
  const BackendExpansion x =
      expandBackends({"cpu", "mpi"}, {"ring", "tree", "halving-doubling"}, Collective::AllReduce);
  EXPECT_EQ(x.algorithms, (std::vector<std::string>{"ring", "tree", "halving-doubling", "mpi-ring",
                                                    "mpi-rabenseifner"}));
  ASSERT_EQ(x.notes.size(), 1u);
  EXPECT_NE(x.notes[0].find("mpi has no tree"), std::string::npos) << x.notes[0];
  EXPECT_EQ(engineAlgorithm("mpi", "recursive-doubling"), "mpi-recursive-doubling");
  EXPECT_EQ(engineAlgorithm("mpi", "reduce-broadcast"), "mpi-nonoverlapping");
  EXPECT_EQ(engineAlgorithm("cpu", "ring"), "");
  EXPECT_TRUE(isEngineBackend("mpi"));
  EXPECT_FALSE(isEngineBackend("cpu"));
  // An engine's counterpart that lacks the collective is left out with a line.
  const BackendExpansion rs = expandBackends({"mpi"}, {"ring"}, Collective::ReduceScatter);
  EXPECT_TRUE(rs.algorithms.empty());
  ASSERT_EQ(rs.notes.size(), 1u);
  EXPECT_NE(rs.notes[0].find("reducescatter"), std::string::npos) << rs.notes[0];
  // A library algorithm named outright stays, once.
  EXPECT_EQ(expandBackends({"cpu", "mpi"}, {"mpi-linear"}, Collective::AllReduce).algorithms,
            (std::vector<std::string>{"mpi-linear"}));
}

TEST(CollectiveLibrary, RowBackendNamesTheEngineThatRan) {
  EXPECT_EQ(rowBackend("mpi-ring", "mpi"), "mpi");
  EXPECT_EQ(rowBackend("ring", "mpi"), "cpu");
  EXPECT_EQ(rowBackend("ring", "cpu"), "cpu");
  EXPECT_EQ(rowBackend("nccl-ring", "nccl"), "nccl");
  EXPECT_EQ(rowBackend("ring", "cuda"), "cuda");
}

}  // namespace
}  // namespace arl
