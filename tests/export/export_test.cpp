// The bench exporters (export.h) on a synthetic session whose every event is known: CSV,
// results JSON, the Chrome trace (parsed back and checked for processes, lanes, flow pairs,
// counters and proper nesting) and the recording's round trip.
#include "export/export.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/errors.h"
#include "schedule/schedule.h"

namespace arl {
namespace {

constexpr int kRanks = 3;
constexpr uint64_t kBytes = 4096;

TelemetryEvent ev(EventKind k, uint32_t iter, int rank, uint32_t step, int peer, uint32_t chunk,
                  uint64_t offset, int64_t t, uint64_t prov) {
  TelemetryEvent e;
  e.runId = 7;
  e.iteration = iter;
  e.rank = rank;
  e.step = step;
  e.kind = k;
  e.phase = static_cast<uint8_t>(Phase::ReduceScatter);
  e.peer = peer;
  e.chunk = chunk;
  e.offset = offset;
  e.bytes = kBytes;
  e.tNs = t;
  e.provenance = prov;
  // As a device backend times them: reductions on the device's clock, the rest on the host's.
  e.clock = k == EventKind::ReduceEnd ? ClockSource::Device : ClockSource::Host;
  return e;
}

// A ring reduce-scatter of kRanks-1 steps, two iterations: at every step rank r sends a
// chunk to r+1, which receives it and reduces it. Times in ns from `t0`; each step takes
// 100 us, sends 30 us in flight.
RunResult syntheticRun(int64_t t0, uint64_t runId) {
  RunResult res;
  res.runId = runId;
  res.request.algorithm = "ring";
  res.request.count = 3 * kBytes / 4;
  res.request.iterations = 2;
  res.nranks = kRanks;
  res.state = RunState::Done;
  for (int r = 0; r < kRanks; ++r) {
    WorkerInfo w;
    w.rank = r;
    w.name = "w" + std::to_string(r);
    w.host = "hostA";
    w.pid = 1000 + r;
    w.local = true;
    w.backend = "cpu";
    w.dataEndpoint = "ipc:///tmp/x" + std::to_string(r);
    res.workers.push_back(w);
  }
  for (uint32_t it = 0; it < 2; ++it) {
    const int64_t base = t0 + static_cast<int64_t>(it) * 1'000'000;
    for (uint32_t step = 0; step < kRanks - 1; ++step) {
      const int64_t s = base + static_cast<int64_t>(step) * 100'000;
      for (int r = 0; r < kRanks; ++r) {
        const int to = (r + 1) % kRanks;
        const uint32_t chunk =
            static_cast<uint32_t>((r - static_cast<int>(step) + kRanks) % kRanks);
        const uint64_t prov = (uint64_t{1} << r) | (step ? uint64_t{1} << ((r + 2) % kRanks) : 0);
        res.events.push_back(
            ev(EventKind::SendStart, it, r, step, to, chunk, chunk * 1024, s + r, prov));
        res.events.push_back(
            ev(EventKind::SendEnd, it, r, step, to, chunk, chunk * 1024, s + 20'000 + r, prov));
        res.events.push_back(
            ev(EventKind::RecvEnd, it, to, step, r, chunk, chunk * 1024, s + 30'000 + r, prov));
        res.events.push_back(
            ev(EventKind::ReduceEnd, it, to, step, r, chunk, chunk * 1024, s + 50'000 + r, prov));
        TelemetryEvent se = ev(EventKind::StepEnd, it, r, step, -1, 0, 0, s + 90'000 + r, 0);
        se.bytes = kBytes;
        res.events.push_back(se);
      }
    }
    for (int r = 0; r < kRanks; ++r) {
      TelemetryEvent ie =
          ev(EventKind::IterationEnd, it, r, kRanks - 1, -1, 0, 0, base + 250'000 + r, 0);
      ie.bytes = kBytes * (kRanks - 1);
      res.events.push_back(ie);
      res.perRank.push_back({r, it, 240'000 + r, 0});
    }
    res.iterationUs.push_back(240.0 + kRanks - 1);
  }
  std::stable_sort(res.events.begin(), res.events.end(),
                   [](const TelemetryEvent& a, const TelemetryEvent& b) { return a.tNs < b.tNs; });
  for (TelemetryEvent& e : res.events) e.runId = runId;
  res.timeUs = 240.0 + kRanks - 1;
  return res;
}

BenchReport syntheticReport() {
  BenchReport r;
  r.config.minBytes = kBytes;
  r.config.maxBytes = 2 * kBytes;
  r.config.stepFactor = 2;
  r.config.algorithms = {"ring", "tree"};
  r.config.workers = kRanks;
  r.config.jsonPath = "out, \"quoted\".json";
  const int64_t t0 = 5'000'000'000;
  for (int i = 0; i < 2; ++i) {
    BenchRow row;
    row.sizeBytes = kBytes * (i + 1);
    row.count = row.sizeBytes / 4;
    row.predictedUs = 123.5 + i;
    row.startNs = t0 + i * 10'000'000 - 50'000;
    row.endNs = t0 + i * 10'000'000 + 3'000'000;
    row.result = syntheticRun(t0 + i * 10'000'000, 7 + static_cast<uint64_t>(i));
    row.result.request.algorithm = i == 0 ? "ring" : "tree";
    row.metrics = computeMetrics(Collective::AllReduce, kRanks, row.count, DataType::Float,
                                 row.result.iterationUs, 0);
    // Distinct values, exact in binary, so that a field written in another's place shows.
    row.metrics.spread = {1.5 + i, 2.25 + i, 3.125 + i, 4.0625 + i};
    r.rows.push_back(row);
  }
  r.workers = r.rows[0].result.workers;
  r.rows[1].result.error = "rank 1, step 2: a reason, with \"quotes\"";
  r.rows[1].result.eventsDropped = 5;
  return r;
}

std::vector<std::string> splitLines(const std::string& s) {
  std::vector<std::string> out;
  size_t p = 0;
  while (p < s.size()) {
    size_t e = s.find('\n', p);
    if (e == std::string::npos) e = s.size();
    out.push_back(s.substr(p, e - p));
    p = e + 1;
  }
  return out;
}

TEST(Export, CsvHasAHeaderAndOneQuotedRowPerRun) {
  BenchReport r = syntheticReport();
  const auto lines = splitLines(benchResultsCsv(r));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].rfind("size_bytes,count,dtype,op,root,algorithm,collective,ranks,", 0), 0u);
  // Added last, so that columns read by position keep their places.
  EXPECT_TRUE(lines[0].ends_with(",predicted_method,backend")) << lines[0];
  EXPECT_NE(lines[0].find(",time_us,time_nccl_us,p50_us,p90_us,p99_us,max_us,algbw_gbps,busbw_"
                          "gbps,wrong,predicted_us,"),
            std::string::npos);
  EXPECT_EQ(lines[1].rfind("4096,1024,float,sum,0,ring,allreduce,3,", 0), 0u) << lines[1];
  EXPECT_TRUE(lines[1].ends_with(",cpu")) << lines[1];
  EXPECT_NE(lines[1].find(",1.5,2.25,3.125,4.0625,"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find(",2.5,3.25,4.125,5.0625,"), std::string::npos) << lines[2];
  // The header and every row have as many fields (no field of this report holds a comma
  // before the error).
  const auto fields = [](const std::string& l) { return std::count(l.begin(), l.end(), ','); };
  EXPECT_EQ(fields(lines[0]), fields(lines[1]));
  EXPECT_NE(lines[1].find(",123.5,"), std::string::npos) << lines[1];
  // RFC 4180: the comma and the doubled quotes stay inside one field.
  EXPECT_NE(lines[2].find(",\"rank 1, step 2: a reason, with \"\"quotes\"\"\""), std::string::npos)
      << lines[2];
  // Without checking, #wrong is empty rather than a misleading 0.
  r.rows[0].result.request.check = 0;
  const auto unchecked = splitLines(benchResultsCsv(r));
  EXPECT_NE(unchecked[1].find(",,123.5,"), std::string::npos) << unchecked[1];
}

TEST(Export, ResultsJsonHoldsConfigAndEveryResultField) {
  BenchReport r = syntheticReport();
  r.rows[1].result.request.check = 0;
  const nlohmann::json v = nlohmann::json::parse(benchResultsJson(r));
  const nlohmann::json& c = v.at("config");
  EXPECT_EQ(c.at("minbytes").get<int64_t>(), 4096);
  EXPECT_EQ(c.at("stepfactor").get<int64_t>(), 2);
  EXPECT_EQ(c.at("algorithms").size(), 2u);
  EXPECT_EQ(c.at("json").get<std::string>(), "out, \"quoted\".json");
  for (const char* k : {"maxbytes",     "stepbytes",      "iters",
                        "warmup_iters", "check",          "check_iterations",
                        "op",           "dtype",          "collective",
                        "workers",      "ranks_per_host", "slice_sizes",
                        "inflights",    "backend",        "listen",
                        "expect",       "telemetry",      "max_events",
                        "root",         "in_place",       "csv",
                        "trace",        "record",         "ring_order"}) {
    EXPECT_TRUE(c.contains(k)) << k;
  }
  EXPECT_EQ(v.at("workers").size(), 3u);
  EXPECT_EQ(v.at("telemetry").at("events_dropped").get<int64_t>(), 5);
  const auto& res = v.at("results");
  ASSERT_EQ(res.size(), 2u);
  const nlohmann::json& a = res[0];
  EXPECT_EQ(a.at("size_bytes").get<int64_t>(), 4096);
  EXPECT_EQ(a.at("count").get<int64_t>(), 1024);
  EXPECT_EQ(a.at("dtype").get<std::string>(), "float");
  EXPECT_EQ(a.at("op").get<std::string>(), "sum");
  EXPECT_EQ(a.at("algorithm").get<std::string>(), "ring");
  EXPECT_EQ(a.at("backend").get<std::string>(), "cpu");
  EXPECT_EQ(a.at("collective").get<std::string>(), "allreduce");
  EXPECT_EQ(a.at("ranks").get<int64_t>(), 3);
  EXPECT_DOUBLE_EQ(a.at("time_us").get<double>(), r.rows[0].metrics.timeUs);
  EXPECT_DOUBLE_EQ(a.at("algbw_gbps").get<double>(), r.rows[0].metrics.algbwGBps);
  EXPECT_DOUBLE_EQ(a.at("busbw_gbps").get<double>(), r.rows[0].metrics.busbwGBps);
  EXPECT_EQ(a.at("p50_us").get<double>(), 1.5);
  EXPECT_EQ(a.at("p90_us").get<double>(), 2.25);
  EXPECT_EQ(a.at("p99_us").get<double>(), 3.125);
  EXPECT_EQ(a.at("max_us").get<double>(), 4.0625);
  EXPECT_EQ(res[1].at("max_us").get<double>(), 5.0625);
  EXPECT_EQ(a.at("wrong").get<int64_t>(), 0);
  EXPECT_DOUBLE_EQ(a.at("predicted_us").get<double>(), 123.5);
  EXPECT_EQ(a.at("iterations").size(), 2u);
  EXPECT_EQ(a.at("state").get<std::string>(), "done");
  EXPECT_EQ(res[1].at("algorithm").get<std::string>(), "tree");
  EXPECT_TRUE(res[1].at("wrong").is_null());
  EXPECT_EQ(res[1].at("events_dropped").get<int64_t>(), 5);
  EXPECT_EQ(res[1].at("events").get<int64_t>(),
            static_cast<int64_t>(r.rows[1].result.events.size()));

  // Events released after the run (bench keeps them only for a trace or a recording) are
  // still counted.
  r.rows[0].eventsKept = r.rows[0].result.events.size();
  r.rows[0].result.events.clear();
  const nlohmann::json released = nlohmann::json::parse(benchResultsJson(r));
  EXPECT_EQ(released.at("results")[0].at("events").get<int64_t>(),
            static_cast<int64_t>(r.rows[0].eventsKept));
  EXPECT_GT(r.rows[0].eventsKept, 0u);
}

// bench JSON's `sent_bytes`: per rank, what its telemetry says it sent in one timed
// iteration (the coordinator's count, RunResult::sent), null for a rank that never said.
TEST(Export, ResultsJsonHoldsEachRanksBytesSentAsTelemetryCountedThem) {
  BenchReport r = syntheticReport();
  r.rows[0].result.sent = sentOf(r.rows[0].result.events, kRanks);
  r.rows[0].result.sent[1] = RankSent{};  // rank 1's IterationEnds never arrived
  const nlohmann::json v = nlohmann::json::parse(benchResultsJson(r));
  const nlohmann::json& sent = v.at("results")[0].at("sent_bytes");
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[0].get<uint64_t>(), kBytes * (kRanks - 1));
  EXPECT_TRUE(sent[1].is_null());
  EXPECT_EQ(sent[2].get<uint64_t>(), kBytes * (kRanks - 1));
  EXPECT_TRUE(v.at("results")[1].at("sent_bytes").empty());  // a result without the count
  // A recording keeps the events, and its reader counts them again.
  const std::string path = ::testing::TempDir() + "export_sent_" + std::to_string(::getpid());
  writeTextFile(path, recordingJson(r));
  const BenchReport back = readRecording(path);
  std::remove(path.c_str());
  ASSERT_EQ(back.rows[0].result.sent.size(), 3u);
  for (const RankSent& s : back.rows[0].result.sent) {
    EXPECT_EQ(s.iterations, 2u);
    EXPECT_EQ(s.bytes, kBytes * (kRanks - 1));
    EXPECT_EQ(s.sendEndBytes, 2 * kBytes * (kRanks - 1));
  }
}

struct ParsedTrace {
  std::map<int64_t, std::string> processNames;                 // pid -> name
  std::map<std::pair<int64_t, int64_t>, std::string> threads;  // (pid, tid) -> name
  std::vector<const nlohmann::json*> slices, counters;
  nlohmann::json root;
};

ParsedTrace parseTrace(const std::string& text) {
  ParsedTrace t;
  t.root = nlohmann::json::parse(text);
  for (const nlohmann::json& e : t.root.at("traceEvents")) {
    const std::string& ph = e.at("ph").get<std::string>();
    if (ph == "M" && e.at("name").get<std::string>() == "process_name") {
      t.processNames[e.at("pid").get<int64_t>()] = e.at("args").at("name").get<std::string>();
    } else if (ph == "M" && e.at("name").get<std::string>() == "thread_name") {
      t.threads[{e.at("pid").get<int64_t>(), e.at("tid").get<int64_t>()}] =
          e.at("args").at("name").get<std::string>();
    } else if (ph == "X") {
      t.slices.push_back(&e);
    } else if (ph == "C") {
      t.counters.push_back(&e);
    }
  }
  return t;
}

std::string laneOf(const ParsedTrace& t, const nlohmann::json& e) {
  auto it = t.threads.find({e.at("pid").get<int64_t>(), e.at("tid").get<int64_t>()});
  return it == t.threads.end() ? "" : it->second;
}

TEST(Export, TraceHasRankProcessesLanesFlowPairsAndCounters) {
  const BenchReport r = syntheticReport();
  TraceStats stats;
  const ParsedTrace t = parseTrace(chromeTraceJson(r, &stats));

  // One process per rank, named after its host and pid, plus the bench's own.
  for (int rank = 0; rank < kRanks; ++rank) {
    bool found = false;
    for (const auto& [pid, name] : t.processNames) {
      found |= name ==
               "rank " + std::to_string(rank) + " (hostA, pid " + std::to_string(1000 + rank) + ")";
    }
    EXPECT_TRUE(found) << "rank " << rank;
  }
  std::set<std::string> laneNames;
  for (const auto& [k, name] : t.threads) laneNames.insert(name);
  for (const char* lane : {"send", "recv", "reduce", "steps", "iterations", "runs"}) {
    EXPECT_TRUE(laneNames.count(lane)) << lane;
  }

  // Every message: one send slice, one recv slice, one reduce slice.
  const size_t messages = 2 /*rows*/ * 2 /*iterations*/ * (kRanks - 1) * kRanks;
  std::map<std::string, size_t> perLane;
  std::map<int64_t, const nlohmann::json*> flowOut, flowIn;
  for (const nlohmann::json* e : t.slices) {
    const std::string lane = laneOf(t, *e);
    ASSERT_FALSE(lane.empty()) << "every slice sits on a named lane";
    perLane[lane.substr(0, lane.find(' '))]++;
    EXPECT_GE(e->at("ts").get<double>(), 0);
    EXPECT_GE(e->at("dur").get<double>(), 0);
    if (lane.rfind("send", 0) == 0 || lane.rfind("recv", 0) == 0 || lane.rfind("reduce", 0) == 0) {
      const nlohmann::json& a = e->at("args");
      for (const char* k : {"rank", "peer", "chunk", "bytes", "step", "offset"}) {
        EXPECT_TRUE(a.contains(k)) << k;
      }
      EXPECT_TRUE(a.at("provenance").is_array());
      EXPECT_GE(a.at("provenance").size(), 1u);
      EXPECT_EQ(a.at("clock").get<std::string>(), lane.rfind("reduce", 0) == 0 ? "device" : "host");
      EXPECT_EQ(a.at("bytes").get<int64_t>(), static_cast<int64_t>(kBytes));
    }
    if (e->contains("flow_out")) {
      EXPECT_TRUE(flowOut.emplace(e->at("bind_id").get<int64_t>(), e).second) << "bind_id reused";
    }
    if (e->contains("flow_in")) {
      EXPECT_TRUE(flowIn.emplace(e->at("bind_id").get<int64_t>(), e).second) << "bind_id reused";
    }
  }
  EXPECT_EQ(perLane["send"], messages);
  EXPECT_EQ(perLane["recv"], messages);
  EXPECT_EQ(perLane["reduce"], messages);
  EXPECT_EQ(perLane["runs"], 2u);

  // Every send flows to exactly the receive of the same message on the peer.
  EXPECT_EQ(stats.flows, messages);
  EXPECT_EQ(stats.unmatchedSends, 0u);
  EXPECT_EQ(stats.unmatchedRecvs, 0u);
  ASSERT_EQ(flowOut.size(), messages);
  ASSERT_EQ(flowIn.size(), messages);
  for (const auto& [id, send] : flowOut) {
    auto it = flowIn.find(id);
    ASSERT_NE(it, flowIn.end()) << "flow " << id << " has no end";
    const nlohmann::json& s = send->at("args");
    const nlohmann::json& d = it->second->at("args");
    EXPECT_EQ(laneOf(t, *send).rfind("send", 0), 0u);
    EXPECT_EQ(laneOf(t, *it->second).rfind("recv", 0), 0u);
    EXPECT_EQ(s.at("peer").get<int64_t>(), d.at("rank").get<int64_t>());
    EXPECT_EQ(s.at("rank").get<int64_t>(), d.at("peer").get<int64_t>());
    EXPECT_EQ(s.at("step").get<int64_t>(), d.at("step").get<int64_t>());
    EXPECT_EQ(s.at("chunk").get<int64_t>(), d.at("chunk").get<int64_t>());
    EXPECT_EQ(s.at("iteration").get<int64_t>(), d.at("iteration").get<int64_t>());
    // The receive starts when the send started: it is the message in flight.
    EXPECT_NEAR(send->at("ts").get<double>(), it->second->at("ts").get<double>(), 1e-6);
  }

  // Counters of bytes sent per millisecond, on every rank, summing to what was sent.
  std::map<int64_t, double> sentPerPid;
  for (const nlohmann::json* c : t.counters) {
    EXPECT_EQ(c->at("name").get<std::string>(), "sent");
    sentPerPid[c->at("pid").get<int64_t>()] += c->at("args").at("bytes/ms").get<double>();
  }
  EXPECT_EQ(sentPerPid.size(), static_cast<size_t>(kRanks));
  for (const auto& [pid, bytes] : sentPerPid) {
    EXPECT_NEAR(bytes, 2.0 * 2 * (kRanks - 1) * kBytes, 2.0) << "pid " << pid;
  }
}

TEST(Export, TraceSlicesOfALaneNeverOverlapAndKeepTheirNanoseconds) {
  const BenchReport r = syntheticReport();
  const ParsedTrace t = parseTrace(chromeTraceJson(r, nullptr));

  // Slices of one lane never overlap: the format needs them nested, and they are flat. In
  // nanoseconds as Perfetto reads them (microseconds times 1000, truncated), a slice may
  // start exactly where the previous one ends.
  const auto ns = [](double us) { return static_cast<int64_t>(us * 1000.0); };
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>> byTid;
  for (const nlohmann::json* e : t.slices) {
    const int64_t start = ns(e->at("ts").get<double>());
    byTid[{e->at("pid").get<int64_t>(), e->at("tid").get<int64_t>()}].emplace_back(
        start, start + ns(e->at("dur").get<double>()));
  }
  for (auto& [k, v] : byTid) {
    std::sort(v.begin(), v.end());
    for (size_t i = 1; i < v.size(); ++i) EXPECT_GE(v[i].first, v[i - 1].second);
  }
  // Exact nanoseconds survive the microsecond text: the synthetic sends last 20 us.
  for (const nlohmann::json* e : t.slices) {
    if (laneOf(t, *e) == "send") {
      EXPECT_EQ(ns(e->at("dur").get<double>()), 20'000);
    }
  }
  // Timestamps are relative to the first run's start.
  double minTs = 1e300;
  for (const nlohmann::json* e : t.slices) minTs = std::min(minTs, e->at("ts").get<double>());
  EXPECT_LT(minTs, 0.01);
}

TEST(Export, OverlappingSendsGoToNumberedSubLanes) {
  BenchReport r;
  BenchRow row;
  row.result = syntheticRun(1'000'000, 1);
  row.result.events.clear();
  // Rank 0 starts two sends to rank 1 before the first completes (inflight 2).
  row.result.events = {
      ev(EventKind::SendStart, 0, 0, 0, 1, 0, 0, 1000, 1),
      ev(EventKind::SendStart, 0, 0, 0, 1, 1, 1024, 2000, 1),
      ev(EventKind::SendEnd, 0, 0, 0, 1, 0, 0, 5000, 1),
      ev(EventKind::RecvEnd, 0, 1, 0, 0, 0, 0, 5500, 1),
      ev(EventKind::SendEnd, 0, 0, 0, 1, 1, 1024, 6000, 1),
      ev(EventKind::RecvEnd, 0, 1, 0, 0, 1, 1024, 6500, 1),
  };
  r.rows.push_back(row);
  TraceStats stats;
  const ParsedTrace t = parseTrace(chromeTraceJson(r, &stats));
  std::set<std::string> sendLanes;
  for (const nlohmann::json* e : t.slices) {
    const std::string lane = laneOf(t, *e);
    if (lane.rfind("send", 0) == 0) sendLanes.insert(lane);
  }
  EXPECT_EQ(sendLanes, (std::set<std::string>{"send", "send #2"}));
  EXPECT_EQ(stats.flows, 2u);
}

TEST(Export, UnpairedEventsAreCountedNotInvented) {
  BenchReport r;
  BenchRow row;
  row.result = syntheticRun(1'000'000, 1);
  // Lose every send of rank 0 (as a full telemetry buffer would).
  auto& e = row.result.events;
  e.erase(std::remove_if(e.begin(), e.end(),
                         [](const TelemetryEvent& x) {
                           return x.rank == 0 &&
                                  (x.kind == EventKind::SendStart || x.kind == EventKind::SendEnd);
                         }),
          e.end());
  r.rows.push_back(row);
  TraceStats stats;
  const ParsedTrace t = parseTrace(chromeTraceJson(r, &stats));
  const uint64_t lost = 2 * (kRanks - 1);  // rank 0's messages to rank 1
  EXPECT_EQ(stats.unmatchedRecvs, lost);
  EXPECT_EQ(stats.unmatchedSends, 0u);
  EXPECT_EQ(stats.flows, 2u * (kRanks - 1) * kRanks - lost);
}

void expectSameRow(const BenchRow& a, const BenchRow& b) {
  EXPECT_EQ(a.sizeBytes, b.sizeBytes);
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.predictedUs, b.predictedUs);
  EXPECT_EQ(a.startNs, b.startNs);
  EXPECT_EQ(a.endNs, b.endNs);
  EXPECT_EQ(a.metrics.bytes, b.metrics.bytes);
  EXPECT_EQ(a.metrics.timeUs, b.metrics.timeUs);
  EXPECT_EQ(a.metrics.algbwGBps, b.metrics.algbwGBps);
  EXPECT_EQ(a.metrics.busbwGBps, b.metrics.busbwGBps);
  EXPECT_EQ(a.metrics.wrong, b.metrics.wrong);
  EXPECT_EQ(a.metrics.spread.p50Us, b.metrics.spread.p50Us);
  EXPECT_EQ(a.metrics.spread.p90Us, b.metrics.spread.p90Us);
  EXPECT_EQ(a.metrics.spread.p99Us, b.metrics.spread.p99Us);
  EXPECT_EQ(a.metrics.spread.maxUs, b.metrics.spread.maxUs);
  const RunResult &x = a.result, &y = b.result;
  EXPECT_EQ(x.runId, y.runId);
  EXPECT_EQ(x.request.algorithm, y.request.algorithm);
  EXPECT_EQ(x.request.collective, y.request.collective);
  EXPECT_EQ(x.request.dtype, y.request.dtype);
  EXPECT_EQ(x.request.op, y.request.op);
  EXPECT_EQ(x.request.count, y.request.count);
  EXPECT_EQ(x.request.sliceBytes, y.request.sliceBytes);
  EXPECT_EQ(x.request.root, y.request.root);
  EXPECT_EQ(x.request.ranksPerHost, y.request.ranksPerHost);
  EXPECT_EQ(x.request.inflight, y.request.inflight);
  EXPECT_EQ(x.request.inPlace, y.request.inPlace);
  EXPECT_EQ(x.request.warmup, y.request.warmup);
  EXPECT_EQ(x.request.iterations, y.request.iterations);
  EXPECT_EQ(x.request.check, y.request.check);
  EXPECT_EQ(x.request.telemetry, y.request.telemetry);
  EXPECT_EQ(x.request.maxEvents, y.request.maxEvents);
  EXPECT_EQ(x.request.stallTimeout, y.request.stallTimeout);
  EXPECT_EQ(x.nranks, y.nranks);
  ASSERT_EQ(x.workers.size(), y.workers.size());
  for (size_t i = 0; i < x.workers.size(); ++i) {
    EXPECT_EQ(x.workers[i].name, y.workers[i].name);
    EXPECT_EQ(x.workers[i].host, y.workers[i].host);
    EXPECT_EQ(x.workers[i].pid, y.workers[i].pid);
    EXPECT_EQ(x.workers[i].dataEndpoint, y.workers[i].dataEndpoint);
  }
  EXPECT_EQ(x.iterationUs, y.iterationUs);
  EXPECT_EQ(x.timeUs, y.timeUs);
  EXPECT_EQ(x.wrong, y.wrong);
  ASSERT_EQ(x.perRank.size(), y.perRank.size());
  for (size_t i = 0; i < x.perRank.size(); ++i) {
    EXPECT_EQ(x.perRank[i].rank, y.perRank[i].rank);
    EXPECT_EQ(x.perRank[i].iteration, y.perRank[i].iteration);
    EXPECT_EQ(x.perRank[i].timeNs, y.perRank[i].timeNs);
    EXPECT_EQ(x.perRank[i].wrong, y.perRank[i].wrong);
  }
  EXPECT_EQ(x.events, y.events);
  EXPECT_EQ(x.eventsDropped, y.eventsDropped);
  EXPECT_EQ(x.state, y.state);
  EXPECT_EQ(x.error, y.error);
  EXPECT_EQ(x.failedRank, y.failedRank);
}

TEST(Export, RecordingRoundTripsEverything) {
  BenchReport r = syntheticReport();
  r.error = "interrupted";
  r.rows[1].result.state = RunState::Failed;
  r.rows[1].result.failedRank = 2;
  r.rows[1].result.request.collective = Collective::Broadcast;
  r.rows[1].result.request.dtype = DataType::BFloat16;
  r.rows[1].result.request.stallTimeout = std::chrono::milliseconds(1234);
  r.rows[1].result.events[3].provenance = ~uint64_t{0};  // all 64 ranks
  r.rows[1].result.events[4].tNs = -42;
  r.rows[1].result.events[5].clock = ClockSource::Device;
  r.config.telemetry = TelemetryLevel::Steps;
  r.config.op = RedOp::Max;
  r.config.check = 3;
  r.rows[1].result.request.check = 5;
  r.rows[1].result.request.window = 8;
  r.config.window = 8;
  const std::string path = ::testing::TempDir() + "export_rec_" + std::to_string(::getpid());
  writeTextFile(path, recordingJson(r));
  const BenchReport back = readRecording(path);
  std::remove(path.c_str());

  EXPECT_EQ(back.error, r.error);
  EXPECT_EQ(back.modelSource, r.modelSource);
  EXPECT_EQ(back.model.alpha, r.model.alpha);
  EXPECT_EQ(back.model.beta, r.model.beta);
  EXPECT_EQ(back.model.gamma, r.model.gamma);
  EXPECT_EQ(back.config.minBytes, r.config.minBytes);
  EXPECT_EQ(back.config.maxBytes, r.config.maxBytes);
  EXPECT_EQ(back.config.stepFactor, r.config.stepFactor);
  EXPECT_EQ(back.config.algorithms, r.config.algorithms);
  EXPECT_EQ(back.config.telemetry, r.config.telemetry);
  EXPECT_EQ(back.config.op, r.config.op);
  EXPECT_EQ(back.config.check, 3u);
  EXPECT_EQ(back.config.window, 8);
  EXPECT_EQ(back.rows[1].result.request.window, 8);
  EXPECT_EQ(back.rows[0].result.request.window, 1);
  EXPECT_EQ(back.config.jsonPath, r.config.jsonPath);
  EXPECT_EQ(back.config.maxEvents, r.config.maxEvents);
  ASSERT_EQ(back.workers.size(), r.workers.size());
  EXPECT_EQ(back.workers[2].pid, r.workers[2].pid);
  ASSERT_EQ(back.rows.size(), r.rows.size());
  for (size_t i = 0; i < r.rows.size(); ++i) expectSameRow(back.rows[i], r.rows[i]);
  // And the text is stable: writing what was read gives the same recording.
  EXPECT_EQ(recordingJson(back), recordingJson(r));
}

// A training run's recording: the first run trained, each rank's compute spans of its first
// iteration (a training step) beside its chunk events: forward layers 0 and 1, backward 1
// and 0, the optimizer.
BenchReport trainingReport() {
  BenchReport r = syntheticReport();
  TrainConfig t;
  t.layers = {16, 8, 3};
  t.steps = 2;
  t.batch = 8;
  t.bucketBytes = 64;
  t.overlap = false;
  t.lr = 0.125f;
  RunResult& res = r.rows[0].result;
  res.request.train = t;
  const EventKind kinds[] = {EventKind::ComputeForward, EventKind::ComputeForward,
                             EventKind::ComputeBackward, EventKind::ComputeBackward,
                             EventKind::ComputeOptimizer};
  const uint32_t layer[] = {0, 1, 1, 0, 0};
  for (int rank = 0; rank < kRanks; ++rank) {
    for (int i = 0; i < 5; ++i) {
      TelemetryEvent e;
      e.runId = res.runId;
      e.rank = rank;
      e.kind = kinds[i];
      e.chunk = layer[i];
      e.offset = 7'000 + static_cast<uint64_t>(i);
      e.tNs = res.events.front().tNs + 10'000 * (i + 1) + rank;
      res.events.push_back(e);
    }
  }
  std::stable_sort(res.events.begin(), res.events.end(),
                   [](const TelemetryEvent& a, const TelemetryEvent& b) { return a.tNs < b.tNs; });
  return r;
}

TEST(Export, ATrainingRecordingRoundTripsItsComputeEventsAndItsTraining) {
  const BenchReport r = trainingReport();
  const std::string text = recordingJson(r);
  const BenchReport back = parseRecording(text);
  ASSERT_EQ(back.rows.size(), 2u);
  ASSERT_TRUE(back.rows[0].result.request.train.has_value());
  EXPECT_EQ(*back.rows[0].result.request.train, *r.rows[0].result.request.train);
  EXPECT_FALSE(back.rows[1].result.request.train.has_value()) << "a bench run stays one";
  for (size_t i = 0; i < r.rows.size(); ++i) expectSameRow(back.rows[i], r.rows[i]);
  EXPECT_EQ(recordingJson(back), text);
  // A bad training field is named by its path.
  std::string bad = text;
  bad.replace(bad.find("\"sync\":\"allreduce\""), 18, "\"sync\":\"gossip\"");
  try {
    parseRecording(bad);
    ADD_FAILURE() << "a bad sync mode was read";
  } catch (const RecordingError& e) {
    EXPECT_NE(std::string(e.what()).find("recording.runs[0].request.train.sync"), std::string::npos)
        << e.what();
  }
}

// Recordings written before training was recorded hold no "train" and read as bench runs.
TEST(Export, RecordingsWithoutTrainingReadAsBenchRuns) {
  const std::string text = recordingJson(syntheticReport());
  EXPECT_EQ(text.find("\"train\""), std::string::npos);
  for (const BenchRow& row : parseRecording(text).rows)
    EXPECT_FALSE(row.result.request.train.has_value());
}

TEST(Export, TraceOfATrainingRecordingHasAComputeLanePerRank) {
  TraceStats stats;
  const ParsedTrace t = parseTrace(chromeTraceJson(trainingReport(), &stats));
  EXPECT_EQ(stats.computeSlices, 5u * kRanks);
  std::map<int64_t, std::vector<std::string>> compute;  // pid -> slice names
  for (const nlohmann::json* e : t.slices) {
    if (laneOf(t, *e) == "compute") compute[e->at("pid").get<int64_t>()].push_back(e->at("name"));
    if (laneOf(t, *e) == "compute") {
      EXPECT_EQ(e->at("cat"), "compute");
      EXPECT_NEAR(e->at("dur").get<double>(), 7.0, 0.01);
    }
  }
  ASSERT_EQ(compute.size(), static_cast<size_t>(kRanks));
  for (const auto& [pid, names] : compute) {
    EXPECT_EQ(names,
              (std::vector<std::string>{"forward layer 0", "forward layer 1", "backward layer 1",
                                        "backward layer 0", "optimizer"}))
        << "pid " << pid;
  }
  bool named = false;
  for (const auto& [pid, name] : t.processNames) named |= name == "allreduce-lab train";
  EXPECT_TRUE(named);
  EXPECT_EQ(t.root["otherData"]["compute_slices"], 5 * kRanks);
}

TEST(Export, VersionOneRecordingsReadWithEveryEventOnTheHostClock) {
  BenchReport r = syntheticReport();
  for (auto& row : r.rows) {
    for (TelemetryEvent& e : row.result.events) e.clock = ClockSource::Host;
  }
  std::string old = recordingJson(r);
  // Version 1: no clock column, no clock at the end of an event line.
  old.replace(old.find("\"version\":2"), 11, "\"version\":1");
  old.replace(old.find(",\"clock\"]"), 9, "]");
  for (size_t p = old.find(" host\\n"); p != std::string::npos; p = old.find(" host\\n", p)) {
    old.erase(p, 5);
  }
  const BenchReport back = parseRecording(old);
  ASSERT_EQ(back.rows.size(), r.rows.size());
  for (size_t i = 0; i < r.rows.size(); ++i)
    EXPECT_EQ(back.rows[i].result.events, r.rows[i].result.events);
  // A version 1 line with a clock has a field too many.
  std::string extra = recordingJson(r);
  extra.replace(extra.find("\"version\":2"), 11, "\"version\":1");
  extra.replace(extra.find(",\"clock\"]"), 9, "]");
  EXPECT_THROW(parseRecording(extra), RecordingError);
}

TEST(Export, RecordingsWrittenBeforeTheSweepListsStillRead) {
  BenchReport r = syntheticReport();
  r.config.sliceSizes = {65536};
  r.config.inflights = {2};
  std::string old = recordingJson(r);
  // Version 1 files from before the sweep over slices: one chunk_bytes and one inflight in
  // the config, no ring order anywhere, no data plane, no effective run.
  const auto cut = [&](const std::string& from, const std::string& to) {
    const size_t p = old.find(from);
    ASSERT_NE(p, std::string::npos) << from;
    old.replace(p, from.size(), to);
  };
  for (int i = 0; i < 2; ++i) {
    cut("\"effective\":{\"ranks\":0,\"ranks_per_host\":0,\"radix\":0,\"ring_order\":[],"
        "\"steps\":0,\"bytes_sent\":[]},",
        "");
  }
  cut("\"slice_sizes\":[65536],\"inflights\":[2],\"ring_order\":[],",
      "\"chunk_bytes\":65536,\"inflight\":2,");
  for (int i = 0; i < 2; ++i) cut("\"ring_order\":[],", "");
  cut("\"data_plane\":\"auto\",", "");
  // Nor a window (protocol 15): every ring took its slices one by one.
  for (size_t p = old.find("\"window\":1,"); p != std::string::npos;
       p = old.find("\"window\":1,")) {
    old.erase(p, std::string("\"window\":1,").size());
  }
  const BenchReport back = parseRecording(old);
  EXPECT_EQ(back.config.sliceSizes, (std::vector<uint64_t>{65536}));
  EXPECT_EQ(back.config.inflights, (std::vector<int>{2}));
  EXPECT_TRUE(back.config.ringOrder.empty());
  EXPECT_EQ(back.config.window, 1);
  ASSERT_EQ(back.rows.size(), 2u);
  EXPECT_EQ(back.rows[1].result.request.window, 1);
  EXPECT_EQ(back.rows[1].result.events, r.rows[1].result.events);
}

// Before -c counted iterations, "check" alone said whether the last one was checked.
TEST(Export, RecordingsWrittenBeforeCheckedIterationsWereCountedStillRead) {
  BenchReport r = syntheticReport();
  r.config.check = 1;
  r.rows[0].result.request.check = 1;
  r.rows[1].result.request.check = 0;
  std::string old = recordingJson(r);
  for (const char* n : {"\"check_iterations\":1,", "\"check_iterations\":0,"}) {
    for (size_t p = old.find(n); p != std::string::npos; p = old.find(n)) {
      old.erase(p, std::string(n).size());
    }
  }
  ASSERT_EQ(old.find("check_iterations"), std::string::npos);
  const BenchReport back = parseRecording(old);
  EXPECT_EQ(back.config.check, 1u);
  ASSERT_EQ(back.rows.size(), 2u);
  EXPECT_EQ(back.rows[0].result.request.check, 1u);
  EXPECT_EQ(back.rows[1].result.request.check, 0u);
}

TEST(Export, RecordingsWrittenBeforeTheSpreadStillRead) {
  BenchReport r = syntheticReport();
  r.rows[0].result.iterationUs = {30.0, 10.0, 20.0};
  std::string old = recordingJson(r);
  // Files from before the metrics carried the spread of the iteration times: the reader
  // computes it from iteration_us.
  for (const char* f : {"\"p50_us\":1.5,\"p90_us\":2.25,\"p99_us\":3.125,\"max_us\":4.0625",
                        "\"p50_us\":2.5,\"p90_us\":3.25,\"p99_us\":4.125,\"max_us\":5.0625"}) {
    const size_t p = old.find(std::string(",") + f);
    ASSERT_NE(p, std::string::npos) << f;
    old.erase(p, std::strlen(f) + 1);
  }
  ASSERT_EQ(old.find("p50_us"), std::string::npos);
  const BenchReport back = parseRecording(old);
  ASSERT_EQ(back.rows.size(), 2u);
  const IterationSpread& s = back.rows[0].metrics.spread;
  EXPECT_EQ(s.p50Us, 20.0);
  EXPECT_EQ(s.p90Us, 30.0);
  EXPECT_EQ(s.p99Us, 30.0);
  EXPECT_EQ(s.maxUs, 30.0);
  EXPECT_EQ(back.rows[1].metrics.spread.p50Us, 240.0 + kRanks - 1);
  EXPECT_EQ(back.rows[0].metrics.timeUs, r.rows[0].metrics.timeUs);
}

TEST(Export, RecordingReaderRefusesWhatItCannotTrust) {
  const std::string good = recordingJson(syntheticReport());
  auto errorOf = [](const std::string& text) -> std::string {
    try {
      parseRecording(text);
    } catch (const RecordingError& e) {
      return e.what();
    }
    return "";
  };
  std::string v3 = good;
  v3.replace(v3.find("\"version\":2"), 11, "\"version\":3");
  EXPECT_NE(errorOf(v3).find("version 3 is not supported"), std::string::npos) << errorOf(v3);
  std::string badClock = good;
  badClock.replace(badClock.find(" host\\n"), 5, " gpus");
  EXPECT_NE(errorOf(badClock).find("clock: neither host nor device: 'gpus'"), std::string::npos)
      << errorOf(badClock);
  EXPECT_NE(errorOf(good.substr(0, good.size() / 2)).find("not valid JSON"), std::string::npos);
  std::string noDtype = good;
  noDtype.replace(noDtype.find("\"dtype\":\"float\""), 15, "\"dtypo\":\"float\"");
  EXPECT_NE(errorOf(noDtype).find("recording.config.dtype: missing"), std::string::npos)
      << errorOf(noDtype);
  std::string badKind = good;
  badKind.replace(badKind.find(" send_start "), 12, " send_stort ");
  EXPECT_NE(errorOf(badKind).find("unknown event kind 'send_stort'"), std::string::npos)
      << errorOf(badKind);
  std::string badSpread = good;
  const std::string p99 = "\"p99_us\":3.125";
  badSpread.replace(badSpread.find(p99), p99.size(), "\"p99_us\":\"3.1\"");
  EXPECT_NE(errorOf(badSpread).find("recording.runs[0].metrics.p99_us: expected a number"),
            std::string::npos)
      << errorOf(badSpread);
  EXPECT_NE(errorOf("{\"format\":\"something-else\",\"version\":1}").find("format"),
            std::string::npos);
  EXPECT_THROW(readRecording("/nonexistent/dir/rec.json"), RecordingError);
  EXPECT_THROW(writeTextFile("/nonexistent/dir/out.json", "x"), ConfigError);
}

}  // namespace
}  // namespace arl
