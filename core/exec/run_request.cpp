#include "exec/run_request.h"

#include <algorithm>
#include <limits>
#include <map>

#include "base/errors.h"
#include "base/limits.h"
#include "exec/collective_library.h"
#include "schedule/msccl_import.h"

namespace arl {

namespace {

// Largest element offset the generators and the wire carry, with room for their arithmetic.
constexpr uint64_t kMaxOffsetElems = std::numeric_limits<uint64_t>::max() / 64 / 8;

std::string inRange(int64_t lo, int64_t hi) {
  return "must be in " + std::to_string(lo) + ".." + std::to_string(hi);
}

void checkInt(RunField f, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) throw RunRequestError(f, std::to_string(v), inRange(lo, hi));
}

std::string joined(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

void checkAlgorithm(const RunRequest& req) {
  if (!req.scheduleXml.empty()) return;  // the file is the algorithm (importedSchedule)
  if (const LibraryAlgorithm* a = findLibraryAlgorithm(req.algorithm)) {
    if (!a->supports(req.collective)) {
      throw RunRequestError(RunField::Collective, std::string(toString(req.collective)),
                            "algorithm " + req.algorithm + " does not implement it (" +
                                std::string(a->summary) + ")");
    }
    return;
  }
  const auto& names = algorithmNames();
  if (std::find(names.begin(), names.end(), req.algorithm) == names.end()) {
    throw RunRequestError(RunField::Algorithm, req.algorithm,
                          "unknown (known: " + joined(names) +
                              "; NCCL's: " + libraryAlgorithmList("nccl") +
                              "; Open MPI's: " + libraryAlgorithmList("mpi") +
                              "; Gloo's: " + libraryAlgorithmList("gloo") + ")");
  }
  if (!algorithmSupports(req.algorithm, req.collective)) {
    std::vector<std::string> supported;
    for (Collective c : kAllCollectives) {
      if (algorithmSupports(req.algorithm, c)) supported.emplace_back(toString(c));
    }
    throw RunRequestError(RunField::Collective, std::string(toString(req.collective)),
                          "algorithm " + req.algorithm + " does not implement it (it implements " +
                              joined(supported) + ")");
  }
}

void checkSlice(const RunRequest& req) {
  const size_t es = dtypeSize(req.dtype);
  const std::string elem =
      std::string(toString(req.dtype)) + " elements (" + std::to_string(es) + " bytes each)";
  if (req.sliceBytes == 0 || req.sliceBytes % es != 0) {
    throw RunRequestError(RunField::SliceBytes, std::to_string(req.sliceBytes),
                          "must be a whole number, at least 1, of " + elem);
  }
}

// Every rank's buffers must fit the 64-bit element offsets, and the slices of one run the
// bound that keeps its schedule in memory.
void checkSize(const RunRequest& req, int n) {
  const uint64_t maxCount = kMaxOffsetElems / static_cast<uint64_t>(n);
  if (req.count > maxCount) {
    throw RunRequestError(RunField::Count, std::to_string(req.count),
                          "must be in 0.." + std::to_string(maxCount) + " elements for " +
                              std::to_string(n) + " ranks (64-bit offsets)");
  }
  const uint64_t vectorElems = std::max(inputElemsFor(req.collective, n, req.count),
                                        outputElemsFor(req.collective, n, req.count));
  const uint64_t slicesPerRank = vectorElems / (req.sliceBytes / dtypeSize(req.dtype)) + 1;
  if (slicesPerRank > kMaxSlicesPerRun / static_cast<uint64_t>(n)) {
    throw RunRequestError(RunField::SliceBytes, std::to_string(req.sliceBytes),
                          "cuts " + std::to_string(vectorElems) + " elements on each of " +
                              std::to_string(n) + " ranks into more than " +
                              std::to_string(kMaxSlicesPerRun) +
                              " slices in all; use larger slices or fewer elements");
  }
}

// `workers`: n and the helpers (helperWorkers), every one of which has a port to shape.
void checkScalars(const RunRequest& req, int n, int workers) {
  checkInt(RunField::Root, req.root, 0, n - 1);
  checkInt(RunField::MismatchRank, req.mismatchRank, -1, n - 1);
  checkInt(RunField::RanksPerHost, req.ranksPerHost, 0, n);
  if (req.radix != 0) checkInt(RunField::Radix, req.radix, 2, std::max(n, 2));
  checkInt(RunField::Inflight, req.inflight, 1, kMaxInflight);
  checkInt(RunField::Window, req.window, 1, kMaxInflight);
  checkInt(RunField::Iterations, req.iterations, 1, kMaxIterations);
  checkInt(RunField::Warmup, req.warmup, 0, kMaxIterations);
  if (req.stallTimeout.count() <= 0 || req.stallTimeout.count() > kMaxStallTimeoutMs) {
    throw RunRequestError(RunField::StallTimeout, std::to_string(req.stallTimeout.count()) + " ms",
                          "must be in 1.." + std::to_string(kMaxStallTimeoutMs) + " ms");
  }
  try {
    checkShaping(req.shaping, workers);
  } catch (const ShapingError& e) {
    throw RunRequestError(runFieldOf(e.part), e.value, e.rule);
  }
}

std::vector<int> resolveRing(const RunRequest& req, int n) {
  std::vector<int> ring = req.ringOrder;
  if (ring.empty()) {
    for (int r = 0; r < n; ++r) ring.push_back(r);
    return ring;
  }
  std::string text;
  for (int r : ring) text += (text.empty() ? "" : ",") + std::to_string(r);
  const std::string rule =
      "must name each of the " + std::to_string(n) + " ranks 0.." + std::to_string(n - 1) + " once";
  if (static_cast<int>(ring.size()) != n) {
    throw RunRequestError(RunField::RingOrder, text,
                          rule + " (it names " + std::to_string(ring.size()) + ")");
  }
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (int r : ring) {
    if (r < 0 || r >= n) {
      throw RunRequestError(RunField::RingOrder, text,
                            rule + " (" + std::to_string(r) + " is not a rank)");
    }
    if (seen[static_cast<size_t>(r)]) {
      throw RunRequestError(RunField::RingOrder, text,
                            rule + " (" + std::to_string(r) + " comes twice)");
    }
    seen[static_cast<size_t>(r)] = true;
  }
  return ring;
}

// Hierarchical groups ranks by host, and refuses hosts of uneven sizes unless told how many
// ranks a host holds.
void checkEvenHosts(const RunRequest& req, const std::vector<std::string>& hosts) {
  if (req.algorithm != "hierarchical" || req.ranksPerHost != 0) return;
  std::map<std::string, int> perHost;
  for (const auto& h : hosts) ++perHost[h];
  const int first = perHost.begin()->second;
  if (std::all_of(perHost.begin(), perHost.end(),
                  [&](const auto& kv) { return kv.second == first; })) {
    return;
  }
  std::string counts;
  for (const auto& [h, c] : perHost)
    counts += (counts.empty() ? "" : ", ") + h + ": " + std::to_string(c);
  throw RunRequestError(RunField::RanksPerHost, "0 (from the hosts: " + counts + ")",
                        "hierarchical needs the same number of ranks on every host; set it");
}

// The schedule of the request's MSCCL file on `n` ranks: the file is checked again here, as on
// every worker, since the request may come from anywhere.
Schedule importedSchedule(const RunRequest& req, const ResolvedRun& run) {
  try {
    const MscclProgram p = parseMscclProgram(req.scheduleXml, req.algorithm);
    if (mscclAlgorithmName(p) != req.algorithm) {
      throw ConfigError("algorithm " + req.algorithm + " is not the file's (" +
                        mscclAlgorithmName(p) + ")");
    }
    if (p.ngpus != run.nranks) {
      throw RunRequestError(
          RunField::Ranks, std::to_string(run.nranks),
          "the MSCCL file " + req.algorithm + " is for " + std::to_string(p.ngpus) + " ranks");
    }
    if (p.collective != req.collective) {
      throw RunRequestError(
          RunField::Collective, std::string(toString(req.collective)),
          "the MSCCL file " + req.algorithm + " implements " + std::string(toString(p.collective)));
    }
    return mscclSchedule(p, req.count, run.sliceElems);
  } catch (const MscclImportError& e) {
    throw ConfigError(e.what());
  }
}

}  // namespace

std::string_view describe(RunField f) {
  switch (f) {
    case RunField::Ranks: return "ranks";
    case RunField::Algorithm: return "algorithm";
    case RunField::Collective: return "collective";
    case RunField::Count: return "count";
    case RunField::SliceBytes: return "slice size in bytes";
    case RunField::Root: return "root";
    case RunField::RanksPerHost: return "ranks per host";
    case RunField::RingOrder: return "ring order";
    case RunField::Inflight: return "slices in flight";
    case RunField::Warmup: return "warm-up iterations";
    case RunField::Iterations: return "iterations";
    case RunField::StallTimeout: return "stall timeout";
    case RunField::PortRate: return describe(ShapingPart::PortRate);
    case RunField::AddedLatency: return describe(ShapingPart::AddedLatency);
    case RunField::SlowRank: return describe(ShapingPart::SlowRank);
    case RunField::SlowLink: return describe(ShapingPart::SlowLink);
    case RunField::MismatchRank: return "mismatched rank";
    case RunField::Radix: return "knomial radix";
    case RunField::Window: return "ring's window of slices";
  }
  return "?";
}

RunField runFieldOf(ShapingPart p) {
  switch (p) {
    case ShapingPart::PortRate: return RunField::PortRate;
    case ShapingPart::AddedLatency: return RunField::AddedLatency;
    case ShapingPart::SlowRank: return RunField::SlowRank;
    case ShapingPart::SlowLink: return RunField::SlowLink;
    // A link's own latency is a topology's hops times --link-latency: that flag's to answer.
    case ShapingPart::LinkLatency: return RunField::AddedLatency;
  }
  return RunField::PortRate;
}

RunRequestError::RunRequestError(RunField f, std::string v, std::string r)
    : ConfigError(std::string(describe(f)) + " " + v + ": " + r),
      field(f),
      value(std::move(v)),
      rule(std::move(r)) {}

int resolveRadix(int requested, int nranks) {
  return requested > 0 ? requested : std::min(kDefaultRadix, std::max(nranks, 2));
}

int ranksPerHost(int requested, const std::vector<std::string>& hosts) {
  if (requested > 0) return requested;
  std::map<std::string, int> perHost;
  for (const auto& h : hosts) ++perHost[h];
  if (perHost.empty()) return 0;
  const int first = perHost.begin()->second;
  const bool even = std::all_of(perHost.begin(), perHost.end(),
                                [&](const auto& kv) { return kv.second == first; });
  return even ? first : static_cast<int>(hosts.size());
}

GenParams genParams(const RunRequest& req, const ResolvedRun& run) {
  return {.collective = req.collective,
          .nranks = run.nranks,
          .count = req.count,
          .sliceElems = run.sliceElems,
          .root = req.root,
          .ranksPerHost = run.ranksPerHost,
          .ring = run.ringOrder,
          .radix = run.radix,
          .torusDims = req.torusDims,
          .window = slicesWindowOf(req.algorithm, req.window)};
}

LocalRunOptions localRunOptions(const RunRequest& req) {
  return {.dtype = req.dtype,
          .op = req.op,
          .inPlace = req.inPlace,
          .warmup = req.warmup,
          .iterations = req.iterations,
          .inflight = req.inflight,
          .check = req.checkedIterations(),
          .telemetry = req.telemetry,
          .shaping = req.shaping,
          .stallTimeout = req.stallTimeout};
}

ResolvedRun resolveRunRequest(const RunRequest& req, const std::vector<std::string>& hosts,
                              Schedule* schedule) {
  const int workers = static_cast<int>(hosts.size());
  checkInt(RunField::Ranks, workers, 1, kMaxRanks);
  checkAlgorithm(req);
  const int helpers = req.scheduleXml.empty() ? helperWorkers(req.algorithm) : 0;
  if (std::string why = workerCountRefusal(req.algorithm, workers); !why.empty()) {
    throw RunRequestError(RunField::Ranks, std::to_string(workers), why);
  }
  if (helpers > 0 && req.train) {
    throw RunRequestError(RunField::Algorithm, req.algorithm,
                          "trains no model: its switch worker would hold no replica");
  }
  const int n = workers - helpers;
  checkSlice(req);
  checkSize(req, n);
  checkScalars(req, n, workers);
  checkEvenHosts(req, hosts);

  ResolvedRun run;
  run.nranks = n;
  run.ranksPerHost = ranksPerHost(req.ranksPerHost, hosts);
  run.ringOrder = resolveRing(req, n);
  run.radix = resolveRadix(req.radix, n);
  run.sliceElems = req.sliceBytes / dtypeSize(req.dtype);
  if (findLibraryAlgorithm(req.algorithm) != nullptr) {
    // The library moves the bytes its own way: no steps, and what each rank sends is unknown
    // (bytesSent stays empty).
    if (schedule != nullptr) {
      *schedule = libraryShape(req.algorithm, req.collective, n, req.count, req.root);
    }
    return run;
  }
  Schedule s;
  try {
    s = req.scheduleXml.empty() ? generate(req.algorithm, genParams(req, run))
                                : importedSchedule(req, run);
  } catch (const GenError& e) {
    throw ConfigError(e.what());
  }
  run.steps = s.nsteps;
  for (int r = 0; r < s.nranks; ++r) run.bytesSent.push_back(bytesSent(s, r, req.dtype));
  if (schedule != nullptr) *schedule = std::move(s);
  return run;
}

}  // namespace arl
