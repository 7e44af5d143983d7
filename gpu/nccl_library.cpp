#include "gpu/nccl_library.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/clock.h"
#include "base/errors.h"
#include "gpu/gpu_timer.h"
#include "gpu/nccl_api.h"
#include "gpu/nccl_backend.h"
#include "gpu/nccl_loader.h"
#include "gpu/nccl_profiler.h"
#include "gpu/nccl_token.h"
#include "gpu/nccl_tolerance.h"

namespace arl::gpu {

namespace {

ncclDataType_t ncclTypeOf(DataType t) {
  switch (t) {
    case DataType::Float: return ncclFloat32;
    case DataType::Double: return ncclFloat64;
    case DataType::Half: return ncclFloat16;
    case DataType::BFloat16: return ncclBfloat16;
    case DataType::Int32: return ncclInt32;
    case DataType::Int64: return ncclInt64;
    case DataType::Uint8: return ncclUint8;
  }
  return ncclFloat32;
}

ncclRedOp_t ncclOpOf(RedOp op) {
  switch (op) {
    case RedOp::Sum: return ncclSum;
    case RedOp::Prod: return ncclProd;
    case RedOp::Min: return ncclMin;
    case RedOp::Max: return ncclMax;
    case RedOp::Avg: return ncclAvg;
  }
  return ncclSum;
}

}  // namespace

struct NcclLibrary::State {
  LibraryRunSpec spec;
  const NcclLoaded* lib = nullptr;  // set first: nothing else runs without it
  NcclApi nccl;                     // lib's functions
  cudaStream_t stream = nullptr;
  ncclComm_t comm = nullptr;
  bool healthy = true;  // false once anything failed or was aborted: the end aborts
  uint64_t calls = 0;   // collectives issued in this run
  NcclClockMap gpuClock;

  // Ends the communicator: finalised and destroyed when healthy, aborted otherwise.
  // Finalising flushes what the communicator still holds (and NCCL's proxy its last events);
  // bounded by polling, then an abort, so that it never waits forever.
  void endComm() {
    if (comm == nullptr) return;
    if (!healthy) {
      (void)nccl.commAbort(comm);
      comm = nullptr;
      return;
    }
    ncclResult_t state = nccl.commFinalize(comm);
    for (int polls = 0; state == ncclInProgress && polls < 1'000'000; ++polls) {
      std::this_thread::yield();
      if (nccl.commGetAsyncError(comm, &state) != ncclSuccess) break;
    }
    if (state == ncclSuccess) {
      (void)nccl.commDestroy(comm);
    } else {
      (void)nccl.commAbort(comm);
    }
    comm = nullptr;
  }

  [[noreturn]] void fail(const std::string& what) {
    healthy = false;
    throw PeerError(spec.rank, -1, -1, "NCCL: " + what);
  }

  std::string ncclText(ncclResult_t r) const {
    std::string s = nccl.getErrorString(r);
    const char* last = nccl.getLastError(comm);
    if (last != nullptr && *last != '\0') s += " (" + std::string(last) + ")";
    return s;
  }

  void checkNccl(ncclResult_t r, const char* call) {
    if (r != ncclSuccess && r != ncclInProgress) fail(std::string(call) + ": " + ncclText(r));
  }

  [[noreturn]] void aborted(const char* where) {
    healthy = false;
    if (comm != nullptr) {
      (void)nccl.commAbort(comm);
      comm = nullptr;
    }
    throw PeerError(spec.rank, -1, -1, std::string("run aborted ") + where);
  }

  // Polls the communicator until it is no longer in progress (non-blocking NCCL).
  void waitComm(const char* call, const std::atomic<bool>& cancel) {
    for (;;) {
      ncclResult_t state = ncclSuccess;
      checkNccl(nccl.commGetAsyncError(comm, &state), "ncclCommGetAsyncError");
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) fail(std::string(call) + ": " + ncclText(state));
      if (cancel.load(std::memory_order_relaxed))
        aborted(std::string("during ").append(call).c_str());
      std::this_thread::yield();
    }
  }

