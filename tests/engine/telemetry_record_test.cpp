// The packed telemetry record (exec/telemetry_record.h) and the ring a worker's rank records
// into (exec/telemetry_ring.h): the layout byte by byte, round trips, refusals with a reason,
// and the ring's order, wrap, drops and hand-over between two threads.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "base/errors.h"
#include "base/limits.h"
#include "exec/telemetry_record.h"
#include "exec/telemetry_ring.h"
#include "schedule/schedule.h"

namespace arl {
namespace {

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

TelemetryEvent event(uint64_t i) {
  TelemetryEvent e;
  e.runId = 9;
  e.rank = 2;
  e.iteration = static_cast<uint32_t>(i / 10);
  e.step = static_cast<uint32_t>(i % 7);
  e.kind = static_cast<EventKind>(i % 6);
  e.phase = static_cast<uint8_t>(i % 5);
  e.clock = i % 4 == 1 ? ClockSource::Device : ClockSource::Host;
  e.peer = i % 3 == 0 ? -1 : static_cast<int32_t>(i % kMaxRanks);
  e.chunk = static_cast<uint32_t>(i * 3);
  e.offset = i * 1000;
  e.bytes = 4096 + i;
  e.tNs = 1'000'000'000 + static_cast<int64_t>(i) * 250;
  e.provenance = i * 0x9E3779B97F4A7C15ull;
  return e;
}

std::vector<uint8_t> pack(const std::vector<TelemetryEvent>& events) {
  std::vector<uint8_t> out(events.size() * kTelemetryRecordBytes);
  for (size_t i = 0; i < events.size(); ++i) {
    packTelemetryRecord(events[i], out.data() + i * kTelemetryRecordBytes);
  }
  return out;
}

std::optional<std::string> unpack(std::span<const uint8_t> bytes, std::vector<TelemetryEvent>& out,
                                  uint32_t version = kTelemetryRecordVersion,
                                  uint32_t recordBytes = kTelemetryRecordBytes) {
  return unpackTelemetryRecords(bytes, version, recordBytes, 9, 2, out);
}

bool contains(const std::optional<std::string>& s, std::string_view part) {
  return s && s->find(part) != std::string::npos;
}

// ---- Layout -------------------------------------------------------------------------------

TEST(TelemetryRecord, LayoutIsLittleEndianAsDocumented) {
  TelemetryEvent e;
  e.tNs = 0x0102030405060708;
  e.offset = 0x1112131415161718;
  e.bytes = 0x2122232425262728;
  e.provenance = 0x3132333435363738;
  e.iteration = 0x41424344;
  e.step = 0x51525354;
  e.chunk = 0x61626364;
  e.peer = 0x0A0B;
  e.kind = EventKind::ReduceEnd;                     // 3
  e.phase = static_cast<uint8_t>(Phase::Broadcast);  // 3
  e.clock = ClockSource::Device;                     // 1, in byte 47's high bits
  uint8_t rec[kTelemetryRecordBytes] = {};
  packTelemetryRecord(e, rec);
  const auto le = [&](size_t at, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t{rec[at + i]} << (8 * i);
    return v;
  };
  EXPECT_EQ(le(0, 8), 0x0102030405060708u);
  EXPECT_EQ(le(8, 8), 0x1112131415161718u);
  EXPECT_EQ(le(16, 8), 0x2122232425262728u);
  EXPECT_EQ(le(24, 8), 0x3132333435363738u);
  EXPECT_EQ(le(32, 4), 0x41424344u);
  EXPECT_EQ(le(36, 4), 0x51525354u);
  EXPECT_EQ(le(40, 4), 0x61626364u);
  EXPECT_EQ(le(44, 2), 0x0A0Bu);
  EXPECT_EQ(rec[46], 3);
  EXPECT_EQ(rec[47], 0x13);
  EXPECT_EQ(kTelemetryRecordBytes, 48u);
}

TEST(TelemetryRecord, RoundTripsEveryFieldAtItsExtremes) {
  std::vector<TelemetryEvent> events;
  for (uint64_t i = 0; i < 200; ++i) events.push_back(event(i));
  TelemetryEvent x = event(0);
  x.tNs = std::numeric_limits<int64_t>::min();
  x.offset = x.bytes = x.provenance = kU64Max;
  x.iteration = x.step = x.chunk = 0xFFFFFFFF;
  x.peer = kMaxRanks - 1;
  x.kind = EventKind::IterationEnd;
  x.phase = static_cast<uint8_t>(Phase::Local);
  events.push_back(x);
  x.tNs = std::numeric_limits<int64_t>::max();
  x.peer = -1;
  events.push_back(x);

  std::vector<TelemetryEvent> back = {event(999)};  // decoding appends
  ASSERT_FALSE(unpack(pack(events), back));
  ASSERT_EQ(back.size(), events.size() + 1);
  EXPECT_EQ(back[0], event(999));
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(back[i + 1], events[i]) << "record " << i;
}

TEST(TelemetryRecord, RunIdAndRankComeFromTheBatch) {
  TelemetryEvent e = event(4);
  e.runId = 123;
  e.rank = 7;
  std::vector<TelemetryEvent> back;
  ASSERT_FALSE(unpackTelemetryRecords(pack({e}), kTelemetryRecordVersion, kTelemetryRecordBytes, 55,
                                      3, back));
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].runId, 55u);
  EXPECT_EQ(back[0].rank, 3);
}

