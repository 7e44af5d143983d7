// Shaping of the network between ranks: what one machine imposes on its data planes so that it
// behaves like a cluster, and what the cost model predicts under. Every rank has a port with
// an egress and an ingress capacity (full duplex); a message also pays an added latency, and a
// directed link can be slower than the ports at its ends. The fields map one to one onto the
// command-line flags:
//   --nic-bw RATE          portBytesPerSecond: every rank's port, each direction
//   --link-latency TIME    addedLatencySeconds: added to every message
//   --slow-rank R:RATE     rankPortBytesPerSecond[R]: rank R's port, each direction (repeatable)
//   --slow-link A-B:RATE   linkBytesPerSecond[{A, B}]: the directed link A -> B (repeatable)
// Rates are bytes per second. A port or link that no field names is not shaped: it runs at the
// machine's own speed. Shaping only ever slows a transfer (a rate above the machine's own is
// the machine's own).
#pragma once

#include <map>
#include <string>
#include <utility>

namespace arl {

struct LinkShaping {
  double portBytesPerSecond = 0;                             // 0 = ports unshaped
  double addedLatencySeconds = 0;                            // per message
  std::map<int, double> rankPortBytesPerSecond;              // rank -> its port's rate
  std::map<std::pair<int, int>, double> linkBytesPerSecond;  // (from, to) -> the link's rate

  // No field set: the network is the machine's own.
  bool empty() const {
    return portBytesPerSecond == 0 && addedLatencySeconds == 0 && rankPortBytesPerSecond.empty() &&
           linkBytesPerSecond.empty();
  }
  // Every rank and link alike (no slow rank, no slow link): a closed form can say it.
  bool uniform() const { return rankPortBytesPerSecond.empty() && linkBytesPerSecond.empty(); }
  // The rate rank r's port is shaped to (0 = unshaped).
  double portRate(int rank) const;
  // The rate of the directed link from -> to (0 = not shaped beyond its ports).
  double linkRate(int from, int to) const;
  bool operator==(const LinkShaping&) const = default;
};

// Throws ConfigError naming the first bad entry for a world of `nranks`: a rate that is not
// positive and finite, a negative or non-finite latency, a rank out of range, a link from a
// rank to itself.
void checkShaping(const LinkShaping& s, int nranks);

// One line for headers and logs, e.g. "ports 200 MB/s, +50 us per message, rank 3 at
// 50 MB/s, link 1->2 at 50 MB/s"; "unshaped" when empty.
std::string describeShaping(const LinkShaping& s);

}  // namespace arl
