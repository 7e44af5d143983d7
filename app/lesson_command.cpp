// allreduce-lab lesson: the lessons of resources/lessons/ (core/lesson/lesson.h) on the command
// line. `list` names them; `check` reads every one and has bench or train check each
// experiment's arguments; `run NAME` asks the question, runs the experiments on real local
// workers (each one an `allreduce-lab bench` or `allreduce-lab train` of its own, so that what a
// lesson runs is what a student can type), prints each option's measurement beside the model's
// prediction, which option won and by how much, whether that agrees with the article, and how
// steady the machine was.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_options.h"
#include "cli_util.h"
#include "commands.h"
#include "exec/collective_library.h"
#include "exec/run_request.h"
#include "export/export.h"
#include "export/train_export.h"
#include "lesson/lesson.h"
#include "lesson/train_result.h"
#include "lesson/verdict.h"
#include "model/model.h"
#include "runtime/process.h"
#include "schedule/schedule.h"
#include "train_options.h"

namespace arl::app {
namespace {

constexpr const char* kProg = "allreduce-lab lesson";
constexpr auto kExperimentTimeout = std::chrono::minutes(10);
constexpr int kSteadinessSamples = 6;

constexpr const char* kAbout =
    "Lessons that ask before they show (docs/lessons.md). `lesson list` names them, one per "
    "line; `lesson run NAME` prints the question and its options, runs the lesson's experiments "
    "on local worker processes (each an allreduce-lab bench or train run, its command line "
    "printed), then each option's measurement beside the cost model's prediction, which option "
    "won and by what margin, and whether that agrees with the article's answer; the machine's "
    "steadiness is measured before and after, and a verdict on an unsteady machine is said to "
    "be untrusted. `lesson check` reads every lesson and has bench or train check each "
    "experiment. Lessons are read from --lessons DIR, else $ARL_LESSONS, else the installed or "
    "the checkout's resources/lessons.\n"
    "Exit status: 0 when the lesson ran and agrees (run) or every lesson is valid (check); 1 "
    "when it does not agree or a run failed; 2 on bad arguments or an invalid lesson.";

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& a : v) s += (s.empty() ? "" : " ") + a;
  return s;
}

// What `command` (bench or train, its Options class `O`) makes of `args`, checked as the command
// checks them (UsageError naming the flag).
template <typename O>
auto commandArgsOf(const char* command, const std::vector<std::string>& args) {
  CLI::App app;
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::vector<std::string> line = {command};
  line.insert(line.end(), args.begin(), args.end());
  O options(app, line);
  std::vector<std::string> reversed(line.rbegin(), line.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    throw UsageError{e.what()};
  }
  return options.check();
}

BenchArgs benchArgsOf(const std::vector<std::string>& args) {
  return commandArgsOf<BenchOptions>("bench", args);
}

void checkBenchExperiment(const Lesson& l, const std::vector<std::string>& args) {
  const BenchArgs a = benchArgsOf(args);
  // The determinism lesson compares algorithms on the same inputs within one experiment.
  const bool acrossAlgorithms = l.by == DecideBy::Value && l.quantity == Quantity::Determinism;
  if (acrossAlgorithms && (a.cfg.algorithms.size() < 2 || !a.cfg.randomData)) {
    throw UsageError{
        "a determinism experiment runs two or more algorithms (--algo A,B) on "
        "random data (--data random)"};
  }
  if (a.sizes.size() != 1 || (a.cfg.algorithms.size() != 1 && !acrossAlgorithms) ||
      a.cfg.sliceSizes.size() > 1 || a.cfg.inflights.size() > 1) {
    throw UsageError{"an experiment is one run: one size, one algorithm, one slice size"};
  }
}

void checkTrainExperiment(const std::vector<std::string>& args) {
  const TrainArgs a = commandArgsOf<TrainOptions>("train", args);
  if (a.syncs.size() != 1 || a.overlaps.size() != 1 || !a.sweep.empty()) {
    throw UsageError{
        "a training experiment is one run: one --sync mode, --overlap on or off, no "
        "--sweep-buckets"};
  }
  if (!a.csv.empty()) throw UsageError{"--csv: a lesson's runner keeps only the JSON record"};
}

