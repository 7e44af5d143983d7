// Executor: the one piece of code that moves bytes. Runs one rank's part of a schedule over a
// Transport, with a Backend for memory and arithmetic, reporting to a TelemetrySink.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "backend/backend.h"
#include "exec/progress.h"
#include "exec/telemetry.h"
#include "schedule/schedule.h"
#include "transport/transport.h"

namespace arl {

class FlightRecorder;

struct ExecOptions {
  DataType dtype = DataType::Float;
  RedOp op = RedOp::Sum;
  int inflight = 4;  // slices in flight: outstanding sends / asynchronous backend ops
  TelemetryLevel telemetry = TelemetryLevel::Chunks;
  // How long one receive may wait; none by default: a run's deadline is its stall timeout
  // (exec/progress.h), enforced by whoever sees every rank (the coordinator, runLocal).
  std::chrono::milliseconds recvTimeout = kNoTimeout;
  // Where the executor reports what it waits for and that it moves on; null = nowhere.
  RankProgress* progress = nullptr;
  // The rank's flight recorder (exec/flight_recorder.h): the executor marks each step done
  // and, when a collective fails, the peers it still waited on; null = none. The RankRun
  // running the executor begins and ends its records.
  FlightRecorder* flight = nullptr;
  uint64_t runId = 0;
  uint64_t epoch = 0;
  // Clock for telemetry timestamps (ns); defaults to steadyNowNs() (base/clock.h). It must
  // be the steady clock plus a constant: device times (Backend::deviceEndNs, on the steady
  // clock) are shifted onto it by the difference, taken once per run.
  std::function<int64_t()> clock;
  // Called before each op with its index in the rank's program; may throw to inject a
  // failure (tests, LocalRunOptions::failAtOp). Empty = no hook.
  std::function<void(size_t opIndex, const Op& op)> beforeOp;
};

// Backend memory of one rank. For an in-place run the caller aliases input into output
// (see inPlaceOffset()); scratch may be null when the schedule needs none.
struct RankBuffers {
  void* input = nullptr;
  void* output = nullptr;
  void* scratch = nullptr;
};

// Signature of (schedule, dtype, op) carried in every chunk header: FNV-1a of the algorithm,
// collective, dtype, op (left out for collectives that do not reduce), count, ranks, slice
// size and root. Stable across hosts and builds.
uint32_t opSignature(const Schedule& s, DataType t, RedOp op);

// Runs ops in program order with up to ExecOptions::inflight ops outstanding (asynchronous
// backend work, sends not yet complete). Each receive is checked against the schedule before
// its data is used: magic, op signature, epoch, sequence number, source rank, and the step,
// chunk, slice and offset of the matching send in the peer's program (the k-th message on a
// channel is the sender's k-th op to this rank), and the length this op expects; a mismatch
// throws PeerError naming both ranks, the step and the field. ChunkHeader::offset is the
// element offset, in the sender's buffers, of the data the payload was produced from: the
// op's src for Send and RecvReduceSend, its dst for RecvReduceCopySend and RecvCopySend.
//
// Telemetry (ExecOptions::telemetry):
//  - Chunks: SendStart just before a payload is handed to the transport; SendEnd when the
//    executor observes the send complete (the transport may reuse nothing of ours from then
//    on; for the loopback, whose sends copy, that is right after SendStart); RecvEnd when a
//    message has arrived and passed the header check (step = the message's step); ReduceEnd
//    when the backend's reduction is observed complete. Offsets: the header offset for sends,
//    where the data lands on this rank for RecvEnd/ReduceEnd. Provenance: that of the
//    payload (Op::provenance, set by annotate()), the reduced result for ReduceEnd. Plus the
//    Steps events.
//  - Steps: StepEnd when the last op of a step (in program order) has completed, with the
//    bytes the rank sent in that step; IterationEnd when run() is done.
//  - Clocks: on a backend that times its operations on the device (Backend::deviceEndNs),
//    ReduceEnd is when the device finished the reduction, and StepEnd when it had finished
//    every operation retired so far (the step's last among them), both marked
//    ClockSource::Device; the send and receive events, IterationEnd, and everything on a
//    backend without device times are the host's time when the executor observed them.
//  - Off: nothing.

class Executor {
 public:
  // `s` must outlive the executor. Throws ConfigError on bad options (inflight < 1).
  Executor(const Schedule& s, int rank, Transport& transport, Backend& backend, TelemetrySink* sink,
           ExecOptions opt);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;
  // Runs one collective (iteration `iteration`, sequence number `seq`). Throws PeerError on
  // a failed peer, timeout or mismatched header. On return every send and backend operation
  // is complete, and for Avg the result region has been finalised (AllReduce and
  // ReduceScatter: Output; Reduce: Output on the root). After a throw, backend work on
  // received messages is complete; the transport should be aborted before buffers are freed.
  void run(const RankBuffers& bufs, uint32_t iteration, uint64_t seq);

 private:
  const Schedule& s_;
  int rank_;
  Transport& transport_;
  Backend& backend_;
  TelemetrySink* sink_;
  ExecOptions opt_;
  // Per-rank plan precomputed from the schedule, and temporaries kept across runs.
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace arl
