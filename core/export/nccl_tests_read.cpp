// Reading nccl-tests' and NCCL Inspector's files into a session (export/nccl_tests.h). Every
// reader keeps to what the file says: its times and bandwidths are the file's, never
// recomputed; the rows hold no telemetry. Layouts (docs/import.md):
//   nccl-tests JSON   src/util.cu, JSON_FILE_VERSION 3 (2.19.6)
//   nccl-tests table  src/util.cu writeDeviceReport, writeResultHeader, writeBenchmarkLine*,
//                     writeResultFooter
//   Inspector JSONL   plugins/profiler/inspector/inspector_json.cc: one object per line,
//                     {"header", "metadata", "coll_perf" | "p2p_perf"}
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include "base/input_file.h"
#include "base/limits.h"
#include "export/json.h"
#include "export/json_in.h"
#include "export/nccl_tests.h"
#include "export/nccl_tests_import.h"
#include "model/metrics.h"

namespace arl {

namespace {

// A file nests 4 levels; a few values per rank and iteration.
constexpr JsonLimits kImportLimits{kMaxImportBytes, 16, 50'000'000};

std::vector<double> numbers(const In& a) {
  return readArray<double>(a, [](const In& x) {
    // nccl-tests writes NaN as "nan".
    if (x.raw().is_string() && x.str() == "nan") return std::numeric_limits<double>::quiet_NaN();
    return x.num();
  });
}

void readDevices(const In& cfg, ImportedSession& s) {
  if (!cfg.has("devices")) return;
  const In d = cfg["devices"];
  for (size_t i = 0, n = d.size(); i < n; ++i) {
    const In o = d[i].object();
    ImportedDevice dev;
    dev.rank = o["rank"].i32(0, kMaxRanks - 1);
    dev.pid = o["pid"].i64();
    dev.host = o["hostname"].str();
    dev.device = o["device"].i32();
    dev.info = o["device_info"].str();
    s.devices.push_back(std::move(dev));
  }
}

// One placement's figures; false when the file has none (null, or absent).
bool readPlacement(const In& r, const std::string& key, ImportedRow& row) {
  if (!r.has(key) || r[key].raw().is_null()) return false;
  const In p = r[key].object();
  const In time = p.has("time") ? p["time"] : p["cpu_time"];
  row.timeUs = time.num();
  row.algbwGBps = p["alg_bw"].num();
  row.busbwGBps = p["bus_bw"].num();
  for (double v : {row.timeUs, row.algbwGBps, row.busbwGBps}) {
    if (!std::isfinite(v) || v < 0)
      p.fail(p.path(), "time and bandwidths must be numbers, 0 or more");
  }
  row.wrong = p["nwrong"].raw().is_null() ? -1 : p["nwrong"].num();
  row.placement = key;
  const std::string per = key + "_per_iter";
  if (r.has(per)) {
    const In pi = r[per].object();
    row.iterationUs = numbers(pi["times_us"]);
    if (pi.has("per_process_max_times_us")) {
      row.perProcessUs = readArray<std::vector<double>>(pi["per_process_max_times_us"], numbers);
    }
  }
  return true;
}

ImportedRow readResult(const In& a) {
  const In r = a.object();
  ImportedRow row;
  row.line = 0;
  row.where = r.path();
  row.sizeBytes = r["size"].u64();
  row.count = r["count"].u64();
  row.type = r["type"].str();
  row.redop = r["redop"].str();
  // nccl-tests writes the root as "%6i" text.
  const std::string& root = r["root"].str();
  row.root = std::atoi(root.c_str());
  if (!readPlacement(r, "out_of_place", row) && !readPlacement(r, "in_place", row)) {
    r.fail(r.path(), "neither out_of_place nor in_place holds figures");
  }
  if (r.has("experiment_name")) row.experiment = r["experiment_name"].str();
  return row;
}

void readConfig(const In& top, ImportedSession& s) {
  if (top.has("nccl_version")) s.ncclVersion = top["nccl_version"].i64();
  if (!top.has("config")) return;
  const In cfg = top["config"].object();
  if (cfg.has("iterations")) s.iters = cfg["iterations"].i32(0, kMaxIterations);
  if (cfg.has("warmup_iters")) s.warmup = cfg["warmup_iters"].i32(0, kMaxIterations);
  readDevices(cfg, s);
}

}  // namespace

BenchReport importNcclTestsJson(std::string_view text, const std::string& name) {
  JsonIn root;
  try {
    root = parseJsonLimited(text, kImportLimits);
  } catch (const JsonInputError& e) {
    throw ImportError(name + ": " + e.what());
  }
  const JsonFail fail = [&name](const std::string& path, const std::string& what) {
    throw ImportError(name + ": " + path + ": " + what);
  };
  const In top = In(root, "nccl-tests", fail).object();
  const int64_t version = top["version"].i64();
  if (version < 1 || version > 3) {
    top.fail("nccl-tests.version", "version " + std::to_string(version) +
                                       " is not nccl-tests' JSON (this build reads 1 to 3)");
  }
  ImportedSession s;
  s.format = ImportFormat::NcclTestsJson;
  s.file = name;
  if (top.has("args")) {
    s.args = readArray<std::string>(top["args"], [](const In& x) { return x.str(); });
  }
  readConfig(top, s);
  s.rows = readArray<ImportedRow>(top["results"], readResult);
  if (s.rows.empty()) top.fail("nccl-tests.results", "holds no result");
  s.collective = collectiveOfArgs(s.args, name);
  return sessionReport(s);
}

std::string_view toString(ImportFormat f) {
  switch (f) {
    case ImportFormat::NcclTestsJson: return "nccl-tests JSON";
    case ImportFormat::NcclTestsText: return "nccl-tests table";
    case ImportFormat::InspectorJsonl: return "NCCL Inspector JSON lines";
  }
  return "?";
}

ImportFormat detectImportFormat(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || text[first] != '{') return ImportFormat::NcclTestsText;
  const std::string_view line = text.substr(first, text.find('\n', first) - first);
  const bool inspector = line.find("\"header\"") != std::string_view::npos &&
                         (line.find("\"coll_perf\"") != std::string_view::npos ||
                          line.find("\"p2p_perf\"") != std::string_view::npos);
  return inspector ? ImportFormat::InspectorJsonl : ImportFormat::NcclTestsJson;
}

