// Shared by the GPU tests: skipping without a device, element data that exercises every rule
// of the reductions, and running the lab's binaries.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../run_binary.h"
#include "base/types.h"
#include "exec/numeric.h"
#include "gpu/cuda_device.h"

// Skips the calling test, with the reason, when this host has no usable CUDA device.
#define ARL_SKIP_WITHOUT_CUDA_DEVICE()                                          \
  do {                                                                          \
    if (auto arl_why_ = ::arl::gpu::cudaDeviceProblem(0)) {                     \
      GTEST_SKIP() << "needs a CUDA device; this host has none: " << *arl_why_; \
    }                                                                           \
  } while (0)

namespace arl::gputest {

// A value that tests a rule: signed zeros, infinities, NaN, subnormals, extremes.
inline double specialValue(std::mt19937_64& rng) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
  static const double kSpecial[] = {0.0,    -0.0, kInf,    -kInf,  kNan,    1e-40,
                                    -1e-40, 6e-8, 65504.0, 3.4e38, -3.4e38, 1.0};
  return kSpecial[rng() % (sizeof kSpecial / sizeof kSpecial[0])];
}

// `n` random elements of type t: for floating types one in eight is a special value, three in
// eight random bit patterns, the rest moderate values with fractions; integers are random
// bits, half of them small (so that products do not always wrap to 0).
inline std::vector<unsigned char> randomElements(DataType t, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> moderate(-300.0, 300.0);
  const size_t es = dtypeSize(t);
  std::vector<unsigned char> v(n * es);
  for (size_t i = 0; i < n; ++i) {
    unsigned char* e = v.data() + i * es;
    const uint64_t bits = rng();
    const unsigned kind = static_cast<unsigned>(rng() % 8);
    if (isFloating(t) && kind >= 1 && kind <= 3) {
      std::memcpy(e, &bits, es);  // any pattern: NaNs, infinities and subnormals included
    } else if (isFloating(t)) {
      fromDouble(t, kind == 0 ? specialValue(rng) : moderate(rng), e);
    } else {
      const uint64_t x = kind < 4 ? bits : bits % 9;
      std::memcpy(e, &x, es);
    }
  }
  return v;
}

using testutil::Result;
using testutil::runBinary;
using testutil::slurp;

// The lab's binaries: where the build put them, or where ARL_TEST_LAB_BINARY and
// ARL_TEST_WORKER_BINARY say (scripts/gpu-check sets them when the binaries were carried to
// another machine).
inline std::string labBinary() {
  const char* p = std::getenv("ARL_TEST_LAB_BINARY");
  return p != nullptr && *p != 0 ? p : ARL_LAB_BINARY;
}
inline std::string workerBinary() {
  const char* p = std::getenv("ARL_TEST_WORKER_BINARY");
  return p != nullptr && *p != 0 ? p : ARL_WORKER_BINARY;
}

// Sets environment variables for one test and puts the values they had back when it goes,
// unset ones unset: a test must not leave a variable the runner set (scripts/gpu-check sets
// ARL_NCCL_LIBRARY when NCCL is only in a Python wheel) changed for the tests after it.
class Env {
 public:
  Env() = default;
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;
  ~Env() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }

  // `value` nullopt: unset.
  void set(const char* name, const std::optional<std::string>& value) {
    if (saved_.count(name) == 0) {
      const char* old = std::getenv(name);
      saved_[name] = old != nullptr ? std::optional<std::string>(old) : std::nullopt;
    }
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

inline size_t lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n' ? 1 : 0;
  return n;
}

}  // namespace arl::gputest
