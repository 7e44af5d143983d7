// allreduce-lab calibrate: measures this machine's cost-model parameters and saves them where
// bench and plan find them (export/calibration.h). gamma is the CPU backend's reduction rate,
// measured in process on buffers larger than the caches, reduced slice by slice as the
// executor does, on every core at once (a core among busy ones, as the workers keep them). alpha
// and beta are fitted (fitModel(): relative least squares through the closed forms) to real
// all-reduce runs at several sizes on local worker processes over the data plane bench uses, so
// they are the parameters that best explain what bench measures. Over shared memory the copy rate
// (a thread's memcpy between mappings, in slices) and the cores are measured too:
// predictSharedMemory() (model/model.h) costs unshaped runs with them. Given the last-level
// cache's size (--llc), the copy and the reduction are measured again on a working set that
// fits in it, for runs whose buffers and rings stay in the cache: off unless asked, because on
// this lab's machine those rates mended one row of the unshaped benchmark and broke three
// (docs/performance.md). All of it is measured in rounds, one after another, and each rate and
// run kept is the median of its rounds' (--rounds; docs/bench.md says why).
#include <sched.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <barrier>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "base/clock.h"
#include "base/errors.h"
#include "base/limits.h"
#include "bench_options.h"
#include "cli_util.h"
#include "commands.h"
#include "export/calibration.h"
#include "model/metrics.h"
#include "model/model_fit.h"
#include "model_choice.h"
#include "runtime/coordinator.h"
#include "runtime/process.h"
#include "runtime/sweep.h"
#include "schedule/generators.h"
#include "transport/shm_ring.h"

namespace arl::app {

namespace {

constexpr const char* kProg = "allreduce-lab calibrate";
constexpr std::chrono::seconds kJoinTimeout{20};

constexpr const char* kAbout =
    "Measures the cost model's parameters on this machine: gamma (seconds per byte reduced) "
    "from the CPU backend reducing large buffers in process, then alpha (seconds per message) "
    "and beta (seconds per byte through a port) fitted to all-reduce runs at several sizes on "
    "local worker processes, over the data plane bench uses (each run's median iteration). "
    "Over shared memory (the default) it also measures a thread's copy rate and counts the "
    "cores, which the shared-memory plane's model uses for unshaped runs, and, with --llc, the "
    "copy and reduce rates on buffers that fit in the last-level cache, for runs that do. "
    "Prints the parameters, the fit's residual per run, and saves them as JSON where bench and "
    "plan look: $ARL_CALIBRATION, else $XDG_CONFIG_HOME/allreduce-lab/calibration.json, else "
    "~/.config/allreduce-lab/calibration.json (docs/bench.md).\n"
    "Exit status: 0 when saved; 1 when a run failed or the fit is not usable; 2 on bad "
    "arguments.";

struct CalibrateArgs {
  BenchConfig cfg;  // the runs, as bench would make them
  std::vector<uint64_t> sizes = {4 << 10, 16 << 10, 64 << 10, 256 << 10,
                                 1 << 20, 4 << 20,  16 << 20};
  uint64_t reduceBytes = uint64_t{32} << 20;
  int reducePasses = 7;
  int warmupRunIters = 100;  // iterations of the warm-up run, not kept
  int rounds = 5;            // --rounds: the rates and the sweep, measured this many times
  uint64_t llcBytes = 0;     // --llc; 0: no cache-resident rates
  std::string out;
};

std::string hostTime(double us) { return std::isfinite(us) ? formatTimeUs(us) : "-"; }

// The cores this process may run on (its affinity), which its local workers share.
int usableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(CPU_COUNT(&set), 1);
  return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

// Seconds per pass of `pass`, run by `threads` threads at once, each on buffers of its own
// that `Work` sets up (its constructor) and frees (its destructor): the median over every
// thread's passes. The lab's local workers outnumber or match the cores, so while one rank
// copies or reduces every core is busy with another: the rates the model needs are those of
// a core among busy ones, which share the memory bandwidth, not of one core alone.
template <typename Work, typename... Args>
double concurrentPassSeconds(int threads, int passes, uint64_t bytes, uint64_t slice,
                             const Args&... args) {
  std::vector<std::vector<double>> secs(static_cast<size_t>(threads));
  std::barrier sync(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      Work w(bytes, args...);
      for (int p = 0; p < passes; ++p) {
        sync.arrive_and_wait();  // every thread's pass starts together
        const auto t0 = SteadyClock::now();
        for (uint64_t off = 0; off < bytes; off += slice) w.pass(off, std::min(slice, bytes - off));
        double took = std::chrono::duration<double>(SteadyClock::now() - t0).count();
        // Work that times only part of its pass says how long that part took.
        if constexpr (requires { w.takeTimedSeconds(); }) took = w.takeTimedSeconds();
        secs[static_cast<size_t>(t)].push_back(took);
      }
    });
  }
  for (std::thread& th : pool) th.join();
  std::vector<double> all;
  for (const auto& v : secs) all.insert(all.end(), v.begin(), v.end());
  return median(std::move(all));
}