// ---- Refusals -----------------------------------------------------------------------------

TEST(TelemetryRecord, TruncatedRecordsAreRefusedAndNothingIsAppended) {
  const std::vector<uint8_t> bytes = pack({event(1), event(2), event(3)});
  std::vector<TelemetryEvent> out = {event(7)};
  for (size_t len : {size_t{1}, size_t{47}, size_t{49}, bytes.size() - 1}) {
    const auto err = unpack({bytes.data(), len}, out);
    EXPECT_TRUE(contains(err, std::to_string(len) + " bytes, not a whole number of 48-byte "
                                                    "records (truncated?)"))
        << err.value_or("accepted");
    EXPECT_EQ(telemetryRecordsError({bytes.data(), len}), err);
    EXPECT_EQ(out.size(), 1u);
  }
  EXPECT_FALSE(unpack({bytes.data(), 0}, out));  // no records is a valid batch
  EXPECT_EQ(out.size(), 1u);
}

TEST(TelemetryRecord, UnknownLayoutsAreRefused) {
  const std::vector<uint8_t> bytes = pack({event(1)});
  std::vector<TelemetryEvent> out;
  EXPECT_TRUE(contains(unpack(bytes, out, 5), "layout version 5 is not supported"));
  EXPECT_TRUE(contains(unpack(bytes, out, 0), "layout version 0 is not supported"));
  EXPECT_TRUE(contains(unpack(bytes, out, 1, 40), "records of 40 bytes, expected 48"));
  EXPECT_TRUE(contains(unpack(bytes, out, 1, 0), "records of 0 bytes, expected 48"));
  EXPECT_TRUE(out.empty());
}

// Version 2 added NCCL's kinds (exec/nccl_events.h): they travel in the same 48 bytes;
// records of version 1 are still read, and a version-1 record with one of them is refused.
TEST(TelemetryRecord, NcclsKindsTravelInVersionTwoOnly) {
  std::vector<TelemetryEvent> in;
  for (unsigned k = static_cast<unsigned>(EventKind::NcclGroupStart);
       k <= static_cast<unsigned>(EventKind::NcclRecvStepEnd); ++k) {
    TelemetryEvent e = event(k);
    e.kind = static_cast<EventKind>(k);
    e.phase = 0;
    e.clock = ClockSource::Host;  // version 2 has no clock
    EXPECT_TRUE(isNcclKind(e.kind));
    EXPECT_FALSE(telemetryEventError(e)) << toString(e.kind);
    in.push_back(e);
  }
  ASSERT_EQ(in.size(), 9u);
  const std::vector<uint8_t> bytes = pack(in);
  std::vector<TelemetryEvent> out;
  ASSERT_FALSE(unpack(bytes, out, 2));
  EXPECT_EQ(out, in);
  out.clear();
  EXPECT_TRUE(contains(unpack(bytes, out, 1), "telemetry record 0: unknown event kind 6"));
  EXPECT_TRUE(out.empty());
  const std::vector<uint8_t> lab = pack({event(2), event(4)});  // host-timed, as version 1
  EXPECT_FALSE(unpack(lab, out, 1));
  EXPECT_EQ(out.size(), 2u);
  EXPECT_FALSE(isNcclKind(EventKind::IterationEnd));
}

