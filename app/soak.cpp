#include "soak.h"

#include <algorithm>
#include <cinttypes>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

#include "cli_util.h"
#include "schedule/generators.h"

namespace arl::app {
namespace {

template <class T>
const T& pick(std::mt19937_64& rng, const std::vector<T>& v) {
  return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
}

int uniformInt(std::mt19937_64& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

bool chance(std::mt19937_64& rng, double p) { return std::bernoulli_distribution(p)(rng); }

// Light shaping: a port rate between 0.5 and 4 GB/s and an added latency up to 20 us keep a
// run of a few MiB within tens of milliseconds.
LinkShaping drawShaping(std::mt19937_64& rng, int nranks) {
  LinkShaping s;
  if (chance(rng, 0.5)) s.portBytesPerSecond = 5e8 * uniformInt(rng, 1, 8);
  if (chance(rng, 0.5)) s.addedLatencySeconds = 1e-6 * uniformInt(rng, 1, 20);
  if (chance(rng, 0.2)) s.rankPortBytesPerSecond[uniformInt(rng, 0, nranks - 1)] = 5e8;
  if (chance(rng, 0.2)) {
    const int a = uniformInt(rng, 0, nranks - 1);
    s.linkBytesPerSecond[{a, (a + 1) % nranks}] = 5e8;
  }
  return s;
}

}  // namespace

SoakDrawer::SoakDrawer(uint64_t seed, int maxRanks, SoakPlanes planes)
    : rng_(seed), maxRanks_(maxRanks), planes_(planes) {}

DataPlaneKind SoakDrawer::drawPlane() {
  // Taking them in turn keeps the shares equal whatever the number of runs.
  switch (planes_) {
    case SoakPlanes::Shm: return DataPlaneKind::Shm;
    case SoakPlanes::Zmq: return DataPlaneKind::Zmq;
    case SoakPlanes::Tcp: return DataPlaneKind::Tcp;
    case SoakPlanes::Both: return drawn_ % 2 == 0 ? DataPlaneKind::Shm : DataPlaneKind::Zmq;
    case SoakPlanes::All: break;
  }
  constexpr DataPlaneKind kAll[] = {DataPlaneKind::Shm, DataPlaneKind::Zmq, DataPlaneKind::Tcp};
  return kAll[drawn_ % 3];
}

// Edge counts (none, one element, fewer elements than ranks, one more) a quarter of the time;
// otherwise log-uniform up to 256 Ki elements, odd half of the time.
uint64_t SoakDrawer::drawCount(int nranks, DataType t) {
  if (chance(rng_, 0.25)) {
    const std::vector<uint64_t> edges = {0,
                                         1,
                                         2,
                                         3,
                                         static_cast<uint64_t>(nranks - 1),
                                         static_cast<uint64_t>(nranks),
                                         static_cast<uint64_t>(nranks + 1),
                                         static_cast<uint64_t>(2 * nranks - 1)};
    return pick(rng_, edges);
  }
  const int maxLog = dtypeSize(t) >= 8 ? 17 : 18;
  uint64_t c = uint64_t{1} << uniformInt(rng_, 2, maxLog);
  c += std::uniform_int_distribution<uint64_t>(0, c - 1)(rng_);
  if (chance(rng_, 0.5)) c |= 1;
  return c;
}

SoakDraw SoakDrawer::drawOnce() {
  SoakDraw d;
  d.nranks = uniformInt(rng_, 2, maxRanks_);
  RunRequest& r = d.req;
  std::vector<std::string> algos;
  for (const std::string& a : algorithmNames()) {
    if (rankCountRefusal(a, d.nranks).empty()) algos.push_back(a);
  }
  r.algorithm = pick(rng_, algos);
  std::vector<Collective> colls;
  for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather,
                       Collective::Reduce, Collective::Broadcast}) {
    if (algorithmSupports(r.algorithm, c)) colls.push_back(c);
  }
  r.collective = pick(rng_, colls);
  r.dtype = static_cast<DataType>(uniformInt(rng_, 0, 6));
  r.op = static_cast<RedOp>(uniformInt(rng_, 0, 4));
  r.count = drawCount(d.nranks, r.dtype);
  const uint64_t elem = dtypeSize(r.dtype);
  // At most about 256 slices per rank's buffer: tiny slices on a big buffer make a slow run.
  const uint64_t minSlice = std::max<uint64_t>(1, r.count * std::max(1, d.nranks) / 256);
  uint64_t sliceElems = uint64_t{1} << uniformInt(rng_, 0, 18);
  if (chance(rng_, 0.3)) sliceElems = sliceElems * 3 + 1;  // not a power of two
  r.sliceBytes = std::max(sliceElems, minSlice) * elem;
  r.root = uniformInt(rng_, 0, d.nranks - 1);
  r.inflight = uniformInt(rng_, 1, 8);
  r.inPlace = chance(rng_, 0.3);
  r.warmup = uniformInt(rng_, 0, 1);
  r.iterations = uniformInt(rng_, 1, 3);
  r.check = static_cast<uint32_t>(uniformInt(rng_, 1, 2));
  r.telemetry = static_cast<TelemetryLevel>(uniformInt(rng_, 0, 2));
  r.stallTimeout = std::chrono::milliseconds(15000);
  r.dataPlane = drawPlane();
  if (chance(rng_, 0.3)) r.shaping = drawShaping(rng_, d.nranks);
  // A ring that takes its slices by windows (GenParams::window): its channels hold a window.
  if (r.algorithm == "ring" && chance(rng_, 0.3)) r.window = uniformInt(rng_, 2, 16);
  return d;
}

