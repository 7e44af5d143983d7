#include "exec/collective_library.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <mutex>

#include "backend/registry.h"
#include "base/errors.h"

namespace arl {

namespace {

std::vector<LibraryAlgorithm> makeAlgorithms() {
  // NCCL runs every collective as a ring; its tree (a double binary tree, Sanders et al.,
  // "Two-tree algorithms for full bandwidth broadcast, reduction and scan", 2009) serves
  // all-reduce only (NCCL's tuning table, src/graph/tuning.cc, has no tree for the others).
  return {
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

}  // namespace

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
  return "a build with " + std::string(library) +
         " (CUDA and NCCL, ARL_WITH_CUDA); this program has none";
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
    if (library.empty() || a.library == library) s += (s.empty() ? "" : ", ") + std::string(a.name);
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
    if (a->memory == MemoryKind::Host) {
      checkHostLibraryPlaces(*a, places);
    } else {
      checkLibraryPlaces(*a, places);
    }
    return;
  }
  // A backend named after a library runs that library's collectives and nothing else.
  for (size_t i = 0; i < places.size(); ++i) {
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
