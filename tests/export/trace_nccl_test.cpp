// NCCL's own events (exec/nccl_events.h) through the timeline, the Perfetto trace and a
// recording: their intervals, their lanes and names labelled as NCCL's, the note where NCCL
// reported no per-chunk events, and the recording's round trip. The events are synthetic,
// laid out as a worker records them (gpu/nccl_profiler.h); no GPU is involved.
#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "exec/nccl_events.h"
#include "exec/timeline.h"
#include "export/export.h"

namespace arl {
namespace {

TelemetryEvent nccl(EventKind k, int rank, int64_t t, uint32_t channel = 0) {
  TelemetryEvent e;
  e.runId = 3;
  e.rank = rank;
  e.kind = k;
  e.tNs = t;
  e.chunk = channel;
  return e;
}

// One timed iteration of NCCL's ring on two ranks: the group and the collective on the host,
// two kernel channels per rank, and, with `steps`, a network send and receive step per rank.
RunResult ncclRun(bool steps) {
  RunResult res;
  res.runId = 3;
  res.request.algorithm = "nccl-ring";
  res.request.iterations = 1;
  res.nranks = 2;
  res.state = RunState::Done;
  for (int r = 0; r < 2; ++r) {
    const int64_t t0 = 1'000'000 + r * 1'000;
    res.events.push_back(nccl(EventKind::NcclGroupStart, r, t0));
    TelemetryEvent coll = nccl(EventKind::NcclColl, r, t0 + 100);
    coll.offset = 1024;
    coll.bytes = 4096;
    coll.provenance = packNcclCollInfo({NcclAlgo::Ring, NcclProto::Simple, 2, 16});
    res.events.push_back(coll);
    res.events.push_back(nccl(EventKind::NcclGroupEnd, r, t0 + 5'000));
    for (uint32_t ch = 0; ch < 2; ++ch) {
      res.events.push_back(nccl(EventKind::NcclKernelStart, r, t0 + 10'000 + ch * 10, ch));
      res.events.push_back(nccl(EventKind::NcclKernelEnd, r, t0 + 50'000 + ch * 1'000, ch));
    }
    if (!steps) continue;
    for (EventKind k : {EventKind::NcclSendStepStart, EventKind::NcclSendStepEnd,
                        EventKind::NcclRecvStepStart, EventKind::NcclRecvStepEnd}) {
      const bool end = k == EventKind::NcclSendStepEnd || k == EventKind::NcclRecvStepEnd;
      TelemetryEvent s = nccl(k, r, t0 + (end ? 40'000 : 20'000), 1);
      s.peer = 1 - r;
      s.step = 5;
      s.bytes = end ? 65536 : 0;
      res.events.push_back(s);
    }
  }
  std::stable_sort(res.events.begin(), res.events.end(),
                   [](const TelemetryEvent& a, const TelemetryEvent& b) { return a.tNs < b.tNs; });
  return res;
}

BenchReport report(bool steps) {
  BenchReport r;
  BenchRow row;
  row.sizeBytes = 4096;
  row.count = 1024;
  row.result = ncclRun(steps);
  r.rows.push_back(row);
  return r;
}

TEST(NcclTimeline, PairsNcclsStartsAndEndsIntoIntervals) {
  const RunResult res = ncclRun(true);
  const Timeline tl(res.events);
  std::map<Activity, int> count;
  for (const Interval& x : tl.intervals()) {
    ++count[x.activity];
    if (x.activity == Activity::NcclColl) {
      // From the collective's host start to its rank's last kernel end.
      EXPECT_EQ(x.endNs - x.startNs, 50'000 + 1'000 - 100) << "rank " << x.rank;
    }
    if (x.activity == Activity::NcclKernel) {
      EXPECT_GE(x.endNs - x.startNs, 39'000);
    }
    if (x.activity == Activity::NcclSend || x.activity == Activity::NcclRecv) {
      EXPECT_EQ(x.peer, 1 - x.rank);
      EXPECT_EQ(x.endNs - x.startNs, 20'000);
    }
  }
  EXPECT_EQ(count[Activity::NcclGroup], 2);
  EXPECT_EQ(count[Activity::NcclColl], 2);
  EXPECT_EQ(count[Activity::NcclKernel], 4);
  EXPECT_EQ(count[Activity::NcclSend], 2);
  EXPECT_EQ(count[Activity::NcclRecv], 2);
  EXPECT_TRUE(tl.transfers().empty()) << "NCCL's steps are not the lab's messages";
}

TEST(NcclTimeline, AnEndWithoutItsStartMakesNoInterval) {
  RunResult res = ncclRun(false);
  res.events.erase(std::remove_if(res.events.begin(), res.events.end(),
                                  [](const TelemetryEvent& e) {
                                    return e.kind == EventKind::NcclKernelStart && e.chunk == 1;
                                  }),
                   res.events.end());
  const Timeline tl(res.events);
  const auto kernels =
      std::count_if(tl.intervals().begin(), tl.intervals().end(),
                    [](const Interval& x) { return x.activity == Activity::NcclKernel; });
  EXPECT_EQ(kernels, 2);
}

std::vector<nlohmann::json> ncclSlices(const nlohmann::json& trace) {
  std::vector<nlohmann::json> out;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == "X" && e.at("cat") == "NCCL") out.push_back(e);
  }
  return out;
}

std::vector<std::string> threadNames(const nlohmann::json& trace) {
  std::vector<std::string> out;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name") {
      out.push_back(e.at("args").at("name").get<std::string>());
    }
  }
  return out;
}

TEST(NcclTrace, LabelsNcclsSlicesAsNcclsAndSaysWhereNoChunksWereReported) {
  TraceStats stats;
  const nlohmann::json t = nlohmann::json::parse(chromeTraceJson(report(false), &stats));
  const std::vector<nlohmann::json> slices = ncclSlices(t);
  EXPECT_EQ(slices.size(), 2u + 2u + 4u);  // groups, collectives, kernel channels
  EXPECT_EQ(stats.ncclSlices, slices.size());
  EXPECT_EQ(stats.ncclProxySteps, 0u);
  std::map<std::string, int> names;
  for (const auto& s : slices) {
    ++names[s.at("name").get<std::string>()];
    EXPECT_EQ(s.at("args").at("source"), "NCCL profiler plugin");
  }
  EXPECT_EQ(names["NCCL Ring/Simple, 2 channels"], 2);
  EXPECT_EQ(names["NCCL kernel, channel 0"], 2);
  EXPECT_EQ(names["NCCL kernel, channel 1"], 2);
  EXPECT_EQ(names["NCCL group"], 2);
  const auto lanes = threadNames(t);
  for (const char* lane : {"NCCL collective", "NCCL kernel", "NCCL group"}) {
    EXPECT_NE(std::find(lanes.begin(), lanes.end(), lane), lanes.end()) << lane;
  }
  const auto coll = std::find_if(slices.begin(), slices.end(), [](const auto& s) {
    return s.at("name") == "NCCL Ring/Simple, 2 channels";
  });
  ASSERT_NE(coll, slices.end());
  EXPECT_EQ(coll->at("args").at("algorithm"), "Ring");
  EXPECT_EQ(coll->at("args").at("protocol"), "Simple");
  EXPECT_EQ(coll->at("args").at("count"), 1024);
  const auto& other = t.at("otherData");
  EXPECT_EQ(other.at("nccl_proxy_steps"), 0);
  EXPECT_NE(other.at("nccl_note").get<std::string>().find("no per-chunk events"),
            std::string::npos);
}

TEST(NcclTrace, ShowsNetworkProxyStepsWithTheirPeerAndNoNote) {
  TraceStats stats;
  const nlohmann::json t = nlohmann::json::parse(chromeTraceJson(report(true), &stats));
  EXPECT_EQ(stats.ncclProxySteps, 4u);
  std::map<std::string, int> names;
  for (const auto& s : ncclSlices(t)) ++names[s.at("name").get<std::string>()];
  EXPECT_EQ(names["NCCL send step 5 to 1"], 1);
  EXPECT_EQ(names["NCCL recv step 5 from 0"], 1);
  EXPECT_FALSE(t.at("otherData").contains("nccl_note"));
  // A trace without NCCL's events says nothing of NCCL.
  BenchReport none = report(false);
  none.rows[0].result.events.clear();
  EXPECT_FALSE(
      nlohmann::json::parse(chromeTraceJson(none)).at("otherData").contains("nccl_slices"));
}

TEST(NcclRecording, RoundTripsNcclsEvents) {
  const BenchReport r = report(true);
  const BenchReport back = parseRecording(recordingJson(r));
  ASSERT_EQ(back.rows.size(), 1u);
  EXPECT_EQ(back.rows[0].result.events, r.rows[0].result.events);
  EXPECT_EQ(recordingJson(back), recordingJson(r));
}

}  // namespace
}  // namespace arl
