// Bandwidth of the CPU backend's reduction kernels against memcpy on the same buffers, in the
// same run. Bytes count what the operation reads plus what it writes: memcpy moves 2x the
// buffer, an out-of-place reduction dst = a + b 3x, an in-place one dst += b 3x as well.
//
// The machines this runs on are small and shared, so by default every benchmark is repeated
// (interleaved in random order) and the final ratio is computed from the medians. Rates use
// CPU time (Google Benchmark's default), which time spent descheduled does not inflate; the
// ratio by wall-clock time is printed beside it.
//   reduce_bench                       # defaults: 5 repetitions, random interleaving
//   reduce_bench --benchmark_filter='64MiB' --benchmark_repetitions=9
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include "backend/cpu/cpu_backend.h"
#include "base/types.h"
#include "model/metrics.h"

namespace {

using arl::CpuBackend;
using arl::CpuBackendOptions;
using arl::CpuKernels;
using arl::DataType;
using arl::median;
using arl::RedOp;

constexpr size_t KiB = size_t{1} << 10;
constexpr size_t MiB = size_t{1} << 20;

// Three buffers per size, allocated (and touched) once and shared by every benchmark of that
// size, so memcpy and the kernels run on the same memory.
struct Buffers {
  unsigned char* a = nullptr;
  unsigned char* b = nullptr;
  unsigned char* dst = nullptr;
};

CpuBackend& allocator() {
  static CpuBackend backend;
  return backend;
}

Buffers& buffersFor(size_t bytes) {
  static std::map<size_t, Buffers> all;
  auto [it, fresh] = all.try_emplace(bytes);
  if (fresh) {
    Buffers& b = it->second;
    b.a = static_cast<unsigned char*>(allocator().allocate(bytes));
    b.b = static_cast<unsigned char*>(allocator().allocate(bytes));
    b.dst = static_cast<unsigned char*>(allocator().allocate(bytes));
    // 0x3c in every byte is a normal, modest value for every type (float 0.0115, half 1.06,
    // double 1.6e-18), so no operand is subnormal and repeated in-place sums stay finite.
    std::memset(b.a, 0x3c, bytes);
    std::memset(b.b, 0x3c, bytes);
    std::memset(b.dst, 0x3c, bytes);
  }
  return it->second;
}

void BM_Memcpy(benchmark::State& state, size_t bytes) {
  Buffers& buf = buffersFor(bytes);
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the loop idiom
    std::memcpy(buf.dst, buf.a, bytes);
    benchmark::DoNotOptimize(buf.dst);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(2 * bytes));
}

struct ReduceCase {
  DataType type = DataType::Float;
  RedOp op = RedOp::Sum;
  bool inPlace = false;
  CpuBackendOptions options;
};

void BM_Reduce(benchmark::State& state, size_t bytes, ReduceCase c) {
  if (!CpuBackend::kernelsSupported(c.options.kernels)) {
    state.SkipWithError("kernels not supported on this CPU");
    return;
  }
  CpuBackend backend(c.options);
  Buffers& buf = buffersFor(bytes);
  const size_t count = bytes / arl::dtypeSize(c.type);
  // In place accumulates into dst (dst += b), leaving the shared input `a` as it was.
  unsigned char* dst = buf.dst;
  const unsigned char* local = c.inPlace ? buf.dst : buf.a;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the loop idiom
    backend.reduceFromHost(dst, local, buf.b, count, c.type, c.op);
    benchmark::DoNotOptimize(dst);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(3 * bytes));
  state.SetLabel(c.options.kernels == CpuKernels::Auto
                     ? ""
                     : (c.options.kernels == CpuKernels::Avx2 ? "avx2" : "portable"));
}

std::string sizeName(size_t bytes) {
  return bytes >= MiB ? std::to_string(bytes / MiB) + "MiB" : std::to_string(bytes / KiB) + "KiB";
}

