// The packed telemetry record: one event in 48 little-endian bytes. It is what a worker's
// rank writes into its ring (exec/telemetry_ring.h) and what a TelemetryBatch carries on the
// wire (runtime/protocol.h, docs/protocol.md), so an event is laid out once, on the rank's
// hot path, and the worker's control thread ships the ring's bytes as they are. The run id
// and the rank are not in the record: a batch says them once.
//
//   offset size field
//        0    8 tNs         i64  timestamp, coordinator clock (ns)
//        8    8 offset      u64  element offset
//       16    8 bytes       u64
//       24    8 provenance  u64  rank mask of the contributions in the chunk
//       32    4 iteration   u32
//       36    4 step        u32
//       40    4 chunk       u32
//       44    2 peer        i16  -1: none
//       46    1 kind        u8   arl::EventKind
//       47    1 phase|clock u8   bits 0-3 arl::Phase, bits 4-7 arl::ClockSource
//
// A new layout gets a new kTelemetryRecordVersion; decoders refuse versions and record sizes
// they do not know. Version 2 is version 1's layout with NCCL's event kinds added
// (NcclGroupStart .. NcclRecvStepEnd, exec/nccl_events.h says what their fields hold); version
// 3 put the clock in byte 47's high bits; version 4 added a training step's compute kinds
// (ComputeForward .. ComputeOptimizer, exec/telemetry.h) in the same layout. Records of versions
// 1 (the lab's kinds only) and 2 (byte 47 holding the phase alone) are still read, their events
// timed by the host's clock; versions 1 to 3 know no compute kind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "exec/telemetry.h"

namespace arl {

inline constexpr uint32_t kTelemetryRecordVersion = 4;
inline constexpr size_t kTelemetryRecordBytes = 48;

// Writes `e` (all but runId and rank) into out[0, kTelemetryRecordBytes). A peer outside
// int16 is a caller's bug; validTelemetryEvent() says what a decoder accepts.
void packTelemetryRecord(const TelemetryEvent& e, uint8_t* out) noexcept;

// Why `e` could not travel in a record (kind, phase, clock or peer out of range), or nullopt.
std::optional<std::string> telemetryEventError(const TelemetryEvent& e);

// Why `bytes` are not whole records of the current layout with every kind, phase and peer in
// range (naming the first bad record), or nullopt.
std::optional<std::string> telemetryRecordsError(std::span<const uint8_t> bytes);

// Reads records packed with layout `version` (1 to kTelemetryRecordVersion) and `recordBytes` per
// record, appending one event per record to `out` with `runId` and `rank` filled in. Refuses (and
// appends nothing) an unknown version or record size, a byte count that is not a whole number of
// records, or a record whose kind, phase or peer is out of range; the error names the record.
std::optional<std::string> unpackTelemetryRecords(std::span<const uint8_t> bytes, uint32_t version,
                                                  uint32_t recordBytes, uint64_t runId,
                                                  int32_t rank, std::vector<TelemetryEvent>& out);

}  // namespace arl