// Version 4 added a training step's compute kinds: they travel in the same 48 bytes, with the
// span's length in `offset`; a record of an older version holding one is refused.
TEST(TelemetryRecord, ComputeKindsTravelInVersionFourOnly) {
  std::vector<TelemetryEvent> in;
  for (EventKind k :
       {EventKind::ComputeForward, EventKind::ComputeBackward, EventKind::ComputeOptimizer}) {
    TelemetryEvent e = event(static_cast<unsigned>(in.size()));
    e.kind = k;
    e.phase = 0;
    e.peer = -1;
    e.offset = 125'000 + in.size();  // the span's length, ns
    EXPECT_TRUE(isComputeKind(k));
    EXPECT_FALSE(isNcclKind(k));
    EXPECT_FALSE(telemetryEventError(e)) << toString(k);
    in.push_back(e);
  }
  const std::vector<uint8_t> bytes = pack(in);
  std::vector<TelemetryEvent> out;
  ASSERT_FALSE(unpack(bytes, out, 4));
  EXPECT_EQ(out, in);
  EXPECT_EQ(computeSpanStartNs(out[1]), in[1].tNs - 125'001);
  out.clear();
  EXPECT_TRUE(contains(unpack(bytes, out, 3), "telemetry record 0: unknown event kind 15"));
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(isComputeKind(EventKind::NcclRecvStepEnd));
  EXPECT_EQ(toString(EventKind::ComputeBackward), "compute_backward");
}

TEST(TelemetryRecord, TheClockSourceRoundTrips) {
  TelemetryEvent host = event(2);
  host.clock = ClockSource::Host;
  TelemetryEvent device = event(3);
  device.clock = ClockSource::Device;
  std::vector<TelemetryEvent> back;
  ASSERT_FALSE(unpack(pack({host, device}), back));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].clock, ClockSource::Host);
  EXPECT_EQ(back[1].clock, ClockSource::Device);
  EXPECT_EQ(back[1].phase, device.phase);
}

TEST(TelemetryRecord, VersionOneRecordsAreTimedByTheHost) {
  TelemetryEvent e = event(5);
  e.clock = ClockSource::Host;
  std::vector<uint8_t> bytes = pack({e});
  std::vector<TelemetryEvent> out;
  ASSERT_FALSE(unpack(bytes, out, 1));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], e);
  // Versions 1 and 2 kept the phase alone in byte 47: its high bits there are a phase out of
  // range, where version 3 reads them as the clock.
  bytes[47] = 0x10;
  out.clear();
  EXPECT_TRUE(contains(unpack(bytes, out, 1), "unknown phase 16"));
  out.clear();
  EXPECT_TRUE(contains(unpack(bytes, out, 2), "unknown phase 16"));
  out.clear();
  ASSERT_FALSE(unpack(bytes, out, 3));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].clock, ClockSource::Device);
}

TEST(TelemetryRecord, GarbageRecordsAreRefusedNamingTheRecord) {
  std::vector<uint8_t> bytes = pack({event(1), event(2), event(3)});
  std::vector<TelemetryEvent> out;
  auto expectRefused = [&](std::string_view part) {
    const auto err = unpack(bytes, out);
    EXPECT_TRUE(contains(err, part)) << err.value_or("accepted");
    EXPECT_EQ(telemetryRecordsError(bytes), err);
    EXPECT_TRUE(out.empty());
  };
  uint8_t* second = bytes.data() + kTelemetryRecordBytes;
  second[46] = 18;
  expectRefused("telemetry record 1: unknown event kind 18");
  second[46] = 0;
  second[47] = 5;
  expectRefused("telemetry record 1: unknown phase 5");
  second[47] = 0x20;
  expectRefused("telemetry record 1: unknown clock source 2");
  second[47] = 0;
  second[44] = 64;  // peer 64
  expectRefused("telemetry record 1: peer 64 is neither -1 nor a rank below 64");
  second[44] = 0xFE;  // peer -2
  second[45] = 0xFF;
  expectRefused("telemetry record 1: peer -2");
  std::fill(bytes.begin(), bytes.end(), 0xFF);
  expectRefused("telemetry record 0: unknown event kind 255");
}

