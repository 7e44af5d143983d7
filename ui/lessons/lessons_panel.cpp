#include "lessons/lessons_panel.h"

#include <sys/prctl.h>

#include <QButtonGroup>
#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QRadioButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <csignal>
#include <nlohmann/json.hpp>

#include "base/errors.h"
#include "style/units.h"

namespace arl::ui {

namespace {

double numberOr(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : NAN;
}

std::string stringOr(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Whether the student's number is a time (entered in ms; the measure is in us).
bool timeMeasure(const Lesson& l) {
  return l.by == DecideBy::Fastest && !isFact(l) && l.measure != SpeedMeasure::BusbwGBps;
}

QString valueText(const Lesson& l, double v) {
  if (!std::isfinite(v)) return QString::fromUtf8(kNoValue);
  if (l.by == DecideBy::Fastest && l.measure == SpeedMeasure::IdenticalShare)
    return QStringLiteral("%1%").arg(v * 100, 0, 'f', 0);
  if (isFact(l)) return QString::number(v, 'g', 4);
  if (l.measure == SpeedMeasure::BusbwGBps) return QString::fromStdString(rateLabel(v * 1e9));
  return QString::fromStdString(timeLabel(v));
}

// The measured column's title: what was measured, where a training run's measure needs saying.
QString measuredTitle(const Lesson& l) {
  if (l.by == DecideBy::Value) return LessonsPanel::tr("measured");
  switch (l.measure) {
    case SpeedMeasure::ExposedUs: return LessonsPanel::tr("exposed communication per step");
    case SpeedMeasure::StepUs: return LessonsPanel::tr("step");
    case SpeedMeasure::IdenticalShare: return LessonsPanel::tr("steps with identical replicas");
    default: return LessonsPanel::tr("measured");
  }
}

// Whether the lesson's experiments have a cost model's prediction (bench's; training has none).
bool predicted(const Lesson& l) {
  return l.by == DecideBy::Fastest && experimentKindOf(l.measure) == ExperimentKind::Bench;
}

QString q(const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); }

QString optionLabel(const Lesson& l, const std::string& id) {
  for (const LessonOption& o : l.options) {
    if (o.id == id) return QString::fromStdString(o.label);
  }
  return QString::fromStdString(id);
}

// The reveal's table, and what it found among the experiments.
struct RevealRows {
  QString rows;              // one <tr> per experiment
  QString replay;            // the recording to replay: the winner's, else any; "" for none
  double winnerValue = NAN;  // the winner's measurement (a fact lesson's: its only one)
  bool anyRan = false;
};

RevealRows revealRows(const Lesson& l, const nlohmann::json& doc, const std::string& chosen) {
  const std::string winner = stringOr(doc, "winner");
  RevealRows out;
  QString anyRecording;
  for (const nlohmann::json& e : doc.value("experiments", nlohmann::json::array())) {
    const std::string opt = stringOr(e, "option");
    const double v = numberOr(e, "value");
    const bool ran = e.value("ran", false);
    out.anyRan = out.anyRan || ran;
    if (opt == winner || (winner.empty() && opt.empty())) out.winnerValue = v;
    const std::string rec = stringOr(e, "recording");
    if (!rec.empty()) {
      if (anyRecording.isEmpty()) anyRecording = QString::fromStdString(rec);
      if (opt == (winner.empty() ? l.answer : winner)) out.replay = QString::fromStdString(rec);
    }
    // A training run's note (its step split, or its replicas) says what the number came from.
    const bool trainNote = l.by == DecideBy::Fastest && !predicted(l) && ran;
    const QString what = opt.empty() ? q(stringOr(e, "note")) : optionLabel(l, opt).toHtmlEscaped();
    const QString mark =
        (!opt.empty() && opt == chosen ? LessonsPanel::tr(" ← your answer") : QString()) +
        (!opt.empty() && opt == winner ? QStringLiteral(" ★") : QString());
    const QString note =
        trainNote ? QStringLiteral("<br><small>%1</small>").arg(q(stringOr(e, "note"))) : QString();
    out.rows +=
        QStringLiteral(
            "<tr><td>%1%2%3</td><td align=right><b>%4</b></td><td align=right>%5</td></tr>")
            .arg(what, mark, note,
                 ran ? valueText(l, v)
                     : LessonsPanel::tr("did not run: %1").arg(q(stringOr(e, "error"))),
                 predicted(l) ? QString::fromStdString(timeLabel(numberOr(e, "predicted_us")))
                              : QString());
  }
  if (out.replay.isEmpty()) out.replay = anyRecording;
  return out;
}

// The student's number against the measured one ("" when they typed none).
QString guessText(const Lesson& l, const QString& typed, double winnerValue) {
  bool ok = false;
  const double guess = typed.trimmed().toDouble(&ok);
  if (!ok) return {};
  const bool time = timeMeasure(l);
  const double measured = time ? winnerValue / 1000 : winnerValue;
  const QString unit = time ? QStringLiteral(" ms") : QString();
  return LessonsPanel::tr("<p>You expected %1%2; measured %3%4 (measured/yours %5).</p>")
      .arg(guess)
      .arg(unit)
      .arg(measured, 0, 'g', 3)
      .arg(unit)
      .arg(measured / guess, 0, 'f', 2);
}

}  // namespace

LessonsPanel::LessonsPanel(QWidget* parent, const QString& dir)
    : QWidget(parent), program_(QCoreApplication::applicationFilePath()) {
  dir_ =
      dir.isEmpty()
          ? QString::fromStdString(lessonsDir(QCoreApplication::applicationDirPath().toStdString()))
          : dir;
  try {
    if (dir_.isEmpty()) throw ConfigError("no lessons folder found (set ARL_LESSONS)");
    lessons_ = loadLessons(dir_.toStdString());
  } catch (const ConfigError& e) {
    loadError_ = QString::fromUtf8(e.what());
  }

  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(8, 8, 8, 8);
  list_ = new QListWidget(this);
  int number = 0;
  for (const Lesson& l : lessons_) {
    auto* item = new QListWidgetItem(
        QStringLiteral("%1. %2").arg(++number).arg(QString::fromStdString(l.title)), list_);
    item->setToolTip(QStringLiteral("%1\n%2").arg(QString::fromStdString(l.title),
                                                  QString::fromStdString(l.teaches)));
    item->setData(Qt::UserRole, QString::fromStdString(l.name));
  }
  // Every lesson in sight at once, long titles cut short (the tooltip holds the whole one).
  list_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  list_->setTextElideMode(Qt::ElideRight);
  list_->setFixedHeight(list_->sizeHintForRow(0) * std::max(1, lessonCount()) +
                        2 * list_->frameWidth() + 4);
  lay->addWidget(list_);
  text_ = new QLabel(this);
  text_->setWordWrap(true);
  text_->setTextFormat(Qt::RichText);
  text_->setText(loadError_.isEmpty() ? tr("Choose a lesson.") : loadError_.toHtmlEscaped());
  lay->addWidget(text_);
  optionsBox_ = new QWidget(this);
  optionsLay_ = new QVBoxLayout(optionsBox_);
  optionsLay_->setContentsMargins(0, 0, 0, 0);
  options_ = new QButtonGroup(this);
  lay->addWidget(optionsBox_);
  guess_ = new QLineEdit(this);
  guess_->setPlaceholderText(tr("optional: the number you expect"));
  lay->addWidget(guess_);
  run_ = new QPushButton(tr("Run the experiment"), this);
  run_->setEnabled(false);
  run_->setToolTip(tr("Choose an answer first: the run happens only then"));
  lay->addWidget(run_);
  status_ = new QLabel(this);
  status_->setWordWrap(true);
  lay->addWidget(status_);
  reveal_ = new QLabel(this);
  reveal_->setWordWrap(true);
  reveal_->setTextFormat(Qt::RichText);
  lay->addWidget(reveal_, 1, Qt::AlignTop);
  score_ = new QLabel(tr("Score this session: none answered yet"), this);
  lay->addWidget(score_);

  connect(list_, &QListWidget::currentRowChanged, this, &LessonsPanel::showLesson);
  connect(options_, &QButtonGroup::idClicked, this,
          [this] { run_->setEnabled(proc_ == nullptr && !chosenId().isEmpty()); });
  connect(run_, &QPushButton::clicked, this, [this] {
    if (running()) {
      stopLesson();
    } else {
      runLesson();
    }
  });
  // The course starts at its first lesson.
  if (lessonCount() > 0) list_->setCurrentRow(0);
}

LessonsPanel::~LessonsPanel() { stopLesson(); }

const Lesson* LessonsPanel::current() const {
  return index_ >= 0 ? &lessons_[static_cast<size_t>(index_)] : nullptr;
}

bool LessonsPanel::selectLesson(const QString& name) {
  for (size_t i = 0; i < lessons_.size(); ++i) {
    if (QString::fromStdString(lessons_[i].name) == name) {
      list_->setCurrentRow(static_cast<int>(i));
      return true;
    }
  }
  return false;
}

void LessonsPanel::showLesson(int index) {
  if (running() || index < 0 || index >= lessonCount()) return;
  index_ = index;
  stopFollowingReveal();
  const Lesson& l = lessons_[static_cast<size_t>(index)];
  text_->setText(QStringLiteral("<h3>%1</h3><p><i>%2</i></p><p>%3</p><p><b>%4</b></p>")
                     .arg(q(l.title), q(l.teaches), q(l.text), q(l.question)));
  for (QAbstractButton* b : options_->buttons()) {
    options_->removeButton(b);
    delete b;
  }
  int id = 0;
  for (const LessonOption& o : l.options) {
    auto* b = new QRadioButton(QString::fromStdString(o.label), optionsBox_);
    b->setProperty("optionId", QString::fromStdString(o.id));
    options_->addButton(b, id++);
    optionsLay_->addWidget(b);
  }
  guess_->clear();
  guess_->setPlaceholderText(timeMeasure(l) ? tr("optional: the winner's time you expect, in ms")
                                            : tr("optional: the number you expect"));
  reveal_->clear();
  status_->clear();
  run_->setEnabled(false);
}

QString LessonsPanel::chosenId() const {
  QAbstractButton* b = options_->checkedButton();
  return b ? b->property("optionId").toString() : QString();
}

bool LessonsPanel::choose(const QString& optionId) {
  for (QAbstractButton* b : options_->buttons()) {
    if (b->property("optionId").toString() == optionId) {
      b->setChecked(true);
      run_->setEnabled(!running());
      return true;
    }
  }
  return false;
}

void LessonsPanel::setGuess(const QString& number) { guess_->setText(number); }

bool LessonsPanel::running() const { return proc_ != nullptr; }

QString LessonsPanel::revealText() const { return reveal_->text(); }

bool LessonsPanel::runLesson() {
  const Lesson* l = current();
  if (l == nullptr || running() || chosenId().isEmpty()) return false;
  work_ = std::make_unique<QTemporaryDir>();
  proc_ = new QProcess(this);
  proc_->setProgram(program_);
  proc_->setArguments({QStringLiteral("lesson"), QStringLiteral("--lessons"), dir_,
                       QStringLiteral("run"), QString::fromStdString(l->name),
                       QStringLiteral("--json"), QStringLiteral("--record"), work_->path()});
  // The lesson, and with it its bench runs and their workers, dies with the window.
  proc_->setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGKILL); });
  connect(proc_, &QProcess::finished, this, &LessonsPanel::finished);
  connect(proc_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e == QProcess::FailedToStart) finished(-1, QProcess::CrashExit);
  });
  reveal_->clear();
  stopFollowingReveal();
  status_->setText(tr("Running on real workers: %1 experiment(s)…")
                       .arg(l->experiments.size() +
                            static_cast<size_t>(std::count_if(
                                l->options.begin(), l->options.end(),
                                [](const LessonOption& o) { return !o.experiment.empty(); }))));
  run_->setText(tr("Stop"));
  list_->setEnabled(false);
  optionsBox_->setEnabled(false);
  proc_->start();
  emit runningChanged(true);
  return true;
}

