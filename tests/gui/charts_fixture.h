// What the chart and export tests share: the sample recording and hand-made rows whose
// figures are known.
#pragma once

#include <cmath>
#include <string>

#include "export/export.h"

namespace arl::ui::testing {

inline std::string samplePath() {
  return std::string(ARL_SOURCE_DIR) + "/resources/sample-ring-4.arlrec";
}

// A finished run of `algorithm` on `nranks` ranks whose slowest-rank time is `timeUs`, with
// the spread `p50`..`max` and a prediction of `predictedUs` (NaN: none).
inline SweepRow madeRow(const std::string& algorithm, uint64_t sizeBytes, uint64_t sliceBytes,
                        double timeUs, double predictedUs, int nranks = 4) {
  SweepRow r;
  r.sizeBytes = sizeBytes;
  r.count = sizeBytes / 4;
  r.predictedUs = predictedUs;
  r.result.request.algorithm = algorithm;
  r.result.request.sliceBytes = sliceBytes;
  r.result.nranks = nranks;
  r.result.state = RunState::Done;
  r.metrics = metricsFromTime(Collective::AllReduce, nranks, r.count, DataType::Float, timeUs, 0);
  r.metrics.spread = {timeUs * 0.9, timeUs * 1.2, timeUs * 1.5, timeUs * 2};
  return r;
}

}  // namespace arl::ui::testing
