#include "base/topology.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace arl {

namespace {

constexpr const char* kForms = "expected torus:RxC[@RATE] or fat-tree:K[:O][@RATE]";

// A whole positive number spelling all of `t`.
bool positiveInt(std::string_view t, int& out) {
  const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
  return !t.empty() && ec == std::errc() && p == t.data() + t.size() && out > 0;
}

std::string quoted(std::string_view t) { return "'" + std::string(t) + "'"; }

Topology parseTorus(std::string_view dims) {
  const size_t x = dims.find('x');
  Topology t;
  t.kind = Topology::Kind::Torus;
  if (x == std::string_view::npos || !positiveInt(dims.substr(0, x), t.rows) ||
      !positiveInt(dims.substr(x + 1), t.cols)) {
    throw TopologyError("torus dimensions " + quoted(dims) +
                        ": expected RxC, two whole numbers above 0, e.g. torus:4x4");
  }
  return t;
}

Topology parseFatTree(std::string_view params) {
  Topology t;
  t.kind = Topology::Kind::FatTree;
  const size_t colon = params.find(':');
  if (!positiveInt(params.substr(0, colon), t.groupSize)) {
    throw TopologyError("fat-tree leaf size " + quoted(params.substr(0, colon)) +
                        ": expected a whole number of ranks above 0, e.g. fat-tree:8");
  }
  if (colon == std::string_view::npos) return t;
  const std::string_view o = params.substr(colon + 1);
  double x = 0;
  const auto [p, ec] = std::from_chars(o.data(), o.data() + o.size(), x);
  if (o.empty() || ec != std::errc() || p != o.data() + o.size() || !std::isfinite(x) || x < 1) {
    throw TopologyError("fat-tree oversubscription " + quoted(o) +
                        ": expected a number of 1 or more (O for O:1), e.g. fat-tree:8:4");
  }
  t.oversubscription = x;
  return t;
}

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// A rate as --topology's @RATE spells it: "800M", "1.5G".
std::string rateSpelling(double r) {
  if (r >= 1e9) return number(r / 1e9) + "G";
  if (r >= 1e6) return number(r / 1e6) + "M";
  if (r >= 1e3) return number(r / 1e3) + "K";
  return number(r);
}

// The shorter way round a ring of n positions from a to b.
int ringDistance(int a, int b, int n) {
  const int d = std::abs(a - b);
  return std::min(d, n - d);
}

}  // namespace

Topology parseTopology(std::string_view text) {
  const size_t at = text.find('@');
  const std::string_view shape = text.substr(0, at);
  const size_t colon = shape.find(':');
  if (colon == std::string_view::npos) throw TopologyError(kForms);
  const std::string_view kind = shape.substr(0, colon), rest = shape.substr(colon + 1);
  Topology t;
  if (kind == "torus") {
    t = parseTorus(rest);
  } else if (kind == "fat-tree") {
    t = parseFatTree(rest);
  } else {
    throw TopologyError("unknown topology " + quoted(kind) + ": " + kForms);
  }
  if (at != std::string_view::npos) {
    const std::optional<double> rate = parseRateText(text.substr(at + 1));
    if (!rate) {
      throw TopologyError("link rate " + quoted(text.substr(at + 1)) +
                          ": expected bytes per second above 0, e.g. @1G (K, M, G = 1e3, 1e6, "
                          "1e9)");
    }
    t.linkBytesPerSecond = *rate;
  }
  return t;
}

std::string topologyName(const Topology& t) {
  std::string name = t.kind == Topology::Kind::Torus
                         ? "torus:" + std::to_string(t.rows) + "x" + std::to_string(t.cols)
                         : "fat-tree:" + std::to_string(t.groupSize);
  if (t.kind == Topology::Kind::FatTree && t.oversubscription != 1) {
    name += ":" + number(t.oversubscription);
  }
  if (t.linkBytesPerSecond > 0) name += "@" + rateSpelling(t.linkBytesPerSecond);
  return name;
}

void checkTopology(const Topology& t, int nranks) {
  if (t.kind == Topology::Kind::Torus) {
    const long long size = static_cast<long long>(t.rows) * t.cols;
    if (size != nranks) {
      throw TopologyError("torus:" + std::to_string(t.rows) + "x" + std::to_string(t.cols) +
                          " has " + std::to_string(size) + " ranks, the run has " +
                          std::to_string(nranks));
    }
  } else if (nranks % t.groupSize != 0) {
    throw TopologyError("fat-tree:" + std::to_string(t.groupSize) + ": leaves of " +
                        std::to_string(t.groupSize) + " ranks do not divide " +
                        std::to_string(nranks) + " ranks");
  }
}

int topologyHops(const Topology& t, int a, int b) {
  if (t.kind == Topology::Kind::FatTree) return a / t.groupSize == b / t.groupSize ? 2 : 4;
  return ringDistance(a / t.cols, b / t.cols, t.rows) +
         ringDistance(a % t.cols, b % t.cols, t.cols);
}

double topologyPathRate(const Topology& t, double linkRate, int a, int b) {
  if (t.kind == Topology::Kind::FatTree) {
    return a / t.groupSize == b / t.groupSize ? linkRate : linkRate / t.oversubscription;
  }
  return linkRate / topologyHops(t, a, b);
}

LinkShaping expandTopology(const Topology& t, int nranks, LinkShaping base,
                           double hopLatencySeconds) {
  checkTopology(t, nranks);
  const double rate = topologyLinkRate(t, base);
  for (int a = 0; a < nranks; ++a) {
    for (int b = 0; b < nranks; ++b) {
      if (a == b) continue;
      base.linkBytesPerSecond[{a, b}] = topologyPathRate(t, rate, a, b);
      if (hopLatencySeconds > 0) {
        base.linkLatencySeconds[{a, b}] = topologyHops(t, a, b) * hopLatencySeconds;
      }
    }
  }
  return base;
}

double topologyLinkRate(const Topology& t, const LinkShaping& base) {
  if (t.linkBytesPerSecond > 0) return t.linkBytesPerSecond;
  return base.portBytesPerSecond > 0 ? base.portBytesPerSecond : kDefaultLinkBytesPerSecond;
}

std::string describeTopology(const Topology& t, double linkRate) {
  if (t.kind == Topology::Kind::Torus) {
    return "torus " + std::to_string(t.rows) + "x" + std::to_string(t.cols) +
           " with wrap-around, links " + describeRate(linkRate) + ", paths at that / hops";
  }
  return "fat tree, leaves of " + std::to_string(t.groupSize) + " ranks, uplinks " +
         number(t.oversubscription) + ":1, links " + describeRate(linkRate);
}

std::vector<int> torusDimsOf(const std::string& name) {
  if (name.empty()) return {};
  const Topology t = parseTopology(name);
  if (t.kind != Topology::Kind::Torus) return {};
  return {t.rows, t.cols};
}

}  // namespace arl
