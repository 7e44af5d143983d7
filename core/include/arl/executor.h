// Executor: the one piece of code that moves bytes. Runs one rank's part of a schedule over a
// Transport, with a Backend for memory and arithmetic, reporting to a TelemetrySink.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "arl/backend.h"
#include "arl/schedule.h"
#include "arl/telemetry.h"
#include "arl/transport.h"

namespace arl {

struct ExecOptions {
  DataType dtype = DataType::Float;
  RedOp op = RedOp::Sum;
  int inflight = 4;  // slices in flight: outstanding sends / asynchronous backend ops
  TelemetryLevel telemetry = TelemetryLevel::Chunks;
  std::chrono::milliseconds recvTimeout{3000};
  uint64_t runId = 0;
  uint64_t epoch = 0;
  // Clock for telemetry timestamps (ns); defaults to steady_clock.
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

// Signature of (schedule, dtype, op) carried in every chunk header.
uint32_t opSignature(const Schedule& s, DataType t, RedOp op);

class Executor {
 public:
  // `s` must outlive the executor. Throws ConfigError on bad options (inflight < 1).
  Executor(const Schedule& s, int rank, Transport& transport, Backend& backend, TelemetrySink* sink,
           ExecOptions opt);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;
  // Runs one collective (iteration `iteration`, sequence number `seq`). Throws PeerError on
  // a failed peer, timeout or mismatched header.
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
