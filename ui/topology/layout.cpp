#include "topology/layout.h"

#include <QLineF>
#include <algorithm>
#include <cmath>
#include <numbers>
#include <set>

#include "exec/run_request.h"
#include "style/units.h"

namespace arl::ui {

namespace {

constexpr double kHalfWidth = 470;
constexpr double kHalfHeight = 370;

double radiusFor(int n) {
  if (n <= 4) return 44;
  if (n <= 8) return 34;
  if (n <= 16) return 24;
  if (n <= 32) return 15;
  return 10;
}

QPointF unit(QPointF v) {
  const double len = std::hypot(v.x(), v.y());
  return len > 1e-9 ? v / len : QPointF(0, 1);
}

QPointF onCircle(double radius, int i, int n, QPointF centre = {}) {
  const double a = -std::numbers::pi / 2 + 2 * std::numbers::pi * i / std::max(n, 1);
  return centre + QPointF(radius * std::cos(a), radius * std::sin(a));
}

int addNode(Layout& l, int rank, QPointF pos, QPointF outward, int group = 0) {
  l.nodes.push_back({rank, pos, unit(outward), group});
  l.nodeOf[{rank, group}] = static_cast<int>(l.nodes.size()) - 1;
  return static_cast<int>(l.nodes.size()) - 1;
}

void addLink(Layout& l, int a, int b, int group = 0) {
  if (a == b || a < 0 || b < 0) return;
  const auto key = std::minmax(a, b);
  if (l.linkIndex.count({key.first, key.second})) return;
  l.linkIndex[{key.first, key.second}] = static_cast<int>(l.links.size());
  l.links.push_back({key.first, key.second, group, -1, 0, false, {}});
}

// Rank pairs the schedule sends between, as (sender, receiver, chunk).
std::vector<std::tuple<int, int, uint32_t>> scheduleEdges(const Schedule* s) {
  std::set<std::tuple<int, int, uint32_t>> edges;
  if (s == nullptr) return {};
  for (size_t r = 0; r < s->ranks.size(); ++r) {
    for (const Op& op : s->ranks[r]) {
      if (op.sendPeer >= 0) edges.insert({static_cast<int>(r), op.sendPeer, op.chunk});
    }
  }
  return {edges.begin(), edges.end()};
}

void linkScheduleEdges(Layout& l, const Schedule* s) {
  for (const auto& [from, to, chunk] : scheduleEdges(s)) {
    (void)chunk;
    addLink(l, l.nodeOf.count({from, 0}) ? l.nodeOf[{from, 0}] : -1,
            l.nodeOf.count({to, 0}) ? l.nodeOf[{to, 0}] : -1);
  }
}

void ringLayout(Layout& l, const TopologyRun& run) {
  const int n = run.nranks;
  std::vector<int> order = run.request.ringOrder;
  if (static_cast<int>(order.size()) != n) {
    order.resize(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  }
  const double radius = n <= 8 ? 300 : (n <= 16 ? 250 : 350);
  for (int p = 0; p < n; ++p) {
    const QPointF pos = onCircle(radius, p, n);
    addNode(l, order[static_cast<size_t>(p)], pos, pos);
  }
  for (int p = 0; p < n && n > 1; ++p) {
    addLink(l, p, (p + 1) % n);
    if (n > 2) l.links.back().from = p;
  }
}

// The trees the schedule uses: per chunk, each rank's parent (the peer it sends its partial
// sum to in the reduce phase, or receives from in the broadcast phase); chunks with the same
// parents share a tree.
std::vector<std::pair<std::vector<int>, std::vector<uint32_t>>> scheduleTrees(const Schedule& s) {
  const int n = s.nranks;
  std::map<uint32_t, std::vector<int>> parentsOf;
  for (int r = 0; r < n; ++r) {
    for (const Op& op : s.ranks[static_cast<size_t>(r)]) {
      auto& parents = parentsOf.try_emplace(op.chunk, std::vector<int>(static_cast<size_t>(n), -1))
                          .first->second;
      if (op.phase == Phase::Reduce && op.sendPeer >= 0)
        parents[static_cast<size_t>(r)] = op.sendPeer;
      if (op.phase == Phase::Broadcast && op.recvPeer >= 0)
        parents[static_cast<size_t>(r)] = op.recvPeer;
    }
  }
  std::vector<std::pair<std::vector<int>, std::vector<uint32_t>>> trees;
  for (const auto& entry : parentsOf) {
    const std::vector<int>& parents = entry.second;
    auto same =
        std::find_if(trees.begin(), trees.end(), [&](const auto& t) { return t.first == parents; });
    if (same == trees.end()) {
      trees.push_back({parents, {entry.first}});
    } else {
      same->second.push_back(entry.first);
    }
  }
  return trees;
}

// A tidy drawing of one tree: leaves in depth-first order on evenly spaced columns, each parent
// centred over its children. Returns (column, depth) per rank; depth -1 for ranks not in it.
std::vector<std::pair<double, int>> tidyTree(const std::vector<int>& parent, int& columns,
                                             int& depth) {
  const int n = static_cast<int>(parent.size());
  std::vector<std::vector<int>> children(static_cast<size_t>(n));
  int root = -1;
  for (int r = 0; r < n; ++r) {
    const int p = parent[static_cast<size_t>(r)];
    if (p >= 0 && p < n) children[static_cast<size_t>(p)].push_back(r);
  }
  for (int r = 0; r < n && root < 0; ++r) {
    if (parent[static_cast<size_t>(r)] < 0 && !children[static_cast<size_t>(r)].empty()) root = r;
  }
  std::vector<std::pair<double, int>> at(static_cast<size_t>(n), {0.0, -1});
  columns = 0;
  depth = 0;
  if (root < 0) return at;
  // Iterative post-order walk: a node is placed once its children are.
  std::vector<std::pair<int, size_t>> stack{{root, 0}};
  std::vector<int> d(static_cast<size_t>(n), 0);
  while (!stack.empty()) {
    auto& [v, next] = stack.back();
    const auto& ch = children[static_cast<size_t>(v)];
    if (next < ch.size()) {
      const int c = ch[next++];
      d[static_cast<size_t>(c)] = d[static_cast<size_t>(v)] + 1;
      stack.push_back({c, 0});
      continue;
    }
    double x = columns;
    if (ch.empty()) {
      ++columns;
    } else {
      x = 0;
      for (int c : ch) x += at[static_cast<size_t>(c)].first;
      x /= static_cast<double>(ch.size());
    }
    at[static_cast<size_t>(v)] = {x, d[static_cast<size_t>(v)]};
    depth = std::max(depth, d[static_cast<size_t>(v)]);
    stack.pop_back();
  }
  return at;
}

void treeLayout(Layout& l, const TopologyRun& run, const Schedule* s) {
  if (s == nullptr) return;
  const auto trees = scheduleTrees(*s);
  const int count = static_cast<int>(trees.size());
  // Two trees (the double binary tree) side by side, each the full height: their levels get
  // room for the buffer strips under the nodes. Otherwise one above the other.
  const bool sideBySide = count == 2;
  const double panelW = sideBySide ? kHalfWidth : 2 * kHalfWidth;
  const double panelH = sideBySide ? 2 * kHalfHeight : 2 * kHalfHeight / std::max(count, 1);
  for (int t = 0; t < count; ++t) {
    int columns = 0;
    int depth = 0;
    const auto at = tidyTree(trees[static_cast<size_t>(t)].first, columns, depth);
    const double left = -kHalfWidth + (sideBySide ? t * panelW : 0);
    const double top = -kHalfHeight + (sideBySide ? 0 : t * panelH);
    // The panel's title, then the root a node's radius and a strip lower.
    const double levelH = (panelH - 150) / std::max(depth, 1);
    const double colW = panelW / std::max(columns, 1);
    l.nodeRadius = std::min(l.nodeRadius, std::min(0.34 * colW, 0.3 * levelH));
    for (int r = 0; r < run.nranks; ++r) {
      const auto [x, dep] = at[static_cast<size_t>(r)];
      if (dep < 0) continue;
      addNode(l, r, QPointF(left + colW * (x + 0.5), top + 100 + dep * levelH), QPointF(0, 1), t);
    }
    for (int r = 0; r < run.nranks; ++r) {
      const int p = trees[static_cast<size_t>(t)].first[static_cast<size_t>(r)];
      if (p >= 0 && l.nodeOf.count({r, t}) && l.nodeOf.count({p, t}))
        addLink(l, l.nodeOf[{r, t}], l.nodeOf[{p, t}], t);
    }
    for (uint32_t chunk : trees[static_cast<size_t>(t)].second) l.chunkGroup[chunk] = t;
    QString title = QStringLiteral("tree %1").arg(t);
    if (count == 2)
      title += t == 0 ? QStringLiteral(" · carries the first half")
                      : QStringLiteral(" · carries the second half");
    l.boxes.push_back({QRectF(left + 4, top + 4, panelW - 8, panelH - 8), title, false});
  }
}

// Hypercube drawing for 2..16 ranks: bits 0 and 1 a square, bit 2 an oblique copy of it (a
// cube), bit 3 a smaller copy inside the cube, about its centre (a tesseract).
QPointF cubePoint(int rank) {
  const QPointF depth(0.55, -0.45);
  QPointF p((rank & 1) ? 1 : -1, (rank & 2) ? 1 : -1);
  if (rank & 4) p += depth;
  if (rank & 8) p = depth / 2 + (p - depth / 2) * 0.4;
  return p;
}

void hypercubeLayout(Layout& l, const TopologyRun& run, const Schedule* s) {
  const int n = run.nranks;
  const bool pow2 = n > 0 && (n & (n - 1)) == 0;
  if (pow2 && n <= 16) {
    std::vector<QPointF> pts;
    QRectF box;
    for (int r = 0; r < n; ++r) pts.push_back(cubePoint(r));
    for (const QPointF& p : pts) box |= QRectF(p, QSizeF(1e-6, 1e-6));
    const double scale = std::min(kHalfWidth * 1.3 / std::max(box.width(), 1e-6),
                                  kHalfHeight * 1.3 / std::max(box.height(), 1e-6));
    for (int r = 0; r < n; ++r) {
      const QPointF pos = (pts[static_cast<size_t>(r)] - box.center()) * scale;
      addNode(l, r, pos, n == 16 && (r & 8) ? QPointF(0, 1) : pos);
    }
    l.kind = QStringLiteral("hypercube");
  } else {
    for (int r = 0; r < n; ++r) addNode(l, r, onCircle(330, r, n), onCircle(1, r, n));
    l.kind = QStringLiteral("circle");
  }
  linkScheduleEdges(l, s);
}

void starLayout(Layout& l, const TopologyRun& run, const Schedule* s) {
  const int n = run.nranks;
  const int root = run.request.algorithm == "parameter-server" ? 0 : run.request.root;
  addNode(l, root, QPointF(0, 0), QPointF(0, 1));
  int i = 0;
  for (int r = 0; r < n; ++r) {
    if (r == root) continue;
    const QPointF pos = onCircle(n <= 8 ? 330 : (n <= 16 ? 290 : 340), i++, n - 1);
    addNode(l, r, pos, pos);
  }
  linkScheduleEdges(l, s);
  if (s == nullptr) {
    for (int k = 1; k < static_cast<int>(l.nodes.size()); ++k) addLink(l, 0, k);
  }
}

// Each rank's parent in a rooted tree schedule: the rank it sends to in the reduce, else the
// rank it receives from in the broadcast (-1 for the root).
std::vector<int> treeParents(const Schedule& s) {
  std::vector<int> parent(s.ranks.size(), -1);
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    for (const Op& op : s.ranks[r]) {
      if (op.phase == Phase::Reduce && op.sendPeer >= 0) {
        parent[r] = op.sendPeer;
        break;
      }
      if (op.phase == Phase::Broadcast && op.recvPeer >= 0) {
        parent[r] = op.recvPeer;
        break;
      }
    }
  }
  return parent;
}

// A k-nomial tree drawn top-down: a rank's row is its number of hops to the root, read from
// the schedule's parents, so the drawing follows whatever radix the schedule was made with.
void knomialLayout(Layout& l, const TopologyRun& run, const Schedule& s) {
  const int n = run.nranks;
  const std::vector<int> parent = treeParents(s);
  std::vector<int> level(static_cast<size_t>(n), 0);
  int depth = 0;
  for (int r = 0; r < n; ++r) {
    for (int p = parent[static_cast<size_t>(r)]; p >= 0 && level[static_cast<size_t>(r)] < n;
         p = parent[static_cast<size_t>(p)]) {
      ++level[static_cast<size_t>(r)];
    }
    depth = std::max(depth, level[static_cast<size_t>(r)]);
  }
  const int root = s.collective == Collective::AllReduce ? 0 : s.root;
  const double rowGap = depth > 0 ? 2 * kHalfHeight / depth : 0;
  for (int lv = 0; lv <= depth; ++lv) {
    std::vector<int> row;  // ordered by distance from the root around the ring of ranks
    for (int k = 0; k < n; ++k) {
      const int r = (root + k) % n;
      if (level[static_cast<size_t>(r)] == lv) row.push_back(r);
    }
    const double gap = 2 * kHalfWidth / static_cast<double>(row.size());
    for (size_t i = 0; i < row.size(); ++i) {
      const QPointF pos(-kHalfWidth + gap * (static_cast<double>(i) + 0.5),
                        -kHalfHeight + rowGap * lv);
      addNode(l, row[i], pos, QPointF(0, 1));
    }
  }
  linkScheduleEdges(l, &s);
}

void hostsLayout(Layout& l, const TopologyRun& run, const Schedule* s) {
  const int n = run.nranks;
  int k = n;
  try {
    std::vector<std::string> hosts = run.hosts;
    if (static_cast<int>(hosts.size()) != n) hosts.assign(static_cast<size_t>(n), "localhost");
    k = std::clamp(ranksPerHost(run.request.ranksPerHost, hosts), 1, std::max(n, 1));
  } catch (const std::exception&) {
    k = std::max(n, 1);
  }
  const int h = (n + k - 1) / k;
  // Hosts on a grid of boxes, their ranks on a circle inside each.
  const int cols = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(h))));
  const int rows = (h + cols - 1) / cols;
  const double cell = std::min(2 * kHalfWidth / cols, 2 * kHalfHeight / rows);
  const double boxHalf = cell / 2 - 14;
  for (int host = 0; host < h; ++host) {
    const int row = host / cols;
    const int col = host % cols;
    const QPointF centre((col - (cols - 1) / 2.0) * cell, (row - (rows - 1) / 2.0) * cell + 10);
    const int first = host * k;
    const int m = std::min(k, n - first);
    const double rr = boxHalf * 0.55;
    for (int j = 0; j < m; ++j) {
      const QPointF pos = m == 1 ? centre : onCircle(rr, j, m, centre);
      addNode(l, first + j, pos, pos - centre);
    }
    QString name = QStringLiteral("host %1").arg(host);
    if (static_cast<int>(run.hosts.size()) == n && !run.hosts[static_cast<size_t>(first)].empty()) {
      name += QStringLiteral(" · ") + QString::fromStdString(run.hosts[static_cast<size_t>(first)]);
    }
    l.boxes.push_back(
        {QRectF(centre - QPointF(boxHalf, boxHalf), QSizeF(2 * boxHalf, 2 * boxHalf)), name, true});
  }
  linkScheduleEdges(l, s);
}