// Checks each experiment of `l` as its command would; throws UsageError naming the lesson.
void checkExperiments(const Lesson& l) {
  auto one = [&](const Experiment& e) {
    try {
      if (e.kind == ExperimentKind::Train) {
        checkTrainExperiment(e.args);
      } else {
        checkBenchExperiment(l, e.args);
      }
    } catch (const UsageError& err) {
      throw UsageError{l.path + ": experiment '" + std::string(toString(e.kind)) + " " +
                       joined(e.args) + "': " + err.message};
    }
  };
  for (const LessonOption& o : l.options) {
    if (!o.experiment.empty()) one(o.experiment);
  }
  for (const Experiment& e : l.experiments) one(e);
}

std::string lessonsDirOf(const CLI::Option* given, const std::string& dir) {
  if (given != nullptr && given->count() > 0) return dir;
  const std::string found = lessonsDir(selfExeDir());
  if (found.empty()) {
    throw UsageError{"no lessons folder found: give --lessons DIR or set ARL_LESSONS"};
  }
  return found;
}

// The schedule the experiment's run executes (its one point), generated here as the
// coordinator generates it.
Schedule scheduleOf(const BenchArgs& a) {
  const SweepSpec spec = sweepSpecOf(a.cfg, a.sizes);
  const int n = nranksOf(a.cfg);
  const RunRequest req = sweepRequest(spec, sweepPoints(spec).front(), n);
  Schedule s;
  resolveRunRequest(req, std::vector<std::string>(static_cast<size_t>(n), "localhost"), &s);
  return s;
}

// The digests of a run's ranks (bench --data random), "" for a rank without one.
std::vector<std::string> digestsOf(const nlohmann::json& row) {
  std::vector<std::string> out;
  const auto it = row.find("output");
  if (it == row.end() || !it->is_object()) return out;
  for (const auto& d : it->value("digests", nlohmann::json::array()))
    out.push_back(d.is_string() ? d.get<std::string>() : std::string());
  return out;
}

double determinismOf(const nlohmann::json& rows) {
  std::set<std::string> results;
  for (const auto& row : rows) {
    const std::vector<std::string> d = digestsOf(row);
    if (d.empty() || d.front().empty() ||
        std::any_of(d.begin(), d.end(), [&](const auto& x) { return x != d.front(); }))
      return 2;
    results.insert(d.front());
  }
  return results.size() == rows.size() ? 0 : 1;
}

// The bits that show it: every rank's digest per algorithm, and the first sampled element
// whose bits differ between the algorithms (rank 0's), as hex and as a number.
std::string determinismNote(const nlohmann::json& rows) {
  std::string note;
  std::vector<std::vector<std::string>> heads;
  std::vector<std::string> names;
  nlohmann::json at = nlohmann::json::array();
  for (const auto& row : rows) {
    const std::vector<std::string> d = digestsOf(row);
    const bool same = !d.empty() && std::all_of(d.begin(), d.end(),
                                                [&](const auto& x) { return x == d.front(); });
    names.push_back(row.value("algorithm", "?"));
    note += (note.empty() ? "" : "; ") + names.back() + ": " +
            (same ? "all " + std::to_string(d.size()) + " ranks hold output " + d.front()
                  : "the ranks' outputs differ");
    std::vector<std::string> h;
    if (row.contains("output") && row["output"].is_object()) {
      const auto& hs = row["output"].value("sample", nlohmann::json::array());
      if (!hs.empty())
        for (const auto& x : hs.front()) h.push_back(x.is_string() ? x.get<std::string>() : "");
      if (at.empty()) at = row["output"].value("sample_at", nlohmann::json::array());
    }
    heads.push_back(h);
  }
  if (heads.size() >= 2) {
    for (size_t e = 0; e < heads[0].size() && e < heads[1].size(); ++e) {
      if (heads[0][e] == heads[1][e]) continue;
      auto value = [](const std::string& hex) {
        const uint32_t bits = static_cast<uint32_t>(std::stoul(hex, nullptr, 16));
        float f = 0;
        std::memcpy(&f, &bits, sizeof f);
        return printfString("%.9g", static_cast<double>(f));
      };
      const bool isFloat = heads[0][e].size() == 10;  // "0x" and 8 digits: a float
      const uint64_t index = e < at.size() && at[e].is_number() ? at[e].get<uint64_t>() : e;
      note += printfString("; element %llu: %s %s", static_cast<unsigned long long>(index),
                           names[0].c_str(), heads[0][e].c_str());
      if (isFloat) note += " (" + value(heads[0][e]) + ")";
      note += ", " + names[1] + " " + heads[1][e];
      if (isFloat) note += " (" + value(heads[1][e]) + ")";
      break;
    }
  }
  return note;
}

