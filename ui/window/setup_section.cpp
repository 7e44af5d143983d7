#include "window/setup_section.h"

#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPalette>
#include <QToolButton>
#include <QVBoxLayout>

namespace arl::ui {

namespace {
// The refused fields' red (the setup panel outlines them in it).
constexpr QRgb kRefusedColour = 0xc62828;
}  // namespace

SetupSection::SetupSection(const QString& key, const QString& title, bool collapsible,
                           QWidget* parent)
    : QWidget(parent), key_(key) {
  auto* col = new QVBoxLayout(this);
  col->setContentsMargins(0, 0, 0, 0);
  col->setSpacing(2);
  auto* head = new QHBoxLayout;
  head->setContentsMargins(0, 0, 0, 0);
  head->setSpacing(6);
  QFont bold = font();
  bold.setBold(true);
  if (collapsible) {
    toggle_ = new QToolButton(this);
    toggle_->setText(title);
    toggle_->setFont(bold);
    toggle_->setAutoRaise(true);
    toggle_->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    toggle_->setArrowType(Qt::RightArrow);
    toggle_->setToolTip(tr("Show or hide %1").arg(title));
    head->addWidget(toggle_, 0, Qt::AlignLeft);
  } else {
    titleLabel_ = new QLabel(title, this);
    titleLabel_->setFont(bold);
    titleLabel_->setContentsMargins(4, 4, 0, 0);
    head->addWidget(titleLabel_, 0, Qt::AlignLeft);
  }
  summary_ = new QLabel(this);
  summary_->setStyleSheet(QStringLiteral("color: #6b7280;"));
  // A long summary is cut at the dock's edge rather than widen it (the tooltip has it whole).
  summary_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  summary_->setMinimumWidth(0);
  head->addWidget(summary_, 1);
  col->addLayout(head);
  body_ = new QWidget(this);
  form_ = new QFormLayout(body_);
  form_->setContentsMargins(8, 0, 2, 4);
  form_->setVerticalSpacing(4);
  form_->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  form_->setRowWrapPolicy(QFormLayout::DontWrapRows);
  col->addWidget(body_);
  if (toggle_ != nullptr) {
    // Not a checkable button: a checked one is drawn pressed, heavier than a title.
    connect(toggle_, &QToolButton::clicked, this, [this] { setOpen(!open_); });
    body_->hide();
  } else {
    summary_->hide();
  }
}

bool SetupSection::isOpen() const { return toggle_ == nullptr || open_; }

void SetupSection::setOpen(bool open) {
  if (toggle_ == nullptr || open == open_) return;
  open_ = open;
  toggle_->setArrowType(open ? Qt::DownArrow : Qt::RightArrow);
  body_->setVisible(open);
  summary_->setVisible(!open);
  emit toggled(open);
}

void SetupSection::setSummary(const QString& text) {
  summary_->setText(text);
  summary_->setToolTip(text);
}

QString SetupSection::summary() const { return summary_->text(); }

void SetupSection::setRefused(bool refused) {
  if (refused == refused_) return;
  refused_ = refused;
  // The palette, not a style sheet: a styled tool button loses its flat, raised-on-hover look.
  // An empty palette inherits the panel's again.
  QWidget* head = toggle_ != nullptr ? static_cast<QWidget*>(toggle_) : titleLabel_;
  QPalette pal;
  if (refused) {
    const QColor red = QColor::fromRgb(kRefusedColour);
    pal = head->palette();
    pal.setColor(QPalette::ButtonText, red);
    pal.setColor(QPalette::WindowText, red);
  }
  head->setPalette(pal);
  if (refused) setOpen(true);
}

}  // namespace arl::ui
