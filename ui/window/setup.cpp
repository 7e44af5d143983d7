#include "window/setup.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "backend/registry.h"
#include "base/errors.h"
#include "base/limits.h"
#include "base/topology.h"
#include "exec/collective_library.h"
#include "exec/run_request.h"
#include "export/bench_sweep.h"
#include "model/metrics.h"
#include "runtime/protocol.h"
#include "runtime/run_types.h"
#include "schedule/generators.h"

namespace arl::ui {

namespace {

// More runs than this in one sweep is a slip of a field, not a session anyone waits for.
constexpr size_t kMaxSweepValues = 1000;

// A number of slices in flight from its field, beyond int saturated to a value that core's
// check refuses as out of range (rather than wrapped into one it accepts).
int inflightOf(uint64_t k) { return static_cast<int>(std::min<uint64_t>(k, 1u << 30)); }

SetupField setupFieldOf(RunField f) {
  switch (f) {
    case RunField::Ranks: return SetupField::LocalWorkers;
    case RunField::Algorithm: return SetupField::Algorithm;
    case RunField::Collective: return SetupField::Collective;
    case RunField::Count: return SetupField::Size;
    case RunField::SliceBytes: return SetupField::Slice;
    case RunField::Root: return SetupField::Root;
    case RunField::RanksPerHost: return SetupField::RanksPerHost;
    case RunField::Radix: return SetupField::Radix;
    case RunField::RingOrder: return SetupField::RingOrder;
    case RunField::Inflight: return SetupField::Inflight;
    case RunField::Warmup: return SetupField::Warmup;
    case RunField::Iterations: return SetupField::Iterations;
    case RunField::StallTimeout: return SetupField::Iterations;
    case RunField::PortRate: return SetupField::PortRate;
    case RunField::AddedLatency: return SetupField::Latency;
    case RunField::SlowRank: return SetupField::SlowRank;
    case RunField::SlowLink: return SetupField::SlowLink;
    case RunField::MismatchRank: return SetupField::Algorithm;  // bench's teaching flag only
    case RunField::Window: return SetupField::Window;
  }
  return SetupField::Algorithm;
}

// Collects problems, the first one per field.
class Problems {
 public:
  void add(SetupField f, std::string rule) {
    if (has(f)) return;
    list_.push_back({f, std::move(rule)});
  }
  bool has(SetupField f) const {
    return std::any_of(list_.begin(), list_.end(), [f](const auto& p) { return p.field == f; });
  }
  std::vector<SetupProblem> take() { return std::move(list_); }

