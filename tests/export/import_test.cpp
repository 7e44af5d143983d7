// nccl-tests' JSON written by bench (-J) and read back, and the importers of nccl-tests' JSON
// and table and of NCCL Inspector's JSON lines, on the samples of tests/data/ (written for
// these tests from the formats' documentation and nccl-tests' source), and their refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "export/json.h"
#include "export/nccl_tests.h"
#include "json_fuzz.h"

namespace arl {
namespace {

std::string dataPath(const std::string& name) {
  return std::string(ARL_SOURCE_DIR) + "/tests/data/" + name;
}

std::string readData(const std::string& name) {
  std::ifstream f(dataPath(name), std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The message of the ImportError that `f` throws ("" when it throws none).
template <typename F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const ImportError& e) {
    return e.what();
  }
  return "";
}

TEST(ImportText, PlainTableOfFourRanksOnTwoHosts) {
  const BenchReport r = importFile(dataPath("nccl_tests_allreduce_2hosts.txt"));
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_EQ(r.rows[0].sizeBytes, 1024u);
  EXPECT_EQ(r.rows[2].sizeBytes, 1048576u);
  EXPECT_EQ(r.rows[2].count, 262144u);
  // The out-of-place figures, as printed.
  EXPECT_DOUBLE_EQ(r.rows[2].metrics.timeUs, 100.0);
  EXPECT_DOUBLE_EQ(r.rows[2].metrics.algbwGBps, 10.49);
  EXPECT_DOUBLE_EQ(r.rows[2].metrics.busbwGBps, 15.73);
  EXPECT_EQ(r.rows[2].result.request.collective, Collective::AllReduce);
  EXPECT_EQ(r.rows[2].result.request.iterations, 20);
  EXPECT_EQ(r.rows[2].result.nranks, 4);
  EXPECT_TRUE(r.rows[2].result.events.empty());
  EXPECT_TRUE(std::isnan(r.rows[2].predictedUs));
  ASSERT_EQ(r.workers.size(), 4u);
  EXPECT_EQ(r.workers[3].host, "node-b");
  EXPECT_EQ(r.workers[3].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(r.config.algorithms.front(), "nccl-tests (2 hosts, NVIDIA H100 80GB HBM3)");
  EXPECT_TRUE(isImportedLabel(r.config.algorithms.front()));
  EXPECT_FALSE(isImportedLabel("ring"));
  EXPECT_NE(r.source.find("nccl-tests 2.19.6"), std::string::npos) << r.source;
  EXPECT_NE(r.source.find("NCCL 2.23.4"), std::string::npos) << r.source;
  EXPECT_NE(r.source.find("hosts node-a, node-b"), std::string::npos) << r.source;
  EXPECT_NE(r.source.find("nccl_tests_allreduce_2hosts.txt"), std::string::npos) << r.source;
}

TEST(ImportText, PerIterationTable) {
  const BenchReport r = importFile(dataPath("nccl_tests_allreduce_periter.txt"));
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(r.rows[1].metrics.timeUs, 40.0);
  EXPECT_DOUBLE_EQ(r.rows[1].metrics.busbwGBps, 1.64);
  EXPECT_EQ(r.config.algorithms.front(), "nccl-tests (gpu-box, NVIDIA H100 80GB HBM3)");
}

TEST(ImportJson, PlainResults) {
  const BenchReport r = importFile(dataPath("nccl_tests_allreduce.json"));
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[1].sizeBytes, 65536u);
  EXPECT_NEAR(r.rows[1].metrics.timeUs, 63.75, 1e-9);  // as the file says
  EXPECT_NEAR(r.rows[1].metrics.algbwGBps, 65536 / 63.75 / 1e3, 1e-9);
  EXPECT_TRUE(r.rows[1].result.iterationUs.empty());
  EXPECT_EQ(r.workers.size(), 2u);
  EXPECT_NE(r.source.find("NCCL 2.27.7"), std::string::npos) << r.source;
  EXPECT_NE(r.source.find("NVIDIA A100-SXM4-80GB"), std::string::npos) << r.source;
}

TEST(ImportJson, PerIterationResultsKeepEveryRanksTimes) {
  const BenchReport r = importFile(dataPath("nccl_tests_allreduce_periter.json"));
  ASSERT_EQ(r.rows.size(), 2u);
  const RunResult& res = r.rows[0].result;
  EXPECT_EQ(res.nranks, 4);
  ASSERT_EQ(res.iterationUs.size(), 4u);
  // Iteration 2: rank 1 was 8 us late.
  EXPECT_DOUBLE_EQ(res.iterationUs[2], 50.0 + 1 + 8 + 1.0);
  EXPECT_EQ(res.perRank.size(), 16u);
  EXPECT_DOUBLE_EQ(r.rows[0].metrics.spread.maxUs, 60.0);
  EXPECT_EQ(r.config.algorithms.front(), "nccl-tests (2 hosts, NVIDIA A100-SXM4-80GB)");
}

TEST(ImportInspector, OneRowPerSizeFromEveryRanksLines) {
  const BenchReport r = importFile(dataPath("inspector_allreduce.jsonl"));
  ASSERT_EQ(r.rows.size(), 2u);
  const SweepRow& small = r.rows[0];
  EXPECT_EQ(small.sizeBytes, 1048576u);
  // Per coll_sn the slower rank (rank 1, 3 us behind): 83, 85, 87.
  ASSERT_EQ(small.result.iterationUs.size(), 3u);
  EXPECT_DOUBLE_EQ(small.result.iterationUs[0], 83.0);
  EXPECT_DOUBLE_EQ(small.metrics.timeUs, 85.0);
  EXPECT_EQ(small.result.nranks, 2);
  EXPECT_EQ(small.result.request.collective, Collective::AllReduce);
  EXPECT_GT(small.metrics.busbwGBps, 0);
  EXPECT_EQ(r.config.algorithms.front(), "NCCL Inspector (gpu-node-7)");
  EXPECT_NE(r.source.find("Inspector output v4.0"), std::string::npos) << r.source;
}

TEST(ImportRefusal, TruncatedTableNamesItsLastLine) {
  std::string t = readData("nccl_tests_allreduce_2hosts.txt");
  t = t.substr(0, t.find("# Out of bounds"));
  const std::string why = refusal([&] { importText(t, "cut.txt"); });
  EXPECT_NE(why.find("cut.txt: line 17"), std::string::npos) << why;
  EXPECT_NE(why.find("truncated"), std::string::npos) << why;
}

TEST(ImportRefusal, BadFigureNamesLineAndColumn) {
  std::string t = readData("nccl_tests_allreduce_2hosts.txt");
  t.replace(t.find("100.00"), 6, "1x0.00");
  const std::string why = refusal([&] { importText(t, "bad.txt"); });
  EXPECT_NE(why.find("bad.txt: line 17: time: '1x0.00' is not a number"), std::string::npos) << why;
}

TEST(ImportRefusal, CutResultLineSaysHowManyColumns) {
  std::string t = readData("nccl_tests_allreduce_periter.txt");
  t.replace(t.find("    31.00"), 9, "");
  const std::string why = refusal([&] { importText(t, "short.txt"); });
  EXPECT_NE(why.find("line 12: expected 21 columns"), std::string::npos) << why;
}

TEST(ImportRefusal, TruncatedJsonSaysWhere) {
  const std::string t = readData("nccl_tests_allreduce.json");
  const std::string why = refusal([&] { importText(t.substr(0, t.size() / 2), "half.json"); });
  EXPECT_NE(why.find("half.json: not valid JSON"), std::string::npos) << why;
  EXPECT_NE(why.find("line"), std::string::npos) << why;
}

TEST(ImportRefusal, JsonFieldNamesItsPath) {
  std::string t = readData("nccl_tests_allreduce.json");
  t.replace(t.find("\"alg_bw\""), 8, "\"alg_bx\"");
  const std::string why = refusal([&] { importText(t, "f.json"); });
  EXPECT_NE(why.find("f.json: nccl-tests.results[0].out_of_place.alg_bw: missing"),
            std::string::npos)
      << why;
}

// `allreduce-lab import` writes what it imports as a recording, which holds 1 to 1e6 timed
// iterations per run: a table whose header lost its "iters:" (and that has no per-iteration
// times) used to be imported with 0 and written as a recording that replay refused (found by
// the nccl_tests_text and nccl_tests_json fuzz targets; their inputs are kept in
// tests/fuzz/corpus/).
TEST(ImportRefusal, AFileThatCannotSayHowManyIterationsWereTimedIsRefused) {
  std::string t = readData("nccl_tests_allreduce_2hosts.txt");
  const std::string counts = "warmup iters: 5 iters: 20 agg iters: 1";
  t.replace(t.find(counts), counts.size(), "");
  std::string why = refusal([&] { importText(t, "t.txt"); });
  EXPECT_NE(why.find("t.txt: line "), std::string::npos) << why;
  EXPECT_NE(why.find("says neither how many iterations were timed"), std::string::npos) << why;

  std::string j = readData("nccl_tests_allreduce.json");
  const std::string four = "\"iterations\": 4";
  j.replace(j.find(four), four.size(), "\"iterations\": 0");
  why = refusal([&] { importText(j, "j.json"); });
  EXPECT_NE(why.find("j.json: nccl-tests.results[0]: says neither"), std::string::npos) << why;
  j = readData("nccl_tests_allreduce.json");
  const std::string five = "\"warmup_iters\": 5";
  j.replace(j.find(five), five.size(), "\"warmup_iters\": 9000000");
  why = refusal([&] { importText(j, "w.json"); });
  EXPECT_NE(why.find("warmup_iters"), std::string::npos) << why;
}

// A per-process or per-iteration time that no recording can hold (more than 2^62 ns, or
// negative) is refused naming the result, the process and the iteration: llround turned 1e308
// us into INT64_MIN, and a negative iteration time was written as is, and the recordings
// `allreduce-lab import` wrote were refused (found by the nccl_tests_json fuzz target; its
// inputs are kept in tests/fuzz/corpus/nccl_tests_json/).
// A #wrong that is no count of elements (beyond 64 bits, or a fraction) is refused naming the
// result; converting 2.2e88 to an unsigned count was undefined (found by fuzz_nccl_tests_text).
TEST(ImportRefusal, AWrongCountThatIsNoCountIsRefused) {
  for (const char* bad : {"2.2e88", "1.5"}) {
    std::string j = readData("nccl_tests_allreduce_periter.json");
    const size_t at = j.find("\"nwrong\": 0");
    ASSERT_NE(at, std::string::npos);
    const size_t value = at + 10;
    j.replace(value, j.find_first_of(",\n }", value) - value, bad);
    const std::string why = refusal([&] { importText(j, "w.json"); });
    EXPECT_NE(why.find("w.json: result 1: a #wrong of "), std::string::npos) << bad << ": " << why;
    EXPECT_NE(why.find("is not a count of elements"), std::string::npos) << why;
  }
}

TEST(ImportRefusal, ATimeNoRecordingHoldsIsRefused) {
  for (const char* bad : {"1e308", "4.7e15", "-5"}) {
    std::string j = readData("nccl_tests_allreduce_periter.json");
    j.replace(j.find("50.5"), 4, bad);
    const std::string why = refusal([&] { importText(j, "p.json"); });
    EXPECT_NE(why.find("p.json: result 1: process 0's time of iteration 2, "), std::string::npos)
        << bad << ": " << why;
    EXPECT_NE(why.find("is not a duration a recording can hold"), std::string::npos) << why;
  }
  // The same for the time of an iteration (times_us), and NaN there.
  for (const char* bad : {"-1", "1e308", "NaN"}) {
    std::string j = readData("nccl_tests_allreduce_periter.json");
    const size_t times = j.find("\"times_us\"");
    const size_t first = j.find_first_of("0123456789", times);
    j.replace(first, j.find_first_of(",\n ]", first) - first, bad);
    const std::string why = refusal([&] { importText(j, "i.json"); });
    if (std::string(bad) == "NaN") {
      EXPECT_FALSE(why.empty()) << "NaN is not JSON: refused by the parser or as a duration";
      continue;
    }
    EXPECT_NE(why.find("i.json: result 1: the time of iteration 1, "), std::string::npos)
        << bad << ": " << why;
    EXPECT_NE(why.find("is not a duration a recording can hold"), std::string::npos) << why;
  }
  std::string j = readData("nccl_tests_allreduce_periter.json");
  j.replace(j.find("50.5"), 4, "4.6e15");  // just within
  const BenchReport r = importText(j, "p.json");
  EXPECT_EQ(parseRecording(recordingJson(r)).rows.size(), r.rows.size());
}

TEST(ImportRefusal, CollectiveTheLabLacks) {
  std::string t = readData("nccl_tests_allreduce_2hosts.txt");
  t.replace(t.find("starting: all_reduce_perf"), 25, "starting: alltoall_perf");
  const std::string why = refusal([&] { importText(t, "a2a.txt"); });
  EXPECT_NE(why.find("'alltoall_perf' runs a collective the lab does not have"), std::string::npos)
      << why;
}

TEST(ImportRefusal, InspectorLineNamesItsNumber) {
  std::string t = readData("inspector_allreduce.jsonl");
  const size_t second = t.find('\n') + 1;
  t.insert(second + 10, "}");
  std::string why = refusal([&] { importText(t, "insp.jsonl"); });
  EXPECT_NE(why.find("insp.jsonl: line 2: not valid JSON"), std::string::npos) << why;
  t = readData("inspector_allreduce.jsonl");
  t.replace(t.find("\"coll_exec_time_us\":80"), 22, "\"coll_exec_time_us\":\"80\"");
  why = refusal([&] { importText(t, "insp.jsonl"); });
  EXPECT_NE(why.find("line 1: inspector.coll_perf.coll_exec_time_us: expected a number"),
            std::string::npos)
      << why;
}

// Inspector's own bandwidths are taken as the file gives them (their mean per collective and
// size): one below zero, or not a number, is refused naming its line and field, where it was
// once written into a recording that the lab's reader then refused (found by fuzz_inspector_jsonl).
TEST(ImportRefusal, AnInspectorBandwidthBelowZeroIsRefused) {
  std::string t = readData("inspector_allreduce.jsonl");
  const size_t at = t.find("\"coll_busbw_gbs\":13.1072");
  ASSERT_NE(at, std::string::npos);
  t.replace(at, 24, "\"coll_busbw_gbs\":-13.1072");
  std::string why = refusal([&] { importText(t, "insp.jsonl"); });
  EXPECT_NE(why.find("insp.jsonl: line 1: inspector.coll_perf.coll_busbw_gbs: not a bandwidth (a "
                     "number, 0 or more)"),
            std::string::npos)
      << why;
  t = readData("inspector_allreduce.jsonl");
  const size_t second = t.find('\n') + 1;
  const size_t alg = t.find("\"coll_algobw_gbs\":", second);
  ASSERT_NE(alg, std::string::npos);
  t.insert(alg + 18, "-");
  why = refusal([&] { importText(t, "insp.jsonl"); });
  EXPECT_NE(why.find("line 2: inspector.coll_perf.coll_algobw_gbs: not a bandwidth"),
            std::string::npos)
      << why;
  // The figures the file gives, averaged, are what the row holds.
  const BenchReport r = importText(readData("inspector_allreduce.jsonl"), "insp.jsonl");
  ASSERT_FALSE(r.rows.empty());
  EXPECT_GE(r.rows.front().metrics.busbwGBps, 0);
}

TEST(ImportRefusal, BoundedRegularFilesOnly) {
  const std::string dir = ::testing::TempDir();
  EXPECT_NE(refusal([&] { importFile(dir); }).find("not a regular file"), std::string::npos);
  EXPECT_NE(refusal([&] { importFile(dir + "/no-such-file"); }).find("No such file"),
            std::string::npos);
  EXPECT_NE(refusal([&] { importFile("/dev/zero"); }).find("is a character device"),
            std::string::npos);
  EXPECT_NE(refusal([&] { importText("", "empty.txt"); }).find("no result line"),
            std::string::npos);
}

TEST(NcclIterStats, NcclTestsPercentiles) {
  std::vector<double> t;
  for (int i = 20; i >= 1; --i) t.push_back(i);
  const NcclIterStats s = ncclIterStats(t);
  EXPECT_EQ(s.minUs, 1);
  EXPECT_EQ(s.maxUs, 20);
  EXPECT_EQ(s.p50Us, 11);  // sorted[n / 2]
  EXPECT_EQ(s.p95Us, 19);  // sorted[ceil(19) - 1]
  EXPECT_EQ(s.p99Us, 20);
  EXPECT_DOUBLE_EQ(s.avgUs, 10.5);
  EXPECT_NEAR(s.stdevUs, std::sqrt(399.0 / 12), 1e-12);  // population stdev of 1..20
  EXPECT_NEAR(s.cvPct, s.stdevUs / 10.5 * 100, 1e-12);
}

// A session of two sizes on three ranks, rank 2 slow in iteration 1.
BenchReport labSession(bool inPlace) {
  BenchReport r;
  r.config.minBytes = 4096;
  r.config.maxBytes = 8192;
  r.config.stepFactor = 2;
  r.config.iters = 3;
  for (int k = 0; k < 3; ++k) {
    WorkerInfo w;
    w.rank = k;
    w.host = k < 2 ? "lab-a" : "lab-b";
    w.pid = 100 + k;
    w.backend = "cpu";
    r.workers.push_back(w);
  }
  for (uint64_t size : {4096u, 8192u}) {
    BenchRow row;
    row.sizeBytes = size;
    row.count = size / 4;
    RunResult& res = row.result;
    res.state = RunState::Done;
    res.nranks = 3;
    res.request.algorithm = "ring";
    res.request.iterations = 3;
    res.request.inPlace = inPlace;
    res.workers = r.workers;
    for (int rank = 0; rank < 3; ++rank) {
      for (uint32_t i = 0; i < 3; ++i) {
        const int64_t ns =
            static_cast<int64_t>(size) * 10 + rank * 1000 + (rank == 2 && i == 1 ? 9000 : 0);
        res.perRank.push_back({rank, i, ns, 0, std::nullopt});
      }
    }
    res.iterationUs = ncclIterTimes(res).timesUs;
    res.timeUs = (res.iterationUs[0] + res.iterationUs[1] + res.iterationUs[2]) / 3;
    row.metrics.bytes = size;
    row.metrics.timeUs = res.timeUs;
    row.metrics.algbwGBps = size / res.timeUs / 1e3;
    row.metrics.busbwGBps = row.metrics.algbwGBps * 4 / 3;
    r.rows.push_back(row);
  }
  return r;
}

TEST(NcclTestsJson, SchemaOfNcclTests2196) {
  NcclTestsJsonInfo info{{"allreduce-lab", "bench", "-J", "x.json", "-I", "1"},
                         {"NCCL_DEBUG=WARN"},
                         "2026-12-05 21:00:00",
                         "2026-12-05 21:00:03",
                         true};
  const nlohmann::json j = nlohmann::json::parse(ncclTestsJson(labSession(false), info));
  EXPECT_EQ(j["version"], 3);
  EXPECT_EQ(j["args"][2], "-J");
  EXPECT_EQ(j["config"]["per_iter_timing"], "true");  // nccl-tests writes booleans as strings
  EXPECT_EQ(j["config"]["step_factor"], 2);
  ASSERT_EQ(j["config"]["devices"].size(), 3u);
  EXPECT_EQ(j["config"]["devices"][2]["hostname"], "lab-b");
  EXPECT_EQ(j["config"]["devices"][2]["device_hex"], "cpu");
  const auto& res = j["results"][0];
  EXPECT_EQ(res["root"], "    -1");
  EXPECT_TRUE(res["out_of_place"].contains("nwrong"));
  const auto& pi = res["out_of_place_per_iter"];
  for (const char* k : {"skipped_iterations", "min_us", "max_us", "avg_us", "p50_us", "p95_us",
                        "p99_us", "stdev_us", "cv_pct", "times_us"}) {
    EXPECT_TRUE(pi.contains(k)) << k;
  }
  ASSERT_EQ(pi["per_process_max_times_us"].size(), 3u);
  EXPECT_NEAR(pi["per_process_max_times_us"][2][1].get<double>(), 51.96, 1e-9);
  EXPECT_NEAR(pi["max_us"].get<double>(), 51.96, 1e-9);
  EXPECT_FALSE(res.contains("in_place"));
  EXPECT_EQ(j["average_bus_bandwidth"]["okay"], "unchecked");
  EXPECT_EQ(j["end_time"], "2026-12-05 21:00:03");
}

TEST(NcclTestsJson, InPlaceRunsWriteInPlace) {
  NcclTestsJsonInfo info;
  const nlohmann::json j = nlohmann::json::parse(ncclTestsJson(labSession(true), info));
  EXPECT_TRUE(j["results"][0]["out_of_place"].is_null());
  EXPECT_TRUE(j["results"][0].contains("in_place"));
  EXPECT_FALSE(j["results"][0].contains("in_place_per_iter"));
}

TEST(NcclTestsJson, ImportOfTheLabsOwnFileGivesItsFigures) {
  const BenchReport lab = labSession(false);
  NcclTestsJsonInfo info{{"allreduce-lab", "bench", "-J", "x.json"}, {}, "", "", true};
  const BenchReport back = importNcclTestsJson(ncclTestsJson(lab, info), "x.json");
  ASSERT_EQ(back.rows.size(), lab.rows.size());
  for (size_t i = 0; i < lab.rows.size(); ++i) {
    const SweepRow& a = lab.rows[i];
    const SweepRow& b = back.rows[i];
    EXPECT_EQ(b.sizeBytes, a.sizeBytes);
    EXPECT_EQ(b.count, a.count);
    EXPECT_DOUBLE_EQ(b.metrics.timeUs, a.metrics.timeUs);
    EXPECT_DOUBLE_EQ(b.metrics.algbwGBps, a.metrics.algbwGBps);
    EXPECT_DOUBLE_EQ(b.metrics.busbwGBps, a.metrics.busbwGBps);
    EXPECT_EQ(b.result.iterationUs, a.result.iterationUs);
    ASSERT_EQ(b.result.perRank.size(), a.result.perRank.size());
    for (size_t k = 0; k < a.result.perRank.size(); ++k) {
      EXPECT_EQ(b.result.perRank[k].timeNs, a.result.perRank[k].timeNs);
    }
  }
  EXPECT_EQ(back.workers.size(), 3u);
  EXPECT_EQ(back.config.algorithms.front(),
            "nccl-tests (2 hosts, CPU, no GPU (allreduce-lab cpu backend))");
}

TEST(NcclTestsJson, ImportedSessionSurvivesARecording) {
  const BenchReport r = importFile(dataPath("nccl_tests_allreduce_periter.json"));
  const BenchReport back = parseRecording(recordingJson(r));
  EXPECT_EQ(back.source, r.source);
  ASSERT_EQ(back.rows.size(), r.rows.size());
  EXPECT_EQ(back.rows[1].result.request.algorithm, r.rows[1].result.request.algorithm);
  EXPECT_DOUBLE_EQ(back.rows[1].metrics.busbwGBps, r.rows[1].metrics.busbwGBps);
}

// Edits of each sample: every one is imported or refused with an ImportError, nothing else.
TEST(ImportFuzz, EditedSamplesAreImportedOrRefused) {
  std::mt19937 rng(7);
  for (const char* name : {"nccl_tests_allreduce_periter.json", "nccl_tests_allreduce_2hosts.txt",
                           "nccl_tests_allreduce_periter.txt", "inspector_allreduce.jsonl"}) {
    const std::string good = readData(name);
    for (int i = 0; i < 400; ++i) {
      const std::string t =
          i < 300 ? test::mutatedJson(good, i, rng) : test::randomText(i, rng, good.substr(0, 40));
      try {
        (void)importText(t, name);
      } catch (const ImportError&) {
      }
    }
  }
}

}  // namespace
}  // namespace arl
