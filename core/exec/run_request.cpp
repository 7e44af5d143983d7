#include "exec/run_request.h"

#include <algorithm>
#include <map>

#include "base/errors.h"
#include "base/limits.h"

namespace arl {

namespace {

std::string range(int64_t lo, int64_t hi, int64_t got) {
  return "must be in " + std::to_string(lo) + ".." + std::to_string(hi) + " (got " +
         std::to_string(got) + ")";
}

void checkScalars(const RunRequest& req, int n) {
  const size_t es = dtypeSize(req.dtype);
  if (req.sliceBytes == 0) throw ConfigError("slice size must be greater than 0 bytes");
  if (req.sliceBytes % es != 0) {
    throw ConfigError("slice of " + std::to_string(req.sliceBytes) +
                      " bytes is not a whole number of " + std::string(toString(req.dtype)) +
                      " elements (" + std::to_string(es) + " bytes each)");
  }
  if (req.iterations < 1 || req.iterations > static_cast<int64_t>(kMaxIterations)) {
    throw ConfigError("iterations " + range(1, kMaxIterations, req.iterations));
  }
  if (req.warmup < 0 || req.warmup > static_cast<int64_t>(kMaxIterations)) {
    throw ConfigError("warm-up iterations " + range(0, kMaxIterations, req.warmup));
  }
  if (req.inflight < 1 || req.inflight > static_cast<int64_t>(kMaxInflight)) {
    throw ConfigError("slices in flight " + range(1, kMaxInflight, req.inflight));
  }
  if (req.recvTimeout.count() <= 0) {
    throw ConfigError("receive timeout must be positive (got " +
                      std::to_string(req.recvTimeout.count()) + " ms)");
  }
  if (req.ranksPerHost < 0 || req.ranksPerHost > n) {
    throw ConfigError("ranks per host " + range(0, n, req.ranksPerHost));
  }
}

std::vector<int> resolveRing(const RunRequest& req, int n) {
  std::vector<int> ring = req.ringOrder;
  if (ring.empty()) {
    for (int r = 0; r < n; ++r) ring.push_back(r);
    return ring;
  }
  if (static_cast<int>(ring.size()) != n) {
    throw ConfigError("ring order names " + std::to_string(ring.size()) + " ranks for a world of " +
                      std::to_string(n) + "; it must name each of 0.." + std::to_string(n - 1) +
                      " once");
  }
  std::vector<bool> seen(n, false);
  for (int r : ring) {
    if (r < 0 || r >= n) throw ConfigError("ring order: rank " + std::to_string(r) + " " + range(0, n - 1, r));
    if (seen[r]) throw ConfigError("ring order names rank " + std::to_string(r) + " twice");
    seen[r] = true;
  }
  return ring;
}

// Ranks per host from the hosts' names when the request leaves it at 0: the ranks of one
// host when every host has as many; otherwise all ranks count as one host (no algorithm but
// hierarchical groups by host, and hierarchical refuses uneven hosts).
int resolveRanksPerHost(const RunRequest& req, const std::vector<std::string>& hosts) {
  if (req.ranksPerHost != 0) return req.ranksPerHost;
  std::map<std::string, int> perHost;
  for (const auto& h : hosts) ++perHost[h];
  const int first = perHost.begin()->second;
  const bool even = std::all_of(perHost.begin(), perHost.end(),
                                [&](const auto& kv) { return kv.second == first; });
  if (even) return first;
  if (req.algorithm == "hierarchical") {
    std::string counts;
    for (const auto& [h, c] : perHost) {
      counts += (counts.empty() ? "" : ", ") + h + ": " + std::to_string(c);
    }
    throw ConfigError("hierarchical needs the same number of ranks on every host (" + counts +
                      "); set ranks per host");
  }
  return static_cast<int>(hosts.size());
}

}  // namespace

GenParams genParams(const RunRequest& req, const ResolvedRun& run) {
  GenParams p;
  p.collective = req.collective;
  p.nranks = run.nranks;
  p.count = req.count;
  p.sliceElems = run.sliceElems;
  p.root = req.root;
  p.ranksPerHost = run.ranksPerHost;
  p.ring = run.ringOrder;
  return p;
}

ResolvedRun resolveRunRequest(const RunRequest& req, const std::vector<std::string>& hosts) {
  const int n = static_cast<int>(hosts.size());
  if (n == 0) throw ConfigError("no ranks to run on");
  if (n > kMaxRanks) throw ConfigError("ranks " + range(1, kMaxRanks, n));
  const auto& names = algorithmNames();
  if (std::find(names.begin(), names.end(), req.algorithm) == names.end()) {
    std::string known;
    for (const auto& a : names) known += (known.empty() ? "" : ", ") + a;
    throw ConfigError("unknown algorithm '" + req.algorithm + "' (known: " + known + ")");
  }
  if (!algorithmSupports(req.algorithm, req.collective)) {
    throw ConfigError("algorithm '" + req.algorithm + "' does not implement " +
                      std::string(toString(req.collective)));
  }
  checkScalars(req, n);

  ResolvedRun run;
  run.nranks = n;
  run.ranksPerHost = resolveRanksPerHost(req, hosts);
  run.ringOrder = resolveRing(req, n);
  run.sliceElems = req.sliceBytes / dtypeSize(req.dtype);
  Schedule s;
  try {
    s = generate(req.algorithm, genParams(req, run));
  } catch (const GenError& e) {
    throw ConfigError(e.what());
  }
  run.steps = s.nsteps;
  for (int r = 0; r < n; ++r) run.bytesSent.push_back(bytesSent(s, r, req.dtype));
  return run;
}

}  // namespace arl