std::string typeName(DataType t) {
  switch (t) {
    case DataType::Float: return "Float";
    case DataType::Double: return "Double";
    case DataType::Half: return "Half";
    case DataType::BFloat16: return "BFloat16";
    case DataType::Int32: return "Int32";
    case DataType::Int64: return "Int64";
    case DataType::Uint8: return "Uint8";
  }
  return "?";
}

std::string opName(RedOp op) {
  switch (op) {
    case RedOp::Sum: return "Sum";
    case RedOp::Prod: return "Prod";
    case RedOp::Min: return "Min";
    case RedOp::Max: return "Max";
    case RedOp::Avg: return "Avg";
  }
  return "?";
}

void registerReduce(const std::string& suffix, size_t bytes, ReduceCase c) {
  const std::string name = "BM_" + opName(c.op) + typeName(c.type) + (c.inPlace ? "InPlace" : "") +
                           suffix + "/" + sizeName(bytes);
  benchmark::RegisterBenchmark(name.c_str(), BM_Reduce, bytes, c);
}

void registerAll() {
  for (size_t bytes : {256 * KiB, 4 * MiB, 64 * MiB}) {
    const std::string name = "BM_Memcpy/" + sizeName(bytes);
    benchmark::RegisterBenchmark(name.c_str(), BM_Memcpy, bytes);
    registerReduce("", bytes, {DataType::Float, RedOp::Sum, false, {}});
    registerReduce("", bytes, {DataType::Float, RedOp::Sum, true, {}});
  }
  // What non-temporal stores are worth on each side of the default threshold, and what the
  // AVX2 build is worth at 64 MiB.
  CpuBackendOptions noStream;
  noStream.streamThresholdBytes = SIZE_MAX;
  CpuBackendOptions stream;
  stream.streamThresholdBytes = 0;
  registerReduce("Stream", 4 * MiB, {DataType::Float, RedOp::Sum, false, stream});
  registerReduce("NoStream", 16 * MiB, {DataType::Float, RedOp::Sum, false, noStream});
  registerReduce("", 16 * MiB, {DataType::Float, RedOp::Sum, false, {}});
  registerReduce("NoStream", 64 * MiB, {DataType::Float, RedOp::Sum, false, noStream});
  CpuBackendOptions portable;
  portable.kernels = CpuKernels::Portable;
  registerReduce("Portable", 64 * MiB, {DataType::Float, RedOp::Sum, false, portable});
  // Other element types and operators.
  for (DataType t : {DataType::Double, DataType::Half, DataType::BFloat16, DataType::Int32,
                     DataType::Int64, DataType::Uint8}) {
    registerReduce("", 64 * MiB, {t, RedOp::Sum, false, {}});
  }
  registerReduce("", 64 * MiB, {DataType::Float, RedOp::Max, false, {}});
  registerReduce("", 64 * MiB, {DataType::Half, RedOp::Min, false, {}});
  registerReduce("", 64 * MiB, {DataType::Int32, RedOp::Prod, false, {}});
}

// Passes runs to the console (only the aggregates when there are repetitions) and keeps every
// repetition's bandwidth, by CPU time (Google Benchmark's default, robust to the process being
// descheduled on a busy machine) and by wall-clock time, for the ratios printed at the end.
class CapturingReporter : public benchmark::ConsoleReporter {
 public:
  explicit CapturingReporter(OutputOptions opts) : ConsoleReporter(opts) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    std::vector<Run> shown;
    for (const Run& run : runs) {
      if (run.run_type == Run::RT_Iteration && !run.error_occurred) {
        const auto it = run.counters.find("bytes_per_second");
        if (it != run.counters.end() && run.real_accumulated_time > 0) {
          Samples& s = samples_[run.run_name.function_name];
          s.cpu.push_back(it->second.value);
          // The counter is bytes per CPU second; rescale it to wall-clock seconds.
          s.wall.push_back(it->second.value * run.cpu_accumulated_time / run.real_accumulated_time);
        }
      }
      if (run.run_type == Run::RT_Aggregate || run.repetitions <= 1 || run.error_occurred) {
        shown.push_back(run);
      }
    }
    if (!shown.empty()) {
      ConsoleReporter::ReportRuns(shown);
    }
  }

  struct Samples {
    std::vector<double> cpu;
    std::vector<double> wall;
  };

  // Samples of a benchmark's repetitions; null when it did not run.
  const Samples* samples(const std::string& name) const {
    const auto it = samples_.find(name);
    return it == samples_.end() || it->second.cpu.empty() ? nullptr : &it->second;
  }

 private:
  std::map<std::string, Samples> samples_;
};

