#include "export/calibration.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "export/json.h"

namespace arl {
namespace {

Calibration sample() {
  Calibration c;
  c.params.alpha = 9.5e-6;
  c.params.beta = 1.0 / 2.2e9;
  c.params.gamma = 1.0 / 5.1e9;
  c.machine = "vm";
  c.date = "2026-12-01T19:56:19Z";
  c.dataPlane = "shm";
  c.workers = 4;
  c.sliceBytes = 1 << 20;
  c.inflight = 4;
  c.iterations = 10;
  c.warmup = 3;
  c.rmsRelativeResidual = 0.21;
  c.rounds = 3;
  c.roundSlowness = {1.0, 0.875, 1.25};
  c.runs = {{"ring", 4096, 80.5, 70.25, 75.0}, {"ring", 16 << 20, 9000.0, 8800.0, 9100.0}};
  c.reduce = {32 << 20, 1 << 20, 7, 6.5e-3, "avx2"};
  c.copy = CopyMeasurement{32 << 20, 1 << 20, 7, 2.8e-3};
  c.params.shmCopy = 2.8e-3 / (32 << 20);
  c.params.cores = 2;
  c.params.shmWorkScale = 1.25;
  c.copyCached = CopyMeasurement{4 << 20, 1 << 20, 56, 1.4e-4};
  c.reduceCached = ReduceMeasurement{5 << 20, 1 << 20, 84, 1.9e-4, "avx2"};
  c.llcSource = "--llc";
  c.params.shmCopyCached = 1.4e-4 / (4 << 20);
  c.params.gammaCached = 1.9e-4 / (5 << 20);
  c.params.llcBytes = 32 << 20;
  c.send = SendMeasurement{6 << 20, {32 << 20, 1 << 20, 7, 3.2e-3}, {32 << 20, 1 << 20, 7, 2.1e-3}};
  c.params.shmSend = 3.2e-3 / (32 << 20);
  c.params.shmSendFresh = 2.1e-3 / (32 << 20);
  c.params.shmAlpha = 4.5e-6;
  return c;
}

// sample()'s JSON without the field version 5 added, as version 4 wrote it.
void asVersionFour(nlohmann::json& j) {
  j["version"] = 4;
  j["params"].erase("shm_alpha_s");
}

// sample()'s JSON without the fields versions 4 and 5 added, as version 3 wrote it.
void asVersionThree(nlohmann::json& j) {
  asVersionFour(j);
  j["version"] = 3;
  j["params"].erase("shm_send_s_per_byte");
  j["params"].erase("shm_send_fresh_s_per_byte");
  j["measurements"].erase("send");
}

// sample()'s JSON without the fields versions 3 to 5 added, as version 2 wrote it.
void asVersionTwo(nlohmann::json& j) {
  asVersionThree(j);
  j["version"] = 2;
  j["measurements"].erase("rounds");
  j["measurements"].erase("round_slowness");
  j["params"].erase("shm_copy_cached_s_per_byte");
  j["params"].erase("gamma_cached_s_per_byte");
  j["params"].erase("llc_bytes");
  j["measurements"].erase("copy_cached");
  j["measurements"].erase("reduce_cached");
  j["measurements"].erase("llc_source");
}

// The error parseCalibration() gives for `text`, or "" when it accepts it.
std::string refusal(const std::string& text) {
  try {
    (void)parseCalibration(text, "/cal/test.json");
  } catch (const CalibrationError& e) {
    return e.what();
  }
  return "";
}

// sample() as JSON with `edit` applied.
template <typename Edit>
std::string edited(Edit edit) {
  nlohmann::json j = nlohmann::json::parse(calibrationJson(sample()));
  edit(j);
  return j.dump();
}

TEST(Calibration, RoundTripsEveryField) {
  const Calibration a = sample();
  const Calibration b = parseCalibration(calibrationJson(a), "x");
  EXPECT_EQ(b.params.alpha, a.params.alpha);
  EXPECT_EQ(b.params.beta, a.params.beta);
  EXPECT_EQ(b.params.gamma, a.params.gamma);
  EXPECT_EQ(b.machine, a.machine);
  EXPECT_EQ(b.date, a.date);
  EXPECT_EQ(b.dataPlane, a.dataPlane);
  EXPECT_EQ(b.workers, a.workers);
  EXPECT_EQ(b.collective, a.collective);
  EXPECT_EQ(b.dtype, a.dtype);
  EXPECT_EQ(b.sliceBytes, a.sliceBytes);
  EXPECT_EQ(b.inflight, a.inflight);
  EXPECT_EQ(b.iterations, a.iterations);
  EXPECT_EQ(b.warmup, a.warmup);
  EXPECT_EQ(b.rmsRelativeResidual, a.rmsRelativeResidual);
  EXPECT_EQ(b.rounds, 3);
  EXPECT_EQ(b.roundSlowness, a.roundSlowness);
  ASSERT_EQ(b.runs.size(), 2u);
  EXPECT_EQ(b.runs[1].algorithm, "ring");
  EXPECT_EQ(b.runs[1].sizeBytes, a.runs[1].sizeBytes);
  EXPECT_EQ(b.runs[1].measuredUs, a.runs[1].measuredUs);
  EXPECT_EQ(b.runs[1].p50Us, a.runs[1].p50Us);
  EXPECT_EQ(b.runs[1].fittedUs, a.runs[1].fittedUs);
  EXPECT_EQ(b.reduce.bufferBytes, a.reduce.bufferBytes);
  EXPECT_EQ(b.reduce.sliceBytes, a.reduce.sliceBytes);
  EXPECT_EQ(b.reduce.passes, a.reduce.passes);
  EXPECT_EQ(b.reduce.medianPassSeconds, a.reduce.medianPassSeconds);
  EXPECT_EQ(b.reduce.kernels, a.reduce.kernels);
  EXPECT_EQ(b.params.shmCopy, a.params.shmCopy);
  EXPECT_EQ(b.params.cores, 2);
  EXPECT_EQ(b.params.shmWorkScale, 1.25);
  ASSERT_TRUE(b.copy.has_value());
  EXPECT_EQ(b.copy->bufferBytes, a.copy->bufferBytes);
  EXPECT_EQ(b.copy->sliceBytes, a.copy->sliceBytes);
  EXPECT_EQ(b.copy->passes, a.copy->passes);
  EXPECT_EQ(b.copy->medianPassSeconds, a.copy->medianPassSeconds);
  EXPECT_EQ(b.params.shmCopyCached, a.params.shmCopyCached);
  EXPECT_EQ(b.params.gammaCached, a.params.gammaCached);
  EXPECT_EQ(b.params.llcBytes, uint64_t{32} << 20);
  EXPECT_EQ(b.llcSource, "--llc");
  ASSERT_TRUE(b.copyCached.has_value());
  EXPECT_EQ(b.copyCached->bufferBytes, a.copyCached->bufferBytes);
  EXPECT_EQ(b.copyCached->passes, 56);
  EXPECT_EQ(b.copyCached->medianPassSeconds, a.copyCached->medianPassSeconds);
  ASSERT_TRUE(b.reduceCached.has_value());
  EXPECT_EQ(b.reduceCached->bufferBytes, a.reduceCached->bufferBytes);
  EXPECT_EQ(b.reduceCached->passes, 84);
  EXPECT_EQ(b.reduceCached->medianPassSeconds, a.reduceCached->medianPassSeconds);
  EXPECT_EQ(b.reduceCached->kernels, "avx2");
  EXPECT_EQ(b.params.shmSend, a.params.shmSend);
  EXPECT_EQ(b.params.shmSendFresh, a.params.shmSendFresh);
  ASSERT_TRUE(b.send.has_value());
  EXPECT_EQ(b.send->ringBytes, uint64_t{6} << 20);
  EXPECT_EQ(b.send->fromBuffer.bufferBytes, a.send->fromBuffer.bufferBytes);
  EXPECT_EQ(b.send->fromBuffer.medianPassSeconds, a.send->fromBuffer.medianPassSeconds);
  EXPECT_EQ(b.send->fresh.sliceBytes, a.send->fresh.sliceBytes);
  EXPECT_EQ(b.send->fresh.passes, 7);
  EXPECT_EQ(b.send->fresh.medianPassSeconds, a.send->fresh.medianPassSeconds);
  EXPECT_EQ(b.params.shmAlpha, a.params.shmAlpha);
}

// A version 4 file (no per-message cost of its own) is still read: the shared-memory model
// takes alpha's.
TEST(Calibration, ReadsVersionFourWithoutTheSharedMemoryPerMessageCost) {
  const Calibration b = parseCalibration(edited(asVersionFour), "x");
  EXPECT_FALSE(b.params.shmAlpha.has_value());
  EXPECT_EQ(b.params.shmSend, sample().params.shmSend);
  EXPECT_EQ(b.params.shmWorkScale, 1.25);
}

// A version 3 file (no send rates) is still read: every send is costed at the copy rate.
TEST(Calibration, ReadsVersionThreeWithoutTheSendRates) {
  const Calibration b = parseCalibration(edited(asVersionThree), "x");
  EXPECT_FALSE(b.params.shmSend.has_value());
  EXPECT_FALSE(b.params.shmSendFresh.has_value());
  EXPECT_FALSE(b.send.has_value());
  EXPECT_EQ(b.params.shmCopy, sample().params.shmCopy);
  EXPECT_EQ(b.params.shmCopyCached, sample().params.shmCopyCached);
}

// Without the cache's rates (a machine whose cache size is unknown) the file has none of them.
TEST(Calibration, RoundTripsWithoutTheCacheRates) {
  Calibration a = sample();
  a.params.shmCopyCached.reset();
  a.params.gammaCached.reset();
  a.params.llcBytes = 0;
  a.copyCached.reset();
  a.reduceCached.reset();
  a.llcSource.clear();
  const std::string text = calibrationJson(a);
  EXPECT_EQ(text.find("cached"), std::string::npos) << text;
  EXPECT_EQ(text.find("llc"), std::string::npos) << text;
  const Calibration b = parseCalibration(text, "x");
  EXPECT_FALSE(b.params.shmCopyCached.has_value());
  EXPECT_FALSE(b.params.gammaCached.has_value());
  EXPECT_EQ(b.params.llcBytes, 0u);
  EXPECT_FALSE(b.copyCached.has_value());
  EXPECT_EQ(b.params.shmCopy, a.params.shmCopy);
}

// A version 2 file (no cache-resident rates) is still read: the streaming rates cost every run.
TEST(Calibration, ReadsVersionTwoWithoutTheCacheRates) {
  const Calibration b = parseCalibration(edited(asVersionTwo), "x");
  EXPECT_FALSE(b.params.shmCopyCached.has_value());
  EXPECT_FALSE(b.params.gammaCached.has_value());
  EXPECT_EQ(b.params.llcBytes, 0u);
  EXPECT_FALSE(b.copyCached.has_value());
  EXPECT_FALSE(b.reduceCached.has_value());
  EXPECT_EQ(b.llcSource, "");
  EXPECT_EQ(b.params.shmCopy, sample().params.shmCopy);
  EXPECT_EQ(b.params.cores, 2);
  EXPECT_EQ(b.params.shmWorkScale, 1.25);
  EXPECT_EQ(b.rounds, 1);  // files before the rounds were measured in one
  EXPECT_TRUE(b.roundSlowness.empty());
}

// A version 1 file (no shared-memory plane) is still read; its runs are costed by the ports.
TEST(Calibration, ReadsVersionOneWithoutTheSharedMemoryPlane) {
  const Calibration b = parseCalibration(edited([](auto& j) {
                                           asVersionTwo(j);
                                           j["version"] = 1;
                                           j["params"].erase("shm_copy_s_per_byte");
                                           j["params"].erase("cores");
                                           j["params"].erase("shm_work_scale");
                                           j["measurements"].erase("copy");
                                         }),
                                         "x");
  EXPECT_FALSE(b.params.shmCopy.has_value());
  EXPECT_EQ(b.params.cores, 0);
  EXPECT_EQ(b.params.shmWorkScale, 1.0);
  EXPECT_FALSE(b.copy.has_value());
  EXPECT_EQ(b.params.alpha, sample().params.alpha);
}

TEST(Calibration, WritesAndReadsAFileCreatingItsFolder) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("calibration_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const std::string path = (dir / "allreduce-lab" / "calibration.json").string();
  writeCalibration(path, sample());
  EXPECT_EQ(readCalibration(path).params.alpha, sample().params.alpha);
  std::filesystem::remove_all(dir);
  try {
    (void)readCalibration(path);
    ADD_FAILURE() << "a missing file was read";
  } catch (const CalibrationError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

// The shared-memory model's per-message cost: positive, and only with that model's rates.
TEST(Calibration, RefusesASharedMemoryPerMessageCostWithoutItsModel) {
  EXPECT_NE(refusal(edited([](auto& j) {
              j["params"]["shm_alpha_s"] = 0;
            })).find("calibration.params.shm_alpha_s"),
            std::string::npos);
  EXPECT_NE(refusal(edited([](auto& j) {
              asVersionTwo(j);
              j["params"]["shm_alpha_s"] = 1e-6;
              j["params"].erase("shm_copy_s_per_byte");
              j["measurements"].erase("copy");
            })).find("comes with its copy rate"),
            std::string::npos);
}

TEST(Calibration, RefusesMalformedFilesNamingFileAndField) {
  EXPECT_EQ(refusal(calibrationJson(sample())), "");
  const std::string notJson = refusal("{\"format\": ");
  EXPECT_NE(notJson.find("calibration file /cal/test.json"), std::string::npos) << notJson;
  EXPECT_EQ(refusal(edited([](auto& j) { j["format"] = "allreduce-lab-recording"; })),
            "calibration file /cal/test.json: calibration.format: 'allreduce-lab-recording' is "
            "not allreduce-lab-calibration");
  EXPECT_NE(refusal(edited([](auto& j) { j["version"] = 6; })).find("calibration.version"),
            std::string::npos);
  // The send rates come together, with their measurement, or not at all.
  for (const char* field : {"shm_send_s_per_byte", "shm_send_fresh_s_per_byte"}) {
    EXPECT_NE(refusal(edited([&](auto& j) { j["params"].erase(field); })).find("the send rates"),
              std::string::npos)
        << field;
  }
  EXPECT_NE(
      refusal(edited([](auto& j) { j["measurements"].erase("send"); })).find("the send rates"),
      std::string::npos);
  EXPECT_NE(refusal(edited([](auto& j) {
              j["measurements"]["send"]["fresh"].erase("median_pass_s");
            })).find("calibration.measurements.send.fresh.median_pass_s: missing"),
            std::string::npos);
  // The cache-resident rates come all together, or not at all.
  for (const char* field : {"shm_copy_cached_s_per_byte", "gamma_cached_s_per_byte", "llc_bytes"}) {
    EXPECT_NE(refusal(edited([&](auto& j) {
                j["params"].erase(field);
              })).find("the cache-resident rates"),
              std::string::npos)
        << field;
  }
  for (const char* field : {"copy_cached", "reduce_cached", "llc_source"}) {
    EXPECT_NE(refusal(edited([&](auto& j) {
                j["measurements"].erase(field);
              })).find("the cache-resident rates"),
              std::string::npos)
        << field;
  }
  EXPECT_NE(refusal(edited([](auto& j) {
              j["params"]["llc_bytes"] = 0;
            })).find("the cache-resident rates"),
            std::string::npos);
  EXPECT_NE(refusal(edited([](auto& j) {
              j["params"]["gamma_cached_s_per_byte"] = -1;
            })).find("calibration.params.gamma_cached_s_per_byte: must be a positive"),
            std::string::npos);
  EXPECT_NE(refusal(edited([](auto& j) {
              j["measurements"].erase("copy");
            })).find("comes with its measurement"),
            std::string::npos);
  EXPECT_NE(refusal(edited([](auto& j) {
              j["params"]["shm_copy_s_per_byte"] = 0;
            })).find("calibration.params.shm_copy_s_per_byte: must be a positive"),
            std::string::npos);
  EXPECT_NE(
      refusal(edited([](auto& j) { j["params"]["cores"] = 0; })).find("calibration.params.cores"),
      std::string::npos);
  EXPECT_EQ(refusal(edited([](auto& j) { j["params"].erase("alpha_s"); })),
            "calibration file /cal/test.json: calibration.params.alpha_s: missing");
  EXPECT_EQ(refusal(edited([](auto& j) { j["params"]["beta_s_per_byte"] = "fast"; })),
            "calibration file /cal/test.json: calibration.params.beta_s_per_byte: expected a "
            "number, found a string");
  EXPECT_EQ(refusal(edited([](auto& j) { j["params"]["gamma_s_per_byte"] = 0; })),
            "calibration file /cal/test.json: calibration.params.gamma_s_per_byte: must be a "
            "positive finite number");
  EXPECT_NE(refusal(edited([](auto& j) {
              j["params"]["alpha_s"] = -1e-6;
            })).find("calibration.params.alpha_s: must be a positive"),
            std::string::npos);
  EXPECT_NE(refusal(edited([](auto& j) {
              j["params"]["alpha_s"] = nullptr;
            })).find("calibration.params.alpha_s"),
            std::string::npos);
  EXPECT_NE(refusal(edited([](auto& j) { j["workers"] = 0; })).find("calibration.workers"),
            std::string::npos);
  EXPECT_NE(refusal(edited([](auto& j) {
              j["measurements"]["runs"][1]["time_us"] = -3;
            })).find("calibration.measurements.runs[1].time_us"),
            std::string::npos);
  EXPECT_NE(refusal("[1, 2]").find("calibration: expected an object"), std::string::npos);
  // A ratio per round, each positive.
  EXPECT_NE(refusal(edited([](auto& j) {
              j["measurements"]["round_slowness"] = {1.0, 1.1};
            })).find("calibration.measurements.round_slowness: has 2 entries for 3 rounds"),
            std::string::npos);
  EXPECT_NE(refusal(edited([](auto& j) {
              j["measurements"]["round_slowness"][2] = 0;
            })).find("calibration.measurements.round_slowness[2]: must be a positive"),
            std::string::npos);
  EXPECT_NE(refusal(edited([](auto& j) {
              j["measurements"]["rounds"] = 0;
            })).find("calibration.measurements.rounds"),
            std::string::npos);
}

// Values no machine has, and a data plane the lab has not, are refused rather than steering
// every prediction.
TEST(Calibration, RefusesImplausibleValues) {
  EXPECT_EQ(refusal(edited([](auto& j) { j["data_plane"] = "carrier-pigeon"; })),
            "calibration file /cal/test.json: calibration.data_plane: 'carrier-pigeon' is not a "
            "data plane (shm or zmq)");
  EXPECT_NE(refusal(edited([](auto& j) { j["data_plane"] = "auto"; })).find("not a data plane"),
            std::string::npos);
  EXPECT_EQ(refusal(edited([](auto& j) { j["params"]["alpha_s"] = 1e300; })),
            "calibration file /cal/test.json: calibration.params.alpha_s: is outside what a "
            "machine measures (1 ns to 1 s per message)");
  EXPECT_NE(refusal(edited([](auto& j) {
              j["params"]["beta_s_per_byte"] = 1e-310;
            })).find("calibration.params.beta_s_per_byte: is outside what a machine measures"),
            std::string::npos);
  EXPECT_NE(refusal(edited([](auto& j) {
              j["params"]["gamma_s_per_byte"] = 5.0;
            })).find("calibration.params.gamma_s_per_byte"),
            std::string::npos);
}

TEST(Calibration, ReadsOnlyRegularFiles) {
  try {
    readCalibration("/dev/zero");
    ADD_FAILURE() << "read /dev/zero";
  } catch (const CalibrationError& e) {
    EXPECT_EQ(std::string(e.what()),
              "calibration file /dev/zero is a character device, not a regular file");
  }
}

TEST(Calibration, PathFollowsTheEnvironment) {
  const char* keep[] = {"ARL_CALIBRATION", "XDG_CONFIG_HOME", "HOME"};
  std::string saved[3];
  bool had[3];
  for (int i = 0; i < 3; ++i) {
    const char* v = std::getenv(keep[i]);
    had[i] = v != nullptr;
    saved[i] = v ? v : "";
  }
  ::setenv("ARL_CALIBRATION", "/a/cal.json", 1);
  ::setenv("XDG_CONFIG_HOME", "/xdg", 1);
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(calibrationPath(), "/a/cal.json");
  ::setenv("ARL_CALIBRATION", "", 1);
  EXPECT_EQ(calibrationPath(), "/xdg/allreduce-lab/calibration.json");
  ::unsetenv("XDG_CONFIG_HOME");
  EXPECT_EQ(calibrationPath(), "/home/u/.config/allreduce-lab/calibration.json");
  ::unsetenv("HOME");
  ::unsetenv("ARL_CALIBRATION");
  EXPECT_EQ(calibrationPath(), "");
  for (int i = 0; i < 3; ++i) {
    if (had[i])
      ::setenv(keep[i], saved[i].c_str(), 1);
    else
      ::unsetenv(keep[i]);
  }
}

}  // namespace
}  // namespace arl