void LessonsPanel::stopLesson() {
  if (proc_ == nullptr) return;
  QProcess* p = proc_;
  proc_ = nullptr;
  p->disconnect(this);
  p->kill();
  p->waitForFinished(5000);
  p->deleteLater();
  if (!QCoreApplication::closingDown()) {
    status_->setText(tr("Stopped."));
    run_->setText(tr("Run the experiment"));
    run_->setEnabled(true);
    list_->setEnabled(true);
    optionsBox_->setEnabled(true);
    emit runningChanged(false);
  }
}

void LessonsPanel::finished(int exitCode, QProcess::ExitStatus status) {
  if (proc_ == nullptr) return;
  const QString out = QString::fromUtf8(proc_->readAllStandardOutput());
  const QString err = QString::fromUtf8(proc_->readAllStandardError()).trimmed();
  proc_->deleteLater();
  proc_ = nullptr;
  run_->setText(tr("Run the experiment"));
  run_->setEnabled(true);
  list_->setEnabled(true);
  optionsBox_->setEnabled(true);
  emit runningChanged(false);
  // 0: agrees, 1: disagrees or a run failed; both print the outcome. Anything else is a
  // lesson that could not run at all.
  if (status != QProcess::NormalExit || (exitCode != 0 && exitCode != 1) || out.isEmpty()) {
    const QString last = err.section(QLatin1Char('\n'), -1);
    fallBack(last.isEmpty() ? tr("the lesson did not run") : last);
    return;
  }
  reveal(out);
}

