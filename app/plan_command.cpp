// allreduce-lab plan: generate a schedule, print it step by step with the provenance of every
// payload, verify it symbolically, predict its time with the cost model, and optionally run
// it in process on real buffers, reporting nccl-tests' metrics.
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <exception>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/errors.h"
#include "base/limits.h"
#include "base/topology.h"
#include "cli_util.h"
#include "commands.h"
#include "exec/collective_library.h"
#include "exec/local_run.h"
#include "exec/run_request.h"
#include "export/json.h"
#include "model/metrics.h"
#include "model/model.h"
#include "model_choice.h"
#include "schedule/generators.h"
#include "schedule/msccl_import.h"
#include "schedule/verifier.h"

namespace arl::app {

namespace {

constexpr const char* kProg = "allreduce-lab plan";
// Schedules with more ops than this are printed condensed.
constexpr size_t kFullTableOps = 400;

// What the command does, after its options in --help.
constexpr const char* kAbout =
    "Prints a collective's schedule step by step (which rank sends which chunk, a piece of "
    "the buffer, to whom, and whose contributions each payload holds), the symbolic "
    "verifier's verdict and the cost model's prediction; with --run, runs it in process on "
    "real buffers (one thread per rank, CPU backend, loopback transport) and reports "
    "nccl-tests' time, algbw, busbw and #wrong. A slice is the pipeline unit: the most bytes "
    "one message carries. --import FILE.xml takes the schedule from an MSCCL algorithm file "
    "instead of --algo (docs/msccl.md): its algorithm, collective and ranks are the file's.\n"
    "Exit status: 0 when the schedule verifies (and, with --run, no element is wrong), 1 "
    "when it does not, 2 on bad arguments.";

// plan's defaults where they are not a request's: a buffer of 1M elements, 64 KiB slices and no
// telemetry (plan --run keeps none).
RunRequest planRequest() {
  RunRequest q;
  q.count = 1u << 20;
  q.sliceBytes = 64u << 10;
  q.telemetry = TelemetryLevel::Off;
  return q;
}

// What plan asks for: one run request on `ranks` ranks of one host, and what to do with it.
struct PlanArgs {
  RunRequest req = planRequest();
  int ranks = 4;
  bool run = false;
  bool json = false;
  std::string importFile;  // an MSCCL algorithm file instead of an algorithm
};

// plan's flags for the fields of its run request that commands name differently.
constexpr RunFieldFlags kRunFlags{"--ranks", "--count", "--warmup"};

class PlanCommand final : public Command {
 public:
  PlanCommand(CLI::App& lab, const std::vector<std::string>& args);
  int run() override;

 private:
  PlanArgs parse() const;
  Schedule resolve(const PlanArgs& a) const;
  Schedule resolveImport(PlanArgs& a, std::vector<std::vector<MscclOrigin>>& origins) const;

