#include "runtime/protocol.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>

#include "base/errors.h"
#include "exec/telemetry_record.h"
#include "sample_messages.h"
#include "schedule/schedule.h"
#include "transport/transport.h"
#include "transport/zmq/curve_keys.h"

namespace arl {
namespace {

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();

// ---- A minimal protobuf writer, to build bodies our encoder refuses to produce -------------
// Scalars are "last one wins" in protobuf, and repeated fields accept unpacked entries, so a
// valid body with fields appended to it is how a hostile peer's message is made here.

void putVarint(Bytes& b, uint64_t v) {
  while (v >= 0x80) {
    b.push_back(static_cast<uint8_t>(v) | 0x80);
    v >>= 7;
  }
  b.push_back(static_cast<uint8_t>(v));
}
void putField(Bytes& b, int field, uint64_t v) {
  putVarint(b, static_cast<uint64_t>(field) << 3);
  putVarint(b, v);
}
void putSigned(Bytes& b, int field, int64_t v) {  // int32 / int64 encoding
  putField(b, field, static_cast<uint64_t>(v));
}
void putBytes(Bytes& b, int field, std::string_view s) {
  putVarint(b, (static_cast<uint64_t>(field) << 3) | 2);
  putVarint(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}

bool contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

// Decodes through the generic entry point; fails the test with the reason when refused.
Envelope mustDecode(const Frames& f) {
  auto r = decode(std::span<const Bytes>(f));
  if (!r) {
    ADD_FAILURE() << r.error().message();
    return Envelope{{}, Heartbeat{}};
  }
  return std::move(r).value();
}

template <class T>
void expectRoundTrip(const T& m) {
  SCOPED_TRACE(describe(m));
  const Frames f = m.encode();
  ASSERT_EQ(f.size(), 2u);
  ASSERT_EQ(f[0].size(), kHeaderBytes);
  const Envelope env = mustDecode(f);
  EXPECT_EQ(env.type(), T::kType);
  EXPECT_EQ(env.header.version, kProtocolVersion);
  if constexpr (requires { m.epoch; }) {
    EXPECT_EQ(env.epoch(), m.epoch);
  } else {
    EXPECT_EQ(env.epoch(), 0u);
  }
  const T* got = std::get_if<T>(&env.message);
  ASSERT_NE(got, nullptr);
  EXPECT_TRUE(*got == m);
  auto typed = T::decode(f[0], f[1]);
  ASSERT_TRUE(typed) << typed.error().message();
  EXPECT_TRUE(*typed == m);
}

DecodeError expectRejected(ByteView header, ByteView body, DecodeErrc code,
                           std::string_view reasonPart) {
  auto r = decode(header, body);
  EXPECT_FALSE(r) << "accepted a message that should be refused";
  if (r) return {};
  EXPECT_EQ(r.error().code, code) << r.error().message();
  EXPECT_TRUE(contains(r.error().reason, reasonPart))
      << "reason \"" << r.error().reason << "\" does not mention \"" << reasonPart << "\"";
  return r.error();
}

// A message's frames with a field appended to its body (see putField).
template <class T, class F>
Frames withAppended(const T& m, F&& append) {
  Frames f = m.encode();
  append(f[1]);
  return f;
}

// ---- Header ---------------------------------------------------------------------------------

TEST(Protocol, HeaderLayoutIsLittleEndianAndSixteenBytes) {
  const Bytes h = encodeHeader({kProtocolVersion, MsgType::TelemetryBatch, 0x0102030405060708});
  const Bytes expected = {'A',  'R',  'L',  '1',  0x0F, 0x00, 0x0A, 0x00,
                          0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01};
  EXPECT_EQ(h, expected);
  auto back = decodeHeader(h);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(back->type, MsgType::TelemetryBatch);
  EXPECT_EQ(back->epoch, 0x0102030405060708u);
}

TEST(Protocol, RejectsShortLongAndEmptyHeaders) {
  const Frames f = Start{3, 1, {"ipc:///x"}}.encode();
  Bytes shortHeader(f[0].begin(), f[0].end() - 1);
  Bytes longHeader = f[0];
  longHeader.push_back(0);
  auto e = expectRejected(shortHeader, f[1], DecodeErrc::HeaderSize, "15 bytes, expected 16");
  EXPECT_FALSE(e.header.has_value());
  expectRejected(longHeader, f[1], DecodeErrc::HeaderSize, "17 bytes, expected 16");
  expectRejected(Bytes{}, f[1], DecodeErrc::HeaderSize, "0 bytes, expected 16");
}

TEST(Protocol, RejectsBadMagic) {
  Frames f = Heartbeat{}.encode();
  f[0][3] = '2';
  expectRejected(f[0], f[1], DecodeErrc::BadMagic, "\"ARL2\"");
  f[0][0] = 0xFF;
  expectRejected(f[0], f[1], DecodeErrc::BadMagic, "\\xff");
}

TEST(Protocol, RejectsOtherVersions) {
  Frames f = Heartbeat{}.encode();
  f[0][4] = 3;  // the version before packed telemetry records
  const auto e = expectRejected(f[0], f[1], DecodeErrc::UnsupportedVersion, "version 3");
  EXPECT_TRUE(contains(e.reason, "speaks version 15"));
  f[0][4] = 0;
  expectRejected(f[0], f[1], DecodeErrc::UnsupportedVersion, "version 0");
  f[0][4] = 4;
  f[0][5] = 1;  // 260
  expectRejected(f[0], f[1], DecodeErrc::UnsupportedVersion, "version 260");
}

TEST(Protocol, RejectsUnknownTypes) {
  const Bytes body;
  for (uint16_t t : {uint16_t{0}, uint16_t{kMaxMsgType + 1}, uint16_t{0xFFFF}}) {
    Bytes h = encodeHeader({kProtocolVersion, MsgType::Heartbeat, 0});
    h[6] = static_cast<uint8_t>(t);
    h[7] = static_cast<uint8_t>(t >> 8);
    expectRejected(h, body, DecodeErrc::UnknownType, "type " + std::to_string(t));
  }
}

TEST(Protocol, RejectsWrongFrameCounts) {
  Frames f = Heartbeat{}.encode();
  f.push_back({});
  auto r = decode(std::span<const Bytes>(f));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, DecodeErrc::FrameCount);
  EXPECT_TRUE(contains(r.error().reason, "3 frames"));
  f.resize(1);
  r = decode(std::span<const Bytes>(f));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, DecodeErrc::FrameCount);
}

// ---- Round trips ----------------------------------------------------------------------------

TEST(Protocol, EveryTypeRoundTrips) {
  const auto all = sampleMessages();
  ASSERT_EQ(all.size(), size_t{kMaxMsgType});
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(typeOf(all[i])), i + 1);
    std::visit([](const auto& m) { expectRoundTrip(m); }, all[i]);
    EXPECT_FALSE(validate(all[i])) << *validate(all[i]);
  }
}