// The verdict is what the student waited for: at the top of the scroll area that holds the
// panel (the window's dock), below a list and a text that may fill it. It stays there while the
// window settles around it (a dock shrinks, lines wrap anew), until the student scrolls.
void LessonsPanel::scrollToReveal() {
  stopFollowingReveal();
  QScrollArea* area = nullptr;
  for (QWidget* w = parentWidget(); w != nullptr && area == nullptr; w = w->parentWidget())
    area = qobject_cast<QScrollArea*>(w);
  if (area == nullptr) return;
  QScrollBar* bar = area->verticalScrollBar();
  auto place = [this, area, bar] {
    bar->setValue(reveal_->mapTo(area->widget(), QPoint(0, 0)).y());
  };
  place();
  followReveal_ = connect(bar, &QScrollBar::rangeChanged, this, place);
  stopFollow_ =
      connect(bar, &QScrollBar::actionTriggered, this, &LessonsPanel::stopFollowingReveal);
}

void LessonsPanel::stopFollowingReveal() {
  disconnect(followReveal_);
  disconnect(stopFollow_);
}

std::vector<PlaybackPause> LessonsPanel::pausesOf(const Lesson& l) const {
  std::vector<PlaybackPause> out;
  for (const LessonPause& p : l.pauses) {
    out.push_back({p.step, QString::fromStdString(p.question), QString::fromStdString(p.answer)});
  }
  return out;
}

