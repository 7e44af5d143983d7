// gpu_reduce_bench: bandwidth of the float sum kernel against the device-to-device copy, both
// measured in this run on the same device and buffers (a benchmark: it reports, it asserts
// nothing). Counting bytes read and written, as the issue asks:
//   kernel  d = a + b   3 x bytes per pass (two reads, one write)
//   in place a = a + b  3 x bytes per pass
//   copy    d = a       2 x bytes per pass (cudaMemcpyAsync, device to device)
// Each figure is the median of 7 timings (CUDA events around k back-to-back passes, k chosen
// so one timing lasts about a millisecond or more); the three are timed in turn, so a clock
// change affects all alike. GB = 1e9 bytes. The last line is the verdict at the largest size:
// whether the kernel, out of place and in place, reaches kTarget of the copy's bandwidth
// (docs/gpu.md, "Kernel bandwidth").
//
//   gpu_reduce_bench [--device N] [--max-bytes SIZE] [--min-bytes SIZE]
// Exits 0 with "no CUDA device: skipped (...)" on a host without one.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/types.h"
#include "gpu/cuda_device.h"
#include "gpu/reduce_kernels.h"
#include "model/metrics.h"

namespace {

using arl::DataType;
using arl::median;
using arl::RedOp;

// The kernel's bandwidth, as a fraction of the device-to-device copy's, that the kernels are
// held to at large sizes (docs/gpu.md).
constexpr double kTarget = 0.85;

// The kernel's bandwidth against the copy's at one size.
struct Ratios {
  uint64_t bytes = 0;
  double kernel = 0;   // d = a + b
  double inPlace = 0;  // a = a + b
};

void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) {
    std::fprintf(stderr, "gpu_reduce_bench: %s: %s\n", what, cudaGetErrorString(rc));
    std::exit(1);
  }
}

struct Args {
  int device = 0;
  uint64_t minBytes = uint64_t{1} << 20;
  uint64_t maxBytes = uint64_t{1} << 30;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "gpu_reduce_bench: %s\nusage: gpu_reduce_bench [--device N] [--min-bytes SIZE] "
               "[--max-bytes SIZE]   (SIZE as 64M, 1G)\n",
               why.c_str());
  std::exit(2);
}

Args parseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") usage("help");
    if (i + 1 >= argc) usage(flag + ": a value is missing");
    const std::string v = argv[++i];
    if (flag == "--device") {
      a.device = std::atoi(v.c_str());
    } else if (flag == "--min-bytes" || flag == "--max-bytes") {
      const auto s = arl::parseSize(v);
      if (!s || *s < 1024) usage(flag + " " + v + ": not a size of at least 1K");
      (flag == "--min-bytes" ? a.minBytes : a.maxBytes) = *s;
    } else {
      usage("unknown option " + flag);
    }
  }
  if (a.minBytes > a.maxBytes) usage("--min-bytes is larger than --max-bytes");
  return a;
}

// Times `passes` back-to-back runs of `run` with events; appends seconds per pass to `into`.
template <typename F>
void timePasses(F&& run, int passes, cudaStream_t s, cudaEvent_t t0, cudaEvent_t t1,
                std::vector<double>& into) {
  check(cudaEventRecord(t0, s), "cudaEventRecord");
  for (int k = 0; k < passes; ++k) run();
  check(cudaEventRecord(t1, s), "cudaEventRecord");
  check(cudaEventSynchronize(t1), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, t0, t1), "cudaEventElapsedTime");
  into.push_back(static_cast<double>(ms) * 1e-3 / passes);
}

Ratios benchSize(uint64_t bytes, cudaStream_t s, cudaEvent_t t0, cudaEvent_t t1) {
  const size_t count = bytes / sizeof(float);
  void *a = nullptr, *b = nullptr, *d = nullptr;
  check(cudaMalloc(&a, bytes), "cudaMalloc");
  check(cudaMalloc(&b, bytes), "cudaMalloc");
  check(cudaMalloc(&d, bytes), "cudaMalloc");
  check(cudaMemsetAsync(a, 0, bytes, s), "cudaMemset");  // +0.0f
  check(cudaMemsetAsync(b, 0, bytes, s), "cudaMemset");
  const auto copy = [&] {
    check(cudaMemcpyAsync(d, a, bytes, cudaMemcpyDeviceToDevice, s), "copy");
  };
  const auto reduce = [&] {
    arl::gpu::launchReduce(d, a, b, count, DataType::Float, RedOp::Sum, s);
  };
  const auto inPlace = [&] {
    arl::gpu::launchReduce(a, a, b, count, DataType::Float, RedOp::Sum, s);
  };
  const int passes = static_cast<int>(std::clamp<uint64_t>((uint64_t{1} << 30) / bytes, 2, 200));
  for (int w = 0; w < 3; ++w) {
    copy();
    reduce();
    inPlace();
  }
  std::vector<double> tc, tr, ti;
  for (int rep = 0; rep < 7; ++rep) {
    timePasses(copy, passes, s, t0, t1, tc);
    timePasses(reduce, passes, s, t0, t1, tr);
    timePasses(inPlace, passes, s, t0, t1, ti);
  }
  const double copyBw = 2.0 * static_cast<double>(bytes) / median(tc) / 1e9;
  const double redBw = 3.0 * static_cast<double>(bytes) / median(tr) / 1e9;
  const double inBw = 3.0 * static_cast<double>(bytes) / median(ti) / 1e9;
  std::printf("%12s %10.1f %10.1f %10.1f %8.3f %8.3f\n", arl::formatSize(bytes).c_str(), copyBw,
              redBw, inBw, redBw / copyBw, inBw / copyBw);
  std::fflush(stdout);
  check(cudaFree(a), "cudaFree");
  check(cudaFree(b), "cudaFree");
  check(cudaFree(d), "cudaFree");
  return {bytes, redBw / copyBw, inBw / copyBw};
}

// "# verdict at 1 GiB: kernel 91.2% of copy, in place 92.0%: meets the 85% target".
void printVerdict(const Ratios& r) {
  const bool meets = r.kernel >= kTarget && r.inPlace >= kTarget;
  std::printf("# verdict at %s: kernel %.1f%% of copy, in place %.1f%%: %s the %.0f%% target\n",
              arl::formatSize(r.bytes).c_str(), 100 * r.kernel, 100 * r.inPlace,
              meets ? "meets" : "misses", 100 * kTarget);
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parseArgs(argc, argv);
  if (auto why = arl::gpu::cudaDeviceProblem(args.device)) {
    std::printf("no CUDA device: skipped (%s)\n", why->c_str());
    return 0;
  }
  check(cudaSetDevice(args.device), "cudaSetDevice");
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaEvent_t t0 = nullptr, t1 = nullptr;
  check(cudaEventCreate(&t0), "cudaEventCreate");
  check(cudaEventCreate(&t1), "cudaEventCreate");
  std::printf("# gpu_reduce_bench: float sum kernel vs device-to-device copy on device %d: %s\n",
              args.device, arl::gpu::describeDevice(args.device).c_str());
  std::printf(
      "# GB/s counting bytes read + written (kernel 3 x bytes, copy 2 x bytes); "
      "median of 7\n");
  std::printf("%12s %10s %10s %10s %8s %8s\n", "bytes", "copy", "kernel", "inplace", "k/copy",
              "ip/copy");
  Ratios last;
  for (uint64_t bytes = args.minBytes; bytes <= args.maxBytes; bytes *= 4) {
    last = benchSize(bytes, s, t0, t1);
  }
  printVerdict(last);
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  return 0;
}
