#include "window/setup_fields.h"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QStackedWidget>

#include "base/types.h"

namespace arl::ui {

SizeEdit::SizeEdit(uint64_t lo, uint64_t hi, QWidget* parent) : QComboBox(parent) {
  setEditable(true);
  setInsertPolicy(QComboBox::NoInsert);
  for (uint64_t v = lo; v <= hi && v > 0; v *= 2) {
    addItem(QString::fromStdString(formatSize(v)));
    if (v > hi / 2) break;
  }
  setMinimumContentsLength(5);
  setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  connect(this, &QComboBox::currentTextChanged, this, &SizeEdit::edited);
}

std::optional<uint64_t> SizeEdit::value() const {
  return parseSize(currentText().trimmed().toStdString());
}

void SizeEdit::setValue(uint64_t bytes) {
  const QString text = QString::fromStdString(formatSize(bytes));
  if (currentText() != text) setCurrentText(text);
}

RangeField::RangeField(uint64_t lo, uint64_t hi, QWidget* parent)
    : QWidget(parent),
      sweep_(new QCheckBox(tr("sweep"), this)),
      pages_(new QStackedWidget(this)),
      single_(new SizeEdit(lo, hi, this)),
      min_(new SizeEdit(lo, hi, this)),
      max_(new SizeEdit(lo, hi, this)),
      factor_(new QSpinBox(this)) {
  factor_->setRange(2, 1024);
  factor_->setPrefix(QStringLiteral("×"));
  factor_->setToolTip(tr("Each run's value is the previous one times this factor"));
  sweep_->setToolTip(tr("Run every value from the smallest to the largest, a factor apart"));
  auto* range = new QWidget(pages_);
  auto* r = new QHBoxLayout(range);
  r->setContentsMargins(0, 0, 0, 0);
  r->addWidget(min_, 1);
  r->addWidget(new QLabel(QStringLiteral("…"), range));
  r->addWidget(max_, 1);
  r->addWidget(factor_);
  pages_->addWidget(single_);
  pages_->addWidget(range);
  auto* row = new QHBoxLayout(this);
  row->setContentsMargins(0, 0, 0, 0);
  row->addWidget(pages_, 1);
  row->addWidget(sweep_);
  connect(sweep_, &QCheckBox::toggled, this, [this](bool on) {
    pages_->setCurrentIndex(on ? 1 : 0);
    emit edited();
  });
  for (SizeEdit* e : {single_, min_, max_})
    connect(e, &SizeEdit::edited, this, &RangeField::edited);
  connect(factor_, &QSpinBox::valueChanged, this, &RangeField::edited);
}

std::optional<SweepRange> RangeField::range(QString* problem) const {
  SweepRange r;
  r.on = sweep_->isChecked();
  r.factor = static_cast<uint64_t>(factor_->value());
  auto read = [&](const SizeEdit* e, uint64_t& out, const QString& which) {
    const auto v = e->value();
    if (!v) {
      if (problem && problem->isEmpty()) {
        *problem = tr("%1 '%2' is not a size (e.g. 4096, 64K, 16M)").arg(which, e->currentText());
      }
      return false;
    }
    out = *v;
    return true;
  };
  const bool ok = r.on ? read(min_, r.min, tr("smallest")) & read(max_, r.max, tr("largest"))
                       : read(single_, r.single, tr("value"));
  if (!ok) return std::nullopt;
  return r;
}

void RangeField::setRange(const SweepRange& r) {
  sweep_->setChecked(r.on);
  pages_->setCurrentIndex(r.on ? 1 : 0);
  single_->setValue(r.single);
  min_->setValue(r.min);
  max_->setValue(r.max);
  factor_->setValue(static_cast<int>(std::clamp<uint64_t>(r.factor, 2, 1024)));
}

bool RangeField::sweeping() const { return sweep_->isChecked(); }

}  // namespace arl::ui