// The most any rank sent, from a per-rank list of bench JSON (`sent_bytes`, as the ranks'
// telemetry counted it; `effective.bytes_sent`, the schedule's count); none when the list is
// missing or empty, or a rank has no figure (its telemetry never said).
std::optional<uint64_t> busiestSent(const nlohmann::json& list) {
  if (!list.is_array() || list.empty()) return std::nullopt;
  uint64_t most = 0;
  for (const auto& b : list) {
    if (!b.is_number_unsigned()) return std::nullopt;
    most = std::max(most, b.get<uint64_t>());
  }
  return most;
}

std::optional<uint64_t> measuredSent(const nlohmann::json& row) {
  return busiestSent(row.value("sent_bytes", nlohmann::json()));
}

std::optional<uint64_t> scheduledSent(const nlohmann::json& row) {
  const nlohmann::json e = row.value("effective", nlohmann::json::object());
  return busiestSent(e.is_object() ? e.value("bytes_sent", nlohmann::json()) : nlohmann::json());
}

double quantityOf(Quantity q, const BenchArgs& a, const nlohmann::json& row) {
  switch (q) {
    case Quantity::Determinism: return NAN;     // over every row (determinismOf)
    case Quantity::IdenticalShare: return NAN;  // a training run's (trainResult)
    case Quantity::WrongElements: {
      const auto& w = row.at("wrong");
      return w.is_number() ? w.get<double>() : NAN;
    }
    case Quantity::Steps: return scheduleOf(a).nsteps;
    case Quantity::SentOverSize: {
      const std::optional<uint64_t> most = measuredSent(row);
      return most ? static_cast<double>(*most) / static_cast<double>(a.sizes.front()) : NAN;
    }
    case Quantity::MismatchCaught: {
      if (row.value("state", "") == "done") return 0;
      return row.value("error", "").find("header mismatch") != std::string::npos ? 1 : 2;
    }
  }
  return NAN;
}

// Bytes sent: measured on the busiest rank (telemetry), beside the schedule's count and the
// algorithm's formula; says so when the measurement and the schedule differ.
std::string sentNote(const BenchArgs& a, const nlohmann::json& row) {
  const int n = nranksOf(a.cfg);
  const double S = static_cast<double>(a.sizes.front());
  const std::optional<uint64_t> measured = measuredSent(row);
  const std::optional<uint64_t> scheduled = scheduledSent(row);
  std::string note = printfString("%d ranks; ", n);
  const LibraryAlgorithm* library = findLibraryAlgorithm(a.cfg.algorithms.front());
  if (measured) {
    note += "the busiest rank's telemetry";
  } else if (library != nullptr) {
    note += "nothing measured: " + std::string(library->library) +
            " runs the collective whole and reports no bytes per rank";
  } else {
    note += "nothing measured (telemetry off, or a rank's IterationEnd never arrived)";
  }
  if (scheduled) {
    note += printfString("; the schedule says %.4g", static_cast<double>(*scheduled) / S);
    if (measured && *measured != *scheduled) note += ": the measurement and the schedule differ";
  }
  const std::optional<SentFormula> f =
      sentFormula(a.cfg.algorithms.front(), a.cfg.collective, n, a.sizes.front());
  if (f) note += printfString("; the formula %s gives %.4g", f->text.c_str(), f->bytes / S);
  return note;
}

// What a fact lesson's reader compares the measured value with.
std::string factNote(Quantity q, const BenchArgs& a, const nlohmann::json& row) {
  const int n = nranksOf(a.cfg);
  const bool ring = a.cfg.algorithms.front() == "ring";
  if (q == Quantity::SentOverSize) return sentNote(a, row);
  if (q == Quantity::Steps && ring) {
    return printfString("%d ranks; 2(N-1) = %d", n, 2 * (n - 1));
  }
  return printfString("%d ranks", n);
}

double measureOf(SpeedMeasure m, const nlohmann::json& row) {
  const char* key = m == SpeedMeasure::TimeUs  ? "time_us"
                    : m == SpeedMeasure::P50Us ? "p50_us"
                                               : "busbw_gbps";
  const auto& v = row.at(key);
  return v.is_number() ? v.get<double>() : NAN;
}