BenchReport importText(std::string_view text, const std::string& name) {
  switch (detectImportFormat(text)) {
    case ImportFormat::InspectorJsonl: return importInspectorJsonl(text, name);
    case ImportFormat::NcclTestsJson: return importNcclTestsJson(text, name);
    case ImportFormat::NcclTestsText: break;
  }
  return importNcclTestsText(text, name);
}

BenchReport importFile(const std::string& path) {
  std::string text;
  try {
    text = readInputFile(path, kMaxImportBytes);
  } catch (const InputFileError& e) {
    throw ImportError(e.what());
  }
  return importText(text, std::filesystem::path(path).filename().string());
}

bool isRecordingFile(const std::string& path) {
  // A FIFO or a device is no recording; readRecording() refuses it without opening it here,
  // where a FIFO would block.
  if (!nonRegularKind(path).empty()) return true;
  std::ifstream f(path, std::ios::binary);
  char head[64] = {};
  f.read(head, sizeof head);
  const std::string_view h(head, static_cast<size_t>(f.gcount()));
  // Any JSON naming a "format" is meant as one of the lab's files: the recording reader says
  // what is wrong with it (nccl-tests' and Inspector's files name none).
  return h.find("\"format\"") != std::string_view::npos;
}

BenchReport readSessionFile(const std::string& path) {
  if (isRecordingFile(path)) return readRecording(path);
  return importFile(path);
}

}  // namespace arl
