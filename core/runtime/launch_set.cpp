// The coordinator's cluster launchers (coordinator_impl.h, Launcher): mpirun, srun or ssh
// processes that start the remote workers on other hosts. They are this thread's children, so
// they end with it (PR_SET_PDEATHSIG); the lab watches them so that a launcher that fails
// before its workers join is named at once instead of after the join timeout. That failure
// reaches the client as a WorkerLeft that never joined, which the client reports: it is not
// logged besides.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "runtime/coordinator_impl.h"
#include "runtime/mpi_launch.h"

namespace arl {

using coord::kShutdownWait;
using coord::leaveReason;
using std::chrono::milliseconds;

namespace {

// "ssh node1" for one of the ssh launcher's processes, the program's name otherwise.
std::string launcherLabel(const LaunchSpec& spec, const std::vector<std::string>& argv) {
  std::string name(launcherName(spec.kind));
  if (spec.kind == LauncherKind::Ssh && argv.size() >= 2) name += " " + argv[argv.size() - 2];
  return name;
}

}  // namespace

void Coordinator::Impl::planLaunchers() {
  if (!opt.launch) return;
  // The lab's own key pair admits the workers: on a cluster the keys folder is shared (the
  // same path on every host), as the worker binary is.
  std::vector<std::string> worker = {workerBinary, "--connect", remoteEndpoint, "--backend",
                                     opt.backend};
  const auto keyed = keyArgs();
  worker.insert(worker.end(), keyed.begin(), keyed.end());
  launchArgv = launcherCommands(*opt.launch, worker, ::geteuid() == 0);
}

void Coordinator::Impl::startLaunchers() {
  for (const auto& argv : launchArgv) {
    const std::string name = launcherLabel(*opt.launch, argv);
    try {
      const int64_t pid = spawnChild(argv);
      launchers.push_back({pid, name});
      log(0, "started " + name + " (pid " + std::to_string(pid) + "): " + shellLine(argv));
    } catch (const std::exception& e) {
      WorkerLeft left;
      left.joined = false;
      left.reason = {LeaveKind::Exited, -1, name + " could not be started: " + e.what()};
      emit(std::move(left));
    }
  }
}

void Coordinator::Impl::watchLaunchers() {
  for (coord::Launcher& l : launchers) {
    if (l.pid == 0) continue;
    const auto st = tryReap(l.pid);
    if (!st) continue;
    const std::string what = l.name + " (pid " + std::to_string(l.pid) +
                             "), a launcher of the remote workers, " + st->describe();
    l.pid = 0;
    const int joined = static_cast<int>(
        std::count_if(peers.begin(), peers.end(), [](const Peer& p) { return !p.info.local; }));
    if (stopping.load()) continue;
    if (joined >= opt.expectRemote) {
      log(st->signaled || st->code != 0 ? 1 : 0, what);
      continue;
    }
    WorkerLeft left;
    left.joined = false;
    left.reason = leaveReason(*st);
    left.reason.text = what + " before its workers joined (" + std::to_string(joined) + " of " +
                       std::to_string(opt.expectRemote) +
                       " remote workers had joined); its output above says why";
    emit(std::move(left));
  }
}

void Coordinator::Impl::shutdownLaunchers() {
  // One deadline for all: one ssh per worker must not make the wait as long as their number.
  const auto deadline = Clock::now() + kShutdownWait;
  const auto running = [&] {
    return std::any_of(launchers.begin(), launchers.end(),
                       [](const coord::Launcher& l) { return l.pid != 0; });
  };
  while (running() && Clock::now() < deadline) {
    for (coord::Launcher& l : launchers) {
      if (l.pid != 0 && tryReap(l.pid)) l.pid = 0;
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
  for (const coord::Launcher& l : launchers) {
    if (l.pid == 0) continue;
    log(1, "ending " + l.name + " (pid " + std::to_string(l.pid) + ")");
    ::kill(static_cast<pid_t>(l.pid), SIGTERM);
  }
  for (const coord::Launcher& l : launchers) {
    if (l.pid != 0 && !waitFor(l.pid, kShutdownWait)) killAndReap(l.pid, milliseconds(2000));
  }
  launchers.clear();
}

}  // namespace arl
