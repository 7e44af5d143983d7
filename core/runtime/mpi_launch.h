// Starting workers of backend mpi: Open MPI's mpirun runs them, so that they share MPI's world
// (engines/mpi). The lab starts one mpirun for all its local workers; for workers on other
// machines it prints the line to run (mpirunCommandLine).
#pragma once

#include <string>
#include <vector>

namespace arl {

// The mpirun on PATH (the first executable file named mpirun), or "" when there is none.
std::string findMpirun();
// The first executable file called `name` in PATH's folders, or "" when there is none.
std::string findOnPath(const std::string& name);

// mpirun's command line for `n` workers running `worker` (the worker's argv, its path first):
// -np n, --oversubscribe (more workers than cores, as local workers often are),
// --enable-recovery (a worker that dies does not make mpirun kill the others: the lab names
// the rank that died, then ends the set itself), --allow-run-as-root when `root` (Open MPI
// refuses root otherwise), then `extra` (--mca btl LIST ...).
std::vector<std::string> mpirunCommand(const std::string& mpirun, int n, bool root,
                                       const std::vector<std::string>& extra,
                                       const std::vector<std::string>& worker);

// The same as one line for a shell, each argument quoted where it needs to be.
std::string shellLine(const std::vector<std::string>& argv);

}  // namespace arl