  Options opts_;
  bool run_ = false, json_ = false, inPlace_ = false;
};

PlanCommand::PlanCommand(CLI::App& lab, const std::vector<std::string>& args)
    : opts_(lab.add_subcommand("plan", "print, verify, model and run a schedule in process"),
            args) {
  app = lab.get_subcommand("plan");
  app->footer(wrap(kAbout, 92) + "\n");
  // On one line: scripts/plan-sweep reads the algorithms from it.
  opts_.value("--algo", "NAME", "algorithm: " + algorithmList() + " (default ring)", false);
  opts_.value("--import", "FILE.xml",
              "an MSCCL algorithm file (allreduce, allgather, reduce_scatter) to import, verify "
              "and run instead of --algo; the file sets the collective and the ranks");
  opts_.value("--collective", "NAME",
              "allreduce, reducescatter, allgather, reduce, broadcast (default allreduce)");
  opts_.value("--ranks", "N", "ranks, 1.." + std::to_string(kMaxRanks) + " (default 4)");
  opts_.value("--count", "N",
              "elements per rank buffer, NCCL's count; K, M, G = 2^10, 2^20, 2^30 (default 1M)");
  opts_.value("--slice,--chunk", "SIZE",
              "pipeline slice in bytes, a whole number of elements (default 64K); --chunk is its "
              "older name");
  opts_.value("-d,--datatype,--dtype", "NAME",
              "float, double, half, bfloat16, int32, int64, uint8 (default float)");
  opts_.value("-o,--op", "NAME", "sum, prod, min, max, avg (default sum)");
  opts_.value("--root", "R", "root of reduce and broadcast, 0..ranks-1 (default 0)");
  opts_.value("--ranks-per-host", "K",
              "ranks per host for hierarchical, 0..ranks (default 0: one host)");
  opts_.value("--radix", "K",
              "knomial's radix, 2..ranks (2: binomial; default 4, or ranks when fewer)");
  opts_.value("--ring-order", "LIST",
              "the ring as a permutation of 0..ranks-1, e.g. 0,2,1,3 (default 0,1,...,ranks-1)");
  opts_.value("--inflight", "K",
              "slices in flight per rank, 1.." + std::to_string(kMaxInflight) + " (default 4)");
  opts_.value("--window", "W",
              "ring: slices each step takes together, 1.." + std::to_string(kMaxInflight) +
                  " (default 1, slice by slice; other algorithms ignore it)");
  opts_.flag("--in-place", &inPlace_, "run in place (NCCL's in-place buffers)");
  opts_.value("--iters", "N", "timed iterations with --run (default 5)");
  opts_.value("--warmup", "N", "untimed iterations before them (default 1)");
  opts_.value("--stall-timeout", "TIME",
              "with --run, fail when no rank makes progress for TIME, e.g. 500ms (default 20s)");
  opts_.flag("--run", &run_, "run the schedule in process and check every element");
  opts_.flag("--json", &json_, "print one JSON object instead of the tables");
  declareShaping(opts_);
  declareModelOption(opts_);
}

PlanArgs PlanCommand::parse() const {
  PlanArgs a;
  a.run = run_;
  a.json = json_;
  a.req.inPlace = inPlace_;
  if (auto v = opts_.get("--import")) a.importFile = v->text;
  if (auto v = opts_.get("--algo")) a.req.algorithm = v->text;
  if (auto v = opts_.get("--collective")) a.req.collective = parseCollective(*v);
  if (auto v = opts_.get("--datatype")) a.req.dtype = parseDataType(*v);
  if (auto v = opts_.get("--op")) a.req.op = parseRedOp(*v);
  if (auto v = opts_.get("--ranks")) a.ranks = parseInt(*v, 1, kMaxRanks);
  if (auto v = opts_.get("--count")) {
    a.req.count = parseSize(*v);
    if (a.req.count == 0) throw refuse(*v, "must be at least 1");
  }
  if (auto v = opts_.get("--slice")) a.req.sliceBytes = parseSize(*v);
  if (auto v = opts_.get("--root")) a.req.root = parseInteger(*v);
  if (auto v = opts_.get("--ranks-per-host")) a.req.ranksPerHost = parseInteger(*v);
  if (auto v = opts_.get("--radix")) a.req.radix = parseInteger(*v);
  if (auto v = opts_.get("--ring-order")) a.req.ringOrder = parseIntegerList(*v);
  if (auto v = opts_.get("--inflight")) a.req.inflight = parseInteger(*v);
  if (auto v = opts_.get("--window")) a.req.window = parseInteger(*v);
  if (auto v = opts_.get("--iters")) a.req.iterations = parseInteger(*v);
  if (auto v = opts_.get("--warmup")) a.req.warmup = parseInteger(*v);
  if (auto v = opts_.get("--stall-timeout"))
    a.req.stallTimeout = parseMillis(*v, kMaxStallTimeoutMs);
  a.req.shaping = parseShaping(opts_, a.ranks);
  if (const auto t = parseTopologyFlag(opts_, a.ranks))
    a.req.torusDims = torusDimsOf(topologyName(*t));
  return a;
}

// Checks the request as every client does (run_request.h) and returns its schedule.
Schedule PlanCommand::resolve(const PlanArgs& a) const {
  if (const LibraryAlgorithm* lib = findLibraryAlgorithm(a.req.algorithm)) {
    // A library's collective has no schedule to show, simulate or run in process.
    throw refuse(Arg{"--algo", a.req.algorithm},
                 lib->memory == MemoryKind::Device
                     ? "is NCCL's own collective, which has no schedule to plan; it runs on GPU "
                       "workers: allreduce-lab bench --backend nccl --nccl-algo ..."
                     : "is " + std::string(lib->library) +
                           "'s own collective, which has no schedule to plan; it runs on cpu "
                           "workers: allreduce-lab bench --algo " +
                           a.req.algorithm);
  }
  if (std::string why = rankCountRefusal(a.req.algorithm, a.ranks); !why.empty()) {
    throw refuse(opts_.get("--ranks").value_or(Arg{"--ranks", std::to_string(a.ranks)}), why);
  }
  // The ranks and the workers that serve them (switch's switch), one thread each.
  const int workers = a.ranks + helperWorkers(a.req.algorithm);
  Schedule s;
  try {
    (void)resolveRunRequest(a.req, std::vector<std::string>(workers, "localhost"), &s);
  } catch (const RunRequestError& e) {
    throw refuse(e, opts_, kRunFlags);
  } catch (const ConfigError& e) {
    throw refuse(Arg{"--algo", a.req.algorithm}, e.what());
  }
  return s;
}

// The schedule of an MSCCL file: its algorithm, collective and ranks replace the request's.
Schedule PlanCommand::resolveImport(PlanArgs& a,
                                    std::vector<std::vector<MscclOrigin>>& origins) const {
  for (const char* flag :
       {"--algo", "--collective", "--root", "--ring-order", "--ranks-per-host", "--radix"}) {
    if (auto v = opts_.get(flag)) throw refuse(*v, "cannot be given with --import (the file says)");
  }
  try {
    const MscclProgram p = readMscclProgram(a.importFile);
    if (auto v = opts_.get("--ranks"); v && a.ranks != p.ngpus) {
      throw refuse(*v,
                   "the file " + a.importFile + " is for " + std::to_string(p.ngpus) + " ranks");
    }
    a.ranks = p.ngpus;
    a.req.algorithm = mscclAlgorithmName(p);
    a.req.collective = p.collective;
    const size_t es = dtypeSize(a.req.dtype);
    if (a.req.sliceBytes == 0 || a.req.sliceBytes % es != 0) {
      throw refuse(opts_.get("--slice").value_or(Arg{"--slice", std::to_string(a.req.sliceBytes)}),
                   "must be a whole number, at least 1, of " + std::string(toString(a.req.dtype)) +
                       " elements (" + std::to_string(es) + " bytes each)");
    }
    return mscclSchedule(p, a.req.count, a.req.sliceBytes / es, &origins);
  } catch (const MscclImportError& e) {
    throw UsageError{e.what()};
  }
}

// "0,2,1,3".
std::string ringText(const std::vector<int>& ring) {
  std::string s;
  for (int r : ring) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s;
}

// "{0,1,3}"; sets of more than eight ranks write runs of three or more as ranges: "{0-9,12}".
std::string rankSet(uint64_t mask) {
  const bool ranges = __builtin_popcountll(mask) > 8;
  std::string s = "{";
  int r = 0;
  bool first = true;
  while (r < 64) {
    if (!(mask >> r & 1)) {
      ++r;
      continue;
    }
    int e = r;
    while (e + 1 < 64 && (mask >> (e + 1) & 1)) ++e;
    auto emit = [&](const std::string& t) {
      s += (first ? "" : ",") + t;
      first = false;
    };
    if (ranges && e - r >= 2) {
      emit(std::to_string(r) + "-" + std::to_string(e));
    } else {
      for (int i = r; i <= e; ++i) emit(std::to_string(i));
    }
    r = e + 1;
  }
  return s + "}";
}

std::string bufName(Buffer b) {
  switch (b) {
    case Buffer::Input: return "in";
    case Buffer::Output: return "out";
    case Buffer::Scratch: return "scratch";
  }
  return "?";
}

std::string range(const BufRef& r, uint64_t count) {
  return bufName(r.buf) + "[" + std::to_string(r.offset) + "," + std::to_string(r.offset + count) +
         ")";
}

// What an op does with local memory, e.g. "in[0,4) + recv -> out[0,4)".
std::string localEffect(const Op& op) {
  switch (op.kind) {
    case OpKind::Send: return range(op.src, op.count);
    case OpKind::Recv: return "-> " + range(op.dst, op.count);
    case OpKind::RecvReduceSend: return "+ " + range(op.src, op.count);
    case OpKind::RecvReduceCopySend:
    case OpKind::RecvReduceCopy:
      return "+ " + range(op.src, op.count) + " -> " + range(op.dst, op.count);
    case OpKind::RecvCopySend: return "-> " + range(op.dst, op.count);
    case OpKind::Copy: return range(op.src, op.count) + " -> " + range(op.dst, op.count);
  }
  return "?";
}

std::string peers(const Op& op) {
  std::string s;
  if (opRecvs(op.kind)) s += "<-" + std::to_string(op.recvPeer);
  if (opSends(op.kind)) s += std::string(s.empty() ? "" : " ") + "->" + std::to_string(op.sendPeer);
  return s.empty() ? "-" : s;
}

struct Row {
  const Op* op;
  int rank;
};

void printTable(const Schedule& s) {
  size_t total = 0, firstSlice = 0;
  for (const auto& ops : s.ranks) {
    total += ops.size();
    for (const Op& op : ops) firstSlice += op.slice == 0 ? 1 : 0;
  }
  std::printf("schedule: %" PRIu32 " steps, %zu ops\n", s.nsteps, total);
  if (total == 0) {
    std::printf("  (no ops: nothing to move)\n");
    return;
  }
  // Rows ordered by step, then rank, then program order.
  std::vector<std::vector<Row>> bySteps(s.nsteps);
  for (int r = 0; r < s.nranks; ++r) {
    for (const Op& op : s.ranks[static_cast<size_t>(r)]) {
      if (op.step < bySteps.size()) bySteps[op.step].push_back({&op, r});
    }
  }
  const bool full = total <= kFullTableOps;
  if (full || firstSlice <= kFullTableOps) {
    if (!full) {
      std::printf(
          "condensed: showing only slice 0 of every step (%zu of %zu ops); the other slices of a "
          "step repeat it on the following elements\n",
          firstSlice, total);
    }
    std::printf("%5s %5s  %-14s %-18s %-9s %5s %5s  %-40s %s\n", "step", "rank", "phase", "op",
                "peers", "chunk", "slice", "local buffers", "holds");
    for (uint32_t st = 0; st < s.nsteps; ++st) {
      for (const Row& row : bySteps[st]) {
        const Op& op = *row.op;
        if (!full && op.slice != 0) continue;
        const std::string holds =
            (opSends(op.kind) || opRecvs(op.kind)) ? rankSet(op.provenance) : std::string("-");
        std::printf("%5" PRIu32 " %5d  %-14s %-18s %-9s %5" PRIu32 " %5" PRIu32 "  %-40s %s\n",
                    op.step, row.rank, std::string(toString(op.phase)).c_str(),
                    std::string(toString(op.kind)).c_str(), peers(op).c_str(), op.chunk, op.slice,
                    localEffect(op).c_str(), holds.c_str());
      }
    }
    return;
  }
  std::printf(
      "condensed: %zu ops, too many to list; one line per step (ops, ranks that send, elements "
      "sent, kinds)\n",
      total);
  std::printf("%5s  %-14s %8s %6s %12s  %s\n", "step", "phase", "ops", "ranks", "elements",
              "kinds");
  for (uint32_t st = 0; st < s.nsteps; ++st) {
    uint64_t elems = 0, senders = 0;
    std::map<std::string_view, size_t> kinds;
    Phase phase = Phase::Local;
    for (const Row& row : bySteps[st]) {
      if (opSends(row.op->kind)) {
        elems += row.op->count;
        senders |= uint64_t{1} << row.rank;
      }
      kinds[toString(row.op->kind)]++;
      phase = row.op->phase;
    }
    std::string k;
    for (const auto& [name, num] : kinds) {
      k += (k.empty() ? "" : ", ") + std::string(name) + " x" + std::to_string(num);
    }
    std::printf("%5" PRIu32 "  %-14s %8zu %6d %12" PRIu64 "  %s\n", st,
                std::string(toString(phase)).c_str(), bySteps[st].size(),
                __builtin_popcountll(senders), elems, k.c_str());
  }
}

CostQuery costQuery(const PlanArgs& a, const Schedule& s) {
  CostQuery q;
  q.algorithm = a.req.algorithm;
  q.collective = a.req.collective;
  q.nranks = a.ranks;
  q.bytes = collectiveBytes(a.req.collective, a.ranks, a.req.count, a.req.dtype);
  q.sliceBytes = s.sliceElems * dtypeSize(a.req.dtype);
  q.ranksPerHost = a.req.ranksPerHost;
  q.radix = resolveRadix(a.req.radix, a.ranks);
  q.dtype = a.req.dtype;
  q.root = a.req.root;
  q.ringOrder = a.req.ringOrder;
  q.inflight = a.req.inflight;
  q.window = a.req.window;
  q.shaping = a.req.shaping;
  q.torusDims = a.req.torusDims;
  return q;
}

// The schedule's time in the simulation of the cost model's links; nothing (and the reason in
// *error) when the simulation refuses it.
std::optional<double> simulateUs(const CostQuery& q, const Schedule& s, const ModelParams& params,
                                 std::string* error) {
  SimOptions so;
  so.dtype = q.dtype;
  so.inflight = q.inflight;
  so.telemetry = TelemetryLevel::Off;
  try {
    return iterationSeconds(s, linkModelFor(q, params), so) * 1e6;
  } catch (const std::exception& e) {
    *error = e.what();
    return std::nullopt;
  }
}

// The text output: what was asked, the schedule, the verifier's verdict and the model.
void printSummary(const PlanArgs& a, const Schedule& s, const VerifyResult& vr,
                  const ModelChoice& model, const std::optional<double>& predictedUs,
                  const std::optional<double>& simulatedUs, const std::string& simError,
                  const std::optional<SharedMemoryCost>& sharedMemory) {
  std::printf("%s: %s %s, %d ranks, count %" PRIu64 " x %s (%" PRIu64 " bytes per rank), op %s",
              kProg, a.req.algorithm.c_str(), std::string(toString(a.req.collective)).c_str(),
              a.ranks, a.req.count, std::string(toString(a.req.dtype)).c_str(),
              a.req.count * dtypeSize(a.req.dtype), std::string(toString(a.req.op)).c_str());
  if (a.req.collective == Collective::Reduce || a.req.collective == Collective::Broadcast) {
    std::printf(", root %d", a.req.root);
  }
  if (a.req.ranksPerHost > 0) std::printf(", %d ranks per host", a.req.ranksPerHost);
  if (a.req.algorithm == "knomial") {
    std::printf(", radix %d", resolveRadix(a.req.radix, a.ranks));
  }
  if (!a.req.ringOrder.empty()) std::printf(", ring %s", ringText(a.req.ringOrder).c_str());
  std::printf(", slice %s (%" PRIu64 " elements)", formatSize(a.req.sliceBytes).c_str(),
              s.sliceElems);
  if (s.window > 1) std::printf(", window %u slices", s.window);
  std::printf("\n");
  printTable(s);
  if (s.nonResultRanks > 0 && s.count > 0) {
    // busbw's factor speaks of a ring's traffic: say what crossed each port here.
    const int sw = resultRanks(s);
    std::printf(
        "bytes: each rank sends %s to the switch and receives as much; the switch (rank %d, a "
        "worker that holds no result) receives and sends %s\n",
        formatSize(bytesSent(s, 0, a.req.dtype)).c_str(), sw,
        formatSize(bytesSent(s, sw, a.req.dtype)).c_str());
  }
  if (vr.ok && !a.importFile.empty()) {
    std::printf(
        "verifier: OK (every rank ends with the collective's result, no deadlock, in the order "
        "the import runs the file's thread blocks)\n");
  } else if (vr.ok) {
    std::printf("verifier: OK (every rank ends with the collective's result, no deadlock)\n");
  } else {
    std::printf("verifier: FAILED: %s\n", vr.message.c_str());
  }
  std::printf("model (predictions, not measurements; %s:\n       %s):\n", model.source.c_str(),
              paramsText(model.params).c_str());
  if (predictedUs) {
    std::printf("  alpha-beta-gamma closed form  %12s us\n", formatTimeUs(*predictedUs).c_str());
  } else if (!a.importFile.empty()) {
    std::printf(
        "  alpha-beta-gamma closed form  none for an imported schedule (the simulation is the "
        "authority)\n");
  } else if (!hasClosedForm(costQuery(a, s))) {
    std::printf(
        "  alpha-beta-gamma closed form  none for swing off a power of two (the simulation is "
        "the authority)\n");
  } else {
    std::printf(
        "  alpha-beta-gamma closed form  none for this shaping (the simulation is the "
        "authority)\n");
  }
  if (simulatedUs) {
    std::printf("  simulated schedule            %12s us  (inflight %d)\n",
                formatTimeUs(*simulatedUs).c_str(), a.req.inflight);
  } else {
    std::printf("  simulated schedule            not simulated (%s)\n",
                simError.empty() ? "schedule did not verify" : simError.c_str());
  }
  if (sharedMemory) {
    std::printf(
        "  shared-memory plane           %12s us  (workers on one host, unshaped: what "
        "bench predicts there)\n",
        formatTimeUs(sharedMemory->seconds * 1e6).c_str());
    std::string where;
    if (model.params.llcBytes > 0) {
      where = std::string(sharedMemory->cacheRates ? ", within" : ", beyond") +
              " the last-level cache of " + formatSize(model.params.llcBytes);
    }
    std::printf("    %s rates: a working set of %.1f MiB on the host%s\n",
                sharedMemory->cacheRates ? "cache-resident" : "streaming",
                static_cast<double>(sharedMemory->workingSetBytes) / (1 << 20), where.c_str());
  }
}

// In-process runs allocate every rank's buffers; refuse what would not fit in half the RAM.
void checkRunMemory(const Schedule& s, DataType t) {
  const uint64_t elems = s.inputElems + s.outputElems + s.scratchElems;
  const long double need = static_cast<long double>(elems) * dtypeSize(t) * s.nranks * 2;
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long pageSize = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || pageSize <= 0) return;
  const long double half = static_cast<long double>(pages) * pageSize / 2;
  if (need > half) {
    throw UsageError{"--count " + std::to_string(s.count) + " needs about " +
                     std::to_string(static_cast<uint64_t>(need / (1 << 20))) +
                     " MiB for an in-process --run, more than half of this machine's memory"};
  }
}

}  // namespace