// Centres the drawing (nodes and frames) in the scene, a little below the middle: the caption
// covers the top of the view.
void centre(Layout& l) {
  QRectF box;
  for (const LayoutNode& n : l.nodes) box |= QRectF(n.pos, QSizeF(1e-6, 1e-6));
  for (const LayoutBox& b : l.boxes) box |= b.rect;
  const QPointF shift = QPointF(0, 24) - box.center();
  for (LayoutNode& n : l.nodes) n.pos += shift;
  for (LayoutBox& b : l.boxes) b.rect.translate(shift);
}

// The rate a link is slow against: the ports'; where every link has a rate of its own and the
// ports none (a named topology), the fastest link's, so only its longer paths are marked.
double normalRate(const LinkShaping& sh, size_t nodes) {
  if (sh.portBytesPerSecond > 0 || nodes < 2 ||
      sh.linkBytesPerSecond.size() < nodes * (nodes - 1)) {
    return sh.portBytesPerSecond;
  }
  double fastest = 0;
  for (const auto& [link, rate] : sh.linkBytesPerSecond) fastest = std::max(fastest, rate);
  return fastest;
}

void applyShaping(Layout& l, const TopologyRun& run) {
  const LinkShaping& sh = run.shaping;
  const double base = normalRate(sh, l.nodes.size());
  for (const auto& [rank, rate] : sh.rankPortBytesPerSecond) {
    if (base == 0 || rate < base) l.slowRanks[rank] = rate;
  }
  for (LayoutLink& link : l.links) {
    const int a = l.nodes[static_cast<size_t>(link.a)].rank;
    const int b = l.nodes[static_cast<size_t>(link.b)].rank;
    double rate = 0;
    for (double r : {sh.linkRate(a, b), sh.linkRate(b, a), sh.portRate(a), sh.portRate(b)}) {
      if (r > 0) rate = rate == 0 ? r : std::min(rate, r);
    }
    link.rate = rate;
    const bool own = sh.linkBytesPerSecond.count({a, b}) || sh.linkBytesPerSecond.count({b, a});
    link.slow = rate > 0 && (base == 0 || rate < base);
    if (own || link.slow) link.label = QString::fromStdString(rateLabel(rate));
  }
}

}  // namespace

