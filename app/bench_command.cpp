// allreduce-lab bench: nccl-tests for the lab. Starts (or accepts) worker processes through
// the Coordinator, sweeps sizes and algorithms on real buffers, and prints nccl-tests' table
// (size, count, type, redop, root, time, algbw, busbw, #wrong) with the algorithm and the cost
// model's prediction beside each measurement. Optionally writes the results as JSON and CSV,
// a Perfetto trace and a recording (export.h). Every argument is checked before any worker
// starts; SIGINT or SIGTERM aborts the run and shuts the workers down. The sweep holds the
// world of the header: a worker that joins meanwhile waits as a spare. Whatever ends the sweep
// early (a failed or refused run, a signal), the rows that completed are written.
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/errors.h"
#include "base/topology.h"
#include "bench_fit.h"
#include "bench_options.h"
#include "cli_util.h"
#include "commands.h"
#include "exec/collective_library.h"
#include "exec/run_request.h"
#include "export/bench_sweep.h"
#include "export/export.h"
#include "export/flight_json.h"
#include "export/nccl_tests.h"
#if ARL_HAVE_GPU
#include "gpu/cuda_device.h"
#endif
#include "model/metrics.h"
#include "model/model.h"
#include "model_choice.h"
#include "runtime/coordinator.h"
#include "runtime/protocol.h"
#include "runtime/sweep.h"
#include "schedule/generators.h"
#include "signal_watch.h"
#include "transport/shm/shm_transport.h"
#include "transport/zmq/curve_keys.h"

namespace arl::app {

namespace {

using Clock = SteadyClock;

constexpr const char* kProg = kBenchProg;
// How long to wait for workers to join: local ones start in well under a second; remote
// ones are started by hand once the join command is printed.
constexpr std::chrono::seconds kLocalJoinTimeout{20};
constexpr std::chrono::seconds kRemoteJoinTimeout{300};

// ---- Keys ------------------------------------------------------------------------------------

// How the control socket listens, for the line that says where: " (encrypted, ...)".
std::string listenSecurityText(const ControlSecurityState& s) {
  if (s.curve) return " (encrypted with CURVE, lab key " + keyFingerprint(s.serverKey) + ")";
  if (s.clearOnNetwork) return " IN THE CLEAR (--insecure)";
  return " (this machine only)";
}

// The header's "# control:" line; an insecure listen in red (ANSI) on a terminal.
void printControlLine(const ControlSecurityState& s, const std::string& listen) {
  if (s.curve) {
    std::printf(
        "# control: encrypted and authenticated (CURVE), lab key %s, %zu worker key(s) "
        "allowed by %s\n",
        keyFingerprint(s.serverKey).c_str(), s.allowed, s.allowFile.c_str());
  } else if (s.clearOnNetwork) {
    const bool tty = ::isatty(1) == 1;
    std::printf(
        "%s# control: INSECURE: listening on %s in the clear (--insecure): anyone who "
        "reaches it may join, read and change the data%s\n",
        tty ? "\033[31m" : "", listen.c_str(), tty ? "\033[0m" : "");
  } else {
    std::printf("# control: this machine only (loopback), in the clear\n");
  }
}

// ---- Signals ---------------------------------------------------------------------------------

// ---- Progress and output ---------------------------------------------------------------------

// The \r-updated progress line on stderr, only when stderr is a terminal. Lines printed
// while it shows clear it first.
class Progress {
 public:
  Progress() : tty_(::isatty(2) == 1) {}

  // Whether show() would draw now: callers skip formatting a line that would not be shown
  // (iteration reports come thousands a second).
  bool due() const {
    if (!tty_) return false;
    std::lock_guard<std::mutex> lock(mu_);
    return !shown_ || Clock::now() - last_ >= std::chrono::milliseconds(100);
  }

