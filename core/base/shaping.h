// Shaping of the network between ranks: what one machine imposes on its data planes so that it
// behaves like a cluster, and what the cost model predicts under. Every rank has a port with
// an egress and an ingress capacity (full duplex); a message also pays an added latency, and a
// directed link can be slower than the ports at its ends. The fields map one to one onto the
// command-line flags:
//   --nic-bw RATE          portBytesPerSecond: every rank's port, each direction
//   --link-latency TIME    addedLatencySeconds: added to every message
//   --slow-rank R:RATE     rankPortBytesPerSecond[R]: rank R's port, each direction (repeatable)
//   --slow-link A-B:RATE   linkBytesPerSecond[{A, B}]: the directed link A -> B (repeatable)
// A named topology (--topology, base/topology.h) fills linkBytesPerSecond for every pair of
// ranks and, with --link-latency, linkLatencySeconds: a message from A to B pays
// addedLatencySeconds plus linkLatencySeconds[{A, B}] (a latency per hop times the hops).
// Rates are bytes per second. A port or link that no field names is not shaped: it runs at the
// machine's own speed. Shaping only ever slows a transfer (a rate above the machine's own is
// the machine's own).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "base/errors.h"

namespace arl {

struct LinkShaping {
  double portBytesPerSecond = 0;                             // 0 = ports unshaped
  double addedLatencySeconds = 0;                            // per message
  std::map<int, double> rankPortBytesPerSecond;              // rank -> its port's rate
  std::map<std::pair<int, int>, double> linkBytesPerSecond;  // (from, to) -> the link's rate
  std::map<std::pair<int, int>, double> linkLatencySeconds;  // (from, to) -> its own latency

  // No field set: the network is the machine's own.
  bool empty() const {
    return portBytesPerSecond == 0 && addedLatencySeconds == 0 && rankPortBytesPerSecond.empty() &&
           linkBytesPerSecond.empty() && linkLatencySeconds.empty();
  }
  // Every rank and link alike (no slow rank, no slow link, no link's own latency): a closed
  // form can say it.
  bool uniform() const {
    return rankPortBytesPerSecond.empty() && linkBytesPerSecond.empty() &&
           linkLatencySeconds.empty();
  }
  // The rate rank r's port is shaped to (0 = unshaped).
  double portRate(int rank) const;
  // The rate of the directed link from -> to (0 = not shaped beyond its ports).
  double linkRate(int from, int to) const;
  // The rate a transfer from -> to is paced at: the lowest of the sender's port, the
  // receiver's port and the link's own rate (0 = unshaped), as the data planes pace it.
  double pathRate(int from, int to) const;
  // The latency a message from -> to pays: the added latency plus the link's own.
  double pathLatency(int from, int to) const;
  bool operator==(const LinkShaping&) const = default;
};

// The part of a LinkShaping a refusal is about: one per command-line flag, so that each client
// names its own control for it.
enum class ShapingPart {
  PortRate,      // portBytesPerSecond (--nic-bw)
  AddedLatency,  // addedLatencySeconds (--link-latency)
  SlowRank,      // rankPortBytesPerSecond (--slow-rank)
  SlowLink,      // linkBytesPerSecond (--slow-link)
  LinkLatency,   // linkLatencySeconds (--topology with --link-latency)
};

// A refused shaping. what() reads "<part> <value>: <rule>", e.g. "slow rank 7: rank 7 is out of
// range for 4 ranks (0..3)" or "slow link 2-2: a link joins two different ranks"; `value` is
// the entry's rank or link ("7", "1-2") for slow ranks and links (and links' latencies), the
// number for the others.
struct ShapingError : ConfigError {
  ShapingError(ShapingPart p, std::string v, std::string r);
  ShapingPart part;
  std::string value;
  std::string rule;
};

// "port rate", "added latency", "slow rank", "slow link".
const char* describe(ShapingPart p);

// Throws ShapingError naming the first bad entry for a world of `nranks`: a rate that is not
// positive and finite, a negative or non-finite latency, a rank out of range, a link from a
// rank to itself.
void checkShaping(const LinkShaping& s, int nranks);

// The lower of two rates where 0 means unshaped (so 0 only when both are).
double lowerRate(double a, double b);

// A rate as the flags spell it: a positive number with an optional K, M or G suffix (powers of
// ten: 500M = 500e6 bytes/s); none when the text is not one.
std::optional<double> parseRateText(std::string_view text);

// A rate for people: "50 MB/s", "1.25 GB/s".
std::string describeRate(double bytesPerSecond);

// One line for headers and logs, e.g. "ports 200 MB/s, +50 us per message, rank 3 at
// 50 MB/s, link 1->2 at 50 MB/s"; "unshaped" when empty.
std::string describeShaping(const LinkShaping& s);

}  // namespace arl
