// Control-plane codec: plain structs <-> (header frame, protobuf body frame).
//
// Decoding runs in three layers, each of which may refuse with a typed DecodeError:
//   1. the header frame: size, magic, version, type (decodeHeader);
//   2. the body frame: size limit, then protobuf parsing into arl::pb::<Type>;
//   3. conversion into the public struct (enums, narrowing, column lengths) and the
//      semantic rules of check(T) (ranks, counts, strings, permutations).
// Encoding applies the same check(T) with ARL_ENFORCE, so that what we send, we accept.
#include "runtime/protocol.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "arl.pb.h"
#include "exec/telemetry_record.h"
#include "schedule/msccl_import.h"
#include "schedule/schedule.h"
#include "transport/zmq/curve_keys.h"

namespace arl {

namespace {

// ---- Little-endian header bytes ----------------------------------------------------------

void putLe(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

constexpr size_t kMaxVarintBytes = 10;

// A protobuf base-128 varint, appended.
void putVarint(Bytes& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<uint8_t>(v) | 0x80);
    v >>= 7;
  }
  out.push_back(static_cast<uint8_t>(v));
}

uint64_t getLe(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

// ---- Text rules ---------------------------------------------------------------------------

// Length of the well-formed UTF-8 sequence at p (RFC 3629: no overlongs, no surrogates,
// nothing above U+10FFFF), or 0 when the bytes there are not one.
size_t utf8SeqLen(const unsigned char* p, size_t n) {
  auto cont = [&](size_t i) { return i < n && (p[i] & 0xC0) == 0x80; };
  const unsigned char b = p[0];
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return cont(1) ? 2 : 0;
  if (b >= 0xE0 && b <= 0xEF) {
    if (n < 2) return 0;
    const unsigned char lo = b == 0xE0 ? 0xA0 : 0x80;
    const unsigned char hi = b == 0xED ? 0x9F : 0xBF;
    return (p[1] >= lo && p[1] <= hi && cont(2)) ? 3 : 0;
  }
  if (b >= 0xF0 && b <= 0xF4) {
    if (n < 2) return 0;
    const unsigned char lo = b == 0xF0 ? 0x90 : 0x80;
    const unsigned char hi = b == 0xF4 ? 0x8F : 0xBF;
    return (p[1] >= lo && p[1] <= hi && cont(2) && cont(3)) ? 4 : 0;
  }
  return 0;
}

bool validUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    const size_t len = utf8SeqLen(p + i, s.size() - i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

// Free text as it may go on the wire: invalid bytes become '?', and the text is cut at a
// character boundary so that it fits in kMaxTextBytes.
std::string sanitizedText(std::string_view s) {
  std::string out;
  out.reserve(std::min(s.size(), kMaxTextBytes));
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    size_t len = utf8SeqLen(p + i, s.size() - i);
    const bool bad = len == 0;
    if (bad) len = 1;
    if (out.size() + len > kMaxTextBytes) break;
    if (bad) {
      out.push_back('?');
    } else {
      out.append(s.substr(i, len));
    }
    i += len;
  }
  return out;
}

std::string quoted(std::string_view s) {
  constexpr size_t kShown = 40;
  std::string out = "\"";
  for (char c : s.substr(0, kShown)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F) {
      out.push_back(c);
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out.push_back(hex[u >> 4]);
      out.push_back(hex[u & 15]);
    }
  }
  if (s.size() > kShown) out += "...";
  return out + "\"";
}

// A display name (worker, host): 1..kMaxNameBytes of UTF-8 without control characters.
std::optional<std::string> checkName(std::string_view field, std::string_view s) {
  if (s.empty()) return std::string(field) + " is empty";
  if (s.size() > kMaxNameBytes) {
    return std::string(field) + " is " + std::to_string(s.size()) + " bytes, more than " +
           std::to_string(kMaxNameBytes);
  }
  if (!validUtf8(s)) return std::string(field) + " " + quoted(s) + " is not valid UTF-8";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) {
      return std::string(field) + " " + quoted(s) + " contains a control character";
    }
  }
  return std::nullopt;
}

// An identifier (backend, algorithm): 1..kMaxNameBytes of printable ASCII without spaces.
std::optional<std::string> checkIdent(std::string_view field, std::string_view s) {
  if (s.empty()) return std::string(field) + " is empty";
  if (s.size() > kMaxNameBytes) {
    return std::string(field) + " is " + std::to_string(s.size()) + " bytes, more than " +
           std::to_string(kMaxNameBytes);
  }
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7F) {
      return std::string(field) + " " + quoted(s) + " is not printable ASCII without spaces";
    }
  }
  return std::nullopt;
}

std::optional<std::string> checkText(std::string_view field, std::string_view s) {
  if (s.size() > kMaxTextBytes) {
    return std::string(field) + " is " + std::to_string(s.size()) + " bytes, more than " +
           std::to_string(kMaxTextBytes);
  }
  if (!validUtf8(s)) return std::string(field) + " " + quoted(s) + " is not valid UTF-8";
  return std::nullopt;
}

std::optional<std::string> checkEndpoint(std::string_view field, std::string_view s) {
  if (validEndpoint(s)) return std::nullopt;
  return std::string(field) + " " + quoted(s) +
         " is not an endpoint (tcp://HOST:PORT, ipc://PATH, inproc://NAME, shm://NAME, "
         "shm://NAME,tcp://HOST:PORT or nccl://id/TOKEN, at most " +
         std::to_string(kMaxEndpointBytes) + " bytes)";
}

std::optional<std::string> checkRank(std::string_view field, int64_t rank) {
  if (rank >= 0 && rank < kMaxRanks) return std::nullopt;
  return std::string(field) + " " + std::to_string(rank) + " is outside 0.." +
         std::to_string(kMaxRanks - 1);
}

std::optional<std::string> checkPeer(std::string_view field, int64_t peer) {
  if (peer == -1) return std::nullopt;
  return checkRank(field, peer);
}

template <class U>
std::optional<std::string> checkRange(std::string_view field, U v, U lo, U hi) {
  if (v >= lo && v <= hi) return std::nullopt;
  return std::string(field) + " " + std::to_string(v) + " is outside " + std::to_string(lo) + ".." +
         std::to_string(hi);
}

// First failing rule of a list of optional reasons.
std::optional<std::string> firstError(std::initializer_list<std::optional<std::string>> list) {
  for (const auto& e : list) {
    if (e) return e;
  }
  return std::nullopt;
}

// ---- Enum mapping: the wire value is the C++ value plus one (0 = unspecified) --------------

template <class E>
std::optional<E> enumFromWire(int wire, E last) {
  if (wire < 1 || wire > static_cast<int>(last) + 1) return std::nullopt;
  return static_cast<E>(wire - 1);
}
template <class E>
int enumToWire(E e) {
  return static_cast<int>(e) + 1;
}

constexpr Collective kLastCollective = Collective::Broadcast;
constexpr DataType kLastDataType = DataType::Uint8;
constexpr RedOp kLastRedOp = RedOp::Avg;
constexpr TelemetryLevel kLastTelemetryLevel = TelemetryLevel::Chunks;
constexpr DataPlaneKind kLastDataPlane = DataPlaneKind::Tcp;
constexpr LogLevel kLastLogLevel = LogLevel::Error;

// ---- Semantic rules per message (shared by encode and decode) ------------------------------

std::optional<std::string> check(const Hello& m) {
  return firstError(
      {checkName("name", m.name), checkName("host name", m.hostName),
       m.pid > 0 ? std::nullopt
                 : std::optional<std::string>("pid " + std::to_string(m.pid) + " is not positive"),
       checkIdent("backend", m.backend),
       m.deviceIndex == -1 ? std::nullopt
                           : checkRange<int32_t>("device index", m.deviceIndex, 0, kMaxDeviceIndex),
       m.protocolVersion >= 1 ? std::nullopt
                              : std::optional<std::string>("protocol version 0 is not a version"),
       m.dataKey.empty() || isZ85Key(m.dataKey)
           ? std::nullopt
           : std::optional<std::string>("data key is not a Z85 CURVE key"),
       checkRange<int32_t>("launch rank", m.launchRank, -1, kMaxRanks - 1),
       checkRange<int32_t>("launch local rank", m.launchLocalRank, -1, kMaxRanks - 1)});
}

std::optional<std::string> check(const Welcome& m) {
  if (auto e = checkRange<int32_t>("world size", m.worldSize, 1, kMaxRanks)) return e;
  if (m.rank < 0 || m.rank >= m.worldSize) {
    return "rank " + std::to_string(m.rank) + " is not a rank of a world of " +
           std::to_string(m.worldSize);
  }
  return firstError(
      {checkRange<uint32_t>("heartbeat interval (ms)", m.heartbeatIntervalMs, 1,
                            kMaxHeartbeatIntervalMs),
       checkRange<uint32_t>("heartbeat liveness", m.heartbeatLiveness, 1, kMaxHeartbeatLiveness)});
}

std::optional<std::string> checkTimestamp(std::string_view field, int64_t t) {
  if (t >= 0) return std::nullopt;
  return std::string(field) + " " + std::to_string(t) + " is negative";
}

std::optional<std::string> check(const Ping& m) { return checkTimestamp("t0", m.t0Ns); }

std::optional<std::string> check(const Pong& m) {
  if (auto e = firstError({checkTimestamp("t0", m.t0Ns), checkTimestamp("t1", m.t1Ns),
                           checkTimestamp("t2", m.t2Ns)})) {
    return e;
  }
  if (m.t2Ns < m.t1Ns) {
    return "t2 " + std::to_string(m.t2Ns) + " precedes t1 " + std::to_string(m.t1Ns) +
           " (the coordinator answered before it received)";
  }
  return std::nullopt;
}