double numberOr(const nlohmann::json& row, const char* key) {
  auto it = row.find(key);
  return it != row.end() && it->is_number() ? it->get<double>() : NAN;
}

// Where an experiment's child writes, and what the lesson keeps of it.
struct ExperimentRun {
  const Lesson& lesson;
  std::string optionId;
  int index = 0;
  std::string json, log;            // the child's record and its output
  bool verbose = false;             // print each command line as it starts
  std::string recordDir;            // bench: record the run there too (bench --record); "" for none
  std::string recording;            // bench: the recording written, "" for none
  TrainRecord* training = nullptr;  // train: the run is appended there
};

// The last line a child wrote, for the error of a run that left no result.
std::string lastLineOf(const std::string& log) {
  std::ifstream lg(log);
  std::string last, line;
  while (std::getline(lg, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

// Runs `allreduce-lab KIND ARGS` with `outputs` added as a child, its output into x.log; how
// it ended ("did not end" when it ran past the timeout and was killed).
std::string runChild(const Experiment& e, const std::vector<std::string>& outputs,
                     const ExperimentRun& x, const std::string& command) {
  std::vector<std::string> argv = {"/bin/sh", "-c", "exec \"$0\" \"$@\" >\"$ARL_LESSON_LOG\" 2>&1",
                                   selfExeDir() + "/allreduce-lab", std::string(toString(e.kind))};
  argv.insert(argv.end(), e.args.begin(), e.args.end());
  argv.insert(argv.end(), outputs.begin(), outputs.end());
  setenv("ARL_LESSON_LOG", x.log.c_str(), 1);
  if (x.verbose) std::fprintf(stderr, "  running: %s\n", command.c_str());
  const int64_t pid = spawnChild(argv);
  auto st = waitFor(pid, kExperimentTimeout);
  if (!st) st = killAndReap(pid);
  return st ? st->describe() : std::string("did not end");
}

// `allreduce-lab bench ARGS --json` (and --record with a record folder); the result's row.
ExperimentResult runBench(const Experiment& e, ExperimentRun& x) {
  const Lesson& l = x.lesson;
  ExperimentResult r;
  r.optionId = x.optionId;
  r.args = "allreduce-lab bench " + joined(e.args);
  std::vector<std::string> outputs = {"--json", x.json};
  if (!x.recordDir.empty()) {
    x.recording = x.recordDir + "/" + l.name + "-" + std::to_string(x.index) +
                  (x.optionId.empty() ? "" : "-" + x.optionId) + ".arlrec";
    outputs.insert(outputs.end(), {"--record", x.recording});
  }
  const std::string ended = runChild(e, outputs, x, r.args);
  std::ifstream in(x.json);
  nlohmann::json doc;
  try {
    if (in) doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    doc = nullptr;
  }
  const bool rows = doc.is_object() && doc.contains("results") && !doc["results"].empty();
  if (!rows) {
    const std::string last = lastLineOf(x.log);
    r.error = "bench " + ended + (last.empty() ? "" : ": " + last);
    return r;
  }
  const nlohmann::json& row = doc["results"][0];
  // A run meant to fail (a mismatched rank) has run once bench reported on it.
  r.ran = row.value("state", "") == "done" ||
          (l.by == DecideBy::Value && l.quantity == Quantity::MismatchCaught);
  r.error = row.value("error", "");
  r.timeUs = numberOr(row, "time_us");
  r.predictedUs = numberOr(row, "predicted_us");
  if (l.by == DecideBy::Fastest) {
    r.value = measureOf(l.measure, row);
  } else {
    // A fact of the run: its time and the model's prediction are not what the lesson shows.
    const BenchArgs a = benchArgsOf(e.args);
    r.value = l.quantity == Quantity::Determinism ? determinismOf(doc["results"])
                                                  : quantityOf(l.quantity, a, row);
    r.predictedUs = NAN;
    r.note = l.quantity == Quantity::Determinism ? determinismNote(doc["results"])
                                                 : factNote(l.quantity, a, row);
    if (!r.error.empty()) r.note += "; the run ended: " + r.error;
  }
  return r;
}

// `allreduce-lab train ARGS --quiet --json`: the lesson's measure from its record. A run that
// trained every step counts even when train failed it afterwards: synchronous replicas that
// differ are what an identical_share lesson shows.
ExperimentResult runTrain(const Experiment& e, ExperimentRun& x) {
  std::vector<std::string> outputs = {"--json", x.json};
  if (std::find(e.args.begin(), e.args.end(), "--quiet") == e.args.end())
    outputs.push_back("--quiet");
  const std::string command = "allreduce-lab train " + joined(e.args);
  const std::string ended = runChild(e, outputs, x, command);
  ExperimentResult r;
  TrainRecord record;
  try {
    record = readTrainFile(x.json);
    r = trainResult(x.lesson, record);
  } catch (const TrainRecordError& err) {
    r.error = err.what();
  }
  r.optionId = x.optionId;
  r.args = command;
  if (!r.ran) {
    const std::string last = lastLineOf(x.log);
    r.error = "train " + ended + (last.empty() ? "" : ": " + last) + " (" + r.error + ")";
  }
  if (x.training != nullptr) {
    for (TrainRun& run : record.runs) x.training->runs.push_back(std::move(run));
  }
  return r;
}

ExperimentResult runExperiment(const Experiment& e, ExperimentRun& x) {
  return e.kind == ExperimentKind::Train ? runTrain(e, x) : runBench(e, x);
}

std::string fmtNum(double x) {
  if (!std::isfinite(x)) return "-";
  return printfString(std::fabs(x) >= 100 ? "%.0f" : std::fabs(x) >= 10 ? "%.1f" : "%.3g", x);
}

const char* unitOf(const Lesson& l) {
  if (isFact(l)) return "";
  return l.measure == SpeedMeasure::BusbwGBps ? " GB/s" : " us";
}

nlohmann::json jsonOf(double x) { return std::isfinite(x) ? nlohmann::json(x) : nullptr; }

void printText(const Lesson& l, const std::vector<ExperimentResult>& results, const Verdict& v,
               const Steadiness& st) {
  std::printf("\nmeasured (%s):\n", l.by == DecideBy::Fastest
                                        ? std::string(toString(l.measure)).c_str()
                                        : std::string(toString(l.quantity)).c_str());
  for (const ExperimentResult& r : results) {
    std::string line = "  " + (r.optionId.empty() ? r.args : r.optionId) + ": ";
    if (!r.ran) {
      line += "did not run: " + r.error;
    } else {
      // A fact (a ratio such as 1.875) keeps the digits that the schedule and formula show.
      line += (isFact(l) ? printfString("%.4g", r.value) : fmtNum(r.value)) + unitOf(l);
      if (!r.note.empty()) line += "   (" + r.note + ")";
      const double q = predictionRatio(r);
      if (std::isfinite(q)) {
        line += printfString("   model %s us, measured/model %.2f%s", fmtNum(r.predictedUs).c_str(),
                             q, predictionWithin(r) ? "" : " (outside +-35%)");
      }
    }
    std::printf("%s\n", line.c_str());
  }
  if (!l.modelNote.empty()) std::printf("  about the model here: %s\n", l.modelNote.c_str());
  std::printf("\nwinner: %s", v.winner.empty() ? "none" : v.winner.c_str());
  if (v.margin && std::isinf(*v.margin)) {
    std::printf(", ahead of %s: it hid all its communication", v.runnerUp.c_str());
  } else if (v.margin) {
    std::printf(", ahead of %s by %.2fx", v.runnerUp.c_str(), *v.margin);
  }
  if (!v.detail.empty() && !v.winner.empty()) std::printf(" (%s)", v.detail.c_str());
  std::printf("\nthe article's answer: %s\n", l.answer.c_str());
  std::printf("agrees: %s%s\n", v.agrees ? "yes" : "no",
              v.agrees && !v.clear ? " (but not by a clear margin)" : "");
  if (!v.reason.empty()) std::printf("why: %s\n", v.reason.c_str());
  std::printf("%s\n", st.describe().c_str());
  if (isFact(l)) {
    std::printf(
        "(this lesson's answer is a fact of the run, not a speed: it holds on a busy "
        "machine too)\n");
  }
}

// What a lesson's experiments gave: one result per experiment (options first) and what was
// kept of them.
struct LessonRuns {
  std::vector<ExperimentResult> results;
  std::vector<std::string> recordings;  // per experiment: bench's recording, or ""
  std::string trainingRecord;           // the training runs' record (JSON), or ""
};

nlohmann::json toJson(const Lesson& l, const LessonRuns& runs, const Verdict& v,
                      const Steadiness& st) {
  nlohmann::json opts = nlohmann::json::array();
  for (size_t i = 0; i < runs.results.size(); ++i) {
    const ExperimentResult& r = runs.results[i];
    const std::string& rec = runs.recordings[i];
    const bool recorded = !rec.empty() && std::filesystem::exists(rec);
    opts.push_back(
        {{"option", r.optionId.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.optionId)},
         {"command", r.args},
         {"ran", r.ran},
         {"error", r.error},
         {"value", jsonOf(r.value)},
         {"note", r.note},
         {"time_us", jsonOf(r.timeUs)},
         {"predicted_us", jsonOf(r.predictedUs)},
         {"measured_over_model", jsonOf(predictionRatio(r))},
         {"model_within_35pct", std::isfinite(r.predictedUs) ? nlohmann::json(predictionWithin(r))
                                                             : nlohmann::json(nullptr)},
         {"recording", recorded ? nlohmann::json(rec) : nlohmann::json(nullptr)}});
  }
  return {{"lesson", l.name},
          {"title", l.title},
          {"question", l.question},
          {"decided_by", toString(l.by)},
          {"measure", l.by == DecideBy::Fastest ? toString(l.measure) : toString(l.quantity)},
          {"experiments", opts},
          {"winner", v.winner.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.winner)},
          {"runner_up", v.runnerUp.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.runnerUp)},
          {"answer", l.answer},
          {"agrees", v.agrees},
          {"margin", v.margin ? nlohmann::json(*v.margin) : nlohmann::json(nullptr)},
          {"clear", v.clear},
          {"reason", v.reason},
          {"detail", v.detail},
          {"model_note", l.modelNote},
          {"training_record", runs.trainingRecord.empty() ? nlohmann::json(nullptr)
                                                          : nlohmann::json(runs.trainingRecord)},
          {"steadiness",
           {{"spread_before", jsonOf(st.spreadBefore)},
            {"spread_after", jsonOf(st.spreadAfter)},
            {"load_before", jsonOf(st.loadBefore)},
            {"cores", st.cores},
            {"steady", st.steady()}}},
          // A fact (a step count, bytes, a check) does not depend on the machine's speed.
          {"trusted", isFact(l) || st.steady()}};
}