// In-network reduction: the switch (the schedule's last rank, played by a worker) above a row
// of its ranks, each rank linked to it alone.
void switchLayout(Layout& l, const TopologyRun& run, const Schedule* s) {
  const int n = (s != nullptr ? s->nranks : run.nranks) - 1;  // the ranks; rank n is the switch
  const int sw = addNode(l, n, QPointF(0, -kHalfHeight * 0.55), QPointF(0, -1));
  l.nodes[static_cast<size_t>(sw)].label = QStringLiteral("SW");
  l.boxes.push_back({QRectF(-160, -kHalfHeight * 0.55 - 140, 320, 60),
                     QStringLiteral("switch (rank %1, a worker)").arg(n), false});
  const double gap = 2 * kHalfWidth / std::max(n, 1);
  for (int r = 0; r < n; ++r) {
    addNode(l, r, QPointF(-kHalfWidth + gap * (r + 0.5), kHalfHeight * 0.45), QPointF(0, 1));
  }
  linkScheduleEdges(l, s);
  if (s == nullptr) {
    for (int r = 0; r < n; ++r) addLink(l, sw, l.nodeOf[{r, 0}]);
  }
}

std::pair<int, int> Layout::route(int sender, int receiver, uint32_t chunk) const {
  int group = 0;
  if (const auto g = chunkGroup.find(chunk); g != chunkGroup.end()) group = g->second;
  const auto a = nodeOf.find({sender, group});
  const auto b = nodeOf.find({receiver, group});
  if (a == nodeOf.end() || b == nodeOf.end()) return {-1, -1};
  return {a->second, b->second};
}