TEST(Protocol, RoundTripsEdgeValues) {
  const std::string longName(kMaxNameBytes, 'n');
  expectRoundTrip(Hello{longName, "h\xC3\xA9te-\xE2\x82\xAC-\xF0\x9F\x98\x80", kI64Max,
                        std::string(kMaxNameBytes, 'b'), kMaxDeviceIndex, 0xFFFF});
  expectRoundTrip(Hello{"w", "h", 1, "cuda", 0, 1});
  Hello placed{"w", "h", 1, "cpu", -1, kProtocolVersion};
  placed.launchRank = kMaxRanks - 1;
  placed.launchLocalRank = 0;
  expectRoundTrip(placed);
  expectRoundTrip(
      Welcome{kMaxRanks - 1, kMaxRanks, kMaxHeartbeatIntervalMs, kMaxHeartbeatLiveness});
  expectRoundTrip(Welcome{0, 1, 1, 1});
  expectRoundTrip(Ping{0xFFFFFFFF, kI64Max});
  expectRoundTrip(Ping{0, 0});
  expectRoundTrip(Pong{0xFFFFFFFF, 0, kI64Max, kI64Max});
  expectRoundTrip(Heartbeat{});
  expectRoundTrip(Heartbeat{true, 0xFFFFFFFF, 0xFFFFFFFF});
  Heartbeat run{true, 7, 3};
  run.epoch = 0xFFFFFFFFFFFFFFFFull;
  run.phase = RunPhase::AwaitingStart;
  run.progress = 123456789012345ull;
  run.wait = WaitKind::Room;
  run.waitPeer = kMaxRanks - 1;
  run.waitStep = 9;
  run.wantReport = true;
  expectRoundTrip(run);
  run.iteration = 0;
  run.checkIteration = kMaxIterations;  // the last of -c 1000000's iterations
  expectRoundTrip(run);

  RunConfig big = sampleConfig(kMaxRanks);
  big.runId = kU64Max;
  big.epoch = kU64Max;
  big.collective = Collective::Broadcast;
  big.dtype = DataType::Uint8;
  big.op = RedOp::Avg;
  big.count = kU64Max / kMaxRanks;  // the largest count whose byte total fits
  big.sliceBytes = kU64Max;
  big.root = kMaxRanks - 1;
  big.ranksPerHost = 1;
  big.inflight = kMaxInflight;
  big.inPlace = true;
  big.warmup = kMaxIterations;
  big.iterations = kMaxIterations;
  big.check = 0;
  big.telemetry = TelemetryLevel::Off;

  expectRoundTrip(big);
  big.check = kMaxIterations;  // -c N: iterations checked
  expectRoundTrip(big);
  RunConfig one = sampleConfig(1);
  one.count = 0;
  one.warmup = 0;
  one.iterations = 1;
  one.telemetry = TelemetryLevel::Steps;
  expectRoundTrip(one);
  for (Collective c : kAllCollectives) {
    for (DataType t : kAllDataTypes) {
      for (RedOp op : kAllRedOps) {
        RunConfig x = sampleConfig(3);
        x.collective = c;
        x.dtype = t;
        x.op = op;
        expectRoundTrip(x);
      }
    }
  }

  expectRoundTrip(Ready{1, 0, 0, "inproc://a"});
  expectRoundTrip(Ready{kU64Max, kMaxRanks - 1, kU64Max, "shm://arl-1"});
  expectRoundTrip(Start{kU64Max, kU64Max, {"shm://arl-1"}});
  expectRoundTrip(IterationResult{1, kMaxRanks - 1, 0xFFFFFFFF, kU64Max, kU64Max});
  expectRoundTrip(RunDone{kU64Max, 63, kU64Max, kU64Max});
  expectRoundTrip(RunDone{7, 1, 0, 0, kU64Max, std::string(kMaxOutputSampleBytes, '\xff')});
  expectRoundTrip(RunDone{7, 1, 0, 0, 0, ""});  // a digest of 0 is a digest
  expectRoundTrip(RunFailed{1, 0, -1, -1, -1, ""});
  expectRoundTrip(RunFailed{kU64Max, 63, 63, kI64Max, kI64Max, std::string(kMaxTextBytes, 'r')});
  expectRoundTrip(RunFailed{7, 1, 0, 4, -1, "x", 2, kMaxIterations});
  expectRoundTrip(Abort{1, 0, ""});
  expectRoundTrip(Shutdown{});
  for (LogLevel l : {LogLevel::Debug, LogLevel::Info, LogLevel::Warning, LogLevel::Error}) {
    expectRoundTrip(Log{l, "line\nwith\ttabs and \xE2\x9C\x93"});
  }
}

TEST(Protocol, TelemetryBatchRoundTripsExtremeEvents) {
  TelemetryBatch b = sampleBatch(0);
  expectRoundTrip(b);  // an empty batch still carries the drop count

  b.rank = kMaxRanks - 1;
  b.runId = kU64Max;
  b.seq = kU64Max;
  b.dropped = kU64Max;
  TelemetryEvent e;
  e.runId = b.runId;
  e.rank = b.rank;
  // Every field at its extremes, timestamps across the whole int64 range.
  for (int64_t t : {kI64Min, kI64Max, int64_t{0}, int64_t{-1}, kI64Max, kI64Min + 1}) {
    e.tNs = t;
    e.iteration = 0xFFFFFFFF;
    e.step = 0xFFFFFFFF;
    e.chunk = 0xFFFFFFFF;
    e.offset = kU64Max;
    e.bytes = kU64Max;
    e.provenance = kU64Max;
    e.kind = EventKind::IterationEnd;
    e.phase = static_cast<uint8_t>(Phase::Local);
    e.peer = t < 0 ? -1 : kMaxRanks - 1;
    b.events.push_back(e);
  }
  expectRoundTrip(b);

  TelemetryBatch full = sampleBatch(kMaxEventsPerBatch);
  expectRoundTrip(full);
}

TEST(Protocol, TelemetryRecordsAreFixedSize) {
  // The body is the batch's head and one 48-byte record per event, nothing per field.
  const TelemetryBatch b = sampleBatch(kMaxEventsPerBatch);
  const Frames f = b.encode();
  const size_t head = sampleBatch(0).encode()[1].size();
  std::printf("telemetry: %zu events in %zu body bytes (%zu-byte head)\n", b.events.size(),
              f[1].size(), head);
  EXPECT_LE(f[1].size(), head + 16 + kMaxEventsPerBatch * kTelemetryRecordBytes);
  EXPECT_GE(f[1].size(), kMaxEventsPerBatch * kTelemetryRecordBytes);
  EXPECT_LE(f[1].size(), kMaxBodyBytes);
}

// ---- Rejected bodies ------------------------------------------------------------------------

TEST(Protocol, RejectsGarbageBodies) {
  const Frames f = RunConfig(sampleConfig()).encode();
  const Bytes garbage(64, 0xFF);
  expectRejected(f[0], garbage, DecodeErrc::MalformedBody, "does not parse as a RunConfig");
  // A length-delimited field that claims more bytes than there are.
  Bytes lying;
  putVarint(lying, (4 << 3) | 2);
  putVarint(lying, 1000);
  lying.push_back('r');
  const auto e = expectRejected(f[0], lying, DecodeErrc::MalformedBody, "RunConfig");
  ASSERT_TRUE(e.header.has_value());
  EXPECT_EQ(e.header->type, MsgType::RunConfig);
  EXPECT_EQ(e.header->epoch, 7u);
}

TEST(Protocol, RejectsOversizedBodies) {
  const Frames f = Log{LogLevel::Info, "x"}.encode();
  const Bytes huge(kMaxBodyBytes + 1, 0);
  expectRejected(f[0], huge, DecodeErrc::BodyTooLarge, "exceeds the limit");
}

TEST(Protocol, EveryPrefixOfAValidBodyDecodesOrIsRefused) {
  size_t refused = 0;
  size_t total = 0;
  for (const Message& m : sampleMessages()) {
    const Frames f = encode(m);
    for (size_t len = 0; len <= f[1].size(); ++len) {
      const ByteView prefix(f[1].data(), len);
      auto r = decode(f[0], prefix);
      ++total;
      if (!r) {
        ++refused;
        EXPECT_FALSE(r.error().reason.empty());
        EXPECT_TRUE(r.error().code == DecodeErrc::MalformedBody ||
                    r.error().code == DecodeErrc::InvalidField)
            << r.error().message();
      } else {
        EXPECT_EQ(r->type(), typeOf(m));
        EXPECT_FALSE(validate(r->message));
      }
    }
  }
  // Most prefixes cut a field or drop a required one (an unspecified enum, an empty name).
  EXPECT_GT(refused, total / 2);
  const Frames full = encode(sampleConfig());
  EXPECT_FALSE(decode(full[0], ByteView(full[1].data(), full[1].size() - 1)));
}