  // Polls the stream until the collective has completed, as nccl-tests' testStreamSynchronize
  // does: a failure of the communicator (a peer gone) shows up there instead of a hang.
  void waitStream(const std::atomic<bool>& cancel) {
    for (;;) {
      const cudaError_t e = cudaStreamQuery(stream);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) fail("cudaStreamQuery: " + cudaErrorText(e));
      ncclResult_t state = ncclSuccess;
      checkNccl(nccl.commGetAsyncError(comm, &state), "ncclCommGetAsyncError");
      if (state != ncclSuccess && state != ncclInProgress) {
        fail("the collective failed: " + ncclText(state));
      }
      if (cancel.load(std::memory_order_relaxed)) aborted("during the collective");
      std::this_thread::yield();
    }
  }

  ncclResult_t issue(const RankBuffers& b) {
    const LibraryRunSpec& s = spec;
    const ncclDataType_t t = ncclTypeOf(s.dtype);
    const ncclRedOp_t op = ncclOpOf(s.op);
    switch (s.collective) {
      case Collective::AllReduce:
        return nccl.allReduce(b.input, b.output, s.count, t, op, comm, stream);
      case Collective::ReduceScatter:
        return nccl.reduceScatter(b.input, b.output, s.count, t, op, comm, stream);
      case Collective::AllGather:
        return nccl.allGather(b.input, b.output, s.count, t, comm, stream);
      case Collective::Reduce:
        return nccl.reduce(b.input, b.output, s.count, t, op, s.root, comm, stream);
      case Collective::Broadcast:
        return nccl.broadcast(b.input, b.output, s.count, t, s.root, comm, stream);
    }
    return ncclInvalidArgument;
  }
};

NcclLibrary::NcclLibrary(const LibraryRunSpec& spec) : st_(std::make_unique<State>()) {
  st_->spec = spec;
  ARL_ENFORCE(spec.algorithm != nullptr, "an NCCL run without its algorithm");
  std::string why;
  st_->lib = ncclLibrary(&why);
  if (st_->lib == nullptr) st_->fail(why);
  st_->nccl = ncclApi(*st_->lib);
  if (auto problem = ncclDeviceProblem(std::max(spec.device, 0))) st_->fail(*problem);
  if (spec.device >= 0) {
    const cudaError_t e = cudaSetDevice(spec.device);
    if (e != cudaSuccess) {
      st_->fail("cudaSetDevice(" + std::to_string(spec.device) + "): " + cudaErrorText(e));
    }
  }
  const cudaError_t e = cudaStreamCreateWithFlags(&st_->stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) st_->fail("cudaStreamCreate: " + cudaErrorText(e));
}

NcclLibrary::~NcclLibrary() {
  st_->endComm();
  if (st_->stream != nullptr) (void)cudaStreamDestroy(st_->stream);
}

std::string NcclLibrary::newBootstrap() {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  const ncclResult_t r = st_->nccl.getUniqueId(&id);
  if (r != ncclSuccess) st_->fail("ncclGetUniqueId: " + st_->ncclText(r));
  return encodeNcclToken(&id, sizeof id);
}

