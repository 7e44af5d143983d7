// The network's shaping and the prediction's method in every export: the results JSON's
// config, the CSV's last column, the recording (per run and in the config, read back field by
// field, and absent from older files), and the trace's names.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "export/export.h"

namespace arl {
namespace {

constexpr int kRanks = 4;

LinkShaping classroomNetwork() {
  LinkShaping s;
  s.portBytesPerSecond = 200e6;
  s.addedLatencySeconds = 50e-6;
  s.rankPortBytesPerSecond[3] = 50e6;
  s.linkBytesPerSecond[{1, 2}] = 25e6;
  return s;
}

WorkerInfo worker(int rank) {
  WorkerInfo w;
  w.rank = rank;
  w.name = "w" + std::to_string(rank);
  w.host = "vm";
  w.pid = 4000 + rank;
  return w;
}

// Two runs of a ring all-reduce on 4 ranks, shaped as `shaping`; the first predicted by the
// closed form, the second without a prediction.
BenchReport shapedReport(const LinkShaping& shaping) {
  BenchReport r;
  r.config.workers = kRanks;
  r.config.shaping = shaping;
  for (int rank = 0; rank < kRanks; ++rank) r.workers.push_back(worker(rank));
  for (int i = 0; i < 2; ++i) {
    BenchRow row;
    row.sizeBytes = uint64_t{1} << (20 + i);
    row.count = row.sizeBytes / 4;
    row.startNs = 1'000'000 + i * 10'000'000;
    row.endNs = row.startNs + 5'000'000;
    RunResult& res = row.result;
    res.runId = 11 + static_cast<uint64_t>(i);
    res.state = RunState::Done;
    res.nranks = kRanks;
    res.workers = r.workers;
    res.request.count = row.count;
    res.request.shaping = shaping;
    res.iterationUs = {5000.0 + i};
    res.timeUs = 5000.0 + i;
    row.predictedUs = i == 0 ? 4200.5 : std::numeric_limits<double>::quiet_NaN();
    if (i == 0) row.predictedBy = PredictionMethod::ClosedForm;
    r.rows.push_back(row);
  }
  return r;
}

// Replaces the first `from` in `text` by `to`; fails the test when it is not there.
void replaceOnce(std::string& text, const std::string& from, const std::string& to) {
  const size_t p = text.find(from);
  ASSERT_NE(p, std::string::npos) << from;
  text.replace(p, from.size(), to);
}

TEST(ShapingExport, ResultsJsonConfigHoldsTheShapingFieldByField) {
  const nlohmann::json v =
      nlohmann::json::parse(benchResultsJson(shapedReport(classroomNetwork())));
  const nlohmann::json& s = v.at("config").at("shaping");
  EXPECT_EQ(s.at("port_bytes_per_s").get<double>(), 200e6);
  EXPECT_EQ(s.at("added_latency_s").get<double>(), 50e-6);
  ASSERT_EQ(s.at("slow_ranks").size(), 1u);
  EXPECT_EQ(s.at("slow_ranks")[0].at("rank").get<int>(), 3);
  EXPECT_EQ(s.at("slow_ranks")[0].at("bytes_per_s").get<double>(), 50e6);
  ASSERT_EQ(s.at("slow_links").size(), 1u);
  EXPECT_EQ(s.at("slow_links")[0].at("from").get<int>(), 1);
  EXPECT_EQ(s.at("slow_links")[0].at("to").get<int>(), 2);
  EXPECT_EQ(s.at("slow_links")[0].at("bytes_per_s").get<double>(), 25e6);

  // Unshaped: every part says so, none is left out.
  const nlohmann::json u = nlohmann::json::parse(benchResultsJson(shapedReport({})));
  const nlohmann::json& none = u.at("config").at("shaping");
  EXPECT_EQ(none.at("port_bytes_per_s").get<double>(), 0);
  EXPECT_EQ(none.at("added_latency_s").get<double>(), 0);
  EXPECT_TRUE(none.at("slow_ranks").empty());
  EXPECT_TRUE(none.at("slow_links").empty());
}

TEST(ShapingExport, CsvEndsWithThePredictionsMethodThenTheBackend) {
  const std::string csv = benchResultsCsv(shapedReport({}));
  std::vector<std::string> lines;
  for (size_t p = 0, e; p < csv.size(); p = e + 1) {
    e = csv.find('\n', p);
    lines.push_back(csv.substr(p, e - p));
  }
  ASSERT_EQ(lines.size(), 3u);
  // The field before the last one (the backend, added after it).
  const auto method = [](const std::string& l) {
    const size_t last = l.rfind(',');
    const size_t before = l.rfind(',', last - 1);
    return l.substr(before + 1, last - before - 1);
  };
  EXPECT_EQ(method(lines[0]), "predicted_method") << lines[0];
  EXPECT_EQ(method(lines[1]), "closed form") << lines[1];
  EXPECT_EQ(method(lines[2]), "") << lines[2];
  EXPECT_TRUE(lines[0].ends_with(",backend")) << lines[0];
  EXPECT_TRUE(lines[1].ends_with(",cpu")) << lines[1];
  const auto commas = [](const std::string& l) { return std::count(l.begin(), l.end(), ','); };
  EXPECT_EQ(commas(lines[0]), commas(lines[1]));
  EXPECT_EQ(commas(lines[0]), commas(lines[2]));
}

TEST(ShapingExport, RecordingKeepsEachRunsShapingAndPredictionMethod) {
  BenchReport r = shapedReport(classroomNetwork());
  // A run shaped otherwise than the session (a recording may join sessions): each run keeps
  // its own.
  LinkShaping other;
  other.rankPortBytesPerSecond[0] = 10e6;
  other.linkBytesPerSecond[{3, 0}] = 5e6;
  r.rows[1].result.request.shaping = other;
  r.rows[1].predictedBy = PredictionMethod::Simulation;
  const BenchReport back = parseRecording(recordingJson(r));
  EXPECT_EQ(back.config.shaping, classroomNetwork());
  ASSERT_EQ(back.rows.size(), 2u);
  EXPECT_EQ(back.rows[0].result.request.shaping, classroomNetwork());
  EXPECT_EQ(back.rows[1].result.request.shaping, other);
  EXPECT_EQ(back.rows[0].predictedBy, PredictionMethod::ClosedForm);
  EXPECT_EQ(back.rows[1].predictedBy, PredictionMethod::Simulation);
  EXPECT_EQ(recordingJson(back), recordingJson(r));

  // The shared-memory plane's methods, with the streaming rates or the cache-resident ones.
  for (PredictionMethod m :
       {PredictionMethod::SharedMemory, PredictionMethod::SharedMemoryCached}) {
    r.rows[1].predictedBy = m;
    EXPECT_EQ(parseRecording(recordingJson(r)).rows[1].predictedBy, m) << toString(m);
  }

  // ... and the parameters of both.
  r.model.shmCopy = 1.0 / 16e9;
  r.model.cores = 2;
  r.model.shmCopyCached = 1.0 / 30e9;
  r.model.gammaCached = 1.0 / 15e9;
  r.model.llcBytes = uint64_t{32} << 20;
  r.model.shmSend = 1.0 / 11e9;
  r.model.shmSendFresh = 1.0 / 17e9;
  r.model.shmAlpha = 3.5e-6;
  const BenchReport model = parseRecording(recordingJson(r));
  EXPECT_EQ(model.model.shmCopy, r.model.shmCopy);
  EXPECT_EQ(model.model.shmSend, r.model.shmSend);
  EXPECT_EQ(model.model.shmSendFresh, r.model.shmSendFresh);
  EXPECT_EQ(model.model.shmAlpha, r.model.shmAlpha);
  EXPECT_EQ(model.model.shmCopyCached, r.model.shmCopyCached);
  EXPECT_EQ(model.model.gammaCached, r.model.gammaCached);
  EXPECT_EQ(model.model.llcBytes, r.model.llcBytes);

  r.rows[1].predictedBy.reset();
  EXPECT_FALSE(parseRecording(recordingJson(r)).rows[1].predictedBy.has_value());
}

TEST(ShapingExport, RecordingsWrittenBeforeShapingStillRead) {
  std::string old = recordingJson(shapedReport({}));
  const std::string unshaped =
      R"(,"shaping":{"port_bytes_per_s":0.0,"added_latency_s":0.0,"slow_ranks":[],"slow_links":[],)"
      R"("link_latencies":[]})";
  for (int i = 0; i < 3; ++i) replaceOnce(old, unshaped, "");  // the config and two runs
  replaceOnce(old, R"(,"predicted_method":"closed form")", "");
  replaceOnce(old, R"(,"predicted_method":null)", "");
  ASSERT_EQ(old.find("shaping"), std::string::npos);
  ASSERT_EQ(old.find("predicted_method"), std::string::npos);
  const BenchReport back = parseRecording(old);
  EXPECT_TRUE(back.config.shaping.empty());
  ASSERT_EQ(back.rows.size(), 2u);
  EXPECT_TRUE(back.rows[0].result.request.shaping.empty());
  EXPECT_FALSE(back.rows[0].predictedBy.has_value());
}

TEST(ShapingExport, RecordingReaderRefusesABadShapingNamingIt) {
  const std::string good = recordingJson(shapedReport(classroomNetwork()));
  auto errorOf = [](const std::string& text) -> std::string {
    try {
      parseRecording(text);
    } catch (const RecordingError& e) {
      return e.what();
    }
    return "";
  };
  struct Case {
    std::string from, to, says;
  };
  const Case cases[] = {
      {R"("port_bytes_per_s":200000000.0)", R"("port_bytes_per_s":-1)",
       "recording.config.shaping.port_bytes_per_s: rate -1 must be 0 (not shaped) or positive"},
      {R"("port_bytes_per_s":200000000.0)", R"("port_bytes_per_s":"fast")",
       "recording.config.shaping.port_bytes_per_s: expected a number, found a string"},
      {R"("added_latency_s":5e-05)", R"("added_latency_s":-0.5)",
       "recording.config.shaping.added_latency_s: latency -0.5 must be 0 or more seconds"},
      {R"({"rank":3,"bytes_per_s":50000000.0})", R"({"rank":64,"bytes_per_s":50000000.0})",
       "recording.config.shaping.slow_ranks[0].rank: 64 is out of range (accepted: 0..63)"},
      {R"({"rank":3,"bytes_per_s":50000000.0})", R"({"rank":3,"bytes_per_s":0})",
       "recording.config.shaping.slow_ranks[0].bytes_per_s: rate 0 must be positive"},
      {R"({"rank":3,"bytes_per_s":50000000.0})",
       R"({"rank":3,"bytes_per_s":1.0},{"rank":3,"bytes_per_s":2.0})",
       "recording.config.shaping.slow_ranks[1]: rank 3 is listed twice"},
      {R"({"from":1,"to":2,)", R"({"from":2,"to":2,)",
       "recording.config.shaping.slow_links[0]: link 2-2 joins a rank to itself"},
      {R"({"from":1,"to":2,)", R"({"to":2,)",
       "recording.config.shaping.slow_links[0].from: missing"},
      {R"("predicted_method":"closed form")", R"("predicted_method":"guess")",
       "recording.runs[0].predicted_method: unknown value 'guess'"},
  };
  for (const Case& c : cases) {
    std::string bad = good;
    replaceOnce(bad, c.from, c.to);
    EXPECT_NE(errorOf(bad).find(c.says), std::string::npos) << c.says << "\n" << errorOf(bad);
  }
  // The runs' shaping is checked alike.
  std::string badRun = good;
  const std::string rate = R"("port_bytes_per_s":200000000.0)";
  badRun.replace(badRun.find(rate, badRun.find("\"runs\"")), rate.size(),
                 R"("port_bytes_per_s":null)");
  EXPECT_NE(errorOf(badRun).find("recording.runs[0].request.shaping.port_bytes_per_s: rate null"),
            std::string::npos)
      << errorOf(badRun);
}

TEST(ShapingExport, TraceOfAShapedSessionNamesItsNetwork) {
  const nlohmann::json shaped =
      nlohmann::json::parse(chromeTraceJson(shapedReport(classroomNetwork())));
  const std::string network = describeShaping(classroomNetwork());
  std::map<int, std::string> names;
  std::vector<std::string> runNetworks;
  for (const nlohmann::json& e : shaped.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "process_name") {
      names[e.at("pid").get<int>()] = e.at("args").at("name").get<std::string>();
    }
    if (e.at("ph") == "X" && e.at("cat") == "runs") {
      runNetworks.push_back(e.at("args").at("network").get<std::string>());
    }
  }
  EXPECT_EQ(names[1000], "allreduce-lab bench (network: " + network + ")");
  EXPECT_EQ(names[1], "rank 0 (vm, pid 4000, port 200 MB/s)");
  EXPECT_EQ(names[4], "rank 3 (vm, pid 4003, port 50 MB/s)");
  EXPECT_EQ(runNetworks, (std::vector<std::string>{network, network}));
  EXPECT_EQ(shaped.at("otherData").at("network").get<std::string>(), network);

