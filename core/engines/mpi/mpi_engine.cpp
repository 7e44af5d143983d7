#include "engines/mpi/mpi_engine.h"

#include <malloc.h>
#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>

#include "backend/cpu/cpu_backend.h"
#include "backend/registry.h"
#include "base/errors.h"
#include "exec/collective_library.h"

namespace arl::mpi {

namespace {

bool gStarted = false;

struct TunedChoice {
  std::string_view algorithm;
  Collective collective;
  int number;
};

// coll_tuned's forced-algorithm numbers in Open MPI 4.1.4, as `ompi_info --param coll tuned
// --level 9` lists them: allreduce 1 basic_linear, 2 nonoverlapping, 3 recursive_doubling,
// 4 ring, 5 segmented_ring, 6 rabenseifner; reduce_scatter_block 1 basic_linear,
// 2 recursive_doubling; allgather 1 linear, 3 recursive_doubling, 4 ring; reduce 1 linear,
// 7 rabenseifner; bcast 1 basic_linear. 0 ("ignore") leaves the choice to Open MPI's fixed
// decision rules.
constexpr TunedChoice kTuned[] = {
    {"mpi-default", Collective::AllReduce, 0},
    {"mpi-default", Collective::ReduceScatter, 0},
    {"mpi-default", Collective::AllGather, 0},
    {"mpi-default", Collective::Reduce, 0},
    {"mpi-default", Collective::Broadcast, 0},
    {"mpi-linear", Collective::AllReduce, 1},
    {"mpi-linear", Collective::ReduceScatter, 1},
    {"mpi-linear", Collective::AllGather, 1},
    {"mpi-linear", Collective::Reduce, 1},
    {"mpi-linear", Collective::Broadcast, 1},
    {"mpi-nonoverlapping", Collective::AllReduce, 2},
    {"mpi-recursive-doubling", Collective::AllReduce, 3},
    {"mpi-recursive-doubling", Collective::ReduceScatter, 2},
    {"mpi-recursive-doubling", Collective::AllGather, 3},
    {"mpi-ring", Collective::AllReduce, 4},
    {"mpi-ring", Collective::AllGather, 4},
    {"mpi-segmented-ring", Collective::AllReduce, 5},
    {"mpi-rabenseifner", Collective::AllReduce, 6},
    {"mpi-rabenseifner", Collective::Reduce, 7},
};

std::string mpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

// Writes coll_tuned's integer control variable `name` (MPI_T); Open MPI reads it when the
// next communicator is made (coll_tuned's module enable takes the forced values then).
void writeControl(const std::string& name, int value) {
  int index = -1;
  if (MPI_T_cvar_get_index(name.c_str(), &index) != MPI_SUCCESS) {
    throw ConfigError("Open MPI has no control variable " + name +
                      " (its coll_tuned component is missing)");
  }
  MPI_T_cvar_handle handle = nullptr;
  int count = 0;
  if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) != MPI_SUCCESS) {
    throw ConfigError("Open MPI's control variable " + name + " cannot be opened");
  }
  const int rc = MPI_T_cvar_write(handle, &value);
  MPI_T_cvar_handle_free(&handle);
  if (rc != MPI_SUCCESS) {
    throw ConfigError("Open MPI refused " + name + " = " + std::to_string(value) +
                      " (MPI_T error " + std::to_string(rc) + ")");
  }
}

MPI_Datatype mpiType(DataType t) {
  switch (t) {
    case DataType::Float: return MPI_FLOAT;
    case DataType::Double: return MPI_DOUBLE;
    case DataType::Int32: return MPI_INT32_T;
    case DataType::Int64: return MPI_INT64_T;
    case DataType::Uint8: return MPI_UINT8_T;
    default: break;
  }
  ARL_ENFORCE(false, "no MPI type for " << toString(t));
  return MPI_DATATYPE_NULL;
}

MPI_Op mpiOp(RedOp op) {
  switch (op) {
    case RedOp::Sum: return MPI_SUM;
    case RedOp::Prod: return MPI_PROD;
    case RedOp::Min: return MPI_MIN;
    case RedOp::Max: return MPI_MAX;
    default: break;
  }
  ARL_ENFORCE(false, "no MPI op for " << toString(op));
  return MPI_OP_NULL;
}

