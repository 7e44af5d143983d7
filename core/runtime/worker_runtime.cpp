// The worker runtime (see worker_runtime.h). Two threads, each in a room of its own:
//  - the control thread (WorkerSession, worker_session.h) owns the DEALER socket: it answers
//    the coordinator, heartbeats, watches the coordinator's liveness and the parent process,
//    and sends whatever the run thread queued;
//  - the run thread (RunJob, run_job.h; one per run) generates the schedule, owns the backend
//    buffers and the data plane, and drives the Executor. It stops within milliseconds of an
//    abort (RunJob::abort: the cancel flag that RankRun looks at, and the data plane's
//    abort); the control thread never blocks on it, except briefly when the worker leaves.
// They share a RunJob's start/abort state, its Outbox (result messages) and the session's
// TelemetryRing (the rank's events, recorded without a lock); the control thread sends both
// in the order the run thread produced them. The run thread never touches the control socket.
// The faults tests inject are in fault_injection.h.
#include "runtime/worker_runtime.h"

#include <csignal>
#include <exception>
#include <string>

#include "runtime/worker_log.h"
#include "runtime/worker_session.h"
#include "transport/shm/shm_transport.h"

namespace arl {

namespace {

// SIGTERM (also what a local worker gets when its coordinator dies: process.h), SIGINT and
// SIGHUP end the worker as before, but first take its data-plane segments' names out of
// /dev/shm, which nothing else would until a later run swept them.
void leaveNothingBehind(int sig) {
  unlinkOwnShmSegmentsFromSignal();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void installSignalCleanup() {
  struct sigaction sa {};
  sa.sa_handler = leaveNothingBehind;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(sig, &sa, nullptr);
}

}  // namespace

int runWorker(const WorkerOptions& opt) {
  installSignalCleanup();
  try {
    WorkerSession session(opt);
    return session.run();
  } catch (const std::exception& e) {
    workerLog(std::string("fatal: ") + e.what());
    return 1;
  }
}

}  // namespace arl