void LessonsPanel::fallBack(const QString& why) {
  const Lesson* l = current();
  if (l == nullptr) return;
  if (l->recording.empty()) {
    status_->setText(tr("The lesson could not run here: %1").arg(why));
    return;
  }
  const QString path = QDir(dir_).filePath(QString::fromStdString(l->recording));
  status_->setText(tr("The lesson could not run here (%1). Showing its bundled recording, %2: a "
                      "replay of a run made elsewhere, not a measurement made now.")
                       .arg(why, QFileInfo(path).fileName()));
  emit replayRequested(path, pausesOf(*l), true);
}

void LessonsPanel::reveal(const QString& json) {
  const Lesson& l = *current();
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json.toStdString());
  } catch (const nlohmann::json::exception& e) {
    fallBack(tr("its outcome could not be read: %1").arg(QString::fromUtf8(e.what())));
    return;
  }
  const std::string chosen = chosenId().toStdString();
  const std::string winner = stringOr(doc, "winner");
  const bool agrees = doc.value("agrees", false);
  const RevealRows table = revealRows(l, doc, chosen);
  if (!table.anyRan) {
    fallBack(tr("no experiment ran"));
    return;
  }
  const std::string decided = winner.empty() ? l.answer : winner;
  const bool right = chosen == decided;
  ++answered_;
  if (right) ++right_;
  QString html =
      QStringLiteral("<h3>%1</h3>").arg(right ? tr("You were right.") : tr("Not this time."));
  html += QStringLiteral(
              "<table cellspacing=4><tr><th align=left>%1</th><th>%2</th><th>%3</th></tr>%4"
              "</table>")
              .arg(tr("measured here"), measuredTitle(l), predicted(l) ? tr("model") : QString(),
                   table.rows);
  html += guessText(l, guess_->text(), table.winnerValue);
  const double margin = numberOr(doc, "margin");
  html += tr("<p>Measured winner: <b>%1</b>%2. The article's answer: <b>%3</b>. %4</p>")
              .arg(winner.empty() ? tr("none") : optionLabel(l, winner).toHtmlEscaped(),
                   std::isfinite(margin) ? tr(", ahead by %1×").arg(margin, 0, 'f', 2) : QString(),
                   optionLabel(l, l.answer).toHtmlEscaped(),
                   agrees ? tr("They agree.") : tr("They do not agree here."));
  if (!agrees && !stringOr(doc, "reason").empty())
    html += QStringLiteral("<p>%1</p>").arg(q(stringOr(doc, "reason")));
  if (!doc.value("trusted", true)) {
    html +=
        tr("<p><b>The machine was busy</b> (its speed varied beyond 1.25× during the lesson): "
           "this verdict cannot be trusted. Run it again on a quiet machine.</p>");
  }
  if (!l.modelNote.empty()) html += QStringLiteral("<p><i>%1</i></p>").arg(q(l.modelNote));
  reveal_->setText(html);
  score_->setText(tr("Score this session: %1 of %2").arg(right_).arg(answered_));
  const std::string training = stringOr(doc, "training_record");
  status_->setText(training.empty() ? tr("Done: the run of %1 replays in the topology view.")
                                          .arg(optionLabel(l, decided).toHtmlEscaped())
                                    : tr("Done: the training runs are in the Training view."));
  emit revealed(agrees);
  if (!training.empty()) emit trainingRecordReady(QString::fromStdString(training));
  // Once the window has made room for what follows (a replay, the Training view).
  QTimer::singleShot(0, this, &LessonsPanel::scrollToReveal);
  if (!table.replay.isEmpty()) emit replayRequested(table.replay, pausesOf(l), false);
}

}  // namespace arl::ui