// `N` buffers of the CPU backend's memory, of `bytes` each or of the sizes given (none for a
// size of 0), touched first (0x3c in every byte: a modest normal float, so no operand is
// subnormal), so the passes pay for no page faults, as a run's buffers and rings are mapped at
// setup.
template <size_t N>
class Buffers {
 public:
  explicit Buffers(uint64_t bytes) {
    for (unsigned char*& p : p_) p = touched(bytes);
  }
  explicit Buffers(const std::array<uint64_t, N>& sizes) {
    for (size_t i = 0; i < N; ++i) p_[i] = sizes[i] > 0 ? touched(sizes[i]) : nullptr;
  }
  ~Buffers() {
    for (unsigned char* p : p_) cpu_.deallocate(p);
  }
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;

 protected:
  CpuBackend cpu_;
  std::array<unsigned char*, N> p_{};

 private:
  unsigned char* touched(uint64_t bytes) {
    auto* p = static_cast<unsigned char*>(cpu_.allocate(static_cast<size_t>(bytes)));
    std::memset(p, 0x3c, static_cast<size_t>(bytes));
    return p;
  }
};

// The CPU backend's reduction, dst = a + b in floats.
class ReduceWork : Buffers<3> {
 public:
  using Buffers::Buffers;
  void pass(uint64_t off, uint64_t len) {
    cpu_.wait(cpu_.reduceFromHost(p_[2] + off, p_[0] + off, p_[1] + off, len / sizeof(float),
                                  DataType::Float, RedOp::Sum));
  }
};

// A thread's copy from one mapping into another (the shared-memory plane's send: the sender
// copies into the receiver's ring).
class CopyWork : Buffers<2> {
 public:
  using Buffers::Buffers;
  void pass(uint64_t off, uint64_t len) {
    std::memcpy(p_[1] + off, p_[0] + off, static_cast<size_t>(len));
  }
};

// The shared-memory plane's send: each slice copied into a ring of `ringBytes` written round
// and round, as a sender fills its receiver's ring (transport/shm): from a buffer (Fresh
// false), or just after the CPU backend reduced it into a temporary, as a RecvReduceSend sends
// its result (Fresh true: a payload in the core's cache; only the copies are timed).
template <bool Fresh>
class SendWork : Buffers<4> {
 public:
  // The source, the ring, the temporary, and the reduction's second operand when fresh.
  SendWork(uint64_t bytes, uint64_t slice, uint64_t ringBytes)
      : Buffers({bytes, ringBytes, slice, Fresh ? bytes : 0}), ringBytes_(ringBytes) {}

  void pass(uint64_t off, uint64_t len) {
    unsigned char* ring = p_[1];
    unsigned char* tmp = p_[2];
    if (pos_ + len > ringBytes_) pos_ = 0;
    const unsigned char* from = p_[0] + off;
    if constexpr (Fresh) {
      cpu_.wait(cpu_.reduceFromHost(tmp, p_[0] + off, p_[3] + off, len / sizeof(float),
                                    DataType::Float, RedOp::Sum));
      from = tmp;
    }
    const auto t0 = SteadyClock::now();
    std::memcpy(ring + pos_, from, static_cast<size_t>(len));
    timed_ += std::chrono::duration<double>(SteadyClock::now() - t0).count();
    pos_ += len;
  }
  double takeTimedSeconds() { return std::exchange(timed_, 0.0); }

