#include <gtest/gtest.h>

#include <QSet>

#include "style/palette.h"

namespace arl::ui {
namespace {

TEST(Palette, RanksGetDistinctColoursUpTo64) {
  for (int n : {2, 4, 12, 16, 64}) {
    QSet<QRgb> seen;
    for (int r = 0; r < n; ++r) seen.insert(rankColor(r, n).rgb());
    EXPECT_EQ(seen.size(), n) << n << " ranks";
  }
}

TEST(Palette, AnAlgorithmKeepsItsColour) {
  EXPECT_EQ(algorithmColor(QStringLiteral("ring")), algorithmColor(QStringLiteral("ring")));
  EXPECT_NE(algorithmColor(QStringLiteral("ring")), algorithmColor(QStringLiteral("tree")));
  EXPECT_EQ(algorithmColor(QStringLiteral("made-up")), algorithmColor(QStringLiteral("made-up")));
}

}  // namespace
}  // namespace arl::ui
