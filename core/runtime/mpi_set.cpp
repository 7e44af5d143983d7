// The coordinator's local workers of backend mpi (coordinator_impl.h, MpiSet): one mpirun
// starts them all, the lab watches them by pid, and a set that lost a worker is ended and
// started again whole, since an MPI world cannot lose a member and go on.
#include <signal.h>
#include <unistd.h>

#include "runtime/coordinator_impl.h"
#include "runtime/mpi_launch.h"

namespace arl {

using coord::kShutdownWait;
using coord::leaveReason;
using std::chrono::milliseconds;

void Coordinator::Impl::spawnMpiSet() {
  std::vector<std::string> worker = {workerBinary,
                                     "--connect",
                                     localEndpoint,
                                     "--backend",
                                     "mpi",
                                     "--parent-pid",
                                     std::to_string(::getpid())};
  const auto keyed = keyArgs();
  worker.insert(worker.end(), keyed.begin(), keyed.end());
  worker.insert(worker.end(), opt.workerExtraArgs.begin(), opt.workerExtraArgs.end());
  const std::vector<std::string> argv =
      mpirunCommand(mpirun, opt.localWorkers, ::geteuid() == 0, opt.mpirunArgs, worker);
  try {
    const int64_t pid = spawnChild(argv);
    mpiSet = coord::MpiSet{pid, opt.localWorkers, {}};
    pendingLocal += opt.localWorkers;
    log(0, "started " + std::to_string(opt.localWorkers) + " local workers under mpirun (pid " +
               std::to_string(pid) + "): " + shellLine(argv));
  } catch (const std::exception& e) {
    WorkerLeft left;
    left.worker.local = true;
    left.joined = false;
    left.reason = {LeaveKind::Exited, -1, std::string("mpirun could not be started: ") + e.what()};
    log(2, left.reason.text);
    emit(std::move(left));
  }
}

bool Coordinator::Impl::inMpiSet(const WorkerInfo& info) const {
  return info.local && mpiSet && mpiSet->workers.count(info.pid) > 0;
}

void Coordinator::Impl::watchMpiSet() {
  if (!mpiSet) return;
  for (const Peer& p : peers) {
    if (!inMpiSet(p.info) || processAlive(p.info.pid)) continue;
    const int r = rankOf(p.id);
    const std::string what = "rank " + std::to_string(r) + " (pid " + std::to_string(p.info.pid) +
                             ") died: its process is gone (a worker of mpirun " +
                             std::to_string(mpiSet->pid) + ")";
    if (ActiveRun* a = healthyRun(); a && r >= 0 && !stopping.load()) {
      a->fail(FailKind::Died, r, what);
    }
    endMpiSet({LeaveKind::Killed, 0, what}, true);
    return;
  }
  if (const auto st = tryReap(mpiSet->pid)) {
    const bool joined = !mpiSet->workers.empty();
    const std::string what = "mpirun (pid " + std::to_string(mpiSet->pid) + ") " + st->describe() +
                             (joined ? "" : " before its workers joined");
    if (ActiveRun* a = healthyRun(); a && !stopping.load()) a->fail(FailKind::Died, -1, what);
    mpiSet->pid = 0;  // reaped
    endMpiSet(leaveReason(*st), joined);
    if (!joined && !stopping.load()) {
      // Nobody waits out the join timeout for workers that will never come: mpirun's own
      // lines (above, on stderr) say why.
      WorkerLeft left;
      left.worker.local = true;
      left.joined = false;
      left.reason = {LeaveKind::Exited, -1, what + " (mpirun's output above says why)"};
      emit(std::move(left));
    }
  }
}

void Coordinator::Impl::endMpiSet(const LeaveReason& why, bool respawn) {
  coord::MpiSet set = *mpiSet;
  mpiSet.reset();
  if (set.pid > 0) {
    ::kill(static_cast<pid_t>(set.pid), SIGTERM);
    if (!waitFor(set.pid, kShutdownWait)) killAndReap(set.pid, milliseconds(2000));
  }
  // mpirun has passed SIGTERM on; a worker it could not reach goes now.
  for (int64_t pid : set.workers) {
    if (processAlive(pid)) ::kill(static_cast<pid_t>(pid), SIGKILL);
  }
  pendingLocal -= set.size - static_cast<int>(set.workers.size());
  std::vector<std::string> ids;
  for (const Peer& p : peers) {
    if (p.info.local && set.workers.count(p.info.pid) > 0) ids.push_back(p.id);
  }
  for (const std::string& id : ids) removePeer(id, why, false);
  if (respawn && !stopping.load()) spawnMpiSet();
}

void Coordinator::Impl::shutdownMpiSet() {
  if (!mpiSet) return;
  if (mpiSet->pid > 0 && waitFor(mpiSet->pid, kShutdownWait)) mpiSet->pid = 0;
  if (mpiSet->pid > 0) log(1, "ending mpirun (pid " + std::to_string(mpiSet->pid) + ")");
  endMpiSet({LeaveKind::Shutdown, 0, "the lab is closing"}, false);
}

}  // namespace arl