 private:
  std::vector<SetupProblem> list_;
};

// Puts a value that core accepts in place of the refused one, so that a further check can find
// a problem in another field. Returns false when nothing can stand in for it.
bool standIn(RunRequest& q, RunField f) {
  switch (f) {
    case RunField::Algorithm: q.algorithm = "ring"; return true;
    case RunField::Collective: q.collective = Collective::AllReduce; return true;
    case RunField::Count: q.count = 1; return true;
    case RunField::SliceBytes: q.sliceBytes = dtypeSize(q.dtype) << 16; return true;
    case RunField::Root: q.root = 0; return true;
    case RunField::RanksPerHost: q.ranksPerHost = 1; return true;
    case RunField::Radix: q.radix = 0; return true;
    case RunField::RingOrder: q.ringOrder.clear(); return true;
    case RunField::Inflight: q.inflight = 1; return true;
    case RunField::Window: q.window = 1; return true;
    case RunField::Warmup: q.warmup = 0; return true;
    case RunField::Iterations: q.iterations = 1; return true;
    case RunField::PortRate: q.shaping.portBytesPerSecond = 0; return true;
    case RunField::AddedLatency: q.shaping.addedLatencySeconds = 0; return true;
    case RunField::SlowRank: q.shaping.rankPortBytesPerSecond.clear(); return true;
    case RunField::SlowLink: q.shaping.linkBytesPerSecond.clear(); return true;
    default: return false;
  }
}

// Every field core refuses in `q`, found by checking again with a stand-in for each refusal.
void checkRequest(RunRequest q, const std::vector<std::string>& hosts, const std::string& where,
                  Problems& out) {
  for (int round = 0; round < 16; ++round) {
    try {
      (void)resolveRunRequest(q, hosts);
      return;
    } catch (const RunRequestError& e) {
      const std::string rule =
          e.field == RunField::Count || e.field == RunField::SliceBytes ? e.rule + where : e.rule;
      out.add(setupFieldOf(e.field), rule);
      if (!standIn(q, e.field)) return;
    } catch (const ConfigError& e) {
      out.add(SetupField::Algorithm, q.algorithm + where + ": " + e.what());
      return;
    } catch (const std::exception& e) {
      out.add(SetupField::Algorithm, q.algorithm + where + ": " + e.what());
      return;
    }
  }
}

void checkRange(const SweepRange& r, SetupField f, const std::string& what, Problems& out) {
  if (!r.on) {
    if (r.single == 0) out.add(f, what + " must be at least 1");
    return;
  }
  if (r.min == 0) out.add(f, "the smallest " + what + " must be at least 1");
  if (r.max < r.min) out.add(f, "the largest " + what + " is smaller than the smallest");
  if (r.factor < 2) out.add(f, "the factor must be at least 2");
  if (r.min > 0 && r.factor >= 2 && r.max >= r.min &&
      r.values(kMaxSweepValues + 1).size() > kMaxSweepValues) {
    out.add(f, "gives more than " + std::to_string(kMaxSweepValues) + " values");
  }
}

void checkShapingField(const LinkShaping& part, int nranks, SetupField f, Problems& out) {
  try {
    checkShaping(part, nranks);
  } catch (const ConfigError& e) {
    out.add(f, e.what());
  }
}

void checkShapingFields(const SessionSetup& s, Problems& out) {
  const int n = s.nranks();
  LinkShaping port, latency, rank, link;
  port.portBytesPerSecond = s.portMBps * 1e6;
  latency.addedLatencySeconds = s.latencyUs * 1e-6;
  if (s.portMBps < 0) out.add(SetupField::PortRate, "must be 0 (not shaped) or a positive rate");
  checkShapingField(port, n, SetupField::PortRate, out);
  checkShapingField(latency, n, SetupField::Latency, out);
  if (s.slowRank >= 0) {
    rank.rankPortBytesPerSecond[s.slowRank] = s.slowRankMBps * 1e6;
    checkShapingField(rank, n, SetupField::SlowRank, out);
  }
  if (s.slowLinkFrom >= 0 || s.slowLinkTo >= 0) {
    link.linkBytesPerSecond[{s.slowLinkFrom, s.slowLinkTo}] = s.slowLinkMBps * 1e6;
    checkShapingField(link, n, SetupField::SlowLink, out);
  }
  if (s.topology.empty()) return;
  try {
    expandTopology(parseTopology(s.topology), n, port, 0);
  } catch (const TopologyError& e) {
    out.add(SetupField::Topology, e.what());
  }
  if (s.slowLinkFrom >= 0) {
    out.add(SetupField::SlowLink, "a topology sets every link's rate: clear one or the other");
  }
}

// The smallest size that gives the collective at least one element on every rank.
void checkSmallestSize(const SessionSetup& s, uint64_t bytes, Problems& out) {
  if (bytes == 0 || apiCountForSize(s.collective, s.nranks(), bytes, s.dtype) != 0) return;
  const bool perRank =
      s.collective == Collective::ReduceScatter || s.collective == Collective::AllGather;
  const uint64_t least =
      perRank ? 16 * static_cast<uint64_t>(s.nranks()) : static_cast<uint64_t>(dtypeSize(s.dtype));
  out.add(SetupField::Size,
          "must be at least " + std::to_string(least) + " bytes: " +
              (perRank ? "16 bytes per rank of " + std::string(toString(s.collective))
                       : "one " + std::string(toString(s.dtype)) + " element"));
}

}  // namespace

std::vector<uint64_t> SweepRange::values(size_t limit) const {
  if (!on) return {single};
  std::vector<uint64_t> v;
  if (min == 0 || factor < 2) return v;
  for (uint64_t x = min; x <= max && v.size() < limit; x *= factor) {
    v.push_back(x);
    if (x > max / factor) break;  // the next one overflows or passes max
  }
  return v;
}

std::vector<std::string> SessionSetup::algorithms() const {
  if (algorithm != "all") return {algorithm};
  std::vector<std::string> out;
  if (backend != "nccl") {
    for (const std::string& a : algorithmNames()) {
      if (algorithmSupports(a, collective) && workerCountRefusal(a, nranks()).empty()) {
        out.push_back(a);
      }
    }
  }
  // NCCL's algorithms run on device backends, Open MPI's on workers of backend mpi.
  const BackendInfo* b = findBackend(backend);
  const bool device = b != nullptr && b->memory == MemoryKind::Device;
  const bool host = b != nullptr && b->memory == MemoryKind::Host;
  for (const LibraryAlgorithm& a : libraryAlgorithms()) {
    // Gloo's run on any host-memory workers (cpu, mpi's).
    const bool runsHere = a.library == "mpi"               ? backend == "mpi"
                          : a.memory == MemoryKind::Device ? device
                                                           : host;
    if (runsHere && a.supports(collective)) out.emplace_back(a.name);
  }
  return out;
}

std::vector<int> SessionSetup::localDevices() const {
  if (!devices.empty() || backend != "nccl") return devices;
  std::vector<int> d;
  for (int k = 0; k < localWorkers; ++k) d.push_back(k);
  return d;
}

LinkShaping SessionSetup::shaping() const {
  LinkShaping s;
  s.portBytesPerSecond = portMBps * 1e6;
  // As bench reads --link-latency (a whole number of ns over 1e9): the same double.
  s.addedLatencySeconds = latencyUs / 1e6;
  if (slowRank >= 0) s.rankPortBytesPerSecond[slowRank] = slowRankMBps * 1e6;
  if (slowLinkFrom >= 0 && slowLinkTo >= 0) {
    s.linkBytesPerSecond[{slowLinkFrom, slowLinkTo}] = slowLinkMBps * 1e6;
  }
  if (topology.empty()) return s;
  // A topology that does not fit is checkSetup's to report; until it fits, the rest holds.
  LinkShaping ports = s;
  ports.addedLatencySeconds = 0;
  try {
    return expandTopology(parseTopology(topology), nranks(), ports, s.addedLatencySeconds);
  } catch (const TopologyError&) {
    return s;
  }
}

namespace {

// The backend, the local workers' devices, and where each algorithm's ranks would run: what
// bench refuses before it starts a worker (NCCL: one rank per GPU). Whether a device is
// usable is looked at when Run is pressed, not at every edit.
void checkBackend(const SessionSetup& s, Problems& out) {
  if (auto why = backendUnavailable(s.backend)) {
    out.add(SetupField::Backend, *why);
    return;
  }
  const bool device = findBackend(s.backend)->memory == MemoryKind::Device;
  if (!s.devices.empty() && !device) {
    out.add(SetupField::Devices, "backend " + s.backend + " uses no device");
    return;
  }
  for (int d : s.devices) {
    if (d < 0 || d > kMaxDeviceIndex) {
      out.add(SetupField::Devices,
              std::to_string(d) + " must be in 0.." + std::to_string(kMaxDeviceIndex));
      return;
    }
  }
  if (s.devices.size() > 1 && s.devices.size() != static_cast<size_t>(s.localWorkers)) {
    out.add(SetupField::Devices, std::to_string(s.devices.size()) + " devices for " +
                                     std::to_string(s.localWorkers) +
                                     " local workers: give one for all or one per worker");
    return;
  }
  const std::vector<int> devices = s.localDevices();
  std::vector<RankPlace> places;
  for (int k = 0; k < s.localWorkers; ++k)
    places.push_back({"localhost", s.backend, localDevice(devices, k)});
  for (const std::string& algo : s.algorithms()) {
    const bool library = findLibraryAlgorithm(algo) != nullptr;
    if (s.backend == "nccl" && !library) {
      out.add(SetupField::Algorithm, algo + ": the nccl backend runs NCCL's own collectives (" +
                                         libraryAlgorithmList("nccl") + ")");
      return;
    }
    if (!library) continue;
    try {
      checkPlaces(algo, places);
    } catch (const ConfigError& e) {
      out.add(device ? SetupField::Devices : SetupField::Backend, e.what());
      return;
    }
  }
}

}  // namespace

std::vector<SetupProblem> checkSetup(const SessionSetup& s, std::vector<std::string> hosts) {
  Problems out;
  const int n = s.nranks();
  if (s.localWorkers < 0 || s.localWorkers > kMaxRanks) {
    out.add(SetupField::LocalWorkers, "must be in 0.." + std::to_string(kMaxRanks));
  }
  if (n < 1 || n > kMaxRanks) {
    out.add(n < 1 ? SetupField::LocalWorkers : SetupField::RemoteWorkers,
            "local and remote workers make " + std::to_string(n) + " ranks; must be 1.." +
                std::to_string(kMaxRanks));
    return out.take();
  }
  if (hosts.size() != static_cast<size_t>(n)) hosts.assign(static_cast<size_t>(n), "localhost");
  checkRange(s.size, SetupField::Size, "size", out);
  checkRange(s.slice, SetupField::Slice, "slice", out);
  checkRange(s.inflight, SetupField::Inflight, "number of slices in flight", out);
  checkShapingFields(s, out);
  checkBackend(s, out);
  const std::vector<std::string> algos = s.algorithms();
  if (algos.empty()) {
    out.add(SetupField::Algorithm,
            "no algorithm implements " + std::string(toString(s.collective)));
  }
  const auto sizes = s.size.values(kMaxSweepValues);
  const auto slices = s.slice.values(kMaxSweepValues);
  const auto inflights = s.inflight.values(kMaxSweepValues);
  if (sizes.empty() || slices.empty() || inflights.empty() || algos.empty()) return out.take();
  checkSmallestSize(s, sizes.front(), out);
  SweepSpec spec = sweepSpecOf(s);
  auto check = [&](const std::string& algo, uint64_t size, uint64_t slice, uint64_t k) {
    const SweepPoint p{size, algo, slice, inflightOf(k)};
    RunRequest q = sweepRequest(spec, p, n);
    if (q.count == 0) q.count = 1;  // reported above, by size
    checkRequest(q, hosts, " (" + algo + " at " + formatSize(size) + ")", out);
  };
  for (const std::string& algo : algos) {
    for (uint64_t slice : slices) {
      check(algo, sizes.front(), slice, inflights.front());
      if (sizes.size() > 1) check(algo, sizes.back(), slice, inflights.front());
    }
  }
  for (uint64_t k : inflights) check(algos.front(), sizes.front(), slices.front(), k);
  return out.take();
}

SweepSpec sweepSpecOf(const SessionSetup& s) {
  // bench's own mapping, from the configuration bench would have for these settings.
  SweepSpec spec = arl::sweepSpecOf(benchConfigOf(s), s.size.values(kMaxSweepValues));
  spec.keepTelemetry = true;
  return spec;
}

BenchConfig benchConfigOf(const SessionSetup& s) {
  BenchConfig c;
  const auto sizes = s.size.values(kMaxSweepValues);
  c.minBytes = sizes.empty() ? 0 : sizes.front();
  c.maxBytes = sizes.empty() ? 0 : sizes.back();
  c.stepFactor = s.size.on ? s.size.factor : 0;
  c.iters = s.iterations;
  c.warmup = s.warmup;
  c.op = s.op;
  c.dtype = s.dtype;
  c.collective = s.collective;
  c.algorithms = s.algorithms();
  c.scheduleXml = s.scheduleXml;
  c.workers = s.localWorkers;
  c.expect = s.remoteWorkers;
  c.ranksPerHost = s.ranksPerHost;
  c.radix = s.radix;
  c.window = s.window;
  c.sliceSizes = s.slice.values(kMaxSweepValues);
  c.inflights.clear();
  for (uint64_t k : s.inflight.values(kMaxSweepValues)) c.inflights.push_back(inflightOf(k));
  c.ringOrder = s.ringOrder;
  c.backend = s.backend;
  c.devices = s.localDevices();
  c.listen = s.listen;
  c.root = s.root;
  c.shaping = s.shaping();
  if (!s.topology.empty()) {
    try {
      c.topology = topologyName(parseTopology(s.topology));
    } catch (const TopologyError&) {
      c.topology.clear();
    }
  }
  return c;
}

namespace {

// Non-negative integers of at most `digits` digits, separated by commas or spaces; a token
// that is not one is named, as `what` ("a rank number").
std::vector<int> parseIndices(const std::string& text, size_t digits, const std::string& what) {
  std::vector<int> out;
  size_t i = 0;
  while (i < text.size()) {
    const auto sep = [](char c) { return c == ',' || std::isspace(static_cast<unsigned char>(c)); };
    while (i < text.size() && sep(text[i])) ++i;
    size_t j = i;
    while (j < text.size() && !sep(text[j])) ++j;
    if (j == i) break;
    const std::string tok = text.substr(i, j - i);
    if (tok.size() > digits || !std::all_of(tok.begin(), tok.end(), ::isdigit)) {
      throw ConfigError("'" + tok + "' is not " + what);
    }
    out.push_back(std::stoi(tok));
    i = j;
  }
  return out;
}

}  // namespace

std::vector<int> parseRingOrder(const std::string& text) {
  return parseIndices(text, 3, "a rank number");
}

std::vector<int> parseDevices(const std::string& text) {
  return parseIndices(text, 4, "a device index");
}

std::string formatRingOrder(const std::vector<int>& order) {
  std::string s;
  for (int r : order) s += (s.empty() ? "" : " ") + std::to_string(r);
  return s;
}

}  // namespace arl::ui