TEST(Protocol, RejectsOutOfRangeHello) {
  const Hello ok = std::get<Hello>(sampleMessages()[0]);
  auto check = [&](auto append, std::string_view part) {
    const Frames f = withAppended(ok, append);
    expectRejected(f[0], f[1], DecodeErrc::InvalidField, part);
  };
  check([](Bytes& b) { putBytes(b, 1, ""); }, "Hello: name is empty");
  check([](Bytes& b) { putBytes(b, 1, std::string(kMaxNameBytes + 1, 'a')); },
        "name is 256 bytes, more than 255");
  check([](Bytes& b) { putBytes(b, 1, "bad\xC3("); }, "not valid UTF-8");
  check([](Bytes& b) { putBytes(b, 2, "bad\xED\xA0\x80"); }, "host name");  // a surrogate
  check([](Bytes& b) { putBytes(b, 2, "two\nlines"); }, "control character");
  check([](Bytes& b) { putSigned(b, 3, 0); }, "pid 0 is not positive");
  check([](Bytes& b) { putBytes(b, 4, "c p u"); }, "backend");
  check([](Bytes& b) { putSigned(b, 5, -2); }, "device index -2");
  check([](Bytes& b) { putSigned(b, 5, kMaxDeviceIndex + 1); }, "device index 1024");
  check([](Bytes& b) { putField(b, 6, 70000); }, "protocol version 70000");
  check([](Bytes& b) { putField(b, 6, 0); }, "protocol version 0");
  check([](Bytes& b) { putSigned(b, 12, -2); }, "launch rank -2");
  check([](Bytes& b) { putSigned(b, 12, kMaxRanks); }, "launch rank 64");
  check([](Bytes& b) { putSigned(b, 13, kMaxRanks); }, "launch local rank 64");
}

TEST(Protocol, RejectsOutOfRangeWelcomeAndClockMessages) {
  const Welcome w{3, 4, 250, 4};
  auto welcome = [&](auto append, std::string_view part) {
    const Frames f = withAppended(w, append);
    expectRejected(f[0], f[1], DecodeErrc::InvalidField, part);
  };
  welcome([](Bytes& b) { putSigned(b, 1, 64); }, "rank 64 is not a rank of a world of 4");
  welcome([](Bytes& b) { putSigned(b, 1, -1); }, "rank -1");
  welcome([](Bytes& b) { putSigned(b, 2, 65); }, "world size 65 is outside 1..64");
  welcome([](Bytes& b) { putSigned(b, 2, 0); }, "world size 0");
  welcome([](Bytes& b) { putField(b, 3, 0); }, "heartbeat interval (ms) 0");
  welcome([](Bytes& b) { putField(b, 4, 101); }, "heartbeat liveness 101");

  const Frames ping = withAppended(Ping{1, 5}, [](Bytes& b) { putSigned(b, 2, -5); });
  expectRejected(ping[0], ping[1], DecodeErrc::InvalidField, "t0 -5 is negative");
  const Frames pong = withAppended(Pong{1, 5, 100, 200}, [](Bytes& b) { putSigned(b, 4, 99); });
  expectRejected(pong[0], pong[1], DecodeErrc::InvalidField, "t2 99 precedes t1 100");

  auto heartbeat = [&](auto append, std::string_view part) {
    const Frames f = withAppended(Heartbeat{}, append);
    expectRejected(f[0], f[1], DecodeErrc::InvalidField, part);
  };
  heartbeat([](Bytes& b) { putField(b, 5, 7); }, "unknown run phase 7");
  heartbeat([](Bytes& b) { putField(b, 7, 3); }, "unknown wait kind 3");
  heartbeat([](Bytes& b) { putSigned(b, 8, 64); }, "waited-for rank 64 outside -1..63");
  heartbeat([](Bytes& b) { putSigned(b, 8, -2); }, "waited-for rank -2");
}

TEST(Protocol, RejectsOutOfRangeRunConfig) {
  const RunConfig ok = sampleConfig();
  auto check = [&](auto append, std::string_view part) {
    const Frames f = withAppended(ok, append);
    expectRejected(f[0], f[1], DecodeErrc::InvalidField, part);
  };
  check([](Bytes& b) { putField(b, 2, 8); }, "epoch 8 differs from the header's epoch 7");
  check([](Bytes& b) { putSigned(b, 3, 65); }, "world size 65");
  check([](Bytes& b) { putBytes(b, 4, ""); }, "algorithm is empty");
  check([](Bytes& b) { putField(b, 5, 0); }, "unknown collective 0");
  check([](Bytes& b) { putField(b, 5, 6); }, "unknown collective 6");
  check([](Bytes& b) { putField(b, 6, 99); }, "unknown data type 99");
  check([](Bytes& b) { putField(b, 7, 6); }, "unknown reduction operator 6");
  check([](Bytes& b) { putField(b, 8, uint64_t{1} << 62); }, "overflows 64-bit byte counts");
  check([](Bytes& b) { putField(b, 9, 0); }, "slice bytes is 0");
  check([](Bytes& b) { putSigned(b, 10, 4); }, "root 4 is not a rank of a world of 4");
  check([](Bytes& b) { putSigned(b, 10, -1); }, "root -1");
  check([](Bytes& b) { putField(b, 11, 5); }, "ranks per host 5 is outside 1..4");
  check([](Bytes& b) { putField(b, 36, 1); }, "knomial radix 1 is outside 2..64");
  check([](Bytes& b) { putField(b, 36, 65); }, "knomial radix 65 is outside 2..64");
  check([](Bytes& b) { putField(b, 12, 0); }, "inflight 0");
  check([](Bytes& b) { putField(b, 14, kMaxIterations + 1); }, "warmup 1000001");
  check([](Bytes& b) { putField(b, 15, 0); }, "iterations 0 is outside 1..1000000");
  check([](Bytes& b) { putField(b, 16, kMaxIterations + 1); },
        "checked iterations 1000001 is outside 0..1000000");
  check([](Bytes& b) { putField(b, 17, 4); }, "unknown telemetry level 4");
  // Random data has no expected result: a RunConfig must check none of it (sampleConfig: 1).
  check([](Bytes& b) { putField(b, 31, 1); },
        "1 checked iterations of random data, which has no expected result");
  check([](Bytes& b) { putSigned(b, 20, 0); }, "ring order has 5 ranks for a world of 4");
  check(
      [](Bytes& b) {
        for (int i = 0; i < kMaxRanks + 1; ++i) putSigned(b, 20, 0);
      },
      "69 ranks listed, more than 64");

  // Ring-order contents need whole lists: a one-rank config grown to two ranks with appended
  // fields.
  const Frames base = sampleConfig(1).encode();
  auto grown = [&](int32_t ring1, std::string_view part) {
    Bytes body = base[1];
    putSigned(body, 3, 2);  // world size 2
    putSigned(body, 20, ring1);
    expectRejected(base[0], body, DecodeErrc::InvalidField, part);
  };
  grown(0, "ring order names rank 0 twice");
  grown(2, "ring order names rank 2 outside a world of 2");
}

// Removed fields (reserved in arl.proto) that a peer still sends are skipped, not refused:
// Hello's data endpoint (7), RunConfig's one-phase endpoints (19) and link shaping (21, 22).
TEST(Protocol, SkipsRemovedFields) {
  const RunConfig c = sampleConfig(2);
  const Frames f = withAppended(c, [](Bytes& b) {
    putBytes(b, 19, "tcp://no port");
    putField(b, 21, 99'999'999);
    putField(b, 22, 5);
  });
  const auto back = RunConfig::decode(f[0], f[1]);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, c);
  const Hello h{"w", "h", 1, "cpu", -1, kProtocolVersion};
  const Frames hf = withAppended(h, [](Bytes& b) { putBytes(b, 7, "not an endpoint"); });
  const auto hb = Hello::decode(hf[0], hf[1]);
  ASSERT_TRUE(hb) << hb.error().message();
  EXPECT_EQ(*hb, h);
}

// Protocol 13: the data-plane keys (docs/security.md) travel and are checked.
TEST(Protocol, HelloAndRunConfigCarryDataPlaneKeys) {
  Hello h{"w", "h", 1, "cpu", -1, kProtocolVersion};
  h.dataKey = makeCurveKeyPair().publicKey;
  const Frames f = h.encode();
  const auto back = Hello::decode(f[0], f[1]);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(back->dataKey, h.dataKey);
  const Frames bad = withAppended(h, [](Bytes& b) { putBytes(b, 9, "not a key"); });
  expectRejected(bad[0], bad[1], DecodeErrc::InvalidField, "data key is not a Z85 CURVE key");
}

