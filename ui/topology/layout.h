// Where the topology view puts ranks and links, to suit the algorithm: the ring on a circle in
// ring order, the tree algorithm's two trees as trees (each rank drawn once per tree), the
// hypercube of halving- and recursive-doubling, the star of the parameter server and of
// reduce-broadcast, the k-nomial tree top-down, the switch above its ranks (switch), hosts
// containing their ranks for hierarchical;
// any other algorithm (bruck, pat, swing) on a circle in rank order, its chords the distances
// its steps span. Links are the rank pairs the
// schedule connects, with their shaping. Scene units: the layout fits a 1000 x 800 box
// centred on the origin.
#pragma once

#include <QPointF>
#include <QRectF>
#include <QString>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "schedule/schedule.h"
#include "topology/topology_run.h"

namespace arl::ui {

// One drawing of a rank (a rank has one node, or one per tree).
struct LayoutNode {
  int rank = 0;
  QPointF pos;
  QPointF outward;  // unit vector pointing away from the drawing's centre: where its strip goes
  int group = 0;    // the tree it belongs to (tree layout), else 0
  QString label;    // drawn instead of the rank's number (the switch: "SW"); empty: the number
};

struct LayoutLink {
  int a = 0;  // node indices
  int b = 0;
  int group = 0;
  int from = -1;      // the node its messages leave (a one-way link, e.g. the ring), else -1
  double rate = 0;    // bytes/s its shaping allows (0 = unshaped)
  bool slow = false;  // slower than the rest of the network
  QString label;      // the rate, when shaped individually
};

// A frame drawn behind ranks: a host, or a tree's title.
struct LayoutBox {
  QRectF rect;
  QString title;
  bool framed = true;
};

struct Layout {
  QString kind;  // "ring", "tree", "hypercube", "star", "knomial", "switch", "hosts", "circle"
  std::vector<LayoutNode> nodes;
  std::vector<LayoutLink> links;
  std::vector<LayoutBox> boxes;
  double nodeRadius = 20;
  bool stripsAsRings = false;          // buffer strips folded into fill rings around the nodes
  std::map<int, double> slowRanks;     // rank -> its port's rate, where slower than the rest
  std::map<uint32_t, int> chunkGroup;  // chunk -> tree carrying it (tree layout)

  // The nodes a message from `sender` to `receiver` of `chunk` travels between; {-1, -1} when
  // the layout has no such pair.
  std::pair<int, int> route(int sender, int receiver, uint32_t chunk) const;
  // Links per node pair, for route().
  std::map<std::pair<int, int>, int> linkIndex;  // (node a, node b), a < b -> link
  std::map<std::pair<int, int>, int> nodeOf;     // (rank, group) -> node
};

Layout makeLayout(const TopologyRun& run, const Schedule* schedule);

}  // namespace arl::ui
