// runLocal: every rank of a schedule as a thread of this process, over the loopback fabric, on
// buffers of the CPU backend (or another, LocalRunOptions::makeBackend); each rank's part is a
// RankRun (exec/rank_run.h), as in a worker. All ranks start an iteration together (a barrier),
// each times its own part, and the iteration's time is the slowest rank's (the lab's definition,
// model/metrics.h).
#include "exec/local_run.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "base/errors.h"
#include "base/limits.h"
#include "exec/rank_run.h"
#include "schedule/verifier.h"
#include "transport/loopback.h"

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
  if (opt.stallTimeout.count() <= 0) throw ConfigError("stall timeout must be positive");
  checkShaping(opt.shaping, s.nranks);
  if (opt.failRank >= s.nranks) {
    throw ConfigError("fail rank " + std::to_string(opt.failRank) + " is not a rank of " +
                      std::to_string(s.nranks));
  }
}

// Waits for the rank threads (`wait(slice)` returns true when they are done or one failed)
// while watching their progress; when no rank has moved for `timeout`, fails the run with
// what each rank was doing.
template <class Wait, class Fail>
void watchForStall(const std::vector<RankProgress>& progress, std::vector<std::thread>& threads,
                   std::chrono::milliseconds timeout, Wait wait, Fail fail) {
  StallWatch watch(timeout);
  const auto slice =
      std::clamp(timeout / 10, std::chrono::milliseconds(1), std::chrono::milliseconds(100));
  while (!wait(slice)) {
    uint64_t total = 0;
    for (size_t r = 0; r < progress.size(); ++r) {
      total += progressCount(progress[r].snapshot(), threads[r]);
    }
    const auto now = SteadyClock::now();
    watch.observe(total, now);
    if (!watch.expired(now)) continue;
    std::string text = stallHeadline(watch.quietFor(now), timeout);
    for (size_t r = 0; r < progress.size(); ++r) {
      text += (r == 0 ? ": " : "; ") + std::string("rank ") + std::to_string(r) + " " +
              describe(progress[r].snapshot());
    }
    fail(std::make_exception_ptr(PeerError(-1, -1, -1, text)));
    return;
  }
}

// Per timed iteration, the slowest rank's time; the lab's time is their mean (model/metrics.h).
void summarize(const std::vector<std::vector<int64_t>>& rankNs, LocalRunResult& res) {
  for (const auto& ns : rankNs) {
    res.iterationUs.push_back(static_cast<double>(*std::max_element(ns.begin(), ns.end())) / 1e3);
  }
  res.timeUs = std::accumulate(res.iterationUs.begin(), res.iterationUs.end(), 0.0) /
               static_cast<double>(res.iterationUs.size());
}

RankRunOptions rankRunOptions(const LocalRunOptions& opt, int rank, RankProgress* progress,
                              const std::atomic<bool>& cancel) {
  RankRunOptions ro;
  ro.cancel = &cancel;
  ro.exec.dtype = opt.dtype;
  ro.exec.op = opt.op;
  ro.exec.inflight = opt.inflight;
  ro.exec.telemetry = opt.telemetry;
  ro.exec.progress = progress;
  ro.exec.runId = opt.runId;
  ro.exec.epoch = 1;
  if (rank == opt.failRank && opt.failAtOp >= 0) {
    const size_t at = static_cast<size_t>(opt.failAtOp);
    ro.exec.beforeOp = [rank, at](size_t i, const Op& op) {
      if (i == at) {
        throw PeerError(rank, -1, op.step, "injected failure before op " + std::to_string(i));
      }
    };
  }
  ro.inPlace = opt.inPlace;
  ro.warmup = static_cast<uint32_t>(opt.warmup);
  ro.iterations = static_cast<uint32_t>(opt.iterations);
  ro.check = opt.check;
  return ro;
}

}  // namespace

LocalRunResult runLocal(const Schedule& schedule, const LocalRunOptions& opt) {
  validate(schedule, opt);
  // A private copy: annotate() fills in the provenance that chunk telemetry reports.
  Schedule s = schedule;
  if (opt.telemetry == TelemetryLevel::Chunks && opt.sink && s.nranks <= kMaxRanks) annotate(s);

  const int n = s.nranks;
  LoopbackFabric fabric(n, opt.shaping);

  // Each rank's backend and run are made on its own thread (filling the expected output is
  // the costly part of the setup), and kept for the results once every thread is done.
  std::vector<std::unique_ptr<Backend>> backends(static_cast<size_t>(n));
  std::vector<std::unique_ptr<RankRun>> runs(static_cast<size_t>(n));
  std::vector<std::vector<int64_t>> rankNs(static_cast<size_t>(opt.iterations),
                                           std::vector<int64_t>(static_cast<size_t>(n), 0));
  std::vector<uint64_t> wrong(static_cast<size_t>(n), 0);
  AbortableBarrier barrier(n);
  std::vector<RankProgress> progress(static_cast<size_t>(n));
  std::mutex errMu;
  std::condition_variable doneCv;
  int finished = 0;  // rank threads done (guarded by errMu)
  std::exception_ptr firstError;
  // Set after the first error is kept: ranks still setting up or checking stop too.
  std::atomic<bool> cancel{false};
  // The first failure is the run's; everyone else is stopped promptly: blocked receives
  // throw, waiting ranks leave the barrier, ranks setting up or checking stop.
  const auto fail = [&](std::exception_ptr e) {
    {
      std::lock_guard<std::mutex> lock(errMu);
      if (!firstError) firstError = std::move(e);
    }
    cancel.store(true);
    doneCv.notify_all();
    fabric.abort();
    barrier.abort();
  };

  const auto rankMain = [&](int r) {
    const auto ri = static_cast<size_t>(r);
    try {
      backends[ri] = opt.makeBackend ? opt.makeBackend() : std::make_unique<CpuBackend>();
      runs[ri] = std::make_unique<RankRun>(s, r, *backends[ri],
                                           rankRunOptions(opt, r, &progress[ri], cancel));
      RankRunHooks hooks;
      // All ranks start an iteration together, as nccl-tests' ranks do.
      hooks.beforeIteration = [&](uint32_t) { return barrier.arriveAndWait(); };
      hooks.afterTimed = [&](const TimedIteration& t) {
        rankNs[t.index][ri] = t.ns;
        if (t.wrong) wrong[ri] = *t.wrong;
      };
      hooks.afterChecks = [&](uint64_t more) { wrong[ri] += more; };
      std::unique_ptr<Transport> wrapped;
      if (opt.wrapTransport) wrapped = opt.wrapTransport(fabric.transport(r), *backends[ri], r);
      runs[ri]->run(wrapped ? *wrapped : fabric.transport(r), opt.sink, hooks);
    } catch (...) {
      fail(std::current_exception());
    }
    progress[ri].setPhase(RunPhase::Reported);
    {
      std::lock_guard<std::mutex> lock(errMu);
      ++finished;
    }
    doneCv.notify_all();
  };

  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) threads.emplace_back(rankMain, r);
  watchForStall(
      progress, threads, opt.stallTimeout,
      [&](std::chrono::milliseconds slice) {
        std::unique_lock<std::mutex> lock(errMu);
        return doneCv.wait_for(lock, slice, [&] { return finished == n || firstError != nullptr; });
      },
      fail);
  for (auto& t : threads) t.join();
  if (firstError) std::rethrow_exception(firstError);

  LocalRunResult res;
  summarize(rankNs, res);
  res.wrong = std::accumulate(wrong.begin(), wrong.end(), uint64_t{0});
  for (const auto& run : runs) res.outputs.push_back(run->output());
  return res;
}

}  // namespace arl
