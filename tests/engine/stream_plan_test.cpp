// StreamPlan (backend/stream_plan.h): which stream each lane runs on, and which earlier
// operations on other streams a new one must wait for, from the memory they touch.
#include "backend/stream_plan.h"

#include <gtest/gtest.h>

#include <vector>

#include "base/errors.h"

namespace arl {
namespace {

using Wait = StreamPlan::Wait;

MemRange at(uintptr_t lo, uintptr_t hi) { return {lo, hi}; }

StreamPlan::Planned add(StreamPlan& p, Lane lane, std::vector<MemRange> reads,
                        std::vector<MemRange> writes) {
  return p.add(lane, reads, writes);
}

TEST(StreamPlan, LanesMapOntoOneTwoOrThreeStreams) {
  StreamPlan one(1), two(2), three(3);
  for (Lane l : {Lane::Compute, Lane::CopyIn, Lane::CopyOut}) EXPECT_EQ(one.streamOf(l), 0);
  EXPECT_EQ(two.streamOf(Lane::Compute), 0);
  EXPECT_EQ(two.streamOf(Lane::CopyIn), 1);
  EXPECT_EQ(two.streamOf(Lane::CopyOut), 1);
  EXPECT_EQ(three.streamOf(Lane::Compute), 0);
  EXPECT_EQ(three.streamOf(Lane::CopyIn), 1);
  EXPECT_EQ(three.streamOf(Lane::CopyOut), 2);
  EXPECT_THROW(StreamPlan(0), ConfigError);
  EXPECT_THROW(StreamPlan(4), ConfigError);
}

TEST(StreamPlan, OneStreamNeverWaitsItsOrderIsEnough) {
  StreamPlan p(1);
  add(p, Lane::CopyIn, {}, {at(0, 100)});
  const auto k = add(p, Lane::Compute, {at(0, 100)}, {at(200, 300)});
  const auto o = add(p, Lane::CopyOut, {at(200, 300)}, {at(1000, 1100)});
  EXPECT_TRUE(k.waits.empty());
  EXPECT_TRUE(o.waits.empty());
  EXPECT_EQ(o.id, 3u);
}

// One slice through the pipeline: copy-in to a staging buffer, the reduction reading it,
// the copy-out of the result.
TEST(StreamPlan, EachSliceCopiesInThenReducesThenCopiesOut) {
  StreamPlan p(3);
  const auto in = add(p, Lane::CopyIn, {}, {at(0, 64)});
  const auto red = add(p, Lane::Compute, {at(1000, 1064), at(0, 64)}, {at(1000, 1064)});
  const auto out = add(p, Lane::CopyOut, {at(1000, 1064)}, {at(5000, 5064)});
  EXPECT_EQ(in.stream, 1);
  EXPECT_TRUE(in.waits.empty());
  EXPECT_EQ(red.waits, (std::vector<Wait>{{1, in.id}}));   // read after write
  EXPECT_EQ(out.waits, (std::vector<Wait>{{0, red.id}}));  // read after write
}

TEST(StreamPlan, SuccessiveSlicesOnDisjointMemoryDoNotWaitForEachOther) {
  StreamPlan p(3);
  std::vector<uint64_t> outs;
  for (uintptr_t k = 0; k < 4; ++k) {
    const uintptr_t stage = 100 * k, dst = 10'000 + 100 * k, host = 50'000 + 100 * k;
    const auto in = add(p, Lane::CopyIn, {}, {at(stage, stage + 64)});
    EXPECT_TRUE(in.waits.empty()) << "slice " << k;
    const auto red =
        add(p, Lane::Compute, {at(stage, stage + 64), at(dst, dst + 64)}, {at(dst, dst + 64)});
    // Only its own copy-in; not the copy-out of the previous slice.
    EXPECT_EQ(red.waits, (std::vector<Wait>{{1, in.id}})) << "slice " << k;
    const auto out = add(p, Lane::CopyOut, {at(dst, dst + 64)}, {at(host, host + 64)});
    EXPECT_EQ(out.waits, (std::vector<Wait>{{0, red.id}})) << "slice " << k;
  }
}

TEST(StreamPlan, WriteAfterReadAndWriteAfterWriteWait) {
  StreamPlan p(3);
  const auto out = add(p, Lane::CopyOut, {at(0, 100)}, {at(9000, 9100)});
  // A reduction overwriting what the copy-out still reads (write after read).
  const auto red = add(p, Lane::Compute, {at(500, 600)}, {at(50, 60)});
  EXPECT_EQ(red.waits, (std::vector<Wait>{{2, out.id}}));
  // A copy-in overwriting what the reduction writes (write after write).
  const auto in = add(p, Lane::CopyIn, {}, {at(55, 56)});
  EXPECT_EQ(in.waits, (std::vector<Wait>{{0, red.id}, {2, out.id}}));
  // Touching ranges are not overlapping ones.
  const auto next = add(p, Lane::Compute, {}, {at(100, 200)});
  EXPECT_TRUE(next.waits.empty());
}

TEST(StreamPlan, WaitsForTheNewestConflictOnEachStream) {
  StreamPlan p(2);
  add(p, Lane::CopyIn, {}, {at(0, 10)});
  const auto second = add(p, Lane::CopyIn, {}, {at(0, 10)});
  add(p, Lane::CopyIn, {}, {at(20, 30)});
  const auto red = add(p, Lane::Compute, {at(0, 10)}, {});
  EXPECT_EQ(red.waits, (std::vector<Wait>{{1, second.id}}));
}

TEST(StreamPlan, CompletedOperationsAreForgotten) {
  StreamPlan p(3);
  const auto a = add(p, Lane::CopyIn, {}, {at(0, 10)});
  const auto b = add(p, Lane::CopyIn, {}, {at(0, 10)});
  EXPECT_EQ(p.held(1), 2u);
  p.completed(1, a.id);
  EXPECT_EQ(p.held(1), 1u);
  EXPECT_EQ(add(p, Lane::Compute, {at(0, 10)}, {}).waits, (std::vector<Wait>{{1, b.id}}));
  p.completed(1, b.id);
  EXPECT_EQ(p.held(1), 0u);
  EXPECT_TRUE(add(p, Lane::Compute, {at(0, 10)}, {}).waits.empty());
  EXPECT_THROW(p.completed(3, 1), EnforceError);
}

TEST(StreamPlan, AnOperationDroppedFromABoundedHistoryIsWaitedForUntilComplete) {
  StreamPlan p(2, 2);
  const auto first = add(p, Lane::CopyIn, {}, {at(0, 10)});
  add(p, Lane::CopyIn, {}, {at(100, 110)});
  const auto third = add(p, Lane::CopyIn, {}, {at(200, 210)});  // drops the first unchecked
  EXPECT_EQ(p.held(1), 2u);
  // Disjoint from everything held, but the dropped one might have conflicted.
  EXPECT_EQ(add(p, Lane::Compute, {at(5000, 5010)}, {}).waits, (std::vector<Wait>{{1, first.id}}));
  p.completed(1, first.id);
  EXPECT_TRUE(add(p, Lane::Compute, {at(5000, 5010)}, {}).waits.empty());
  EXPECT_EQ(add(p, Lane::Compute, {at(200, 201)}, {}).waits, (std::vector<Wait>{{1, third.id}}));
}

}  // namespace
}  // namespace arl