Layout makeLayout(const TopologyRun& run, const Schedule* schedule) {
  Layout l;
  l.nodeRadius = radiusFor(run.nranks);
  const std::string& algo = run.request.algorithm;
  if (run.nranks <= 0) return l;
  if (algo == "ring") {
    l.kind = QStringLiteral("ring");
    ringLayout(l, run);
  } else if (algo == "tree" && run.nranks > 1) {
    l.kind = QStringLiteral("tree");
    treeLayout(l, run, schedule);
  } else if (algo == "halving-doubling" || algo == "recursive-doubling") {
    hypercubeLayout(l, run, schedule);
  } else if (algo == "parameter-server" || algo == "reduce-broadcast") {
    l.kind = QStringLiteral("star");
    starLayout(l, run, schedule);
  } else if (algo == "knomial" && schedule != nullptr) {
    l.kind = QStringLiteral("knomial");
    knomialLayout(l, run, *schedule);
  } else if (algo == "switch" && run.nranks > 1) {
    l.kind = QStringLiteral("switch");
    switchLayout(l, run, schedule);
  } else if (algo == "hierarchical") {
    l.kind = QStringLiteral("hosts");
    hostsLayout(l, run, schedule);
  } else {
    l.kind = QStringLiteral("circle");
    for (int r = 0; r < run.nranks; ++r)
      addNode(l, r, onCircle(330, r, run.nranks), onCircle(1, r, run.nranks));
    linkScheduleEdges(l, schedule);
  }
  if (l.kind != QStringLiteral("tree")) centre(l);
  l.stripsAsRings = run.nranks > 16 || (l.kind != QStringLiteral("ring") &&
                                        l.kind != QStringLiteral("star") && run.nranks > 8);
  applyShaping(l, run);
  return l;
}

}  // namespace arl::ui
