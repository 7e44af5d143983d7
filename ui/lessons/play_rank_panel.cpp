#include "lessons/play_rank_panel.h"

#include <sys/prctl.h>

#include <QComboBox>
#include <QCoreApplication>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QPainter>
#include <QPainterPath>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>
#include <QVariantAnimation>
#include <bit>
#include <cmath>
#include <csignal>

#include "schedule/generators.h"
#include "style/palette.h"

namespace arl::ui {

namespace {

QString phaseName(Phase p) { return QString::fromUtf8(toString(p).data(), toString(p).size()); }

QString q(const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); }

// The played rank's peers: every rank but itself.
int nextPeer(int from, int step, int me, int n) {
  int p = from;
  for (int i = 0; i < n; ++i) {
    p = ((p + step) % n + n) % n;
    if (p != me) return p;
  }
  return from;
}

}  // namespace

PlayRankPanel::PlayRankPanel(QWidget* parent)
    : QWidget(parent), program_(QCoreApplication::applicationFilePath()) {
  setFocusPolicy(Qt::StrongFocus);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(8, 8, 8, 8);
  auto* intro = new QLabel(
      tr("You are one rank; the others follow the real schedule. Keys: <b>0–9</b> chunk, "
         "<b>←/→</b> rank, <b>S</b> send, <b>A</b> add, <b>C</b> copy what arrives, <b>E</b> end "
         "the step, <b>R</b> real run, <b>N</b> new game."),
      this);
  intro->setWordWrap(true);
  lay->addWidget(intro);
  auto* setup = new QHBoxLayout;
  algo_ = new QComboBox(this);
  algo_->addItems({QStringLiteral("ring"), QStringLiteral("tree"),
                   QStringLiteral("halving-doubling"), QStringLiteral("bruck"),
                   QStringLiteral("pat"), QStringLiteral("swing"), QStringLiteral("knomial"),
                   QStringLiteral("switch")});
  algo_->setFocusPolicy(Qt::ClickFocus);
  nranks_ = new QSpinBox(this);
  nranks_->setRange(2, 8);
  nranks_->setValue(4);
  nranks_->setPrefix(tr("ranks "));
  nranks_->setFocusPolicy(Qt::ClickFocus);
  rank_ = new QSpinBox(this);
  rank_->setRange(0, 7);
  rank_->setValue(1);
  rank_->setPrefix(tr("you: rank "));
  rank_->setFocusPolicy(Qt::ClickFocus);
  auto* go = new QPushButton(tr("Start"), this);
  go->setFocusPolicy(Qt::ClickFocus);
  setup->addWidget(algo_);
  setup->addWidget(nranks_);
  setup->addWidget(rank_);
  setup->addWidget(go);
  lay->addLayout(setup);
  connect(go, &QPushButton::clicked, this, [this] {
    start(algo_->currentText(), nranks_->value(), rank_->value());
    setFocus();
  });
  canvas_ = new PlayRankCanvas(this);
  lay->addWidget(canvas_, 1);
  canvas_->setMinimumHeight(280);
  step_ = new QLabel(this);
  QFont big = step_->font();
  big.setPointSizeF(big.pointSizeF() * 1.3);
  big.setBold(true);
  step_->setFont(big);
  lay->addWidget(step_);
  arriving_ = new QLabel(this);
  arriving_->setWordWrap(true);
  lay->addWidget(arriving_);
  selection_ = new QLabel(this);
  lay->addWidget(selection_);
  feedback_ = new QLabel(this);
  feedback_->setWordWrap(true);
  feedback_->setTextFormat(Qt::RichText);
  feedback_->setMinimumHeight(feedback_->fontMetrics().height() * 4);
  feedback_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  lay->addWidget(feedback_);
  score_ = new QLabel(this);
  lay->addWidget(score_);
  replay_ = new QPushButton(tr("Replay a real run of this setup (R)"), this);
  replay_->setFocusPolicy(Qt::ClickFocus);
  replay_->setEnabled(false);
  connect(replay_, &QPushButton::clicked, this, [this] { replayRealRun(); });
  lay->addWidget(replay_);
  anim_ = new QVariantAnimation(this);
  anim_->setStartValue(0.0);
  anim_->setEndValue(1.0);
  connect(anim_, &QVariantAnimation::valueChanged, this, [this](const QVariant& v) {
    canvas_->setMoving(canvasMoving_, v.toDouble(), canvasRight_);
  });
  connect(anim_, &QVariantAnimation::finished, this, [this] { canvas_->setMoving({}, 0, false); });
  start(QStringLiteral("ring"), 4, 1);
}

