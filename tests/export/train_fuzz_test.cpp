// The training record reader on hostile input: truncated, mutated and random texts. It must end
// every one with a TrainRecordError or a record it can vouch for, never a crash, another
// exception or an allocation the text does not pay for; what it accepts writes back to a text
// that reads the same again.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "../train_record_fixture.h"
#include "export/train_export.h"

namespace arl {
namespace {

// Reads `text`; only a TrainRecordError may come out. Returns whether it was accepted.
bool readsCleanly(const std::string& text) {
  try {
    const TrainRecord r = readTrainJson(text);
    const std::string again = writeTrainJson(r);
    EXPECT_EQ(writeTrainJson(readTrainJson(again)), again);
    writeTrainCsv(r);
    return true;
  } catch (const TrainRecordError&) {
    return false;
  }
}

std::string goodRecord() {
  TrainRecord r = test::fixtureTrainRecord();
  r.runs[1].steps.resize(4);  // short, so that every truncation is tried quickly
  return writeTrainJson(r);
}

TEST(TrainFuzz, TheGoodRecordReads) { EXPECT_TRUE(readsCleanly(goodRecord())); }

TEST(TrainFuzz, EveryTruncationIsACleanError) {
  const std::string good = goodRecord();
  for (size_t n = 0; n + 2 < good.size(); ++n) {
    EXPECT_FALSE(readsCleanly(good.substr(0, n))) << "accepted the first " << n << " bytes";
  }
}

TEST(TrainFuzz, MutatedRecordsReadOrFailCleanly) {
  const std::string good = goodRecord();
  std::mt19937 rng(20261204);
  const std::string alphabet =
      "0123456789-+.eE\"\\{}[],: \n\x00\xff"
      "abcdefnrtux";
  std::uniform_int_distribution<size_t> pos(0, good.size() - 1), pick(0, alphabet.size() - 1);
  int accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string t = good;
    const int edits = 1 + i % 4;
    for (int k = 0; k < edits; ++k) {
      const size_t p = pos(rng) % t.size();
      switch (rng() % 4) {
        case 0: t[p] = alphabet[pick(rng)]; break;  // replace
        case 1: t.insert(t.begin() + static_cast<long>(p), alphabet[pick(rng)]); break;
        case 2: t.erase(p, 1); break;                     // delete
        default: t[p] = static_cast<char>(rng()); break;  // any byte
      }
    }
    accepted += readsCleanly(t);
  }
  // Most edits break the text or a field; some (a digit of a time) leave a readable one.
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, 3000);
}

TEST(TrainFuzz, RandomTextIsACleanError) {
  std::mt19937 rng(11);
  for (int i = 0; i < 2000; ++i) {
    std::string t(rng() % 300, '\0');
    for (char& c : t) c = static_cast<char>(rng());
    if (i % 2) t.insert(0, "{\"format\":\"allreduce-lab-train\",\"version\":1,");
    EXPECT_FALSE(readsCleanly(t));
  }
}

TEST(TrainFuzz, NestingIsBoundedBeforeAnythingIsBuilt) {
  const std::string deep = std::string(200'000, '[') + std::string(200'000, ']');
  EXPECT_FALSE(readsCleanly(deep));
  std::string inside = goodRecord();
  const size_t p = inside.find("\"label\":");
  ASSERT_NE(p, std::string::npos);
  inside.insert(p, "\"extra\":" + std::string(100, '[') + std::string(100, ']') + ",");
  try {
    readTrainJson(inside);
    ADD_FAILURE() << "accepted 100 nested arrays";
  } catch (const TrainRecordError& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper than"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace arl