class LessonCommand final : public Command {
 public:
  LessonCommand(CLI::App& lab, const std::vector<std::string>& args);
  int run() override;

 private:
  int list();
  int check();
  int runLesson();
  LessonRuns runExperiments(const Lesson& l) const;

  CLI::App* list_ = nullptr;
  CLI::App* check_ = nullptr;
  CLI::App* run_ = nullptr;
  CLI::Option* dirOpt_ = nullptr;
  std::string dir_;
  std::string name_;
  std::string recordDir_;
  bool json_ = false;
  bool verbose_ = false;
};

LessonCommand::LessonCommand(CLI::App& lab, const std::vector<std::string>& /*args*/) {
  app = lab.add_subcommand("lesson", "lessons that ask before they show: list, run, check");
  app->footer(wrap(kAbout, 92) + "\n");
  app->require_subcommand(1, 1);
  dirOpt_ = app->add_option("--lessons", dir_, "the folder of lesson files (*.json)");
  list_ = app->add_subcommand("list", "the lessons, one per line: NAME, then its title");
  check_ =
      app->add_subcommand("check", "read every lesson and check each experiment as bench does");
  run_ = app->add_subcommand("run", "ask a lesson's question, run it, and say what won");
  run_->add_option("NAME", name_, "the lesson (see lesson list)")->required();
  run_->add_flag("--json", json_, "print the outcome as JSON on stdout (the text goes to stderr)");
  run_->add_flag("--verbose", verbose_, "print each experiment's command line as it starts");
  run_->add_option(
      "--record", recordDir_,
      "also record each bench experiment's run into this folder (NAME-INDEX[-OPTION].arlrec; "
      "the JSON names each file), for a replay, and the training runs into one training record "
      "(NAME-training.json, the JSON's training_record)");
}

