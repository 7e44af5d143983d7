// The run thread's steps that more than one kind of run takes (run_job.cpp, train_job.cpp):
// binding and connecting the data plane, Ready and RunDone, the executor's options. Private
// to core/runtime.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/peer_memory.h"
#include "exec/rank_run.h"
#include "runtime/run_job.h"
#include "transport/shm/shm_transport.h"
#include "transport/split_transport.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/zmq/zmq_transport.h"

namespace arl::jobsteps {

// The run's data plane: shared memory, ZeroMQ or TCP, bound before Ready and connected on
// Start.
struct RunDataPlane {
  std::unique_ptr<ZmqDataPlane> zmq;
  std::unique_ptr<TcpDataPlane> tcp;
  std::unique_ptr<ShmDataPlane> shm;
  // Shared memory and the network (zmq or tcp), chosen per peer, in a run on several hosts
  // (shared memory inside this host).
  std::unique_ptr<SplitTransport> split;
  Transport* dp = nullptr;   // split, or the one plane that exists
  std::vector<bool> viaShm;  // by rank, with split planes: the peers over shared memory
  DataPlanePeers peers;
  // The backend's memory that ranks of this host may read in place (CUDA IPC), when the run
  // asks for it and the backend has some; then every channel goes both ways (a lent slice
  // comes back on the reverse channel).
  PeerMemory* peerMemory = nullptr;
  bool bothWays = false;  // channels both ways without lending (a rank without such memory)

  void close() {
    if (zmq) zmq->close();
    if (tcp) tcp->close();
    if (shm) shm->close();
  }
};

// The run's schedule: `c`'s collective, algorithm and count, annotated with provenance when
// chunk telemetry asks for it. Throws PeerError naming `rank` when refused or aborted.
Schedule runSchedule(const RunConfig& c, int rank, const std::atomic<bool>& cancel);
// The executor's options for the run (telemetry on the coordinator's clock, progress, the
// test's stall), with the rank's buffers' options.
RankRunOptions rankRunOptions(RunJob& j);
// The run's summary for the flight recorder's records (RunJob::flight), `nsteps` its steps.
void recordRun(RunJob& j, uint32_t nsteps);
// The flight recorder's records as the message a failed rank sends (j.flight is set).
FlightRecord flightRecord(const RunJob& j);
// Phase 1 of the data plane: creates it and binds it for messages from peers.recvFrom (and
// to peers.sendTo); shared memory sized by `shm`. Returns the endpoint for Ready.
std::string bindDataPlaneFor(RunJob& j, RunDataPlane& plane, DataPlanePeers peers,
                             const ShmOptions& shm);
// Reports Ready with `endpoint` and the device whose memory peers may read (may be null).
void postReady(RunJob& j, const std::string& endpoint, const PeerMemory* memory);
// Phase 2: waits for Start, which carries every rank's endpoint, and connects.
void connectDataPlane(RunJob& j, RunDataPlane& plane);
// Reports RunDone: `wrong` elements wrong, `moreDropped` events lost before the ring, and
// with random data `run`'s output digest (run may be null).
void postDone(RunJob& j, uint64_t wrong, uint64_t moreDropped, const RankRun* run);

// A training run (train_job.cpp): the rank's replica trains cfg.train->steps steps, each
// reported as an IterationResult carrying its TrainRankStep; failures go to `fail`.
void runTrainJob(RunJob& j, RunDataPlane& plane, int64_t& iteration,
                 const std::function<void(const std::exception&)>& fail);

}  // namespace arl::jobsteps