SoakDraw SoakDrawer::next() {
  for (;;) {
    SoakDraw d = drawOnce();
    try {
      resolveRunRequest(d.req, std::vector<std::string>(static_cast<size_t>(d.nranks), "here"));
      ++drawn_;
      return d;
    } catch (const ConfigError&) {
      ++refused_;
    }
  }
}

SoakDraw SoakDrawer::endless() {
  SoakDraw d;
  d.nranks = uniformInt(rng_, 2, maxRanks_);
  d.req.algorithm = "ring";
  d.req.count = 1 << 16;
  d.req.sliceBytes = 64 << 10;
  d.req.warmup = 0;
  d.req.iterations = 100000;
  d.req.check = 0;
  // Paced to about 20 ms an iteration: a run that spins as fast as the machine allows
  // starves the coordinator's thread on a small machine, and the fault would be that.
  d.req.telemetry = TelemetryLevel::Steps;
  d.req.shaping.portBytesPerSecond = 20e6;
  d.req.dataPlane = drawPlane();
  ++drawn_;
  return d;
}

std::optional<ProcessSample> sampleProcess(int64_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  std::ifstream status(dir + "/status");
  if (!status) return std::nullopt;
  ProcessSample s;
  std::string line;
  bool zombie = false;
  while (std::getline(status, line)) {
    std::istringstream in(line);
    std::string key;
    in >> key;
    if (key == "VmRSS:") in >> s.rssKb;
    if (key == "RssAnon:") in >> s.anonKb;
    if (key == "RssShmem:") in >> s.shmemKb;
    if (key == "Threads:") in >> s.threads;
    if (key == "State:") {
      std::string st;
      in >> st;
      zombie = st == "Z";
    }
  }
  if (zombie) return std::nullopt;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++s.fds;
  }
  return s;
}

void SoakSeries::add(const std::string& process, uint64_t run, const ProcessSample& s) {
  byProcess_[process].push_back({run, s});
}

namespace {

struct Range {
  uint64_t rssLo = UINT64_MAX, rssHi = 0;
  // The median RSS of the first and of the second half of the samples: a leak raises it, a
  // reading taken while a large run's buffers were still held does not.
  uint64_t rssMidFirst = 0, rssMidSecond = 0;
  int thrLo = INT32_MAX, thrHi = 0, fdLo = INT32_MAX, fdHi = 0;
  size_t n = 0;
  uint64_t rssSpread() const { return n ? rssHi - rssLo : 0; }
  uint64_t rssGrowth() const { return rssMidSecond > rssMidFirst ? rssMidSecond - rssMidFirst : 0; }
  int thrSpread() const { return n ? thrHi - thrLo : 0; }
  int fdSpread() const { return n ? fdHi - fdLo : 0; }
};

template <class S>
Range rangeAfter(const std::vector<S>& samples, uint64_t warmup) {
  Range r;
  std::vector<uint64_t> rss;
  for (const S& x : samples) {
    if (x.run < warmup) continue;
    ++r.n;
    rss.push_back(x.s.rssKb);
    r.rssLo = std::min(r.rssLo, x.s.rssKb);
    r.rssHi = std::max(r.rssHi, x.s.rssKb);
    r.thrLo = std::min(r.thrLo, x.s.threads);
    r.thrHi = std::max(r.thrHi, x.s.threads);
    r.fdLo = std::min(r.fdLo, x.s.fds);
    r.fdHi = std::max(r.fdHi, x.s.fds);
  }
  // The lower median: of two readings, the smaller (a reading that caught a run's buffers is
  // the larger). Fewer than four readings tell no growth.
  if (rss.size() < 4) return r;
  const auto median = [](std::vector<uint64_t> v) {
    const auto mid = v.begin() + static_cast<std::ptrdiff_t>((v.size() - 1) / 2);
    std::nth_element(v.begin(), mid, v.end());
    return *mid;
  };
  const auto half = rss.begin() + static_cast<std::ptrdiff_t>(rss.size() / 2);
  r.rssMidFirst = median({rss.begin(), half});
  r.rssMidSecond = median({half, rss.end()});
  return r;
}

bool isCoordinator(const std::string& process) { return process.rfind("coordinator", 0) == 0; }

}  // namespace

