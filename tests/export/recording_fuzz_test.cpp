// The recording reader on hostile input: truncated, mutated and random texts, and well-formed
// JSON with values out of range. It must end every one with a RecordingError (or a recording
// it can vouch for), never a crash, another exception, a hang or an allocation the text does
// not pay for. What it accepts must be safe to draw: the trace writer runs on it too.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "export/export.h"
#include "json_fuzz.h"

namespace arl {
namespace {

TelemetryEvent ev(EventKind k, uint32_t iter, int rank, uint32_t step, int peer, int64_t t) {
  TelemetryEvent e;
  e.runId = 3;
  e.iteration = iter;
  e.rank = rank;
  e.step = step;
  e.kind = k;
  e.peer = peer;
  e.chunk = static_cast<uint32_t>(rank);
  e.offset = 16 * static_cast<uint64_t>(rank);
  e.bytes = 64;
  e.tNs = t;
  e.provenance = uint64_t{1} << rank;
  return e;
}

// A small but complete recording: two ranks exchanging a slice, per-rank times, workers.
std::string goodRecording() {
  BenchReport r;
  r.config.algorithms = {"ring"};
  BenchRow row;
  row.sizeBytes = 128;
  row.count = 32;
  row.startNs = 1000;
  row.endNs = 90'000;
  RunResult& res = row.result;
  res.runId = 3;
  res.nranks = 2;
  res.state = RunState::Done;
  for (int rank = 0; rank < 2; ++rank) {
    WorkerInfo w;
    w.rank = rank;
    w.name = "w" + std::to_string(rank);
    w.host = "h";
    res.workers.push_back(w);
    const int peer = 1 - rank;
    res.events.push_back(ev(EventKind::SendStart, 0, rank, 0, peer, 2000 + rank));
    res.events.push_back(ev(EventKind::SendEnd, 0, rank, 0, peer, 3000 + rank));
    TelemetryEvent recv = ev(EventKind::RecvEnd, 0, peer, 0, rank, 4000 + rank);
    recv.chunk = static_cast<uint32_t>(rank);
    recv.offset = 16 * static_cast<uint64_t>(rank);
    recv.provenance = uint64_t{1} << rank;
    res.events.push_back(recv);
    res.events.push_back(ev(EventKind::StepEnd, 0, rank, 0, -1, 5000 + rank));
    res.events.push_back(ev(EventKind::IterationEnd, 0, rank, 1, -1, 6000 + rank));
    res.perRank.push_back({rank, 0, 5000, 0});
  }
  res.iterationUs = {5.0};
  r.workers = res.workers;
  r.rows.push_back(row);
  return recordingJson(r);
}

// Reads `text`; only a RecordingError may come out. Returns whether it was accepted.
bool readsCleanly(const std::string& text) {
  try {
    const BenchReport r = parseRecording(text);
    TraceStats stats;
    chromeTraceJson(r, &stats);  // what was accepted must be safe to draw
    benchResultsJson(r);
    return true;
  } catch (const RecordingError&) {
    return false;
  }
}

TEST(RecordingFuzz, TheGoodRecordingReadsAndDraws) {
  const std::string good = goodRecording();
  ASSERT_TRUE(readsCleanly(good));
  TraceStats stats;
  chromeTraceJson(parseRecording(good), &stats);
  EXPECT_EQ(stats.flows, 2u);
}

TEST(RecordingFuzz, EveryTruncationIsACleanError) {
  const std::string good = goodRecording();
  for (size_t n = 0; n + 2 < good.size(); ++n) {
    EXPECT_FALSE(readsCleanly(good.substr(0, n))) << "accepted the first " << n << " bytes";
  }
}

TEST(RecordingFuzz, MutatedRecordingsReadOrFailCleanly) {
  const std::string good = goodRecording();
  std::mt19937 rng(20261201);
  int accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string t = test::mutatedJson(good, i, rng);
    accepted += readsCleanly(t);
  }
  // Most edits break the text or a field; some (a digit of a timestamp) leave a readable one.
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, 3000);
}

TEST(RecordingFuzz, RandomTextIsACleanError) {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    const std::string t =
        test::randomText(i, rng, "{\"format\":\"allreduce-lab-recording\",\"version\":1,");
    EXPECT_FALSE(readsCleanly(t));
  }
}

std::string errorOf(const std::string& text) {
  try {
    parseRecording(text);
  } catch (const RecordingError& e) {
    return e.what();
  }
  return "";
}

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const size_t p = s.find(from);
  EXPECT_NE(p, std::string::npos) << from;
  if (p != std::string::npos) s.replace(p, from.size(), to);
  return s;
}