  void show(const std::string& text) {
    if (!tty_) return;
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = Clock::now();
    if (shown_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    std::fprintf(stderr, "\r\033[K%s", text.c_str());
    std::fflush(stderr);
    shown_ = true;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    clearLocked();
  }
  // Prints a whole line on `to` with the progress line out of the way.
  void line(std::FILE* to, const std::string& text) {
    std::lock_guard<std::mutex> lock(mu_);
    clearLocked();
    std::fprintf(to, "%s\n", text.c_str());
    std::fflush(to);
  }

 private:
  void clearLocked() {
    if (!shown_) return;
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
    shown_ = false;
  }
  bool tty_;
  mutable std::mutex mu_;
  bool shown_ = false;
  Clock::time_point last_{};
};

// Joins "a,b,c" from values printed by `f`.
template <class T, class F>
std::string joinWith(const std::vector<T>& v, F&& f) {
  std::string s;
  for (const T& x : v) s += (s.empty() ? "" : ",") + f(x);
  return s;
}

// Now as nccl-tests writes it in its JSON (util.cu, TIME_STRING_FORMAT), in local time.
std::string localTimeText() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[32];
  return std::string(buf, std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm));
}

// The bench session: starts the coordinator, waits for the workers, then drives a Sweep with
// the coordinator's events on this thread, printing each row as it completes.
class Bench {
 public:
  Bench(BenchArgs a, const ModelChoice& model, bool fit) : a_(std::move(a)), c_(a_.cfg), fit_(fit) {
    report_.config = c_;
    report_.model = model.params;
    report_.modelSource = model.source;
    calibration_ = model.calibration;
    for (const std::string& n : c_.algorithms) algoWidth_ = std::max(algoWidth_, n.size());
    varySlice_ = c_.sliceSizes.size() > 1;
    showBackend_ = !c_.backends.empty();
    varyInflight_ = c_.inflights.size() > 1;
  }

  int run();

 private:
  int interruptedExit() {
    const int s = signals_.signal();
    progress_.line(stderr, std::string(kProg) + ": interrupted by " + signalName(s) +
                               "; the run was aborted and the workers shut down");
    return 128 + s;
  }
  static std::string signalName(int s) { return s == SIGTERM ? "SIGTERM" : "SIGINT"; }
  bool interrupted() const { return signals_.signal() != 0; }
  std::unique_ptr<Coordinator> startCoordinator();
  void waitForWorkers(Coordinator& coord);
  SweepSpec sweepSpec() const;
  int runSweep(Coordinator& coord);
  void onRow(const SweepRow& row);
  void printHeader(const std::vector<WorkerInfo>& ws);
  void printLibraryNote() const;
  void printLibraryNote(std::string_view library) const;
  static void printDeviceSharingNote(const std::vector<WorkerInfo>& ws);
  void printRow(const SweepRow& row);
  void printFooter();
  bool writeOutputs();
  void onEvent(const CoordinatorEvent& ev);
  std::string label(const SweepPoint& p) const;
  // The iterations each run checks (RunRequest::checkedIterations): none with random data.
  uint32_t checkedIterations() const { return runRequestOf(c_).checkedIterations(); }

