// allreduce-lab soak: one coordinator session, its local workers kept across runs as bench
// keeps them across a sweep, runs N random valid configurations on random subsets of them
// (Coordinator::holdWorld) and checks every result; faults interleaved among them (a killed
// worker, a stopped one, a reset control connection, bad frames from a stranger) must end
// their run with the error that names the rank and the cause, the session must restore its
// worker count, and the next run must be exact. Every K runs it reads the RSS, threads and
// open fds of the coordinator and of every worker; after a warm-up RSS may not keep growing
// (the median reading of the second half over the first's) and threads and fds may not
// spread beyond their limits. At the end nothing may be left in /dev/shm or the temporary folder.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/input_file.h"
#include "cli_util.h"
#include "commands.h"
#include "runtime/coordinator.h"
#include "soak.h"
#include "soak_faults.h"

namespace arl::app {
namespace {

constexpr const char* kProg = "allreduce-lab soak";
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr const char* kAbout =
    "Runs N random valid configurations in one coordinator session whose local workers are "
    "kept across runs: algorithm (those valid for the rank count), collective, element type, "
    "reduction, ranks (a subset of the workers), counts (edge and odd counts), slice, slices "
    "in flight, light link shaping, telemetry level, data plane. Every result is checked "
    "element by element by the workers. F faults are interleaved: a killed worker (SIGKILL), "
    "a stopped one (SIGSTOP), a reset control connection (ss -K) and bad frames from a "
    "stranger; each must end its run with the error that names the rank and the cause, the "
    "session must restore its worker count and the next run must be exact. Every --every "
    "runs the RSS, threads and open fds of the coordinator and of each worker are read; after "
    "--warmup runs RSS may not keep growing (the median reading of the second half of the "
    "samples over that of the first, within --rss-limit) and threads and fds may spread "
    "(max - min) by 2 and 4 at most. At the "
    "end no shared-memory segment of the session's workers and nothing in its temporary "
    "folder may be left (docs/reliability.md).\n"
    "Exit status: 0 when every run was exact, every fault ended as it should and every bound "
    "held; 1 otherwise (the reason on stderr); 2 on bad arguments.";

struct SoakArgs {
  int configs = 100;
  uint64_t seed = 1;
  int faults = 5;
  SoakPlanes planes = SoakPlanes::All;
  int maxRanks = 16;
  int every = 10;
  SoakSeries::Limits limits;
  std::string seriesCsv;  // --series: every sample, as CSV
};

// The run after each fault must be exact; these say which fault preceded it.
struct FaultTally {
  int done = 0;
  int ok = 0;
  std::string example;  // the first error a fault of the kind produced
};

class Soak {
 public:
  explicit Soak(SoakArgs a) : a_(std::move(a)), drawer_(a_.seed, a_.maxRanks, a_.planes) {}
  int run();

 private:
  bool startSession();
  bool runConfig(int index);
  bool runFault(FaultKind kind);
  bool restoreWorkers();
  void sample(uint64_t runs);
  bool checkLeftovers();
  int report(bool ok, double seconds);
  std::vector<WorkerInfo> drawWorld(int nranks);
  std::vector<int> faultSlots();
  bool fail(const std::string& why) {
    std::fprintf(stderr, "%s: %s\n", kProg, why.c_str());
    return false;
  }

