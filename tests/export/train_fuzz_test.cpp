// The training record reader on hostile input: truncated, mutated and random texts. It must end
// every one with a TrainRecordError or a record it can vouch for, never a crash, another
// exception or an allocation the text does not pay for; what it accepts writes back to a text
// that reads the same again.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "../train_record_fixture.h"
#include "export/train_export.h"
#include "json_fuzz.h"

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
  int accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string t = test::mutatedJson(good, i, rng);
    accepted += readsCleanly(t);
  }
  // Most edits break the text or a field; some (a digit of a time) leave a readable one.
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, 3000);
}

TEST(TrainFuzz, RandomTextIsACleanError) {
  std::mt19937 rng(11);
  for (int i = 0; i < 2000; ++i) {
    const std::string t =
        test::randomText(i, rng, "{\"format\":\"allreduce-lab-train\",\"version\":1,");
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