TEST(TelemetryRecord, EventErrorsAreTheDecodersRules) {
  EXPECT_FALSE(telemetryEventError(event(1)));
  TelemetryEvent e = event(1);
  e.kind = static_cast<EventKind>(18);
  EXPECT_TRUE(contains(telemetryEventError(e), "unknown event kind 18"));
  e = event(1);
  e.phase = 200;
  EXPECT_TRUE(contains(telemetryEventError(e), "unknown phase 200"));
  e = event(1);
  e.peer = kMaxRanks;
  EXPECT_TRUE(contains(telemetryEventError(e), "peer 64"));
}

// ---- The ring -----------------------------------------------------------------------------

std::vector<TelemetryEvent> readAll(TelemetryRing& ring, uint64_t upTo) {
  const TelemetryRing::View v = ring.peek(upTo);
  std::vector<TelemetryEvent> out;
  EXPECT_FALSE(unpack(v.first, out));
  EXPECT_FALSE(unpack(v.second, out));
  EXPECT_EQ(out.size(), v.records());
  return out;
}

TEST(TelemetryRing, CapacityMustBeAPowerOfTwo) {
  EXPECT_THROW(TelemetryRing(0), EnforceError);
  EXPECT_THROW(TelemetryRing(6), EnforceError);
  EXPECT_EQ(TelemetryRing(8).capacity(), 8u);
}

TEST(TelemetryRing, KeepsOrderAcrossTheWrap) {
  TelemetryRing ring(8);
  uint64_t next = 0;
  uint64_t expected = 0;
  // Rounds of 5 records, read in two steps: the read position walks around the ring, and
  // from the second round on a view comes in two pieces.
  bool sawTwoPieces = false;
  for (int round = 0; round < 10; ++round) {
    for (int k = 0; k < 5; ++k) ring.record(event(next++));
    EXPECT_EQ(ring.written(), next);
    const uint64_t mid = ring.read() + 2;
    for (uint64_t upTo : {mid, ring.written()}) {
      sawTwoPieces |= !ring.peek(upTo).second.empty();
      for (const TelemetryEvent& e : readAll(ring, upTo)) {
        EXPECT_EQ(e, event(expected)) << "record " << expected;
        ++expected;
      }
      ring.release(upTo);
    }
  }
  EXPECT_EQ(expected, next);
  EXPECT_TRUE(sawTwoPieces);
  EXPECT_EQ(ring.dropped(), 0u);
}

TEST(TelemetryRing, CountsWhatDoesNotFitAndKeepsTheRest) {
  TelemetryRing ring(4);
  for (uint64_t i = 0; i < 7; ++i) ring.record(event(i));
  EXPECT_EQ(ring.written(), 4u);
  EXPECT_EQ(ring.dropped(), 3u);
  const auto kept = readAll(ring, ring.written());
  ASSERT_EQ(kept.size(), 4u);
  for (uint64_t i = 0; i < 4; ++i) EXPECT_EQ(kept[i], event(i));  // the first ones, a prefix
  ring.release(2);
  ring.record(event(10));
  ring.record(event(11));
  ring.record(event(12));
  EXPECT_EQ(ring.dropped(), 4u);
  const auto after = readAll(ring, ring.written());
  ASSERT_EQ(after.size(), 4u);
  EXPECT_EQ(after[2], event(10));
  EXPECT_EQ(after[3], event(11));
  // Positions past what was written are clamped.
  EXPECT_EQ(ring.peek(1000).records(), 4u);
  ring.release(1000);
  EXPECT_EQ(ring.read(), ring.written());
  ring.reset();
  EXPECT_EQ(ring.written(), 0u);
  EXPECT_EQ(ring.read(), 0u);
  EXPECT_EQ(ring.dropped(), 0u);
}