 private:
  uint64_t ringBytes_;
  uint64_t pos_ = 0;
  double timed_ = 0;
};

// The reduction on every core at once (gamma), slice by slice as the executor reduces.
ReduceMeasurement measureReduce(uint64_t bytes, uint64_t slice, int passes, int cores) {
  ReduceMeasurement m;
  m.bufferBytes = bytes;
  m.sliceBytes = slice;
  m.passes = passes;
  m.medianPassSeconds = concurrentPassSeconds<ReduceWork>(cores, passes, bytes, slice);
  m.kernels = CpuBackend().kernels() == CpuKernels::Avx2 ? "avx2" : "portable";
  return m;
}

// The copy on every core at once (the shared-memory plane's copy rate).
CopyMeasurement measureCopy(uint64_t bytes, uint64_t slice, int passes, int cores) {
  return {bytes, slice, passes, concurrentPassSeconds<CopyWork>(cores, passes, bytes, slice)};
}

// The sends on every core at once, into rings of the size the workers give a run of `slice`
// slices and `inflight` of them in flight (shmRingBytes()), from buffers and fresh.
SendMeasurement measureSend(uint64_t bytes, uint64_t slice, int inflight, int passes, int cores) {
  SendMeasurement m;
  m.ringBytes = shmRingBytes(static_cast<size_t>(slice), inflight);
  m.fromBuffer = {
      bytes, slice, passes,
      concurrentPassSeconds<SendWork<false>>(cores, passes, bytes, slice, slice, m.ringBytes)};
  m.fresh = {
      bytes, slice, passes,
      concurrentPassSeconds<SendWork<true>>(cores, passes, bytes, slice, slice, m.ringBytes)};
  return m;
}

// Bytes per buffer for a measurement with `buffers` buffers on each of `cores` threads that
// together fill half the last-level cache (the other half for what else runs: the measuring
// threads' stacks, the lab's code), in whole 4 KiB pages.
uint64_t cachedBufferBytes(uint64_t llc, int cores, int buffers) {
  const uint64_t each = llc / 2 / static_cast<uint64_t>(cores * buffers);
  return each / 4096 * 4096;
}

// Passes for a cache-resident measurement: as many bytes as the streaming one moves, so that
// its passes of a few microseconds add up to as long a measurement, at most 1000.
int cachedPasses(const CalibrateArgs& a, uint64_t bytes) {
  const uint64_t scaled = static_cast<uint64_t>(a.reducePasses) * a.reduceBytes / bytes;
  return static_cast<int>(
      std::clamp<uint64_t>(scaled, static_cast<uint64_t>(a.reducePasses), 1000));
}

// The rates measured on buffers that fit in the last-level cache.
struct CacheRates {
  uint64_t llcBytes = 0;
  std::string source;  // where the size came from
  ReduceMeasurement reduce;
  CopyMeasurement copy;
};

// The copy and the reduction on every core at once, each thread on buffers that together
// fit in half the cache; none without --llc, or when the cache is too small for a page each.
std::optional<CacheRates> measureCacheRates(const CalibrateArgs& a, int cores) {
  CacheRates c;
  if (a.llcBytes == 0) return std::nullopt;
  c.llcBytes = a.llcBytes;
  c.source = "--llc";
  const uint64_t reduceBytes = cachedBufferBytes(c.llcBytes, cores, 3);
  const uint64_t copyBytes = cachedBufferBytes(c.llcBytes, cores, 2);
  if (reduceBytes == 0 || copyBytes == 0) return std::nullopt;
  const uint64_t slice = a.cfg.sliceSizes.front();
  c.reduce =
      measureReduce(reduceBytes, std::min(slice, reduceBytes), cachedPasses(a, reduceBytes), cores);
  c.copy = measureCopy(copyBytes, std::min(slice, copyBytes), cachedPasses(a, copyBytes), cores);
  return c;
}

