// Play a rank: the student is one rank of a ring, a tree, halving-doubling, bruck, pat, swing
// or knomial and makes its moves step by step; the other ranks follow the verified schedule
// (core/schedule/play_rank.h checks every move). A wrong move is refused with the reason, and the
// right one is drawn moving and made in its place. When a step ends, every rank's messages of the
// step move on the canvas. At the end, a real run of the same setup (allreduce-lab bench --record,
// on real workers) replays every rank's moves in the topology view.
//
// Keyboard alone: 0-9 choose the chunk, Left/Right (or [ and ]) the rank to send it to,
// S or Enter sends, A adds and C copies what arrives, E ends the step, R replays the real run
// when the game is over, N starts again.
#pragma once

#include <QProcess>
#include <QString>
#include <QTemporaryDir>
#include <QWidget>
#include <memory>
#include <vector>

#include "schedule/play_rank.h"

class QComboBox;
class QLabel;
class QPushButton;
class QSpinBox;
class QVariantAnimation;

namespace arl::ui {

class PlayRankCanvas;

class PlayRankPanel : public QWidget {
  Q_OBJECT

 public:
  explicit PlayRankPanel(QWidget* parent = nullptr);
  ~PlayRankPanel() override;

  // Starts a game (false, with the reason in feedback(), for a setup that cannot be played).
  bool start(const QString& algorithm, int nranks, int rank);
  const RankGame* game() const {
    return played_ >= 0 ? &all_[static_cast<size_t>(played_)] : nullptr;
  }
  // Every rank's game: the played one and the others, which follow the schedule.
  const std::vector<RankGame>& ranks() const { return all_; }
  // The selected send: the chunk and the rank to send it to.
  uint32_t selectedChunk() const { return chunk_; }
  int selectedPeer() const { return peer_; }
  void selectChunk(uint32_t chunk);
  void selectPeer(int peer);
  // The student's moves, as the keys make them.
  void send();
  void arrival(ArrivalAction action);
  void endStep();
  // The last verdict, as shown ("" before the first move).
  QString feedback() const;
  QString stepText() const;
  int rightFirstTime() const { return game() ? game()->accepted() : 0; }
  int mistakes() const { return game() ? game()->refused() : 0; }
  // Runs the same setup on real workers and asks the window to replay it (false before the
  // game is over or while one runs).
  bool replayRealRun();
  bool running() const { return proc_ != nullptr; }
  void setProgram(const QString& path) { program_ = path; }
  // How long a step's messages take to move on the canvas (0: at once, for tests).
  void setAnimationMs(int ms) { animMs_ = ms; }
  const PlayRankCanvas* canvas() const { return canvas_; }

 signals:
  void replayRequested(const QString& path, const QString& label);

 protected:
  void keyPressEvent(QKeyEvent* e) override;

 private:
  void play(const PlayMove& m);
  void refresh();
  void animate(std::vector<PlayTransfer> moving, bool right);
  void runFinished(int exitCode, QProcess::ExitStatus status);

  std::vector<RankGame> all_;
  int played_ = -1;
  QString algorithm_;
  uint32_t chunk_ = 0;
  int peer_ = 1;
  int animMs_ = 700;
  QString program_;
  QComboBox* algo_ = nullptr;
  QSpinBox* nranks_ = nullptr;
  QSpinBox* rank_ = nullptr;
  PlayRankCanvas* canvas_ = nullptr;
  QLabel* step_ = nullptr;
  QLabel* arriving_ = nullptr;
  QLabel* selection_ = nullptr;
  QLabel* feedback_ = nullptr;
  QLabel* score_ = nullptr;
  QPushButton* replay_ = nullptr;
  QVariantAnimation* anim_ = nullptr;
  std::vector<PlayTransfer> canvasMoving_;
  bool canvasRight_ = false;
  QProcess* proc_ = nullptr;
  std::unique_ptr<QTemporaryDir> work_;
};

// The ranks in a circle, each with its vector's elements shaded by how many contributions
// they hold (green: the full sum), the played rank outlined, what arrives drawn dashed, the
// student's sends solid, and the messages of a step moving along their links.
class PlayRankCanvas : public QWidget {
  Q_OBJECT

 public:
  explicit PlayRankCanvas(QWidget* parent = nullptr);
  void setGame(const std::vector<RankGame>* all, int played) {
    all_ = all;
    played_ = played;
    update();
  }
  void setSelection(uint32_t chunk, int peer) {
    chunk_ = chunk;
    peer_ = peer;
    update();
  }
  void setMoving(std::vector<PlayTransfer> moving, double progress, bool right) {
    moving_ = std::move(moving);
    progress_ = progress;
    right_ = right;
    update();
  }
  int movingCount() const { return static_cast<int>(moving_.size()); }
  QSize sizeHint() const override { return {420, 340}; }

 protected:
  void paintEvent(QPaintEvent* e) override;

 private:
  QPointF centre(int rank) const;
  double nodeRadius() const;

  const std::vector<RankGame>* all_ = nullptr;
  int played_ = 0;
  uint32_t chunk_ = 0;
  int peer_ = -1;
  std::vector<PlayTransfer> moving_;
  double progress_ = 0;
  bool right_ = false;
};

}  // namespace arl::ui
