#include "exec/telemetry_record.h"

#include <bit>
#include <cstring>
#include <type_traits>

#include "base/limits.h"
#include "schedule/schedule.h"

namespace arl {

namespace {

// Little-endian stores and loads: a plain copy on little-endian hosts (what the compiler
// turns into one move), byte by byte elsewhere.
template <class T>
void storeLe(uint8_t* p, T v) noexcept {
  static_assert(std::is_integral_v<T>);
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(p, &v, sizeof v);
  } else {
    using U = std::make_unsigned_t<T>;
    const auto u = static_cast<U>(v);
    for (size_t i = 0; i < sizeof v; ++i) p[i] = static_cast<uint8_t>(u >> (8 * i));
  }
}

template <class T>
T loadLe(const uint8_t* p) noexcept {
  static_assert(std::is_integral_v<T>);
  if constexpr (std::endian::native == std::endian::little) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  } else {
    using U = std::make_unsigned_t<T>;
    U u = 0;
    for (size_t i = 0; i < sizeof u; ++i) u |= static_cast<U>(U{p[i]} << (8 * i));
    return static_cast<T>(u);
  }
}

// The last kind of each record layout version (version 1: the lab's kinds only; versions 2
// and 3: NCCL's too).
constexpr uint8_t kLastKindV1 = static_cast<uint8_t>(EventKind::IterationEnd);
constexpr uint8_t kLastKindV3 = static_cast<uint8_t>(EventKind::NcclRecvStepEnd);
constexpr uint8_t kLastKind = static_cast<uint8_t>(kLastEventKind);
constexpr uint8_t kLastPhaseValue = static_cast<uint8_t>(Phase::Local);
constexpr uint8_t kLastClock = static_cast<uint8_t>(ClockSource::Device);
static_assert(kLastPhaseValue < 16, "the phase has the low 4 bits of byte 47");

// Byte 47: the phase in the low 4 bits, the clock in the high 4 (version 3).
constexpr uint8_t phaseClockByte(uint8_t phase, ClockSource c) {
  return static_cast<uint8_t>((phase & 0x0F) | (static_cast<uint8_t>(c) << 4));
}

// The one range rule for the fields a record narrows or enumerates. `phase` and `clock` are
// as the event holds them (a phase above 15 cannot share its byte with the clock).
std::optional<std::string> fieldError(unsigned kind, unsigned phase, unsigned clock, int64_t peer,
                                      unsigned lastKind = kLastKind) {
  if (kind > lastKind) return "unknown event kind " + std::to_string(kind);
  if (phase > kLastPhaseValue) return "unknown phase " + std::to_string(phase);
  if (clock > kLastClock) return "unknown clock source " + std::to_string(clock);
  if (peer < -1 || peer >= kMaxRanks) {
    return "peer " + std::to_string(peer) + " is neither -1 nor a rank below " +
           std::to_string(kMaxRanks);
  }
  return std::nullopt;
}

std::optional<std::string> wholeRecordsError(size_t bytes) {
  if (bytes % kTelemetryRecordBytes == 0) return std::nullopt;
  return "telemetry records hold " + std::to_string(bytes) + " bytes, not a whole number of " +
         std::to_string(kTelemetryRecordBytes) + "-byte records (truncated?)";
}

}  // namespace

void packTelemetryRecord(const TelemetryEvent& e, uint8_t* out) noexcept {
  storeLe<int64_t>(out + 0, e.tNs);
  storeLe<uint64_t>(out + 8, e.offset);
  storeLe<uint64_t>(out + 16, e.bytes);
  storeLe<uint64_t>(out + 24, e.provenance);
  storeLe<uint32_t>(out + 32, e.iteration);
  storeLe<uint32_t>(out + 36, e.step);
  storeLe<uint32_t>(out + 40, e.chunk);
  storeLe<int16_t>(out + 44, static_cast<int16_t>(e.peer));
  out[46] = static_cast<uint8_t>(e.kind);
  out[47] = phaseClockByte(e.phase, e.clock);
}

std::optional<std::string> telemetryEventError(const TelemetryEvent& e) {
  return fieldError(static_cast<unsigned>(e.kind), e.phase, static_cast<unsigned>(e.clock), e.peer);
}

std::optional<std::string> telemetryRecordsError(std::span<const uint8_t> bytes) {
  if (auto err = wholeRecordsError(bytes.size())) return err;
  for (size_t i = 0; i < bytes.size() / kTelemetryRecordBytes; ++i) {
    const uint8_t* p = bytes.data() + i * kTelemetryRecordBytes;
    if (auto err = fieldError(p[46], p[47] & 0x0F, p[47] >> 4, loadLe<int16_t>(p + 44))) {
      return "telemetry record " + std::to_string(i) + ": " + *err;
    }
  }
  return std::nullopt;
}

std::optional<std::string> unpackTelemetryRecords(std::span<const uint8_t> bytes, uint32_t version,
                                                  uint32_t recordBytes, uint64_t runId,
                                                  int32_t rank, std::vector<TelemetryEvent>& out) {
  if (version < 1 || version > kTelemetryRecordVersion) {
    return "telemetry record layout version " + std::to_string(version) +
           " is not supported (this build reads versions 1 to " +
           std::to_string(kTelemetryRecordVersion) + ")";
  }
  if (recordBytes != kTelemetryRecordBytes) {
    return "telemetry records of " + std::to_string(recordBytes) + " bytes, expected " +
           std::to_string(kTelemetryRecordBytes) + " for layout version " + std::to_string(version);
  }
  if (auto err = wholeRecordsError(bytes.size())) return err;
  const size_t n = bytes.size() / kTelemetryRecordBytes;
  const unsigned lastKind = version == 1 ? kLastKindV1 : version < 4 ? kLastKindV3 : kLastKind;
  const size_t first = out.size();
  out.reserve(first + n);  // each event is written once, not zeroed first
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = bytes.data() + i * kTelemetryRecordBytes;
    const int16_t peer = loadLe<int16_t>(p + 44);
    // Versions 1 and 2 had the phase alone in byte 47: a high nibble there is a bad phase.
    const unsigned phase = version < 3 ? p[47] : p[47] & 0x0F;
    const unsigned clock = version < 3 ? 0 : p[47] >> 4;
    if (auto err = fieldError(p[46], phase, clock, peer, lastKind)) {
      out.resize(first);
      return "telemetry record " + std::to_string(i) + ": " + *err;
    }
    TelemetryEvent& e = out.emplace_back();
    e.runId = runId;
    e.rank = rank;
    e.tNs = loadLe<int64_t>(p + 0);
    e.offset = loadLe<uint64_t>(p + 8);
    e.bytes = loadLe<uint64_t>(p + 16);
    e.provenance = loadLe<uint64_t>(p + 24);
    e.iteration = loadLe<uint32_t>(p + 32);
    e.step = loadLe<uint32_t>(p + 36);
    e.chunk = loadLe<uint32_t>(p + 40);
    e.peer = peer;
    e.kind = static_cast<EventKind>(p[46]);
    e.phase = static_cast<uint8_t>(phase);
    e.clock = static_cast<ClockSource>(clock);
  }
  return std::nullopt;
}

}  // namespace arl
