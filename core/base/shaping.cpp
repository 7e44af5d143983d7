#include "base/shaping.h"

#include <cmath>
#include <cstdio>
#include <utility>

#include "base/errors.h"

namespace arl {

double LinkShaping::portRate(int rank) const {
  auto it = rankPortBytesPerSecond.find(rank);
  return it == rankPortBytesPerSecond.end() ? portBytesPerSecond : it->second;
}

double LinkShaping::linkRate(int from, int to) const {
  auto it = linkBytesPerSecond.find({from, to});
  return it == linkBytesPerSecond.end() ? 0 : it->second;
}

namespace {

bool goodRate(double r) { return std::isfinite(r) && r > 0; }

}  // namespace

double lowerRate(double a, double b) {
  if (a <= 0) return b;
  if (b <= 0) return a;
  return std::min(a, b);
}

double LinkShaping::pathRate(int from, int to) const {
  return lowerRate(lowerRate(portRate(from), portRate(to)), linkRate(from, to));
}

std::string describeRate(double bytesPerSecond) {
  char buf[64];
  if (bytesPerSecond >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.3g GB/s", bytesPerSecond / 1e9);
  } else if (bytesPerSecond >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.3g MB/s", bytesPerSecond / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.3g KB/s", bytesPerSecond / 1e3);
  }
  return buf;
}

namespace {

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

void checkRank(ShapingPart part, const std::string& entry, int rank, int nranks) {
  if (rank < 0 || rank >= nranks) {
    throw ShapingError(part, entry,
                       "rank " + std::to_string(rank) + " is out of range for " +
                           std::to_string(nranks) + " ranks (0.." + std::to_string(nranks - 1) +
                           ")");
  }
}

}  // namespace

const char* describe(ShapingPart p) {
  switch (p) {
    case ShapingPart::PortRate: return "port rate";
    case ShapingPart::AddedLatency: return "added latency";
    case ShapingPart::SlowRank: return "slow rank";
    case ShapingPart::SlowLink: return "slow link";
  }
  return "link shaping";
}

ShapingError::ShapingError(ShapingPart p, std::string v, std::string r)
    : ConfigError(std::string(describe(p)) + " " + v + ": " + r),
      part(p),
      value(std::move(v)),
      rule(std::move(r)) {}

void checkShaping(const LinkShaping& s, int nranks) {
  if (s.portBytesPerSecond != 0 && !goodRate(s.portBytesPerSecond)) {
    throw ShapingError(ShapingPart::PortRate, number(s.portBytesPerSecond) + " bytes/s",
                       "a rate must be positive");
  }
  if (!std::isfinite(s.addedLatencySeconds) || s.addedLatencySeconds < 0) {
    throw ShapingError(ShapingPart::AddedLatency, number(s.addedLatencySeconds) + " s",
                       "must be zero or more");
  }
  for (const auto& [rank, rate] : s.rankPortBytesPerSecond) {
    const std::string name = std::to_string(rank);
    checkRank(ShapingPart::SlowRank, name, rank, nranks);
    if (!goodRate(rate)) {
      throw ShapingError(ShapingPart::SlowRank, name,
                         "rate " + number(rate) + " bytes/s must be positive");
    }
  }
  for (const auto& [link, rate] : s.linkBytesPerSecond) {
    const std::string name = std::to_string(link.first) + "-" + std::to_string(link.second);
    checkRank(ShapingPart::SlowLink, name, link.first, nranks);
    checkRank(ShapingPart::SlowLink, name, link.second, nranks);
    if (link.first == link.second) {
      throw ShapingError(ShapingPart::SlowLink, name, "a link joins two different ranks");
    }
    if (!goodRate(rate)) {
      throw ShapingError(ShapingPart::SlowLink, name,
                         "rate " + number(rate) + " bytes/s must be positive");
    }
  }
}

std::string describeShaping(const LinkShaping& s) {
  if (s.empty()) return "unshaped";
  std::string out;
  auto add = [&out](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
  if (s.portBytesPerSecond > 0) add("ports " + describeRate(s.portBytesPerSecond));
  if (s.addedLatencySeconds > 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "+%.3g us per message", s.addedLatencySeconds * 1e6);
    add(buf);
  }
  for (const auto& [rank, rate] : s.rankPortBytesPerSecond) {
    add("rank " + std::to_string(rank) + " at " + describeRate(rate));
  }
  for (const auto& [link, rate] : s.linkBytesPerSecond) {
    add("link " + std::to_string(link.first) + "->" + std::to_string(link.second) + " at " +
        describeRate(rate));
  }
  return out;
}

}  // namespace arl