// A check's iteration after the timed ones (IterationPlace): 0 (none) or 2..kMaxIterations.
std::optional<std::string> checkCheckIteration(uint32_t k) {
  if (k == 0 || (k >= 2 && k <= kMaxIterations)) return std::nullopt;
  return "checking iteration " + std::to_string(k) + " outside 2.." +
         std::to_string(kMaxIterations) + " (0: none)";
}

std::optional<std::string> check(const Heartbeat& m) {
  if (m.waitPeer < -1 || m.waitPeer >= kMaxRanks) {
    return "waited-for rank " + std::to_string(m.waitPeer) + " outside -1.." +
           std::to_string(kMaxRanks - 1);
  }
  return checkCheckIteration(m.checkIteration);
}

std::optional<std::string> checkEpoch(uint64_t epoch) {
  if (epoch >= 1) return std::nullopt;
  return std::string("epoch 0 on a run-scoped message (runs start at epoch 1)");
}

// RunConfig's lists of one entry per rank (hosts, pid namespaces, data-plane keys): their
// sizes, and what the shm data plane needs of them; the torus's dimensions hold the world.
std::optional<std::string> checkPerRank(const RunConfig& m) {
  const auto n = static_cast<uint64_t>(m.worldSize);
  if (!m.hosts.empty() && m.hosts.size() != n) {
    return std::to_string(m.hosts.size()) + " host names for a world of " + std::to_string(n);
  }
  if (!m.pidNamespaces.empty() && m.pidNamespaces.size() != n) {
    return std::to_string(m.pidNamespaces.size()) + " pid namespaces for a world of " +
           std::to_string(n);
  }
  if (!m.torusDims.empty()) {
    uint64_t product = 1;
    for (uint32_t d : m.torusDims) {
      if (d < 1 || d > n) {
        return "a torus dimension of " + std::to_string(d) + " in a world of " + std::to_string(n);
      }
      product *= d;
      if (product > n) break;
    }
    if (product != n) return "the torus's dimensions do not hold the world of " + std::to_string(n);
  }
  if (!m.dataKeys.empty() && m.dataKeys.size() != n) {
    return std::to_string(m.dataKeys.size()) + " data-plane keys for a world of " +
           std::to_string(n);
  }
  for (size_t r = 0; r < m.dataKeys.size(); ++r) {
    if (!isZ85Key(m.dataKeys[r])) {
      return "the data-plane key of rank " + std::to_string(r) + " is not a Z85 CURVE key";
    }
  }
  for (size_t r = 0; r < m.pidNamespaces.size(); ++r) {
    if (m.dataPlane == DataPlaneKind::Shm && m.pidNamespaces[r] != m.pidNamespaces[0]) {
      return "the shm data plane needs every rank in one pid namespace (rank " + std::to_string(r) +
             " is in another than rank 0: a container of its own?)";
    }
  }
  for (size_t r = 0; r < m.hosts.size(); ++r) {
    if (auto e = checkName("host of rank " + std::to_string(r), m.hosts[r])) return e;
    if (m.dataPlane == DataPlaneKind::Shm && m.hosts[r] != m.hosts[0]) {
      return "the shm data plane needs every rank on one host (rank " + std::to_string(r) +
             " is on " + m.hosts[r] + ", rank 0 on " + m.hosts[0] + ")";
    }
  }
  return std::nullopt;
}

std::optional<std::string> check(const RunConfig& m) {
  if (auto e = firstError({checkEpoch(m.epoch),
                           checkRange<int32_t>("world size", m.worldSize, 1, kMaxRanks),
                           checkIdent("algorithm", m.algorithm)})) {
    return e;
  }
  const auto n = static_cast<uint64_t>(m.worldSize);
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(m.count, uint64_t{dtypeSize(m.dtype)}, &bytes) ||
      __builtin_mul_overflow(bytes, n, &bytes)) {
    return "count " + std::to_string(m.count) + " of " + std::string(toString(m.dtype)) + " on " +
           std::to_string(n) + " ranks overflows 64-bit byte counts";
  }
  if (m.sliceBytes == 0) return std::string("slice bytes is 0");
  if (m.root < 0 || m.root >= m.worldSize) {
    return "root " + std::to_string(m.root) + " is not a rank of a world of " +
           std::to_string(m.worldSize);
  }
  if (auto e =
          firstError({checkRange<uint32_t>("ranks per host", m.ranksPerHost, 1,
                                           static_cast<uint32_t>(m.worldSize)),
                      checkRange<uint32_t>("knomial radix", m.radix, 2, kMaxRanks),
                      checkRange<uint32_t>("inflight", m.inflight, 1, kMaxInflight),
                      checkRange<uint32_t>("window", m.window, 1, kMaxInflight),
                      checkRange<uint32_t>("warmup", m.warmup, 0, kMaxIterations),
                      checkRange<uint32_t>("iterations", m.iterations, 1, kMaxIterations),
                      checkRange<uint32_t>("checked iterations", m.check, 0, kMaxIterations)})) {
    return e;
  }
  // RunRequest::checkedIterations() made it 0: a RunConfig that says otherwise was not made so.
  if (m.randomData && m.check > 0) {
    return std::to_string(m.check) +
           " checked iterations of random data, which has no expected result";
  }
  if (!m.scheduleXml.empty() && m.algorithm.rfind("msccl:", 0) != 0) {
    return "an MSCCL file for algorithm " + m.algorithm + ", which is not named msccl:NAME";
  }
  if (m.scheduleXml.size() > kMscclMaxFileBytes) {
    return "an MSCCL file of " + std::to_string(m.scheduleXml.size()) + " bytes, over " +
           std::to_string(kMscclMaxFileBytes);
  }
  if (auto e = checkPerRank(m)) return e;
  try {
    checkShaping(m.shaping, m.worldSize);
  } catch (const ConfigError& e) {
    return std::string("link shaping: ") + e.what();
  }
  if (m.train) {
    try {
      checkTrainConfig(*m.train, m.worldSize);
    } catch (const ConfigError& e) {
      return std::string("training: ") + e.what();
    }
    if (m.iterations != m.train->steps || m.warmup != 0) {
      return "a training run of " + std::to_string(m.train->steps) + " steps has " +
             std::to_string(m.warmup) + " warm-up and " + std::to_string(m.iterations) +
             " timed iterations (expected 0 and one per step)";
    }
  }
  if (m.ringOrder.size() != n) {
    return "ring order has " + std::to_string(m.ringOrder.size()) + " ranks for a world of " +
           std::to_string(n);
  }
  uint64_t seen = 0;
  for (int32_t r : m.ringOrder) {
    if (r < 0 || r >= m.worldSize) {
      return "ring order names rank " + std::to_string(r) + " outside a world of " +
             std::to_string(n);
    }
    if (seen & (uint64_t{1} << r)) {
      return "ring order names rank " + std::to_string(r) + " twice";
    }
    seen |= uint64_t{1} << r;
  }
  return std::nullopt;
}

std::optional<std::string> checkDevice(const std::string& field, const PeerDeviceInfo& d) {
  if (d.id.empty()) {
    if (d.reach.empty()) return std::nullopt;
    return field + ": " + std::to_string(d.reach.size()) +
           " devices it can map, but none of its own";
  }
  if (auto e = checkIdent(field, d.id)) return e;
  if (d.reach.size() > static_cast<size_t>(kMaxRanks)) {
    return field + ": " + std::to_string(d.reach.size()) + " devices it can map, more than " +
           std::to_string(kMaxRanks);
  }
  for (const auto& r : d.reach) {
    if (auto e = checkIdent(field + " reach", r)) return e;
  }
  return std::nullopt;
}

std::optional<std::string> check(const Ready& m) {
  return firstError({checkEpoch(m.epoch), checkRank("rank", m.rank),
                     checkEndpoint("data endpoint", m.dataEndpoint),
                     checkDevice("device", m.device)});
}

std::optional<std::string> check(const Start& m) {
  if (auto e = checkEpoch(m.epoch)) return e;
  if (m.endpoints.empty() || m.endpoints.size() > static_cast<size_t>(kMaxRanks)) {
    return std::to_string(m.endpoints.size()) + " data-plane endpoints, outside 1.." +
           std::to_string(kMaxRanks) + " (one per rank)";
  }
  for (size_t r = 0; r < m.endpoints.size(); ++r) {
    if (auto e = checkEndpoint("endpoint of rank " + std::to_string(r), m.endpoints[r])) return e;
  }
  if (!m.devices.empty() && m.devices.size() != m.endpoints.size()) {
    return std::to_string(m.devices.size()) + " devices for " + std::to_string(m.endpoints.size()) +
           " endpoints";
  }
  for (size_t r = 0; r < m.devices.size(); ++r) {
    if (auto e = checkDevice("device of rank " + std::to_string(r), m.devices[r])) return e;
  }
  return std::nullopt;
}

std::optional<std::string> check(const IterationResult& m) {
  if (auto e = firstError({checkEpoch(m.epoch), checkRank("rank", m.rank)})) return e;
  if (m.count() > kMaxIterationsPerResult) {
    return std::to_string(m.count()) + " iterations exceed the maximum of " +
           std::to_string(kMaxIterationsPerResult) + " per result";
  }
  if (uint64_t{m.iteration} + m.moreTimesNs.size() > std::numeric_limits<uint32_t>::max()) {
    return "iterations " + std::to_string(m.iteration) + ".." +
           std::to_string(uint64_t{m.iteration} + m.moreTimesNs.size()) +
           " go past the last iteration number";
  }
  if (m.train) {
    const TrainRankStep& t = *m.train;
    if (!m.moreTimesNs.empty())
      return std::string("a training step's result carries one iteration");
    if (t.step != m.iteration) {
      return "training step " + std::to_string(t.step) + " reported as iteration " +
             std::to_string(m.iteration);
    }
    if (t.stepNs < 0 || t.computeNs < 0 || t.commNs < 0 || t.exposedNs < 0 || t.hiddenNs < 0)
      return std::string("a training step's time is negative");
    for (const TrainSpan& sp : t.spans)
      if (sp.endNs < sp.startNs) return std::string("a training span ends before it starts");
  }
  return std::nullopt;
}