// One rank's communicator for one run. MPI's blocking collectives cannot be interrupted:
// `cancel` is not looked at inside a call. A peer that dies leaves the others waiting in
// MPI; the coordinator then ends the whole mpirun (docs/engines.md, "When a worker dies").
class MpiLibrary final : public CollectiveLibrary {
 public:
  explicit MpiLibrary(const LibraryRunSpec& spec) : spec_(spec) {
    if (!gStarted) {
      throw PeerError(spec.rank, -1, -1,
                      std::string(spec.algorithm->name) +
                          " needs a worker started by mpirun with --backend mpi");
    }
    if (auto why = mpiRefuses(spec.dtype, spec.op)) {
      throw PeerError(spec.rank, -1, -1, std::string(spec.algorithm->name) + ": " + *why);
    }
    if (spec.count > static_cast<uint64_t>(INT_MAX)) {
      throw PeerError(spec.rank, -1, -1,
                      std::string(spec.algorithm->name) + ": " + std::to_string(spec.count) +
                          " elements exceed MPI's int count (" + std::to_string(INT_MAX) + ")");
    }
  }
  ~MpiLibrary() override {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }
  MpiLibrary(const MpiLibrary&) = delete;
  MpiLibrary& operator=(const MpiLibrary&) = delete;

  // MPI's world is the bootstrap: every worker mpirun started is already in it, so rank 0
  // has no token to pass and reports the endpoint of a member that binds nothing.
  std::string newBootstrap() override { return std::string(kLibraryMemberEndpoint); }

  void join(const std::string& /*bootstrap*/, const std::atomic<bool>& /*cancel*/) override {
    const int world = worldSize();
    if (world != spec_.nranks) {
      throw PeerError(spec_.rank, -1, -1,
                      "Open MPI's world has " + std::to_string(world) + " processes and the run " +
                          std::to_string(spec_.nranks) +
                          " ranks: an mpi run takes every worker of one mpirun");
    }
    const std::optional<int> forced = tunedAlgorithm(spec_.algorithm->name, spec_.collective);
    ARL_ENFORCE(forced.has_value(),
                spec_.algorithm->name << " has no " << toString(spec_.collective));
    try {
      writeControl(tunedVariable(spec_.collective), *forced);
    } catch (const ConfigError& e) {
      throw PeerError(spec_.rank, -1, -1, e.what());
    }
    check(MPI_Comm_split(MPI_COMM_WORLD, 0, spec_.rank, &comm_), "MPI_Comm_split");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    int rank = -1;
    MPI_Comm_rank(comm_, &rank);
    ARL_ENFORCE(rank == spec_.rank,
                "MPI_Comm_split gave rank " << rank << " to lab rank " << spec_.rank);
  }

  void run(const RankBuffers& b, const std::atomic<bool>& /*cancel*/) override {
    const int n = static_cast<int>(spec_.count);
    const MPI_Datatype t = mpiType(spec_.dtype);
    switch (spec_.collective) {
      case Collective::AllReduce:
        check(MPI_Allreduce(b.input, b.output, n, t, mpiOp(spec_.op), comm_), "MPI_Allreduce");
        break;
      case Collective::ReduceScatter:
        check(MPI_Reduce_scatter_block(b.input, b.output, n, t, mpiOp(spec_.op), comm_),
              "MPI_Reduce_scatter_block");
        break;
      case Collective::AllGather:
        check(MPI_Allgather(b.input, n, t, b.output, n, t, comm_), "MPI_Allgather");
        break;
      case Collective::Reduce:
        check(MPI_Reduce(b.input, b.output, n, t, mpiOp(spec_.op), spec_.root, comm_),
              "MPI_Reduce");
        break;
      case Collective::Broadcast:
        // MPI_Bcast works in place, NCCL's broadcast (whose buffers the lab keeps) from input
        // to output: the root copies its input first, inside the timed call.
        if (spec_.rank == spec_.root) {
          std::memcpy(b.output, b.input, spec_.count * dtypeSize(spec_.dtype));
        }
        check(MPI_Bcast(b.output, n, t, spec_.root, comm_), "MPI_Bcast");
        break;
    }
  }