PlayRankPanel::~PlayRankPanel() {
  if (proc_ != nullptr) {
    proc_->disconnect(this);
    proc_->kill();
    proc_->waitForFinished(5000);
  }
}

bool PlayRankPanel::start(const QString& algorithm, int nranks, int rank) {
  std::vector<RankGame> all;
  try {
    const Schedule s = RankGame::playSchedule(algorithm.toStdString(), nranks);
    for (int r = 0; r < nranks; ++r) all.emplace_back(s, r);
  } catch (const GenError& e) {
    feedback_->setText(tr("Cannot play this: %1").arg(QString::fromUtf8(e.what()).toHtmlEscaped()));
    return false;
  }
  if (rank < 0 || rank >= nranks) {
    feedback_->setText(
        tr("Cannot play this: rank %1 is not one of 0..%2").arg(rank).arg(nranks - 1));
    return false;
  }
  all_ = std::move(all);
  played_ = rank;
  algorithm_ = algorithm;
  algo_->setCurrentText(algorithm);
  nranks_->setValue(nranks);
  rank_->setValue(rank);
  chunk_ = 0;
  peer_ = nextPeer(rank, 1, rank, all_.front().nranks());
  anim_->stop();
  canvasMoving_.clear();
  canvas_->setMoving({}, 0, false);
  canvas_->setGame(&all_, played_);
  feedback_->setText(tr("You are rank %1 of a %2 all-reduce on %3 ranks. Make the moves of step 1.")
                         .arg(rank)
                         .arg(algorithm.toHtmlEscaped())
                         .arg(nranks));
  replay_->setEnabled(false);
  refresh();
  return true;
}

void PlayRankPanel::selectChunk(uint32_t chunk) {
  if (game() == nullptr || chunk >= game()->nchunks()) return;
  chunk_ = chunk;
  refresh();
}

void PlayRankPanel::selectPeer(int peer) {
  if (game() == nullptr || peer < 0 || peer >= game()->nranks() || peer == played_) return;
  peer_ = peer;
  refresh();
}

void PlayRankPanel::send() { play({PlayMove::Kind::Send, chunk_, peer_, ArrivalAction::Add}); }

void PlayRankPanel::arrival(ArrivalAction action) {
  if (game() == nullptr) return;
  const auto pending = game()->pendingArrivals();
  if (pending.empty()) {
    // Nothing arrives: the checker says so (and what to do instead).
    play({PlayMove::Kind::Arrival, chunk_, peer_, action});
    return;
  }
  play({PlayMove::Kind::Arrival, pending.front().chunk, pending.front().from, action});
}

void PlayRankPanel::endStep() { play({PlayMove::Kind::EndStep, 0, -1, ArrivalAction::Add}); }

void PlayRankPanel::play(const PlayMove& m) {
  if (game() == nullptr) return;
  RankGame& me = all_[static_cast<size_t>(played_)];
  if (me.done()) {
    feedback_->setText(tr("The game is over. R replays a real run of it; N starts again."));
    return;
  }
  const uint32_t step = me.step();
  const PlayVerdict v = me.play(m);
  const PlayMove made = v.ok ? m : v.right;
  if (v.ok) {
    feedback_->setText(
        QStringLiteral("<span style='color:#2f8a3c'><b>✓</b> %1</span>").arg(q(describe(m))));
  } else {
    feedback_->setText(
        QStringLiteral("<div style='background:#fde8e8;color:#8a1c1c'><b>✗ %1.</b> %2</div>")
            .arg(q(describe(m)), q(v.why)) +
        tr("<p>The right move, made for you: <b>%1</b>.</p>").arg(q(describe(made))));
  }
  if (made.kind == PlayMove::Kind::EndStep) {
    // The others make their moves of the step, as the schedule does; then all of them move.
    for (int r = 0; r < static_cast<int>(all_.size()); ++r) {
      if (r == played_) continue;
      RankGame& g = all_[static_cast<size_t>(r)];
      for (const PlayMove& x : g.movesAt(step)) g.play(x);
      g.play({PlayMove::Kind::EndStep, 0, -1, ArrivalAction::Add});
    }
    animate(me.transfersAt(step), false);
    if (me.done()) {
      replay_->setEnabled(true);
      feedback_->setText(feedback_->text() +
                         tr("<p><b>Done.</b> Every element of every rank holds the full sum. "
                            "%1 of %2 moves right first time. R replays a real run of this "
                            "setup on real workers.</p>")
                             .arg(me.accepted())
                             .arg(me.accepted() + me.refused()));
    }
  } else if (!v.ok) {
    // The right move, drawn moving.
    PlayTransfer t;
    t.chunk = made.chunk;
    if (made.kind == PlayMove::Kind::Send) {
      t.from = played_;
      t.to = made.peer;
    } else {
      t.from = made.peer;
      t.to = played_;
    }
    for (const PlayTransfer& x : me.transfersAt(step)) {
      if (x.from == t.from && x.to == t.to && x.chunk == t.chunk) t = x;
    }
    animate({t}, true);
  }
  refresh();
}