std::optional<std::string> check(const TelemetryBatch& m) {
  if (auto e = firstError({checkEpoch(m.epoch), checkRank("rank", m.rank)})) return e;
  if (m.events.size() > kMaxEventsPerBatch) {
    return std::to_string(m.events.size()) + " events exceed the maximum of " +
           std::to_string(kMaxEventsPerBatch) + " per batch";
  }
  for (size_t i = 0; i < m.events.size(); ++i) {
    const TelemetryEvent& ev = m.events[i];
    std::optional<std::string> e;
    if (ev.rank != m.rank) {
      e = "rank " + std::to_string(ev.rank) + " in a batch of rank " + std::to_string(m.rank);
    } else if (ev.runId != m.runId) {
      e = "run id " + std::to_string(ev.runId) + " in a batch of run " + std::to_string(m.runId);
    } else {
      e = telemetryEventError(ev);
    }
    if (e) return "event " + std::to_string(i) + ": " + *e;
  }
  return std::nullopt;
}

std::optional<std::string> check(const RunDone& m) {
  return firstError({checkEpoch(m.epoch), checkRank("rank", m.rank)});
}

std::optional<std::string> check(const RunFailed& m) {
  return firstError(
      {checkEpoch(m.epoch), checkRank("rank", m.rank), checkPeer("peer", m.peer),
       m.step >= -1 ? std::nullopt
                    : std::optional<std::string>("step " + std::to_string(m.step) + " is below -1"),
       m.iteration >= -1 ? std::nullopt
                         : std::optional<std::string>("iteration " + std::to_string(m.iteration) +
                                                      " is below -1"),
       checkCheckIteration(m.checkIteration),
       m.checkIteration <= m.checkIterations || m.checkIteration == 0
           ? std::nullopt
           : std::optional<std::string>("checking iteration " + std::to_string(m.checkIteration) +
                                        " of " + std::to_string(m.checkIterations)),
       checkText("reason", m.reason)});
}

std::optional<std::string> check(const Abort& m) {
  return firstError({checkEpoch(m.epoch), checkText("reason", m.reason)});
}

std::optional<std::string> check(const Shutdown& m) { return checkText("reason", m.reason); }

std::optional<std::string> checkStoreValue(const std::string& value) {
  if (value.size() <= kMaxStoreValueBytes) return std::nullopt;
  return "store value of " + std::to_string(value.size()) + " bytes, more than " +
         std::to_string(kMaxStoreValueBytes);
}

std::optional<std::string> check(const StoreSet& m) {
  return firstError({checkEpoch(m.epoch), checkRank("rank", m.rank), checkIdent("key", m.key),
                     checkStoreValue(m.value)});
}

std::optional<std::string> check(const StoreGet& m) {
  return firstError({checkEpoch(m.epoch), checkRank("rank", m.rank), checkIdent("key", m.key)});
}

std::optional<std::string> check(const StoreValue& m) {
  if (auto e = checkEpoch(m.epoch)) return e;
  if (!m.found && !m.value.empty()) return std::string("a value for a key not found");
  return checkStoreValue(m.value);
}

std::optional<std::string> checkCollectiveRecord(const CollectiveRecord& c) {
  const FlightRun& run = c.run;
  if (auto e = firstError({checkIdent("algorithm", run.algorithm),
                           checkRange<int64_t>("ranks", run.nranks, 1, kMaxRanks)})) {
    return e;
  }
  if (c.lastStep < -1 || (c.lastStep >= 0 && static_cast<uint32_t>(c.lastStep) >= run.nsteps)) {
    return "last step " + std::to_string(c.lastStep) + " outside -1.." +
           std::to_string(static_cast<int64_t>(run.nsteps) - 1);
  }
  if (run.nranks < kMaxRanks && (c.waitedOn >> run.nranks) != 0) {
    return "waited on a rank outside a world of " + std::to_string(run.nranks);
  }
  if (c.startNs < 0 || (c.endNs != 0 && c.endNs < c.startNs)) {
    return "ends at " + std::to_string(c.endNs) + " ns, before its start " +
           std::to_string(c.startNs) + " ns";
  }
  if ((c.state == CollectiveState::InFlight) != (c.endNs == 0)) {
    return std::string("state ") + toString(c.state) +
           (c.endNs == 0 ? " without an end" : " with an end");
  }
  return std::nullopt;
}

std::optional<std::string> check(const FlightRecord& m) {
  if (auto e = firstError({checkEpoch(m.epoch), checkRank("rank", m.rank)})) return e;
  if (m.records.size() > kFlightRecords) {
    return std::to_string(m.records.size()) + " records, more than the " +
           std::to_string(kFlightRecords) + " a recorder keeps";
  }
  if (m.recorded < m.records.size()) {
    return std::to_string(m.records.size()) + " records of " + std::to_string(m.recorded) +
           " recorded";
  }
  for (size_t i = 0; i < m.records.size(); ++i) {
    if (i > 0 && m.records[i].seq <= m.records[i - 1].seq) {
      return "record " + std::to_string(i) + " is not after record " + std::to_string(i - 1);
    }
    if (auto e = checkCollectiveRecord(m.records[i]))
      return "record " + std::to_string(i) + ": " + *e;
  }
  return std::nullopt;
}

std::optional<std::string> check(const Log& m) {
  if (m.level > kLastLogLevel) {
    return "unknown log level " + std::to_string(static_cast<int>(m.level));
  }
  return checkText("text", m.text);
}

// Free text is repaired rather than refused when encoding: a failure must still be reported
// when its reason is long or holds bytes from a foreign locale.
void sanitize(RunFailed& m) { m.reason = sanitizedText(m.reason); }
void sanitize(Abort& m) { m.reason = sanitizedText(m.reason); }
void sanitize(Shutdown& m) { m.reason = sanitizedText(m.reason); }
void sanitize(Log& m) { m.text = sanitizedText(m.text); }

template <class T>
concept HasFreeText = requires(T& m) {
  sanitize(m);
};

// ---- Struct <-> protobuf --------------------------------------------------------------------

template <class T>
struct PbOf;
template <>
struct PbOf<Hello> {
  using type = pb::Hello;
};
template <>
struct PbOf<Welcome> {
  using type = pb::Welcome;
};
template <>
struct PbOf<Ping> {
  using type = pb::Ping;
};
template <>
struct PbOf<Pong> {
  using type = pb::Pong;
};
template <>
struct PbOf<Heartbeat> {
  using type = pb::Heartbeat;
};
template <>
struct PbOf<RunConfig> {
  using type = pb::RunConfig;
};
template <>
struct PbOf<Ready> {
  using type = pb::Ready;
};
template <>
struct PbOf<Start> {
  using type = pb::Start;
};
template <>
struct PbOf<IterationResult> {
  using type = pb::IterationResult;
};
template <>
struct PbOf<TelemetryBatch> {
  using type = pb::TelemetryBatch;
};
template <>
struct PbOf<RunDone> {
  using type = pb::RunDone;
};
template <>
struct PbOf<RunFailed> {
  using type = pb::RunFailed;
};
template <>
struct PbOf<Abort> {
  using type = pb::Abort;
};
template <>
struct PbOf<Shutdown> {
  using type = pb::Shutdown;
};
template <>
struct PbOf<Log> {
  using type = pb::Log;
};
template <>
struct PbOf<StoreSet> {
  using type = pb::StoreSet;
};
template <>
struct PbOf<StoreGet> {
  using type = pb::StoreGet;
};
template <>
struct PbOf<StoreValue> {
  using type = pb::StoreValue;
};
template <>
struct PbOf<FlightRecord> {
  using type = pb::FlightRecord;
};

using Reason = std::optional<std::string>;

void toPb(const Hello& m, pb::Hello& p) {
  p.set_name(m.name);
  p.set_host_name(m.hostName);
  p.set_pid(m.pid);
  p.set_backend(m.backend);
  p.set_device_index(m.deviceIndex);
  p.set_protocol_version(m.protocolVersion);
  p.set_pid_namespace(m.pidNamespace);
  p.set_data_key(m.dataKey);
  p.set_launch_rank(m.launchRank);
  p.set_launch_local_rank(m.launchLocalRank);
}
Reason fromPb(const pb::Hello& p, const FrameHeader&, Hello& m) {
  if (p.protocol_version() > std::numeric_limits<uint16_t>::max()) {
    return "protocol version " + std::to_string(p.protocol_version()) + " does not fit 16 bits";
  }
  m.name = p.name();
  m.hostName = p.host_name();
  m.pid = p.pid();
  m.backend = p.backend();
  m.deviceIndex = p.device_index();
  m.protocolVersion = static_cast<uint16_t>(p.protocol_version());
  m.pidNamespace = p.pid_namespace();
  m.dataKey = p.data_key();
  m.launchRank = p.launch_rank();
  m.launchLocalRank = p.launch_local_rank();
  return std::nullopt;
}

void toPb(const Welcome& m, pb::Welcome& p) {
  p.set_rank(m.rank);
  p.set_world_size(m.worldSize);
  p.set_heartbeat_interval_ms(m.heartbeatIntervalMs);
  p.set_heartbeat_liveness(m.heartbeatLiveness);
}
Reason fromPb(const pb::Welcome& p, const FrameHeader&, Welcome& m) {
  m.rank = p.rank();
  m.worldSize = p.world_size();
  m.heartbeatIntervalMs = p.heartbeat_interval_ms();
  m.heartbeatLiveness = p.heartbeat_liveness();
  return std::nullopt;
}

void toPb(const Ping& m, pb::Ping& p) {
  p.set_seq(m.seq);
  p.set_t0_ns(m.t0Ns);
}
Reason fromPb(const pb::Ping& p, const FrameHeader&, Ping& m) {
  m.seq = p.seq();
  m.t0Ns = p.t0_ns();
  return std::nullopt;
}