std::vector<std::string> SoakSeries::violations(const Limits& lim) const {
  std::vector<std::string> out;
  for (const auto& [process, samples] : byProcess_) {
    const Range r = rangeAfter(samples, lim.warmup);
    if (r.n < 2) continue;
    const uint64_t rssLimit = isCoordinator(process) ? lim.coordinatorRssKb : lim.workerRssKb;
    if (r.rssGrowth() > rssLimit) {
      out.push_back(
          printfString("%s: RSS kept growing: its median reading rose from %" PRIu64
                       " KiB in the first half of the samples after the warm-up to %" PRIu64
                       " KiB in the second, by %" PRIu64 " KiB, over the limit of %" PRIu64 " KiB",
                       process.c_str(), r.rssMidFirst, r.rssMidSecond, r.rssGrowth(), rssLimit));
    }
    if (r.thrSpread() > lim.threads) {
      out.push_back(printfString("%s: threads went from %d to %d, over the limit of +-%d",
                                 process.c_str(), r.thrLo, r.thrHi, lim.threads));
    }
    if (r.fdSpread() > lim.fds) {
      out.push_back(printfString("%s: open fds went from %d to %d, over the limit of +-%d",
                                 process.c_str(), r.fdLo, r.fdHi, lim.fds));
    }
  }
  return out;
}

std::string SoakSeries::table(uint64_t warmup) const {
  std::string t = printfString("%-26s %7s %21s %11s %11s %11s\n", "process", "samples",
                               "RSS KiB min..max", "growth KiB", "threads", "fds");
  for (const auto& [process, samples] : byProcess_) {
    const Range r = rangeAfter(samples, warmup);
    if (r.n == 0) continue;
    t += printfString("%-26s %7zu %10" PRIu64 "..%-9" PRIu64 " %11" PRIu64 " %5d..%-4d %5d..%-4d\n",
                      process.c_str(), r.n, r.rssLo, r.rssHi, r.rssGrowth(), r.thrLo, r.thrHi,
                      r.fdLo, r.fdHi);
  }
  return t;
}

SoakSeries::Spreads SoakSeries::spreads(uint64_t warmup) const {
  Spreads s;
  for (const auto& [process, samples] : byProcess_) {
    const Range r = rangeAfter(samples, warmup);
    if (r.n < 2) continue;
    if (isCoordinator(process)) {
      s.coordinatorRssKb = r.rssGrowth();
      s.coordinatorThreads = r.thrSpread();
      s.coordinatorFds = r.fdSpread();
      continue;
    }
    ++s.workerSeries;
    s.workerRssKb = std::max(s.workerRssKb, r.rssGrowth());
    s.workerThreads = std::max(s.workerThreads, r.thrSpread());
    s.workerFds = std::max(s.workerFds, r.fdSpread());
  }
  return s;
}

std::string SoakSeries::csv() const {
  std::string out = "process,runs,rss_kib,anon_kib,shmem_kib,threads,fds\n";
  for (const auto& [process, samples] : byProcess_) {
    for (const Sample& x : samples) {
      out += printfString("%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%d,%d\n",
                          process.c_str(), x.run, x.s.rssKb, x.s.anonKb, x.s.shmemKb, x.s.threads,
                          x.s.fds);
    }
  }
  return out;
}

std::vector<std::string> shmSegmentsOf(const std::vector<int64_t>& pids) {
  std::vector<std::string> found;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/dev/shm", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    for (int64_t pid : pids) {
      if (name.rfind("arl-dp-" + std::to_string(pid) + "-", 0) == 0) found.push_back(name);
    }
  }
  return found;
}

std::vector<std::string> entriesUnder(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    out.push_back(std::filesystem::relative(it->path(), dir, ec).string());
  }
  return out;
}

}  // namespace arl::app
