// Waiting in a GUI test for what the window does on its own time (workers joining, a run's
// end): Qt's events are processed while the condition is polled.
#pragma once

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QThread>
#include <functional>

namespace arl::ui {

// True once `done()` holds; false when `timeoutMs` passed first.
inline bool waitUntil(const std::function<bool()>& done, int timeoutMs = 120000) {
  QElapsedTimer t;
  t.start();
  while (!done()) {
    if (t.elapsed() > timeoutMs) return false;
    QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
    QThread::msleep(2);
  }
  return true;
}

}  // namespace arl::ui