void waitForWorkers(Coordinator& coord, size_t need) {
  const auto deadline = SteadyClock::now() + kJoinTimeout;
  std::vector<CoordinatorEvent> evs;
  while (coord.workers().size() < need) {
    evs.clear();
    coord.takeEvents(evs, std::chrono::milliseconds(20));
    for (const auto& ev : evs) {
      if (const auto* w = std::get_if<WorkerLeft>(&ev); w && !w->joined) {
        throw std::runtime_error(w->beforeJoining());
      }
    }
    if (SteadyClock::now() > deadline) {
      throw std::runtime_error(std::to_string(coord.workers().size()) + " of " +
                               std::to_string(need) + " workers joined within " +
                               std::to_string(kJoinTimeout.count()) + " s");
    }
  }
}

// Runs `spec` to its end on the coordinator's workers; its rows.
std::vector<SweepRow> runSweep(Coordinator& coord, const SweepSpec& spec) {
  const bool tty = ::isatty(2) == 1;
  Sweep sweep(coord, spec, coord.workers(), [&](const SweepRow& r) {
    if (!tty || r.result.state != RunState::Done) return;
    std::fprintf(stderr, "\r\033[K%s: %s %s done", kProg, r.result.request.algorithm.c_str(),
                 formatSize(r.sizeBytes).c_str());
  });
  sweep.start();
  std::vector<CoordinatorEvent> evs;
  while (!sweep.finished()) {
    evs.clear();
    coord.takeEvents(evs, std::chrono::milliseconds(20));
    for (auto& ev : evs) sweep.onEvent(ev);
  }
  if (tty) std::fprintf(stderr, "\r\033[K");
  if (!sweep.error().empty()) throw std::runtime_error(sweep.error());
  return sweep.takeRows();
}

// What one round measured: the rates in process, then the sweep on the workers.
struct Round {
  ReduceMeasurement reduce;
  std::optional<CopyMeasurement> copy;
  std::optional<SendMeasurement> send;
  std::optional<CacheRates> cached;
  std::vector<SweepRow> rows;
};

// The element of `v` whose key is the median: p50 by nearest rank, the lower of the middle two
// when even, so that what is kept is one round's measurement as taken, never a mean of two.
template <typename T, typename Key>
const T& medianBy(const std::vector<T>& v, Key key) {
  std::vector<double> keys;
  for (const T& x : v) keys.push_back(key(x));
  const auto at = std::find(keys.begin(), keys.end(), percentileNearestRank(keys, 50));
  ARL_ENFORCE(at != keys.end(), "no median among " << keys.size() << " keys");
  return v[static_cast<size_t>(at - keys.begin())];
}

double p50Of(const SweepRow& r) {
  return r.metrics.spread.p50Us > 0 ? r.metrics.spread.p50Us : r.metrics.timeUs;
}

// Every round's measurements, on one world of local workers. A warm-up run of the smallest
// size comes first and is not kept: the first runs of a world are slower (see docs/bench.md).
// The rounds follow one another, each a few seconds: this machine's speed swings by 1.3-1.7x
// from one second to the next (docs/telemetry.md, "The machine's speed"), and one round is a
// snapshot of it.
std::vector<Round> measureRounds(const CalibrateArgs& a, int cores) {
  const BenchConfig& c = a.cfg;
  CoordinatorOptions opt;
  opt.localWorkers = c.workers;
  opt.backend = c.backend;
  Coordinator coord(opt);
  waitForWorkers(coord, static_cast<size_t>(c.workers));
  SweepSpec warm = sweepSpecOf(c, {a.sizes.front()});
  warm.algorithms.resize(1);
  warm.base.warmup = 0;
  warm.base.iterations = a.warmupRunIters;
  (void)runSweep(coord, warm);
  const uint64_t slice = c.sliceSizes.front();
  std::vector<Round> rounds(static_cast<size_t>(a.rounds));
  for (Round& r : rounds) {
    r.reduce = measureReduce(a.reduceBytes, slice, a.reducePasses, cores);
    // The shared-memory plane's copy rate, for a calibration of runs over shared memory.
    if (c.dataPlane != DataPlaneKind::Zmq) {
      r.copy = measureCopy(a.reduceBytes, slice, a.reducePasses, cores);
      r.send = measureSend(a.reduceBytes, slice, c.inflights.front(), a.reducePasses, cores);
      r.cached = measureCacheRates(a, cores);
    }
    r.rows = runSweep(coord, sweepSpecOf(c, a.sizes));
  }
  return rounds;
}

