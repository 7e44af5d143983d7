// `allreduce-lab calibrate` and the model flags of `bench`, end to end: the real binary and
// real worker processes. Sizes and iterations are kept few; what is asserted is behaviour
// (files written, parameters positive, predictions made with the parameters named), never a
// speed.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "export/calibration.h"
#include "model/model.h"
#include "transport/shm_ring.h"

namespace arl {
namespace {

namespace fs = std::filesystem;

struct Result {
  int rc = -1;
  std::string out, err;
};

std::string slurp(const fs::path& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// calibrate's documented refusal (exit 1, naming the fit) of a fit that a noisy moment bent to
// a negative alpha or beta. With --quick's three sizes on 2 workers, under parallel ctest, it
// happened (alpha -10 us with another calibrate running beside it): the tests that need a
// saved calibration report it as a skip, not a pass.
bool fitRefused(const Result& r) {
  return r.rc == 1 && r.err.find("fit: the measurements give alpha") != std::string::npos;
}
constexpr const char* kNoisy = "this machine was too noisy for --quick's fit just now: ";

class CalibrateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("calibrate_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `allreduce-lab args` with `env` (shell words) in its environment, killed after 120 s.
  Result lab(const std::string& env, const std::string& args) {
    const std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
    const std::string cmd = "env -u ARL_CALIBRATION -u XDG_CONFIG_HOME " + env +
                            " timeout -s KILL 120 '" + ARL_LAB_BINARY + "' " + args + " >'" + out +
                            "' 2>'" + err + "'";
    const int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  }

  static void expectUsable(const Calibration& c) {
    for (double p : {c.params.alpha, c.params.beta, c.params.gamma}) {
      EXPECT_TRUE(std::isfinite(p) && p > 0) << p;
    }
    EXPECT_EQ(c.workers, 2);
    EXPECT_FALSE(c.machine.empty());
    EXPECT_EQ(c.date.size(), 20u) << c.date;  // 2026-12-01T19:56:19Z
    ASSERT_EQ(c.runs.size(), 3u);             // --quick: 4K, 256K, 4M
    for (const CalibrationRun& r : c.runs) {
      EXPECT_EQ(r.algorithm, "ring");
      EXPECT_GT(r.measuredUs, 0);
      EXPECT_GT(r.fittedUs, 0);
    }
    EXPECT_GT(c.reduce.medianPassSeconds, 0);
  }

  // A calibration over shared memory, as calibrate writes one: copy 12 GB/s, reduce 8 GB/s.
  static Calibration sharedMemoryCalibration(int workers, int cores, double workScale) {
    Calibration cal;
    cal.params.alpha = 10e-6;
    cal.params.beta = 1.0 / 3e9;
    cal.params.gamma = 1.0 / 8e9;
    cal.params.shmCopy = 1.0 / 12e9;
    cal.params.cores = cores;
    cal.params.shmWorkScale = workScale;
    cal.copy = CopyMeasurement{8 << 20, 1 << 20, 3, (8 << 20) / 12e9};
    cal.machine = "testhost";
    cal.date = "2026-12-01T12:00:00Z";
    cal.dataPlane = "shm";
    cal.workers = workers;
    cal.sliceBytes = 1 << 20;
    cal.inflight = 4;
    cal.iterations = 3;
    cal.reduce = {8 << 20, 1 << 20, 3, 1e-3, "avx2"};
    return cal;
  }

  fs::path dir_;
};

TEST_F(CalibrateCli, QuickRunOnTwoWorkersSavesPositiveParameters) {
  const std::string path = (dir_ / "cal.json").string();
  // Three rounds: the medians keep one noisy run (2 workers on a loaded machine) from bending
  // the fit of --quick's three sizes (fitRefused() above), mostly.
  const Result r =
      lab("ARL_CALIBRATION='" + path + "'", "calibrate --workers 2 --quick --rounds 3 --llc 8M");
  if (fitRefused(r)) GTEST_SKIP() << kNoisy << r.err;
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("# saved to " + path), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rms relative residual"), std::string::npos) << r.out;
  const Calibration c = readCalibration(path);
  expectUsable(c);
  EXPECT_EQ(c.dataPlane, "shm");
  EXPECT_EQ(c.iterations, 5);
  // Over shared memory: the copy rate and the cores of the shared-memory plane's model.
  ASSERT_TRUE(c.params.shmCopy.has_value());
  EXPECT_TRUE(std::isfinite(*c.params.shmCopy) && *c.params.shmCopy > 0);
  EXPECT_GE(c.params.cores, 1);
  EXPECT_TRUE(std::isfinite(c.params.shmWorkScale) && c.params.shmWorkScale > 0);
  // Its own per-message cost, fitted through it to the runs below 1 MiB (4K and 256K here),
  // inside the fit's bounds, and printed with the parameters.
  ASSERT_TRUE(c.params.shmAlpha.has_value());
  EXPECT_GT(*c.params.shmAlpha, 1e-8);
  EXPECT_LT(*c.params.shmAlpha, 1e-2);
  EXPECT_NE(r.out.find(" us per message, send "), std::string::npos) << r.out;
  ASSERT_TRUE(c.copy.has_value());
  EXPECT_GT(c.copy->medianPassSeconds, 0);
  EXPECT_NE(r.out.find("# copy: "), std::string::npos) << r.out;
  // The sends into a ring of the size a worker gives 1M slices, four in flight.
  ASSERT_TRUE(c.send.has_value());
  EXPECT_EQ(c.send->ringBytes, shmRingBytes(size_t{1} << 20, 4));
  ASSERT_TRUE(c.params.shmSend && c.params.shmSendFresh);
  EXPECT_DOUBLE_EQ(*c.params.shmSend, c.send->fromBuffer.medianPassSeconds /
                                          static_cast<double>(c.send->fromBuffer.bufferBytes));
  EXPECT_DOUBLE_EQ(*c.params.shmSendFresh, c.send->fresh.medianPassSeconds /
                                               static_cast<double>(c.send->fresh.bufferBytes));
  EXPECT_NE(r.out.find("# send: into a 6.0 MiB ring"), std::string::npos) << r.out;
  // --llc 8M: the cache-resident rates, each thread's buffers together in half of it.
  EXPECT_NE(r.out.find("# in the cache (last level 8M, from --llc): copy "), std::string::npos)
      << r.out;
  EXPECT_EQ(c.params.llcBytes, uint64_t{8} << 20);
  EXPECT_EQ(c.llcSource, "--llc");
  ASSERT_TRUE(c.params.shmCopyCached && c.params.gammaCached);
  EXPECT_TRUE(std::isfinite(*c.params.shmCopyCached) && *c.params.shmCopyCached > 0);
  EXPECT_TRUE(std::isfinite(*c.params.gammaCached) && *c.params.gammaCached > 0);
  ASSERT_TRUE(c.copyCached && c.reduceCached);
  EXPECT_LE(c.copyCached->bufferBytes * 2 * static_cast<uint64_t>(c.params.cores), 4u << 20);
  EXPECT_LE(c.reduceCached->bufferBytes * 3 * static_cast<uint64_t>(c.params.cores), 4u << 20);
  EXPECT_GT(c.copyCached->bufferBytes, 0u);
}

// --rounds: the rates and the sweep measured that many times, the medians kept, and each
// round's speed against them reported.
TEST_F(CalibrateCli, RoundsKeepTheMedianAndSayHowTheMachineMoved) {
  const std::string path = (dir_ / "rounds.json").string();
  const Result r = lab("", "calibrate --workers 2 --quick --rounds 3 --out '" + path + "'");
  if (fitRefused(r)) GTEST_SKIP() << kNoisy << r.err;
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("# rounds: 3; each round's runs against the median"), std::string::npos)
      << r.out;
  const Calibration c = readCalibration(path);
  expectUsable(c);
  EXPECT_EQ(c.rounds, 3);
  ASSERT_EQ(c.roundSlowness.size(), 3u);
  // --quick has one run of 1 MiB or more (4M), which the ratios are of: the round whose run
  // was the median one reads exactly 1.
  EXPECT_NE(std::find(c.roundSlowness.begin(), c.roundSlowness.end(), 1.0), c.roundSlowness.end())
      << r.out;
}

TEST_F(CalibrateCli, OutWritesElsewhereAndZmqIsRecorded) {
  const std::string env = (dir_ / "env.json").string(), out = (dir_ / "sub" / "out.json").string();
  const Result r = lab("ARL_CALIBRATION='" + env + "'",
                       "calibrate --workers 2 --quick --data-plane zmq --out '" + out + "'");
  if (fitRefused(r)) GTEST_SKIP() << kNoisy << r.err;
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_FALSE(fs::exists(env));
  const Calibration c = readCalibration(out);
  expectUsable(c);
  EXPECT_EQ(c.dataPlane, "zmq");
  EXPECT_EQ(c.rounds, 1);  // --quick alone: one round, and no line about the rounds
  EXPECT_TRUE(c.roundSlowness.empty());
  EXPECT_EQ(r.out.find("# rounds:"), std::string::npos) << r.out;
  EXPECT_FALSE(c.params.shmCopy.has_value());
  EXPECT_FALSE(c.copy.has_value());
  EXPECT_FALSE(c.params.shmSend.has_value());
  EXPECT_FALSE(c.send.has_value());
}

TEST_F(CalibrateCli, BenchOverSharedMemoryPredictsWithTheSharedMemoryPlane) {
  const Calibration cal = sharedMemoryCalibration(2, 1, 1.0);
  const std::string path = (dir_ / "cal.json").string(), json = (dir_ / "bench.json").string();
  writeCalibration(path, cal);
  const Result r = lab("ARL_CALIBRATION='" + path + "'",
                       "bench --workers 2 --algo ring,parameter-server -b 1M -e 4M -f 4 -n 2 -w 1 "
                       "-c 0 --json '" +
                           json + "'");
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("shared memory: copy 12.00 GB/s, 1 cores, work x1.00"), std::string::npos)
      << r.out;
  const nlohmann::json v = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(v.at("model").at("cores").get<int>(), 1);
  ASSERT_EQ(v.at("results").size(), 4u);
  for (const nlohmann::json& row : v.at("results")) {
    EXPECT_EQ(row.at("predicted_method").get<std::string>(), "shared memory");
    CostQuery q;
    const std::string algo = row.at("algorithm").get<std::string>();
    q.algorithm = algo;
    q.nranks = 2;
    q.bytes = row.at("size_bytes").get<uint64_t>();
    q.sliceBytes = row.at("slice_bytes").get<uint64_t>();
    q.sharedMemory = true;
    EXPECT_NEAR(row.at("predicted_us").get<double>(), predict(q, cal.params).seconds * 1e6,
                1e-6 * row.at("predicted_us").get<double>())
        << algo;
  }
}

TEST_F(CalibrateCli, RefusesBadArgumentsBeforeAnyRun) {
  const Result one = lab("", "calibrate --sizes 4K --out /dev/null");
  EXPECT_EQ(one.rc, 2);
  EXPECT_NE(one.err.find("--sizes 4K: needs at least two different sizes"), std::string::npos)
      << one.err;
  const Result algo = lab("", "calibrate --algo nope --out /dev/null");
  EXPECT_EQ(algo.rc, 2);
  EXPECT_NE(algo.err.find("--algo nope"), std::string::npos) << algo.err;
  const Result llc = lab("", "calibrate --llc 1K --out /dev/null");
  EXPECT_EQ(llc.rc, 2);
  EXPECT_NE(llc.err.find("--llc 1K: must be 64K or more"), std::string::npos) << llc.err;
  const Result rounds = lab("", "calibrate --rounds 0 --out /dev/null");
  EXPECT_EQ(rounds.rc, 2);
  EXPECT_NE(rounds.err.find("--rounds 0"), std::string::npos) << rounds.err;
}

TEST_F(CalibrateCli, BenchPredictsWithTheCalibrationAndFitsItsOwnRows) {
  Calibration cal;
  cal.params.alpha = 12.5e-6;
  cal.params.beta = 1.0 / 2e9;
  cal.params.gamma = 1.0 / 5e9;
  cal.machine = "testhost";
  cal.date = "2026-12-01T12:00:00Z";
  // Over ZeroMQ, whose cost per byte (about 1 GB/s here) stands well clear of the noise of
  // three iterations. Over shared memory the time beyond the held reduction is within that
  // noise once the rings' pages are mapped at setup, and the fitted beta comes out of either
  // sign (the fit then reports "none", rightly).
  cal.dataPlane = "zmq";
  cal.workers = 2;
  cal.sliceBytes = 1 << 20;
  cal.inflight = 4;
  cal.iterations = 3;
  cal.reduce = {8 << 20, 1 << 20, 3, 1e-3, "avx2"};
  const std::string path = (dir_ / "cal.json").string(), json = (dir_ / "bench.json").string();
  writeCalibration(path, cal);
  const Result r = lab("ARL_CALIBRATION='" + path + "'",
                       "bench --workers 2 --algo ring,tree -b 4K -e 16M -f 64 -n 3 -w 1 -c 0 "
                       "--data-plane zmq --fit --json '" +
                           json + "'");
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("calibration " + path + " (testhost, 2026-12-01T12:00:00Z"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("alpha 12.5 us per message, port 2.00 GB/s each way"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("# Fitted from this run  : alpha"), std::string::npos) << r.out;

  const nlohmann::json v = nlohmann::json::parse(slurp(json));
  const nlohmann::json& m = v.at("model");
  EXPECT_NE(m.at("source").get<std::string>().find(path), std::string::npos);
  EXPECT_EQ(m.at("alpha_s").get<double>(), cal.params.alpha);
  const nlohmann::json& f = m.at("fitted");
  EXPECT_GT(f.at("alpha_s").get<double>(), 0);
  EXPECT_GT(f.at("beta_s_per_byte").get<double>(), 0);
  EXPECT_EQ(f.at("gamma_s_per_byte").get<double>(), cal.params.gamma);  // held
  EXPECT_EQ(f.at("points").get<int64_t>(), 6);                          // 2 algorithms x 3 sizes
  ASSERT_EQ(v.at("results").size(), 6u);
  for (const nlohmann::json& row : v.at("results")) {
    EXPECT_GT(row.at("fitted_us").get<double>(), 0);
    EXPECT_EQ(row.at("predicted_method").get<std::string>(), "closed form");
    // The prediction is the model's with the calibration's parameters.
    CostQuery q;
    const std::string algo = row.at("algorithm").get<std::string>();
    q.algorithm = algo;
    q.nranks = 2;
    q.bytes = row.at("size_bytes").get<uint64_t>();
    q.sliceBytes = row.at("slice_bytes").get<uint64_t>();
    EXPECT_NEAR(row.at("predicted_us").get<double>(), predict(q, cal.params).seconds * 1e6,
                1e-6 * row.at("predicted_us").get<double>())
        << algo;
  }
}

TEST_F(CalibrateCli, BenchModelDefaultIgnoresTheCalibrationAndRefusesAMalformedOne) {
  const std::string path = (dir_ / "cal.json").string();
  std::ofstream(path) << "{\"format\": \"allreduce-lab-calibration\", \"version\": 1}";
  const Result bad = lab("ARL_CALIBRATION='" + path + "'", "bench --workers 2 -b 4K -e 4K");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("calibration file " + path + ": calibration.params: missing"),
            std::string::npos)
      << bad.err;
  const Result d =
      lab("ARL_CALIBRATION='" + path + "'", "bench --workers 2 -b 4K -e 4K -n 2 --model default");
  ASSERT_EQ(d.rc, 0) << d.err;
  EXPECT_NE(d.out.find("default parameters (--model default)"), std::string::npos) << d.out;
}

TEST_F(CalibrateCli, PlanShowsWhatBenchPredictsOverSharedMemory) {
  const Calibration cal = sharedMemoryCalibration(4, 2, 1.2);
  const std::string path = (dir_ / "cal.json").string();
  writeCalibration(path, cal);
  const Result r =
      lab("", "plan --algo parameter-server --ranks 4 --count 1M --model '" + path + "' --json");
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  const nlohmann::json v = nlohmann::json::parse(r.out);
  CostQuery q;
  q.algorithm = "parameter-server";
  q.nranks = 4;
  q.bytes = 4 << 20;
  q.sliceBytes = v.at("slice_bytes").get<uint64_t>();
  q.sharedMemory = true;
  EXPECT_NEAR(v.at("shared_memory_us").get<double>(), predictSharedMemory(q, cal.params) * 1e6,
              1e-6 * v.at("shared_memory_us").get<double>());
  const Result text =
      lab("", "plan --algo parameter-server --ranks 4 --count 1M --model '" + path + "'");
  EXPECT_NE(text.out.find("shared-memory plane"), std::string::npos) << text.out;
  EXPECT_EQ(v.at("shared_memory_rates").get<std::string>(), "streaming");
  EXPECT_GT(v.at("shared_memory_working_set_bytes").get<uint64_t>(), uint64_t{4} * (4 << 20));
  // With the cache-resident rates of a 32 MiB cache: a run whose working set fits in it is
  // costed with them, a larger one with the streaming rates; plan says which.
  Calibration cached = cal;
  cached.params.shmCopyCached = 1.0 / 36e9;
  cached.params.gammaCached = 1.0 / 24e9;
  cached.params.llcBytes = 32 << 20;
  cached.copyCached = CopyMeasurement{4 << 20, 1 << 20, 12, (4 << 20) / 36e9};
  cached.reduceCached = ReduceMeasurement{2 << 20, 1 << 20, 24, (2 << 20) / 24e9, "avx2"};
  cached.llcSource = "--llc";
  writeCalibration(path, cached);
  const Result small =
      lab("", "plan --algo ring --ranks 4 --count 64K --slice 1M --model '" + path + "' --json");
  ASSERT_EQ(small.rc, 0) << small.err << small.out;
  const nlohmann::json sv = nlohmann::json::parse(small.out);
  EXPECT_EQ(sv.at("shared_memory_rates").get<std::string>(), "cache");
  EXPECT_LE(sv.at("shared_memory_working_set_bytes").get<uint64_t>(), uint64_t{32} << 20);
  const Result large =
      lab("", "plan --algo ring --ranks 4 --count 16M --slice 1M --model '" + path + "'");
  ASSERT_EQ(large.rc, 0) << large.err << large.out;
  EXPECT_NE(large.out.find("streaming rates: a working set of"), std::string::npos) << large.out;
  EXPECT_NE(large.out.find("beyond the last-level cache of 32M"), std::string::npos) << large.out;
  // Without a copy rate (the defaults) there is no such prediction.
  const Result def = lab("", "plan --algo ring --ranks 4 --count 1M --model default --json");
  ASSERT_EQ(def.rc, 0) << def.err;
  EXPECT_TRUE(nlohmann::json::parse(def.out).at("shared_memory_us").is_null());
}

}  // namespace
}  // namespace arl
