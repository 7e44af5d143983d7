// The window's Lessons panel: predict, then run, then reveal. It lists the lessons
// (core/lesson/, the files of resources/lessons/), shows a lesson's text and question, and
// waits for the student's answer (an option, and if they like a number: the time they expect)
// before anything runs. Run hands the lesson to `allreduce-lab lesson run NAME --json
// --record DIR` as a child process, so that the window's verdict is the command line's, on the
// same real workers, with the same steadiness check. The reveal shows each option's
// measurement beside the student's prediction and the model's; the panel keeps a score for the
// session and asks the window to replay the run of the article's answer with the lesson's
// pauses, or, for a lesson of training runs, to show their record in the Training view. When
// workers cannot start, the lesson's bundled recording is replayed instead, and said to be one.
#pragma once

#include <QProcess>
#include <QString>
#include <QTemporaryDir>
#include <QWidget>
#include <memory>
#include <vector>

#include "lesson/lesson.h"
#include "topology/topology_pane.h"

class QButtonGroup;
class QLabel;
class QLineEdit;
class QListWidget;
class QPushButton;
class QVBoxLayout;

namespace arl::ui {

class LessonsPanel : public QWidget {
  Q_OBJECT

 public:
  // Reads the lessons of `dir` ("": lessonsDir() of the program's folder).
  explicit LessonsPanel(QWidget* parent = nullptr, const QString& dir = QString());
  ~LessonsPanel() override;

  int lessonCount() const { return static_cast<int>(lessons_.size()); }
  // Why no lessons could be read ("" when they were).
  QString loadError() const { return loadError_; }
  // Shows the lesson called `name`; false when there is none.
  bool selectLesson(const QString& name);
  const Lesson* current() const;
  // The student's answer: an option's id (false for none of the current lesson's), and an
  // optional number (the time they expect, in ms, or the value of a fact).
  bool choose(const QString& optionId);
  void setGuess(const QString& number);
  // Runs the current lesson (false, with nothing started, before an answer is chosen or while
  // one runs).
  bool runLesson();
  bool running() const;
  // Stops a lesson that runs (its child and every worker with it).
  void stopLesson();
  // Answers that matched what was measured, of those revealed this session.
  int score() const { return right_; }
  int answered() const { return answered_; }
  // The reveal as shown (HTML), "" before one.
  QString revealText() const;
  // The program run for a lesson (default: this program).
  void setProgram(const QString& path) { program_ = path; }

 signals:
  // Replay `path` with `pauses`; `bundled`: a bundled recording, not a run made now.
  void replayRequested(const QString& path, const std::vector<PlaybackPause>& pauses, bool bundled);
  // A lesson of training runs ran: show their record (allreduce-lab train's JSON, every run
  // of the lesson) at `path`.
  void trainingRecordReady(const QString& path);
  // A reveal is shown (its verdict agreed with the article or not).
  void revealed(bool agrees);
  // A lesson started or ended running.
  void runningChanged(bool running);

 private:
  void showLesson(int index);
  void finished(int exitCode, QProcess::ExitStatus status);
  void reveal(const QString& json);
  void fallBack(const QString& why);
  void scrollToReveal();
  void stopFollowingReveal();
  std::vector<PlaybackPause> pausesOf(const Lesson& l) const;
  QString chosenId() const;

  QString dir_;
  QString program_;
  QString loadError_;
  std::vector<Lesson> lessons_;
  int index_ = -1;
  QListWidget* list_ = nullptr;
  QLabel* text_ = nullptr;
  QWidget* optionsBox_ = nullptr;
  QVBoxLayout* optionsLay_ = nullptr;
  QButtonGroup* options_ = nullptr;
  QLineEdit* guess_ = nullptr;
  QPushButton* run_ = nullptr;
  QLabel* status_ = nullptr;
  QLabel* reveal_ = nullptr;
  QLabel* score_ = nullptr;
  QProcess* proc_ = nullptr;
  std::unique_ptr<QTemporaryDir> work_;
  // The reveal kept at the top of the scroll area while the window settles (scrollToReveal).
  QMetaObject::Connection followReveal_;
  QMetaObject::Connection stopFollow_;
  int right_ = 0;
  int answered_ = 0;
};

}  // namespace arl::ui