bool hasFlag(int argc, char** argv, const char* flag) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], flag, std::strlen(flag)) == 0) {
      return true;
    }
  }
  return false;
}

// The library applies --benchmark_color only to its own reporter; this one follows the same
// flag: true/false, or colour on a terminal by default.
benchmark::ConsoleReporter::OutputOptions consoleOptions(int argc, char** argv) {
  bool color = isatty(STDOUT_FILENO) != 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--benchmark_color=false" || arg == "--benchmark_color=no") color = false;
    if (arg == "--benchmark_color=true" || arg == "--benchmark_color=yes") color = true;
  }
  return color ? benchmark::ConsoleReporter::OO_ColorTabular
               : benchmark::ConsoleReporter::OO_Tabular;
}

void printRatio(const CapturingReporter& rep, const char* label, const std::string& reduce) {
  const std::string copy = "BM_Memcpy/64MiB";
  const CapturingReporter::Samples* m = rep.samples(copy);
  const CapturingReporter::Samples* r = rep.samples(reduce);
  if (m == nullptr || r == nullptr) {
    std::printf("%s at 64 MiB: not measured (%s or %s did not run)\n", label, copy.c_str(),
                reduce.c_str());
    return;
  }
  const double memcpyBw = median(m->cpu);
  const double reduceBw = median(r->cpu);
  std::printf(
      "%s at 64 MiB: %.2f  (%s %.2f GB/s vs %s %.2f GB/s by CPU time, medians of %zu and %zu "
      "repetitions; by wall-clock time %.2f)\n",
      label, reduceBw / memcpyBw, reduce.c_str(), reduceBw / 1e9, copy.c_str(), memcpyBw / 1e9,
      r->cpu.size(), m->cpu.size(), median(r->wall) / median(m->wall));
}

}  // namespace

int main(int argc, char** argv) {
  // Defaults for a noisy machine, unless the command line says otherwise.
  std::vector<std::string> extra;
  if (!hasFlag(argc, argv, "--benchmark_repetitions")) {
    extra.emplace_back("--benchmark_repetitions=5");
  }
  if (!hasFlag(argc, argv, "--benchmark_enable_random_interleaving")) {
    extra.emplace_back("--benchmark_enable_random_interleaving=true");
  }
  if (!hasFlag(argc, argv, "--benchmark_min_time")) {
    extra.emplace_back("--benchmark_min_time=0.3");
  }
  std::vector<char*> args(argv, argv + argc);
  for (std::string& e : extra) {
    args.push_back(e.data());
  }
  int nargs = static_cast<int>(args.size());
  args.push_back(nullptr);

  registerAll();
  benchmark::Initialize(&nargs, args.data());
  if (benchmark::ReportUnrecognizedArguments(nargs, args.data())) {
    return 1;
  }
  std::printf("cpu kernels: %s\n",
              CpuBackend().kernels() == CpuKernels::Avx2 ? "avx2" : "portable");
  CapturingReporter reporter(consoleOptions(argc, argv));
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  printRatio(reporter, "reduce/memcpy bandwidth ratio", "BM_SumFloat/64MiB");
  printRatio(reporter, "in-place reduce/memcpy bandwidth ratio", "BM_SumFloatInPlace/64MiB");
  return 0;
}
