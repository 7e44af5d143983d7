// Cluster launchers: Open MPI's mpirun, Slurm's srun, or one ssh per worker start
// `allreduce-worker --connect ...` on other hosts for a lab that listens where they reach it
// (docs/hosts.md). The command lines are built here, apart from running them, so that tests
// check them; the coordinator runs and supervises them (launch_set.cpp). A worker learns where
// it was placed from its launcher's environment (launchPlacement) and says so in its Hello.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace arl {

enum class LauncherKind { Mpirun, Srun, Ssh };

// "mpirun", "srun", "ssh".
std::string_view launcherName(LauncherKind k);

// A host of the ssh launcher and the workers it runs ("node1:2").
struct SshHost {
  std::string host;   // a name or address ssh takes, user@ allowed
  int slotCount = 1;  // workers on it, 1..kMaxRanks (Qt reserves "slots")
  bool operator==(const SshHost&) const = default;
};

struct LaunchSpec {
  LauncherKind kind = LauncherKind::Mpirun;
  std::string program;             // the launcher's path; "" = its name, looked up on PATH
  std::string hostfile;            // mpirun --hostfile
  int tasks = 0;                   // mpirun -np, srun -n: the workers (0: srun's -N, else 1)
  int nodes = 0;                   // srun -N (0: not given)
  std::vector<SshHost> hosts;      // ssh
  std::vector<std::string> extra;  // the launcher's own arguments (mpirun --mca NAME VALUE)
  bool operator==(const LaunchSpec&) const = default;
};

// How many workers `spec` starts: mpirun's -np, srun's -n (else -N, else 1), the ssh hosts'
// slots together.
int launchedWorkers(const LaunchSpec& spec);

// The processes that start the workers, each an argv (the program first): one for mpirun and
// srun, one per worker for ssh. `worker` is the worker's argv as it runs on every host, its
// path first. mpirun gets --allow-run-as-root when `root` (Open MPI refuses root otherwise).
// An ssh worker's placement travels as ARL_LAUNCH_RANK / ARL_LAUNCH_LOCAL_RANK in the remote
// command, which ssh hands to the remote shell as one line (shellLine quotes it).
std::vector<std::vector<std::string>> launcherCommands(const LaunchSpec& spec,
                                                       const std::vector<std::string>& worker,
                                                       bool root);

// "a,b:2,user@c:4" -> hosts with their slots (1 when not given). Throws ConfigError naming
// the part that is not a host name with an optional slot count in 1..kMaxRanks.
std::vector<SshHost> parseSshHosts(std::string_view text);

// The slots of an Open MPI hostfile's text: one host a line, "HOST [slots=N] [max_slots=M]",
// '#' comments; a host without slots= counts 1, a host named twice counts twice (as mpirun
// adds them). What mpirun starts without -np. Throws ConfigError naming the line whose slots=
// is not a count in 1..kMaxRanks.
int hostfileSlots(std::string_view text);

// Where a launcher placed this process: rank in the launch and on its host, -1 when unknown.
struct LaunchPlacement {
  int rank = -1;
  int localRank = -1;
  // The node's name as Slurm placed the task (SLURMD_NODENAME), "" otherwise: several slurmd
  // of one machine are several nodes that share its host name.
  std::string host;
};

// From the launcher's environment, read through `env` (getenv's contract: nullptr when
// unset): Open MPI's OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_LOCAL_RANK, else Slurm's
// SLURM_PROCID / SLURM_LOCALID, else the ssh launcher's ARL_LAUNCH_RANK /
// ARL_LAUNCH_LOCAL_RANK; the host from SLURMD_NODENAME. Throws ConfigError naming the variable when
// a value is not a rank (0..kMaxRanks-1).
LaunchPlacement launchPlacement(const std::function<const char*(const char*)>& env);

}  // namespace arl
