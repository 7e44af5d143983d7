#include "lesson/lesson.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "base/errors.h"
#include "base/input_file.h"
#include "export/json.h"
#include "export/json_in.h"

namespace arl {

namespace {

namespace fs = std::filesystem;

// The checkout this build was made from (CMake sets it): where a build tree finds the lessons.
#ifndef ARL_LESSONS_SOURCE_DIR
#define ARL_LESSONS_SOURCE_DIR ""
#endif

// A lesson file is small; anything larger is not one.
constexpr uintmax_t kMaxLessonBytes = 1 << 20;
// A lesson nests 5 levels deep and holds a few hundred values: far more is not a lesson.
const JsonLimits kLessonJsonLimits{kMaxLessonBytes, 16, 100'000};
constexpr size_t kMaxOptions = 8;
constexpr size_t kMaxArgs = 96;

std::optional<DecideBy> decideByOf(std::string_view s) {
  if (s == "fastest") return DecideBy::Fastest;
  if (s == "value") return DecideBy::Value;
  return std::nullopt;
}

std::optional<SpeedMeasure> measureOf(std::string_view s) {
  if (s == "time_us") return SpeedMeasure::TimeUs;
  if (s == "p50_us") return SpeedMeasure::P50Us;
  if (s == "busbw_gbps") return SpeedMeasure::BusbwGBps;
  if (s == "exposed_us") return SpeedMeasure::ExposedUs;
  if (s == "step_us") return SpeedMeasure::StepUs;
  if (s == "identical_share") return SpeedMeasure::IdenticalShare;
  return std::nullopt;
}

std::optional<Quantity> quantityOf(std::string_view s) {
  if (s == "wrong_elements") return Quantity::WrongElements;
  if (s == "steps") return Quantity::Steps;
  if (s == "sent_over_size") return Quantity::SentOverSize;
  if (s == "mismatch_caught") return Quantity::MismatchCaught;
  if (s == "determinism") return Quantity::Determinism;
  if (s == "identical_share") return Quantity::IdenticalShare;
  return std::nullopt;
}

std::string optionalText(const In& o, std::string_view key) {
  return o.has(key) ? o[key].str() : std::string();
}

// A command's arguments: strings, none of them --json or a command's name (the lesson's
// runner adds them).
std::vector<std::string> commandArgs(const In& a, ExperimentKind kind) {
  std::vector<std::string> out = readArray<std::string>(a, [](const In& x) { return x.str(); });
  const std::string command(toString(kind));
  if (out.empty()) a.fail(a.path(), "no " + command + " arguments");
  if (out.size() > kMaxArgs)
    a.fail(a.path(), "more than " + std::to_string(kMaxArgs) + " arguments");
  for (const std::string& s : out) {
    if (s == "--json" || s == "bench" || s == "train") {
      a.fail(a.path(),
             "'" + s + "' is the runner's to add (give only " + command + "'s own options)");
    }
  }
  return out;
}

// What a lesson measures its experiments by, for the refusal of one it cannot measure.
struct Measured {
  std::string name;  // "measure 'time_us'", "quantity 'steps'"
  ExperimentKind kind;
};

std::string measuresOf(ExperimentKind kind) {
  return kind == ExperimentKind::Bench
             ? "a bench experiment is measured by time_us, p50_us or busbw_gbps, or as a fact"
             : "a train experiment is measured by exposed_us, step_us or identical_share";
}

// {"bench": [...]} or {"train": [...]}: exactly one; refused when `by` does not measure it.
Experiment experimentOf(const In& o, const Measured& by) {
  const bool bench = o.has("bench");
  const bool train = o.has("train");
  if (bench && train) o.fail(o.path(), "give \"bench\" or \"train\", not both");
  if (!bench && !train) o.fail(o.path() + ".bench", "missing (or \"train\": the experiment)");
  Experiment e;
  e.kind = train ? ExperimentKind::Train : ExperimentKind::Bench;
  const In args = o[toString(e.kind)];
  e.args = commandArgs(args, e.kind);
  if (e.kind != by.kind) {
    args.fail(args.path(), "the " + by.name + " needs a " + std::string(toString(by.kind)) +
                               " experiment; " + measuresOf(e.kind));
  }
  return e;
}

// A Value lesson's experiment: an array of bench arguments, or {"bench"|"train": [...]}.
Experiment valueExperimentOf(const In& x, const Measured& by) {
  if (x.raw().is_object()) return experimentOf(x, by);
  Experiment e;
  e.args = commandArgs(x, ExperimentKind::Bench);
  if (by.kind != ExperimentKind::Bench) {
    x.fail(x.path(), "the " + by.name + " needs a train experiment ({\"train\": [...]}); " +
                         measuresOf(ExperimentKind::Bench));
  }
  return e;
}

LessonOption optionOf(const In& o, const Lesson& l) {
  LessonOption opt;
  opt.id = o["id"].str();
  opt.label = o["label"].str();
  if (opt.id.empty()) o.fail(o.path() + ".id", "empty");
  if (l.by == DecideBy::Fastest) {
    opt.experiment = experimentOf(
        o, {"measure '" + std::string(toString(l.measure)) + "'", experimentKindOf(l.measure)});
  } else {
    const In r = o["range"];
    if (r.size() != 2) r.fail(r.path(), "expected [low, high]");
    opt.lo = r[0].num();
    opt.hi = r[1].num();
    if (!(opt.lo <= opt.hi)) r.fail(r.path(), "low must not exceed high");
  }
  return opt;
}

LessonPause pauseOf(const In& p) {
  return {static_cast<uint32_t>(p["step"].u64(1u << 20)), p["question"].str(), p["answer"].str()};
}

void checkOptions(const In& root, const Lesson& l) {
  if (l.options.size() < 2) root.fail(root.path() + ".options", "a question needs two options");
  if (l.options.size() > kMaxOptions) {
    root.fail(root.path() + ".options", "more than " + std::to_string(kMaxOptions) + " options");
  }
  std::set<std::string> ids;
  for (const LessonOption& o : l.options) {
    if (!ids.insert(o.id).second) root.fail(root.path() + ".options", "id '" + o.id + "' twice");
  }
  if (!ids.count(l.answer)) {
    root.fail(root.path() + ".answer", "'" + l.answer + "' is none of the options' ids");
  }
  if (l.by == DecideBy::Value) {
    std::vector<const LessonOption*> byLo;
    for (const LessonOption& o : l.options) byLo.push_back(&o);
    std::sort(byLo.begin(), byLo.end(), [](auto* a, auto* b) { return a->lo < b->lo; });
    for (size_t i = 1; i < byLo.size(); ++i) {
      if (byLo[i]->lo <= byLo[i - 1]->hi) {
        root.fail(root.path() + ".options",
                  "the ranges of '" + byLo[i - 1]->id + "' and '" + byLo[i]->id + "' overlap");
      }
    }
  }
}

}  // namespace

std::string_view toString(ExperimentKind k) {
  return k == ExperimentKind::Bench ? "bench" : "train";
}

std::string_view toString(DecideBy b) { return b == DecideBy::Fastest ? "fastest" : "value"; }

std::string_view toString(SpeedMeasure m) {
  switch (m) {
    case SpeedMeasure::TimeUs: return "time_us";
    case SpeedMeasure::P50Us: return "p50_us";
    case SpeedMeasure::BusbwGBps: return "busbw_gbps";
    case SpeedMeasure::ExposedUs: return "exposed_us";
    case SpeedMeasure::StepUs: return "step_us";
    case SpeedMeasure::IdenticalShare: return "identical_share";
  }
  return "?";
}

std::string_view toString(Quantity q) {
  switch (q) {
    case Quantity::WrongElements: return "wrong_elements";
    case Quantity::Steps: return "steps";
    case Quantity::SentOverSize: return "sent_over_size";
    case Quantity::MismatchCaught: return "mismatch_caught";
    case Quantity::Determinism: return "determinism";
    case Quantity::IdenticalShare: return "identical_share";
  }
  return "?";
}

bool lowerIsBetter(SpeedMeasure m) {
  return m != SpeedMeasure::BusbwGBps && m != SpeedMeasure::IdenticalShare;
}

ExperimentKind experimentKindOf(SpeedMeasure m) {
  const bool train = m == SpeedMeasure::ExposedUs || m == SpeedMeasure::StepUs ||
                     m == SpeedMeasure::IdenticalShare;
  return train ? ExperimentKind::Train : ExperimentKind::Bench;
}

ExperimentKind experimentKindOf(Quantity q) {
  return q == Quantity::IdenticalShare ? ExperimentKind::Train : ExperimentKind::Bench;
}

bool isFact(const Lesson& l) {
  return l.by == DecideBy::Value || l.measure == SpeedMeasure::IdenticalShare;
}

Lesson parseLesson(const std::string& text, const std::string& name, const std::string& where) {
  const JsonFail fail = [&](const std::string& path, const std::string& what) {
    throw ConfigError(where + ": " + path + ": " + what);
  };
  JsonIn doc;
  try {
    doc = parseJsonLimited(text, kLessonJsonLimits);
  } catch (const JsonInputError& e) {
    throw ConfigError(where + ": " + e.what());
  }
  const In root = In(doc, "lesson", fail).object();
  Lesson l;
  l.name = name;
  l.path = where;
  l.format = root["format"].i32(1, 1);
  if (root.has("order")) l.order = root["order"].i32(1, kLessonLastOrder - 1);
  l.title = root["title"].str();
  l.teaches = root["teaches"].str();
  l.text = root["text"].str();
  l.question = root["question"].str();
  l.answer = root["answer"].str();
  const In decide = root["decide"].object();
  l.by = decide["by"].parsed<DecideBy>(decideByOf);
  if (l.by == DecideBy::Fastest) {
    l.measure = decide["measure"].parsed<SpeedMeasure>(measureOf);
  } else {
    l.quantity = decide["quantity"].parsed<Quantity>(quantityOf);
    const Measured by{"quantity '" + std::string(toString(l.quantity)) + "'",
                      experimentKindOf(l.quantity)};
    l.experiments = readArray<Experiment>(root["experiments"],
                                          [&](const In& x) { return valueExperimentOf(x, by); });
    if (l.experiments.empty()) root.fail("lesson.experiments", "none");
  }
  l.options = readArray<LessonOption>(root["options"],
                                      [&](const In& o) { return optionOf(o.object(), l); });
  checkOptions(root, l);
  l.setupWhy = root["why_this_setup"].str();
  l.ifDisagree = root["if_it_disagrees"].str();
  l.modelNote = optionalText(root, "model_note");
  if (root.has("pauses")) l.pauses = readArray<LessonPause>(root["pauses"], pauseOf);
  l.recording = optionalText(root, "recording");
  return l;
}

std::vector<Lesson> loadLessons(const std::string& dir) {
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  if (ec) throw ConfigError("lessons folder '" + dir + "': " + ec.message());
  std::sort(files.begin(), files.end());
  std::vector<Lesson> out;
  for (const fs::path& f : files) {
    std::string text;
    try {
      text = readInputFile(f.string(), kMaxLessonBytes);
    } catch (const InputFileError& e) {
      throw ConfigError(std::string(e.what()) + " (not a lesson)");
    }
    out.push_back(parseLesson(text, f.stem().string(), f.string()));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Lesson& a, const Lesson& b) { return a.order < b.order; });
  return out;
}

std::string lessonsDir(const std::string& exeDir) {
  if (const char* env = std::getenv("ARL_LESSONS"); env != nullptr && *env != '\0') return env;
  const fs::path exe(exeDir);
  for (const fs::path& p :
       {exe / "../share/allreduce-lab/lessons", fs::path(ARL_LESSONS_SOURCE_DIR)}) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) return fs::weakly_canonical(p, ec).string();
  }
  return {};
}

std::optional<Lesson> findLesson(const std::string& dir, const std::string& name,
                                 std::string* known) {
  std::vector<Lesson> all = loadLessons(dir);
  std::string names;
  for (Lesson& l : all) {
    if (l.name == name) return std::move(l);
    names += (names.empty() ? "" : ", ") + l.name;
  }
  if (known != nullptr) *known = names.empty() ? "none" : names;
  return std::nullopt;
}

}  // namespace arl
