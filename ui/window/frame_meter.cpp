#include "window/frame_meter.h"

#include <QEvent>
#include <algorithm>

namespace arl::ui {

FrameMeter::FrameMeter(QObject* parent) : QObject(parent) { clock_.start(); }

void FrameMeter::watch(QWidget* view) {
  if (!view) return;
  QList<QWidget*> all = view->findChildren<QWidget*>();
  all.append(view);
  for (QWidget* w : all) {
    w->removeEventFilter(this);
    w->installEventFilter(this);
  }
}

double FrameMeter::takeFps() {
  const double s = static_cast<double>(clock_.restart()) / 1000.0;
  int most = 0;
  for (int n : std::as_const(paints_)) most = std::max(most, n);
  paints_.clear();
  return s > 0 ? most / s : 0.0;
}

bool FrameMeter::eventFilter(QObject* watched, QEvent* event) {
  if (event->type() == QEvent::Paint) ++paints_[watched];
  return false;
}

}  // namespace arl::ui
