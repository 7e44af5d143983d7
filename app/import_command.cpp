// allreduce-lab import: turns nccl-tests' output (its -J JSON or its printed table) or NCCL
// Inspector's JSON lines into a recording (export/nccl_tests.h) that the window, replay and
// export open beside the lab's own runs. Prints what it read as nccl-tests' table.
#include <CLI/CLI.hpp>

#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_util.h"
#include "commands.h"
#include "export/nccl_tests.h"
#include "model/metrics.h"

namespace arl::app {
namespace {

constexpr const char* kProg = "allreduce-lab import";

constexpr const char* kAbout =
    "Reads FILE, nccl-tests' output (its -J JSON or the table it prints) or NCCL Inspector's "
    "JSON lines, and writes a recording of its results (no chunk telemetry: the file has "
    "none), labelled with the file, hosts, GPU and NCCL version it names. 'allreduce-lab gui "
    "OUT' charts it; the window also opens FILE directly. A malformed or truncated file is "
    "refused with its line and the reason (docs/import.md).\n"
    "Exit status: 0 when written, 1 when OUT could not be written, 2 on bad arguments or a "
    "file that cannot be imported.";

class ImportCommand final : public Command {
 public:
  ImportCommand(CLI::App& lab, const std::vector<std::string>& args)
      : opts_(lab.add_subcommand("import",
                                 "turn nccl-tests or NCCL Inspector output into a "
                                 "recording"),
              args) {
    app = lab.get_subcommand("import");
    app->footer(wrap(kAbout, 92) + "\n");
    app->add_option("FILE", file_, "nccl-tests' -J JSON or table, or Inspector's JSON lines")
        ->required();
    opts_.value("-o,--out", "OUT.arlrec", "the recording to write (default: FILE.arlrec)");
  }

  int run() override {
    BenchReport r;
    try {
      r = importFile(file_);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", kProg, e.what());
      return 2;
    }
    const std::string out = opts_.getOr("--out", file_ + ".arlrec").text;
    std::printf("# %s\n#%11s  %12s  %8s  %7s  %6s  %6s  %6s\n", r.source.c_str(), "size", "count",
                "type", "time", "algbw", "busbw", "#wrong");
    for (const BenchRow& row : r.rows) {
      const RunRequest& q = row.result.request;
      std::printf("%12" PRIu64 "  %12" PRIu64 "  %8s  %7s  %6.2f  %6.2f  %6s\n", row.sizeBytes,
                  row.count, std::string(toString(q.dtype)).c_str(),
                  formatTimeUs(row.metrics.timeUs).c_str(), row.metrics.algbwGBps,
                  row.metrics.busbwGBps,
                  q.check ? std::to_string(row.metrics.wrong).c_str() : "N/A");
    }
    try {
      writeTextFile(out, recordingJson(r));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", kProg, e.what());
      return 1;
    }
    std::printf("# wrote %s (%zu results)\n", out.c_str(), r.rows.size());
    return 0;
  }

 private:
  Options opts_;
  std::string file_;
};

}  // namespace

std::unique_ptr<Command> addImportCommand(CLI::App& lab, const std::vector<std::string>& args) {
  return std::make_unique<ImportCommand>(lab, args);
}

}  // namespace arl::app
