// Small editors of the setup panel: a size typed as nccl-tests' users write it ("64K", "16M"),
// and a value that is either single or swept geometrically (min, max, factor).
#pragma once

#include <QComboBox>
#include <QWidget>
#include <optional>

#include "window/setup.h"

class QCheckBox;
class QSpinBox;
class QStackedWidget;

namespace arl::ui {

// An editable combo box of sizes: powers of two from `lo` to `hi` offered, anything parseSize
// accepts typed.
class SizeEdit : public QComboBox {
  Q_OBJECT

 public:
  SizeEdit(uint64_t lo, uint64_t hi, QWidget* parent = nullptr);
  // The size typed, or nullopt when the text is not a size.
  std::optional<uint64_t> value() const;
  void setValue(uint64_t bytes);

 signals:
  void edited();
};

// A value for one run, or a geometric sweep of them, with a "sweep" switch.
class RangeField : public QWidget {
  Q_OBJECT

 public:
  // Offers powers of two from `lo` to `hi` (sizes are written as 64K, 1M; counts as 4).
  RangeField(uint64_t lo, uint64_t hi, QWidget* parent = nullptr);

  // The range, or the text that is not a value (naming the box).
  std::optional<SweepRange> range(QString* problem) const;
  void setRange(const SweepRange& r);
  bool sweeping() const;
  // The single value's editor (the toolbar mirrors it).
  SizeEdit* singleEdit() const { return single_; }

 signals:
  void edited();

 private:
  QCheckBox* sweep_;
  QStackedWidget* pages_;
  SizeEdit* single_;
  SizeEdit* min_;
  SizeEdit* max_;
  QSpinBox* factor_;
};

}  // namespace arl::ui