void toPb(const Pong& m, pb::Pong& p) {
  p.set_seq(m.seq);
  p.set_t0_ns(m.t0Ns);
  p.set_t1_ns(m.t1Ns);
  p.set_t2_ns(m.t2Ns);
}
Reason fromPb(const pb::Pong& p, const FrameHeader&, Pong& m) {
  m.seq = p.seq();
  m.t0Ns = p.t0_ns();
  m.t1Ns = p.t1_ns();
  m.t2Ns = p.t2_ns();
  return std::nullopt;
}

void toPb(const Heartbeat& m, pb::Heartbeat& p) {
  p.set_in_run(m.inRun);
  p.set_iteration(m.iteration);
  p.set_step(m.step);
  p.set_epoch(m.epoch);
  p.set_phase(static_cast<uint32_t>(m.phase));
  p.set_progress(m.progress);
  p.set_wait_kind(static_cast<uint32_t>(m.wait));
  p.set_wait_peer(m.waitPeer);
  p.set_wait_step(m.waitStep);
  p.set_want_report(m.wantReport);
  p.set_check_iteration(m.checkIteration);
}
Reason fromPb(const pb::Heartbeat& p, const FrameHeader&, Heartbeat& m) {
  m.inRun = p.in_run();
  m.iteration = p.iteration();
  m.step = p.step();
  m.epoch = p.epoch();
  if (p.phase() > kMaxRunPhase) return "unknown run phase " + std::to_string(p.phase());
  m.phase = static_cast<RunPhase>(p.phase());
  m.progress = p.progress();
  if (p.wait_kind() > kMaxWaitKind) return "unknown wait kind " + std::to_string(p.wait_kind());
  m.wait = static_cast<WaitKind>(p.wait_kind());
  m.waitPeer = p.wait_peer();
  m.waitStep = p.wait_step();
  m.wantReport = p.want_report();
  m.checkIteration = p.check_iteration();
  return std::nullopt;
}

void trainToPb(const TrainConfig& t, pb::TrainConfig& p) {
  p.mutable_layers()->Assign(t.layers.begin(), t.layers.end());
  p.set_steps(t.steps);
  p.set_batch(t.batch);
  p.set_bucket_bytes(t.bucketBytes);
  p.set_overlap(t.overlap);
  p.set_sync(static_cast<uint32_t>(t.sync));
  p.set_optimizer(static_cast<uint32_t>(t.optimizer));
  p.set_lr(t.lr);
  p.set_momentum(t.momentum);
  p.set_seed(t.seed);
  p.set_slow_compute_rank(t.slowComputeRank);
  p.set_slow_compute_factor(t.slowComputeFactor);
}

Reason trainFromPb(const pb::TrainConfig& p, TrainConfig& t) {
  if (p.layers_size() > 16) return std::to_string(p.layers_size()) + " layer widths, more than 16";
  if (p.sync() > static_cast<uint32_t>(SyncMode::PsAsync))
    return "unknown sync mode " + std::to_string(p.sync());
  if (p.optimizer() > static_cast<uint32_t>(OptimizerKind::Adam))
    return "unknown optimizer " + std::to_string(p.optimizer());
  t.layers.assign(p.layers().begin(), p.layers().end());
  t.steps = p.steps();
  t.batch = p.batch();
  t.bucketBytes = p.bucket_bytes();
  t.overlap = p.overlap();
  t.sync = static_cast<SyncMode>(p.sync());
  t.optimizer = static_cast<OptimizerKind>(p.optimizer());
  t.lr = p.lr();
  t.momentum = p.momentum();
  t.seed = p.seed();
  t.slowComputeRank = p.slow_compute_rank();
  t.slowComputeFactor = p.slow_compute_factor();
  return std::nullopt;
}

void toPb(const RunConfig& m, pb::RunConfig& p) {
  p.set_run_id(m.runId);
  p.set_epoch(m.epoch);
  p.set_world_size(m.worldSize);
  p.set_algorithm(m.algorithm);
  p.set_collective(static_cast<pb::Collective>(enumToWire(m.collective)));
  p.set_dtype(static_cast<pb::DataType>(enumToWire(m.dtype)));
  p.set_op(static_cast<pb::RedOp>(enumToWire(m.op)));
  p.set_count(m.count);
  p.set_slice_bytes(m.sliceBytes);
  p.set_root(m.root);
  p.set_ranks_per_host(m.ranksPerHost);
  p.set_radix(m.radix);
  p.set_inflight(m.inflight);
  p.set_window(m.window);
  p.set_in_place(m.inPlace);
  p.set_warmup(m.warmup);
  p.set_iterations(m.iterations);
  p.set_check(m.check);
  p.set_telemetry(static_cast<pb::TelemetryLevel>(enumToWire(m.telemetry)));
  for (int32_t r : m.ringOrder) p.add_ring_order(r);
  for (uint32_t d : m.torusDims) p.add_torus_dims(d);
  for (const auto& host : m.hosts) p.add_hosts(host);
  for (const uint64_t ns : m.pidNamespaces) p.add_pid_namespaces(ns);
  for (const auto& key : m.dataKeys) p.add_data_keys(key);
  p.set_data_plane(static_cast<pb::DataPlane>(enumToWire(m.dataPlane)));
  p.set_cuda_ipc(m.cudaIpc);
  p.set_random_data(m.randomData);
  if (m.train) trainToPb(*m.train, *p.mutable_train());
  p.set_schedule_xml(m.scheduleXml);
  p.set_port_bytes_per_second(m.shaping.portBytesPerSecond);
  p.set_added_latency_seconds(m.shaping.addedLatencySeconds);
  for (const auto& [rank, rate] : m.shaping.rankPortBytesPerSecond) {
    auto* r = p.add_slow_ranks();
    r->set_rank(rank);
    r->set_bytes_per_second(rate);
  }
  for (const auto& [link, rate] : m.shaping.linkBytesPerSecond) {
    auto* l = p.add_slow_links();
    l->set_from_rank(link.first);
    l->set_to_rank(link.second);
    l->set_bytes_per_second(rate);
  }
  for (const auto& [link, seconds] : m.shaping.linkLatencySeconds) {
    auto* l = p.add_link_latencies();
    l->set_from_rank(link.first);
    l->set_to_rank(link.second);
    l->set_seconds(seconds);
  }
}

// The shaping of a RunConfig body; a rank or link named twice is refused (check() judges the
// values).
Reason shapingFromPb(const pb::RunConfig& p, LinkShaping& s) {
  if (p.slow_ranks_size() > kMaxRanks || p.slow_links_size() > kMaxRanks * kMaxRanks ||
      p.link_latencies_size() > kMaxRanks * kMaxRanks) {
    return std::to_string(p.slow_ranks_size() + p.slow_links_size() + p.link_latencies_size()) +
           " slow ranks and links listed, more than a world has";
  }
  s.portBytesPerSecond = p.port_bytes_per_second();
  s.addedLatencySeconds = p.added_latency_seconds();
  for (const auto& r : p.slow_ranks()) {
    if (!s.rankPortBytesPerSecond.emplace(r.rank(), r.bytes_per_second()).second) {
      return "slow rank " + std::to_string(r.rank()) + " listed twice";
    }
  }
  for (const auto& l : p.slow_links()) {
    if (!s.linkBytesPerSecond.emplace(std::pair{l.from_rank(), l.to_rank()}, l.bytes_per_second())
             .second) {
      return "slow link " + std::to_string(l.from_rank()) + "-" + std::to_string(l.to_rank()) +
             " listed twice";
    }
  }
  for (const auto& l : p.link_latencies()) {
    if (!s.linkLatencySeconds.emplace(std::pair{l.from_rank(), l.to_rank()}, l.seconds()).second) {
      return "latency of link " + std::to_string(l.from_rank()) + "-" +
             std::to_string(l.to_rank()) + " listed twice";
    }
  }
  return std::nullopt;
}
Reason fromPb(const pb::RunConfig& p, const FrameHeader& h, RunConfig& m) {
  const auto coll = enumFromWire(p.collective(), kLastCollective);
  if (!coll) return "unknown collective " + std::to_string(p.collective());
  const auto dtype = enumFromWire(p.dtype(), kLastDataType);
  if (!dtype) return "unknown data type " + std::to_string(p.dtype());
  const auto op = enumFromWire(p.op(), kLastRedOp);
  if (!op) return "unknown reduction operator " + std::to_string(p.op());
  const auto level = enumFromWire(p.telemetry(), kLastTelemetryLevel);
  if (!level) return "unknown telemetry level " + std::to_string(p.telemetry());
  const auto plane = p.data_plane() == pb::DATA_PLANE_UNSPECIFIED
                         ? std::optional<DataPlaneKind>(DataPlaneKind::Auto)
                         : enumFromWire(p.data_plane(), kLastDataPlane);
  if (!plane) return "unknown data plane " + std::to_string(p.data_plane());
  if (p.epoch() != h.epoch) {
    return "epoch " + std::to_string(p.epoch()) + " differs from the header's epoch " +
           std::to_string(h.epoch);
  }
  // Bounded before copying so that a hostile list costs nothing.
  if (p.ring_order_size() > kMaxRanks || p.hosts_size() > kMaxRanks ||
      p.torus_dims_size() > kMaxRanks) {
    return std::to_string(std::max(p.ring_order_size(), p.hosts_size())) +
           " ranks listed, more than " + std::to_string(kMaxRanks);
  }
  m.runId = p.run_id();
  m.epoch = p.epoch();
  m.worldSize = p.world_size();
  m.algorithm = p.algorithm();
  m.collective = *coll;
  m.dtype = *dtype;
  m.op = *op;
  m.count = p.count();
  m.sliceBytes = p.slice_bytes();
  m.root = p.root();
  m.ranksPerHost = p.ranks_per_host();
  m.radix = p.radix();
  m.inflight = p.inflight();
  m.window = p.window();
  m.inPlace = p.in_place();
  m.warmup = p.warmup();
  m.iterations = p.iterations();
  m.check = p.check();
  m.telemetry = *level;
  m.ringOrder.assign(p.ring_order().begin(), p.ring_order().end());
  m.torusDims.assign(p.torus_dims().begin(), p.torus_dims().end());
  m.hosts.assign(p.hosts().begin(), p.hosts().end());
  m.pidNamespaces.assign(p.pid_namespaces().begin(), p.pid_namespaces().end());
  m.dataKeys.assign(p.data_keys().begin(), p.data_keys().end());
  m.dataPlane = *plane;
  m.cudaIpc = p.cuda_ipc();
  m.randomData = p.random_data();
  m.scheduleXml = p.schedule_xml();
  if (p.has_train()) {
    m.train.emplace();
    if (auto e = trainFromPb(p.train(), *m.train)) return "training: " + *e;
  }
  return shapingFromPb(p, m.shaping);
}