  BenchArgs a_;
  const BenchConfig& c_;
  ControlSecurityState security_;           // the coordinator's, once it listens
  bool fit_ = false;                        // --fit
  std::optional<Calibration> calibration_;  // where the parameters came from one
  BenchReport report_;
  SignalWatch signals_{kProg};
  Progress progress_;
  size_t algoWidth_ = 9;
  bool varySlice_ = false, varyInflight_ = false, showBackend_ = false;
  // Progress, on this thread only.
  std::string runLabel_;
  size_t runIndex_ = 0, runTotal_ = 0;
  uint64_t progressRun_ = 0, iterationReports_ = 0;
  int joined_ = 0;
  std::string joinFailure_;  // a local worker that ended before joining
  bool anyWrong_ = false;
  uint64_t eventsKept_ = 0, eventsDropped_ = 0, slowDropped_ = 0, iterationsDropped_ = 0;
  std::string startTime_;  // local time, for nccl-tests' JSON
};

void Bench::onEvent(const CoordinatorEvent& ev) {
  if (const auto* l = std::get_if<LogEvent>(&ev)) {
    if (l->level >= 1) progress_.line(stderr, std::string(kProg) + ": " + l->text);
    return;
  }
  if (const auto* w = std::get_if<WorkerLeft>(&ev)) {
    if (!w->joined && joinFailure_.empty()) {
      joinFailure_ = w->beforeJoining();
    }
    return;
  }
  if (const auto* j = std::get_if<WorkerJoined>(&ev)) {
    if (j->worker.spare) {
      progress_.line(stderr,
                     printfString("%s: worker %s joined from %s during the sweep; it waits as a "
                                  "spare (the sweep keeps its %zu ranks)",
                                  kProg, j->worker.name.c_str(), j->worker.host.c_str(),
                                  report_.workers.size()));
      return;
    }
    ++joined_;
    progress_.show(printfString("waiting for workers: %d of %d joined", joined_, nranksOf(c_)));
    return;
  }
  if (const auto* it = std::get_if<IterationEvent>(&ev)) {
    if (it->runId != progressRun_) {
      progressRun_ = it->runId;
      iterationReports_ = 0;
    }
    ++iterationReports_;
    if (!progress_.due()) return;
    const uint64_t n = static_cast<uint64_t>(std::max(nranksOf(c_), 1));
    progress_.show(printfString("[%zu/%zu] %s: iteration %" PRIu64 "/%d", runIndex_, runTotal_,
                                runLabel_.c_str(),
                                std::min<uint64_t>(iterationReports_ / n, c_.iters), c_.iters));
  }
}

std::unique_ptr<Coordinator> Bench::startCoordinator() {
  CoordinatorOptions opt;
  opt.localWorkers = c_.workers;
  opt.expectRemote = c_.expect;
  opt.listen = c_.listen;
  opt.security = c_.security;
  opt.backend = c_.backend;
  for (size_t i = 0; i + 1 < c_.mpiMca.size(); i += 2) {
    opt.mpirunArgs.insert(opt.mpirunArgs.end(), {"--mca", c_.mpiMca[i], c_.mpiMca[i + 1]});
  }
  opt.localDevices = c_.devices;
  opt.launch = a_.launch;
  opt.joinTimeout = std::chrono::milliseconds(kLocalJoinTimeout);
  try {
    return std::make_unique<Coordinator>(opt);
  } catch (const ConfigError& e) {
    progress_.line(stderr, std::string(kProg) + ": " + e.what());
    return nullptr;
  }
}

// Takes the coordinator's events until every worker has joined; throws naming who is missing.
void Bench::waitForWorkers(Coordinator& coord) {
  const size_t need = static_cast<size_t>(nranksOf(c_));
  const auto timeout = c_.expect > 0 ? kRemoteJoinTimeout : kLocalJoinTimeout;
  const auto deadline = Clock::now() + timeout;
  std::vector<CoordinatorEvent> evs;
  const auto ready = [&] {
    const auto ws = coord.workers();
    return ws.size() >= need &&
           std::all_of(ws.begin(), ws.end(), [](const WorkerInfo& w) { return w.proven; });
  };
  while (!interrupted() && !ready()) {
    evs.clear();
    coord.takeEvents(evs, std::chrono::milliseconds(20));
    for (const auto& ev : evs) onEvent(ev);
    if (!joinFailure_.empty()) throw std::runtime_error(joinFailure_);
    if (Clock::now() < deadline) continue;
    const auto ws = coord.workers();
    size_t local = 0;
    for (const WorkerInfo& w : ws) local += w.local ? 1 : 0;
    std::string msg = std::to_string(ws.size()) + " of " + std::to_string(need) +
                      " workers joined within " + std::to_string(timeout.count()) + " s";
    if (local < static_cast<size_t>(c_.workers)) {
      msg +=
          "; " + std::to_string(c_.workers - static_cast<int>(local)) + " local worker(s) missing";
    }
    if (ws.size() - local < static_cast<size_t>(c_.expect)) {
      msg += "; " + std::to_string(c_.expect - static_cast<int>(ws.size() - local)) +
             " remote worker(s) missing (start each with: " + coord.joinCommand() + ")";
    }
    throw std::runtime_error(msg);
  }
}

void Bench::printHeader(const std::vector<WorkerInfo>& ws) {
  const int n = static_cast<int>(ws.size());
  std::string step = c_.stepFactor ? std::to_string(c_.stepFactor) + "(factor)"
                                   : std::to_string(c_.stepBytes) + "(bytes)";
  std::printf("# allreduce-lab bench: %s, nranks %d (%d local, %d remote), backend %s\n",
              std::string(toString(c_.collective)).c_str(), n, c_.workers, c_.expect,
              c_.backend.c_str());
  std::printf("# minBytes %" PRIu64 " maxBytes %" PRIu64
              " step: %s warmup iters: %d iters: %d validation: %u\n",
              c_.minBytes, c_.maxBytes, step.c_str(), c_.warmup, c_.iters, checkedIterations());
  // What the workers will choose: auto means shared memory when they share one host.
  std::string plane = dataPlaneUse(c_.dataPlane, ws).text;
  // cuda workers of one host lend each other slices in place unless told not to.
  if (c_.backend == "cuda") plane += c_.cudaIpc ? ", CUDA IPC on one host" : ", CUDA IPC off";
  const std::string slices = joinWith(c_.sliceSizes, [](uint64_t b) { return std::to_string(b); });
  const std::string inflights = joinWith(c_.inflights, [](int k) { return std::to_string(k); });
  const std::string ring = c_.ringOrder.empty()
                               ? "0..n-1"
                               : joinWith(c_.ringOrder, [](int r) { return std::to_string(r); });
  const bool windowed = c_.window > 1 && std::find(c_.algorithms.begin(), c_.algorithms.end(),
                                                   "ring") != c_.algorithms.end();
  const std::string window =
      windowed ? ", ring window " + std::to_string(c_.window) + " slices" : std::string();
  std::printf("# slice %s bytes, inflight %s%s, ring order %s, %s, telemetry %s (at most %" PRIu64
              " events per run), data plane %s\n",
              slices.c_str(), inflights.c_str(), window.c_str(), ring.c_str(),
              c_.inPlace ? "in-place" : "out-of-place", std::string(toString(c_.telemetry)).c_str(),
              c_.maxEvents, plane.c_str());
  if (std::find(c_.algorithms.begin(), c_.algorithms.end(), "knomial") != c_.algorithms.end()) {
    std::printf("# knomial radix %d%s\n", resolveRadix(c_.radix, n),
                c_.radix > 0 ? "" : " (the default)");
  }
  if (!c_.topology.empty()) {
    const Topology t = parseTopology(c_.topology);
    std::printf("# topology: %s (%s)\n", c_.topology.c_str(),
                describeTopology(t, topologyLinkRate(t, c_.shaping)).c_str());
  }
  std::printf("# network: %s\n", describeShaping(c_.shaping).c_str());
  if (!c_.listen.empty() || c_.expect > 0 || c_.security.keysAsked) {
    printControlLine(security_, c_.listen);
  }
  std::printf("#\n# Using workers\n");
  for (const WorkerInfo& w : ws) {
    const std::string device = w.device >= 0 ? " device " + std::to_string(w.device) : "";
    const std::string key = w.keyFingerprint.empty() ? "" : ", key " + w.keyFingerprint;
    const std::string placed = w.launchRank < 0 ? ""
                                                : printfString(", launch rank %d (%d on its host)",
                                                               w.launchRank, w.launchLocalRank);
    std::printf("#  Rank %2d Pid %7" PRId64 " on %s%s (%s, %s%s%s)\n", w.rank, w.pid,
                w.host.c_str(), device.c_str(), w.backend.c_str(), w.local ? "local" : "remote",
                key.c_str(), placed.c_str());
  }
  printLibraryNote();
  printDeviceSharingNote(ws);
  std::printf(
      "#\n# predicted: the cost model's time, not a measurement (%s:\n"
      "#   %s)\n",
      report_.modelSource.c_str(), paramsText(report_.model).c_str());
  if (calibration_ &&
      (calibration_->workers != n || plane.rfind(calibration_->dataPlane, 0) != 0)) {
    std::printf("# note: calibrated with %d workers over %s; this run has %d ranks over %s\n",
                calibration_->workers, calibration_->dataPlane.c_str(), n, plane.c_str());
  }
  const int aw = static_cast<int>(algoWidth_);
  const std::string bw = showBackend_ ? printfString("  %-7s", "backend") : "";
  const std::string sw = bw + (varySlice_ ? printfString("  %9s", "slice") : "");
  const std::string iw = varyInflight_ ? printfString("  %8s", "inflight") : "";
  const std::string pi =
      c_.perIterTiming ? printfString("  %7s  %7s  %7s  %7s", "i_min", "i_max", "i_p99", "i_cv%")
                       : "";
  std::printf("#\n#%11s  %12s  %8s  %6s  %6s  %-*s%s%s  %7s  %6s  %6s  %6s  %9s  %7s  %7s  %7s%s\n",
              "size", "count", "type", "redop", "root", aw, "algorithm", sw.c_str(), iw.c_str(),
              "time", "algbw", "busbw", "#wrong", "predicted", "p50", "p99", "max", pi.c_str());
  const std::string su = (showBackend_ ? printfString("  %-7s", "") : std::string()) +
                         (varySlice_ ? printfString("  %9s", "(B)") : "");
  const std::string iu = varyInflight_ ? printfString("  %8s", "") : "";
  const std::string pu =
      c_.perIterTiming ? printfString("  %7s  %7s  %7s  %7s", "(us)", "(us)", "(us)", "(%)") : "";
  std::printf("#%11s  %12s  %8s  %6s  %6s  %-*s%s%s  %7s  %6s  %6s  %6s  %9s  %7s  %7s  %7s%s\n",
              "(B)", "(elements)", "", "", "", aw, "", su.c_str(), iu.c_str(), "(us)", "(GB/s)",
              "(GB/s)", "", "(us,model)", "(us)", "(us)", "(us)", pu.c_str());
  std::fflush(stdout);
}

// Local cuda workers that share a GPU: without MPS their CUDA contexts take turns on it (the
// driver's time slices), and every time in the table includes the waiting; with MPS their
// work runs at once. Said once, under the workers, for each shared device.
void Bench::printDeviceSharingNote(const std::vector<WorkerInfo>& ws) {
  std::map<int, int> sharing;  // device -> local cuda workers on it
  for (const WorkerInfo& w : ws) {
    if (w.local && w.backend == "cuda" && w.device >= 0) ++sharing[w.device];
  }
  for (const auto& [device, n] : sharing) {
    if (n < 2) continue;
#if ARL_HAVE_GPU
    const bool mps = gpu::mpsRunning();
#else
    const bool mps = false;
#endif
    if (mps) {
      std::printf(
          "# note: %d workers share device %d through MPS (its control daemon runs): "
          "their kernels and copies run at once\n",
          n, device);
    } else {
      std::printf(
          "# note: %d workers share device %d without MPS: their CUDA contexts take "
          "turns on the GPU (time slices),\n#   so every time below includes waiting "
          "for the others' turns (nvidia-cuda-mps-control -d starts MPS)\n",
          n, device);
    }
  }
}

// What the rows of the libraries' own collectives are, once, when the sweep has any.
void Bench::printLibraryNote() const {
  for (const std::string& note : a_.notes) std::printf("# %s\n", note.c_str());
  printLibraryNote("nccl");
  printLibraryNote("mpi");
  printLibraryNote("gloo");
}

void Bench::printLibraryNote(std::string_view library) const {
  std::string names;
  for (const std::string& a : c_.algorithms) {
    const LibraryAlgorithm* lib = findLibraryAlgorithm(a);
    if (lib != nullptr && lib->library == library) names += (names.empty() ? "" : ", ") + a;
  }
  if (names.empty()) return;
  if (library == "mpi") {
    std::string mca;
    for (size_t i = 0; i + 1 < c_.mpiMca.size(); i += 2) {
      mca += (mca.empty() ? "" : ", ") + c_.mpiMca[i] + " " + c_.mpiMca[i + 1];
    }
    std::printf("#\n# Open MPI's parameters (--mca): %s\n",
                mca.empty() ? "its defaults (btl: its own choice of transport)" : mca.c_str());
    std::printf(
        "#\n# %s: Open MPI's own collectives (MPI_Allreduce and its kin, coll_tuned's algorithm "
        "forced\n#   per run through MPI_T) on the same host buffers, inputs and check, on workers "
        "that\n#   mpirun started; each iteration timed whole (the blocking call). No chunk "
        "telemetry:\n#   Open MPI reports none. The cost model predicts no Open MPI time.\n",
        names.c_str());
    return;
  }
  if (library == "gloo") {
    std::printf(
        "#\n# %s: Gloo's own collectives (AllreduceRing and its kin) on the cpu workers' "
        "buffers,\n#   same inputs and check, over Gloo's TCP pairs; each iteration timed whole "
        "(an\n#   out-of-place all-reduce includes copying the input into the output, as Gloo "
        "reduces\n#   in place). No chunk telemetry: Gloo reports none. The cost model predicts "
        "no Gloo time.\n",
        names.c_str());
    return;
  }
  std::printf(
      "#\n# %s: NCCL's own collectives (ncclAllReduce and its kin, NCCL_ALGO set per run) on "
      "the\n#   same buffers, inputs and check; each iteration timed whole (the call and a "
      "stream\n#   synchronisation). No chunk telemetry of the lab's: the telemetry holds what "
      "NCCL's\n#   profiler plugin reported (collective, kernel channels, network steps), "
      "labelled NCCL's.\n#   The cost model predicts no NCCL time.\n",
      names.c_str());
}

void Bench::printRow(const SweepRow& row) {
  const RunRequest& q = row.result.request;
  const bool rooted = q.collective == Collective::Reduce || q.collective == Collective::Broadcast;
  const std::string redop = collectiveReduces(q.collective) ? std::string(toString(q.op)) : "none";
  const std::string wrong = q.checkedIterations() ? std::to_string(row.metrics.wrong) : "N/A";
  const std::string predicted =
      std::isfinite(row.predictedUs) ? formatTimeUs(row.predictedUs) : std::string("-");
  const std::string slice =
      (showBackend_ ? printfString("  %-7s", rowBackend(q.algorithm, c_.backend).c_str())
                    : std::string()) +
      (varySlice_ ? printfString("  %9" PRIu64, q.sliceBytes) : "");
  const std::string inflight = varyInflight_ ? printfString("  %8d", q.inflight) : "";
  const IterationSpread& sp = row.metrics.spread;
  std::string perIter;
  if (c_.perIterTiming) {
    // nccl-tests' i_* columns: over each iteration's slowest rank (export/nccl_tests.h).
    const NcclIterStats st = ncclIterStats(ncclIterTimes(row.result).timesUs);
    perIter =
        printfString("  %7s  %7s  %7s  %7.2f", formatTimeUs(st.minUs).c_str(),
                     formatTimeUs(st.maxUs).c_str(), formatTimeUs(st.p99Us).c_str(), st.cvPct);
  }
  progress_.line(
      stdout,
      printfString("%12" PRIu64 "  %12" PRIu64 "  %8s  %6s  %6i  %-*s%s%s  %7s  %6.2f  "
                   "%6.2f  %6s  %9s  %7s  %7s  %7s%s",
                   row.sizeBytes, row.count, std::string(toString(q.dtype)).c_str(), redop.c_str(),
                   rooted ? q.root : -1, static_cast<int>(algoWidth_), q.algorithm.c_str(),
                   slice.c_str(), inflight.c_str(), formatTimeUs(row.metrics.timeUs).c_str(),
                   row.metrics.algbwGBps, row.metrics.busbwGBps, wrong.c_str(), predicted.c_str(),
                   formatTimeUs(sp.p50Us).c_str(), formatTimeUs(sp.p99Us).c_str(),
                   formatTimeUs(sp.maxUs).c_str(), perIter.c_str()));
}

void Bench::printFooter() {
  uint64_t wrong = 0;
  double sum = 0;
  size_t done = 0;
  std::map<std::string, std::pair<double, size_t>> perAlgo;
  for (const BenchRow& row : report_.rows) {
    if (row.result.state != RunState::Done) continue;
    wrong += row.metrics.wrong;
    sum += row.metrics.busbwGBps;
    ++done;
    auto& pa = perAlgo[row.result.request.algorithm];
    pa.first += row.metrics.busbwGBps;
    ++pa.second;
  }
  std::string out;
  if (done == 0) {
    out += "# Wrong elements        : N/A (no run completed)\n";
  } else if (checkedIterations() > 0) {
    out +=
        printfString("# Wrong elements        : %" PRIu64 " %s\n", wrong, wrong ? "FAILED" : "OK");
  } else {
    out += c_.randomData ? "# Wrong elements        : N/A (random data: results not checked)\n"
                         : "# Wrong elements        : N/A (-c 0: results not checked)\n";
  }
  out +=
      printfString("# Avg bus bandwidth     : %g\n", done ? sum / static_cast<double>(done) : 0.0);
  if (perAlgo.size() > 1) {
    std::string per;
    for (const std::string& name : c_.algorithms) {
      auto it = perAlgo.find(name);
      if (it == perAlgo.end()) continue;
      per += printfString("%s%s %.3g", per.empty() ? "" : ", ", name.c_str(),
                          it->second.first / static_cast<double>(it->second.second));
    }
    out += "# Avg bus bandwidth per algorithm: " + per + "\n";
  }
  if (c_.telemetry == TelemetryLevel::Off) {
    out += "# Telemetry             : off\n";
  } else {
    out += printfString("# Telemetry             : %s, %" PRIu64 " events kept, %" PRIu64
                        " dropped (limit %" PRIu64 " per run)%s\n",
                        std::string(toString(c_.telemetry)).c_str(), eventsKept_, eventsDropped_,
                        c_.maxEvents, eventsDropped_ ? "; see docs/telemetry.md" : "");
  }
  if (slowDropped_ || iterationsDropped_) {
    out += printfString("# Not delivered in time : %" PRIu64 " telemetry events and %" PRIu64
                        " iteration reports (bench fell behind the coordinator; counted above)\n",
                        slowDropped_, iterationsDropped_);
  }
  if (!report_.error.empty()) out += "# Stopped early         : " + report_.error + "\n";
  out += "#";
  progress_.line(stdout, out);
}

bool Bench::writeOutputs() {
  bool ok = true;
  auto write = [&](const std::string& path, auto&& make) {
    if (path.empty()) return;
    try {
      writeTextFile(path, make());
    } catch (const std::exception& e) {
      progress_.line(stderr, std::string(kProg) + ": " + e.what());
      ok = false;
    }
  };
  write(c_.jsonPath, [&] { return benchResultsJson(report_); });
  write(c_.ncclTestsJsonPath, [&] {
    NcclTestsJsonInfo info;
    info.args = a_.commandLine;
    info.env = ncclTestsEnv(environ);
    info.startTime = startTime_;
    info.endTime = localTimeText();
    info.perIterTiming = c_.perIterTiming;
    return ncclTestsJson(report_, info);
  });
  write(c_.csvPath, [&] { return benchResultsCsv(report_); });
  write(c_.tracePath, [&] {
    TraceStats st;
    std::string t = chromeTraceJson(report_, &st);
    if (st.unmatchedRecvs || st.unmatchedSends) {
      progress_.line(stderr, printfString("%s: trace: %" PRIu64 " sends and %" PRIu64
                                          " receives could not be paired (telemetry dropped?)",
                                          kProg, st.unmatchedSends, st.unmatchedRecvs));
    }
    return t;
  });
  write(c_.recordPath, [&] { return recordingJson(report_); });
  write(c_.flightRecordPath, [&] { return flightRecordFileJson(report_); });
  return ok;
}

std::string Bench::label(const SweepPoint& p) const {
  std::string s =
      p.algorithm + " " + std::string(toString(c_.collective)) + " " + formatSize(p.sizeBytes);
  if (varySlice_) s += " slice " + formatSize(p.sliceBytes);
  if (varyInflight_) s += " inflight " + std::to_string(p.inflight);
  return s;
}

SweepSpec Bench::sweepSpec() const {
  SweepSpec s = sweepSpecOf(c_, a_.sizes);
  s.model = report_.model;
  s.keepTelemetry = !c_.tracePath.empty() || !c_.recordPath.empty();
  return s;
}

void Bench::onRow(const SweepRow& row) {
  eventsKept_ += row.eventsKept;
  eventsDropped_ += row.result.eventsDropped;
  slowDropped_ += row.result.telemetry.droppedSlowClient;
  iterationsDropped_ += row.result.iterationEventsDropped;
  if (row.result.state == RunState::Done) {
    printRow(row);
    anyWrong_ |= row.result.request.checkedIterations() > 0 && row.metrics.wrong > 0;
  }
}

// Runs the sweep to its end on the workers of the header (a worker that joins meanwhile is
// a spare); returns the exit status so far (0, 1 a run failed, 2 refused).
int Bench::runSweep(Coordinator& coord) {
  Sweep sweep(coord, sweepSpec(), report_.workers, [this](const SweepRow& r) { onRow(r); });
  runTotal_ = sweep.points().size();
  sweep.start();
  bool stopSent = false;
  std::vector<CoordinatorEvent> evs;
  while (!sweep.finished()) {
    runIndex_ = sweep.index() + 1;
    runLabel_ = label(sweep.points()[sweep.index()]);
    evs.clear();
    coord.takeEvents(evs, std::chrono::milliseconds(20));
    for (auto& ev : evs) {
      onEvent(ev);
      sweep.onEvent(ev);
    }
    if (interrupted() && !stopSent) {
      sweep.stop("interrupted by " + signalName(signals_.signal()));
      stopSent = true;
    }
  }
  progress_.clear();
  report_.error = sweep.error();
  for (SweepRow& r : sweep.takeRows()) report_.rows.push_back(std::move(r));
  if (interrupted()) return 0;
  if (report_.rows.empty()) {
    if (report_.error.empty()) return 0;
    progress_.line(stderr, std::string(kProg) + ": " + report_.error);
    return 1;
  }
  const RunResult& last = report_.rows.back().result;
  if (last.state == RunState::Done && report_.error.empty()) return 0;
  const std::string what = label(sweep.points()[sweep.index()]) + " " +
                           std::string(toString(last.state)) + ": " + report_.error;
  progress_.line(stderr, std::string(kProg) + ": " + what);
  if (!last.flight.empty()) {
    std::string summary = flightSummaryText(last.flight, last.runId);
    if (!summary.empty() && summary.back() == '\n') summary.pop_back();
    progress_.line(stderr, summary);
  }
  return last.state == RunState::Refused ? 2 : 1;
}

int Bench::run() {
  startTime_ = localTimeText();
  std::unique_ptr<Coordinator> coord = startCoordinator();
  if (!coord) return 2;
  // Shuts the workers down: the destructor waits for them, killing stragglers.
  struct Guard {
    std::unique_ptr<Coordinator>& c;
    ~Guard() { c.reset(); }
  } guard{coord};
  signals_.setHandler([this](int s) {
    progress_.line(stderr, std::string(kProg) + ": " + signalName(s) +
                               ": aborting (a second signal quits at once)");
  });
  security_ = coord->security();
  if (a_.launch) {
    progress_.line(stderr, std::string(kProg) + ": listening on " + coord->endpoint() +
                               listenSecurityText(security_) + "; " +
                               std::string(launcherName(a_.launch->kind)) + " starts the " +
                               std::to_string(c_.expect) + " remote workers:");
    for (const std::string& line : coord->launchCommands()) progress_.line(stderr, line);
  } else if (!c_.listen.empty() || c_.expect > 0) {
    progress_.line(stderr, std::string(kProg) + ": listening on " + coord->endpoint() +
                               listenSecurityText(security_) + "; a remote worker joins with:");
    progress_.line(stderr, coord->joinCommand());
  }
  try {
    waitForWorkers(*coord);
  } catch (const std::exception& e) {
    coord.reset();
    progress_.line(stderr, std::string(kProg) + ": " + e.what());
    return 1;
  }
  if (interrupted()) {
    coord.reset();
    return interruptedExit();
  }
  progress_.clear();
  report_.workers = coord->workers();
  printHeader(report_.workers);

  const int status = runSweep(*coord);
  if (interrupted() && report_.error.empty()) report_.error = "interrupted";
  if (fit_) {
    report_.fit = fitSession(report_);
    progress_.line(stdout, fitText(report_));
  }
  // Whatever ended the sweep, the rows that completed are reported and written: the exit
  // status says whether it ran to its end.
  printFooter();
  const bool written = writeOutputs();
  coord.reset();
  if (interrupted()) return interruptedExit();
  if (status != 0) return status;
  if (anyWrong_) {
    progress_.line(stderr, std::string(kProg) + ": some results had wrong elements (#wrong > 0)");
    return 1;
  }
  return written ? 0 : 1;
}

class BenchCommand final : public Command {
 public:
  BenchCommand(CLI::App& lab, const std::vector<std::string>& args)
      : options_(lab, args), model_(options_.app(), args), args_(args) {
    app = options_.app();
    model_.group("Model");
    declareModelOption(model_);
    model_.flag("--fit", &fit_,
                "after the sweep, fit alpha and beta to the measured times, print them and "
                "every prediction beside the fitted one (JSON: model.fitted, fitted_us)");
  }
  int run() override {
    BenchArgs a;
    ModelChoice m;
    const int rc = runChecked(kProg, [&] {
      a = options_.check();
      m = chooseModel(model_.get("--model"));
      return 0;
    });
    if (rc != 0) return rc;
    a.commandLine = {"allreduce-lab"};
    a.commandLine.insert(a.commandLine.end(), args_.begin(), args_.end());
    Bench bench(std::move(a), m, fit_);
    return bench.run();
  }

 private:
  BenchOptions options_;
  Options model_;  // --model and --fit
  const std::vector<std::string>& args_;
  bool fit_ = false;
};

}  // namespace

std::unique_ptr<Command> addBenchCommand(CLI::App& lab, const std::vector<std::string>& args) {
  return std::make_unique<BenchCommand>(lab, args);
}

}  // namespace arl::app