  SoakArgs a_;
  SoakDrawer drawer_;
  std::string tmpDir_;
  std::unique_ptr<Coordinator> coord_;
  std::unique_ptr<SessionEvents> events_;
  SoakSeries series_;
  std::set<int64_t> workerPids_;  // every worker the session had
  std::map<FaultKind, FaultTally> faults_;
  int exactRuns_ = 0, runsAfterFaults_ = 0;
  uint64_t shmRuns_ = 0, zmqRuns_ = 0, tcpRuns_ = 0, elements_ = 0;
  bool afterFault_ = false;
  std::vector<std::string> leftovers_;
};

// Distinct run indices (after the first run) before which a fault comes, spread at random.
std::vector<int> Soak::faultSlots() {
  std::vector<int> slots;
  for (int i = 1; i < a_.configs; ++i) slots.push_back(i);
  std::shuffle(slots.begin(), slots.end(), drawer_.rng());
  slots.resize(std::min<size_t>(slots.size(), static_cast<size_t>(a_.faults)));
  std::sort(slots.begin(), slots.end());
  return slots;
}

bool Soak::startSession() {
  std::string templ = (std::filesystem::temp_directory_path() / "arl-soak-XXXXXX").string();
  if (::mkdtemp(templ.data()) == nullptr) return fail("cannot make a temporary folder");
  tmpDir_ = templ;
  // The workers inherit it: their ipc sockets and anything else they write go there.
  ::setenv("TMPDIR", tmpDir_.c_str(), 1);
  CoordinatorOptions opt;
  opt.localWorkers = a_.maxRanks;
  opt.joinTimeout = milliseconds(30000);
  try {
    coord_ = std::make_unique<Coordinator>(opt);
  } catch (const ConfigError& e) {
    return fail(e.what());
  }
  events_ = std::make_unique<SessionEvents>(*coord_);
  return restoreWorkers();
}

// Waits until the session has its full count of workers again (a lost local worker is
// replaced by the coordinator).
bool Soak::restoreWorkers() {
  const auto full = [&] {
    const auto ws = coord_->workers();
    return static_cast<int>(ws.size()) == a_.maxRanks &&
           std::all_of(ws.begin(), ws.end(), [](const WorkerInfo& w) { return w.rank >= 0; });
  };
  if (!events_->waitUntil(full, seconds(60))) {
    return fail(printfString("the session did not get back to %d workers within 60 s (%zu now)",
                             a_.maxRanks, coord_->workers().size()));
  }
  for (const WorkerInfo& w : coord_->workers()) workerPids_.insert(w.pid);
  return true;
}

std::vector<WorkerInfo> Soak::drawWorld(int nranks) {
  std::vector<WorkerInfo> ws = coord_->workers();
  std::shuffle(ws.begin(), ws.end(), drawer_.rng());
  ws.resize(static_cast<size_t>(nranks));
  return ws;
}

std::string describe(const SoakDraw& d) {
  const RunRequest& r = d.req;
  return printfString(
      "%s %s %s %s, %d ranks, count %" PRIu64 ", slice %" PRIu64 " B, inflight %d, %s, %s%s",
      r.algorithm.c_str(), std::string(toString(r.collective)).c_str(),
      std::string(toString(r.dtype)).c_str(), std::string(toString(r.op)).c_str(), d.nranks,
      r.count, r.sliceBytes, r.inflight, std::string(toString(r.dataPlane)).c_str(),
      r.inPlace ? "in place" : "out of place", r.shaping.empty() ? "" : ", shaped");
}

bool Soak::runConfig(int index) {
  const SoakDraw d = drawer_.next();
  const std::vector<WorkerInfo> world = drawWorld(d.nranks);
  coord_->holdWorld(world);
  const uint64_t id = coord_->submit(d.req);
  coord_->releaseWorld();
  const std::optional<RunResult> res = events_->waitFinished(id, seconds(120));
  const std::string what = printfString("run %d (%s)", index + 1, describe(d).c_str());
  if (!res) return fail(what + ": no result within 120 s");
  if (res->state != RunState::Done) {
    return fail(what + ": " + std::string(toString(res->state)) + ": " + res->error +
                (afterFault_ ? " (the first run after a fault)" : ""));
  }
  if (res->wrong != 0) {
    return fail(what + printfString(": %" PRIu64 " wrong elements", res->wrong));
  }
  if (res->nranks != d.nranks) {
    return fail(what + printfString(": ran on %d ranks", res->nranks));
  }
  ++exactRuns_;
  runsAfterFaults_ += afterFault_ ? 1 : 0;
  afterFault_ = false;
  (d.req.dataPlane == DataPlaneKind::Shm   ? shmRuns_
   : d.req.dataPlane == DataPlaneKind::Zmq ? zmqRuns_
                                           : tcpRuns_) += 1;
  elements_ += d.req.count;
  return true;
}

bool Soak::runFault(FaultKind kind) {
  const SoakDraw d = drawer_.endless();
  const std::vector<WorkerInfo> world = drawWorld(d.nranks);
  const int victim = std::uniform_int_distribution<int>(0, d.nranks - 1)(drawer_.rng());
  FaultRun fr{*coord_, *events_, d.req, world, victim};
  const FaultOutcome out = injectFault(kind, fr);
  FaultTally& t = faults_[kind];
  ++t.done;
  if (t.example.empty()) t.example = out.error;
  if (!out.ok) return fail(std::string(toString(kind)) + " fault: " + out.why);
  ++t.ok;
  afterFault_ = true;
  return restoreWorkers();
}

void Soak::sample(uint64_t runs) {
  if (const auto s = sampleProcess(::getpid())) series_.add("coordinator", runs, *s);
  for (const WorkerInfo& w : coord_->workers()) {
    if (const auto s = sampleProcess(w.pid)) {
      series_.add(printfString("worker pid %" PRId64, w.pid), runs, *s);
    }
  }
}

bool Soak::checkLeftovers() {
  const std::vector<int64_t> pids(workerPids_.begin(), workerPids_.end());
  for (const std::string& s : shmSegmentsOf(pids)) leftovers_.push_back("/dev/shm/" + s);
  for (const std::string& e : entriesUnder(tmpDir_)) leftovers_.push_back(tmpDir_ + "/" + e);
  for (int64_t pid : pids) {
    if (sampleProcess(pid)) leftovers_.push_back(printfString("worker process %" PRId64, pid));
  }
  std::error_code ec;
  std::filesystem::remove_all(tmpDir_, ec);
  return leftovers_.empty();
}

int Soak::run() {
  const auto t0 = Clock::now();
  bool ok = startSession();
  const std::vector<int> slots = faultSlots();
  size_t nextSlot = 0;
  const std::vector<FaultKind> kinds = faultKinds();
  for (int i = 0; ok && i < a_.configs; ++i) {
    while (ok && nextSlot < slots.size() && slots[nextSlot] == i) {
      ok = runFault(kinds[nextSlot % kinds.size()]);
      ++nextSlot;
    }
    ok = ok && runConfig(i);
    if (ok && ((i + 1) % a_.every == 0 || i + 1 == a_.configs)) {
      sample(static_cast<uint64_t>(i + 1));
    }
    if (ok && (i + 1) % 100 == 0) {
      std::fprintf(stderr, "%s: %d of %d runs exact, %zu faults\n", kProg, i + 1, a_.configs,
                   nextSlot);
    }
  }
  events_.reset();
  coord_.reset();  // shuts the workers down: what they leave behind is left behind
  const bool clean = checkLeftovers();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  return report(ok && clean, secs);
}

int Soak::report(bool ok, double secs) {
  std::printf("# allreduce-lab soak: %d configurations (seed %" PRIu64
              "), %d faults, %d workers, "
              "%.0f s\n",
              a_.configs, a_.seed, a_.faults, a_.maxRanks, secs);
  std::printf("runs exact: %d of %d (%" PRIu64 " on shm, %" PRIu64 " on zmq, %" PRIu64
              " on tcp; %" PRIu64 " draws the lab refused were drawn again)\n",
              exactRuns_, a_.configs, shmRuns_, zmqRuns_, tcpRuns_, drawer_.refusedDraws());
  for (const auto& [kind, t] : faults_) {
    std::printf("fault %-9s %d of %d ended as expected; e.g. \"%s\"\n",
                std::string(toString(kind)).c_str(), t.ok, t.done, t.example.c_str());
  }
  std::printf("runs right after a fault: %d, all exact\n", runsAfterFaults_);
  std::fputs(series_.table(a_.limits.warmup).c_str(), stdout);
  if (!a_.seriesCsv.empty()) {
    try {
      writeFileAtomically(a_.seriesCsv, series_.csv());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", kProg, e.what());
    }
  }
  const auto sp = series_.spreads(a_.limits.warmup);
  std::printf(
      "after %" PRIu64 " warm-up runs: coordinator RSS growth %" PRIu64 " KiB (limit %" PRIu64
      "), threads spread %d, fds %d; workers (%zu series) RSS growth at most %" PRIu64
      " KiB (limit %" PRIu64 "), threads spread %d, fds %d (limits %d, %d)\n",
      a_.limits.warmup, sp.coordinatorRssKb, a_.limits.coordinatorRssKb, sp.coordinatorThreads,
      sp.coordinatorFds, sp.workerSeries, sp.workerRssKb, a_.limits.workerRssKb, sp.workerThreads,
      sp.workerFds, a_.limits.threads, a_.limits.fds);
  const std::vector<std::string> over = series_.violations(a_.limits);
  for (const std::string& v : over) std::fprintf(stderr, "%s: %s\n", kProg, v.c_str());
  for (const std::string& l : leftovers_) {
    std::fprintf(stderr, "%s: left behind: %s\n", kProg, l.c_str());
  }
  std::printf("left behind: %s\n", leftovers_.empty() ? "nothing" : "see stderr");
  const bool pass = ok && over.empty();
  std::printf("soak %s\n", pass ? "passed" : "FAILED");
  return pass ? 0 : 1;
}

class SoakCommand final : public Command {
 public:
  SoakCommand(CLI::App& lab, const std::vector<std::string>& args)
      : opts_(lab.add_subcommand("soak",
                                 "run many random configurations and faults in one "
                                 "session; check results, leaks and leftovers"),
              args) {
    app = lab.get_subcommand("soak");
    app->footer(wrap(kAbout, 92) + "\n");
    opts_.value("--configs", "N", "random configurations to run (default 100)");
    opts_.value("--seed", "S", "seed of the draws (default 1)");
    opts_.value("--faults", "F", "faults to interleave (default: N / 20)");
    opts_.value("--plane", "PLANE",
                "shm, zmq, tcp, both (shm and zmq in turn) or all (default: shm, zmq and tcp "
                "in turn)");
    opts_.value("--max-ranks", "R", "local workers; each run takes 2..R of them (default 16)");
    opts_.value("--every", "K", "read the processes' resources every K runs (default 10)");
    opts_.value("--series", "FILE", "write every reading of the resources to FILE (CSV)");
    opts_.value("--warmup", "W", "runs before the bounds apply (default N / 10, at most 100)");
    opts_.value("--rss-limit", "SIZE",
                "most a worker's RSS may grow after the warm-up (default 4M)");
    opts_.value("--coordinator-rss-limit", "SIZE",
                "most the coordinator's RSS may grow after the warm-up (default 8M)");
  }