std::unique_ptr<Command> addPlanCommand(CLI::App& lab, const std::vector<std::string>& args) {
  return std::make_unique<PlanCommand>(lab, args);
}

namespace {

// Runs the verified schedule in process (threads over the loopback) and reports it as a
// nccl-tests row, or into `j` for --json. Returns false when it failed or got wrong elements.
bool runInProcess(const PlanArgs& a, const Schedule& s, Json* j) {
  try {
    const LocalRunResult res = runLocal(s, localRunOptions(a.req));
    const Metrics m = computeMetrics(a.req.collective, a.ranks, a.req.count, a.req.dtype,
                                     res.iterationUs, res.wrong);
    if (j != nullptr) {
      (*j)["time_us"] = m.timeUs;
      (*j)["algbw_gbps"] = m.algbwGBps;
      (*j)["busbw_gbps"] = m.busbwGBps;
      (*j)["wrong"] = m.wrong;
      (*j)["iters"] = a.req.iterations;
      (*j)["warmup"] = a.req.warmup;
      (*j)["iteration_us"] = res.iterationUs;
    } else {
      const std::string helpers =
          s.nranks > a.ranks ? " and the switch (one thread more)" : std::string();
      std::printf(
          "run: in process, %d ranks (threads)%s on the CPU backend over loopback (%s), %s, "
          "warmup %d, iters %d, inflight %d\n",
          a.ranks, helpers.c_str(), describeShaping(a.req.shaping).c_str(),
          a.req.inPlace ? "in-place" : "out-of-place", a.req.warmup, a.req.iterations,
          a.req.inflight);
      std::fputs(ncclTestsHeader().c_str(), stdout);
      std::printf("%s\n",
                  ncclTestsRow(a.req.collective, a.req.count, a.req.dtype, a.req.op, a.req.root, m)
                      .c_str());
    }
    return m.wrong == 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: run failed: %s\n", kProg, e.what());
    if (j != nullptr) (*j)["run_error"] = e.what();
    return false;
  }
}

}  // namespace