// The rounds as one: each rate the round's median, each run the round's run with the median
// p50 (the rates and the runs chosen each on their own: a round's rates and runs are not
// measured at the same moment either).
Round medianRound(const std::vector<Round>& rounds) {
  // The measurement `get` picks out of each round: the one with the median pass.
  const auto median = [&rounds](auto get) {
    return get(medianBy(rounds, [&](const Round& r) { return get(r).medianPassSeconds; }));
  };
  Round m;
  m.reduce = median([](const Round& r) { return r.reduce; });
  if (rounds.front().copy) {
    m.copy = median([](const Round& r) { return *r.copy; });
    SendMeasurement send = *rounds.front().send;
    send.fromBuffer = median([](const Round& r) { return r.send->fromBuffer; });
    send.fresh = median([](const Round& r) { return r.send->fresh; });
    m.send = send;
  }
  if (rounds.front().cached) {
    CacheRates c = *rounds.front().cached;
    c.copy = median([](const Round& r) { return r.cached->copy; });
    c.reduce = median([](const Round& r) { return r.cached->reduce; });
    m.cached = c;
  }
  const std::vector<SweepRow>& first = rounds.front().rows;
  for (size_t i = 0; i < first.size(); ++i) {
    std::vector<SweepRow> same;
    for (const Round& r : rounds) {
      ARL_ENFORCE(i < r.rows.size() && r.rows[i].sizeBytes == first[i].sizeBytes &&
                      r.rows[i].result.request.algorithm == first[i].result.request.algorithm,
                  "calibrate's rounds ran different sweeps");
      same.push_back(r.rows[i]);
    }
    m.rows.push_back(medianBy(same, p50Of));
  }
  return m;
}

// Each round's speed against the median round: the median over its runs of 1 MiB and more
// (all its runs when it has none) of p50 / the median round's p50. Above 1: slower.
std::vector<double> roundSlowness(const std::vector<Round>& rounds, const Round& median) {
  std::vector<double> out;
  bool large = false;
  for (const SweepRow& r : median.rows) large = large || r.sizeBytes >= (uint64_t{1} << 20);
  for (const Round& round : rounds) {
    std::vector<double> ratios;
    for (size_t i = 0; i < round.rows.size(); ++i) {
      if (large && round.rows[i].sizeBytes < (uint64_t{1} << 20)) continue;
      if (p50Of(median.rows[i]) > 0) ratios.push_back(p50Of(round.rows[i]) / p50Of(median.rows[i]));
    }
    out.push_back(ratios.empty() ? 1.0 : percentileNearestRank(ratios, 50));
  }
  return out;
}

