// Child processes of the lab: spawning local workers that die with their parent, reaping
// them without blocking, and describing how they ended. POSIX (Linux) only.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace arl {

// How a child ended, as waitpid reported it.
struct ExitStatus {
  bool signaled = false;  // killed by a signal (then `signal` is set), else exited with `code`
  int code = 0;
  int signal = 0;
  // "exited with code 3", "killed by signal 9 (SIGKILL)".
  std::string describe() const;
};

// Starts `argv[0]` (a path) with arguments argv[1..]. The child gets PR_SET_PDEATHSIG =
// SIGTERM, so it ends when the spawning *thread* exits: spawn from the thread that owns the
// children for their whole life. SIGTERM rather than SIGKILL lets a worker take its
// shared-memory segments' names out of /dev/shm first; a child stopped (SIGSTOP) at that
// moment ends when it is continued. The child's stdin is /dev/null; stdout and stderr are
// inherited; file descriptors above 2 are closed. Returns the pid; throws std::system_error
// when fork fails. A failed exec shows up later as exit code 127.
int64_t spawnChild(const std::vector<std::string>& argv);

// Non-blocking: the child's status when it has ended (and is now reaped), else nullopt.
// Returns an ExitStatus with code -1 when `pid` is not (or no longer) our child.
std::optional<ExitStatus> tryReap(int64_t pid);

// SIGKILLs `pid` (also when it is stopped) and waits up to `timeout` for it to be reaped.
// Returns its status, or nullopt if it could not be reaped in time.
std::optional<ExitStatus> killAndReap(int64_t pid,
                                      std::chrono::milliseconds timeout = std::chrono::seconds(2));

// Waits up to `timeout` for `pid` to end by itself; returns its status when reaped.
std::optional<ExitStatus> waitFor(int64_t pid, std::chrono::milliseconds timeout);

// Whether a process with this pid exists (and is not a zombie).
bool processAlive(int64_t pid);

// The machine's host name (gethostname), "localhost" when it cannot be read.
std::string hostName();

// The local IPv4 address the kernel would use to reach `host` (a name or an address): a
// connected UDP socket sends nothing, but getsockname() then tells the route's source
// address. "" when `host` cannot be resolved or reached.
std::string localAddressToward(const std::string& host);

// A non-loopback IPv4 address of this machine, one that other machines can likely reach: the
// source address of the default route, else the host name's address; "" when there is none.
std::string hostAddress();

// Directory of the running executable (/proc/self/exe), without a trailing slash.
std::string selfExeDir();

// Finds allreduce-worker for a lab binary: `explicitPath` when not empty (must be an
// executable file), else "<exe dir>/../workers/allreduce-worker", then
// "<exe dir>/allreduce-worker". Returns the path, or an empty string when none is found.
std::string findWorkerBinary(const std::string& explicitPath = {});

}  // namespace arl
