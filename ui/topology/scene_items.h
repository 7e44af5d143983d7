// The items of the topology scene: links (with their shaping), host and tree frames, ranks
// (node, buffer strip or fill ring) and one layer that paints every token in flight. Pens and
// brushes are made once per scene (SceneStyle), not per paint.
#pragma once

#include <QBrush>
#include <QFont>
#include <QGraphicsItem>
#include <QPen>
#include <vector>

#include "topology/layout.h"

namespace arl::ui {

class StripState;

struct SceneStyle {
  // `projector`: for the back of a classroom: thicker, darker links and outlines, rank labels
  // of at least kProjectorLabelPx on screen, and labels only where they matter (slow links).
  explicit SceneStyle(int nranks, bool projector = false);
  static constexpr double kProjectorLabelPx = 26;
  int nranks = 0;
  bool projector = false;
  std::vector<QColor> rankColors;
  std::vector<QBrush> rankBrushes;
  QColor ink;    // text and outlines
  QColor faint;  // empty cells, frames
  QPen linkPen;
  QPen slowLinkPen;
  QPen outlinePen;
  QPen completePen;  // the outline of a complete sum
  QBrush completeBrush;
  QBrush emptyBrush;
  QFont labelFont;
  QFont smallFont;
  // A cell's colour for a partial sum beyond 8 contributors: the gauge's fill.
  QColor gaugeColor(int rank, double fraction) const;
};

class LinkItem : public QGraphicsItem {
 public:
  LinkItem(const Layout& layout, const LayoutLink& link, const SceneStyle& style);
  QRectF boundingRect() const override;
  // What it draws, in scene coordinates (the line, its arrow and its label).
  QRectF contentRect() const;
  void paint(QPainter* p, const QStyleOptionGraphicsItem*, QWidget*) override;

 private:
  void paintArrow(QPainter* p) const;
  QPointF a_, b_;
  LayoutLink link_;
  const SceneStyle& style_;
  double radius_;
};

class BoxItem : public QGraphicsItem {
 public:
  BoxItem(const LayoutBox& box, const SceneStyle& style);
  QRectF boundingRect() const override;
  QRectF contentRect() const;  // the frame and its title, in scene coordinates
  void paint(QPainter* p, const QStyleOptionGraphicsItem*, QWidget*) override;

 private:
  LayoutBox box_;
  const SceneStyle& style_;
};

class RankItem : public QGraphicsItem {
 public:
  RankItem(const Layout& layout, const LayoutNode& node, const SceneStyle& style,
           const StripState& strips);
  QRectF boundingRect() const override;
  void paint(QPainter* p, const QStyleOptionGraphicsItem*, QWidget*) override;
  int rank() const { return node_.rank; }
  // The rank number's font size in pixels on a screen that shows the scene at `scale`
  // (what paint() draws: at least SceneStyle::kProjectorLabelPx in projector mode).
  double labelScreenPx(double scale) const;
  // The node, its strip or ring and its labels, in scene coordinates (hover labels aside).
  QRectF contentRect() const;

 protected:
  void hoverEnterEvent(QGraphicsSceneHoverEvent*) override;
  void hoverLeaveEvent(QGraphicsSceneHoverEvent*) override;

 private:
  // Where the strip's cells go, in item coordinates (before the rotation of a radial strip).
  struct StripGeometry {
    bool below = true;  // under (or over) the node, left to right; else radially outward
    QRectF rect;        // all cells together
    double angle = 0;   // degrees the radial strip is turned by
  };
  StripGeometry stripGeometry() const;
  void paintStrip(QPainter* p) const;
  void paintFillRing(QPainter* p) const;
  void paintCell(QPainter* p, const QRectF& r, uint64_t mask) const;

  LayoutNode node_;
  const SceneStyle& style_;
  const StripState& strips_;
  double radius_;
  bool rings_;
  bool labelled_;
  bool tree_;  // the tree layout: strips go under the nodes at any count
  bool hovered_ = false;
  double slowRate_ = 0;
};

// One token: a message in flight at the frame's time.
struct TokenDraw {
  QPointF pos;
  QPointF dir;  // unit vector from sender to receiver
  uint64_t provenance = 0;
  int sender = 0;
};

class TokenLayer : public QGraphicsItem {
 public:
  TokenLayer(const SceneStyle& style, double radius, QRectF bounds);
  QRectF boundingRect() const override { return bounds_; }
  void paint(QPainter* p, const QStyleOptionGraphicsItem*, QWidget*) override;
  void setTokens(std::vector<TokenDraw> tokens);
  const std::vector<TokenDraw>& tokens() const { return tokens_; }

 private:
  void paintRingToken(QPainter* p, const TokenDraw& t) const;
  void paintArcToken(QPainter* p, const TokenDraw& t) const;
  const SceneStyle& style_;
  double radius_;
  QRectF bounds_;
  std::vector<TokenDraw> tokens_;
};

}  // namespace arl::ui