void PlayRankPanel::animate(std::vector<PlayTransfer> moving, bool right) {
  anim_->stop();
  if (animMs_ <= 0 || moving.empty()) {
    canvasMoving_.clear();
    canvas_->setMoving({}, 0, false);
    return;
  }
  canvasMoving_ = std::move(moving);
  canvasRight_ = right;
  anim_->setDuration(animMs_);
  anim_->start();
}

QString PlayRankPanel::feedback() const { return feedback_->text(); }

QString PlayRankPanel::stepText() const { return step_->text(); }

void PlayRankPanel::refresh() {
  const RankGame* g = game();
  if (g == nullptr) return;
  canvas_->setSelection(chunk_, g->done() ? -1 : peer_);
  canvas_->update();
  if (g->done()) {
    step_->setText(tr("All %1 steps played").arg(g->nsteps()));
    arriving_->setText(QString());
    selection_->setText(QString());
  } else {
    step_->setText(
        tr("Step %1 of %2 · %3").arg(g->step() + 1).arg(g->nsteps()).arg(phaseName(g->phase())));
    QStringList in;
    for (const PlayTransfer& t : g->pendingArrivals()) {
      in << tr("chunk %1 from rank %2, carrying %3")
                .arg(t.chunk)
                .arg(t.from)
                .arg(QString::fromStdString(maskText(t.mask)));
    }
    QStringList done;
    for (const PlayMove& m : g->madeThisStep()) done << QString::fromStdString(describe(m));
    arriving_->setText(
        (in.isEmpty()
             ? tr("Arriving: nothing left to decide.")
             : tr("Arriving: %1 — A adds it, C copies it.").arg(in.join(QStringLiteral("; ")))) +
        (done.isEmpty() ? QString()
                        : tr("\nDone this step: %1.").arg(done.join(QStringLiteral(", ")))));
    selection_->setText(tr("Send: chunk %1 to rank %2 (S)").arg(chunk_).arg(peer_));
  }
  score_->setText(tr("Right first time: %1 · wrong: %2").arg(g->accepted()).arg(g->refused()));
}

bool PlayRankPanel::replayRealRun() {
  const RankGame* g = game();
  if (g == nullptr || !g->done() || running()) return false;
  work_ = std::make_unique<QTemporaryDir>();
  const QString path = work_->filePath(QStringLiteral("play-a-rank.arlrec"));
  const QString bytes = QString::number(g->elements() * 4);
  proc_ = new QProcess(this);
  proc_->setProgram(program_);
  proc_->setArguments(
      {QStringLiteral("bench"), QStringLiteral("--workers"), QString::number(g->nranks()),
       QStringLiteral("--algo"), algorithm_, QStringLiteral("-b"), bytes, QStringLiteral("-e"),
       bytes, QStringLiteral("--slice"), bytes, QStringLiteral("-n"), QStringLiteral("1"),
       QStringLiteral("-w"), QStringLiteral("0"), QStringLiteral("--record"), path});
  proc_->setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGKILL); });
  proc_->setProperty("recording", path);
  connect(proc_, &QProcess::finished, this, &PlayRankPanel::runFinished);
  connect(proc_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e == QProcess::FailedToStart) runFinished(-1, QProcess::CrashExit);
  });
  replay_->setEnabled(false);
  feedback_->setText(tr("Running the same setup on %1 real workers…").arg(g->nranks()));
  proc_->start();
  return true;
}

