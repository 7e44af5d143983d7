#include "exec/collective_library.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <mutex>

#include "backend/registry.h"
#include "base/errors.h"

namespace arl {

namespace {

// Open MPI's algorithms, each forced through coll_tuned's control variables for the
// collectives it has there (engines/mpi/mpi_engine.cpp holds the numbers). Thakur,
// Rabenseifner and Gropp, "Optimization of collective communication operations in MPICH"
// (2005), describe the recursive-doubling, ring and Rabenseifner (reduce-scatter then
// all-gather) algorithms that Open MPI's coll/base implements.
std::vector<LibraryAlgorithm> mpiAlgorithms() {
  const std::vector<Collective> all(std::begin(kAllCollectives), std::end(kAllCollectives));
  using C = Collective;
  return {
      {"mpi-default", "mpi", "ignore", "Open MPI's own choice (coll_tuned's fixed rules)", all},
      {"mpi-linear", "mpi", "basic_linear", "Open MPI's linear algorithms (to and from rank 0)",
       all},
      {"mpi-nonoverlapping",
       "mpi",
       "nonoverlapping",
       "Open MPI's reduce then broadcast, all-reduce only",
       {C::AllReduce}},
      {"mpi-recursive-doubling",
       "mpi",
       "recursive_doubling",
       "Open MPI's recursive doubling (all-reduce, reduce-scatter, all-gather)",
       {C::AllReduce, C::ReduceScatter, C::AllGather}},
      {"mpi-ring",
       "mpi",
       "ring",
       "Open MPI's ring (all-reduce, all-gather)",
       {C::AllReduce, C::AllGather}},
      {"mpi-segmented-ring",
       "mpi",
       "segmented_ring",
       "Open MPI's segmented ring, all-reduce only",
       {C::AllReduce}},
      {"mpi-rabenseifner",
       "mpi",
       "rabenseifner",
       "Open MPI's Rabenseifner: reduce-scatter then all-gather (all-reduce, reduce)",
       {C::AllReduce, C::Reduce}},
  };
}

std::vector<LibraryAlgorithm> makeAlgorithms() {
  // NCCL runs every collective as a ring; its tree (a double binary tree, Sanders et al.,
  // "Two-tree algorithms for full bandwidth broadcast, reduction and scan", 2009) serves
  // all-reduce only (NCCL's tuning table, src/graph/tuning.cc, has no tree for the others).
  std::vector<LibraryAlgorithm> list = {
      {"nccl-ring",
       "nccl",
       "Ring",
       "NCCL's ring (NCCL_ALGO=Ring), timed whole",
       {std::begin(kAllCollectives), std::end(kAllCollectives)},
       MemoryKind::Device},
      {"nccl-tree",
       "nccl",
       "Tree",
       "NCCL's double binary tree (NCCL_ALGO=Tree), all-reduce only",
       {Collective::AllReduce},
       MemoryKind::Device},
      // Gloo's classes (gloo/allreduce_*.h, reduce_scatter.h) and its one allgather, reduce
      // and broadcast (gloo/allgather.h, reduce.h, broadcast.h), shown under gloo-ring.
      {"gloo-ring",
       "gloo",
       "AllreduceRing",
       "Gloo's AllreduceRing on cpu workers, timed whole; also Gloo's allgather, reduce and "
       "broadcast",
       {Collective::AllReduce, Collective::AllGather, Collective::Reduce, Collective::Broadcast}},
      {"gloo-ring-chunked",
       "gloo",
       "AllreduceRingChunked",
       "Gloo's AllreduceRingChunked on cpu workers, timed whole; all-reduce only",
       {Collective::AllReduce}},
      {"gloo-halving-doubling",
       "gloo",
       "AllreduceHalvingDoubling",
       "Gloo's AllreduceHalvingDoubling on cpu workers, timed whole; reduce-scatter with "
       "ReduceScatterHalvingDoubling",
       {Collective::AllReduce, Collective::ReduceScatter}},
      {"gloo-bcube",
       "gloo",
       "AllreduceBcube",
       "Gloo's AllreduceBcube (base 2) on cpu workers, timed whole; all-reduce only, a "
       "power-of-two rank count",
       {Collective::AllReduce}},
  };
  for (LibraryAlgorithm& a : mpiAlgorithms()) list.push_back(std::move(a));
  return list;
}

const std::vector<LibraryAlgorithm>& algorithms() {
  static const std::vector<LibraryAlgorithm> a = makeAlgorithms();
  return a;
}

struct Factories {
  std::mutex mu;
  std::map<std::string, CollectiveLibraryFactory, std::less<>> byName;
};

Factories& factories() {
  static Factories f;
  return f;
}

std::string rankAt(int r, const RankPlace& p) {
  return "rank " + std::to_string(r) + " (host " + p.host + ", backend " + p.backend + ")";
}

// Open MPI's ranks: workers mpirun started, which say so with their backend.
void checkMpiPlaces(const LibraryAlgorithm& a, const std::vector<RankPlace>& places) {
  for (size_t i = 0; i < places.size(); ++i) {
    if (places[i].backend == "mpi") continue;
    throw ConfigError(std::string(a.name) + " needs every rank on a worker started by mpirun (" +
                      "--backend mpi); " + rankAt(static_cast<int>(i), places[i]) + " is not");
  }
}

// A host-memory library's ranks (Gloo): cpu workers; and for AllreduceBcube with base 2 a
// power-of-two count: its exchange pairs ranks base^k apart (gloo/allreduce_bcube.h,
// computeSteps) and has no step for a rank count in between.
void checkHostLibraryPlaces(const LibraryAlgorithm& a, const std::vector<RankPlace>& places) {
  for (size_t i = 0; i < places.size(); ++i) {
    const BackendInfo* b = findBackend(places[i].backend);
    if (b == nullptr || b->memory != MemoryKind::Host) {
      throw ConfigError(std::string(a.name) + " needs every rank on a cpu worker (" +
                        std::string(a.library) + " works on host memory); " +
                        rankAt(static_cast<int>(i), places[i]) +
                        " is not: start the workers with --backend cpu");
    }
  }
  const size_t n = places.size();
  if (a.name == "gloo-bcube" && (n == 0 || (n & (n - 1)) != 0)) {
    throw ConfigError(
        "gloo-bcube runs on a power-of-two number of ranks (Gloo's AllreduceBcube "
        "with base 2); this run has " +
        std::to_string(n));
  }
}

// The library algorithm's ranks: device memory, one device each.
void checkLibraryPlaces(const LibraryAlgorithm& a, const std::vector<RankPlace>& places) {
  if (a.library == "mpi") {
    checkMpiPlaces(a, places);
    return;
  }
  std::map<std::pair<std::string, int>, int> owner;  // (host, device) -> first rank there
  for (size_t i = 0; i < places.size(); ++i) {
    const RankPlace& p = places[i];
    const int r = static_cast<int>(i);
    const BackendInfo* b = findBackend(p.backend);
    if (b == nullptr || b->memory != MemoryKind::Device) {
      throw ConfigError(std::string(a.name) + " needs every rank on a GPU backend (cuda or " +
                        std::string(a.library) + "); " + rankAt(r, p) +
                        " is not: start the workers with --backend " + std::string(a.library));
    }
    if (p.device < 0) {
      throw ConfigError(std::string(a.name) + ": " + rankAt(r, p) +
                        " has no device; NCCL runs one rank per GPU: start it with --device N");
    }
    const auto [it, fresh] = owner.emplace(std::make_pair(p.host, p.device), r);
    if (!fresh) {
      throw ConfigError(std::string(a.name) + ": ranks " + std::to_string(it->second) + " and " +
                        std::to_string(r) + " are both on device " + std::to_string(p.device) +
                        " of host " + p.host +
                        "; NCCL refuses two ranks on one GPU (ncclInvalidUsage): give each "
                        "rank a device of its own (--device)");
    }
  }
}

struct EngineChoice {
  std::string_view backend;
  std::string_view lab;     // the lab's algorithm
  std::string_view engine;  // the engine's that does the same job
};

// Open MPI's counterparts of the lab's algorithms: its Rabenseifner is reduce-scatter by
// recursive halving then all-gather by recursive doubling, the lab's halving-doubling; its
// nonoverlapping all-reduce is a reduce then a broadcast, the lab's reduce-broadcast.
constexpr EngineChoice kEngineChoices[] = {
    {"mpi", "ring", "mpi-ring"},
    {"mpi", "halving-doubling", "mpi-rabenseifner"},
    {"mpi", "recursive-doubling", "mpi-recursive-doubling"},
    {"mpi", "reduce-broadcast", "mpi-nonoverlapping"},
    {"gloo", "ring", "gloo-ring"},
    {"gloo", "halving-doubling", "gloo-halving-doubling"},
};

}  // namespace

std::string_view engineAlgorithm(std::string_view backend, std::string_view lab) {
  for (const EngineChoice& e : kEngineChoices) {
    if (e.backend == backend && e.lab == lab) return e.engine;
  }
  return {};
}

bool isEngineBackend(std::string_view backend) {
  return std::any_of(std::begin(kEngineChoices), std::end(kEngineChoices),
                     [&](const EngineChoice& e) { return e.backend == backend; });
}

BackendExpansion expandBackends(const std::vector<std::string>& backends,
                                const std::vector<std::string>& lab, Collective c) {
  BackendExpansion x;
  const auto add = [&](const std::string& a) {
    if (std::find(x.algorithms.begin(), x.algorithms.end(), a) == x.algorithms.end()) {
      x.algorithms.push_back(a);
    }
  };
  for (const std::string& b : backends) {
    for (const std::string& a : lab) {
      if (!isEngineBackend(b) || findLibraryAlgorithm(a) != nullptr) {
        add(a);
        continue;
      }
      const std::string_view e = engineAlgorithm(b, a);
      const LibraryAlgorithm* lib = findLibraryAlgorithm(e);
      if (lib != nullptr && lib->supports(c)) {
        add(std::string(e));
      } else {
        x.notes.push_back(b + " has no " + a + " for " + std::string(toString(c)) +
                          ": left out of its rows");
      }
    }
  }
  return x;
}

std::string rowBackend(std::string_view algorithm, std::string_view workerBackend) {
  if (const LibraryAlgorithm* a = findLibraryAlgorithm(algorithm)) return std::string(a->library);
  return workerBackend == "mpi" ? "cpu" : std::string(workerBackend);
}

constexpr std::string_view kNoGloo = "this build has no Gloo (install libgloo-dev and rebuild)";

std::optional<std::string> libraryMissing(std::string_view library) {
#if ARL_HAVE_GLOO
  constexpr bool kGloo = true;
#else
  constexpr bool kGloo = false;
#endif
  if (library == "gloo" && !kGloo) return std::string(kNoGloo);
  return std::nullopt;
}

std::string libraryBuildHint(std::string_view library) {
  if (library == "gloo") return "a build with Gloo; " + std::string(kNoGloo);
  const BackendInfo* b = findBackend(library);
  const std::string what =
      b != nullptr ? " (" + std::string(b->needs) + ", " + std::string(b->buildFlag) + ")" : "";
  return "a build with " + std::string(library) + what + "; this program has none";
}

bool LibraryAlgorithm::supports(Collective c) const {
  return std::find(collectives.begin(), collectives.end(), c) != collectives.end();
}

std::span<const LibraryAlgorithm> libraryAlgorithms() { return algorithms(); }

const LibraryAlgorithm* findLibraryAlgorithm(std::string_view name) {
  for (const LibraryAlgorithm& a : algorithms()) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

std::string libraryAlgorithmList(std::string_view library) {
  std::string s;
  for (const LibraryAlgorithm& a : algorithms()) {
    if (!library.empty() && a.library != library) continue;
    s += (s.empty() ? "" : ", ") + std::string(a.name);
  }
  return s;
}

Schedule libraryShape(std::string_view algorithm, Collective c, int nranks, uint64_t count,
                      int root) {
  Schedule s;
  s.algorithm = std::string(algorithm);
  s.collective = c;
  s.nranks = nranks;
  s.root = root;
  s.count = count;
  s.inputElems = inputElemsFor(c, nranks, count);
  s.outputElems = outputElemsFor(c, nranks, count);
  s.ranks.resize(static_cast<size_t>(std::max(nranks, 0)));
  return s;
}

void checkPlaces(std::string_view algorithm, const std::vector<RankPlace>& places) {
  if (const LibraryAlgorithm* a = findLibraryAlgorithm(algorithm)) {
    if (a->memory == MemoryKind::Host && a->library != "mpi") {
      checkHostLibraryPlaces(*a, places);
    } else {
      checkLibraryPlaces(*a, places);
    }
    return;
  }
  // A device backend named after a library (nccl) runs that library's collectives and nothing
  // else; mpi's workers hold host memory and run the lab's schedules on the CPU as well.
  for (size_t i = 0; i < places.size(); ++i) {
    const BackendInfo* b = findBackend(places[i].backend);
    if (b == nullptr || b->memory != MemoryKind::Device) continue;
    for (const LibraryAlgorithm& a : algorithms()) {
      if (places[i].backend != a.library) continue;
      throw ConfigError("algorithm " + std::string(algorithm) + ": " +
                        rankAt(static_cast<int>(i), places[i]) + " runs " + std::string(a.library) +
                        "'s own collectives only (" + libraryAlgorithmList(a.library) + ")");
    }
  }
}

void registerCollectiveLibrary(std::string_view library, CollectiveLibraryFactory make) {
  ARL_ENFORCE(static_cast<bool>(make), "registerCollectiveLibrary(" << library
                                                                    << ") without a "
                                                                       "factory");
  const bool known = std::any_of(algorithms().begin(), algorithms().end(),
                                 [&](const LibraryAlgorithm& a) { return a.library == library; });
  if (!known) {
    throw ConfigError("registerCollectiveLibrary: no algorithm runs on library '" +
                      std::string(library) + "'");
  }
  Factories& f = factories();
  std::lock_guard<std::mutex> lock(f.mu);
  f.byName[std::string(library)] = std::move(make);
}

bool collectiveLibraryRegistered(std::string_view library) {
  Factories& f = factories();
  std::lock_guard<std::mutex> lock(f.mu);
  return f.byName.find(library) != f.byName.end();
}

std::unique_ptr<CollectiveLibrary> makeCollectiveLibrary(const LibraryRunSpec& spec) {
  ARL_ENFORCE(spec.algorithm != nullptr, "a library run without its algorithm");
  CollectiveLibraryFactory make;
  {
    Factories& f = factories();
    std::lock_guard<std::mutex> lock(f.mu);
    const auto it = f.byName.find(spec.algorithm->library);
    if (it != f.byName.end()) make = it->second;
  }
  if (!make) {
    throw ConfigError(std::string(spec.algorithm->name) + " needs " +
                      libraryBuildHint(spec.algorithm->library));
  }
  return make(spec);
}

}  // namespace arl
