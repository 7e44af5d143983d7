// allreduce-lab plan: generate a schedule, print it step by step with the provenance of every
// payload, verify it symbolically, predict its time with the cost model, and optionally run
// it in process on real buffers, reporting nccl-tests' metrics.
#include <unistd.h>

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
#include "schedule/generators.h"
#include "export/json.h"
#include "exec/local_run.h"
#include "model/metrics.h"
#include "model/model.h"
#include "schedule/verifier.h"
#include "cli_util.h"
#include "commands.h"

namespace arl::app {

namespace {

constexpr const char* kProg = "allreduce-lab plan";
constexpr int kMaxRanks = 64;
// Schedules with more ops than this are printed condensed.
constexpr size_t kFullTableOps = 400;
// Upper bound on the pipeline slices one plan may hold (each becomes ops on several ranks).
constexpr uint64_t kMaxSlices = uint64_t{4} << 20;

void usage(std::FILE* to) {
  std::string algos;
  for (const std::string& a : algorithmNames()) algos += (algos.empty() ? "" : ", ") + a;
  std::fprintf(
      to,
      "usage: allreduce-lab plan [options]\n"
      "Prints a collective's schedule step by step (which rank sends which slice to whom, and\n"
      "whose contributions each payload holds), the symbolic verifier's verdict and the cost\n"
      "model's prediction; with --run, runs it in process on real buffers (one thread per rank,\n"
      "CPU backend, loopback transport) and reports nccl-tests' time, algbw, busbw and #wrong.\n"
      "\n"
      "  --algo NAME          algorithm: %s (default ring)\n"
      "  --collective NAME    allreduce, reducescatter, allgather, reduce, broadcast\n"
      "                       (default allreduce)\n"
      "  --ranks N            ranks, 1..%d (default 4)\n"
      "  --count N            elements per rank buffer, NCCL's count (K, M, G = 2^10, 2^20, 2^30)\n"
      "                       (default 1M)\n"
      "  --chunk BYTES        pipeline slice size in bytes, at least one element (default 64K)\n"
      "  --dtype NAME         float, double, half, bfloat16, int32, int64, uint8 (default float)\n"
      "  --op NAME            sum, prod, min, max, avg (default sum)\n"
      "  --root R             root of reduce and broadcast (default 0)\n"
      "  --ranks-per-host N   ranks per host for hierarchical (default 0: one host)\n"
      "  --inflight K         slices in flight per rank (default 4)\n"
      "  --in-place           run in place (NCCL's in-place buffers)\n"
      "  --iters N            timed iterations with --run (default 5)\n"
      "  --warmup N           untimed iterations before them (default 1)\n"
      "  --run                run the schedule in process and check every element\n"
      "  --json               print one JSON object instead of the tables\n"
      "  -h, --help           this help\n"
      "Exit status: 0 when the schedule verifies (and, with --run, no element is wrong), 1 when\n"
      "it does not, 2 on bad arguments.\n",
      algos.c_str(), kMaxRanks);
}

struct PlanArgs {
  std::string algo = "ring";
  Collective collective = Collective::AllReduce;
  int ranks = 4;
  uint64_t count = 1u << 20;
  uint64_t chunkBytes = 64u << 10;
  DataType dtype = DataType::Float;
  RedOp op = RedOp::Sum;
  int root = 0;
  int ranksPerHost = 0;
  int inflight = 4;
  bool inPlace = false;
  int iters = 5;
  int warmup = 1;
  bool run = false;
  bool json = false;
  bool help = false;
};

PlanArgs parseArgs(const std::vector<std::string>& args) {
  PlanArgs a;
  std::optional<std::string> algo, collective, dtype, op, ranks, count, chunk, root, rph, inflight,
      iters, warmup;
  FlagScanner fs;
  fs.value({"--algo"}, &algo);
  fs.value({"--collective"}, &collective);
  fs.value({"--dtype"}, &dtype);
  fs.value({"--op"}, &op);
  fs.value({"--ranks"}, &ranks);
  fs.value({"--count"}, &count);
  fs.value({"--chunk"}, &chunk);
  fs.value({"--root"}, &root);
  fs.value({"--ranks-per-host"}, &rph);
  fs.value({"--inflight"}, &inflight);
  fs.value({"--iters"}, &iters);
  fs.value({"--warmup"}, &warmup);
  fs.flag({"--run"}, &a.run);
  fs.flag({"--json"}, &a.json);
  fs.flag({"--in-place"}, &a.inPlace);
  if (!fs.scan(args)) {
    a.help = true;
    return a;
  }

  if (algo) a.algo = parseAlgorithmArg("--algo", *algo);
  if (collective) a.collective = parseCollectiveArg("--collective", *collective);
  if (dtype) a.dtype = parseDataTypeArg("--dtype", *dtype);
  if (op) a.op = parseRedOpArg("--op", *op);
  if (ranks) a.ranks = parseIntArg("--ranks", *ranks, 1, kMaxRanks);
  if (count) a.count = parseSizeArg("--count", *count, "elements");
  if (chunk) a.chunkBytes = parseSizeArg("--chunk", *chunk, "bytes");
  if (root) a.root = parseIntArg("--root", *root, 0, a.ranks - 1);
  if (rph) a.ranksPerHost = parseIntArg("--ranks-per-host", *rph, 0, kMaxRanks);
  if (inflight) a.inflight = parseIntArg("--inflight", *inflight, 1, 1 << 20);
  if (iters) a.iters = parseIntArg("--iters", *iters, 1, 1 << 24);
  if (warmup) a.warmup = parseIntArg("--warmup", *warmup, 0, 1 << 24);

  const uint64_t elem = dtypeSize(a.dtype);
  if (a.chunkBytes == 0) throw UsageError{"--chunk must be greater than 0"};
  if (a.chunkBytes < elem) {
    throw UsageError{"--chunk " + std::to_string(a.chunkBytes) + " is smaller than one " +
                     std::string(toString(a.dtype)) + " element (" + std::to_string(elem) +
                     " bytes)"};
  }
  // Largest per-rank buffer in bytes must fit, with room for the generators' offsets.
  const uint64_t perRankElems =
      std::max(inputElemsFor(a.collective, 1, a.count), outputElemsFor(a.collective, 1, a.count));
  const uint64_t limit = std::numeric_limits<uint64_t>::max() / 64 / 8;
  if (a.count > limit / static_cast<uint64_t>(a.ranks) || perRankElems > limit) {
    throw UsageError{"--count " + std::to_string(a.count) + " is too large: " +
                     std::to_string(a.ranks) + " ranks x " + std::to_string(a.count) + " x " +
                     std::to_string(elem) + "-byte elements overflows the lab's 64-bit offsets"};
  }
  if (!algorithmSupports(a.algo, a.collective)) {
    throw UsageError{"--algo " + a.algo + " does not implement --collective " +
                     std::string(toString(a.collective)) + " (it implements " +
                     collectivesOf(a.algo) + ")"};
  }
  const uint64_t sliceElems = a.chunkBytes / elem;
  const uint64_t vectorElems = std::max(inputElemsFor(a.collective, a.ranks, a.count),
                                        outputElemsFor(a.collective, a.ranks, a.count));
  const uint64_t slicesPerRank = vectorElems / sliceElems + 1;
  if (slicesPerRank > kMaxSlices / static_cast<uint64_t>(a.ranks)) {
    throw UsageError{"--chunk " + std::to_string(a.chunkBytes) + " cuts " +
                     std::to_string(vectorElems) + " elements on each of " +
                     std::to_string(a.ranks) + " ranks into more than " +
                     std::to_string(kMaxSlices) +
                     " slices in all; use a larger --chunk or a "
                     "smaller --count"};
  }
  return a;
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

int planCommand(const std::vector<std::string>& args) {
  PlanArgs a;
  Schedule s;
  try {
    a = parseArgs(args);
    if (a.help) {
      usage(stdout);
      return 0;
    }
    GenParams gp;
    gp.collective = a.collective;
    gp.nranks = a.ranks;
    gp.count = a.count;
    gp.sliceElems = a.chunkBytes / dtypeSize(a.dtype);
    gp.root = a.root;
    gp.ranksPerHost = a.ranksPerHost;
    try {
      s = generate(a.algo, gp);
    } catch (const GenError& e) {
      throw UsageError{"--algo " + a.algo + ": " + e.what()};
    }
    if (a.run) checkRunMemory(s, a.dtype);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s\n", kProg, e.message.c_str());
    return 2;
  }

  const VerifyResult vr = annotate(s);

  const uint64_t elem = dtypeSize(a.dtype);
  const ModelParams params;
  CostQuery q;
  q.algorithm = a.algo;
  q.collective = a.collective;
  q.nranks = a.ranks;
  q.bytes = collectiveBytes(a.collective, a.ranks, a.count, a.dtype);
  q.sliceBytes = s.sliceElems * elem;
  q.ranksPerHost = a.ranksPerHost;
  const double predictedUs = predictSeconds(q, params) * 1e6;
  std::optional<double> simulatedUs;
  std::string simError;
  if (vr.ok) {
    SimOptions so;
    so.dtype = a.dtype;
    so.inflight = a.inflight;
    so.telemetry = TelemetryLevel::Off;
    try {
      simulatedUs = simulate(s, LinkModel::fromParams(params), so).totalSeconds * 1e6;
    } catch (const std::exception& e) {
      simError = e.what();
    }
  }

  size_t totalOps = 0;
  for (const auto& ops : s.ranks) totalOps += ops.size();

  if (!a.json) {
    std::printf("%s: %s %s, %d ranks, count %" PRIu64 " x %s (%" PRIu64 " bytes per rank), op %s",
                kProg, a.algo.c_str(), std::string(toString(a.collective)).c_str(), a.ranks,
                a.count, std::string(toString(a.dtype)).c_str(), a.count * elem,
                std::string(toString(a.op)).c_str());
    if (a.collective == Collective::Reduce || a.collective == Collective::Broadcast) {
      std::printf(", root %d", a.root);
    }
    if (a.ranksPerHost > 0) std::printf(", %d ranks per host", a.ranksPerHost);
    std::printf(", chunk %s (%" PRIu64 " elements)\n", formatSize(a.chunkBytes).c_str(),
                s.sliceElems);
    printTable(s);
    if (vr.ok) {
      std::printf("verifier: OK (every rank ends with the collective's result, no deadlock)\n");
    } else {
      std::printf("verifier: FAILED: %s\n", vr.message.c_str());
    }
    std::printf(
        "model (defaults, not measurements: alpha %.1f us/message, link %.2f GB/s, reduce "
        "%.2f GB/s):\n",
        params.alpha * 1e6, 1e-9 / params.beta, 1e-9 / params.gamma);
    std::printf("  alpha-beta-gamma closed form  %12s us\n", formatTimeUs(predictedUs).c_str());
    if (simulatedUs) {
      std::printf("  simulated schedule            %12s us  (inflight %d)\n",
                  formatTimeUs(*simulatedUs).c_str(), a.inflight);
    } else {
      std::printf("  simulated schedule            not simulated (%s)\n",
                  simError.empty() ? "schedule did not verify" : simError.c_str());
    }
  }

  Json j;
  if (a.json) {
    j = Json{{"algorithm", a.algo},
             {"collective", std::string(toString(a.collective))},
             {"ranks", a.ranks},
             {"count", a.count},
             {"dtype", std::string(toString(a.dtype))},
             {"op", std::string(toString(a.op))},
             {"root", a.root},
             {"ranks_per_host", a.ranksPerHost},
             {"slice_bytes", a.chunkBytes},
             {"slice_elems", s.sliceElems},
             {"in_place", a.inPlace},
             {"inflight", a.inflight},
             {"size_bytes", q.bytes},
             {"steps", s.nsteps},
             {"ops", static_cast<uint64_t>(totalOps)},
             {"verified", vr.ok},
             {"verify_message", vr.message},
             {"predicted_us", predictedUs},
             {"simulated_us", simulatedUs ? Json(*simulatedUs) : Json(nullptr)},
             {"model", Json{{"source", "defaults"},
                            {"alpha_s", params.alpha},
                            {"beta_s_per_byte", params.beta},
                            {"gamma_s_per_byte", params.gamma}}}};
  }

  int rc = vr.ok ? 0 : 1;
  if (a.run) {
    if (!vr.ok) {
      if (!a.json) std::printf("run: skipped, the schedule did not verify\n");
      if (a.json) j["run_skipped"] = true;
    } else {
      LocalRunOptions lo;
      lo.dtype = a.dtype;
      lo.op = a.op;
      lo.inPlace = a.inPlace;
      lo.warmup = a.warmup;
      lo.iterations = a.iters;
      lo.inflight = a.inflight;
      lo.check = true;
      try {
        const LocalRunResult res = runLocal(s, lo);
        const Metrics m =
            computeMetrics(a.collective, a.ranks, a.count, a.dtype, res.iterationUs, res.wrong);
        if (m.wrong != 0) rc = 1;
        if (a.json) {
          j["time_us"] = m.timeUs;
          j["algbw_gbps"] = m.algbwGBps;
          j["busbw_gbps"] = m.busbwGBps;
          j["wrong"] = m.wrong;
          j["iters"] = a.iters;
          j["warmup"] = a.warmup;
          j["iteration_us"] = res.iterationUs;
        } else {
          std::printf(
              "run: in process, %d ranks (threads) on the CPU backend over loopback, %s, warmup "
              "%d, iters %d, inflight %d\n",
              a.ranks, a.inPlace ? "in-place" : "out-of-place", a.warmup, a.iters, a.inflight);
          std::fputs(ncclTestsHeader().c_str(), stdout);
          std::printf("%s\n",
                      ncclTestsRow(a.collective, a.count, a.dtype, a.op, a.root, m).c_str());
        }
      } catch (const std::exception& e) {
        rc = 1;
        std::fprintf(stderr, "%s: run failed: %s\n", kProg, e.what());
        if (a.json) j["run_error"] = e.what();
      }
    }
  }
  if (a.json) std::printf("%s\n", jsonText(j).c_str());
  return rc;
}

}  // namespace arl::app
