// runLocal: every rank of a schedule as a thread of this process, over the loopback fabric, on
// buffers of the CPU backend. Timing follows nccl-tests: all ranks start an iteration
// together (a barrier), each times its own part, and the iteration's time is the slowest
// rank's.
#include "exec/local_run.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>

#include "exec/check.h"
#include "backend/cpu/cpu_backend.h"
#include "base/errors.h"
#include "exec/executor.h"
#include "transport/loopback.h"
#include "schedule/verifier.h"

namespace arl {

namespace {

// A reusable barrier that a failing rank can open for good, so no thread is left waiting
// for a rank that will never arrive (std::barrier cannot be aborted).
class AbortableBarrier {
 public:
  explicit AbortableBarrier(int n) : n_(n) {}

  // Returns false once the barrier has been aborted.
  bool arriveAndWait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (aborted_) return false;
    const uint64_t gen = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return true;
    }
    cv_.wait(lock, [&] { return aborted_ || generation_ != gen; });
    return generation_ != gen;
  }

  void abort() {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
};

// One rank's memory. In place, Input and Output share one allocation as NCCL's in-place
// calls do (see inPlaceOffset()).
struct RankMemory {
  Backend* backend = nullptr;
  std::vector<void*> owned;
  RankBuffers bufs;
  std::vector<unsigned char> hostInput;

  RankMemory() = default;
  RankMemory(const RankMemory&) = delete;
  RankMemory& operator=(const RankMemory&) = delete;
  ~RankMemory() {
    for (void* p : owned) backend->deallocate(p);
  }

  void* allocate(size_t bytes) {
    // Never zero bytes: every buffer gets an address, even for an empty collective.
    void* p = backend->allocate(std::max<size_t>(bytes, 8));
    owned.push_back(p);
    return p;
  }
};

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void validate(const Schedule& s, const LocalRunOptions& opt) {
  if (s.nranks < 1 || s.ranks.size() != static_cast<size_t>(s.nranks)) {
    throw ConfigError("schedule has " + std::to_string(s.ranks.size()) + " rank programs for " +
                      std::to_string(s.nranks) + " ranks");
  }
  if (opt.iterations < 1) {
    throw ConfigError("iterations must be at least 1 (got " + std::to_string(opt.iterations) + ")");
  }
  if (opt.warmup < 0) {
    throw ConfigError("warmup must not be negative (got " + std::to_string(opt.warmup) + ")");
  }
  if (opt.inflight < 1) {
    throw ConfigError("inflight must be at least 1 (got " + std::to_string(opt.inflight) + ")");
  }
  if (opt.recvTimeout.count() <= 0) throw ConfigError("receive timeout must be positive");
  if (opt.link.bytesPerSecond < 0) throw ConfigError("link bandwidth must not be negative");
  if (opt.link.latency.count() < 0) throw ConfigError("link latency must not be negative");
  if (opt.failRank >= s.nranks) {
    throw ConfigError("fail rank " + std::to_string(opt.failRank) + " is not a rank of " +
                      std::to_string(s.nranks));
  }
}

}  // namespace