int LessonCommand::run() {
  return runChecked(kProg, [&] {
    try {
      if (list_->parsed()) return list();
      if (check_->parsed()) return check();
      return runLesson();
    } catch (const ConfigError& e) {
      throw UsageError{e.what()};
    }
  });
}

int LessonCommand::list() {
  const std::vector<Lesson> all = loadLessons(lessonsDirOf(dirOpt_, dir_));
  int width = 0;
  for (const Lesson& l : all) width = std::max(width, static_cast<int>(l.name.size()));
  for (const Lesson& l : all) std::printf("%-*s  %s\n", width, l.name.c_str(), l.title.c_str());
  return 0;
}

int LessonCommand::check() {
  const std::string dir = lessonsDirOf(dirOpt_, dir_);
  const std::vector<Lesson> all = loadLessons(dir);
  for (const Lesson& l : all) checkExperiments(l);
  std::printf(
      "%zu lessons in %s: every one reads, and bench or train accepts each experiment as its "
      "command would\n",
      all.size(), dir.c_str());
  return 0;
}

// Runs every experiment of `l` in a folder of its own, options first. With --record, bench's
// runs are recorded and the training runs kept together as one record (NAME-training.json),
// for the window.
LessonRuns LessonCommand::runExperiments(const Lesson& l) const {
  const std::string work =
      std::filesystem::temp_directory_path() / ("arl-lesson-" + std::to_string(::getpid()));
  std::filesystem::create_directories(work);
  if (!recordDir_.empty()) {
    std::error_code mk;
    std::filesystem::create_directories(recordDir_, mk);
    if (mk || !std::filesystem::is_directory(recordDir_)) {
      throw UsageError{"--record " + recordDir_ + ": not a folder that can be made"};
    }
  }
  LessonRuns runs;
  TrainRecord training;
  int index = 0;
  auto runOne = [&](const std::string& id, const Experiment& e) {
    const std::string stem = work + "/run-" + std::to_string(index);
    ExperimentRun x{l,        id,         index++, stem + ".json", stem + ".log",
                    verbose_, recordDir_, "",      &training};
    runs.results.push_back(runExperiment(e, x));
    runs.recordings.push_back(x.recording);
  };
  for (const LessonOption& o : l.options) {
    if (!o.experiment.empty()) runOne(o.id, o.experiment);
  }
  for (const Experiment& e : l.experiments) runOne("", e);
  std::error_code ec;
  std::filesystem::remove_all(work, ec);
  if (!recordDir_.empty() && !training.runs.empty()) {
    runs.trainingRecord = recordDir_ + "/" + l.name + "-training.json";
    try {
      writeTextFile(runs.trainingRecord, writeTrainJson(training));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", kProg, e.what());
      runs.trainingRecord.clear();
    }
  }
  return runs;
}