TEST(Protocol, RejectsOutOfRangeRunMessages) {
  auto rejects = [](const Frames& f, std::string_view part) {
    expectRejected(f[0], f[1], DecodeErrc::InvalidField, part);
  };
  rejects(withAppended(Ready{7, 1, 42, "ipc:///x"}, [](Bytes& b) { putSigned(b, 1, 64); }),
          "Ready: rank 64 is outside 0..63");
  rejects(withAppended(IterationResult{7, 1, 0, 1, 0}, [](Bytes& b) { putSigned(b, 1, -1); }),
          "IterationResult: rank -1");
  rejects(withAppended(RunDone{7, 1, 0, 0}, [](Bytes& b) { putSigned(b, 1, 100); }),
          "RunDone: rank 100");
  const RunFailed failed{7, 2, 1, 5, 3, "x"};
  rejects(withAppended(failed, [](Bytes& b) { putSigned(b, 2, 64); }), "peer 64");
  rejects(withAppended(failed, [](Bytes& b) { putSigned(b, 2, -2); }), "peer -2");
  rejects(withAppended(failed, [](Bytes& b) { putSigned(b, 3, -2); }), "step -2 is below -1");
  rejects(withAppended(failed, [](Bytes& b) { putSigned(b, 4, -3); }), "iteration -3");
  // The first iteration checked is the last timed one: the check's further ones are 2, 3, ...
  rejects(withAppended(failed,
                       [](Bytes& b) {
                         putField(b, 6, 1);
                         putField(b, 7, 3);
                       }),
          "checking iteration 1 outside 2..1000000");
  rejects(withAppended(failed,
                       [](Bytes& b) {
                         putField(b, 6, 4);
                         putField(b, 7, 3);
                       }),
          "checking iteration 4 of 3");
  rejects(withAppended(Heartbeat{}, [](Bytes& b) { putField(b, 11, 1); }),
          "checking iteration 1 outside 2..1000000");
  rejects(withAppended(failed, [](Bytes& b) { putBytes(b, 5, "\xFF"); }),
          "reason \"\\xff\" is not valid UTF-8");
  rejects(
      withAppended(failed, [](Bytes& b) { putBytes(b, 5, std::string(kMaxTextBytes + 1, 'x')); }),
      "reason is 4097 bytes, more than 4096");
  rejects(withAppended(Abort{7, 1, "x"}, [](Bytes& b) { putBytes(b, 2, "\xC0\x80"); }),
          "Abort: reason");  // an overlong NUL
  rejects(withAppended(Log{}, [](Bytes& b) { putField(b, 1, 0); }), "unknown log level 0");
  rejects(withAppended(Log{}, [](Bytes& b) { putField(b, 1, 5); }), "unknown log level 5");
  rejects(withAppended(Shutdown{}, [](Bytes& b) { putBytes(b, 1, "\xF4\x90\x80\x80"); }),
          "Shutdown: reason");  // above U+10FFFF

  // Run-scoped messages must carry a run epoch.
  for (const Message& m : sampleMessages()) {
    if (!isRunScoped(typeOf(m))) continue;
    Frames f = encode(m);
    std::fill(f[0].begin() + 8, f[0].end(), 0);
    expectRejected(f[0], f[1], DecodeErrc::InvalidField, "epoch 0 on a run-scoped message");
  }
}

// An IterationResult carries consecutive iterations: the first's time, then the others'.
TEST(Protocol, IterationResultsCarryConsecutiveIterations) {
  IterationResult r{7, 2, 40, 1'000, 3};
  r.moreTimesNs = {2'000, 3'000, kU64Max};
  expectRoundTrip(r);
  EXPECT_EQ(r.count(), 4u);
  EXPECT_EQ(r.timeOf(0), 1'000u);
  EXPECT_EQ(r.timeOf(3), kU64Max);
  // The most one may carry, ending at the last iteration number.
  IterationResult full{1, 0, 0xFFFFFFFF - (kMaxIterationsPerResult - 1), 5, 0};
  full.moreTimesNs.assign(kMaxIterationsPerResult - 1, 6);
  expectRoundTrip(full);

  // One more is refused, by the encoder and by the decoder.
  IterationResult over = r;
  over.moreTimesNs.assign(kMaxIterationsPerResult, 1);
  EXPECT_THROW((void)over.encode(), EnforceError);
  const auto packed = [](size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s.push_back(1);  // varint 1
    return s;
  };
  const Frames tooMany = withAppended(IterationResult{7, 1, 0, 1, 0}, [&](Bytes& b) {
    putBytes(b, 5, packed(kMaxIterationsPerResult));
  });
  expectRejected(tooMany[0], tooMany[1], DecodeErrc::InvalidField,
                 "4097 iterations exceed the maximum of 4096 per result");
  const Frames pastEnd = withAppended(IterationResult{7, 1, 0xFFFFFFFF, 1, 0},
                                      [&](Bytes& b) { putBytes(b, 5, packed(1)); });
  expectRejected(pastEnd[0], pastEnd[1], DecodeErrc::InvalidField,
                 "go past the last iteration number");
}

// Packed records of `n` sample events, for bodies built by hand.
std::string sampleRecords(size_t n) {
  std::string out(n * kTelemetryRecordBytes, '\0');
  for (size_t i = 0; i < n; ++i) {
    packTelemetryRecord(sampleEvent(static_cast<int>(i), 2, 42),
                        reinterpret_cast<uint8_t*>(out.data()) + i * kTelemetryRecordBytes);
  }
  return out;
}

TEST(Protocol, RejectsBadTelemetryBatches) {
  auto rejects = [](const Frames& f, std::string_view part) {
    expectRejected(f[0], f[1], DecodeErrc::InvalidField, part);
  };
  // An empty batch whose records (field 17) are replaced: one record with `kind`, `phase`
  // and `peer` as the caller says (byte offsets 46, 47, 44 of the layout).
  const TelemetryBatch empty = sampleBatch(0);
  auto withRecord = [&](uint8_t kind, uint8_t phase, int16_t peer) {
    std::string r = sampleRecords(1);
    r[46] = static_cast<char>(kind);
    r[47] = static_cast<char>(phase);
    r[44] = static_cast<char>(peer & 0xFF);
    r[45] = static_cast<char>((peer >> 8) & 0xFF);
    return withAppended(empty, [&](Bytes& b) { putBytes(b, 17, r); });
  };
  {
    const Frames good = withRecord(5, 4, 63);
    auto r = decode(good[0], good[1]);
    ASSERT_TRUE(r) << r.error().message();
    const auto& batch = std::get<TelemetryBatch>(r->message);
    ASSERT_EQ(batch.events.size(), 1u);
    EXPECT_EQ(batch.events[0].rank, empty.rank);
    EXPECT_EQ(batch.events[0].runId, empty.runId);
    EXPECT_EQ(batch.events[0].peer, 63);
    EXPECT_EQ(batch.events[0].kind, EventKind::IterationEnd);
  }
  rejects(withRecord(18, 0, 1), "telemetry record 0: unknown event kind 18");
  rejects(withRecord(0, 5, 1), "telemetry record 0: unknown phase 5");
  rejects(withRecord(0, 0, 64), "telemetry record 0: peer 64");
  rejects(withRecord(0, 0, -2), "telemetry record 0: peer -2");
  // Truncated: a record cut short, and records whose size says nothing of the layout.
  rejects(withAppended(empty, [](Bytes& b) { putBytes(b, 17, sampleRecords(3).substr(0, 143)); }),
          "143 bytes, not a whole number of 48-byte records (truncated?)");
  rejects(withAppended(sampleBatch(2), [](Bytes& b) { putField(b, 15, 5); }),
          "layout version 5 is not supported");
  rejects(withAppended(sampleBatch(2), [](Bytes& b) { putField(b, 16, 32); }),
          "records of 32 bytes, expected 48");
  rejects(withAppended(sampleBatch(2), [](Bytes& b) { putField(b, 16, 0); }),
          "records of 0 bytes, expected 48");
  // Garbage where the records belong.
  rejects(withAppended(empty, [](Bytes& b) { putBytes(b, 17, std::string(96, '\xFF')); }),
          "telemetry record 0: unknown event kind 255");
  rejects(withAppended(empty, [](Bytes& b) { putSigned(b, 1, 64); }), "TelemetryBatch: rank 64");
  // One event more than a batch may hold.
  rejects(
      withAppended(empty, [](Bytes& b) { putBytes(b, 17, sampleRecords(kMaxEventsPerBatch + 1)); }),
      std::to_string(kMaxEventsPerBatch + 1) + " events exceed the maximum of " +
          std::to_string(kMaxEventsPerBatch) + " per batch");
}

// The torus (version 14): its dimensions round-trip, and dimensions that do not hold the world
// are refused naming it.
TEST(Protocol, TorusDimensionsRoundTripAndMustHoldTheWorld) {
  RunConfig c = sampleConfig(4);
  c.torusDims = {2, 2};
  expectRoundTrip(c);
  const auto rejects = [](const Frames& f, std::string_view part) {
    expectRejected(f[0], f[1], DecodeErrc::InvalidField, part);
  };
  rejects(withAppended(sampleConfig(4),
                       [](Bytes& b) {
                         putField(b, 41, 2);
                         putField(b, 41, 4);
                       }),
          "the torus's dimensions do not hold the world of 4");
  rejects(withAppended(sampleConfig(4), [](Bytes& b) { putField(b, 41, 0); }),
          "a torus dimension of 0 in a world of 4");
}

// knomial's radix (version 14, field 36) travels as set.
TEST(Protocol, RadixRoundTrips) {
  for (uint32_t k : {2u, 3u, 7u, 64u}) {
    RunConfig c = sampleConfig(8);
    c.radix = k;
    expectRoundTrip(c);
    const Envelope env = mustDecode(c.encode());
    const auto* got = std::get_if<RunConfig>(&env.message);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got->radix, k);
  }
}

// ring's window (version 15, field 42) travels as set; 0 (a config without one) is refused.
TEST(Protocol, WindowRoundTripsAndIsChecked) {
  for (uint32_t w : {1u, 2u, 8u, 1024u}) {
    RunConfig c = sampleConfig(4);
    c.window = w;
    expectRoundTrip(c);
    const Envelope env = mustDecode(c.encode());
    const auto* got = std::get_if<RunConfig>(&env.message);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got->window, w);
  }
  for (uint64_t w : {uint64_t{0}, uint64_t{1025}}) {
    const Frames f = withAppended(sampleConfig(4), [&](Bytes& b) { putField(b, 42, w); });
    expectRejected(f[0], f[1], DecodeErrc::InvalidField, "window");
  }
}

