// allreduce-lab bench: nccl-tests for the lab. Starts (or accepts) worker processes through
// the Coordinator, sweeps sizes and algorithms on real buffers, and prints nccl-tests' table
// (size, count, type, redop, root, time, algbw, busbw, #wrong) with the algorithm and the cost
// model's prediction beside each measurement. Optionally writes the results as JSON and CSV,
// a Perfetto trace and a recording (export.h). Every argument is checked before any worker
// starts; SIGINT or SIGTERM aborts the run and shuts the workers down.
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
#include <cstdarg>
#include <cstdio>
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

#include "base/errors.h"
#include "bench_options.h"
#include "cli_util.h"
#include "commands.h"
#include "exec/run_request.h"
#include "export/export.h"
#include "model/metrics.h"
#include "model/model.h"
#include "runtime/coordinator.h"
#include "runtime/protocol.h"
#include "schedule/generators.h"
#include "transport/shm/shm_transport.h"

namespace arl::app {

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kProg = kBenchProg;
// How long to wait for workers to join: local ones start in well under a second; remote
// ones are started by hand once the join command is printed.
constexpr std::chrono::seconds kLocalJoinTimeout{20};
constexpr std::chrono::seconds kRemoteJoinTimeout{300};

// ---- Signals ---------------------------------------------------------------------------------

// Blocks SIGINT and SIGTERM in every thread started after it (so the coordinator's thread
// never sees them) and waits for them on its own thread. The first signal calls `onSignal`;
// a second one ends the process at once (local workers die with it: PR_SET_PDEATHSIG).
class SignalWatch {
 public:
  SignalWatch() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
    thread_ = std::thread([this] { loop(); });
  }
  ~SignalWatch() {
    stop_.store(true);
    thread_.join();
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

  void setHandler(std::function<void(int)> f) {
    std::lock_guard<std::mutex> lock(mu_);
    handler_ = std::move(f);
  }
  int signal() const { return sig_.load(); }

 private:
  void loop() {
    const timespec tick{0, 50'000'000};
    while (!stop_.load()) {
      const int s = sigtimedwait(&set_, nullptr, &tick);
      if (s <= 0) continue;
      if (sig_.load() != 0) {
        static const char msg[] = "\nallreduce-lab bench: second signal, quitting now\n";
        (void)!::write(2, msg, sizeof msg - 1);
        ::_exit(128 + s);
      }
      sig_.store(s);
      std::lock_guard<std::mutex> lock(mu_);
      if (handler_) handler_(s);
    }
  }

  sigset_t set_{}, old_{};
  std::atomic<bool> stop_{false};
  std::atomic<int> sig_{0};
  std::mutex mu_;
  std::function<void(int)> handler_;
  std::thread thread_;
};

// ---- Progress and output ---------------------------------------------------------------------

// The \r-updated progress line on stderr, only when stderr is a terminal. Lines printed
// while it shows clear it first.
class Progress {
 public:
  Progress() : tty_(::isatty(2) == 1) {}

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
  std::mutex mu_;
  bool shown_ = false;
  Clock::time_point last_{};
};

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* f, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// Ranks per host as the coordinator derives it (run_request.h), for the cost model.
int effectiveRanksPerHost(const BenchConfig& c, const std::vector<WorkerInfo>& ws) {
  std::vector<std::string> hosts;
  for (const WorkerInfo& w : ws) hosts.push_back(w.host);
  return ranksPerHost(c.ranksPerHost, hosts);
}

class Bench {
 public:
  explicit Bench(BenchArgs a) : a_(std::move(a)), c_(a_.cfg) {
    report_.config = c_;
    for (const std::string& n : c_.algorithms) algoWidth_ = std::max(algoWidth_, n.size());
  }

  int run();

