// The Graphics View of one run: ranks laid out for its algorithm, links with their shaping,
// every rank's buffer strip, and the tokens in flight at the playback time, interpolated
// between each message's send start and receive end (exec/timeline.h). The scene has no index
// (tokens move every frame) and one item paints all tokens.
#pragma once

#include <QGraphicsView>
#include <memory>
#include <optional>
#include <vector>

#include "topology/layout.h"
#include "topology/run_model.h"

namespace arl::ui {

struct SceneStyle;
class RankItem;
class TokenLayer;
struct TokenDraw;

class TopologyView : public QGraphicsView {
  Q_OBJECT

 public:
  explicit TopologyView(QWidget* parent = nullptr);
  ~TopologyView() override;

  // Lays the run out afresh (a new run, or its schedule changed).
  void setRun(const RunModel& model);
  // Draws the tokens in flight at `tokenTime` and the strips as of `stripTime`.
  void showAt(const RunModel& model, int64_t tokenTime, int64_t stripTime);
  // Projector mode (SceneStyle): takes effect at the next setRun().
  void setProjector(bool on) { projector_ = on; }
  bool projector() const { return projector_; }
  // The caption's font sizes in pixels (title, detail) at the view's present height.
  int captionPx(bool title) const { return captionFont(title).pixelSize(); }
  // The caption, drawn in a band across the top of the view that the drawing is kept out of.
  void setCaption(const QString& title, const QString& detail);
  // What the ranks, links and frames cover, in scene coordinates (the view fits it in).
  QRectF contentRect() const { return content_; }
  // The caption band's height in pixels (the drawing starts under it).
  int captionBandHeight() const;

  const Layout& layout() const { return layout_; }
  const StripState& strips() const { return strips_; }
  // Transfer indices (into the timeline) of the tokens drawn now, in start order.
  const std::vector<size_t>& tokenTransfers() const { return tokenTransfers_; }
  const std::vector<TokenDraw>& tokens() const;
  int rankItems() const { return static_cast<int>(rankItems_.size()); }
  // The smallest rank number's font size on screen now, in pixels (0 without ranks).
  double rankLabelPx() const;
  int linkItems() const { return linkItems_; }
  uint64_t framesPainted() const { return frames_; }
  // How many times the caption was fitted to the view (its font shrunk, its lines elided): once
  // per change of the caption, the viewport's size or the mode, not once per frame.
  uint64_t captionFits() const { return captionFits_; }

 protected:
  void resizeEvent(QResizeEvent* e) override;
  void drawForeground(QPainter* p, const QRectF& rect) override;

 private:
  // The caption as drawn: the title's font fitted to the width, both lines elided, the box.
  struct FittedCaption {
    QString title;  // what it was fitted for: the caption as set, the viewport, the mode
    QString detail;
    QSize viewport;
    bool projector = false;
    QFont big;
    QFont small;
    QString titleShown;
    QString detailShown;
    int titleHeight = 0;
    QSize box;
  };

  void fit();
  QFont captionFont(bool title) const;
  const FittedCaption& fittedCaption();

  QGraphicsScene* scene_;
  Layout layout_;
  std::unique_ptr<SceneStyle> style_;
  StripState strips_;
  std::vector<RankItem*> rankItems_;
  TokenLayer* tokens_ = nullptr;
  int linkItems_ = 0;
  size_t stripsApplied_ = SIZE_MAX;
  std::vector<size_t> tokenTransfers_;
  uint64_t frames_ = 0;
  QRectF content_;
  QString title_;
  QString detail_;
  bool projector_ = false;
  std::optional<FittedCaption> fitted_;
  uint64_t captionFits_ = 0;
};

}  // namespace arl::ui