// Link shaping (version 5): every field round-trips, and a shaping the world cannot have is
// refused naming it.
TEST(Protocol, ShapingRoundTripsAndIsChecked) {
  RunConfig c = sampleConfig(4);
  c.shaping.portBytesPerSecond = 200e6;
  c.shaping.addedLatencySeconds = 50e-6;
  c.shaping.rankPortBytesPerSecond[3] = 50e6;
  c.shaping.linkBytesPerSecond[{1, 2}] = 25e6;
  c.shaping.linkBytesPerSecond[{2, 1}] = 75e6;
  c.shaping.linkLatencySeconds[{0, 3}] = 4e-6;  // version 13
  expectRoundTrip(c);
  const auto link = [](int from, int to) {
    Bytes nested;
    putSigned(nested, 1, from);
    putSigned(nested, 2, to);
    return std::string(nested.begin(), nested.end());
  };
  const auto rejects = [](const Frames& f, std::string_view part) {
    expectRejected(f[0], f[1], DecodeErrc::InvalidField, part);
  };
  rejects(withAppended(sampleConfig(4), [&](Bytes& b) { putBytes(b, 29, link(2, 2)); }),
          "link shaping: slow link 2-2: a link joins two different ranks");
  rejects(withAppended(sampleConfig(4), [&](Bytes& b) { putBytes(b, 29, link(1, 9)); }),
          "link shaping: slow link 1-9: rank 9 is out of range for 4 ranks");
  rejects(withAppended(sampleConfig(4),
                       [&](Bytes& b) {
                         putBytes(b, 29, link(1, 2));
                         putBytes(b, 29, link(1, 2));
                       }),
          "slow link 1-2 listed twice");
  rejects(withAppended(sampleConfig(4), [&](Bytes& b) { putBytes(b, 35, link(3, 3)); }),
          "link shaping: link latency 3-3: a link joins two different ranks");
}

// The data-plane setup: RunConfig names the hosts, each Ready reports its rank's endpoint,
// Start carries them all.
TEST(Protocol, DataPlaneSetupRoundTripsAndIsChecked) {
  RunConfig c = sampleConfig(4);
  c.hosts = {"node01", "node01",
             "n\xC3\xB8"
             "de02",
             std::string(kMaxNameBytes, 'h')};
  expectRoundTrip(c);
  c.dataPlane = DataPlaneKind::Zmq;
  expectRoundTrip(c);
  c.hosts.assign(4, "node01");
  c.dataPlane = DataPlaneKind::Shm;
  expectRoundTrip(c);
  c.dataPlane = DataPlaneKind::Tcp;  // protocol 14
  expectRoundTrip(c);
  expectRoundTrip(Ready{7, 3, 42, "tcp://10.0.0.7:40001", -1'500'000});
  expectRoundTrip(Ready{7, 3, 42, "ipc://" + std::string(kMaxEndpointBytes - 6, 'p'), kI64Min});
  expectRoundTrip(Ready{7, 3, 42, "tcp://[::1]:*", kI64Max});
  Start s{7, 42, {}};
  for (int r = 0; r < kMaxRanks; ++r) s.endpoints.push_back("ipc:///tmp/r" + std::to_string(r));
  expectRoundTrip(s);

  auto rejects = [](const Frames& f, std::string_view part) {
    expectRejected(f[0], f[1], DecodeErrc::InvalidField, part);
  };
  rejects(withAppended(sampleConfig(4), [](Bytes& b) { putBytes(b, 23, "node9"); }),
          "1 host names for a world of 4");
  // Field 24, the data plane: 3 (shm) needs one host; values past the last are unknown.
  rejects(withAppended(sampleConfig(2),
                       [](Bytes& b) {
                         putBytes(b, 23, "node1");
                         putBytes(b, 23, "node2");
                         putField(b, 24, 3);
                       }),
          "the shm data plane needs every rank on one host");
  rejects(withAppended(sampleConfig(1), [](Bytes& b) { putField(b, 24, 9); }),
          "unknown data plane 9");
  rejects(withAppended(sampleConfig(1), [](Bytes& b) { putBytes(b, 23, "a\tb"); }),
          "host of rank 0");
  rejects(withAppended(sampleConfig(1), [](Bytes& b) { putBytes(b, 23, ""); }),
          "host of rank 0 is empty");
  // Appending to a string field replaces it (protobuf's last-one-wins).
  rejects(withAppended(Ready{7, 3, 42, "ipc:///x"}, [](Bytes& b) { putBytes(b, 3, "ipc://"); }),
          "Ready: data endpoint \"ipc://\" is not an endpoint");
  rejects(withAppended(Ready{7, 3, 42, "ipc:///x"}, [](Bytes& b) { putBytes(b, 3, ""); }),
          "Ready: data endpoint \"\" is not an endpoint");
  const Start one{7, 42, {"ipc:///ok"}};
  auto startWith = [&](std::string_view ep1, std::string_view part) {
    rejects(withAppended(one, [&](Bytes& b) { putBytes(b, 2, ep1); }), part);
  };
  startWith("tcp://no port", "Start: endpoint of rank 1");
  startWith("", "endpoint of rank 1 \"\" is not an endpoint");
  startWith("ipc://" + std::string(kMaxEndpointBytes, 'x'), "endpoint of rank 1");
  // A Start whose body has no fields at all lists no endpoints.
  const Frames start = Start{7, 42, {"ipc:///x"}}.encode();
  expectRejected(start[0], Bytes{}, DecodeErrc::InvalidField,
                 "0 data-plane endpoints, outside 1..64");
  rejects(withAppended(s, [](Bytes& b) { putBytes(b, 2, "ipc:///tmp/one-too-many"); }),
          "65 endpoints listed, more than 64");
}