 private:
  int interruptedExit() {
    const int s = signals_.signal();
    progress_.line(stderr, std::string(kProg) + ": interrupted by " +
                               (s == SIGTERM ? "SIGTERM" : "SIGINT") +
                               "; the run was aborted and the workers shut down");
    return 128 + s;
  }
  bool interrupted() const { return signals_.signal() != 0; }
  void waitForWorkers(Coordinator& coord);
  void printHeader(const std::vector<WorkerInfo>& ws);
  void printRow(const BenchRow& row);
  void printFooter();
  bool writeOutputs();
  void onEvent(const CoordinatorEvent& ev);

  BenchArgs a_;
  const BenchConfig& c_;
  BenchReport report_;
  SignalWatch signals_;
  Progress progress_;
  size_t algoWidth_ = 9;
  // Progress state, written by the coordinator's thread through the listener.
  std::mutex progressMu_;
  std::string runLabel_;
  size_t runIndex_ = 0, runTotal_ = 0;
  uint64_t iterationReports_ = 0;
  int joined_ = 0;
  std::atomic<bool> joinFailed_{false};
  std::atomic<bool> joining_{true};
  uint64_t eventsKept_ = 0, eventsDropped_ = 0;
};

void Bench::onEvent(const CoordinatorEvent& ev) {
  if (const auto* l = std::get_if<LogEvent>(&ev)) {
    if (l->level >= 2 && joining_.load()) joinFailed_.store(true);
    if (l->level >= 1) progress_.line(stderr, std::string(kProg) + ": " + l->text);
    return;
  }
  if (const auto* w = std::get_if<WorkerEvent>(&ev)) {
    if (joining_.load() && w->joined) {
      std::lock_guard<std::mutex> lock(progressMu_);
      ++joined_;
      progress_.show(fmt("waiting for workers: %d of %d joined", joined_, nranksOf(c_)));
    }
    return;
  }
  if (std::holds_alternative<IterationEvent>(ev)) {
    std::lock_guard<std::mutex> lock(progressMu_);
    ++iterationReports_;
    const uint64_t n = static_cast<uint64_t>(std::max(nranksOf(c_), 1));
    progress_.show(fmt("[%zu/%zu] %s: iteration %" PRIu64 "/%d", runIndex_, runTotal_,
                       runLabel_.c_str(), std::min<uint64_t>(iterationReports_ / n, c_.iters),
                       c_.iters));
  }
}

void Bench::waitForWorkers(Coordinator& coord) {
  const size_t need = static_cast<size_t>(nranksOf(c_));
  const auto timeout = c_.expect > 0 ? kRemoteJoinTimeout : kLocalJoinTimeout;
  const auto deadline = Clock::now() + timeout;
  // Polled rather than blocking in waitForWorkers(), so that a signal is answered at once.
  while (!interrupted()) {
    if (coord.workers().size() >= need || joinFailed_.load()) {
      coord.waitForWorkers();  // returns at once, or throws the coordinator's reason
      return;
    }
    if (Clock::now() >= deadline) {
      const auto ws = coord.workers();
      size_t local = 0;
      for (const WorkerInfo& w : ws) local += w.local ? 1 : 0;
      std::string msg = std::to_string(ws.size()) + " of " + std::to_string(need) +
                        " workers joined within " + std::to_string(timeout.count()) + " s";
      if (local < static_cast<size_t>(c_.workers)) {
        msg += "; " + std::to_string(c_.workers - static_cast<int>(local)) +
               " local worker(s) missing";
      }
      if (ws.size() - local < static_cast<size_t>(c_.expect)) {
        msg += "; " + std::to_string(c_.expect - static_cast<int>(ws.size() - local)) +
               " remote worker(s) missing (start each with: " + coord.joinCommand() + ")";
      }
      throw std::runtime_error(msg);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
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
              " step: %s warmup iters: %d iters: %d validation: %d\n",
              c_.minBytes, c_.maxBytes, step.c_str(), c_.warmup, c_.iters, c_.check ? 1 : 0);
  // What the workers will choose: auto means shared memory when they share one host.
  std::string plane(toString(c_.dataPlane));
  if (c_.dataPlane == DataPlaneKind::Auto) {
    const bool oneHost = std::all_of(
        ws.begin(), ws.end(), [&](const WorkerInfo& w) { return w.host == ws.front().host; });
    plane = oneHost ? "shm (auto)" : "zmq (auto: several hosts)";
  }
  std::printf("# chunk %" PRIu64 " bytes, inflight %d, %s, telemetry %s (at most %" PRIu64
              " events per run), data plane %s\n",
              c_.sliceSizes.front(), c_.inflights.front(), c_.inPlace ? "in-place" : "out-of-place",
              std::string(toString(c_.telemetry)).c_str(), c_.maxEvents, plane.c_str());
  std::printf("#\n# Using workers\n");
  for (const WorkerInfo& w : ws) {
    std::printf("#  Rank %2d Pid %7" PRId64 " on %s (%s, %s)\n", w.rank, w.pid, w.host.c_str(),
                w.backend.c_str(), w.local ? "local" : "remote");
  }
  const ModelParams& p = report_.model;
  std::printf(
      "#\n# predicted: the cost model's time, not a measurement (%s:\n"
      "#   alpha %.1f us per message, link %.2f GB/s, reduce %.2f GB/s)\n",
      report_.modelSource.c_str(), p.alpha * 1e6, 1e-9 / p.beta, 1e-9 / p.gamma);
  const int aw = static_cast<int>(algoWidth_);
  std::printf("#\n#%11s  %12s  %8s  %6s  %6s  %-*s  %7s  %6s  %6s  %6s  %9s\n", "size", "count",
              "type", "redop", "root", aw, "algorithm", "time", "algbw", "busbw", "#wrong",
              "predicted");
  std::printf("#%11s  %12s  %8s  %6s  %6s  %-*s  %7s  %6s  %6s  %6s  %9s\n", "(B)", "(elements)",
              "", "", "", aw, "", "(us)", "(GB/s)", "(GB/s)", "", "(us,model)");
  std::fflush(stdout);
}

void Bench::printRow(const BenchRow& row) {
  const RunRequest& q = row.result.request;
  const bool rooted = q.collective == Collective::Reduce || q.collective == Collective::Broadcast;
  const std::string redop = collectiveReduces(q.collective) ? std::string(toString(q.op)) : "none";
  const std::string wrong = q.check ? std::to_string(row.metrics.wrong) : "N/A";
  const std::string predicted =
      std::isfinite(row.predictedUs) ? formatTimeUs(row.predictedUs) : std::string("-");
  progress_.line(
      stdout, fmt("%12" PRIu64 "  %12" PRIu64 "  %8s  %6s  %6i  %-*s  %7s  %6.2f  "
                  "%6.2f  %6s  %9s",
                  row.sizeBytes, row.count, std::string(toString(q.dtype)).c_str(), redop.c_str(),
                  rooted ? q.root : -1, static_cast<int>(algoWidth_), q.algorithm.c_str(),
                  formatTimeUs(row.metrics.timeUs).c_str(), row.metrics.algbwGBps,
                  row.metrics.busbwGBps, wrong.c_str(), predicted.c_str()));
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
  if (c_.check) {
    out += fmt("# Wrong elements        : %" PRIu64 " %s\n", wrong, wrong ? "FAILED" : "OK");
  } else {
    out += "# Wrong elements        : N/A (-c 0: results not checked)\n";
  }
  out += fmt("# Avg bus bandwidth     : %g\n", done ? sum / static_cast<double>(done) : 0.0);
  if (perAlgo.size() > 1) {
    std::string per;
    for (const std::string& name : c_.algorithms) {
      auto it = perAlgo.find(name);
      if (it == perAlgo.end()) continue;
      per += fmt("%s%s %.3g", per.empty() ? "" : ", ", name.c_str(),
                 it->second.first / static_cast<double>(it->second.second));
    }
    out += "# Avg bus bandwidth per algorithm: " + per + "\n";
  }
  if (c_.telemetry == TelemetryLevel::Off) {
    out += "# Telemetry             : off\n";
  } else {
    out += fmt("# Telemetry             : %s, %" PRIu64 " events kept, %" PRIu64
               " dropped (limit %" PRIu64 " per run)%s\n",
               std::string(toString(c_.telemetry)).c_str(), eventsKept_, eventsDropped_,
               c_.maxEvents, eventsDropped_ ? "; see docs/telemetry.md" : "");
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
  write(c_.csvPath, [&] { return benchResultsCsv(report_); });
  write(c_.tracePath, [&] {
    TraceStats st;
    std::string t = chromeTraceJson(report_, &st);
    if (st.unmatchedRecvs || st.unmatchedSends) {
      progress_.line(stderr, fmt("%s: trace: %" PRIu64 " sends and %" PRIu64
                                 " receives could not be paired (telemetry dropped?)",
                                 kProg, st.unmatchedSends, st.unmatchedRecvs));
    }
    return t;
  });
  write(c_.recordPath, [&] { return recordingJson(report_); });
  return ok;
}

int Bench::run() {
  const bool keepEvents = !c_.tracePath.empty() || !c_.recordPath.empty();
  CoordinatorOptions opt;
  opt.localWorkers = c_.workers;
  opt.expectRemote = c_.expect;
  opt.listen = c_.listen;
  opt.backend = c_.backend;
  opt.joinTimeout = c_.expect > 0 ? std::chrono::milliseconds(kRemoteJoinTimeout)
                                  : std::chrono::milliseconds(kLocalJoinTimeout);
  std::unique_ptr<Coordinator> coord;
  try {
    coord = std::make_unique<Coordinator>(opt);
  } catch (const ConfigError& e) {
    progress_.line(stderr, std::string(kProg) + ": " + e.what());
    return 2;
  }
  // Shuts the workers down (the destructor waits for them, killing stragglers) once the
  // signal handler can no longer reach the coordinator.
  auto shutdown = [&] {
    signals_.setHandler(nullptr);
    coord.reset();
  };
  struct Guard {
    std::function<void()> f;
    ~Guard() { f(); }
  } guard{shutdown};

  Coordinator* cp = coord.get();
  coord->setListener([this](const CoordinatorEvent& ev) { onEvent(ev); });
  signals_.setHandler([this, cp](int s) {
    progress_.line(stderr, std::string(kProg) + ": " + (s == SIGTERM ? "SIGTERM" : "SIGINT") +
                               ": aborting (a second signal quits at once)");
    cp->abort(std::string("interrupted by ") + (s == SIGTERM ? "SIGTERM" : "SIGINT"));
  });
  if (!c_.listen.empty() || c_.expect > 0) {
    progress_.line(stderr, std::string(kProg) + ": listening on " + coord->endpoint() +
                               "; a remote worker joins with:");
    progress_.line(stderr, coord->joinCommand());
  }

  try {
    waitForWorkers(*coord);
  } catch (const std::exception& e) {
    shutdown();
    progress_.line(stderr, std::string(kProg) + ": " + e.what());
    return 1;
  }
  joining_.store(false);
  if (interrupted()) {
    shutdown();
    return interruptedExit();
  }
  progress_.clear();

  const std::vector<WorkerInfo> ws = coord->workers();
  report_.workers = ws;
  const int n = static_cast<int>(ws.size());
  const int rph = effectiveRanksPerHost(c_, ws);
  printHeader(ws);

  runTotal_ = a_.sizes.size() * c_.algorithms.size();
  bool anyWrong = false;
  std::string failure;
  for (size_t si = 0; si < a_.sizes.size() && report_.error.empty() && !interrupted(); ++si) {
    const uint64_t size = a_.sizes[si];
    for (const std::string& algo : c_.algorithms) {
      if (interrupted()) break;
      BenchRow row;
      row.count = apiCount(c_, size);
      row.sizeBytes = collectiveBytes(c_.collective, n, row.count, c_.dtype);
      CostQuery cq;
      cq.algorithm = algo;
      cq.collective = c_.collective;
      cq.nranks = n;
      cq.bytes = row.sizeBytes;
      cq.sliceBytes = c_.sliceSizes.front();
      cq.ranksPerHost = rph;
      try {
        row.predictedUs = predictSeconds(cq, report_.model) * 1e6;
      } catch (const std::exception&) {
        row.predictedUs = std::numeric_limits<double>::quiet_NaN();
      }
      RunRequest q;
      q.algorithm = algo;
      q.collective = c_.collective;
      q.dtype = c_.dtype;
      q.op = c_.op;
      q.count = row.count;
      q.sliceBytes = c_.sliceSizes.front();
      q.root = c_.root;
      q.ranksPerHost = c_.ranksPerHost;
      q.inflight = c_.inflights.front();
      q.inPlace = c_.inPlace;
      q.warmup = c_.warmup;
      q.iterations = c_.iters;
      q.check = c_.check;
      q.telemetry = c_.telemetry;
      q.maxEvents = c_.maxEvents;
      q.dataPlane = c_.dataPlane;
      {
        std::lock_guard<std::mutex> lock(progressMu_);
        ++runIndex_;
        runLabel_ = algo + " " + std::string(toString(c_.collective)) + " " + formatSize(size);
        iterationReports_ = 0;
      }
      row.startNs = nowNs();
      try {
        auto fut = coord->submit(q);
        // A signal that came just before the run started found nothing to abort: repeat it.
        bool abortSent = false;
        while (fut.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready) {
          if (interrupted() && !abortSent) {
            coord->abort("interrupted by " +
                         std::string(signals_.signal() == SIGTERM ? "SIGTERM" : "SIGINT"));
            abortSent = true;
          }
        }
        row.result = fut.get();
      } catch (const ConfigError& e) {
        shutdown();
        progress_.line(stderr, std::string(kProg) + ": " + runLabel_ + ": " + e.what());
        return 2;
      }
      row.endNs = nowNs();
      row.metrics = computeMetrics(c_.collective, n, row.count, c_.dtype, row.result.iterationUs,
                                   row.result.wrong);
      row.eventsKept = row.result.events.size();
      eventsKept_ += row.eventsKept;
      eventsDropped_ += row.result.eventsDropped;
      if (!keepEvents) {
        row.result.events.clear();
        row.result.events.shrink_to_fit();
      }
      const RunState st = row.result.state;
      if (st == RunState::Done) {
        printRow(row);
        anyWrong |= c_.check && row.metrics.wrong > 0;
      }
      report_.rows.push_back(std::move(row));
      if (st != RunState::Done) {
        const RunResult& res = report_.rows.back().result;
        report_.error = res.error.empty() ? std::string(toString(st)) : res.error;
        if (!interrupted())
          failure = runLabel_ + " " + std::string(toString(st)) + ": " + res.error;
        break;
      }
    }
  }
  progress_.clear();
  if (interrupted() && report_.error.empty()) report_.error = "interrupted";
  if (!interrupted()) printFooter();
  const bool written = writeOutputs();
  shutdown();
  if (interrupted()) return interruptedExit();
  if (!failure.empty()) {
    progress_.line(stderr, std::string(kProg) + ": " + failure);
    return 1;
  }
  if (anyWrong) {
    progress_.line(stderr, std::string(kProg) + ": some results had wrong elements (#wrong > 0)");
    return 1;
  }
  return written ? 0 : 1;
}

class BenchCommand final : public Command {
 public:
  BenchCommand(CLI::App& lab, const std::vector<std::string>& args) : options_(lab, args) {
    app = options_.app();
  }
  int run() override {
    BenchArgs a;
    const int rc = runChecked(kProg, [&] {
      a = options_.check();
      return 0;
    });
    if (rc != 0) return rc;
    Bench bench(std::move(a));
    return bench.run();
  }

 private:
  BenchOptions options_;
};

}  // namespace

std::unique_ptr<Command> addBenchCommand(CLI::App& lab, const std::vector<std::string>& args) {
  return std::make_unique<BenchCommand>(lab, args);
}

}  // namespace arl::app
