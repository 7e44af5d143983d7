// `allreduce-lab plan` with the cost-model parameters of a calibration file: found through
// $ARL_CALIBRATION or $XDG_CONFIG_HOME, chosen with --model, refused when malformed.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "export/calibration.h"

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

class PlanModel : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("plan_model_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `allreduce-lab plan args` with `env` ("NAME=value ...", shell words) before it;
  // ARL_CALIBRATION, XDG_CONFIG_HOME and HOME are cleared unless `env` sets them.
  Result plan(const std::string& env, const std::string& args) {
    const std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
    const std::string cmd = "env -u ARL_CALIBRATION -u XDG_CONFIG_HOME -u HOME " + env + " '" +
                            ARL_LAB_BINARY + "' plan " + args + " >'" + out + "' 2>'" + err + "'";
    const int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  }

  static Calibration calibration() {
    Calibration c;
    c.params.alpha = 3.25e-6;
    c.params.beta = 1.0 / 4e9;
    c.params.gamma = 1.0 / 8e9;
    c.machine = "testhost";
    c.date = "2026-12-01T12:00:00Z";
    c.dataPlane = "shm";
    c.workers = 2;
    c.sliceBytes = 1 << 20;
    c.inflight = 4;
    c.iterations = 3;
    c.runs = {{"ring", 4096, 20, 19, 20}, {"ring", 1 << 20, 900, 880, 900}};
    c.reduce = {8 << 20, 1 << 20, 3, 1e-3, "avx2"};
    return c;
  }

  fs::path dir_;
};

TEST_F(PlanModel, PredictsWithTheCalibrationNamedByTheEnvironment) {
  const std::string path = (dir_ / "cal.json").string();
  writeCalibration(path, calibration());
  const Result r = plan("ARL_CALIBRATION='" + path + "'", "--ranks 4 --count 1M");
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("calibration " + path +
                       " (testhost, 2026-12-01T12:00:00Z, data plane "
                       "shm, 2 workers)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("alpha 3.2 us per message, port 4.00 GB/s each way, reduce 8.00 GB/s"),
            std::string::npos)
      << r.out;

  const Result j = plan("ARL_CALIBRATION='" + path + "'", "--ranks 4 --count 1M --json");
  ASSERT_EQ(j.rc, 0) << j.err;
  const nlohmann::json v = nlohmann::json::parse(j.out);
  EXPECT_EQ(v.at("model").at("alpha_s").get<double>(), 3.25e-6);
  EXPECT_NE(v.at("model").at("source").get<std::string>().find(path), std::string::npos);

  // --model default ignores it: other parameters, another prediction.
  const Result d =
      plan("ARL_CALIBRATION='" + path + "'", "--ranks 4 --count 1M --json --model default");
  ASSERT_EQ(d.rc, 0) << d.err;
  const nlohmann::json w = nlohmann::json::parse(d.out);
  EXPECT_NE(w.at("model").at("alpha_s").get<double>(), 3.25e-6);
  EXPECT_NE(w.at("predicted_us").get<double>(), v.at("predicted_us").get<double>());
  EXPECT_NE(w.at("model").at("source").get<std::string>().find("default"), std::string::npos);
}

TEST_F(PlanModel, FindsTheCalibrationUnderXdgConfigHomeAndTakesModelFile) {
  writeCalibration((dir_ / "allreduce-lab" / "calibration.json").string(), calibration());
  const Result r = plan("XDG_CONFIG_HOME='" + dir_.string() + "'", "--ranks 4");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("calibration " + dir_.string() + "/allreduce-lab/calibration.json"),
            std::string::npos)
      << r.out;
  // No calibration anywhere: the defaults, and where they were looked for.
  const Result none =
      plan("ARL_CALIBRATION='" + (dir_ / "absent.json").string() + "'", "--ranks 4");
  ASSERT_EQ(none.rc, 0) << none.err;
  EXPECT_NE(
      none.out.find("default parameters (no calibration at " + (dir_ / "absent.json").string()),
      std::string::npos)
      << none.out;
  // --model FILE wins over the environment.
  const std::string other = (dir_ / "other.json").string();
  Calibration c = calibration();
  c.machine = "otherhost";
  writeCalibration(other, c);
  const Result m =
      plan("XDG_CONFIG_HOME='" + dir_.string() + "'", "--ranks 4 --model '" + other + "'");
  ASSERT_EQ(m.rc, 0) << m.err;
  EXPECT_NE(m.out.find("(otherhost,"), std::string::npos) << m.out;
}

TEST_F(PlanModel, RefusesAMalformedCalibrationNamingFileAndField) {
  const std::string path = (dir_ / "bad.json").string();
  std::string text = calibrationJson(calibration());
  const auto at = text.find("\"beta_s_per_byte\":");
  ASSERT_NE(at, std::string::npos);
  text.insert(at + 18, "\"x\",\"was\":");
  std::ofstream(path) << text;
  const Result r = plan("ARL_CALIBRATION='" + path + "'", "--ranks 4");
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("calibration file " + path +
                       ": calibration.params.beta_s_per_byte: "
                       "expected a number, found a string"),
            std::string::npos)
      << r.err;
  const Result m = plan("", "--ranks 4 --model '" + path + "'");
  EXPECT_EQ(m.rc, 2);
  EXPECT_NE(m.err.find("calibration.params.beta_s_per_byte"), std::string::npos) << m.err;
  const Result missing = plan("", "--ranks 4 --model '" + (dir_ / "nope.json").string() + "'");
  EXPECT_EQ(missing.rc, 2);
  EXPECT_NE(missing.err.find("--model " + (dir_ / "nope.json").string() + ": no such file"),
            std::string::npos)
      << missing.err;
}

}  // namespace
}  // namespace arl