void toPb(const PeerDeviceInfo& m, pb::PeerDevice& p) {
  p.set_uuid(m.id);
  for (const auto& r : m.reach) p.add_reach(r);
}
Reason fromPb(const pb::PeerDevice& p, PeerDeviceInfo& m) {
  // Bounded before copying so that a hostile list costs nothing.
  if (p.reach_size() > kMaxRanks) {
    return std::to_string(p.reach_size()) + " devices a rank can map, more than " +
           std::to_string(kMaxRanks);
  }
  m.id = p.uuid();
  m.reach.assign(p.reach().begin(), p.reach().end());
  return std::nullopt;
}

void toPb(const Ready& m, pb::Ready& p) {
  p.set_rank(m.rank);
  p.set_run_id(m.runId);
  p.set_data_endpoint(m.dataEndpoint);
  p.set_clock_offset_ns(m.clockOffsetNs);
  if (!m.device.id.empty() || !m.device.reach.empty()) toPb(m.device, *p.mutable_device());
}
Reason fromPb(const pb::Ready& p, const FrameHeader& h, Ready& m) {
  m.epoch = h.epoch;
  m.rank = p.rank();
  m.runId = p.run_id();
  m.dataEndpoint = p.data_endpoint();
  m.clockOffsetNs = p.clock_offset_ns();
  if (p.has_device()) return fromPb(p.device(), m.device);
  return std::nullopt;
}

void toPb(const Start& m, pb::Start& p) {
  p.set_run_id(m.runId);
  for (const auto& e : m.endpoints) p.add_endpoints(e);
  for (const auto& d : m.devices) toPb(d, *p.add_devices());
}
Reason fromPb(const pb::Start& p, const FrameHeader& h, Start& m) {
  // Bounded before copying so that a hostile list costs nothing.
  if (p.endpoints_size() > kMaxRanks) {
    return std::to_string(p.endpoints_size()) + " endpoints listed, more than " +
           std::to_string(kMaxRanks);
  }
  if (p.devices_size() > kMaxRanks) {
    return std::to_string(p.devices_size()) + " devices listed, more than " +
           std::to_string(kMaxRanks);
  }
  m.epoch = h.epoch;
  m.runId = p.run_id();
  m.endpoints.assign(p.endpoints().begin(), p.endpoints().end());
  m.devices.resize(static_cast<size_t>(p.devices_size()));
  for (int r = 0; r < p.devices_size(); ++r) {
    if (auto e = fromPb(p.devices(r), m.devices[static_cast<size_t>(r)])) return e;
  }
  return std::nullopt;
}

void toPb(const IterationResult& m, pb::IterationResult& p) {
  p.set_rank(m.rank);
  p.set_iteration(m.iteration);
  p.set_time_ns(m.timeNs);
  p.set_wrong(m.wrong);
  p.mutable_more_time_ns()->Assign(m.moreTimesNs.begin(), m.moreTimesNs.end());
  if (m.train) {
    const TrainRankStep& t = *m.train;
    pb::TrainStep& q = *p.mutable_train();
    q.set_step(t.step);
    q.set_loss(t.loss);
    q.set_step_ns(t.stepNs);
    q.set_compute_ns(t.computeNs);
    q.set_comm_ns(t.commNs);
    q.set_exposed_ns(t.exposedNs);
    q.set_hidden_ns(t.hiddenNs);
    q.set_digest(t.digest);
    q.set_staleness(t.staleness);
    q.set_spread(t.spread);
    for (const TrainSpan& sp : t.spans) {
      pb::TrainSpan& o = *q.add_spans();
      o.set_kind(static_cast<uint32_t>(sp.kind));
      o.set_index(sp.index);
      o.set_start_ns(sp.startNs);
      o.set_end_ns(sp.endNs);
    }
  }
}

Reason trainStepFromPb(const pb::TrainStep& q, int32_t rank, TrainRankStep& t) {
  if (static_cast<size_t>(q.spans_size()) > kMaxTrainSpans) {
    return std::to_string(q.spans_size()) + " training spans, more than " +
           std::to_string(kMaxTrainSpans);
  }
  t.rank = rank;
  t.step = q.step();
  t.loss = q.loss();
  t.stepNs = q.step_ns();
  t.computeNs = q.compute_ns();
  t.commNs = q.comm_ns();
  t.exposedNs = q.exposed_ns();
  t.hiddenNs = q.hidden_ns();
  t.digest = q.digest();
  t.staleness = q.staleness();
  t.spread = q.spread();
  t.spans.reserve(static_cast<size_t>(q.spans_size()));
  for (const pb::TrainSpan& o : q.spans()) {
    if (o.kind() > static_cast<uint32_t>(TrainSpan::Kind::Pull))
      return "unknown training span kind " + std::to_string(o.kind());
    t.spans.push_back(
        TrainSpan{static_cast<TrainSpan::Kind>(o.kind()), o.index(), o.start_ns(), o.end_ns()});
  }
  return std::nullopt;
}
Reason fromPb(const pb::IterationResult& p, const FrameHeader& h, IterationResult& m) {
  m.epoch = h.epoch;
  m.rank = p.rank();
  m.iteration = p.iteration();
  m.timeNs = p.time_ns();
  m.wrong = p.wrong();
  m.moreTimesNs.assign(p.more_time_ns().begin(), p.more_time_ns().end());
  if (p.has_train()) {
    m.train.emplace();
    return trainStepFromPb(p.train(), m.rank, *m.train);
  }
  return std::nullopt;
}

// The head of a batch; the events follow as packed records.
void toPbHead(const TelemetryBatch& m, pb::TelemetryBatch& p) {
  p.set_rank(m.rank);
  p.set_run_id(m.runId);
  p.set_seq(m.seq);
  p.set_dropped(m.dropped);
  p.set_record_version(kTelemetryRecordVersion);
  p.set_record_bytes(static_cast<uint32_t>(kTelemetryRecordBytes));
}
void toPb(const TelemetryBatch& m, pb::TelemetryBatch& p) {
  toPbHead(m, p);
  std::string& records = *p.mutable_records();
  records.resize(m.events.size() * kTelemetryRecordBytes);
  auto* out = reinterpret_cast<uint8_t*>(records.data());
  for (size_t i = 0; i < m.events.size(); ++i) {
    packTelemetryRecord(m.events[i], out + i * kTelemetryRecordBytes);
  }
}
Reason fromPb(const pb::TelemetryBatch& p, const FrameHeader& h, TelemetryBatch& m) {
  const std::string& records = p.records();
  if (p.record_bytes() != 0 && records.size() / p.record_bytes() > kMaxEventsPerBatch) {
    return std::to_string(records.size() / p.record_bytes()) + " events exceed the maximum of " +
           std::to_string(kMaxEventsPerBatch) + " per batch";
  }
  m.epoch = h.epoch;
  m.rank = p.rank();
  m.runId = p.run_id();
  m.seq = p.seq();
  m.dropped = p.dropped();
  m.events.clear();
  // An empty batch (it carries the drop count) needs no layout.
  if (records.empty()) return std::nullopt;
  const ByteView bytes(reinterpret_cast<const uint8_t*>(records.data()), records.size());
  return unpackTelemetryRecords(bytes, p.record_version(), p.record_bytes(), m.runId, m.rank,
                                m.events);
}

void toPb(const RunDone& m, pb::RunDone& p) {
  p.set_rank(m.rank);
  p.set_wrong_total(m.wrongTotal);
  p.set_events_dropped(m.eventsDropped);
  if (m.outputDigest) {
    p.set_has_digest(true);
    p.set_output_digest(*m.outputDigest);
    p.set_output_sample(m.outputSample);
  }
}
Reason fromPb(const pb::RunDone& p, const FrameHeader& h, RunDone& m) {
  m.epoch = h.epoch;
  m.rank = p.rank();
  m.wrongTotal = p.wrong_total();
  m.eventsDropped = p.events_dropped();
  if (p.has_digest()) {
    if (p.output_sample().size() > kMaxOutputSampleBytes)
      return "output_sample: longer than 64 bytes";
    m.outputDigest = p.output_digest();
    m.outputSample = p.output_sample();
  }
  return std::nullopt;
}

void toPb(const RunFailed& m, pb::RunFailed& p) {
  p.set_rank(m.rank);
  p.set_peer(m.peer);
  p.set_step(m.step);
  p.set_iteration(m.iteration);
  p.set_reason(m.reason);
  p.set_check_iteration(m.checkIteration);
  p.set_check_iterations(m.checkIterations);
}
Reason fromPb(const pb::RunFailed& p, const FrameHeader& h, RunFailed& m) {
  m.epoch = h.epoch;
  m.rank = p.rank();
  m.peer = p.peer();
  m.step = p.step();
  m.iteration = p.iteration();
  m.reason = p.reason();
  m.checkIteration = p.check_iteration();
  m.checkIterations = p.check_iterations();
  return std::nullopt;
}