// The fit of alpha and beta to the rows, gamma as measured.
// Fitted to each run's median iteration, not its mean: on a machine whose ranks share few
// cores one descheduled iteration can hold most of a run's mean (p99 of milliseconds against a
// p50 of tens of microseconds, docs/performance.md), which is the machine's noise, not alpha.
Calibration fitRows(const CalibrateArgs& a, const std::vector<Round>& rounds) {
  const Round median = medianRound(rounds);
  const std::vector<SweepRow>& rows = median.rows;
  const ReduceMeasurement& reduce = median.reduce;
  const std::optional<CopyMeasurement>& copy = median.copy;
  const std::optional<CacheRates>& cached = median.cached;
  Calibration cal;
  cal.rounds = static_cast<int>(rounds.size());
  if (rounds.size() > 1) cal.roundSlowness = roundSlowness(rounds, median);
  ModelParams base;
  base.gamma = reduce.medianPassSeconds / static_cast<double>(reduce.bufferBytes);
  std::vector<FitSample> samples;
  for (const SweepRow& r : rows) {
    const double p50 = r.metrics.spread.p50Us;
    samples.push_back({costQueryOf(r, {}), (p50 > 0 ? p50 : r.metrics.timeUs) * 1e-6});
  }
  const ModelFit f = fitModel(samples, base);
  cal.params = f.params;
  if (copy) {
    cal.params.shmCopy = copy->medianPassSeconds / static_cast<double>(copy->bufferBytes);
    cal.params.cores = usableCores();
    if (cached) {
      cal.params.shmCopyCached =
          cached->copy.medianPassSeconds / static_cast<double>(cached->copy.bufferBytes);
      cal.params.gammaCached =
          cached->reduce.medianPassSeconds / static_cast<double>(cached->reduce.bufferBytes);
      cal.params.llcBytes = cached->llcBytes;
      cal.copyCached = cached->copy;
      cal.reduceCached = cached->reduce;
      cal.llcSource = cached->source;
    }
    if (median.send) {
      const SendMeasurement& sm = *median.send;
      cal.params.shmSend =
          sm.fromBuffer.medianPassSeconds / static_cast<double>(sm.fromBuffer.bufferBytes);
      cal.params.shmSendFresh =
          sm.fresh.medianPassSeconds / static_cast<double>(sm.fresh.bufferBytes);
      cal.send = sm;
    }
    // The shared-memory model's per-message cost and work scale, fitted through that model
    // to the same runs (the closed form's alpha above has every rank on a core of its own).
    std::vector<FitSample> shm = samples;
    for (FitSample& x : shm) x.query.sharedMemory = true;
    const SharedMemoryFit sf = fitSharedMemory(shm, cal.params);
    cal.params.shmAlpha = sf.alpha;
    cal.params.shmWorkScale = sf.workScale;
    cal.copy = copy;
  }
  cal.rmsRelativeResidual = f.rmsRelativeResidual;
  for (size_t i = 0; i < rows.size(); ++i) {
    const SweepRow& r = rows[i];
    cal.runs.push_back({r.result.request.algorithm, r.sizeBytes, r.metrics.timeUs,
                        r.metrics.spread.p50Us, f.fittedSeconds[i] * 1e6});
  }
  const BenchConfig& c = a.cfg;
  cal.machine = hostName();
  cal.date = utcTimestamp();
  cal.dataPlane = c.dataPlane == DataPlaneKind::Auto ? "shm" : std::string(toString(c.dataPlane));
  cal.workers = c.workers;
  cal.collective = std::string(toString(c.collective));
  cal.dtype = std::string(toString(c.dtype));
  cal.sliceBytes = c.sliceSizes.front();
  cal.inflight = c.inflights.front();
  cal.iterations = c.iters;
  cal.warmup = c.warmup;
  cal.reduce = reduce;
  return cal;
}

