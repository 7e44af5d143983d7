// allreduce-lab model map: the cost model's crossover map (model/crossover.h), which all-reduce
// algorithm it predicts fastest over rank counts x message sizes, as a table or JSON. Every
// figure is the model's, and every output says so.
#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "base/errors.h"
#include "base/types.h"
#include "cli_util.h"
#include "commands.h"
#include "export/export.h"
#include "export/map_json.h"
#include "model/crossover.h"
#include "model_choice.h"
#include "schedule/generators.h"

namespace arl::app {

namespace {

constexpr const char* kProg = "allreduce-lab model map";
constexpr const char* kLabel = "model, not measured";

constexpr const char* kAbout =
    "Prints which all-reduce algorithm the cost model predicts fastest for each rank count "
    "(rows) and message size (columns), and how much longer the runner-up takes. Every figure "
    "is the model's, not a measurement: closed forms on a uniform network, the simulation of "
    "the schedule on a named topology and for algorithms without a closed form (up to 64 "
    "ranks). Messages are unsliced.\n"
    "Exit status: 0 when the map is printed, 2 on bad arguments.";

// "LO..HI" stepping by a factor (xF, default `factor`), or a comma-separated list.
template <typename T, typename Parse>
std::vector<T> parseGrid(const Arg& a, uint64_t factor, Parse parse) {
  const size_t dots = a.text.find("..");
  if (dots == std::string::npos) {
    std::vector<T> out;
    for (const auto& x : parseNameList(a)) out.push_back(parse(Arg{a.flag, x}));
    return out;
  }
  std::string hi = a.text.substr(dots + 2);
  if (const size_t x = hi.find('x'); x != std::string::npos) {
    factor = static_cast<uint64_t>(parseInt(Arg{a.flag, hi.substr(x + 1)}, 2, 1024));
    hi = hi.substr(0, x);
  }
  const T lo = parse(Arg{a.flag, a.text.substr(0, dots)}), top = parse(Arg{a.flag, hi});
  if (top < lo) throw refuse(a, "the range ends below its start");
  std::vector<T> out;
  for (T v = lo; v <= top; v = static_cast<T>(v * factor)) {
    out.push_back(v);
    if (out.size() > 64) throw refuse(a, "more than 64 values");
  }
  return out;
}

// A coefficient of the model in seconds (per byte): a number above 0, e.g. 4e-10.
double parseCoefficient(const Arg& a) {
  double x = 0;
  const auto [p, ec] = std::from_chars(a.text.data(), a.text.data() + a.text.size(), x);
  if (a.text.empty() || ec != std::errc() || p != a.text.data() + a.text.size() ||
      !std::isfinite(x) || x <= 0) {
    throw refuse(a, "must be a number of seconds per byte above 0, e.g. 4e-10 (2.5 GB/s)");
  }
  return x;
}

class ModelCommand final : public Command {
 public:
  ModelCommand(CLI::App& lab, const std::vector<std::string>& args);
  int run() override;

 private:
  MapQuery parse(ModelChoice& model) const;
  void printTable(const CrossoverMap& m, const MapQuery& q, const ModelChoice& model) const;

