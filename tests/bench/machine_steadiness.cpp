// How steady this machine's speed is: the same fixed piece of work timed again and again.
// Benchmarks that compare separate runs can only resolve differences larger than the spread
// this prints (docs/telemetry.md, "The machine's speed"). Two pieces of work, each timed
// `--samples` times with `--pause-ms` between them, on one thread:
//   loop:   a fixed chain of 30 million dependent integer multiply-adds (the core's speed)
//   memcpy: 20 copies of a 16 MiB buffer (the memory's speed as one core sees it)
// Prints every sample and, per piece, the median, the extremes and max/min. A report, not a
// test: it asserts nothing.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double loopMs() {
  const auto t0 = Clock::now();
  volatile uint64_t x = 1;
  // A linear congruential step (Knuth's MMIX constants): each depends on the last.
  for (int i = 0; i < 30'000'000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  return msSince(t0);
}

double memcpyMs(std::vector<char>& a, std::vector<char>& b) {
  const auto t0 = Clock::now();
  for (int i = 0; i < 20; ++i) {
    std::memcpy(b.data(), a.data(), a.size());
    a[static_cast<size_t>(i)] = b[b.size() - 1 - static_cast<size_t>(i)];
  }
  return msSince(t0);
}

void report(const char* name, std::vector<double> v) {
  std::printf("%-7s ms:", name);
  for (double x : v) std::printf(" %.1f", x);
  std::sort(v.begin(), v.end());
  const double med = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  std::printf("\n%-7s median %.1f ms, min %.1f, max %.1f, max/min %.2f\n", name, med, v.front(),
              v.back(), v.back() / v.front());
}

int usage(const char* why) {
  std::fprintf(stderr,
               "machine_steadiness: %s\nusage: machine_steadiness [--samples N (2..1000, "
               "default 10)] [--pause-ms MS (0..10000, default 300)]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  long samples = 10;
  long pauseMs = 300;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if ((flag == "--samples" || flag == "--pause-ms") && i + 1 < argc) {
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0') return usage(("bad number for " + flag).c_str());
      if (flag == "--samples") {
        if (v < 2 || v > 1000) return usage("--samples must be in 2..1000");
        samples = v;
      } else {
        if (v < 0 || v > 10000) return usage("--pause-ms must be in 0..10000");
        pauseMs = v;
      }
    } else {
      return usage(("unknown argument '" + flag + "'").c_str());
    }
  }
  std::vector<char> a(size_t{16} << 20, 1);
  std::vector<char> b(a.size(), 2);
  std::vector<double> loop;
  std::vector<double> copy;
  for (long s = 0; s < samples; ++s) {
    loop.push_back(loopMs());
    copy.push_back(memcpyMs(a, b));
    std::this_thread::sleep_for(std::chrono::milliseconds(pauseMs));
  }
  report("loop", loop);
  report("memcpy", copy);
  return 0;
}
