// Shared-memory data plane: the Transport between worker processes on one host.
//
// Each rank creates one POSIX shared-memory segment holding an inbound channel per rank it
// receives from; a sender maps its receivers' segments and writes into them directly. A
// channel is a single-producer single-consumer byte ring of records, each a 64-byte head (a
// ChunkHeader and a kind) and the payload, padded to 64 bytes. So a byte is copied once on
// the way (into the receiver's ring; the receiver reduces or copies it straight out of
// there), where the ZeroMQ data plane copies it into a socket, out of it, then uses it.
// Creation is two-phase like ZmqDataPlane, because the names travel through the coordinator:
//
//   ShmDataPlane dp(rank, nranks);
//   std::string mine = dp.bind(opts, dataPlanePeers(schedule, rank).recvFrom);
//   dp.connect(allEndpoints, dataPlanePeers(schedule, rank).sendTo);   // "shm://NAME"
//   Executor(schedule, rank, dp, backend, sink, execOpts).run(...);
//   dp.close();
//
// Waiting. A receiver waiting for data (and a sender waiting for room) first polls the ring
// for ShmOptions::spin, then looks between yields of the core for ShmOptions::yieldFor, then
// sleeps on a futex in the shared segment that the other side wakes when it sees a sleeper.
// Looking without a system call in between is what makes a small message cost microseconds;
// yielding and sleeping keep a machine with more ranks than cores moving. Sleeps are cut into
// slices of at most 10 ms, after each of which the abort flag, the peer's process and the deadline
// are looked at; polls and yields look at the abort flag as they go.
//
// Shaping (ShmOptions::shaping, transport/pacing.h): send() claims this rank's egress port
// and the link, stamps the record with the time the message starts to leave and returns a
// completion that turns done once it has left; recv() takes the record, claims its ingress
// port and waits until the message would have arrived. Both waits sleep, then yield for the
// last fraction of a millisecond, and end on abort().
//
// Unshaped sends copy the payload into the ring and are complete on return (the caller's memory is
// free at once); send() blocks while the ring is full. A received message is a view into the
// ring, pinned until the InMessage is destroyed; the ring's space comes back in ring order
// (a message released early waits for the older ones). A record that does not fit before the
// ring's end goes to its start behind a WRAP record; one larger than the space before the
// write position waits for the receiver to pass the WRAP, so a ring takes any message up to
// its own size, with a receiver reading.
//
// Lifetime and clean-up. The owner removes its segment's name as soon as every expected
// sender has mapped it, and in close() at the latest; mappings (and so received messages)
// stay valid until their last user lets go. A process killed before that leaves a name in
// /dev/shm behind: bind() removes those whose creating pid no longer exists. A name carries
// its creator's pid namespace (arl-dp-<pid>-ns<ns>-...), and only names of the caller's own
// namespace are judged: a pid says nothing in another one. So ranks in different pid
// namespaces (containers) sharing /dev/shm never remove each other's segments, but cannot
// tell each other's death either: use the zmq data plane between them.
//
// Closing: a finished rank marks its outbound channels closed; its data stays readable in
// the receivers' rings, so no goodbye exchange is needed for the data to arrive. A receive
// on a channel that is empty and closed fails with "rank P closed its data plane". drain()
// is the goodbye for timing's sake: called before close(), it waits (polling, yielding,
// sleeping as every wait does) until each receiver has taken everything sent to it, as the
// ZeroMQ plane's close() waits for its receivers' acknowledgements. A rank that finished its
// last iteration first then hands its core to the ranks still in theirs, as it does between
// iterations, instead of tearing down and reporting on a core they need (docs/telemetry.md,
// "The tail").
//
// Threads: one thread (the executor's) makes every call, and destroys every received message,
// except abort(), which any thread may call.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/shaping.h"
#include "transport/shm_ring.h"  // shmRingBytes(): size the rings with it
#include "transport/transport.h"