int PlanCommand::run() {
  PlanArgs a;
  Schedule s;
  ModelChoice model;
  std::vector<std::vector<MscclOrigin>> origins;
  const int refused = runChecked(kProg, [&] {
    a = parse();
    model = chooseModel(opts_.get("--model"));
    s = a.importFile.empty() ? resolve(a) : resolveImport(a, origins);
    if (a.run) checkRunMemory(s, a.req.dtype);
    return 0;
  });
  if (refused != 0) return refused;

  VerifyResult vr = annotate(s);
  const bool imported = !a.importFile.empty();
  if (imported) vr.message = withMscclOrigins(vr.message, origins);

  const ModelParams& params = model.params;
  const CostQuery q = costQuery(a, s);
  // The closed form where it can say the network's shaping; the simulation beside it always.
  std::optional<double> predictedUs;
  if (!imported && closedFormCovers(q))
    predictedUs = closedForm(q).seconds(shapedParams(q, params)) * 1e6;
  std::string simError;
  const std::optional<double> simulatedUs =
      vr.ok ? simulateUs(q, s, params, &simError) : std::nullopt;

  size_t totalOps = 0;
  for (const auto& ops : s.ranks) totalOps += ops.size();

  // What bench predicts for these workers on one host over shared memory, unshaped.
  std::optional<SharedMemoryCost> sharedMemory;
  CostQuery shm = q;
  shm.sharedMemory = true;
  if (vr.ok && !imported && sharedMemoryCovers(shm, params))
    sharedMemory = costSharedMemory(shm, params);

  if (!a.json) {
    printSummary(a, s, vr, model, predictedUs, simulatedUs, simError, sharedMemory);
  }

  Json j;
  if (a.json) {
    j = Json{{"algorithm", a.req.algorithm},
             {"collective", std::string(toString(a.req.collective))},
             {"ranks", a.ranks},
             {"count", a.req.count},
             {"dtype", std::string(toString(a.req.dtype))},
             {"op", std::string(toString(a.req.op))},
             {"root", a.req.root},
             {"ranks_per_host", a.req.ranksPerHost},
             {"radix", resolveRadix(a.req.radix, a.ranks)},
             {"slice_bytes", a.req.sliceBytes},
             {"slice_elems", s.sliceElems},
             {"in_place", a.req.inPlace},
             {"inflight", a.req.inflight},
             {"window", s.window},
             {"size_bytes", q.bytes},
             {"steps", s.nsteps},
             {"ops", static_cast<uint64_t>(totalOps)},
             {"shaping", describeShaping(a.req.shaping)},
             {"verified", vr.ok},
             {"verify_message", vr.message},
             {"predicted_us", predictedUs ? Json(*predictedUs) : Json(nullptr)},
             {"simulated_us", simulatedUs ? Json(*simulatedUs) : Json(nullptr)},
             {"model", Json{{"source", model.source},
                            {"alpha_s", params.alpha},
                            {"beta_s_per_byte", params.beta},
                            {"gamma_s_per_byte", params.gamma}}}};
    // The shared-memory plane's prediction, with the rates it used ("cache": the
    // cache-resident ones, the run's working set fitting in the last-level cache).
    j["shared_memory_us"] = Json(nullptr);
    j["shared_memory_rates"] = Json(nullptr);
    j["shared_memory_working_set_bytes"] = Json(nullptr);
    if (sharedMemory) {
      j["shared_memory_us"] = sharedMemory->seconds * 1e6;
      j["shared_memory_rates"] = sharedMemory->cacheRates ? "cache" : "streaming";
      j["shared_memory_working_set_bytes"] = sharedMemory->workingSetBytes;
    }
  }

  int rc = vr.ok ? 0 : 1;
  if (a.run) {
    if (!vr.ok) {
      if (!a.json) std::printf("run: skipped, the schedule did not verify\n");
      if (a.json) j["run_skipped"] = true;
    } else if (!runInProcess(a, s, a.json ? &j : nullptr)) {
      rc = 1;
    }
  }
  if (a.json) std::printf("%s\n", jsonText(j).c_str());
  return rc;
}

}  // namespace arl::app