LocalRunResult runLocal(const Schedule& schedule, const LocalRunOptions& opt) {
  validate(schedule, opt);
  // A private copy: annotate() fills in the provenance that chunk telemetry reports.
  Schedule s = schedule;
  if (opt.telemetry == TelemetryLevel::Chunks && opt.sink && s.nranks <= 64) annotate(s);

  const int n = s.nranks;
  const size_t es = dtypeSize(opt.dtype);
  const uint64_t count = s.count;

  LoopbackFabric fabric(n);
  fabric.setAllLinks(opt.link);

  std::vector<std::unique_ptr<CpuBackend>> backends;
  std::vector<std::unique_ptr<RankMemory>> mem;
  for (int r = 0; r < n; ++r) {
    backends.push_back(std::make_unique<CpuBackend>());
    auto m = std::make_unique<RankMemory>();
    m->backend = backends.back().get();
    const size_t inBytes = s.inputElems * es;
    const size_t outBytes = s.outputElems * es;
    const size_t shift = inPlaceOffset(s, r) * es;
    if (!opt.inPlace) {
      m->bufs.input = m->allocate(inBytes);
      m->bufs.output = m->allocate(outBytes);
    } else if (s.collective == Collective::ReduceScatter) {
      m->bufs.input = m->allocate(inBytes);
      m->bufs.output = static_cast<unsigned char*>(m->bufs.input) + shift;
    } else {
      m->bufs.output = m->allocate(outBytes);
      m->bufs.input = static_cast<unsigned char*>(m->bufs.output) + shift;
    }
    if (s.scratchElems > 0) m->bufs.scratch = m->allocate(s.scratchElems * es);
    m->hostInput.resize(inBytes);
    fillInput(m->hostInput.data(), s.collective, opt.dtype, opt.op, r, n, count);
    m->backend->upload(m->bufs.input, m->hostInput.data(), inBytes);
    mem.push_back(std::move(m));
  }

  const int total = opt.warmup + opt.iterations;
  std::vector<std::vector<int64_t>> rankNs(static_cast<size_t>(total),
                                           std::vector<int64_t>(static_cast<size_t>(n), 0));
  AbortableBarrier barrier(n);
  std::mutex errMu;
  std::exception_ptr firstError;

  const auto rankMain = [&](int r) {
    try {
      RankMemory& m = *mem[static_cast<size_t>(r)];
      Backend& backend = *backends[static_cast<size_t>(r)];
      Transport& transport = fabric.transport(r);
      ExecOptions eo;
      eo.dtype = opt.dtype;
      eo.op = opt.op;
      eo.inflight = opt.inflight;
      eo.telemetry = opt.telemetry;
      eo.recvTimeout = opt.recvTimeout;
      eo.runId = opt.runId;
      eo.epoch = 1;
      if (r == opt.failRank && opt.failAtOp >= 0) {
        const size_t at = static_cast<size_t>(opt.failAtOp);
        eo.beforeOp = [r, at](size_t i, const Op& op) {
          if (i == at) {
            throw PeerError(r, -1, op.step, "injected failure before op " + std::to_string(i));
          }
        };
      }
      // Warmup iterations report nothing: telemetry describes the timed iterations only.
      ExecOptions warmOpt = eo;
      warmOpt.telemetry = TelemetryLevel::Off;
      Executor warm(s, r, transport, backend, nullptr, warmOpt);
      Executor timed(s, r, transport, backend, opt.sink, eo);
      for (int it = 0; it < total; ++it) {
        // In place, the previous iteration overwrote the input: restore it, untimed.
        if (opt.inPlace && it > 0) {
          backend.upload(m.bufs.input, m.hostInput.data(), m.hostInput.size());
        }
        if (!barrier.arriveAndWait()) return;
        const int64_t t0 = nowNs();
        if (it < opt.warmup) {
          warm.run(m.bufs, static_cast<uint32_t>(it), static_cast<uint64_t>(it));
        } else {
          timed.run(m.bufs, static_cast<uint32_t>(it - opt.warmup), static_cast<uint64_t>(it));
        }
        rankNs[static_cast<size_t>(it)][static_cast<size_t>(r)] = nowNs() - t0;
      }
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(errMu);
        if (!firstError) firstError = std::current_exception();
      }
      // Stop everyone else promptly: blocked receives throw, waiting ranks leave the barrier.
      fabric.abort();
      barrier.abort();
    }
  };

  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) threads.emplace_back(rankMain, r);
  for (auto& t : threads) t.join();
  if (firstError) std::rethrow_exception(firstError);

  LocalRunResult res;
  for (int it = opt.warmup; it < total; ++it) {
    const auto& ns = rankNs[static_cast<size_t>(it)];
    res.iterationUs.push_back(static_cast<double>(*std::max_element(ns.begin(), ns.end())) / 1e3);
  }
  res.timeUs = std::accumulate(res.iterationUs.begin(), res.iterationUs.end(), 0.0) /
               static_cast<double>(res.iterationUs.size());

  const size_t outBytes = s.outputElems * es;
  // All-reduce, all-gather and broadcast expect the same output on every rank.
  const bool shared = s.collective == Collective::AllReduce ||
                      s.collective == Collective::AllGather ||
                      s.collective == Collective::Broadcast;
  std::vector<unsigned char> expected(outBytes);
  bool haveShared = false;
  for (int r = 0; r < n; ++r) {
    RankMemory& m = *mem[static_cast<size_t>(r)];
    std::vector<unsigned char> out(outBytes);
    backends[static_cast<size_t>(r)]->download(out.data(), m.bufs.output, outBytes);
    if (opt.check) {
      bool checked = true;
      if (!shared || !haveShared) {
        checked =
            fillExpected(expected.data(), s.collective, opt.dtype, opt.op, r, n, count, s.root);
        haveShared = shared;
      }
      if (checked) res.wrong += countWrong(out.data(), expected.data(), opt.dtype, s.outputElems);
    }
    res.outputs.push_back(std::move(out));
  }
  return res;
}

}  // namespace arl