namespace arl {

struct ShmOptions {
  // Bytes of each inbound ring (rounded up to 4096). A message larger than the ring, its
  // 64-byte record head included, cannot be sent: size it with shmRingBytes().
  size_t ringBytes = size_t{4} << 20;
  // How long a wait polls before yielding, and how long it yields before sleeping. Polling
  // without yielding only pays when every rank has a core of its own: with more ranks than
  // cores it holds the core the awaited rank needs, while a yield with nothing else to run
  // returns within about a microsecond. The worker takes both from ARL_SHM_SPIN_US and
  // ARL_SHM_YIELD_US when set (docs/dataplane.md).
  std::chrono::microseconds spin{0};
  std::chrono::microseconds yieldFor{2000};
  // Yielding turns costly when something that runs whole time slices keeps the cores busy (a
  // compiler, say, or ranks that each compute for a slice on fewer cores than ranks): a rank
  // that yields waits out their slices (milliseconds) and spends the CPU share that would get
  // it scheduled when its data comes, while one asleep on the futex is woken and scheduled at
  // once. So once the mean of the process's recent yields (YieldCost) reaches yieldCostLimit,
  // every wait of the process sleeps without yielding for yieldBackoff.
  // The mean, not a single yield: the lab's own ranks stall a yield for a whole slice now and
  // then (2.5-5.9 ms, about once in three seconds a worker with 4 workers on 2 cores here),
  // and a second of sleeping after any one such yield made 256 KiB - 1 MiB runs 1.5-1.8x
  // slower (docs/dataplane.md, "Waiting"). The worker takes it from ARL_SHM_YIELD_COST_US.
  std::chrono::microseconds yieldCostLimit{300};
  std::chrono::milliseconds yieldBackoff{1000};
  // How long send() may wait for room in a peer's ring before failing with PeerError. None
  // by default: a receiver that is slow is alive, one whose process ended is seen by the wait
  // itself, and a run's deadline is its stall timeout (exec/progress.h); abort() ends the wait.
  std::chrono::milliseconds sendTimeout = kNoTimeout;
  // Longest time drain() waits for the receivers to take what was sent (as the ZeroMQ data
  // plane's closeLinger): a receiver that neither reads nor closes makes drain() wait this
  // long.
  std::chrono::milliseconds closeLinger{5000};
  // The network this rank's sends and receives are paced to (transport/pacing.h); empty = not
  // paced. Every rank of a run must be given the same. The ranks share the host's steady
  // clock: a send's start travels in its record head.
  LinkShaping shaping;
};

// Removes the names of this pid namespace's data-plane segments whose creating process no
// longer exists (a worker killed before every sender attached). Bind calls it; so does the
// coordinator when it reaps a dead local worker, so that nothing waits for the next run.
void sweepStaleShmSegments();

// Unlinks the names of the segments this process created and still holds named, with
// async-signal-safe calls only: for a signal handler that is about to end the process (a
// worker told to stop by SIGTERM, or by its parent's death), so that it leaves nothing in
// /dev/shm.
void unlinkOwnShmSegmentsFromSignal();

// `base` with spin, yieldFor and yieldCostLimit taken from ARL_SHM_SPIN_US, ARL_SHM_YIELD_US
// and ARL_SHM_YIELD_COST_US where set (whole microseconds, 0 to 1e9). Throws ConfigError naming
// the variable on anything else.
ShmOptions shmWaitsFromEnv(ShmOptions base);

// The mean duration of a process's recent yields, each new one weighing 1/32 (about the last
// 32 count). A yield returns within microseconds when nothing else wants the core, and after
// whole time slices of what runs instead when something does. Threads may share one: a lost
// update only blurs the mean.
class YieldCost {
 public:
  // A yield took `took`: true when the mean has reached `limit`; the mean then starts again
  // from 0, so that the yields after a backoff are judged on their own.
  bool costly(std::chrono::nanoseconds took, std::chrono::nanoseconds limit);
  std::chrono::nanoseconds mean() const;

 private:
  std::atomic<int64_t> meanNs_{0};
};

class ShmDataPlane final : public Transport {
 public:
  // Throws ConfigError when rank is not in [0, nranks) or nranks exceeds 64.
  ShmDataPlane(int rank, int nranks);
  ~ShmDataPlane() override;
  ShmDataPlane(const ShmDataPlane&) = delete;
  ShmDataPlane& operator=(const ShmDataPlane&) = delete;

  // Phase 1: creates this rank's segment with one ring per rank in `recvFrom`, maps all its
  // pages into this process (so no receive pays a first-touch page fault), and returns
  // the endpoint peers connect to ("shm://arl-dp-1234-ns4026531836-r3-..."). Call once. Throws
  // ConfigError on bad arguments or when the segment cannot be created (the message names
  // the size and /dev/shm).
  std::string bind(const ShmOptions& opt, const std::vector<int>& recvFrom);
  // Phase 2: maps the segments of `peers` (ranks) from endpointsByRank[peer], and the pages
  // of this rank's ring in each into this process (so no send pays a page fault). Throws
  // ConfigError when an endpoint is not shm://, a segment cannot be opened, its owner has no
  // ring for this rank, or another process already sends on that ring (one producer each).
  void connect(const std::vector<std::string>& endpointsByRank, const std::vector<int>& peers);
  const std::string& endpoint() const { return endpoint_; }

  // Waits until every rank this one sent to has taken all of it (given back its ring space),
  // has closed, or its process is gone; at most ShmOptions::closeLinger, and not at all
  // once aborted. Never throws. Returns true when everything sent was taken (trivially when
  // nothing was), false otherwise or when not bound or already closed. Call before close()
  // at the end of a run, not after a failure (abort() first, as always).
  bool drain();

  // Marks the outbound channels closed, removes the segment's name and drops the mappings
  // (received messages still alive keep theirs). Never throws; idempotent; the destructor
  // calls it. Returns false when already closed.
  bool close();

  int rank() const override { return rank_; }
  int size() const override { return nranks_; }
  // The transport fills the header's magic, src and length; the caller supplies the rest.
  // The copy is complete on return (the completion is done). Blocks while the peer's ring is
  // full (until abort(), the receiver's end, or ShmOptions::sendTimeout).
  std::shared_ptr<SendCompletion> send(int peer, const ChunkHeader& h, const void* data,
                                       size_t bytes) override;
  std::unique_ptr<InMessage> recv(int peer, uint32_t step,
                                  std::chrono::milliseconds timeout) override;
  // A record from `peer` is published in its ring. False on a shaped data plane, whose
  // arrivals recv() paces.
  bool ready(int peer, uint32_t step) override;
  bool arrived(int peer) override;
  // Thread-safe; blocked and later calls throw "run aborted" within one sleep slice.
  void abort() override;

  // Endpoints this data plane creates begin with this.
  static constexpr const char* kScheme = "shm://";

 private:
  // Claims the ingress for a message of `bytes` from `peer` sent at `sentUs` (its record's
  // stamp) and waits until it is available; throws PeerError when aborted meanwhile.
  void paceReceive(int peer, uint32_t step, uint64_t bytes, uint32_t sentUs);
  struct Impl;  // mappings and ring cursors, private to shm_transport.cpp
  int rank_;
  int nranks_;
  std::string endpoint_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace arl