  // The inputs are exact in every order (exec/check.h) and MPI has no average to round.
  double tolerance() const override { return 0; }

 private:
  static int worldSize() {
    int world = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    return world;
  }
  void check(int rc, const char* call) const {
    if (rc != MPI_SUCCESS) {
      throw PeerError(spec_.rank, -1, -1, std::string(call) + " failed: " + mpiErrorText(rc));
    }
  }

  LibraryRunSpec spec_;
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace

// Some of Open MPI's algorithms take a temporary buffer as large as the message from malloc on
// every call (Rabenseifner's: 16 MiB for a 16 MiB all-reduce). The worker calls MPI from its
// run thread, whose glibc arena is made of 64 MiB heaps: each call's buffer got a heap of its
// own, which free() gave back to the kernel, so every call page-faulted its buffer afresh
// (strace of a rank at 16 MiB: one mmap and two munmap per call, process_vm_readv at 8.2 ms a
// call against 0.86 ms once the buffer stays). One arena, no mmap for large blocks and no
// trimming keep the buffer from call to call, as a single-threaded MPI program run with
// MALLOC_MMAP_MAX_=0 and a large MALLOC_TRIM_THRESHOLD_ keeps it. Called before any thread
// starts; the price is that the worker keeps its largest heap until it exits.
namespace {
void keepLargeBlocks() {
  ::mallopt(M_ARENA_MAX, 1);
  ::mallopt(M_MMAP_MAX, 0);
  ::mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
}
}  // namespace

bool launchedByMpirun() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr; }

void startMpi() {
  ARL_ENFORCE(!gStarted, "startMpi() twice");
  // Without dynamic rules coll_tuned ignores the forced algorithms; with them and nothing
  // forced ("ignore") it falls back to its fixed decision rules, Open MPI's default. The
  // variable is read once, at MPI_Init (MPI_T cannot write it later), so it goes in the
  // environment first, unless the user set it.
  ::setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 0);
  keepLargeBlocks();
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    throw ConfigError("MPI_Init_thread failed");
  }
  gStarted = true;
  if (provided < MPI_THREAD_SERIALIZED) {
    throw ConfigError("Open MPI gives thread level " + std::to_string(provided) +
                      "; the worker calls MPI from its run thread (MPI_THREAD_SERIALIZED)");
  }
  if (MPI_T_init_thread(MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    throw ConfigError("MPI_T_init_thread failed: Open MPI's algorithms cannot be chosen");
  }
  registerBackend("mpi", [] { return std::unique_ptr<Backend>(std::make_unique<CpuBackend>()); });
  registerCollectiveLibrary("mpi", [](const LibraryRunSpec& spec) {
    return std::unique_ptr<CollectiveLibrary>(std::make_unique<MpiLibrary>(spec));
  });
}

void stopMpi(bool clean) {
  if (!gStarted) return;
  MPI_T_finalize();
  if (clean) MPI_Finalize();
  gStarted = false;
}

std::optional<int> tunedAlgorithm(std::string_view algorithm, Collective c) {
  for (const TunedChoice& t : kTuned) {
    if (t.algorithm == algorithm && t.collective == c) return t.number;
  }
  return std::nullopt;
}

std::string tunedVariable(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "coll_tuned_allreduce_algorithm";
    case Collective::ReduceScatter: return "coll_tuned_reduce_scatter_block_algorithm";
    case Collective::AllGather: return "coll_tuned_allgather_algorithm";
    case Collective::Reduce: return "coll_tuned_reduce_algorithm";
    case Collective::Broadcast: return "coll_tuned_bcast_algorithm";
  }
  return {};
}

std::optional<std::string> mpiRefuses(DataType t, RedOp op) {
  if (t == DataType::Half || t == DataType::BFloat16) {
    return "Open MPI has no " + std::string(toString(t)) +
           " type (MPI 4.1 defines none): use float, double, int32, int64 or uint8";
  }
  if (op == RedOp::Avg) return "Open MPI has no average operator (MPI_Op): use sum";
  return std::nullopt;
}

}  // namespace arl::mpi
