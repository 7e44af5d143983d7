// Lessons as data: one JSON file each in resources/lessons/ (format: docs/lessons.md), read and
// checked here, with no Qt, so that `allreduce-lab lesson` and the window share them. A lesson
// asks a question before it shows anything; its experiments are bench or train command lines,
// so that what a lesson runs is what a student can type; the verdict (verdict.h) says which
// option the measurement picked and whether that is the article's answer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace arl {

// How a lesson's measurement decides between its options.
enum class DecideBy : uint8_t {
  Fastest,  // each option is an experiment; the best measurement wins (compares speeds)
  Value,    // one or more experiments measure a quantity; the option whose range holds it wins
};

// Which command an experiment runs.
enum class ExperimentKind : uint8_t {
  Bench,  // allreduce-lab bench ARGS --json FILE: one collective, timed (docs/bench.md)
  Train,  // allreduce-lab train ARGS --quiet --json FILE: one training run (docs/training.md)
};

// One experiment: a command line a student can type, less the runner's outputs.
struct Experiment {
  ExperimentKind kind = ExperimentKind::Bench;
  std::vector<std::string> args;  // the command's own options, without its name and --json
  bool empty() const { return args.empty(); }
};

// What a Fastest lesson compares, from each option's result.
enum class SpeedMeasure : uint8_t {
  TimeUs,     // bench's time (the slowest rank's mean per iteration): lower wins
  P50Us,      // bench's median iteration: lower wins
  BusbwGBps,  // bench's busbw: higher wins
  // train's mean exposed communication per step (step - compute), over the steps after the
  // first: lower wins
  ExposedUs,
  StepUs,  // train's mean step over the steps after the first: lower wins
  // train's share of steps after which every replica's weights were bitwise identical: higher
  // wins. A fact of the run, not a speed: no ratio margin, and a busy machine cannot change it.
  IdenticalShare,
};

// What a Value lesson measures on each of its experiments.
enum class Quantity : uint8_t {
  // Elements that differ from the expected sum on any rank after the run (bench's check): 0
  // means every rank holds the same, right sums.
  WrongElements,
  // Algorithm steps of the schedule the run executed (reduce-scatter and all-gather together).
  Steps,
  // Bytes each rank sends per all-reduce in the schedule the run executed, over the message
  // size S: the largest rank's.
  SentOverSize,
  // How a run with a rank that disagrees (bench --mismatch-rank) ended: 1 when the header
  // check failed it naming a header mismatch, 0 when it completed, 2 when it failed otherwise
  // (for instance it hung until the stall timeout).
  MismatchCaught,
  // Over the algorithms of one experiment run with random data (bench --algo A,B --data
  // random): 0 when every rank of each run holds the same bits and the algorithms' results
  // differ, 1 when every algorithm gives the same bits too, 2 when the ranks of a run differ
  // (or a run reported no digest).
  Determinism,
  // A training run's share of steps after which every replica's weights were bitwise
  // identical (train experiments).
  IdenticalShare,
};

struct LessonOption {
  std::string id;     // what the answer and the verdict name
  std::string label;  // what a student reads
  // Fastest: the option's experiment ("bench" or "train" in the file).
  Experiment experiment;
  // Value: the option holds when every experiment's quantity lies in [lo, hi].
  double lo = 0;
  double hi = 0;
};

// A pause in the playback of one experiment, with a question to think about before going on.
struct LessonPause {
  uint32_t step = 0;
  std::string question;
  std::string answer;
};

// The order of a lesson that gives none: after every lesson that does.
inline constexpr int kLessonLastOrder = 1000000;

struct Lesson {
  int format = 1;
  std::string name;              // file name without .json; what `lesson run NAME` takes
  int order = kLessonLastOrder;  // where it comes in a course (1 first); the name breaks ties
  std::string title;
  std::string teaches;  // the article's point (TEACHING.md), in a line
  std::string text;     // what the student reads first
  std::string question;
  std::vector<LessonOption> options;
  std::string answer;  // the id of the option the article gives
  DecideBy by = DecideBy::Fastest;
  SpeedMeasure measure = SpeedMeasure::TimeUs;
  Quantity quantity = Quantity::WrongElements;
  // Value: the experiments; Fastest: none (each option has one).
  std::vector<Experiment> experiments;
  std::string setupWhy;    // why these sizes and this network: they make the point clearly
  std::string ifDisagree;  // why the result may not agree on some machine
  std::string modelNote;   // why the model's prediction may miss here ("" when it should not)
  std::vector<LessonPause> pauses;
  std::string recording;  // a bundled recording (relative to the lesson's folder), or ""
  std::string path;       // where it was read from
};

std::string_view toString(ExperimentKind k);  // "bench", "train"
std::string_view toString(DecideBy b);
std::string_view toString(SpeedMeasure m);
std::string_view toString(Quantity q);
// Whether a smaller value of `m` is better.
bool lowerIsBetter(SpeedMeasure m);
// The kind of experiment that `m` (or `q`) is measured on.
ExperimentKind experimentKindOf(SpeedMeasure m);
ExperimentKind experimentKindOf(Quantity q);
// Whether the lesson's answer is a fact of the runs (a count, a check) rather than a speed: it
// needs no margin and holds on a busy machine too. Value lessons, and identical_share.
bool isFact(const Lesson& l);

// Reads one lesson from JSON text; `name` is its file's stem. Throws ConfigError naming `where`
// (the file), the field and what is wrong with it: a missing field, an unknown kind, an answer
// that names no option, an option without its experiment (or with both a bench and a train
// one), an experiment that the lesson's measure or quantity does not measure, ranges that
// overlap.
Lesson parseLesson(const std::string& text, const std::string& name, const std::string& where);

// Every *.json of `dir`, in course order (`order`, then name). Throws ConfigError for a folder that
// cannot be read and for the first lesson that does not parse (naming the file).
std::vector<Lesson> loadLessons(const std::string& dir);

// Where the lessons are: $ARL_LESSONS when set; else the first of
// <exe dir>/../share/allreduce-lab/lessons (installed) and the checkout's resources/lessons
// (for a build tree) that exists; "" when neither does.
std::string lessonsDir(const std::string& exeDir);

// The lesson called `name` in `dir`, or nullopt (with the names there in *known).
std::optional<Lesson> findLesson(const std::string& dir, const std::string& name,
                                 std::string* known);

}  // namespace arl