  int run() override {
    return runChecked(kProg, [&] { return Soak(parse()).run(); });
  }

 private:
  SoakArgs parse() const {
    SoakArgs a;
    a.configs = parseInt(opts_.getOr("--configs", "100"), 1, 1000000);
    a.seed = parseSize(opts_.getOr("--seed", "1"));
    a.faults = parseInt(opts_.getOr("--faults", std::to_string(a.configs / 20)), 0, a.configs);
    const Arg plane = opts_.getOr("--plane", "all");
    const std::map<std::string, SoakPlanes> planes = {{"shm", SoakPlanes::Shm},
                                                      {"zmq", SoakPlanes::Zmq},
                                                      {"tcp", SoakPlanes::Tcp},
                                                      {"both", SoakPlanes::Both},
                                                      {"all", SoakPlanes::All}};
    const auto it = planes.find(plane.text);
    if (it == planes.end()) throw refuse(plane, "expected shm, zmq, tcp, both or all");
    a.planes = it->second;
    a.maxRanks = parseInt(opts_.getOr("--max-ranks", "16"), 2, 64);
    a.every = parseInt(opts_.getOr("--every", "10"), 1, 1000000);
    a.seriesCsv = opts_.getOr("--series", "").text;
    a.limits.warmup = static_cast<uint64_t>(parseInt(
        opts_.getOr("--warmup", std::to_string(std::min(100, a.configs / 10))), 0, a.configs));
    a.limits.workerRssKb = parseSize(opts_.getOr("--rss-limit", "4M")) / 1024;
    a.limits.coordinatorRssKb = parseSize(opts_.getOr("--coordinator-rss-limit", "8M")) / 1024;
    // A worker sampled right after a run may still hold its run's thread and data-plane fds
    // (measured: +1 thread, +2 fds over 30 runs); twice that is the limit.
    a.limits.threads = 2;
    a.limits.fds = 4;
    return a;
  }

  Options opts_;
};

}  // namespace

std::unique_ptr<Command> addSoakCommand(CLI::App& lab, const std::vector<std::string>& args) {
  return std::make_unique<SoakCommand>(lab, args);
}

}  // namespace arl::app
