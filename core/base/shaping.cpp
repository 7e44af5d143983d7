#include "base/shaping.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
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

double LinkShaping::pathLatency(int from, int to) const {
  auto it = linkLatencySeconds.find({from, to});
  return addedLatencySeconds + (it == linkLatencySeconds.end() ? 0 : it->second);
}

std::optional<double> parseRateText(std::string_view t) {
  double scale = 1;
  if (!t.empty()) {
    switch (t.back()) {
      case 'K':
      case 'k': scale = 1e3; break;
      case 'M': scale = 1e6; break;
      case 'G': scale = 1e9; break;
      default: break;
    }
    if (scale != 1) t.remove_suffix(1);
  }
  if (t.empty() || t.front() == '+' || t.front() == '-') return std::nullopt;
  double x = 0;
  const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), x);
  if (ec != std::errc() || p != t.data() + t.size()) return std::nullopt;
  if (!std::isfinite(x * scale) || x * scale <= 0) return std::nullopt;
  return x * scale;
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

std::string linkName(const std::pair<int, int>& link) {
  return std::to_string(link.first) + "-" + std::to_string(link.second);
}

void checkLink(ShapingPart part, const std::pair<int, int>& link, int nranks) {
  const std::string name = linkName(link);
  checkRank(part, name, link.first, nranks);
  checkRank(part, name, link.second, nranks);
  if (link.first == link.second) throw ShapingError(part, name, "a link joins two different ranks");
}

// Beyond this many links (a named topology shapes every pair) the line gives their range.
constexpr size_t kLinksListed = 4;

std::string linkRange(const std::map<std::pair<int, int>, double>& links, const char* what,
                      const std::function<std::string(double)>& show) {
  double lo = links.begin()->second, hi = lo;
  for (const auto& [link, x] : links) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  const std::string range = lo == hi ? show(lo) : show(lo) + " to " + show(hi);
  return std::to_string(links.size()) + " links " + what + range;
}

std::string latencyText(double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "+%.3g us", seconds * 1e6);
  return buf;
}

}  // namespace

const char* describe(ShapingPart p) {
  switch (p) {
    case ShapingPart::PortRate: return "port rate";
    case ShapingPart::AddedLatency: return "added latency";
    case ShapingPart::SlowRank: return "slow rank";
    case ShapingPart::SlowLink: return "slow link";
    case ShapingPart::LinkLatency: return "link latency";
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
    checkLink(ShapingPart::SlowLink, link, nranks);
    if (!goodRate(rate)) {
      throw ShapingError(ShapingPart::SlowLink, linkName(link),
                         "rate " + number(rate) + " bytes/s must be positive");
    }
  }
  for (const auto& [link, seconds] : s.linkLatencySeconds) {
    checkLink(ShapingPart::LinkLatency, link, nranks);
    if (!std::isfinite(seconds) || seconds < 0) {
      throw ShapingError(ShapingPart::LinkLatency, linkName(link),
                         "latency " + number(seconds) + " s must be zero or more");
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
  if (s.linkBytesPerSecond.size() > kLinksListed) {
    add(linkRange(s.linkBytesPerSecond, "at ", describeRate));
  } else {
    for (const auto& [link, rate] : s.linkBytesPerSecond) {
      add("link " + std::to_string(link.first) + "->" + std::to_string(link.second) + " at " +
          describeRate(rate));
    }
  }
  if (!s.linkLatencySeconds.empty()) add(linkRange(s.linkLatencySeconds, "", latencyText));
  return out;
}

}  // namespace arl