void PlayRankPanel::runFinished(int exitCode, QProcess::ExitStatus status) {
  if (proc_ == nullptr) return;
  const QString path = proc_->property("recording").toString();
  const QString err = QString::fromUtf8(proc_->readAllStandardError()).trimmed();
  proc_->deleteLater();
  proc_ = nullptr;
  replay_->setEnabled(true);
  if (status != QProcess::NormalExit || exitCode != 0) {
    const QString last = err.section(QLatin1Char('\n'), -1);
    feedback_->setText(
        tr("The real run did not work here: %1")
            .arg((last.isEmpty() ? tr("it could not start") : last).toHtmlEscaped()));
    return;
  }
  feedback_->setText(
      tr("The real run replays in the topology view: every rank's moves, as the "
         "workers made and timed them."));
  emit replayRequested(path, tr("⟲ REPLAY · your game, run just now"));
}

void PlayRankPanel::keyPressEvent(QKeyEvent* e) {
  const RankGame* g = game();
  const int k = e->key();
  if (g != nullptr && k >= Qt::Key_0 && k <= Qt::Key_9) {
    selectChunk(static_cast<uint32_t>(k - Qt::Key_0));
  } else if (g != nullptr && (k == Qt::Key_Left || k == Qt::Key_BracketLeft)) {
    selectPeer(nextPeer(peer_, -1, played_, g->nranks()));
  } else if (g != nullptr && (k == Qt::Key_Right || k == Qt::Key_BracketRight)) {
    selectPeer(nextPeer(peer_, 1, played_, g->nranks()));
  } else if (k == Qt::Key_S || k == Qt::Key_Return || k == Qt::Key_Enter) {
    send();
  } else if (k == Qt::Key_A) {
    arrival(ArrivalAction::Add);
  } else if (k == Qt::Key_C) {
    arrival(ArrivalAction::Copy);
  } else if (k == Qt::Key_E) {
    endStep();
  } else if (k == Qt::Key_R) {
    replayRealRun();
  } else if (k == Qt::Key_N) {
    start(algo_->currentText(), nranks_->value(), rank_->value());
  } else {
    QWidget::keyPressEvent(e);
    return;
  }
  e->accept();
}

// ---- the canvas