int LessonCommand::runLesson() {
  const std::string dir = lessonsDirOf(dirOpt_, dir_);
  std::string known;
  const std::optional<Lesson> found = findLesson(dir, name_, &known);
  if (!found) throw UsageError{"no lesson '" + name_ + "' (known: " + known + ")"};
  const Lesson& l = *found;
  checkExperiments(l);
  std::FILE* text = json_ ? stderr : stdout;
  std::fprintf(text, "%s\n  %s\n\n%s\n\n%s\n", l.title.c_str(), l.teaches.c_str(), l.text.c_str(),
               l.question.c_str());
  for (const LessonOption& o : l.options)
    std::fprintf(text, "  %s) %s\n", o.id.c_str(), o.label.c_str());
  std::fprintf(text, "\nwhy this setup: %s\n", l.setupWhy.c_str());
  std::fflush(text);

  Steadiness st;
  st.cores = static_cast<int>(std::thread::hardware_concurrency());
  st.loadBefore = loadAverage();
  st.spreadBefore = sampleSpread(kSteadinessSamples);
  const LessonRuns runs = runExperiments(l);
  st.spreadAfter = sampleSpread(kSteadinessSamples);

  const Verdict v = decide(l, runs.results);
  if (json_) {
    std::printf("%s\n", toJson(l, runs, v, st).dump(2).c_str());
  } else {
    printText(l, runs.results, v, st);
  }
  return v.agrees ? 0 : 1;
}

}  // namespace

std::unique_ptr<Command> addLessonCommand(CLI::App& lab, const std::vector<std::string>& args) {
  return std::make_unique<LessonCommand>(lab, args);
}

}  // namespace arl::app
