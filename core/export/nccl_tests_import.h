// What the importers of export/nccl_tests.h read from a file before it becomes a session:
// the file's own figures, in its own terms. Shared by the JSON, table and Inspector readers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/types.h"
#include "export/nccl_tests.h"

namespace arl {

struct ImportedDevice {
  int rank = 0;
  int64_t pid = 0;
  std::string host;
  int device = -1;
  std::string info;  // "NVIDIA H100 80GB HBM3"
};

struct ImportedRow {
  size_t line = 0;    // where it was read (0 in JSON: `where` holds the path)
  std::string where;  // "nccl-tests.results[3]"
  uint64_t sizeBytes = 0;
  uint64_t count = 0;
  std::string type = "float";
  std::string redop = "sum";
  int root = -1;
  double timeUs = 0, algbwGBps = 0, busbwGBps = 0;
  double wrong = -1;  // -1: not checked (N/A, null)
  std::string placement = "out_of_place";
  std::string experiment;
  std::vector<double> iterationUs;                // times_us: per iteration, the slowest
  std::vector<std::vector<double>> perProcessUs;  // [process][iteration]
};

struct ImportedSession {
  ImportFormat format = ImportFormat::NcclTestsJson;
  std::string file;
  std::string testsVersion;  // "2.19.6" when the file says
  int64_t ncclVersion = 0;   // 22304; 0 when unknown
  std::vector<std::string> args;
  Collective collective = Collective::AllReduce;
  int nranks = 0;  // 0: the devices' count
  int iters = 0, warmup = 0;
  std::vector<ImportedDevice> devices;
  std::vector<ImportedRow> rows;
};

// The collective of nccl-tests' program (args[0]: all_reduce_perf, ...; the lab's own
// "allreduce-lab bench --collective NAME"). Throws ImportError naming `file` for one the lab
// does not have.
Collective collectiveOfArgs(const std::vector<std::string>& args, const std::string& file);
Collective collectiveOfProgram(const std::string& program, const std::string& where);

// The session: its label, workers from the devices, one Done row per result.
BenchReport sessionReport(const ImportedSession& s);

}  // namespace arl