void NcclLibrary::join(const std::string& bootstrap, const std::atomic<bool>& cancel) {
  State& s = *st_;
  const auto bytes = decodeNcclToken(bootstrap, sizeof(ncclUniqueId));
  if (!bytes) s.fail("rank 0's bootstrap '" + bootstrap.substr(0, 40) + "' is not an NCCL id");
  ncclUniqueId id;
  std::memcpy(&id, bytes->data(), sizeof id);
  // NCCL reads NCCL_ALGO when it tunes a new communicator (src/graph/tuning.cc; ncclConfig_t
  // has no field for it): set for this process before each communicator of a run is made.
  // setenv races a concurrent getenv; here no other thread reads the environment: the worker
  // runs one run at a time, the previous run's communicator is gone, and the control thread
  // read its settings at start-up.
  const std::string algo(s.spec.algorithm->variant);
  ::setenv("NCCL_ALGO", algo.c_str(), 1);  // NOLINT(concurrency-mt-unsafe): see above
  // NCCL's profiler plugin: the worker's own (gpu/nccl_profiler.h) unless the user named one;
  // NCCL loads it and reads the mask when the communicator is made (src/plugin/profiler.cc).
  // An NCCL older than 2.28 knows neither STATIC_PLUGIN nor interface version 5.
  if (s.lib->version >= kNcclProfilerV5Version) {
    ::setenv("NCCL_PROFILER_PLUGIN", "STATIC_PLUGIN", 0);  // NOLINT(concurrency-mt-unsafe)
    const std::string mask = std::to_string(ncclProfilerMask(s.spec.telemetry));
    ::setenv("NCCL_PROFILE_EVENT_MASK", mask.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
  }
  ncclProfilerBeginRun(dtypeSize(s.spec.dtype));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  s.checkNccl(s.nccl.commInitRankConfig(&s.comm, s.spec.nranks, id, s.spec.rank, &config),
              "ncclCommInitRankConfig");
  s.waitComm("ncclCommInitRankConfig", cancel);
  if (s.spec.telemetry != TelemetryLevel::Off) s.gpuClock = measureGpuClock(s.stream);
}

void NcclLibrary::run(const RankBuffers& b, const std::atomic<bool>& cancel) {
  State& s = *st_;
  ARL_ENFORCE(s.comm != nullptr, "an NCCL collective before join()");
  ncclProfilerSetCall(s.calls++);
  s.checkNccl(s.issue(b), "the collective call");
  s.waitComm("the collective call", cancel);  // enqueued (non-blocking NCCL)
  s.waitStream(cancel);
}

LibraryEventCounts NcclLibrary::collectEvents(TelemetrySink& sink, uint32_t warmup,
                                              int64_t clockOffsetNs, bool final) {
  State& s = *st_;
  if (final) s.endComm();
  NcclEventContext ctx;
  ctx.warmup = warmup;
  ctx.timed = s.spec.timed;
  ctx.clockOffsetNs = clockOffsetNs;
  ctx.gpu = s.gpuClock;
  LibraryEventCounts n;
  ncclProfilerDrain([&](const NcclRawEvent& raw) {
    NcclEventFate fate = NcclEventFate::Recorded;
    if (auto e = toTelemetry(raw, ctx, &fate)) {
      e->rank = s.spec.rank;
      sink.record(*e);
      ++n.recorded;
    } else if (fate == NcclEventFate::Warmup) {
      ++n.warmup;
    } else if (fate == NcclEventFate::NoCall) {
      ++n.unattributed;
    } else {
      ++n.dropped;  // a kernel time without a clock map
    }
  });
  if (final) {
    const NcclProfilerCounts c = ncclProfilerCounts();
    n.dropped += c.dropped + c.noHandle;
  }
  return n;
}

NcclClockMap measureGpuClock(void* stream, int samples) {
  NcclClockMap map;
  uint64_t* d = nullptr;
  if (cudaMalloc(reinterpret_cast<void**>(&d), sizeof(uint64_t)) != cudaSuccess) return map;
  const auto st = static_cast<cudaStream_t>(stream);
  int64_t best = INT64_MAX;
  for (int i = 0; i < samples; ++i) {
    const int64_t t0 = steadyNowNs();
    if (enqueueGlobalTimerRead(d, st) != cudaSuccess) break;
    if (cudaStreamSynchronize(st) != cudaSuccess) break;
    const int64_t t1 = steadyNowNs();
    uint64_t gpu = 0;
    if (cudaMemcpy(&gpu, d, sizeof gpu, cudaMemcpyDeviceToHost) != cudaSuccess) break;
    if (t1 - t0 < best) {
      best = t1 - t0;
      map.known = true;
      map.gpuMinusHostNs = static_cast<int64_t>(gpu) - (t0 + (t1 - t0) / 2);
      map.uncertaintyNs = (t1 - t0 + 1) / 2;
    }
  }
  (void)cudaFree(d);
  return map;
}

double NcclLibrary::tolerance() const {
  const LibraryRunSpec& s = st_->spec;
  return ncclTolerance(s.collective, s.dtype, s.op, s.nranks);
}

}  // namespace arl::gpu