void printCalibration(const Calibration& c, const std::string& path) {
  std::printf(
      "# allreduce-lab calibrate: %s, %d local workers, data plane %s, %s %s, slice %s, "
      "inflight %d, %d iterations (%d warmup) per run\n",
      c.machine.c_str(), c.workers, c.dataPlane.c_str(), c.collective.c_str(), c.dtype.c_str(),
      formatSize(c.sliceBytes).c_str(), c.inflight, c.iterations, c.warmup);
  const ReduceMeasurement& m = c.reduce;
  std::printf(
      "# reduce: %s in %s slices, every core at once, median pass %s us of %d (%s kernels)\n",
      formatSize(m.bufferBytes).c_str(), formatSize(m.sliceBytes).c_str(),
      formatTimeUs(m.medianPassSeconds * 1e6).c_str(), m.passes, m.kernels.c_str());
  if (c.copy) {
    std::printf("# copy: %s in %s slices, every core at once, median pass %s us of %d; %d cores\n",
                formatSize(c.copy->bufferBytes).c_str(), formatSize(c.copy->sliceBytes).c_str(),
                formatTimeUs(c.copy->medianPassSeconds * 1e6).c_str(), c.copy->passes,
                c.params.cores);
  }
  if (c.send) {
    const SendMeasurement& s = *c.send;
    std::printf(
        "# send: into a %.1f MiB ring, every core at once, %s in %s slices: "
        "from a buffer %.2f GB/s, fresh (just reduced) %.2f GB/s\n",
        static_cast<double>(s.ringBytes) / (1 << 20), formatSize(s.fromBuffer.bufferBytes).c_str(),
        formatSize(s.fromBuffer.sliceBytes).c_str(),
        1e-9 * static_cast<double>(s.fromBuffer.bufferBytes) / s.fromBuffer.medianPassSeconds,
        1e-9 * static_cast<double>(s.fresh.bufferBytes) / s.fresh.medianPassSeconds);
  }
  if (c.copyCached && c.reduceCached) {
    std::printf(
        "# in the cache (last level %s, from %s): copy %.2f GB/s (%s buffers), reduce %.2f GB/s "
        "(%s buffers), every core at once\n",
        formatSize(c.params.llcBytes).c_str(), c.llcSource.c_str(),
        1e-9 * static_cast<double>(c.copyCached->bufferBytes) / c.copyCached->medianPassSeconds,
        formatSize(c.copyCached->bufferBytes).c_str(),
        1e-9 * static_cast<double>(c.reduceCached->bufferBytes) / c.reduceCached->medianPassSeconds,
        formatSize(c.reduceCached->bufferBytes).c_str());
  } else if (c.copy) {
    std::printf("# in the cache: not measured (--llc SIZE measures it)\n");
  }
  if (c.rounds > 1) {
    std::string each;
    for (double x : c.roundSlowness) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%s%.2f", each.empty() ? "" : " ", x);
      each += buf;
    }
    const auto [lo, hi] = std::minmax_element(c.roundSlowness.begin(), c.roundSlowness.end());
    std::printf(
        "# rounds: %d; each round's runs against the median (p50 / median p50, above 1 slower): "
        "%s; the machine's speed moved %.2fx; rates and runs below are the medians\n",
        c.rounds, each.c_str(), *hi / *lo);
  }
  std::printf("#\n#%11s  %-18s  %9s  %9s  %9s  %8s\n", "size", "algorithm", "time", "p50", "fitted",
              "residual");
  std::printf("#%11s  %-18s  %9s  %9s  %9s  %8s\n", "(B)", "", "(us)", "(us)", "(us)", "");
  for (const CalibrationRun& r : c.runs) {
    std::printf("%12" PRIu64 "  %-18s  %9s  %9s  %9s  %+7.0f%%\n", r.sizeBytes, r.algorithm.c_str(),
                hostTime(r.measuredUs).c_str(), hostTime(r.p50Us).c_str(),
                hostTime(r.fittedUs).c_str(), (r.p50Us - r.fittedUs) / r.p50Us * 100);
  }
  std::printf("#\n# fit: rms relative residual %.0f%% over %zu runs\n", c.rmsRelativeResidual * 100,
              c.runs.size());
  std::printf("# parameters: %s\n", paramsText(c.params).c_str());
  std::printf("#   alpha %.4g s, beta %.4g s/byte, gamma %.4g s/byte\n", c.params.alpha,
              c.params.beta, c.params.gamma);
  std::printf("# saved to %s\n", path.c_str());
}

class CalibrateCommand final : public Command {
 public:
  CalibrateCommand(CLI::App& lab, const std::vector<std::string>& args)
      : opts_(lab.add_subcommand("calibrate", "measure this machine's cost-model parameters"),
              args) {
    app = lab.get_subcommand("calibrate");
    app->footer(wrap(kAbout, 92) + "\n");
    opts_.value("--workers", "N", "local worker processes (default 4, as bench)");
    opts_.value("--data-plane", "NAME", "auto, shm or zmq (default auto: shm, as bench)");
    opts_.value("--algo", "NAME[,NAME...]",
                "algorithms whose runs the fit uses (default ring). Known: " + algorithmList());
    opts_.value("--sizes", "SIZE[,SIZE...]",
                "all-reduce sizes in bytes, at least two (default 4K,16K,64K,256K,1M,4M,16M)");
    opts_.value("-n,--iters", "N", "timed iterations per run (default 10)");
    opts_.value("-w,--warmup_iters", "N", "untimed iterations before them (default 3)");
    opts_.value("--slice", "SIZE", "pipeline slice (default 1M, as bench)");
    opts_.value("--rounds", "N",
                "measure the rates and run the sweep N times, one round after another, and keep "
                "the median of each (default 5; 1 with --quick): this machine's speed swings "
                "from one second to the next");
    opts_.flag("--quick", &quick_,
               "fewer sizes (4K,256K,4M), 5 iterations, 1 warmup, an 8M reduce, one round: a "
               "few seconds, for tests; less precise");
    opts_.value("--llc", "SIZE",
                "the last-level cache's size: also measure the cache-resident rates of the "
                "shared-memory model, for runs that fit in it (default: not measured; "
                "docs/performance.md says why)");
    opts_.value("--out", "FILE", "write the calibration here instead of the default place");
  }
  int run() override;

