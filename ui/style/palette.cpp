#include "style/palette.h"

#include <QHash>
#include <array>

namespace arl::ui {
namespace {

// A qualitative palette of 12 hues that stay distinguishable, also for the common forms of
// colour blindness in its first eight (after Paul Tol's "muted" and "bright" schemes).
constexpr std::array<QRgb, 12> kRankPalette = {
    0x4477AA, 0xEE6677, 0x228833, 0xCCBB44, 0x66CCEE, 0xAA3377,
    0xBBBBBB, 0x332288, 0xDDCC77, 0x117733, 0x882255, 0x44AA99,
};

}  // namespace

QColor rankColor(int rank, int nranks) {
  if (rank < 0) return QColor(0x80, 0x80, 0x80);
  if (nranks <= static_cast<int>(kRankPalette.size())) {
    return QColor::fromRgb(kRankPalette[static_cast<size_t>(rank) % kRankPalette.size()]);
  }
  // Hues spaced around the wheel; alternate two lightness levels so neighbours differ.
  const int hue = (rank * 360 / nranks) % 360;
  const int lightness = rank % 2 == 0 ? 120 : 150;
  return QColor::fromHsl(hue, 170, lightness);
}

QColor algorithmColor(const QString& algorithm) {
  static const QHash<QString, QRgb> known = {
      {QStringLiteral("ring"), 0x1F77B4},
      {QStringLiteral("tree"), 0xD62728},
      {QStringLiteral("halving-doubling"), 0x2CA02C},
      {QStringLiteral("hierarchical"), 0x9467BD},
      {QStringLiteral("parameter-server"), 0xFF7F0E},
      {QStringLiteral("reduce-broadcast"), 0x8C564B},
      {QStringLiteral("recursive-doubling"), 0xE377C2},
      {QStringLiteral("bruck"), 0x17BECF},
      {QStringLiteral("pat"), 0xBCBD22},
      {QStringLiteral("swing"), 0x7F7F7F},
      {QStringLiteral("swing-latency"), 0x393B79},
      {QStringLiteral("knomial"), 0xAD494A},
      {QStringLiteral("nccl"), 0x76B900},
  };
  const auto it = known.find(algorithm);
  if (it != known.end()) return QColor::fromRgb(it.value());
  return QColor::fromHsl(static_cast<int>(qHash(algorithm) % 360), 150, 110);
}

QColor completeColor() { return QColor(0xFF, 0xC4, 0x00); }

}  // namespace arl::ui
