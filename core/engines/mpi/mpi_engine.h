// Open MPI as a collective library (exec/collective_library.h): the lab's mpi-* algorithms run
// MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather, MPI_Reduce and MPI_Bcast on the
// rank's host buffers. The worker must have been started by mpirun (the coordinator launches
// its local workers so for --backend mpi); it joins MPI's world once at start-up and leaves it
// at exit. Each run makes a communicator of its own with MPI_Comm_split (key: the lab rank,
// so that the lab's rank is the communicator's), after forcing the run's algorithm through
// coll_tuned's control variables (MPI_T), which Open MPI reads when a communicator is made:
// so the algorithm changes from run to run without relaunching mpirun.
#pragma once

#include <optional>
#include <string>

#include "base/types.h"

namespace arl::mpi {

// Whether this process was started by Open MPI's mpirun (OMPI_COMM_WORLD_SIZE is set).
bool launchedByMpirun();

// MPI_Init_thread (MPI_THREAD_SERIALIZED: one run thread at a time calls MPI) and MPI_T's
// init, then registers the backend "mpi" (host memory, the CPU's kernels for the lab's own
// schedules) and the collective library "mpi". Call once, on the main thread, under mpirun.
// Throws ConfigError when MPI cannot give what the worker needs.
void startMpi();
// MPI_Finalize, when startMpi() ran. `clean`: every process of the world leaves now too;
// otherwise (a worker leaving alone) MPI_Finalize could wait for the others, so it is skipped
// and mpirun, started with --enable-recovery, lets the rest go on.
void stopMpi(bool clean);

// Open MPI's coll_tuned algorithm number that `algorithm` ("mpi-ring") forces for collective
// `c` (0: Open MPI's own choice), or nullopt when that algorithm does not implement `c`.
// The numbers are coll_tuned's enumerations in Open MPI 4.1 (ompi_info --param coll tuned
// --level 9).
std::optional<int> tunedAlgorithm(std::string_view algorithm, Collective c);
// coll_tuned's control variable for collective `c`: "coll_tuned_allreduce_algorithm".
std::string tunedVariable(Collective c);

// nullopt when Open MPI reduces `t` with `op` exactly as the lab does; else why not, in one
// line ("Open MPI has no half-precision type").
std::optional<std::string> mpiRefuses(DataType t, RedOp op);

}  // namespace arl::mpi
