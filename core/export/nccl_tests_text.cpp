// nccl-tests' printed table and NCCL Inspector's JSON lines (export/nccl_tests.h), and the
// session every importer makes of what it read. The table's layout is nccl-tests 2.19.6's
// (src/util.cu): a "#"-comment header, one line per size with the out-of-place figures and
// then the in-place ones (time algbw busbw #wrong, and i_min i_max i_p99 i_cv% after each
// with -I 1), an optional timestamp, and a footer whose "# Avg bus bandwidth" line ends it.
// Lines that are neither (NCCL's own log lines, "host:pid:tid NCCL INFO ...") are skipped.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "base/limits.h"
#include "export/json.h"
#include "export/json_in.h"
#include "export/nccl_tests_import.h"
#include "model/metrics.h"

namespace arl {

namespace {

std::vector<std::string> words(std::string_view line) {
  std::vector<std::string> out;
  std::istringstream in{std::string(line)};
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

[[noreturn]] void lineError(const std::string& file, size_t line, const std::string& what) {
  throw ImportError(file + ": line " + std::to_string(line) + ": " + what);
}

bool allDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A figure of the table: a number as getFloatStr prints it ("12.34", "1.2e+03"), or N/A.
double figure(const std::string& w, const std::string& file, size_t line, const char* column) {
  if (w == "N/A") return -1;
  double v = 0;
  const auto r = std::from_chars(w.data(), w.data() + w.size(), v);
  if (r.ec != std::errc() || r.ptr != w.data() + w.size() || !std::isfinite(v) || v < 0) {
    lineError(file, line, std::string(column) + ": '" + w.substr(0, 40) + "' is not a number");
  }
  return v;
}

uint64_t integer(const std::string& w, const std::string& file, size_t line, const char* column) {
  uint64_t v = 0;
  const auto r = std::from_chars(w.data(), w.data() + w.size(), v);
  if (r.ec != std::errc() || r.ptr != w.data() + w.size()) {
    lineError(file, line, std::string(column) + ": '" + w.substr(0, 40) + "' is not an integer");
  }
  return v;
}

// A small count ("12"), or nothing for text that is not one.
std::optional<int64_t> smallInt(std::string_view s) {
  int64_t v = 0;
  if (s.empty() || s.size() > 12) return std::nullopt;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

// "#  Rank  0 Group  0 Pid  12345 on  host-a device  0 [0000:1b:00] NVIDIA H100 80GB HBM3"
// (older versions print the bus id as [0x1b]; the group is absent before 2.12).
std::optional<ImportedDevice> deviceLine(std::string_view line) {
  const std::vector<std::string> w = words(line);
  if (w.size() < 4 || w[0] != "#" || w[1] != "Rank") return std::nullopt;
  ImportedDevice d;
  for (size_t i = 1; i + 1 < w.size(); ++i) {
    const std::string& k = w[i];
    const std::string& v = w[i + 1];
    if (k == "Rank") d.rank = static_cast<int>(smallInt(v).value_or(-1));
    if (k == "Pid") d.pid = smallInt(v).value_or(0);
    if (k == "on") d.host = v;
    if (k == "device")
      d.device = static_cast<int>(std::min<int64_t>(smallInt(v).value_or(-1), 1 << 20));
  }
  const size_t close = line.find(']');
  if (close != std::string_view::npos) {
    const std::string_view rest = line.substr(close + 1);
    const size_t b = rest.find_first_not_of(' ');
    if (b != std::string_view::npos) d.info = std::string(rest.substr(b));
    while (!d.info.empty() && (d.info.back() == '\r' || d.info.back() == ' ')) d.info.pop_back();
  }
  if (d.host.empty() || d.rank < 0 || d.rank >= kMaxRanks) return std::nullopt;
  return d;
}

// The value after `key` in a header line ("warmup iters: 5").
std::optional<int> headerInt(std::string_view line, std::string_view key) {
  const size_t at = line.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  const std::vector<std::string> w = words(line.substr(at + key.size()));
  if (w.empty() || w[0].size() > 6) return std::nullopt;
  if (auto v = smallInt(w[0])) return static_cast<int>(*v);
  return std::nullopt;
}

struct TableState {
  bool perIter = false;  // the header has i_min ... columns
  bool ended = false;    // "# Avg bus bandwidth" was read
  size_t lastLine = 0;
};

// One result line: size count type redop root, then per placement time algbw busbw #wrong
// (and i_min i_max i_p99 i_cv% with -I 1), then perhaps a date and a time.
ImportedRow resultLine(const std::vector<std::string>& w, const TableState& t,
                       const std::string& file, size_t line) {
  const size_t per = t.perIter ? 8 : 4;
  const size_t n = 5 + 2 * per;
  if (w.size() != n && w.size() != n + 2) {
    lineError(file, line,
              "expected " + std::to_string(n) + " columns (size count type redop root" +
                  (t.perIter ? ", 8 per placement with -I 1" : ", 4 per placement") + "), found " +
                  std::to_string(w.size()) + " (truncated?)");
  }
  ImportedRow r;
  r.line = line;
  r.sizeBytes = integer(w[0], file, line, "size");
  r.count = integer(w[1], file, line, "count");
  r.type = w[2];
  r.redop = w[3];
  const bool neg = w[4].starts_with('-');
  r.root = static_cast<int>(integer(neg ? w[4].substr(1) : w[4], file, line, "root"));
  if (neg) r.root = -r.root;
  r.timeUs = figure(w[5], file, line, "time");
  r.algbwGBps = figure(w[6], file, line, "algbw");
  r.busbwGBps = figure(w[7], file, line, "busbw");
  r.wrong = figure(w[8], file, line, "#wrong");
  if (r.timeUs < 0 || r.algbwGBps < 0 || r.busbwGBps < 0) {
    lineError(file, line, "the out-of-place time and bandwidths must be numbers");
  }
  // The in-place figures are checked as numbers and not kept: the row is out of place.
  for (size_t i = 5 + per; i < 5 + per + 3; ++i) (void)figure(w[i], file, line, "in-place");
  return r;
}

void headerLine(std::string_view line, ImportedSession& s, TableState& t) {
  if (auto d = deviceLine(line)) s.devices.push_back(std::move(*d));
  if (line.find("i_min") != std::string_view::npos) t.perIter = true;
  // "... warmup iters: 5 iters: 20 agg iters: 1 ...": iters is the one after warm-up.
  if (const size_t wu = line.find("warmup iters:"); wu != std::string_view::npos) {
    s.warmup = headerInt(line.substr(wu), "warmup iters:").value_or(0);
    s.iters = headerInt(line.substr(wu + 13), " iters:").value_or(0);
  }
  if (line.find("Avg bus bandwidth") != std::string_view::npos) t.ended = true;
  const std::vector<std::string> w = words(line);
  if (w.size() >= 4 && w[1] == "nccl-tests" && w[2] == "version") s.testsVersion = w[3];
  for (const std::string& x : w) {
    if (x.starts_with("nccl-library=")) s.ncclVersion = smallInt(x.substr(13)).value_or(0);
  }
  if (w.size() >= 5 && w[1] == "Collective" && w[3] == "starting:") s.args = {w[4]};
}

std::string ncclVersionText(int64_t code) {
  if (code <= 0) return {};
  // NCCL_VERSION(X,Y,Z): X*10000 + Y*100 + Z since 2.9; X*1000 + Y*100 + Z before.
  const int64_t major = code >= 10000 ? code / 10000 : code / 1000;
  const int64_t minor = code >= 10000 ? code / 100 % 100 : code / 100 % 10;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

}  // namespace

Collective collectiveOfProgram(const std::string& program, const std::string& where) {
  std::string p = program.substr(program.find_last_of('/') + 1);
  if (const size_t mpi = p.find("_perf"); mpi != std::string::npos) p = p.substr(0, mpi);
  p.erase(std::remove(p.begin(), p.end(), '_'), p.end());
  std::transform(p.begin(), p.end(), p.begin(), [](unsigned char c) { return std::tolower(c); });
  if (auto c = parseCollective(p)) return *c;
  throw ImportError(where + ": '" + program +
                    "' runs a collective the lab does not have (allreduce, reducescatter, "
                    "allgather, reduce, broadcast)");
}

Collective collectiveOfArgs(const std::vector<std::string>& args, const std::string& file) {
  if (args.empty()) {
    throw ImportError(file +
                      ": the file does not name its program (args), so its collective "
                      "is unknown");
  }
  const std::string prog = args[0].substr(args[0].find_last_of('/') + 1);
  if (prog == "allreduce-lab") {
    const auto it = std::find(args.begin(), args.end(), "--collective");
    return it != args.end() && it + 1 != args.end()
               ? collectiveOfProgram(*(it + 1), file + ": args")
               : Collective::AllReduce;
  }
  return collectiveOfProgram(args[0], file + ": args[0]");
}

BenchReport importNcclTestsText(std::string_view text, const std::string& name) {
  ImportedSession s;
  s.format = ImportFormat::NcclTestsText;
  s.file = name;
  TableState t;
  size_t line = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    const std::string_view l = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    ++line;
    if (l.find('\0') != std::string_view::npos) lineError(name, line, "holds a NUL byte: not text");
    const std::vector<std::string> w = words(l);
    if (w.empty()) continue;
    if (w[0].starts_with('#')) {
      headerLine(l, s, t);
      continue;
    }
    if (!allDigits(w[0])) continue;  // NCCL's log lines, a job's own output
    if (t.ended) lineError(name, line, "a result after the '# Avg bus bandwidth' footer");
    s.rows.push_back(resultLine(w, t, name, line));
    t.lastLine = line;
  }
  if (s.rows.empty()) {
    throw ImportError(name + ": no result line (is it nccl-tests' output?)");
  }
  if (!t.ended) {
    lineError(name, line,
              "the table ends without nccl-tests' '# Avg bus bandwidth' footer "
              "(truncated?)");
  }
  if (s.args.empty()) {
    throw ImportError(name +
                      ": no '# Collective test starting: PROGRAM' line, so the collective "
                      "is unknown");
  }
  s.collective = collectiveOfProgram(s.args[0], name);
  return sessionReport(s);
}

namespace {

struct InspectorColl {
  std::string coll;
  uint64_t sizeBytes = 0;
  int nranks = 0;
  std::map<uint64_t, std::map<int, double>> timesBySn;  // sn -> rank -> exec time
  double algbw = 0, busbw = 0;  // the means of Inspector's own, over the lines so far
  size_t lines = 0;
};

struct InspectorFile {
  std::map<std::tuple<std::string, std::string, uint64_t>, InspectorColl> colls;
  std::map<int, ImportedDevice> ranks;
  std::string version;
};

// One line of Inspector's output (inspector_json.cc: header, metadata, then coll_perf or
// p2p_perf); point-to-point lines are not collectives and are skipped.
void inspectorLine(std::string_view l, bool last, const std::string& name, size_t line,
                   InspectorFile& f) {
  constexpr JsonLimits kLineLimits{1 << 20, 8, 10'000};
  JsonIn v;
  try {
    v = parseJsonLimited(l, kLineLimits);
  } catch (const JsonInputError& e) {
    lineError(name, line, std::string(e.what()) + (last ? " (truncated?)" : ""));
  }
  const JsonFail fail = [&](const std::string& path, const std::string& what) {
    lineError(name, line, path + ": " + what);
  };
  const In o = In(v, "inspector", fail).object();
  const In h = o["header"].object();
  const In m = o["metadata"].object();
  if (f.version.empty()) f.version = m["inspector_output_format_version"].str();
  if (!o.has("coll_perf")) return;
  const In c = o["coll_perf"].object();
  const int rank = h["rank"].i32(0, kMaxRanks - 1);
  ImportedDevice& d = f.ranks[rank];
  d.rank = rank;
  d.host = m["hostname"].str();
  d.pid = m["pid"].i64();
  const uint64_t size = c["coll_msg_size_bytes"].u64();
  InspectorColl& ic = f.colls[{h["id"].str(), c["coll"].str(), size}];
  ic.coll = c["coll"].str();
  ic.sizeBytes = size;
  ic.nranks = h["n_ranks"].i32(1, kMaxRanks);
  const double us = c["coll_exec_time_us"].num();
  if (!std::isfinite(us) || us < 0) fail("inspector.coll_perf.coll_exec_time_us", "not a time");
  ic.timesBySn[c["coll_sn"].u64()][rank] = us;
  // A bandwidth below zero is no bandwidth, and a recording refuses one; a running mean of
  // finite figures stays finite, where their sum need not.
  const auto bandwidth = [&](const char* key) {
    const double gbs = c[key].num();
    if (!std::isfinite(gbs) || gbs < 0) {
      fail(std::string("inspector.coll_perf.") + key, "not a bandwidth (a number, 0 or more)");
    }
    return gbs;
  };
  const double algbw = bandwidth("coll_algobw_gbs");
  const double busbw = bandwidth("coll_busbw_gbs");
  ++ic.lines;
  ic.algbw += (algbw - ic.algbw) / static_cast<double>(ic.lines);
  ic.busbw += (busbw - ic.busbw) / static_cast<double>(ic.lines);
}

// A recording holds durations of 0 to 2^62 ns (about 146 years; llround would turn a larger
// one into nonsense): refuses what it would not, `where` naming the value's place in the file.
void checkDuration(double us, const std::function<std::string()>& where) {
  if (us >= 0 && us * 1000.0 < 0x1p62) return;
  std::ostringstream v;
  v << us;
  throw ImportError(where() + ", " + v.str() + " us, is not a duration a recording can hold");
}

// Per coll_sn the slowest rank's time; the bandwidths are the means of Inspector's own.
ImportedRow inspectorRow(const InspectorColl& ic) {
  ImportedRow r;
  r.sizeBytes = ic.sizeBytes;
  r.count = ic.sizeBytes;
  r.type = "uint8";
  r.algbwGBps = ic.algbw;
  r.busbwGBps = ic.busbw;
  double sum = 0;
  for (const auto& [sn, byRank] : ic.timesBySn) {
    double slowest = 0;
    for (const auto& [rank, us] : byRank) slowest = std::max(slowest, us);
    r.iterationUs.push_back(slowest);
    sum += slowest;
  }
  r.timeUs = sum / static_cast<double>(r.iterationUs.size());
  r.where = "collective " + ic.coll;
  return r;
}

}  // namespace

BenchReport importInspectorJsonl(std::string_view text, const std::string& name) {
  InspectorFile f;
  size_t line = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    const std::string_view l = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    ++line;
    if (l.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    inspectorLine(l, eol == std::string_view::npos, name, line, f);
  }
  if (f.colls.empty()) throw ImportError(name + ": no collective (coll_perf) line");
  ImportedSession s;
  s.format = ImportFormat::InspectorJsonl;
  s.file = name;
  s.testsVersion = f.version;
  for (const auto& [rank, d] : f.ranks) s.devices.push_back(d);
  std::set<std::string> names;
  for (const auto& [key, ic] : f.colls) {
    names.insert(ic.coll);
    s.nranks = std::max(s.nranks, ic.nranks);
    s.rows.push_back(inspectorRow(ic));
  }
  if (names.size() > 1) {
    throw ImportError(name + ": holds several collectives (" + *names.begin() + ", " +
                      *std::next(names.begin()) + "); a session has one");
  }
  s.args = {*names.begin()};
  s.collective = collectiveOfProgram(*names.begin(), name);
  return sessionReport(s);
}

namespace {

std::string hostsText(const std::vector<ImportedDevice>& devices) {
  std::set<std::string> hosts;
  for (const ImportedDevice& d : devices) hosts.insert(d.host);
  if (hosts.empty()) return "unknown host";
  if (hosts.size() == 1) return *hosts.begin();
  return std::to_string(hosts.size()) + " hosts";
}

std::string sourceOf(const ImportedSession& s) {
  std::string src = std::string(toString(s.format)) + " " + s.file;
  if (!s.testsVersion.empty()) {
    src += s.format == ImportFormat::InspectorJsonl ? " · Inspector output " + s.testsVersion
                                                    : " · nccl-tests " + s.testsVersion;
  }
  if (const std::string v = ncclVersionText(s.ncclVersion); !v.empty()) src += " · NCCL " + v;
  std::set<std::string> hosts, gpus;
  for (const ImportedDevice& d : s.devices) {
    hosts.insert(d.host);
    if (!d.info.empty()) gpus.insert(d.info);
  }
  std::string h;
  for (const std::string& x : hosts) h += (h.empty() ? "" : ", ") + x;
  if (!h.empty()) src += " · hosts " + h;
  std::string g;
  for (const std::string& x : gpus) g += (g.empty() ? "" : ", ") + x;
  if (!g.empty()) src += " · " + g;
  return src + " · no chunk telemetry";
}

constexpr std::string_view kTestsTool = "nccl-tests", kInspectorTool = "NCCL Inspector";

std::string labelOf(const ImportedSession& s) {
  const std::string tool(s.format == ImportFormat::InspectorJsonl ? kInspectorTool : kTestsTool);
  std::string l = tool + " (" + hostsText(s.devices);
  if (!s.devices.empty() && !s.devices.front().info.empty()) l += ", " + s.devices.front().info;
  return l + ")";
}

DataType typeOf(const ImportedRow& r, const std::string& file) {
  if (auto t = parseDataType(r.type)) return *t;
  const std::string where = r.line ? "line " + std::to_string(r.line) : r.where;
  throw ImportError(
      file + ": " + where + ": type '" + r.type.substr(0, 40) +
      "' is not one the lab has (float, double, half, bfloat16, int32, int64, uint8)");
}

// A result's timed iterations: the file's count, else its number of per-iteration times. A
// file that gives neither cannot become a recording (which `import` writes): a run of the lab's
// times 1 to kMaxIterations iterations.
int timedIterations(const ImportedSession& s, const ImportedRow& r) {
  const size_t n = s.iters > 0 ? static_cast<size_t>(s.iters) : r.iterationUs.size();
  const std::string where =
      s.file + ": " + (r.line > 0 ? "line " + std::to_string(r.line) : r.where) + ": ";
  if (n == 0) {
    throw ImportError(where +
                      "says neither how many iterations were timed (nccl-tests' 'iters:', "
                      "config.iterations) nor the time of each");
  }
  if (n > kMaxIterations) {
    throw ImportError(where + std::to_string(n) + " timed iterations, more than the " +
                      std::to_string(kMaxIterations) + " a run holds");
  }
  return static_cast<int>(n);
}

BenchRow rowOf(const ImportedSession& s, const ImportedRow& r, const std::string& label, int nranks,
               size_t index) {
  BenchRow row;
  RunResult& res = row.result;
  RunRequest& q = res.request;
  q.algorithm = label;
  q.collective = s.collective;
  q.dtype = typeOf(r, s.file);
  q.op = parseRedOp(r.redop).value_or(RedOp::Sum);
  q.count = r.count;
  q.sliceBytes = 0;  // not the lab's pipeline: no slice to chart against
  // A recording holds roots 0..kMaxRanks-1 (-1, no root, reads as 0): refuse what it would.
  if (r.root >= kMaxRanks) {
    throw ImportError(s.file + ": result " + std::to_string(index + 1) + ": root " +
                      std::to_string(r.root) + " is beyond the lab's " + std::to_string(kMaxRanks) +
                      " ranks");
  }
  q.root = std::max(r.root, 0);
  q.inPlace = r.placement == "in_place";
  q.iterations = timedIterations(s, r);
  q.warmup = s.warmup;
  q.check = r.wrong >= 0 ? 1 : 0;
  q.telemetry = TelemetryLevel::Off;
  res.runId = index + 1;
  res.state = RunState::Done;
  res.nranks = nranks;
  res.timeUs = r.timeUs;
  for (size_t i = 0; i < r.iterationUs.size(); ++i) {
    checkDuration(r.iterationUs[i], [&] {
      return s.file + ": result " + std::to_string(index + 1) + ": the time of iteration " +
             std::to_string(i + 1);
    });
  }
  res.iterationUs = r.iterationUs;
  // A count of wrong elements: whole, and within 64 bits (a larger one would not convert).
  if (r.wrong > 0 && !(r.wrong < 0x1p63 && r.wrong == std::floor(r.wrong))) {
    std::ostringstream v;
    v << r.wrong;
    throw ImportError(s.file + ": result " + std::to_string(index + 1) + ": a #wrong of " +
                      v.str() + " is not a count of elements");
  }
  res.wrong = r.wrong > 0 ? static_cast<uint64_t>(r.wrong) : 0;
  if (r.perProcessUs.size() == static_cast<size_t>(nranks)) {
    for (size_t p = 0; p < r.perProcessUs.size(); ++p) {
      for (size_t i = 0; i < r.perProcessUs[p].size(); ++i) {
        const double us = r.perProcessUs[p][i];
        if (!std::isfinite(us)) continue;
        checkDuration(us, [&] {
          return s.file + ": result " + std::to_string(index + 1) + ": process " +
                 std::to_string(p) + "'s time of iteration " + std::to_string(i + 1);
        });
        res.perRank.push_back({static_cast<int>(p), static_cast<uint32_t>(i),
                               static_cast<int64_t>(std::llround(us * 1000.0)), 0, std::nullopt});
      }
    }
  }
  row.sizeBytes = r.sizeBytes;
  row.count = r.count;
  row.predictedUs = std::numeric_limits<double>::quiet_NaN();
  row.metrics = Metrics{r.sizeBytes,
                        r.timeUs,
                        0,
                        r.algbwGBps,
                        r.busbwGBps,
                        res.wrong,
                        iterationSpread(r.iterationUs)};
  return row;
}

}  // namespace

bool isImportedLabel(std::string_view algorithm) {
  for (std::string_view tool : {kTestsTool, kInspectorTool}) {
    if (algorithm.starts_with(tool) && algorithm.substr(tool.size()).starts_with(" (")) return true;
  }
  return false;
}

BenchReport sessionReport(const ImportedSession& s) {
  BenchReport rep;
  int nranks = s.nranks > 0 ? s.nranks : static_cast<int>(s.devices.size());
  if (nranks <= 0 && !s.rows.empty()) nranks = static_cast<int>(s.rows.front().perProcessUs.size());
  nranks = std::clamp(nranks, 1, kMaxRanks);
  const std::string label = labelOf(s);
  rep.source = sourceOf(s);
  rep.modelSource = "none: imported results carry no prediction";
  for (const ImportedDevice& d : s.devices) {
    WorkerInfo w;
    w.rank = d.rank;
    w.host = d.host;
    w.pid = d.pid;
    w.device = d.device;
    w.name = d.info;
    w.backend = s.format == ImportFormat::InspectorJsonl ? "nccl" : "nccl-tests";
    rep.workers.push_back(std::move(w));
  }
  BenchConfig& c = rep.config;
  c.algorithms = {label};
  c.collective = s.collective;
  c.workers = nranks;
  c.iters = s.iters;
  c.warmup = s.warmup;
  c.telemetry = TelemetryLevel::Off;
  c.sliceSizes.clear();  // no pipeline of the lab's
  c.inflights.clear();
  c.backend = rep.workers.empty() ? "nccl" : rep.workers.front().backend;
  c.minBytes = std::numeric_limits<uint64_t>::max();
  c.maxBytes = 0;
  for (size_t i = 0; i < s.rows.size(); ++i) {
    rep.rows.push_back(rowOf(s, s.rows[i], label, nranks, i));
    c.minBytes = std::min(c.minBytes, s.rows[i].sizeBytes);
    c.maxBytes = std::max(c.maxBytes, s.rows[i].sizeBytes);
  }
  if (!rep.rows.empty()) {
    c.dtype = rep.rows.front().result.request.dtype;
    c.op = rep.rows.front().result.request.op;
  }
  return rep;
}

}  // namespace arl