 private:
  CalibrateArgs parse() const;

  Options opts_;
  bool quick_ = false;
};

CalibrateArgs CalibrateCommand::parse() const {
  CalibrateArgs a;
  BenchConfig& c = a.cfg;
  c.check = 1;
  c.iters = 10;
  c.warmup = 3;
  if (quick_) {
    a.sizes = {4 << 10, 256 << 10, 4 << 20};
    c.iters = 5;
    c.warmup = 1;
    a.reduceBytes = uint64_t{8} << 20;
    a.reducePasses = 3;
    a.warmupRunIters = 20;
    a.rounds = 1;
  }
  if (auto v = opts_.get("--workers")) c.workers = parseInt(*v, 2, kMaxRanks);
  if (auto v = opts_.get("--data-plane")) {
    const auto d = parseDataPlaneKind(v->text);
    if (!d) throw refuse(*v, "unknown data plane (known: auto, shm, zmq)");
    if (*d == DataPlaneKind::Tcp) throw refuse(*v, "calibrate measures shm or zmq, not tcp");
    c.dataPlane = *d;
  }
  if (auto v = opts_.get("--algo")) c.algorithms = parseNameList(*v);
  for (const std::string& name : c.algorithms) {
    if (!algorithmSupports(name, Collective::AllReduce)) {
      throw refuse(*opts_.get("--algo"), "'" + name + "' is not an all-reduce algorithm (known: " +
                                             algorithmList() + ")");
    }
  }
  if (auto v = opts_.get("--sizes")) {
    a.sizes = parseSizeList(*v);
    std::sort(a.sizes.begin(), a.sizes.end());
    a.sizes.erase(std::unique(a.sizes.begin(), a.sizes.end()), a.sizes.end());
    if (a.sizes.size() < 2 || a.sizes.front() < 4) {
      throw refuse(*v, "needs at least two different sizes of 4 bytes or more");
    }
  }
  if (auto v = opts_.get("--rounds")) a.rounds = parseInt(*v, 1, 100);
  if (auto v = opts_.get("--iters")) c.iters = parseInt(*v, 1, 100000);
  if (auto v = opts_.get("--warmup_iters")) c.warmup = parseInt(*v, 0, 100000);
  if (auto v = opts_.get("--slice")) c.sliceSizes = {parseSize(*v)};
  if (c.sliceSizes.front() < 4 || c.sliceSizes.front() % 4 != 0) {
    throw refuse(opts_.getOr("--slice", ""), "must be a whole number of floats (4 bytes)");
  }
  if (auto v = opts_.get("--llc")) {
    a.llcBytes = parseSize(*v);
    if (a.llcBytes < (uint64_t{64} << 10)) throw refuse(*v, "must be 64K or more");
  }
  a.out = calibrationPath();
  if (auto v = opts_.get("--out")) a.out = v->text;
  if (a.out.empty()) {
    throw UsageError{"nowhere to save: set $ARL_CALIBRATION or $HOME, or give --out FILE"};
  }
  return a;
}

int CalibrateCommand::run() {
  CalibrateArgs a;
  const int refused = runChecked(kProg, [&] {
    a = parse();
    return 0;
  });
  if (refused != 0) return refused;
  const Calibration cal = fitRows(a, measureRounds(a, usableCores()));
  writeCalibration(a.out, cal);
  printCalibration(cal, a.out);
  return 0;
}

}  // namespace

std::unique_ptr<Command> addCalibrateCommand(CLI::App& lab, const std::vector<std::string>& args) {
  return std::make_unique<CalibrateCommand>(lab, args);
}

}  // namespace arl::app