// A large ring is populated a huge page at a time, ahead of its producer, and only as far as
// the producer gets; a producer that outruns the populated part loses nothing.
TEST(TelemetryRing, PopulatesAheadOfItsProducerOnly) {
  constexpr size_t kCapacity = size_t{1} << 18;  // 12 MiB of records, as a worker's
  TelemetryRing ring(kCapacity);
  EXPECT_EQ(ring.mappedBytes(), kCapacity * kTelemetryRecordBytes);
  EXPECT_EQ(ring.populatedBytes(), TelemetryRing::kPopulatedAtStart);
  ring.populateAhead();
  EXPECT_EQ(ring.populatedBytes(), TelemetryRing::kPopulatedAtStart) << "nothing written yet";

  // Past the margin before the populated end: the next huge page is populated.
  const uint64_t nearEnd =
      (TelemetryRing::kPopulatedAtStart - TelemetryRing::kPopulateMargin) / kTelemetryRecordBytes +
      1;
  uint64_t next = 0;
  while (next < nearEnd) ring.record(event(next++));
  ring.populateAhead();
  EXPECT_EQ(ring.populatedBytes(), TelemetryRing::kPopulatedAtStart + TelemetryRing::kPopulateStep);

  // The producer runs far beyond the populated part (its writes fault pages in themselves);
  // every record is kept, in order, and populateAhead() catches up, never past the end.
  const uint64_t far = kCapacity - 10;
  while (next < far) ring.record(event(next++));
  const auto kept = readAll(ring, ring.written());
  ASSERT_EQ(kept.size(), far);
  for (uint64_t i = 0; i < far; i += 997) EXPECT_EQ(kept[i], event(i)) << "record " << i;
  EXPECT_EQ(kept.back(), event(far - 1));
  ring.release(ring.written());
  ring.populateAhead();
  EXPECT_EQ(ring.populatedBytes(), ring.mappedBytes());
  // Round the wrap: all of it is populated, and stays so after a reset.
  for (int k = 0; k < 20; ++k) ring.record(event(next++));
  ring.reset();
  ring.populateAhead();
  EXPECT_EQ(ring.populatedBytes(), ring.mappedBytes());
  EXPECT_EQ(ring.dropped(), 0u);

  // A ring smaller than a huge page is populated whole from the start.
  TelemetryRing small(8);
  EXPECT_EQ(small.populatedBytes(), small.mappedBytes());
}

// A producer and a consumer thread, as a rank and its control thread: every record arrives,
// complete and in order. The producer waits for room itself (the ring never does), so that
// nothing is dropped whatever the scheduling.
TEST(TelemetryRing, EveryRecordCrossesBetweenThreadsInOrder) {
  constexpr uint64_t kCount = 200'000;
  TelemetryRing ring(1024);
  std::thread producer([&] {
    for (uint64_t i = 0; i < kCount; ++i) {
      while (i - ring.read() >= ring.capacity()) std::this_thread::yield();
      ring.record(event(i));
    }
  });
  uint64_t consumed = 0;
  uint64_t firstWrong = kCount;  // the first record that arrived wrong, if any
  while (consumed < kCount) {
    const uint64_t upTo = ring.written();
    for (const TelemetryEvent& e : readAll(ring, upTo)) {
      if (firstWrong == kCount && !(e == event(consumed))) firstWrong = consumed;
      ++consumed;
    }
    ring.release(upTo);
    if (upTo == ring.written()) std::this_thread::yield();
  }
  producer.join();
  EXPECT_EQ(firstWrong, kCount) << "record " << firstWrong << " arrived out of order or torn";
  EXPECT_EQ(consumed, kCount);
  EXPECT_EQ(ring.dropped(), 0u);
}

}  // namespace
}  // namespace arl