  CLI::App* map_ = nullptr;
  Options opts_;
};

// Adds `model` and its `map` to the lab; returns `map`.
CLI::App* addMapApp(CLI::App& lab) {
  CLI::App* model =
      lab.add_subcommand("model", "the cost model's views: map (which algorithm wins where)");
  model->require_subcommand(1, 1);
  CLI::App* map = model->add_subcommand(
      "map", "the crossover map: the model's fastest all-reduce per rank count x size");
  map->footer(wrap(kAbout, 92) + "\n");
  return map;
}

ModelCommand::ModelCommand(CLI::App& lab, const std::vector<std::string>& args)
    : map_(addMapApp(lab)), opts_(map_, args) {
  app = lab.get_subcommand("model");
  opts_.value("--ranks", "RANGE",
              "rows: LO..HI doubling (..HIxF for another factor) or a list (default 4..4096)");
  opts_.value("--sizes", "RANGE",
              "columns, bytes: LO..HI times 4 (..HIxF) or a list, K, M, G = 2^10, 2^20, 2^30 "
              "(default 4K..4G)");
  opts_.value("--algo", "LIST",
              "the algorithms compared (default every one: " + algorithmList() + ")");
  opts_.value("--alpha", "TIME", "latency per message, e.g. 5us (default: the model's)");
  opts_.value("--beta", "SECONDS", "seconds per byte on a port, e.g. 4e-10 (default: the model's)");
  opts_.value("--gamma", "SECONDS", "seconds per byte reduced, e.g. 2e-10 (default: the model's)");
  opts_.value("--nic-bw", "RATE", "every rank's port, each direction, e.g. 500M");
  opts_.value("--link-latency", "TIME", "added to every message (per hop with --topology)");
  opts_.value("--topology", "NAME",
              "torus:RxC[@RATE] or fat-tree:K[:O][@RATE] (docs/topologies.md); simulated, rows "
              "it fits up to 64 ranks");
  opts_.value("--json", "FILE", "also write the map as JSON to FILE");
  declareModelOption(opts_);
}

MapQuery ModelCommand::parse(ModelChoice& model) const {
  MapQuery q;
  const Arg ranks = opts_.getOr("--ranks", "4..4096");
  q.ranks = parseGrid<int>(ranks, 2, [](const Arg& a) { return parseInt(a, 2, 1 << 20); });
  q.sizes = parseGrid<uint64_t>(opts_.getOr("--sizes", "4K..4G"), 4, parseSize);
  for (uint64_t b : q.sizes) {
    if (b == 0) throw refuse(*opts_.get("--sizes"), "a size must be above 0");
  }
  if (auto v = opts_.get("--algo")) {
    q.algorithms = parseNameList(*v);
    for (const std::string& a : q.algorithms) {
      if (!algorithmSupports(a, Collective::AllReduce)) {
        throw refuse(*v, "'" + a + "' is not an algorithm: " + algorithmList());
      }
    }
  }
  model = chooseModel(opts_.get("--model"));
  q.params = model.params;
  if (auto v = opts_.get("--alpha")) {
    const auto ns = parseDurationNs(v->text);
    if (!ns || *ns <= 0) throw refuse(*v, "must be a duration above 0 with its unit, e.g. 5us");
    q.params.alpha = static_cast<double>(*ns) / 1e9;
  }
  if (auto v = opts_.get("--beta")) q.params.beta = parseCoefficient(*v);
  if (auto v = opts_.get("--gamma")) q.params.gamma = parseCoefficient(*v);
  q.network = parseUniformShaping(opts_);
  if (auto v = opts_.get("--topology")) {
    try {
      q.topology = parseTopology(v->text);
    } catch (const TopologyError& e) {
      throw refuse(*v, e.what());
    }
    q.hopLatencySeconds = q.network.addedLatencySeconds;
    q.network.addedLatencySeconds = 0;
  }
  return q;
}

void ModelCommand::printTable(const CrossoverMap& m, const MapQuery& q,
                              const ModelChoice& model) const {
  std::printf("# crossover map of all-reduce: %s\n", kLabel);
  std::printf("# model: %s (%s)\n", alphaBetaGammaText(q.params).c_str(), model.source.c_str());
  if (q.topology) {
    std::printf("# topology: %s (%s)\n", topologyName(*q.topology).c_str(),
                describeTopology(*q.topology, topologyLinkRate(*q.topology, q.network)).c_str());
  }
  std::printf("# network: %s\n", describeShaping(q.network).c_str());
  if (q.topology && q.hopLatencySeconds > 0) {
    std::printf("# per hop: +%.3g us\n", q.hopLatencySeconds * 1e6);
  }
  std::printf(
      "# cell: the fastest algorithm by the model and how much longer the runner-up takes; "
      "a * marks a simulated cell, none a closed form\n");
  std::printf("%6s", "ranks");
  for (uint64_t b : m.sizes) std::printf(" %11s", formatSize(b).c_str());
  std::printf("\n");
  for (size_t r = 0; r < m.ranks.size(); ++r) {
    std::printf("%6d", m.ranks[r]);
    for (size_t c = 0; c < m.sizes.size(); ++c) {
      const MapCell& cell = m.at(r, c);
      std::string text = "-";
      if (!cell.ranked.empty()) {
        char buf[40];
        std::snprintf(buf, sizeof buf, "%s+%.0f%%%s",
                      shortAlgorithmName(cell.ranked.front().algorithm).c_str(),
                      cell.margin() * 100,
                      cell.ranked.front().method == MapMethod::Simulation ? "*" : "");
        text = buf;
      }
      std::printf(" %11s", text.c_str());
    }
    std::printf("\n");
  }
  std::printf("# names:");
  for (const std::string& a : q.algorithms.empty() ? algorithmNames() : q.algorithms) {
    if (shortAlgorithmName(a) != a)
      std::printf(" %s = %s;", shortAlgorithmName(a).c_str(), a.c_str());
  }
  std::printf(" - = no algorithm priced\n");
  for (const std::string& n : m.notes) std::printf("# note: %s\n", n.c_str());
}

int ModelCommand::run() {
  return runChecked(kProg, [&] {
    ModelChoice model;
    const MapQuery q = parse(model);
    CrossoverMap m;
    try {
      m = crossoverMap(q);
    } catch (const ConfigError& e) {
      throw UsageError{e.what()};
    }
    printTable(m, q, model);
    if (auto v = opts_.get("--json")) {
      try {
        writeTextFile(v->text, jsonText(crossoverMapJson(m, q, model.source)) + "\n");
      } catch (const ConfigError& e) {
        throw refuse(*v, e.what());
      }
    }
    return 0;
  });
}

}  // namespace

std::unique_ptr<Command> addModelCommand(CLI::App& lab, const std::vector<std::string>& args) {
  return std::make_unique<ModelCommand>(lab, args);
}

}  // namespace arl::app