  // Unshaped, the names stay plain and the metadata says so.
  const nlohmann::json plain = nlohmann::json::parse(chromeTraceJson(shapedReport({})));
  for (const nlohmann::json& e : plain.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "process_name") {
      const std::string name = e.at("args").at("name").get<std::string>();
      EXPECT_EQ(name.find("network"), std::string::npos) << name;
      EXPECT_EQ(name.find("port"), std::string::npos) << name;
    }
  }
  EXPECT_EQ(plain.at("otherData").at("network").get<std::string>(), "unshaped");

  // Runs shaped differently: the bench process says so, each run names its own.
  BenchReport mixed = shapedReport(classroomNetwork());
  mixed.rows[1].result.request.shaping = {};
  const std::string text = chromeTraceJson(mixed);
  EXPECT_NE(text.find("allreduce-lab bench (network: shaped differently per run"),
            std::string::npos);
  EXPECT_NE(text.find(R"("network":"unshaped")"), std::string::npos);
}

// A named topology's links (their own latencies) and its name travel through the results JSON
// and the recording, and a file without them reads as none.
TEST(ShapingExport, TopologyAndLinkLatenciesRoundTrip) {
  LinkShaping torus = classroomNetwork();
  torus.linkLatencySeconds[{0, 3}] = 4e-6;
  torus.linkLatencySeconds[{3, 0}] = 2e-6;
  BenchReport r = shapedReport(torus);
  r.config.topology = "torus:2x2@100M";
  const nlohmann::json v = nlohmann::json::parse(benchResultsJson(r));
  EXPECT_EQ(v.at("config").at("topology").get<std::string>(), "torus:2x2@100M");
  const nlohmann::json& lat = v.at("config").at("shaping").at("link_latencies");
  ASSERT_EQ(lat.size(), 2u);
  EXPECT_EQ(lat[0].at("from").get<int>(), 0);
  EXPECT_EQ(lat[0].at("to").get<int>(), 3);
  EXPECT_EQ(lat[0].at("latency_s").get<double>(), 4e-6);
  const BenchReport back = parseRecording(recordingJson(r));
  EXPECT_EQ(back.config.topology, "torus:2x2@100M");
  EXPECT_EQ(back.config.shaping, torus);
  EXPECT_EQ(back.rows[0].result.request.shaping, torus);
  const BenchReport plain = parseRecording(recordingJson(shapedReport(classroomNetwork())));
  EXPECT_TRUE(plain.config.topology.empty());
  EXPECT_TRUE(plain.config.shaping.linkLatencySeconds.empty());
}

}  // namespace
}  // namespace arl