void toPb(const Abort& m, pb::Abort& p) {
  p.set_run_id(m.runId);
  p.set_reason(m.reason);
}
Reason fromPb(const pb::Abort& p, const FrameHeader& h, Abort& m) {
  m.epoch = h.epoch;
  m.runId = p.run_id();
  m.reason = p.reason();
  return std::nullopt;
}

void toPb(const Shutdown& m, pb::Shutdown& p) { p.set_reason(m.reason); }
Reason fromPb(const pb::Shutdown& p, const FrameHeader&, Shutdown& m) {
  m.reason = p.reason();
  return std::nullopt;
}

void toPb(const Log& m, pb::Log& p) {
  p.set_level(static_cast<pb::LogLevel>(enumToWire(m.level)));
  p.set_text(m.text);
}
Reason fromPb(const pb::Log& p, const FrameHeader&, Log& m) {
  const auto level = enumFromWire(p.level(), kLastLogLevel);
  if (!level) return "unknown log level " + std::to_string(p.level());
  m.level = *level;
  m.text = p.text();
  return std::nullopt;
}

void toPb(const StoreSet& m, pb::StoreSet& p) {
  p.set_rank(m.rank);
  p.set_key(m.key);
  p.set_value(m.value);
}
Reason fromPb(const pb::StoreSet& p, const FrameHeader& h, StoreSet& m) {
  m.epoch = h.epoch;
  m.rank = p.rank();
  m.key = p.key();
  m.value = p.value();
  return std::nullopt;
}

void toPb(const StoreGet& m, pb::StoreGet& p) {
  p.set_rank(m.rank);
  p.set_seq(m.seq);
  p.set_key(m.key);
}
Reason fromPb(const pb::StoreGet& p, const FrameHeader& h, StoreGet& m) {
  m.epoch = h.epoch;
  m.rank = p.rank();
  m.seq = p.seq();
  m.key = p.key();
  return std::nullopt;
}

void toPb(const StoreValue& m, pb::StoreValue& p) {
  p.set_seq(m.seq);
  p.set_found(m.found);
  p.set_value(m.value);
}
Reason fromPb(const pb::StoreValue& p, const FrameHeader& h, StoreValue& m) {
  m.epoch = h.epoch;
  m.seq = p.seq();
  m.found = p.found();
  m.value = p.value();
  return std::nullopt;
}

void collectiveRecordToPb(const CollectiveRecord& c, pb::CollectiveRecord& p) {
  p.set_run_id(c.run.runId);
  p.set_algorithm(c.run.algorithm);
  p.set_collective(static_cast<pb::Collective>(enumToWire(c.run.collective)));
  p.set_dtype(static_cast<pb::DataType>(enumToWire(c.run.dtype)));
  p.set_count(c.run.count);
  p.set_nranks(c.run.nranks);
  p.set_slice_bytes(c.run.sliceBytes);
  p.set_nsteps(c.run.nsteps);
  p.set_seq(c.seq);
  p.set_place_kind(static_cast<uint32_t>(c.place.kind));
  p.set_place_index(c.place.index);
  p.set_start_ns(c.startNs);
  p.set_end_ns(c.endNs);
  p.set_last_step(c.lastStep);
  p.set_waited_on(c.waitedOn);
  p.set_state(static_cast<uint32_t>(c.state));
}

Reason collectiveRecordFromPb(const pb::CollectiveRecord& p, CollectiveRecord& c) {
  const auto collective = enumFromWire(p.collective(), kLastCollective);
  if (!collective) return "unknown collective " + std::to_string(p.collective());
  const auto dtype = enumFromWire(p.dtype(), kLastDataType);
  if (!dtype) return "unknown data type " + std::to_string(p.dtype());
  if (p.place_kind() > static_cast<uint32_t>(IterationPlace::Kind::Checked)) {
    return "unknown iteration kind " + std::to_string(p.place_kind());
  }
  if (p.state() > kMaxCollectiveState) return "unknown state " + std::to_string(p.state());
  c.run.runId = p.run_id();
  c.run.algorithm = p.algorithm();
  c.run.collective = *collective;
  c.run.dtype = *dtype;
  c.run.count = p.count();
  c.run.nranks = p.nranks();
  c.run.sliceBytes = p.slice_bytes();
  c.run.nsteps = p.nsteps();
  c.seq = p.seq();
  c.place.kind = static_cast<IterationPlace::Kind>(p.place_kind());
  c.place.index = p.place_index();
  c.startNs = p.start_ns();
  c.endNs = p.end_ns();
  c.lastStep = p.last_step();
  c.waitedOn = p.waited_on();
  c.state = static_cast<CollectiveState>(p.state());
  return std::nullopt;
}

void toPb(const FlightRecord& m, pb::FlightRecord& p) {
  p.set_rank(m.rank);
  p.set_recorded(m.recorded);
  for (const CollectiveRecord& c : m.records) collectiveRecordToPb(c, *p.add_records());
}
Reason fromPb(const pb::FlightRecord& p, const FrameHeader& h, FlightRecord& m) {
  m.epoch = h.epoch;
  m.rank = p.rank();
  m.recorded = p.recorded();
  // Refused before any is converted: a hostile count costs no more than the body's parse.
  if (static_cast<size_t>(p.records_size()) > kFlightRecords) {
    return std::to_string(p.records_size()) + " records, more than the " +
           std::to_string(kFlightRecords) + " a recorder keeps";
  }
  m.records.resize(static_cast<size_t>(p.records_size()));
  for (int i = 0; i < p.records_size(); ++i) {
    if (auto e = collectiveRecordFromPb(p.records(i), m.records[static_cast<size_t>(i)])) {
      return "record " + std::to_string(i) + ": " + *e;
    }
  }
  return std::nullopt;
}

// ---- Generic encode / decode ----------------------------------------------------------------

template <class T>
constexpr bool kIndexMatchesType =
    std::is_same_v<std::variant_alternative_t<static_cast<size_t>(T::kType) - 1, Message>, T>;

template <class T>
uint64_t headerEpoch(const T& m) {
  if constexpr (requires { m.epoch; }) {
    return m.epoch;
  } else {
    return 0;
  }
}

// The header frame and the serialised body.
Frames framesOf(const google::protobuf::MessageLite& p, MsgType type, uint64_t epoch) {
  Frames frames(2);
  frames[0] = encodeHeader(FrameHeader{kProtocolVersion, type, epoch});
  const size_t size = p.ByteSizeLong();
  ARL_ENFORCE(size <= kMaxBodyBytes, typeName(type) << " body of " << size << " bytes");
  frames[1].resize(size);
  const bool ok = p.SerializeToArray(frames[1].data(), static_cast<int>(size));
  ARL_ENFORCE(ok, "protobuf could not serialise " << typeName(type));
  return frames;
}

template <class T>
Frames encodeChecked(const T& m) {
  static_assert(kIndexMatchesType<T>, "Message's alternatives must follow MsgType's order");
  if (auto e = check(m)) {
    ARL_ENFORCE(false, "refusing to encode an invalid " << typeName(T::kType) << ": " << *e);
  }
  typename PbOf<T>::type p;
  toPb(m, p);
  return framesOf(p, T::kType, headerEpoch(m));
}

template <class T>
Frames encodeImpl(const T& m) {
  if constexpr (HasFreeText<T>) {
    T copy = m;
    sanitize(copy);
    return encodeChecked(copy);
  } else {
    return encodeChecked(m);
  }
}

DecodeError makeError(DecodeErrc code, std::string reason,
                      std::optional<FrameHeader> header = std::nullopt) {
  return DecodeError{code, std::move(reason), header};
}

template <class T>
DecodeResult<Envelope> decodeBody(const FrameHeader& h, ByteView body) {
  const std::string type(typeName(T::kType));
  if (isRunScoped(T::kType) && h.epoch == 0) {
    return makeError(DecodeErrc::InvalidField,
                     type + ": epoch 0 on a run-scoped message (runs start at epoch 1)", h);
  }
  typename PbOf<T>::type p;
  static const uint8_t kEmpty = 0;
  const void* data = body.empty() ? &kEmpty : body.data();
  if (!p.ParseFromArray(data, static_cast<int>(body.size()))) {
    return makeError(DecodeErrc::MalformedBody,
                     type + ": body of " + std::to_string(body.size()) +
                         " bytes does not parse as a " + type + " message",
                     h);
  }
  T m;
  if (auto e = fromPb(p, h, m)) return makeError(DecodeErrc::InvalidField, type + ": " + *e, h);
  if (auto e = check(m)) return makeError(DecodeErrc::InvalidField, type + ": " + *e, h);
  return Envelope{h, Message(std::in_place_type<T>, std::move(m))};
}

template <size_t... I>
DecodeResult<Envelope> decodeByIndex(size_t index, const FrameHeader& h, ByteView body,
                                     std::index_sequence<I...>) {
  std::optional<DecodeResult<Envelope>> out;
  ((I == index ? (out.emplace(decodeBody<std::variant_alternative_t<I, Message>>(h, body)), true)
               : false) ||
   ...);
  ARL_ENFORCE(out.has_value(), "no decoder for type index " << index);
  return std::move(*out);
}

template <class T>
DecodeResult<T> decodeAs(ByteView header, ByteView body) {
  auto r = decode(header, body);
  if (!r) return r.error();
  if (auto* m = std::get_if<T>(&r->message)) return std::move(*m);
  return makeError(
      DecodeErrc::UnexpectedType,
      "expected " + std::string(typeName(T::kType)) + ", got " + std::string(typeName(r->type())),
      r->header);
}

}  // namespace

// ---- Names ----------------------------------------------------------------------------------

