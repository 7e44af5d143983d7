#include "charts/link_load.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <set>
#include <utility>

#include "exec/timeline.h"

namespace arl::ui {
namespace {

// The length of the union of [start, end) spans (sorted in place).
int64_t unionLength(std::vector<std::pair<int64_t, int64_t>>& spans) {
  if (spans.empty()) return 0;
  std::sort(spans.begin(), spans.end());
  int64_t total = 0, curS = spans[0].first, curE = spans[0].second;
  for (const auto& [s, e] : spans) {
    if (s > curE) {
      total += curE - curS;
      curS = s;
    }
    curE = std::max(curE, e);
  }
  return total + (curE - curS);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// The busiest link with traffic, the median busy share, and whether the busiest stands out.
void findBottleneck(LinkLoads& l) {
  std::vector<double> busy;
  double top = -1;
  for (int a = 0; a < l.nranks; ++a) {
    for (int b = 0; b < l.nranks; ++b) {
      const LinkLoad& x = l.at(a, b);
      if (x.bytes == 0) continue;
      busy.push_back(x.busy);
      if (x.busy > top) {
        top = x.busy;
        l.busiestSender = a;
        l.busiestReceiver = b;
      }
    }
  }
  l.medianBusy = median(busy);
  l.bottleneck = busy.size() > 1 && top - l.medianBusy >= LinkLoads::kStandsOut;
}

}  // namespace

bool LinkLoads::shaped() const {
  return std::any_of(links.begin(), links.end(), [](const LinkLoad& x) {
    return x.bytes > 0 && x.configuredBytesPerSecond > 0;
  });
}

std::string percentLabel(double share) { return std::to_string(std::lround(share * 100)) + "%"; }

LinkLoads linkLoads(const std::vector<TelemetryEvent>& events, int nranks,
                    const LinkShaping& shaping, const std::vector<uint32_t>& iterations) {
  LinkLoads l;
  l.nranks = std::max(nranks, 0);
  const auto inRange = [&](int rank) { return rank >= 0 && rank < l.nranks; };
  const std::set<uint32_t> wanted(iterations.begin(), iterations.end());
  const auto counts = [&](const TelemetryEvent& e) {
    return inRange(e.rank) && (e.peer < 0 || inRange(e.peer)) &&
           (wanted.empty() || wanted.count(e.iteration) != 0);
  };
  std::map<uint32_t, std::pair<int64_t, int64_t>> spans;  // iteration -> first, last event
  for (const TelemetryEvent& e : events) {
    if (!counts(e)) continue;
    auto [it, fresh] = spans.try_emplace(e.iteration, e.tNs, e.tNs);
    if (!fresh) {
      it->second.first = std::min(it->second.first, e.tNs);
      it->second.second = std::max(it->second.second, e.tNs);
    }
  }
  l.iterations = static_cast<int>(spans.size());
  for (const auto& [it, span] : spans) l.iterationNs += span.second - span.first;
  const size_t n = static_cast<size_t>(l.nranks);
  l.links.assign(n * n, LinkLoad{});
  std::vector<std::vector<std::pair<int64_t, int64_t>>> flights(n * n);
  // The timeline of the events that count: `events` itself when every one does.
  std::vector<TelemetryEvent> kept;
  const bool all = std::all_of(events.begin(), events.end(), counts);
  if (!all) std::copy_if(events.begin(), events.end(), std::back_inserter(kept), counts);
  const Timeline timeline(all ? events : kept);
  for (const Transfer& x : timeline.transfers()) {
    if (!inRange(x.sender) || !inRange(x.receiver)) continue;
    const size_t k = static_cast<size_t>(x.sender) * n + static_cast<size_t>(x.receiver);
    l.links[k].bytes += x.bytes;
    flights[k].emplace_back(x.sendStartNs, std::max(x.recvEndNs, x.sendStartNs));
  }
  for (size_t k = 0; k < n * n; ++k) {
    LinkLoad& x = l.links[k];
    x.busyNs = unionLength(flights[k]);
    if (x.bytes == 0 || x.busyNs <= 0) continue;
    x.busy = l.iterationNs > 0
                 ? std::min(1.0, static_cast<double>(x.busyNs) / static_cast<double>(l.iterationNs))
                 : 0;
    x.bytesPerSecond = static_cast<double>(x.bytes) * 1e9 / static_cast<double>(x.busyNs);
    x.configuredBytesPerSecond = shaping.pathRate(static_cast<int>(k / n), static_cast<int>(k % n));
    if (x.configuredBytesPerSecond > 0) x.pace = x.bytesPerSecond / x.configuredBytesPerSecond;
  }
  findBottleneck(l);
  return l;
}

std::vector<uint32_t> timedIterations(const RunResult& res) {
  std::set<uint32_t> its;
  for (const RankIteration& r : res.perRank) its.insert(r.iteration);
  return {its.begin(), its.end()};
}

}  // namespace arl::ui