// CUDA IPC (version 7): RunConfig switches it, each Ready names its rank's device and the
// devices it can map, Start carries them all.
TEST(Protocol, PeerDevicesRoundTripAndAreChecked) {
  RunConfig c = sampleConfig(2);
  c.cudaIpc = false;
  expectRoundTrip(c);
  c.cudaIpc = true;
  expectRoundTrip(c);
  Ready r{7, 1, 42, "shm://arl-1", 0};
  r.device = {"GPU-8f6c0a2e-0d5b-11ee-be56-0242ac120002",
              {"GPU-8f6c0a2e-0d5b-11ee-be56-0242ac120002", "GPU-1"}};
  expectRoundTrip(r);
  expectRoundTrip(Ready{7, 1, 42, "shm://arl-1", 0, {}});  // no device memory to share
  Start s{7, 42, {"shm://a", "shm://b"}};
  s.devices = {r.device, PeerDeviceInfo{}};
  expectRoundTrip(s);

  auto rejects = [](const Frames& f, std::string_view part) {
    expectRejected(f[0], f[1], DecodeErrc::InvalidField, part);
  };
  const auto device = [](std::string_view uuid, std::string_view reach) {
    Bytes d;
    if (!uuid.empty()) putBytes(d, 1, uuid);
    if (!reach.empty()) putBytes(d, 2, reach);
    return std::string(d.begin(), d.end());
  };
  rejects(withAppended(Ready{7, 1, 42, "shm://a"},
                       [&](Bytes& b) { putBytes(b, 5, device("GPU 0", "")); }),
          "Ready: device \"GPU 0\" is not printable ASCII without spaces");
  rejects(withAppended(Ready{7, 1, 42, "shm://a"},
                       [&](Bytes& b) { putBytes(b, 5, device("", "GPU-0")); }),
          "device: 1 devices it can map, but none of its own");
  rejects(withAppended(Ready{7, 1, 42, "shm://a"},
                       [&](Bytes& b) {
                         putBytes(b, 5, device("GPU-0", ""));
                         putBytes(b, 5, device("", "a b"));
                       }),
          "device reach \"a b\"");
  // One device per endpoint, or none.
  rejects(withAppended(Start{7, 42, {"shm://a", "shm://b"}},
                       [&](Bytes& b) { putBytes(b, 3, device("GPU-0", "GPU-0")); }),
          "1 devices for 2 endpoints");
  rejects(withAppended(s, [&](Bytes& b) { putBytes(b, 2, "shm://c"); }),
          "2 devices for 3 endpoints");
}

TEST(Protocol, TypedDecodeRefusesOtherTypes) {
  const Frames f = Welcome{0, 2, 250, 4}.encode();
  auto r = Hello::decode(f[0], f[1]);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, DecodeErrc::UnexpectedType);
  EXPECT_EQ(r.error().reason, "expected Hello, got Welcome");
  EXPECT_EQ(r.error().message(), "unexpected message type: expected Hello, got Welcome");
  EXPECT_THROW((void)r.value(), EnforceError);
  auto ok = Welcome::decode(f[0], f[1]);
  ASSERT_TRUE(ok);
  EXPECT_THROW((void)ok.error(), EnforceError);
}

// ---- Encoding rules -------------------------------------------------------------------------

TEST(Protocol, EncodeRefusesWhatDecodeWouldRefuse) {
  EXPECT_THROW((void)(Welcome{4, 4, 250, 4}.encode()), EnforceError);
  EXPECT_THROW((void)Hello{}.encode(), EnforceError);
  EXPECT_THROW((void)(Start{0, 1, {"ipc:///x"}}.encode()),
               EnforceError);  // run-scoped without an epoch
  RunConfig c = sampleConfig();
  c.ringOrder[0] = c.ringOrder[1];
  EXPECT_THROW((void)c.encode(), EnforceError);
  TelemetryBatch b = sampleBatch(2);
  b.events[1].rank = 3;  // events of another rank in this rank's batch
  EXPECT_THROW((void)b.encode(), EnforceError);
  b = sampleBatch(kMaxEventsPerBatch + 1);
  EXPECT_THROW((void)b.encode(), EnforceError);
  try {
    (void)Welcome{4, 4, 250, 4}.encode();
  } catch (const EnforceError& e) {
    EXPECT_TRUE(contains(e.what(), "Welcome: rank 4 is not a rank of a world of 4")) << e.what();
  }
}

TEST(Protocol, EncodeRepairsFreeText) {
  // Too long, with a multi-byte character straddling the limit and an invalid byte.
  std::string reason = "\xFF" + std::string(kMaxTextBytes - 2, 'x') + "\xE2\x82\xAC";
  const RunFailed f{7, 1, 0, 2, 0, reason};
  const Frames frames = f.encode();
  auto r = RunFailed::decode(frames[0], frames[1]);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->reason.size(), kMaxTextBytes - 1);  // the euro sign no longer fits
  EXPECT_EQ(r->reason[0], '?');
  EXPECT_EQ(r->reason.back(), 'x');

  const Frames log = Log{LogLevel::Error, "bad \xC3 byte"}.encode();
  auto l = Log::decode(log[0], log[1]);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->text, "bad ? byte");
}

// ---- Fuzzing --------------------------------------------------------------------------------

TEST(Protocol, FuzzedFramesNeverCrashAndDecodedMessagesReencode) {
  std::mt19937_64 rng(20240611);
  std::vector<Frames> corpus;
  for (const Message& m : sampleMessages()) corpus.push_back(encode(m));
  corpus.push_back(sampleBatch(3).encode());
  corpus.push_back(sampleConfig(1).encode());

  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  size_t accepted = 0;
  constexpr int kRounds = 20000;
  for (int round = 0; round < kRounds; ++round) {
    Frames f = corpus[pick(corpus.size())];
    const int mutations = 1 + static_cast<int>(pick(4));
    for (int k = 0; k < mutations; ++k) {
      // Mostly the body; sometimes the header, so that header checks are fuzzed too.
      Bytes& target = pick(8) == 0 ? f[0] : f[1];
      switch (pick(6)) {
        case 0:  // flip a bit
          if (!target.empty()) target[pick(target.size())] ^= static_cast<uint8_t>(1 << pick(8));
          break;
        case 1:  // overwrite a byte
          if (!target.empty()) target[pick(target.size())] = static_cast<uint8_t>(rng());
          break;
        case 2:  // truncate
          target.resize(pick(target.size() + 1));
          break;
        case 3:  // insert random bytes
          for (size_t i = 0, n = 1 + pick(8); i < n; ++i) {
            target.insert(target.begin() + static_cast<std::ptrdiff_t>(pick(target.size() + 1)),
                          static_cast<uint8_t>(rng()));
          }
          break;
        case 4:  // append a random varint field, as a hostile encoder would
          putField(target, 1 + static_cast<int>(pick(24)), rng() >> pick(64));
          break;
        case 5:  // splice in bytes from another message's body
        {
          const Bytes& other = corpus[pick(corpus.size())][1];
          if (!other.empty()) {
            const size_t from = pick(other.size());
            const size_t len = pick(other.size() - from + 1);
            target.insert(target.begin() + static_cast<std::ptrdiff_t>(pick(target.size() + 1)),
                          other.begin() + static_cast<std::ptrdiff_t>(from),
                          other.begin() + static_cast<std::ptrdiff_t>(from + len));
          }
          break;
        }
      }
    }
    try {
      auto r = decode(f[0], f[1]);
      if (!r) {
        ASSERT_FALSE(r.error().reason.empty());
        continue;
      }
      ++accepted;
      // Whatever decodes is valid: it re-encodes without complaint and decodes to itself.
      ASSERT_FALSE(validate(r->message)) << *validate(r->message);
      const Frames again = encode(r->message);
      auto r2 = decode(again[0], again[1]);
      ASSERT_TRUE(r2) << r2.error().message();
      ASSERT_TRUE(r2->message == r->message) << describe(r->message);
    } catch (const std::exception& e) {
      FAIL() << "round " << round << ": decode threw " << e.what();
    }
  }
  // The mutations must leave some messages valid, or the re-encode property tests nothing.
  EXPECT_GT(accepted, size_t{kRounds / 20});
  EXPECT_LT(accepted, size_t{kRounds});
}

