// Frames per second of a view, for the status bar: counts the paint events of the widget and
// its children (the busiest one of them is the frame rate a viewer sees).
#pragma once

#include <QElapsedTimer>
#include <QHash>
#include <QObject>
#include <QPointer>
#include <QWidget>

namespace arl::ui {

class FrameMeter : public QObject {
  Q_OBJECT

 public:
  explicit FrameMeter(QObject* parent = nullptr);
  // Watches `view` and every child widget it has now (call again after it built new ones).
  void watch(QWidget* view);
  // Paints per second of the busiest watched widget since the last call (0 when idle).
  double takeFps();

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  QHash<QObject*, int> paints_;
  QElapsedTimer clock_;
};

}  // namespace arl::ui
