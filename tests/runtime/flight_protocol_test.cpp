// Protocol 14: a worker's flight record (FlightRecord) through the codec, with its bounds: a
// hostile record count or field is refused when decoded, not only when encoded.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#include "runtime/protocol.h"

namespace arl {
namespace {

CollectiveRecord record(uint64_t seq, CollectiveState state = CollectiveState::Completed) {
  CollectiveRecord c;
  c.run.runId = 9;
  c.run.algorithm = "halving-doubling";
  c.run.collective = Collective::ReduceScatter;
  c.run.dtype = DataType::BFloat16;
  c.run.count = 1 << 20;
  c.run.nranks = kMaxRanks;
  c.run.sliceBytes = 1 << 16;
  c.run.nsteps = 12;
  c.seq = seq;
  c.place = {IterationPlace::Kind::Checked, 3};
  c.startNs = 1'000'000'000'000;
  c.endNs = state == CollectiveState::InFlight ? 0 : c.startNs + 5;
  c.lastStep = 11;
  c.waitedOn = state == CollectiveState::Completed ? 0 : (uint64_t{1} << 63) | 1;
  c.state = state;
  return c;
}

FlightRecord full() {
  FlightRecord m;
  m.epoch = 4;
  m.rank = 63;
  m.recorded = 1000;
  for (uint64_t i = 0; i < kFlightRecords; ++i) {
    m.records.push_back(record(
        900 + i, i + 1 == kFlightRecords ? CollectiveState::Aborted : CollectiveState::Completed));
  }
  return m;
}

std::string refusal(const Message& m) {
  const auto why = validate(m);
  return why ? *why : "";
}

TEST(FlightProtocol, AFullRecordRoundTripsWithinTheBodyLimit) {
  EXPECT_EQ(kProtocolVersion, 15);
  EXPECT_EQ(static_cast<int>(MsgType::FlightRecord), 19);
  const FlightRecord m = full();
  const Frames f = m.encode();
  EXPECT_LT(f[1].size(), kMaxBodyBytes);
  auto back = FlightRecord::decode(f[0], f[1]);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(*back, m);
  FlightRecord inFlight{4, 0, 1, {record(0, CollectiveState::InFlight)}};
  const Frames g = inFlight.encode();
  auto b2 = FlightRecord::decode(g[0], g[1]);
  ASSERT_TRUE(b2.ok()) << b2.error().message();
  EXPECT_EQ(*b2, inFlight);
  EXPECT_TRUE(isRunScoped(MsgType::FlightRecord));
  EXPECT_TRUE(sentByWorker(MsgType::FlightRecord) && !sentByCoordinator(MsgType::FlightRecord));
  EXPECT_EQ(typeName(MsgType::FlightRecord), "FlightRecord");
}

TEST(FlightProtocol, FieldsOutsideTheirBoundsAreRefused) {
  FlightRecord m{4, 1, 2, {record(0), record(1)}};
  EXPECT_EQ(refusal(m), "");
  m.recorded = 1;
  EXPECT_EQ(refusal(m), "FlightRecord: 2 records of 1 recorded");
  m.recorded = 2;
  m.records[1].seq = 0;
  EXPECT_EQ(refusal(m), "FlightRecord: record 1 is not after record 0");
  m.records[1].seq = 1;
  m.records[1].lastStep = 12;
  EXPECT_EQ(refusal(m), "FlightRecord: record 1: last step 12 outside -1..11");
  m.records[1].lastStep = -2;
  EXPECT_EQ(refusal(m), "FlightRecord: record 1: last step -2 outside -1..11");
  m.records[1].lastStep = 0;
  m.records[1].run.nranks = 4;
  m.records[1].waitedOn = 1u << 4;
  EXPECT_EQ(refusal(m), "FlightRecord: record 1: waited on a rank outside a world of 4");
  m.records[1].waitedOn = 0;
  m.records[1].run.nranks = kMaxRanks + 1;
  EXPECT_NE(refusal(m).find("ranks 65 is outside 1..64"), std::string::npos) << refusal(m);
  m.records[1].run.nranks = 4;
  m.records[1].run.algorithm = "two words";
  EXPECT_NE(refusal(m).find("not printable ASCII"), std::string::npos) << refusal(m);
  m.records[1].run.algorithm = "ring";
  m.records[1].endNs = m.records[1].startNs - 1;
  EXPECT_NE(refusal(m).find("before its start"), std::string::npos) << refusal(m);
  m.records[1].endNs = 0;
  EXPECT_EQ(refusal(m), "FlightRecord: record 1: state completed without an end");
  m.records[1].endNs = m.records[1].startNs;
  m.records.resize(kFlightRecords + 1, record(0));
  m.recorded = 1000;
  EXPECT_EQ(refusal(m), "FlightRecord: 65 records, more than the 64 a recorder keeps");
  EXPECT_THROW((void)m.encode(), EnforceError);
  EXPECT_NE(refusal(FlightRecord{0, 0, 0, {}}), "");  // runs start at epoch 1
}

// A peer's body built byte by byte: a count beyond the recorder's and unknown enum values are
// refused when decoded, naming the field.

void putVarint(Bytes& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<uint8_t>(v) | 0x80);
    v >>= 7;
  }
  out.push_back(static_cast<uint8_t>(v));
}

// Field 3 (records) holding `c`'s bytes and then `extra` (a later value of a field wins).
Bytes recordField(const CollectiveRecord& c, const Bytes& extra = {}) {
  const Bytes with = FlightRecord{4, 1, 1, {c}}.encode()[1];
  const Bytes without = FlightRecord{4, 1, 1, {}}.encode()[1];
  // The records come last (fields are written in number order): tag, length, payload.
  size_t i = without.size() + 1;
  while (with[i] & 0x80) ++i;
  Bytes payload(with.begin() + static_cast<std::ptrdiff_t>(i) + 1, with.end());
  payload.insert(payload.end(), extra.begin(), extra.end());
  Bytes out{0x1a};
  putVarint(out, payload.size());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

TEST(FlightProtocol, DecodeRefusesAHostileCountAndUnknownValues) {
  const Frames f = FlightRecord{4, 1, 1, {}}.encode();
  const auto decodeBody = [&](const Bytes& records) {
    Bytes body = f[1];
    body.insert(body.end(), records.begin(), records.end());
    return decode(f[0], body);
  };
  const Bytes one = recordField(record(0));
  Bytes many;
  for (int i = 0; i < 20'000; ++i) many.insert(many.end(), one.begin(), one.end());
  ASSERT_LT(many.size(), kMaxBodyBytes);
  auto r = decodeBody(many);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, DecodeErrc::InvalidField);
  EXPECT_NE(r.error().reason.find("20000 records, more than the 64"), std::string::npos)
      << r.error().reason;

  EXPECT_TRUE(decodeBody(one).ok());
  const struct {
    Bytes field;
    const char* words;
  } bad[] = {{{0x80, 0x01, 0x07}, "record 0: unknown state 7"},     // state (16) = 7
             {{0x50, 0x03}, "record 0: unknown iteration kind 3"},  // place_kind (10) = 3
             {{0x18, 0x00}, "record 0: unknown collective 0"}};     // collective (3) = 0
  for (const auto& b : bad) {
    r = decodeBody(recordField(record(0), b.field));
    ASSERT_FALSE(r.ok()) << b.words;
    EXPECT_EQ(r.error().code, DecodeErrc::InvalidField);
    EXPECT_NE(r.error().reason.find(b.words), std::string::npos) << r.error().reason;
  }
}

}  // namespace
}  // namespace arl
