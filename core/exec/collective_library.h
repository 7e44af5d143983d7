// Collective libraries: code that runs a whole collective itself on device buffers (NCCL),
// beside the lab's own schedules, so that the tables can show a vendor's reference next to
// the lab's ring and tree. A run whose algorithm is a library algorithm ("nccl-ring") has no
// schedule and no data plane of the lab's: the worker hands its buffers (filled and checked
// as for every run: exec/check.h) to the library, which moves and reduces the bytes, and each
// iteration is timed whole. A library gives no per-chunk telemetry of the lab's; what it
// reports about itself (NCCL's profiler events, exec/nccl_events.h) it records through
// collectEvents(), labelled as its own.
//
// The library itself comes with the GPU library (gpu/) for NCCL, or with an engine of host
// memory (engines/mpi for Open MPI), which registers it at start-up in the worker, as it
// registers its backends (backend/registry.h); core knows only the names, which collectives
// each algorithm implements, and where its ranks may run (checkPlaces).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "base/types.h"
#include "exec/executor.h"
#include "exec/telemetry.h"
#include "schedule/schedule.h"

namespace arl {

struct LibraryAlgorithm {
  std::string_view name;                // what users type and tables show: "nccl-ring"
  std::string_view library;             // the library that runs it: "nccl"
  std::string_view variant;             // the library's own name for it: "Ring" (NCCL_ALGO)
  std::string_view summary;             // one line for --help
  std::vector<Collective> collectives;  // what it implements
  // Where its buffers live: device memory (NCCL: cuda or nccl workers) or host memory (Gloo:
  // cpu workers).
  MemoryKind memory = MemoryKind::Host;
  bool supports(Collective c) const;
};

// Every library algorithm, in display order (nccl-ring, nccl-tree, mpi-default, ..., gloo-ring,
// ...).
std::span<const LibraryAlgorithm> libraryAlgorithms();
// The library algorithm called `name`, or null (the lab's own algorithms are not).
const LibraryAlgorithm* findLibraryAlgorithm(std::string_view name);
// "nccl-ring, nccl-tree, mpi-default, ...": those of `library` alone when it is given.
std::string libraryAlgorithmList(std::string_view library = {});

// bench's --backend list (cpu,mpi,...): each engine backend stands in for the lab's algorithms
// it has one of. The engine's algorithm for lab algorithm `lab` on backend `backend` ("mpi",
// "ring": "mpi-ring"), or "" when the engine has none.
std::string_view engineAlgorithm(std::string_view backend, std::string_view lab);
// Whether `backend` is an engine of the list (it has an entry in engineAlgorithm's table).
bool isEngineBackend(std::string_view backend);

// The algorithms a sweep over backends `backends` runs for the lab's algorithms `lab`: cpu
// (or any backend that is no engine) runs them as they are, each engine its own for each;
// one note per lab algorithm an engine has not for collective `c` ("mpi has no tree: left
// out of its rows").
struct BackendExpansion {
  std::vector<std::string> algorithms;  // in the order of the backends, then of `lab`
  std::vector<std::string> notes;
};
BackendExpansion expandBackends(const std::vector<std::string>& backends,
                                const std::vector<std::string>& lab, Collective c);

// What a row's backend column says: the library that ran `algorithm` ("mpi", "nccl"), or
// else the workers' backend, where workers of backend mpi run the lab's schedules on cpu.
std::string rowBackend(std::string_view algorithm, std::string_view workerBackend);

// The buffers a library collective needs on each rank, as a schedule without ops: the
// collective, ranks, count, root and the per-rank Input and Output sizes (NCCL's
// conventions, schedule.h). RankRun allocates and checks from it as from any schedule.
Schedule libraryShape(std::string_view algorithm, Collective c, int nranks, uint64_t count,
                      int root);

// Why this build cannot run library `library`'s algorithms ("this build has no Gloo (install
// libgloo-dev and rebuild)"), or nullopt. NCCL's are asked with their backend instead
// (backendUnavailable).
std::optional<std::string> libraryMissing(std::string_view library);
// What a program needs to run library `library`'s algorithms, for a refusal: "a build with
// Gloo; this build has no Gloo (install libgloo-dev and rebuild)".
std::string libraryBuildHint(std::string_view library);

// Where a rank runs, as the coordinator knows it from the rank's Hello.
struct RankPlace {
  std::string host;
  std::string backend;
  int device = -1;  // -1: not tied to a device
};

// Throws ConfigError, naming the ranks, when `algorithm` cannot run on ranks placed at
// `places` (rank order):
//  - a Gloo algorithm needs every rank on a backend with host memory (cpu, or mpi's workers),
//    and gloo-bcube a power-of-two rank count;
//  - an NCCL algorithm needs every rank on a backend with device memory (cuda, nccl), each
//    on a device of its own: NCCL refuses two ranks on one GPU (ncclInvalidUsage, "Duplicate
//    GPU detected"), so two ranks of one host on one device index are refused here, before
//    any worker is touched;
//  - Open MPI's (mpi-*) need every rank on backend mpi: a worker mpirun started, host memory;
//  - the lab's own algorithms need a backend that runs schedules: the nccl backend runs
//    NCCL's collectives only (the mpi backend runs both).
void checkPlaces(std::string_view algorithm, const std::vector<RankPlace>& places);

// The key-value store of one run that a library's ranks rendezvous through (Gloo's
// gloo::rendezvous::Store), shared by every rank of the run and gone when the run ends. On a
// worker it lives on the coordinator (runtime/control_store.h). Called from the rank's run
// thread only.
class RendezvousStore {
 public:
  virtual ~RendezvousStore() = default;
  // Sets `key` (an identifier: printable ASCII without spaces) for every rank. Throws
  // PeerError naming the rank when the store refuses it (too many keys, a value too large).
  virtual void set(const std::string& key, const std::string& value) = 0;
  // The value of `key`, waiting until a rank has set it. Throws PeerError naming the rank and
  // the key after `timeout`, or once `cancel` is true.
  virtual std::string get(const std::string& key, std::chrono::milliseconds timeout,
                          const std::atomic<bool>& cancel) = 0;
};

// What one rank's library needs to know about its run.
struct LibraryRunSpec {
  const LibraryAlgorithm* algorithm = nullptr;
  Collective collective = Collective::AllReduce;
  DataType dtype = DataType::Float;
  RedOp op = RedOp::Sum;
  uint64_t count = 0;  // NCCL API count
  int root = 0;
  int rank = 0;
  int nranks = 1;
  int device = -1;  // the rank's device index (-1: the device current on this thread)
  // What the library reports about itself: nothing at Off (exec/telemetry.h's levels).
  TelemetryLevel telemetry = TelemetryLevel::Off;
  // The timed calls after the warm-up ones; the calls after them are the check's further
  // iterations (RankRunOptions::check), whose events are not recorded.
  uint32_t timed = UINT32_MAX;
  // For a library that rendezvous through a store and connects its ranks itself (Gloo): the
  // run's store, the address its transport binds and advertises (the one the lab's data
  // plane would use: loopback when every rank is on this host), and how long it waits for a
  // peer before it gives up (the run's liveness bound, heartbeat interval x liveness).
  RendezvousStore* store = nullptr;
  std::string hostAddress = "127.0.0.1";
  std::chrono::milliseconds timeout{1000};
};

// What one collectEvents() call did with the library's own events.
struct LibraryEventCounts {
  uint64_t recorded = 0;      // handed to the sink
  uint64_t warmup = 0;        // of untimed calls (warm-up, -c's further checks): left out
  uint64_t dropped = 0;       // lost inside the library's reporting (a full queue, no handle)
  uint64_t unattributed = 0;  // belonging to no call of the run the library knew: left out
  LibraryEventCounts& operator+=(const LibraryEventCounts& o) {
    recorded += o.recorded;
    warmup += o.warmup;
    dropped += o.dropped;
    unattributed += o.unattributed;
    return *this;
  }
};

// The endpoint a rank other than 0 reports in Ready for a library run: it binds nothing.
inline constexpr std::string_view kLibraryMemberEndpoint = "nccl://member";

// One rank's library for one run. Made, used and destroyed on the rank's run thread; every
// call that waits for other ranks looks at `cancel` every few milliseconds and throws
// PeerError(rank, -1, -1, "run aborted ...") once it is true.
class CollectiveLibrary {
 public:
  virtual ~CollectiveLibrary() = default;
  // Rank 0, before Ready: a new bootstrap token (NCCL's unique id) as an endpoint the control
  // protocol carries ("nccl://id/..."). Throws PeerError when the library cannot make one.
  virtual std::string newBootstrap() = 0;
  // Every rank but 0, before Ready: what it reports as its endpoint (it binds nothing the
  // control protocol carries).
  virtual std::string memberEndpoint() { return std::string(kLibraryMemberEndpoint); }
  // Every rank, after Start: joins the communicator that rank 0's token names, with every
  // other rank. Throws PeerError naming what the library said.
  virtual void join(const std::string& bootstrap, const std::atomic<bool>& cancel) = 0;
  // One collective over `b` (RankRun's buffers, device memory), complete on return.
  virtual void run(const RankBuffers& b, const std::atomic<bool>& cancel) = 0;
  // The largest difference from the expected element the check allows for this run: 0
  // (identical bits) unless the library's arithmetic legitimately differs from the lab's.
  virtual double tolerance() const = 0;
  // Records into `sink` the library's own events reported since the last call, as telemetry
  // on the coordinator's clock (the worker's plus `clockOffsetNs`); those of the run's first
  // `warmup` calls are left out. `final`: the run's last collective has completed; the
  // library first ends its communicator, so that every event it will report is in. On the
  // rank's run thread (the sink's one producer), between iterations. Never throws.
  virtual LibraryEventCounts collectEvents(TelemetrySink& /*sink*/, uint32_t /*warmup*/,
                                           int64_t /*clockOffsetNs*/, bool /*final*/) {
    return {};
  }
};

using CollectiveLibraryFactory =
    std::function<std::unique_ptr<CollectiveLibrary>(const LibraryRunSpec&)>;

// Says how to make library `library` ("nccl"): called once at start-up by the code that
// implements it. Throws ConfigError for a library no algorithm names.
void registerCollectiveLibrary(std::string_view library, CollectiveLibraryFactory make);
// Whether this program can make library `library`.
bool collectiveLibraryRegistered(std::string_view library);
// A new library for `spec`. Throws ConfigError when this program has none registered.
std::unique_ptr<CollectiveLibrary> makeCollectiveLibrary(const LibraryRunSpec& spec);

}  // namespace arl