TEST(RecordingFuzz, ValuesOutOfRangeNameTheirPath) {
  const std::string good = goodRecording();
  struct Case {
    std::string from, to, error;
  };
  const Case cases[] = {
      {"\"nranks\":2", "\"nranks\":1e300", "recording.runs[0].nranks: expected an integer"},
      {"\"nranks\":2", "\"nranks\":65",
       "recording.runs[0].nranks: 65 is out of range (accepted: 0..64)"},
      {"\"event_count\":10", "\"event_count\":99999999999999",
       "recording.runs[0].events: holds 10 events, event_count says 99999999999999"},
      {"\"run_id\":3", "\"run_id\":-3", "recording.runs[0].run_id: -3 is out of range"},
      {"\"count\":32", "\"count\":18446744073709551616",
       "recording.runs[0].count: expected an integer"},
      {"\"per_rank\":[[0,0,5000,0]", "\"per_rank\":[[0,4294967295,5000,0]",
       "recording.runs[0].per_rank[0][1]: 4294967295 is out of range"},
      {"\"per_rank\":[[0,0,5000,0]", "\"per_rank\":[[0,0,5000]",
       "recording.runs[0].per_rank[0]: expected [rank, iteration, time_ns, wrong]"},
      {"0 0 0 send_start 0 1 ", "0 64 0 send_start 0 1 ",
       "recording.runs[0].events line 1: rank: bad number '64'"},
      {"0 0 0 send_start 0 1 ", "0 0 0 send_start 0 1 1 ",
       "recording.runs[0].events line 1: clock: neither host nor device: '1'"},
      {" host\\n", " host 7\\n", "recording.runs[0].events line 1: more than 12 fields"},
      {" host\\n", "\\n", "recording.runs[0].events line 1: expected 12 fields, found 11"},
      {"\"workers\":[{\"rank\":0", "\"workers\":[{\"rank\":\"0\"",
       "recording.workers[0].rank: expected an integer, found a string"},
      {"\"runs\":[", "\"runs\":\"x\",\"other\":[",
       "recording.runs: expected an array, found a string"},
  };
  for (const Case& c : cases) {
    const std::string e = errorOf(replaced(good, c.from, c.to));
    EXPECT_NE(e.find(c.error), std::string::npos) << c.to << " gave: " << e;
  }
  // A timestamp near the end of int64 would overflow the differences drawn from it.
  std::string far = good;
  const size_t p = far.find(" 2000 ");
  ASSERT_NE(p, std::string::npos);
  far.replace(p, 6, " 9223372036854775807 ");
  EXPECT_NE(errorOf(far).find("t_ns: bad number"), std::string::npos) << errorOf(far);
}

// Fields that are each in range but contradict one another are refused, naming the field.
TEST(RecordingFuzz, FieldsThatContradictEachOtherAreRefused) {
  const std::string good = goodRecording();
  struct Case {
    std::string from, to, error;
  };
  const Case cases[] = {
      {"\"nranks\":2", "\"nranks\":64",
       "recording.runs[0].nranks: 64 ranks, but the run's workers hold 2"},
      {"\"nranks\":2", "\"nranks\":0", "recording.runs[0].nranks: 0 ranks in a run that completed"},
      {"\"nranks\":2", "\"nranks\":1", "recording.runs[0].workers[1].rank: rank 1 in a run of 1"},
      {"\"time_us\":", "\"time_us\":-5,\"x\":", "recording.runs[0].time_us: -5.000000 is negative"},
      {"\"iteration_us\":[5", "\"iteration_us\":[-5",
       "recording.runs[0].iteration_us[0]: -5.000000 is negative"},
      {"\"iterations\":", "\"iterations\":-1,\"x\":",
       "recording.runs[0].request.iterations: -1 is out of range"},
      {"0 0 0 send_start 0 1 ", "0 9 0 send_start 0 1 ",
       "recording.runs[0].events line 1: rank 9 in a run of 2 ranks"},
      {"\"per_rank\":[[0,0,5000,0]", "\"per_rank\":[[7,0,5000,0]",
       "recording.runs[0].per_rank[0]: names a rank the run had not"},
  };
  EXPECT_TRUE(readsCleanly(good));
  for (const Case& c : cases) {
    ASSERT_NE(good.find(c.from), std::string::npos) << c.from;
    const std::string e = errorOf(replaced(good, c.from, c.to));
    EXPECT_NE(e.find(c.error), std::string::npos) << c.to << " gave: " << e;
  }
}

TEST(RecordingFuzz, NestingAndSizeAreBoundedBeforeAnythingIsBuilt) {
  const std::string deep = std::string(200'000, '[') + std::string(200'000, ']');
  EXPECT_NE(errorOf(deep).find("nested deeper than"), std::string::npos) << errorOf(deep);
  const std::string deepInside =
      replaced(goodRecording(), "\"error\":\"\"",
               "\"error\":" + std::string(100, '[') + std::string(100, ']'));
  EXPECT_NE(errorOf(deepInside).find("nested deeper than"), std::string::npos);
}

}  // namespace
}  // namespace arl
