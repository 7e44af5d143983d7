#include "window/error_banner.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QRegularExpression>
#include <QStyle>
#include <QToolButton>
#include <QVBoxLayout>

namespace arl::ui {

QString failureHeadline(const QString& error, int rank, int lastStep) {
  static const QRegularExpression stepRe(QStringLiteral("\\bstep (\\d+)"));
  static const QRegularExpression rankRe(QStringLiteral("\\brank (\\d+)"));
  if (rank < 0) {
    const auto m = rankRe.match(error);
    if (m.hasMatch()) rank = m.captured(1).toInt();
  }
  QString head =
      rank >= 0 ? QObject::tr("Rank %1 failed").arg(rank) : QObject::tr("The run failed");
  const auto s = stepRe.match(error);
  if (s.hasMatch()) {
    head += QObject::tr(" at step %1").arg(s.captured(1));
  } else if (lastStep >= 0) {
    head += QObject::tr(" during step %1 (the last step it reported)").arg(lastStep);
  }
  return head;
}

ErrorBanner::ErrorBanner(QWidget* parent)
    : QFrame(parent),
      icon_(new QLabel(this)),
      headline_(new QLabel(this)),
      details_(new QLabel(this)),
      flight_(new QToolButton(this)),
      close_(new QToolButton(this)) {
  setObjectName(QStringLiteral("errorBanner"));
  setFrameShape(QFrame::NoFrame);
  setAutoFillBackground(true);
  setStyleSheet(
      QStringLiteral("QFrame#errorBanner { background: #fde2e1; border-bottom: 3px solid #c62828; }"
                     "QFrame#errorBanner QLabel { color: #1d1d1f; background: transparent; }"
                     "QFrame#errorBanner QToolButton { padding: 4px 12px; }"));
  QFont big = headline_->font();
  big.setPointSizeF(big.pointSizeF() * 1.35);
  big.setBold(true);
  headline_->setFont(big);
  details_->setWordWrap(true);
  details_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  const int iconSize = style()->pixelMetric(QStyle::PM_LargeIconSize);
  icon_->setPixmap(style()->standardIcon(QStyle::SP_MessageBoxCritical).pixmap(iconSize, iconSize));
  flight_->setText(tr("Flight record"));
  flight_->setToolTip(
      tr("Each rank's last collectives: the step where the run failed and the "
         "ranks that never reached it"));
  flight_->setToolButtonStyle(Qt::ToolButtonTextOnly);
  flight_->hide();
  connect(flight_, &QToolButton::clicked, this, &ErrorBanner::flightRecordRequested);
  close_->setText(tr("Dismiss"));
  close_->setToolTip(tr("Hide this message (the next run works as usual)"));
  close_->setToolButtonStyle(Qt::ToolButtonTextOnly);
  connect(close_, &QToolButton::clicked, this, [this] {
    hide();
    emit dismissed();
  });
  auto* text = new QVBoxLayout;
  text->setSpacing(2);
  text->addWidget(headline_);
  text->addWidget(details_);
  auto* row = new QHBoxLayout(this);
  row->setContentsMargins(14, 10, 14, 10);
  row->setSpacing(12);
  row->addWidget(icon_, 0, Qt::AlignTop);
  row->addLayout(text, 1);
  row->addWidget(flight_, 0, Qt::AlignTop);
  row->addWidget(close_, 0, Qt::AlignTop);
  hide();
}

void ErrorBanner::showError(const QString& error, int rank, int lastStep) {
  headline_->setText(failureHeadline(error, rank, lastStep));
  details_->setText(error);
  flight_->hide();
  show();
}

void ErrorBanner::showProblem(const QString& headline, const QString& details) {
  headline_->setText(headline);
  details_->setText(details);
  flight_->hide();
  show();
}

void ErrorBanner::setFlightRecordAvailable(bool available) { flight_->setVisible(available); }
bool ErrorBanner::flightRecordAvailable() const { return !flight_->isHidden(); }

QString ErrorBanner::headline() const { return headline_->text(); }
QString ErrorBanner::details() const { return details_->text(); }

}  // namespace arl::ui