PlayRankCanvas::PlayRankCanvas(QWidget* parent) : QWidget(parent) {
  setMinimumSize(300, 240);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

double PlayRankCanvas::nodeRadius() const {
  return std::clamp(std::min(width(), height()) / 14.0, 14.0, 26.0);
}

QPointF PlayRankCanvas::centre(int rank) const {
  const int n = all_ ? static_cast<int>(all_->size()) : 1;
  // Room for a node above the circle, and below it for a node, its vector and "you".
  const double node = nodeRadius();
  const double top = node + 4;
  const double bottom = node + 34;
  const double cx = width() / 2.0;
  const double cy = top + (height() - top - bottom) / 2.0;
  const double r =
      std::max(10.0, std::min(width() / 2.0 - node - 40, (height() - top - bottom) / 2.0));
  // A rank past the played ones serves them (switch's switch): in the middle of the circle.
  if (rank >= n) return {cx, cy};
  // Rank 0 at the top, clockwise: a ring's neighbour is the next one round.
  const double a = -M_PI / 2 + 2 * M_PI * rank / n;
  return {cx + r * std::cos(a), cy + r * std::sin(a)};
}

namespace {

void arrow(QPainter& p, QPointF a, QPointF b, double inset) {
  const QPointF d = b - a;
  const double len = std::hypot(d.x(), d.y());
  if (len < 2 * inset) return;
  const QPointF u = d / len;
  const QPointF s = a + u * inset;
  const QPointF e = b - u * inset;
  p.drawLine(s, e);
  const QPointF n(-u.y(), u.x());
  QPolygonF head;
  head << e << e - u * 10 + n * 5 << e - u * 10 - n * 5;
  p.save();
  p.setBrush(p.pen().color());
  p.drawPolygon(head);
  p.restore();
}

}  // namespace

void PlayRankCanvas::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  p.fillRect(rect(), QColor(0xfa, 0xfa, 0xfa));
  if (all_ == nullptr || all_->empty()) return;
  const int n = static_cast<int>(all_->size());
  const RankGame& me = (*all_)[static_cast<size_t>(played_)];
  const double radius = nodeRadius();
  const uint64_t full = n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
  // What arrives at the played rank, dashed; its sends of this step, solid; the selection,
  // faint.
  if (!me.done()) {
    QPen dashed(QColor(0x99, 0x66, 0x00), 2, Qt::DashLine);
    p.setPen(dashed);
    for (const PlayTransfer& t : me.pendingArrivals())
      arrow(p, centre(t.from), centre(played_), radius + 4);
    p.setPen(QPen(QColor(0x33, 0x33, 0x33), 2.5));
    for (const PlayMove& m : me.madeThisStep()) {
      if (m.kind == PlayMove::Kind::Send) arrow(p, centre(played_), centre(m.peer), radius + 4);
    }
    if (peer_ >= 0) {
      p.setPen(QPen(QColor(0x3b, 0x6e, 0xa5, 110), 6));
      arrow(p, centre(played_), centre(peer_), radius + 4);
    }
  }
  // The ranks, each with its vector: one cell per element, shaded by its contributions.
  QFont f = font();
  f.setBold(true);
  f.setPixelSize(static_cast<int>(radius * 0.9));
  for (int r = n; r < me.nranks(); ++r) {  // the switch: no vector of its own to shade
    p.setPen(QPen(QColor(0x77, 0x77, 0x77), 1.5));
    p.setBrush(QColor(0x55, 0x55, 0x55));
    p.drawEllipse(centre(r), radius, radius);
    p.setFont(f);
    p.setPen(Qt::white);
    p.drawText(QRectF(centre(r).x() - radius, centre(r).y() - radius, 2 * radius, 2 * radius),
               Qt::AlignCenter, QStringLiteral("SW"));
  }
  for (int r = 0; r < n; ++r) {
    const RankGame& g = (*all_)[static_cast<size_t>(r)];
    const QPointF c = centre(r);
    p.setPen(QPen(r == played_ ? QColor(0x11, 0x11, 0x11) : QColor(0x77, 0x77, 0x77),
                  r == played_ ? 4 : 1.5));
    p.setBrush(rankColor(r, n));
    p.drawEllipse(c, radius, radius);
    p.setFont(f);
    p.setPen(Qt::white);
    p.drawText(QRectF(c.x() - radius, c.y() - radius, 2 * radius, 2 * radius), Qt::AlignCenter,
               QString::number(r));
    const double cell = std::clamp(3.2 * radius / static_cast<double>(g.elements()), 4.0, 12.0);
    const double w = cell * static_cast<double>(g.elements());
    const double y = c.y() + radius + 5;
    for (uint64_t e = 0; e < g.elements(); ++e) {
      const uint64_t h = g.holds(e);
      const double share = static_cast<double>(std::popcount(h)) / n;
      QColor col = h == full ? completeColor()
                             : QColor::fromHsvF(0.6, 0.12 + 0.8 * share, 1.0 - 0.35 * share);
      p.setPen(QPen(QColor(0x55, 0x55, 0x55), 0.5));
      p.setBrush(col);
      p.drawRect(QRectF(c.x() - w / 2 + static_cast<double>(e) * cell, y, cell, cell));
    }
    if (r == played_) {
      QFont sf = font();
      sf.setPixelSize(12);
      p.setFont(sf);
      p.setPen(QColor(0x11, 0x11, 0x11));
      p.drawText(QRectF(c.x() - 40, y + cell + 1, 80, 16), Qt::AlignHCenter | Qt::AlignTop,
                 tr("you"));
    }
  }
  QFont lf = font();
  lf.setPixelSize(11);
  p.setFont(lf);
  p.setPen(QColor(0x55, 0x55, 0x55));
  p.drawText(QRectF(6, height() - 18, width() - 12, 16), Qt::AlignLeft | Qt::AlignVCenter,
             tr("cells: each rank's elements · darker: more ranks summed · green: the full sum"));
  // The messages moving: a token with its chunk's number, the right move in green.
  for (const PlayTransfer& t : moving_) {
    const QPointF a = centre(t.from);
    const QPointF b = centre(t.to);
    const QPointF at = a + (b - a) * progress_;
    p.setPen(QPen(right_ ? QColor(0x2f, 0x8a, 0x3c) : QColor(0x55, 0x55, 0x55), right_ ? 3 : 1));
    p.setBrush(right_ ? QColor(0xd8, 0xf5, 0xdc)
                      : (t.mask == full ? completeColor() : QColor(0xff, 0xd2, 0x4a)));
    p.drawEllipse(at, radius * 0.55, radius * 0.55);
    QFont tf = font();
    tf.setPixelSize(static_cast<int>(radius * 0.6));
    p.setFont(tf);
    p.setPen(Qt::black);
    p.drawText(QRectF(at.x() - radius, at.y() - radius, 2 * radius, 2 * radius), Qt::AlignCenter,
               QString::number(t.chunk));
  }
}

}  // namespace arl::ui
