// The sample recordings of resources/ (real runs, for replay without workers and for the
// lessons): each reads, each run is a real one (done, no wrong element, telemetry kept), and
// its metrics recomputed from the recorded iteration times are the metrics it recorded.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "export/export.h"
#include "model/metrics.h"

namespace arl {
namespace {

std::vector<std::string> samples() {
  const std::string root = std::string(ARL_SOURCE_DIR) + "/resources";
  std::vector<std::string> out = {root + "/sample-ring-4.arlrec"};
  for (const auto& e : std::filesystem::directory_iterator(root + "/samples")) {
    if (e.path().extension() == ".arlrec") out.push_back(e.path().string());
  }
  return out;
}

TEST(Samples, EverySampleReplaysToItsRecordedMetrics) {
  const std::vector<std::string> all = samples();
  ASSERT_GE(all.size(), 7u);
  for (const std::string& path : all) {
    SCOPED_TRACE(path);
    const BenchReport r = readRecording(path);
    ASSERT_FALSE(r.rows.empty());
    for (const SweepRow& row : r.rows) {
      const RunResult& res = row.result;
      EXPECT_EQ(res.state, RunState::Done);
      EXPECT_EQ(row.metrics.wrong, 0u);
      EXPECT_FALSE(res.events.empty());
      const RunRequest& q = res.request;
      const Metrics m =
          computeMetrics(q.collective, res.nranks, row.count, q.dtype, res.iterationUs, res.wrong);
      EXPECT_NEAR(m.timeUs, row.metrics.timeUs, 1e-6 * row.metrics.timeUs);
      EXPECT_NEAR(m.busbwGBps, row.metrics.busbwGBps, 1e-6 * row.metrics.busbwGBps);
      EXPECT_NEAR(m.algbwGBps, row.metrics.algbwGBps, 1e-6 * row.metrics.algbwGBps);
      EXPECT_DOUBLE_EQ(m.spread.p50Us, row.metrics.spread.p50Us);
    }
  }
}

}  // namespace
}  // namespace arl