std::string_view typeName(MsgType t) {
  switch (t) {
    case MsgType::Hello: return "Hello";
    case MsgType::Welcome: return "Welcome";
    case MsgType::Ping: return "Ping";
    case MsgType::Pong: return "Pong";
    case MsgType::Heartbeat: return "Heartbeat";
    case MsgType::RunConfig: return "RunConfig";
    case MsgType::Ready: return "Ready";
    case MsgType::Start: return "Start";
    case MsgType::IterationResult: return "IterationResult";
    case MsgType::TelemetryBatch: return "TelemetryBatch";
    case MsgType::RunDone: return "RunDone";
    case MsgType::RunFailed: return "RunFailed";
    case MsgType::Abort: return "Abort";
    case MsgType::Shutdown: return "Shutdown";
    case MsgType::Log: return "Log";
    case MsgType::StoreSet: return "StoreSet";
    case MsgType::StoreGet: return "StoreGet";
    case MsgType::StoreValue: return "StoreValue";
    case MsgType::FlightRecord: return "FlightRecord";
  }
  return "?";
}

bool sentByWorker(MsgType t) {
  switch (t) {
    case MsgType::Hello:
    case MsgType::Ping:
    case MsgType::Heartbeat:
    case MsgType::Ready:
    case MsgType::IterationResult:
    case MsgType::TelemetryBatch:
    case MsgType::RunDone:
    case MsgType::RunFailed:
    case MsgType::StoreSet:
    case MsgType::StoreGet:
    case MsgType::FlightRecord:
    case MsgType::Log: return true;
    default: return false;
  }
}

bool sentByCoordinator(MsgType t) {
  switch (t) {
    case MsgType::Welcome:
    case MsgType::Pong:
    case MsgType::Heartbeat:
    case MsgType::RunConfig:
    case MsgType::Start:
    case MsgType::Abort:
    case MsgType::Shutdown:
    case MsgType::StoreValue:
    case MsgType::Log: return true;
    default: return false;
  }
}

bool isRunScoped(MsgType t) {
  switch (t) {
    case MsgType::RunConfig:
    case MsgType::Ready:
    case MsgType::Start:
    case MsgType::IterationResult:
    case MsgType::TelemetryBatch:
    case MsgType::RunDone:
    case MsgType::RunFailed:
    case MsgType::Abort:
    case MsgType::StoreSet:
    case MsgType::StoreGet:
    case MsgType::StoreValue:
    case MsgType::FlightRecord: return true;
    default: return false;
  }
}

std::string_view toString(DecodeErrc c) {
  switch (c) {
    case DecodeErrc::FrameCount: return "wrong frame count";
    case DecodeErrc::HeaderSize: return "bad header size";
    case DecodeErrc::BadMagic: return "bad magic";
    case DecodeErrc::UnsupportedVersion: return "unsupported version";
    case DecodeErrc::UnknownType: return "unknown message type";
    case DecodeErrc::BodyTooLarge: return "body too large";
    case DecodeErrc::MalformedBody: return "malformed body";
    case DecodeErrc::InvalidField: return "invalid field";
    case DecodeErrc::UnexpectedType: return "unexpected message type";
  }
  return "?";
}

std::string DecodeError::message() const { return std::string(toString(code)) + ": " + reason; }

std::string_view toString(LogLevel l) {
  switch (l) {
    case LogLevel::Debug: return "debug";
    case LogLevel::Info: return "info";
    case LogLevel::Warning: return "warning";
    case LogLevel::Error: return "error";
  }
  return "?";
}

MsgType typeOf(const Message& m) {
  return std::visit([](const auto& x) { return std::decay_t<decltype(x)>::kType; }, m);
}

std::string_view typeName(const Message& m) { return typeName(typeOf(m)); }

// ---- Header ---------------------------------------------------------------------------------

Bytes encodeHeader(const FrameHeader& h) {
  Bytes b(kHeaderBytes);
  std::copy(std::begin(kHeaderMagic), std::end(kHeaderMagic), b.begin());
  putLe(b.data() + 4, h.version, 2);
  putLe(b.data() + 6, static_cast<uint16_t>(h.type), 2);
  putLe(b.data() + 8, h.epoch, 8);
  return b;
}

DecodeResult<FrameHeader> decodeHeader(ByteView frame) {
  if (frame.size() != kHeaderBytes) {
    return makeError(DecodeErrc::HeaderSize, "header frame is " + std::to_string(frame.size()) +
                                                 " bytes, expected " +
                                                 std::to_string(kHeaderBytes));
  }
  if (!std::equal(std::begin(kHeaderMagic), std::end(kHeaderMagic), frame.begin(),
                  [](char a, uint8_t b) { return static_cast<uint8_t>(a) == b; })) {
    return makeError(DecodeErrc::BadMagic,
                     "header frame starts with " +
                         quoted(std::string_view(reinterpret_cast<const char*>(frame.data()), 4)) +
                         ", expected \"ARL1\"");
  }
  const auto version = static_cast<uint16_t>(getLe(frame.data() + 4, 2));
  const auto type = static_cast<uint16_t>(getLe(frame.data() + 6, 2));
  const uint64_t epoch = getLe(frame.data() + 8, 8);
  if (version != kProtocolVersion) {
    return makeError(DecodeErrc::UnsupportedVersion,
                     "protocol version " + std::to_string(version) +
                         " is not supported (this build speaks version " +
                         std::to_string(kProtocolVersion) + ")");
  }
  if (type < 1 || type > kMaxMsgType) {
    return makeError(DecodeErrc::UnknownType, "unknown message type " + std::to_string(type) +
                                                  " (known: 1.." + std::to_string(kMaxMsgType) +
                                                  ")");
  }
  return FrameHeader{version, static_cast<MsgType>(type), epoch};
}

// ---- Messages -------------------------------------------------------------------------------

DecodeResult<Envelope> decode(ByteView header, ByteView body) {
  auto h = decodeHeader(header);
  if (!h) return h.error();
  if (body.size() > kMaxBodyBytes) {
    return makeError(DecodeErrc::BodyTooLarge,
                     std::string(typeName(h->type)) + ": body of " + std::to_string(body.size()) +
                         " bytes exceeds the limit of " + std::to_string(kMaxBodyBytes),
                     *h);
  }
  constexpr size_t kTypes = std::variant_size_v<Message>;
  static_assert(kTypes == kMaxMsgType);
  return decodeByIndex(static_cast<size_t>(h->type) - 1, *h, body,
                       std::make_index_sequence<kTypes>{});
}

DecodeResult<Envelope> decode(std::span<const Bytes> frames) {
  if (frames.size() != 2) {
    return makeError(DecodeErrc::FrameCount, "message has " + std::to_string(frames.size()) +
                                                 " frames, expected 2 (header, body)");
  }
  return decode(ByteView(frames[0]), ByteView(frames[1]));
}

std::optional<uint16_t> headerVersion(ByteView frame) {
  if (frame.size() != kHeaderBytes ||
      !std::equal(std::begin(kHeaderMagic), std::end(kHeaderMagic), frame.begin(),
                  [](char a, uint8_t b) { return static_cast<uint8_t>(a) == b; })) {
    return std::nullopt;
  }
  return static_cast<uint16_t>(getLe(frame.data() + 4, 2));
}

Frames shutdownInVersion(uint16_t version, const std::string& reason) {
  Frames frames = encode(Shutdown{reason});
  frames[0] = encodeHeader(FrameHeader{version, MsgType::Shutdown, 0});
  return frames;
}

std::optional<std::string> shutdownReasonAnyVersion(ByteView header, ByteView body) {
  if (!headerVersion(header) ||
      getLe(header.data() + 6, 2) != static_cast<uint64_t>(MsgType::Shutdown) ||
      body.size() > kMaxBodyBytes) {
    return std::nullopt;
  }
  pb::Shutdown p;
  if (!p.ParseFromArray(body.data(), static_cast<int>(body.size()))) return std::nullopt;
  Shutdown m;
  if (fromPb(p, FrameHeader{}, m) || check(m)) return std::nullopt;
  return m.reason;
}

std::string versionMismatch(uint16_t theirs, std::string_view peer) {
  return std::string(peer) + " speaks protocol version " + std::to_string(theirs) +
         ", this build speaks version " + std::to_string(kProtocolVersion) +
         ": run the coordinator and its workers from the same release";
}

Frames encode(const Message& m) {
  return std::visit([](const auto& x) { return encodeImpl(x); }, m);
}

std::optional<std::string> validate(const Message& m) {
  return std::visit(
      [](const auto& x) -> std::optional<std::string> {
        if (auto e = check(x)) return std::string(typeName(x.kType)) + ": " + *e;
        return std::nullopt;
      },
      m);
}

#define ARL_PROTOCOL_MEMBERS(T)                          \
  Frames T::encode() const { return encodeImpl(*this); } \
  DecodeResult<T> T::decode(ByteView header, ByteView body) { return decodeAs<T>(header, body); }

ARL_PROTOCOL_MEMBERS(Hello)
ARL_PROTOCOL_MEMBERS(Welcome)
ARL_PROTOCOL_MEMBERS(Ping)
ARL_PROTOCOL_MEMBERS(Pong)
ARL_PROTOCOL_MEMBERS(Heartbeat)
ARL_PROTOCOL_MEMBERS(RunConfig)
ARL_PROTOCOL_MEMBERS(Ready)
ARL_PROTOCOL_MEMBERS(Start)
ARL_PROTOCOL_MEMBERS(IterationResult)
ARL_PROTOCOL_MEMBERS(TelemetryBatch)
ARL_PROTOCOL_MEMBERS(RunDone)
ARL_PROTOCOL_MEMBERS(RunFailed)
ARL_PROTOCOL_MEMBERS(Abort)
ARL_PROTOCOL_MEMBERS(Shutdown)
ARL_PROTOCOL_MEMBERS(Log)
ARL_PROTOCOL_MEMBERS(StoreSet)
ARL_PROTOCOL_MEMBERS(StoreGet)
ARL_PROTOCOL_MEMBERS(StoreValue)
ARL_PROTOCOL_MEMBERS(FlightRecord)

