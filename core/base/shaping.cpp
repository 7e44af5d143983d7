#include "base/shaping.h"

#include <cmath>
#include <cstdio>

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

std::string rateText(double bytesPerSecond) {
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

void checkRank(const char* what, int rank, int nranks) {
  if (rank < 0 || rank >= nranks) {
    throw ConfigError(std::string(what) + ": rank " + std::to_string(rank) +
                      " is out of range for " + std::to_string(nranks) + " ranks (0.." +
                      std::to_string(nranks - 1) + ")");
  }
}

}  // namespace

void checkShaping(const LinkShaping& s, int nranks) {
  if (s.portBytesPerSecond != 0 && !goodRate(s.portBytesPerSecond)) {
    throw ConfigError("port rate " + std::to_string(s.portBytesPerSecond) +
                      " bytes/s: a rate must be positive");
  }
  if (!std::isfinite(s.addedLatencySeconds) || s.addedLatencySeconds < 0) {
    throw ConfigError("added latency " + std::to_string(s.addedLatencySeconds) +
                      " s: must be zero or more");
  }
  for (const auto& [rank, rate] : s.rankPortBytesPerSecond) {
    checkRank("slow rank", rank, nranks);
    if (!goodRate(rate)) {
      throw ConfigError("slow rank " + std::to_string(rank) + ": rate " + std::to_string(rate) +
                        " bytes/s must be positive");
    }
  }
  for (const auto& [link, rate] : s.linkBytesPerSecond) {
    const std::string name = std::to_string(link.first) + "-" + std::to_string(link.second);
    checkRank(("slow link " + name).c_str(), link.first, nranks);
    checkRank(("slow link " + name).c_str(), link.second, nranks);
    if (link.first == link.second) {
      throw ConfigError("slow link " + name + ": a link joins two different ranks");
    }
    if (!goodRate(rate)) {
      throw ConfigError("slow link " + name + ": rate " + std::to_string(rate) +
                        " bytes/s must be positive");
    }
  }
}

std::string describeShaping(const LinkShaping& s) {
  if (s.empty()) return "unshaped";
  std::string out;
  auto add = [&out](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
  if (s.portBytesPerSecond > 0) add("ports " + rateText(s.portBytesPerSecond));
  if (s.addedLatencySeconds > 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "+%.3g us per message", s.addedLatencySeconds * 1e6);
    add(buf);
  }
  for (const auto& [rank, rate] : s.rankPortBytesPerSecond) {
    add("rank " + std::to_string(rank) + " at " + rateText(rate));
  }
  for (const auto& [link, rate] : s.linkBytesPerSecond) {
    add("link " + std::to_string(link.first) + "->" + std::to_string(link.second) + " at " +
        rateText(rate));
  }
  return out;
}

}  // namespace arl