// ---- Clock alignment ------------------------------------------------------------------------

TEST(Protocol, ClockOffsetFollowsNtp) {
  // The coordinator's clock runs 1.5 ms ahead of the worker's; 40 us each way, 10 us to answer.
  const int64_t trueOffset = 1'500'000;
  const int64_t t0 = 1'000'000'000;             // worker clock
  const int64_t t1 = t0 + 40'000 + trueOffset;  // coordinator clock
  const int64_t t2 = t1 + 10'000;
  const int64_t t3 = t2 - trueOffset + 40'000;  // worker clock
  const ClockSample s = clockSample(t0, t1, t2, t3);
  EXPECT_EQ(s.offsetNs, trueOffset);
  EXPECT_EQ(s.delayNs, 80'000);

  // Asymmetric paths: the error is half the asymmetry, never more than delay / 2.
  const ClockSample a =
      clockSample(t0, t0 + 100'000 + trueOffset, t0 + 100'000 + trueOffset, t0 + 100'000 + 20'000);
  EXPECT_EQ(a.delayNs, 120'000);
  EXPECT_EQ(a.offsetNs, trueOffset + (100'000 - 20'000) / 2);
  EXPECT_LE(std::llabs(a.offsetNs - trueOffset), a.delayNs / 2);

  // A worker clock ahead of the coordinator's gives a negative offset.
  const ClockSample behind = clockSample(5'000'000, 3'000'100, 3'000'100, 5'000'200);
  EXPECT_EQ(behind.offsetNs, -2'000'000);
  EXPECT_EQ(behind.delayNs, 200);

  // Through the messages: the coordinator answers a Ping, the worker reads the Pong.
  const Pong pong = Pong::answering(Ping{4, t0}, t1, t2);
  EXPECT_EQ(pong.seq, 4u);
  EXPECT_EQ(pong.t0Ns, t0);
  EXPECT_EQ(clockSample(pong, t3), s);

  // Extreme inputs are defined (wrapping), not undefined behaviour.
  const ClockSample wild = clockSample(0, kI64Max, kI64Max, 0);
  EXPECT_EQ(wild.offsetNs, kI64Max);
}

TEST(Protocol, BestClockSampleHasTheSmallestDelay) {
  const std::vector<ClockSample> samples = {
      {1000, 90'000}, {1300, 12'000}, {900, 50'000}, {5000, -10}, {1250, 12'001}};
  const auto best = bestClockSample(samples);
  ASSERT_TRUE(best);
  EXPECT_EQ(*best, (ClockSample{1300, 12'000}));
  EXPECT_FALSE(bestClockSample(std::vector<ClockSample>{}));
  EXPECT_FALSE(bestClockSample(std::vector<ClockSample>{{1, -1}}));
}

// One host, one steady clock: every exchange has t0 <= t1 <= t2 <= t3, and a coordinator that
// answers late makes the midpoint wrong by half the lateness. The offset is then 0.
TEST(Protocol, ClockOffsetIsZeroWhenEverySampleAllowsIt) {
  const int64_t t0 = 7'000'000;
  std::vector<ClockSample> samples = {clockSample(t0, t0 + 900'000, t0 + 900'010, t0 + 900'030),
                                      clockSample(t0, t0 + 20, t0 + 25, t0 + 600'000),
                                      clockSample(t0, t0 + 50, t0 + 60, t0 + 100)};
  EXPECT_NE(bestClockSample(samples)->offsetNs, 0);  // the midpoint of the quickest: 5 ns
  EXPECT_EQ(clockOffsetNs(samples), 0);
  // Another machine's clock: no sample allows 0, so the quickest sample's offset stands.
  const int64_t ahead = 3'600'000'000'000;
  samples = {clockSample(t0, t0 + ahead + 40'000, t0 + ahead + 41'000, t0 + 81'000),
             clockSample(t0, t0 + ahead + 100'000, t0 + ahead + 100'000, t0 + 120'000)};
  EXPECT_EQ(clockOffsetNs(samples), ahead);
  // One sample far off its interval's centre but still allowing 0 does not decide alone.
  samples.push_back(clockSample(t0, t0 + 10, t0 + 10, t0 + 30));
  EXPECT_EQ(clockOffsetNs(samples), bestClockSample(samples)->offsetNs);
  EXPECT_FALSE(clockOffsetNs(std::vector<ClockSample>{}));
  EXPECT_FALSE(clockOffsetNs(std::vector<ClockSample>{{1, -1}}));
}

// ---- Helpers --------------------------------------------------------------------------------

TEST(Protocol, EncodeRecordsIsEncodeOfTheSameEvents) {
  const TelemetryBatch full = sampleBatch(100);
  const std::string records = sampleRecords(100);
  const auto* bytes = reinterpret_cast<const uint8_t*>(records.data());
  TelemetryBatch head = full;
  head.events.clear();
  // Whole, and in two pieces as a ring's wrap leaves them, at every record boundary tried.
  EXPECT_EQ(head.encodeRecords({bytes, records.size()}), full.encode());
  for (size_t cut : {size_t{0}, size_t{1}, size_t{37}, size_t{99}, size_t{100}}) {
    const size_t at = cut * kTelemetryRecordBytes;
    EXPECT_EQ(head.encodeRecords({bytes, at}, {bytes + at, records.size() - at}), full.encode())
        << "cut after record " << cut;
  }
  expectRoundTrip(full);

  // What decode would refuse, encodeRecords refuses: a piece cut inside a record, a record
  // out of range, too many records, a head out of range; and events beside records.
  EXPECT_THROW((void)head.encodeRecords({bytes, 47}), EnforceError);
  std::string bad = records;
  bad[46] = 18;  // an unknown kind in record 0
  EXPECT_THROW((void)head.encodeRecords({reinterpret_cast<const uint8_t*>(bad.data()), 48}),
               EnforceError);
  const std::string many = sampleRecords(kMaxEventsPerBatch + 1);
  EXPECT_THROW((void)head.encodeRecords(
                   {reinterpret_cast<const uint8_t*>(many.data()), 48},
                   {reinterpret_cast<const uint8_t*>(many.data()) + 48, many.size() - 48}),
               EnforceError);
  TelemetryBatch badHead = head;
  badHead.rank = kMaxRanks;
  EXPECT_THROW((void)badHead.encodeRecords({bytes, 48}), EnforceError);
  EXPECT_THROW((void)full.encodeRecords({bytes, 48}), EnforceError);
}

TEST(Protocol, NamesDirectionsAndScopes) {
  EXPECT_EQ(typeName(MsgType::Hello), "Hello");
  EXPECT_EQ(typeName(MsgType::TelemetryBatch), "TelemetryBatch");
  EXPECT_EQ(typeName(static_cast<MsgType>(99)), "?");
  for (const Message& m : sampleMessages()) {
    const MsgType t = typeOf(m);
    EXPECT_EQ(typeName(m), typeName(t));
    EXPECT_TRUE(sentByWorker(t) || sentByCoordinator(t)) << typeName(t);
  }
  EXPECT_TRUE(sentByWorker(MsgType::Hello) && !sentByCoordinator(MsgType::Hello));
  EXPECT_TRUE(sentByCoordinator(MsgType::Welcome) && !sentByWorker(MsgType::Welcome));
  EXPECT_TRUE(sentByCoordinator(MsgType::Abort) && !sentByWorker(MsgType::Abort));
  EXPECT_TRUE(sentByWorker(MsgType::RunFailed) && !sentByCoordinator(MsgType::RunFailed));
  EXPECT_TRUE(sentByWorker(MsgType::Heartbeat) && sentByCoordinator(MsgType::Heartbeat));
  EXPECT_TRUE(isRunScoped(MsgType::TelemetryBatch));
  EXPECT_FALSE(isRunScoped(MsgType::Heartbeat));
  EXPECT_FALSE(isRunScoped(MsgType::Hello));
}

TEST(Protocol, FailuresNameRankPeerStepAndReason) {
  const PeerError e(2, 1, 5, "no data from rank 1 for step 5 within 3 s");
  const RunFailed f = RunFailed::from(e, 7, 3);
  EXPECT_EQ(f.rank, 2);
  EXPECT_EQ(f.peer, 1);
  EXPECT_EQ(f.step, 5);
  EXPECT_EQ(f.iteration, 3);
  EXPECT_EQ(f.message(), "rank 2: no data from rank 1 for step 5 within 3 s (iteration 3)");
  const std::string d = describe(f);
  EXPECT_TRUE(contains(d, "RunFailed epoch=7")) << d;
  EXPECT_TRUE(contains(d, "rank 2: no data from rank 1")) << d;
  const RunFailed bare{1, 0, -1, -1, -1, "backend out of memory"};
  EXPECT_EQ(bare.message(), "rank 0: backend out of memory");
  // In one of the check's iterations after the timed ones (-c 3): never an iteration past them.
  const RunFailed checking{7, 2, 1, 5, -1, "no data from rank 1 for step 5 within 3 s", 2, 3};
  EXPECT_EQ(checking.message(),
            "rank 2: no data from rank 1 for step 5 within 3 s (checking iteration 2 of 3)");
  EXPECT_TRUE(contains(describe(sampleConfig()), "ring allreduce float sum count=1048576"));
}

TEST(Protocol, EndpointsAreChecked) {
  EXPECT_TRUE(validEndpoint("tcp://127.0.0.1:5555"));
  EXPECT_TRUE(validEndpoint("tcp://node01.lab:1"));
  EXPECT_TRUE(validEndpoint("tcp://[::1]:65535"));
  EXPECT_TRUE(validEndpoint("ipc:///tmp/arl/rank0"));
  EXPECT_TRUE(validEndpoint("inproc://rank0"));
  EXPECT_TRUE(validEndpoint("shm://arl-dp-1234-r0-0-00c0ffee"));
  EXPECT_FALSE(validEndpoint("shm://"));
  EXPECT_FALSE(validEndpoint("shm://dir/name"));
  EXPECT_FALSE(validEndpoint(""));
  EXPECT_FALSE(validEndpoint("tcp://host"));
  EXPECT_FALSE(validEndpoint("tcp://:5555"));
  EXPECT_FALSE(validEndpoint("tcp://host:123456"));
  EXPECT_FALSE(validEndpoint("tcp://host:12a"));
  EXPECT_FALSE(validEndpoint("ipc://"));
  EXPECT_FALSE(validEndpoint("udp://host:5555"));
  EXPECT_FALSE(validEndpoint("ipc:///tmp/with space"));
  EXPECT_FALSE(validEndpoint("ipc://" + std::string(kMaxEndpointBytes, 'x')));
}

// The data-plane header travels as a raw struct; docs/protocol.md lists these offsets.
TEST(Protocol, ChunkHeaderLayoutMatchesTheDocs) {
  EXPECT_EQ(sizeof(ChunkHeader), 56u);
  EXPECT_EQ(offsetof(ChunkHeader, magic), 0u);
  EXPECT_EQ(offsetof(ChunkHeader, opSignature), 4u);
  EXPECT_EQ(offsetof(ChunkHeader, epoch), 8u);
  EXPECT_EQ(offsetof(ChunkHeader, seq), 16u);
  EXPECT_EQ(offsetof(ChunkHeader, src), 24u);
  EXPECT_EQ(offsetof(ChunkHeader, step), 28u);
  EXPECT_EQ(offsetof(ChunkHeader, chunk), 32u);
  EXPECT_EQ(offsetof(ChunkHeader, slice), 36u);
  EXPECT_EQ(offsetof(ChunkHeader, offset), 40u);
  EXPECT_EQ(offsetof(ChunkHeader, length), 48u);
}

// ---- Training (protocol 10) -------------------------------------------------------------------

RunConfig trainingConfig() {
  RunConfig c = sampleConfig();
  TrainConfig t;
  t.layers = {784, 512, 10};
  t.steps = 7;
  t.batch = 64;
  t.bucketBytes = 1 << 20;
  t.overlap = false;
  t.sync = SyncMode::PsAsync;
  t.optimizer = OptimizerKind::Adam;
  t.lr = 0.001f;
  t.momentum = 0.5f;
  t.seed = 99;
  t.slowComputeRank = 3;
  t.slowComputeFactor = 2.5;
  c.train = t;
  c.warmup = 0;
  c.iterations = 7;
  c.check = 0;
  return c;
}

IterationResult trainingStep() {
  IterationResult r;
  r.epoch = 7;
  r.rank = 2;
  r.iteration = 5;
  r.timeNs = 12345;
  TrainRankStep t;
  t.rank = 2;
  t.step = 5;
  t.loss = 1.25;
  t.stepNs = 12345;
  t.computeNs = 10000;
  t.commNs = 4000;
  t.exposedNs = 2345;
  t.digest = 0xFEDCBA9876543210ull;
  t.staleness = 3;
  t.spread = 0.5;
  t.spans = {{TrainSpan::Kind::Forward, 0, 0, 100},
             {TrainSpan::Kind::Reduce, 1, 50, 4050},
             {TrainSpan::Kind::Pull, 0, 4050, 12345}};
  r.train = t;
  return r;
}

TEST(Protocol, TrainingConfigAndStepRoundTrip) {
  expectRoundTrip(trainingConfig());
  expectRoundTrip(trainingStep());
  EXPECT_FALSE(validate(Message(trainingConfig())));
  EXPECT_FALSE(validate(Message(trainingStep())));
}

// A diverged training step says so: its NaN or infinite loss and spread cross the wire bit for
// bit (a NaN is not == to itself, so the bytes are compared).
TEST(Protocol, ADivergedTrainingStepKeepsItsNaNAndInfinity) {
  IterationResult r = trainingStep();
  r.train->loss = std::numeric_limits<double>::infinity();
  r.train->spread = std::bit_cast<double>(uint64_t{0xffffffffffffff7full});  // a NaN
  EXPECT_FALSE(validate(Message(r)));
  const Frames f = encode(Message(r));
  const auto back = decode(f);
  ASSERT_TRUE(back.ok()) << back.error().message();
  const auto& got = std::get<IterationResult>(back->message);
  ASSERT_TRUE(got.train.has_value());
  EXPECT_EQ(got.train->loss, std::numeric_limits<double>::infinity());
  EXPECT_EQ(std::bit_cast<uint64_t>(got.train->spread), uint64_t{0xffffffffffffff7full});
  EXPECT_EQ(encode(back->message), f);
}

TEST(Protocol, RefusesInconsistentTrainingMessages) {
  RunConfig c = trainingConfig();
  c.iterations = 8;  // one per step, or the coordinator waits for a step no rank runs
  ASSERT_TRUE(validate(Message(c)));
  EXPECT_TRUE(contains(*validate(Message(c)), "7 steps")) << *validate(Message(c));
  c = trainingConfig();
  c.train->batch = 6;  // not a multiple of 4 ranks
  ASSERT_TRUE(validate(Message(c)));
  EXPECT_TRUE(contains(*validate(Message(c)), "--batch 6")) << *validate(Message(c));
  IterationResult r = trainingStep();
  r.train->step = 4;
  ASSERT_TRUE(validate(Message(r)));
  EXPECT_TRUE(contains(*validate(Message(r)), "reported as iteration 5"));
  r = trainingStep();
  r.train->spans[1].endNs = 10;
  ASSERT_TRUE(validate(Message(r)));
  r = trainingStep();
  r.moreTimesNs = {1};
  EXPECT_TRUE(validate(Message(r)));
}

}  // namespace
}  // namespace arl
