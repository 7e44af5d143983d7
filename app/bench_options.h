// allreduce-lab bench's command line: its options (nccl-tests' flags and the lab's own) on
// CLI11, and their check. Every run the sweep will make is checked before any worker starts,
// by the same resolveRunRequest that the coordinator applies (run_request.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli_util.h"
#include "export/bench_sweep.h"
#include "export/export.h"
#include "runtime/launcher.h"
#include "runtime/sweep.h"

namespace arl::app {

inline constexpr const char* kBenchProg = "allreduce-lab bench";

struct BenchArgs {
  BenchConfig cfg;
  std::vector<uint64_t> sizes;  // as asked (-b, -e, -f / -i)
  // The command line, "allreduce-lab bench ..." (nccl-tests' JSON "args").
  std::vector<std::string> commandLine;
  // Lab algorithms an engine of --backend's list has not (expandBackends), one line each.
  std::vector<std::string> notes;
  // --launch: the cluster launcher that starts the cfg.expect remote workers.
  std::optional<LaunchSpec> launch;
};

// Ranks of the run: local workers plus remote ones.
int nranksOf(const BenchConfig& c);

class BenchOptions {
 public:
  // Adds the "bench" subcommand and its options to `lab`; `args` as for Options.
  BenchOptions(CLI::App& lab, const std::vector<std::string>& args);

  CLI::App* app() const { return app_; }

  // The parsed options, checked and converted. Throws UsageError naming the flag.
  BenchArgs check() const;

 private:
  void declare();
  void declarePipeline();
  void declareLaunch();
  void checkWorkers(BenchConfig& c, std::optional<LaunchSpec>& launch) const;
  std::optional<LaunchSpec> checkLaunch(BenchConfig& c) const;
  void checkLaunchHosts(const Arg& launch, LaunchSpec& s) const;
  void checkOperation(BenchConfig& c) const;
  void checkTelemetry(BenchConfig& c) const;
  void checkPipeline(BenchConfig& c) const;
  void checkAlgorithms(BenchConfig& c) const;
  void checkSchedule(BenchConfig& c, const Arg& file) const;
  std::vector<std::string> checkEngines(BenchConfig& c) const;
  void checkDevices(BenchConfig& c) const;
  void checkDevicesUsable(const BenchConfig& c) const;
  std::vector<uint64_t> checkSizes(BenchConfig& c) const;
  void checkOutputs(BenchConfig& c) const;
  void checkShapedProgress(const BenchArgs& a) const;
  void checkRuns(const BenchArgs& a) const;

  CLI::App* app_;
  Options opts_;
  bool inPlace_ = false;
  bool insecure_ = false;
};

}  // namespace arl::app