#undef ARL_PROTOCOL_MEMBERS

Pong Pong::answering(const Ping& ping, int64_t recvNs, int64_t sendNs) {
  return Pong{ping.seq, ping.t0Ns, recvNs, sendNs};
}

RunFailed RunFailed::from(const PeerError& e, uint64_t epoch, int64_t iteration) {
  RunFailed f;
  f.epoch = epoch;
  f.rank = e.rank;
  f.peer = e.peer;
  f.step = e.step;
  f.iteration = iteration;
  f.reason = e.reason;
  return f;
}

std::string RunFailed::message() const {
  std::string m = PeerError(rank, peer, step, reason).what();
  if (checkIteration > 0) {
    m += " (" + iterationText(0, checkIteration, checkIterations) + ")";
  } else if (iteration >= 0) {
    m += " (" + iterationText(static_cast<uint32_t>(iteration), 0, 0) + ")";
  }
  return m;
}

// ---- Helpers --------------------------------------------------------------------------------

bool validEndpoint(std::string_view s) {
  if (s.size() > kMaxEndpointBytes) return false;
  // A rank on both data planes (protocol 13, transport/split_transport.h): shared memory
  // inside its host, then tcp:// across.
  if (const size_t comma = s.find(','); comma != std::string_view::npos) {
    const std::string_view shm = s.substr(0, comma), tcp = s.substr(comma + 1);
    return shm.substr(0, 6) == "shm://" && tcp.substr(0, 6) == "tcp://" && validEndpoint(shm) &&
           validEndpoint(tcp);
  }
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7F) return false;
  }
  auto rest = [&](std::string_view scheme) -> std::optional<std::string_view> {
    if (s.substr(0, scheme.size()) != scheme) return std::nullopt;
    return s.substr(scheme.size());
  };
  if (auto r = rest("ipc://")) return !r->empty();
  if (auto r = rest("inproc://")) return !r->empty();
  // A shared-memory segment's name: one path component.
  if (auto r = rest("shm://")) return !r->empty() && r->find('/') == std::string_view::npos;
  // A library run's bootstrap (protocol 6): rank 0's token, base64url, or a member's mark.
  if (auto r = rest("nccl://")) {
    if (*r == "member") return true;
    if (r->substr(0, 3) != "id/" || r->size() == 3) return false;
    return std::all_of(r->begin() + 3, r->end(), [](char c) {
      return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
             c == '-' || c == '_';
    });
  }
  // A Gloo rank's mark (protocol 12): its rendezvous goes through the run's store.
  if (auto r = rest("gloo://")) return *r == "store";
  if (auto r = rest("tcp://")) {
    // HOST:PORT with HOST non-empty ("[::1]" for IPv6) and PORT 1..5 digits or '*'.
    const size_t colon = r->rfind(':');
    if (colon == std::string_view::npos || colon == 0) return false;
    const std::string_view port = r->substr(colon + 1);
    if (port == "*") return true;
    if (port.empty() || port.size() > 5) return false;
    return std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
  }
  return false;
}

Frames TelemetryBatch::encodeRecords(std::span<const uint8_t> first,
                                     std::span<const uint8_t> second) const {
  ARL_ENFORCE(events.empty(),
              "encodeRecords() of a TelemetryBatch that holds " << events.size() << " events");
  if (auto e = check(*this)) ARL_ENFORCE(false, "refusing to encode a TelemetryBatch: " << *e);
  const size_t n = (first.size() + second.size()) / kTelemetryRecordBytes;
  ARL_ENFORCE(n <= kMaxEventsPerBatch,
              "TelemetryBatch of " << n << " records, more than " << kMaxEventsPerBatch);
  for (std::span<const uint8_t> piece : {first, second}) {
    if (auto e = telemetryRecordsError(piece)) {
      ARL_ENFORCE(false, "refusing to encode a TelemetryBatch: " << *e);
    }
  }
  // The head through protobuf, then the records field by hand, copied once from where they
  // lie: the bytes protobuf would write, since `records` has the highest field number and
  // protobuf writes fields in number order (an empty one not at all).
  pb::TelemetryBatch p;
  toPbHead(*this, p);
  const size_t head = p.ByteSizeLong();
  const size_t bytes = first.size() + second.size();
  Frames frames(2);
  frames[0] = encodeHeader(FrameHeader{kProtocolVersion, kType, epoch});
  Bytes& body = frames[1];
  body.reserve(head + 2 * kMaxVarintBytes + bytes);
  body.resize(head);
  const bool ok = p.SerializeToArray(body.data(), static_cast<int>(head));
  ARL_ENFORCE(ok, "protobuf could not serialise a TelemetryBatch head");
  if (bytes > 0) {
    putVarint(body, (uint64_t{pb::TelemetryBatch::kRecordsFieldNumber} << 3) | 2);  // bytes
    putVarint(body, bytes);
    body.insert(body.end(), first.begin(), first.end());
    body.insert(body.end(), second.begin(), second.end());
  }
  ARL_ENFORCE(body.size() <= kMaxBodyBytes, "TelemetryBatch body of " << body.size() << " bytes");
  return frames;
}

std::string describe(const Message& m) {
  std::ostringstream os;
  os << typeName(m);
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (requires { x.epoch; }) os << " epoch=" << x.epoch;
        if constexpr (std::is_same_v<T, Hello>) {
          os << " name=" << quoted(x.name) << " host=" << quoted(x.hostName) << " pid=" << x.pid
             << " backend=" << x.backend << " device=" << x.deviceIndex
             << " version=" << x.protocolVersion;
        } else if constexpr (std::is_same_v<T, Welcome>) {
          os << " rank=" << x.rank << "/" << x.worldSize << " heartbeat=" << x.heartbeatIntervalMs
             << "ms x" << x.heartbeatLiveness;
        } else if constexpr (std::is_same_v<T, Ping>) {
          os << " seq=" << x.seq << " t0=" << x.t0Ns;
        } else if constexpr (std::is_same_v<T, Pong>) {
          os << " seq=" << x.seq << " t0=" << x.t0Ns << " t1=" << x.t1Ns << " t2=" << x.t2Ns;
        } else if constexpr (std::is_same_v<T, Heartbeat>) {
          if (x.inRun) os << " iteration=" << x.iteration << " step=" << x.step;
          if (x.checkIteration > 0) os << " checking=" << x.checkIteration;
          if (x.epoch != 0) {
            os << " epoch=" << x.epoch << " phase=" << toString(x.phase)
               << " progress=" << x.progress;
          }
          if (x.wait != WaitKind::None) os << " waits=" << x.waitPeer << "@" << x.waitStep;
          if (x.wantReport) os << " want-report";
        } else if constexpr (std::is_same_v<T, RunConfig>) {
          os << " run=" << x.runId << " " << x.algorithm << " " << toString(x.collective) << " "
             << toString(x.dtype) << " " << toString(x.op) << " count=" << x.count
             << " slice=" << x.sliceBytes
             << (x.window > 1 ? " window=" + std::to_string(x.window) : "")
             << " ranks=" << x.worldSize << " root=" << x.root << " warmup=" << x.warmup
             << " iterations=" << x.iterations << (x.inPlace ? " in-place" : "")
             << " telemetry=" << toString(x.telemetry);
        } else if constexpr (std::is_same_v<T, Ready>) {
          os << " rank=" << x.rank << " run=" << x.runId << " data=" << x.dataEndpoint;
        } else if constexpr (std::is_same_v<T, Start>) {
          os << " run=" << x.runId << " endpoints=" << x.endpoints.size();
        } else if constexpr (std::is_same_v<T, IterationResult>) {
          os << " rank=" << x.rank << " iteration=" << x.iteration << " time=" << x.timeNs
             << "ns wrong=" << x.wrong;
          if (!x.moreTimesNs.empty()) os << " and " << x.moreTimesNs.size() << " more";
        } else if constexpr (std::is_same_v<T, TelemetryBatch>) {
          os << " rank=" << x.rank << " run=" << x.runId << " seq=" << x.seq
             << " events=" << x.events.size() << " dropped=" << x.dropped;
        } else if constexpr (std::is_same_v<T, RunDone>) {
          os << " rank=" << x.rank << " wrong=" << x.wrongTotal << " dropped=" << x.eventsDropped;
        } else if constexpr (std::is_same_v<T, RunFailed>) {
          os << ": " << x.message();
        } else if constexpr (std::is_same_v<T, Abort>) {
          os << " run=" << x.runId << ": " << x.reason;
        } else if constexpr (std::is_same_v<T, Shutdown>) {
          if (!x.reason.empty()) os << ": " << x.reason;
        } else if constexpr (std::is_same_v<T, Log>) {
          os << " " << toString(x.level) << ": " << x.text;
        } else if constexpr (std::is_same_v<T, StoreSet>) {
          os << " rank=" << x.rank << " key=" << x.key << " bytes=" << x.value.size();
        } else if constexpr (std::is_same_v<T, StoreGet>) {
          os << " rank=" << x.rank << " seq=" << x.seq << " key=" << x.key;
        } else if constexpr (std::is_same_v<T, StoreValue>) {
          os << " seq=" << x.seq
             << (x.found ? " bytes=" + std::to_string(x.value.size()) : std::string(" not found"));
        } else if constexpr (std::is_same_v<T, FlightRecord>) {
          os << " rank=" << x.rank << " records=" << x.records.size() << " of " << x.recorded;
        }
      },
      m);
  return os.str();
}

// ---- Clock alignment ------------------------------------------------------------------------

ClockSample clockSample(const Pong& pong, int64_t t3Ns) {
  return clockSample(pong.t0Ns, pong.t1Ns, pong.t2Ns, t3Ns);
}

}  // namespace arl
