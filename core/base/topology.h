// Named topologies: a cluster's network given by a name and a few numbers (--topology),
// expanded into the LinkShaping (base/shaping.h) that the data planes pace and the model
// prices. Two shapes:
//
//   torus:RxC[@RATE]          R*C ranks row-major on an R x C grid with wrap-around (rank r at
//                             row r / C, column r % C). A link joins each rank to its four
//                             neighbours; a message between ranks h hops apart (the grid
//                             distance, the shorter way round in each dimension) runs at
//                             RATE / h and pays h times the per-hop latency.
//   fat-tree:K[:O][@RATE]     leaf switches of K consecutive ranks under one spine, uplinks
//                             oversubscribed O:1 (default 1, a full-bisection tree). Inside a
//                             leaf a message runs at RATE and crosses 2 links (up to the leaf,
//                             down); between leaves it runs at RATE / O and crosses 4.
//
// RATE is the rate of one link (bytes per second, K, M, G = 1e3, 1e6, 1e9); without @RATE
// the link rate is --nic-bw's, and without either kDefaultLinkBytesPerSecond. The per-hop
// latency is --link-latency's.
//
// What it leaves out: every pair of ranks has a path of its own, so messages that would share
// a physical link in a real torus or tree do not slow each other (the model is distance-priced,
// not congestion-aware); a fat tree's oversubscription is the rate each flow leaving its leaf
// gets when all K ranks of the leaf send out at once.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/errors.h"
#include "base/shaping.h"

namespace arl {

// A topology's link rate when neither @RATE nor --nic-bw gives one: 1 GB/s, below what one
// machine's data planes move (so the pacing, not the machine, sets the pace) and within a
// factor of a few of a cluster NIC's per-link share.
inline constexpr double kDefaultLinkBytesPerSecond = 1e9;

struct Topology {
  enum class Kind { Torus, FatTree };
  Kind kind = Kind::Torus;
  int rows = 0;                   // torus
  int cols = 0;                   // torus
  int groupSize = 0;              // fat tree: ranks per leaf (K)
  double oversubscription = 1;    // fat tree: O of O:1
  double linkBytesPerSecond = 0;  // @RATE; 0 = the link rate comes from elsewhere (--nic-bw)
  bool operator==(const Topology&) const = default;
};

// A refused topology: what() is the rule broken ("expected torus:RxC[@RATE] or
// fat-tree:K[:O][@RATE]", "torus:4x4 has 16 ranks, the run has 8").
struct TopologyError : ConfigError {
  using ConfigError::ConfigError;
};

// Parses the --topology text; throws TopologyError.
Topology parseTopology(std::string_view text);

// The canonical spelling: "torus:4x4", "fat-tree:8:4", with "@RATE" when one was given.
std::string topologyName(const Topology& t);

// Throws TopologyError when t does not fit a world of `nranks` ranks: a torus whose R*C is not
// nranks, a fat tree whose K does not divide nranks.
void checkTopology(const Topology& t, int nranks);

// The links a message from a to b crosses (a != b): the torus's grid distance; 2 inside a fat
// tree's leaf, 4 between leaves.
int topologyHops(const Topology& t, int a, int b);

// The rate of the path from a to b: RATE / hops on the torus; RATE inside a leaf and RATE / O
// between leaves on the fat tree.
double topologyPathRate(const Topology& t, double linkRate, int a, int b);

// The shaping of the world of `nranks` ranks on t (checked by checkTopology): `base` (its
// ports, added latency) with every ordered pair's link at topologyPathRate() and, when
// hopLatencySeconds > 0, its own latency at hops x hopLatencySeconds. The link rate is t's
// @RATE, else base.portBytesPerSecond, else kDefaultLinkBytesPerSecond. base's
// addedLatencySeconds is kept as given: pass the per-hop latency separately.
LinkShaping expandTopology(const Topology& t, int nranks, LinkShaping base,
                           double hopLatencySeconds);

// The rate of t's links: its @RATE, else the ports' rate of `base`, else
// kDefaultLinkBytesPerSecond.
double topologyLinkRate(const Topology& t, const LinkShaping& base);

// The dimensions of the torus `name` names ({R, C} for torus:RxC), for swing's steps
// (GenParams::torusDims); empty for no name or another topology. Throws TopologyError for a
// name parseTopology() refuses.
std::vector<int> torusDimsOf(const std::string& name);

// One line for headers: "torus 4x4 with wrap-around, links 1 GB/s, paths at RATE / hops",
// "fat tree, leaves of 8 ranks, uplinks 4:1, links 1 GB/s".
std::string describeTopology(const Topology& t, double linkRate);

}  // namespace arl
