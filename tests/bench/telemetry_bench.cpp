// What one telemetry event costs at each stage between a rank and the client that keeps it
// (docs/telemetry.md, "Where the time goes"):
//
//   Telemetry/record/ring         a rank records into its TelemetryRing (the worker's sink);
//                                 the same thread gives the room back every 4096 events
//   Telemetry/record/mutex        BoundedSink (a mutex and a vector), the pattern the worker's
//                                 sink used before the ring, for comparison
//   Telemetry/encode/records      a batch of kMaxEventsPerBatch records shipped as they lie
//                                 (TelemetryBatch::encodeRecords, the worker's path)
//   Telemetry/encode/events       the same batch from TelemetryEvents (TelemetryBatch::encode)
//   Telemetry/decode              the coordinator's decode of that batch (decode())
//   Telemetry/collect/merge       a client's TelemetryCollector: 4 ranks' batches in, one
//                                 vector sorted by time out
//   Telemetry/collect/sort        the same events gathered in arrival order and sortByTime()d
//
// Rates are events per second of CPU time (Google Benchmark's default), which time spent
// descheduled does not inflate; divide 1e9 by items_per_second for ns per event.
//   telemetry_bench
//   telemetry_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "exec/telemetry.h"
#include "exec/telemetry_record.h"
#include "exec/telemetry_ring.h"
#include "runtime/protocol.h"
#include "runtime/run_types.h"
#include "runtime/telemetry_collector.h"

namespace {

using namespace arl;

// A chunk-level event as a 4-rank ring at 4 KiB records it: 28 per iteration, 1 us apart.
TelemetryEvent sampleEvent(uint64_t i, int rank = 1) {
  TelemetryEvent e;
  e.runId = 7;
  e.rank = rank;
  e.iteration = static_cast<uint32_t>(i / 28);
  e.step = static_cast<uint32_t>(i % 7);
  e.kind = static_cast<EventKind>(i % 6);
  e.phase = static_cast<uint8_t>(i % 2);
  e.peer = (rank + 1) % 4;
  e.chunk = static_cast<uint32_t>(i % 4);
  e.offset = 256 * (i % 4);
  e.bytes = 1024;
  e.tNs = 1'000'000'000 + static_cast<int64_t>(i) * 1000;
  e.provenance = 3;
  return e;
}

void recordRing(benchmark::State& state) {
  TelemetryRing ring(size_t{1} << 16);
  uint64_t i = 0;
  for (auto _ : state) {
    ring.record(sampleEvent(i++));
    if ((i & 4095) == 0) ring.release(ring.written());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  state.counters["dropped"] = static_cast<double>(ring.dropped());
}
BENCHMARK(recordRing)->Name("Telemetry/record/ring");

void recordMutex(benchmark::State& state) {
  BoundedSink sink(size_t{1} << 18);
  uint64_t i = 0;
  for (auto _ : state) {
    sink.record(sampleEvent(i++));
    if ((i & 4095) == 0) sink.take();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(recordMutex)->Name("Telemetry/record/mutex");

TelemetryBatch sampleBatch(size_t n) {
  TelemetryBatch b;
  b.epoch = 1;
  b.rank = 1;
  b.runId = 7;
  for (size_t i = 0; i < n; ++i) b.events.push_back(sampleEvent(i));
  return b;
}

std::vector<uint8_t> packed(const TelemetryBatch& b) {
  std::vector<uint8_t> out(b.events.size() * kTelemetryRecordBytes);
  for (size_t i = 0; i < b.events.size(); ++i) {
    packTelemetryRecord(b.events[i], out.data() + i * kTelemetryRecordBytes);
  }
  return out;
}

void encodeRecords(benchmark::State& state) {
  TelemetryBatch b = sampleBatch(kMaxEventsPerBatch);
  const std::vector<uint8_t> records = packed(b);
  b.events.clear();
  for (auto _ : state) benchmark::DoNotOptimize(b.encodeRecords(records));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kMaxEventsPerBatch));
}
BENCHMARK(encodeRecords)->Name("Telemetry/encode/records");

void encodeEvents(benchmark::State& state) {
  const TelemetryBatch b = sampleBatch(kMaxEventsPerBatch);
  for (auto _ : state) benchmark::DoNotOptimize(b.encode());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kMaxEventsPerBatch));
}
BENCHMARK(encodeEvents)->Name("Telemetry/encode/events");

void decodeBatch(benchmark::State& state) {
  const Frames f = sampleBatch(kMaxEventsPerBatch).encode();
  for (auto _ : state) {
    auto r = decode(f);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kMaxEventsPerBatch));
  state.counters["body_bytes_per_event"] =
      static_cast<double>(f[1].size()) / static_cast<double>(kMaxEventsPerBatch);
}
BENCHMARK(decodeBatch)->Name("Telemetry/decode");

// 4 ranks x 25 batches x 2800 events, the batches of the ranks interleaved in arrival order
// and their times interleaved as concurrent ranks' are.
std::vector<TelemetryBatchEvent> arrivals() {
  constexpr int kRanks = 4;
  constexpr uint64_t kBatches = 25;
  constexpr uint64_t kPerBatch = 2800;
  std::vector<TelemetryBatchEvent> out;
  for (uint64_t b = 0; b < kBatches; ++b) {
    for (int r = 0; r < kRanks; ++r) {
      TelemetryBatchEvent e{7, r, {}};
      for (uint64_t i = 0; i < kPerBatch; ++i) {
        e.events.push_back(sampleEvent((b * kPerBatch + i) * kRanks + static_cast<uint64_t>(r), r));
      }
      out.push_back(std::move(e));
    }
  }
  return out;
}

size_t eventCount(const std::vector<TelemetryBatchEvent>& batches) {
  size_t n = 0;
  for (const auto& b : batches) n += b.events.size();
  return n;
}

void collectMerge(benchmark::State& state) {
  const std::vector<TelemetryBatchEvent> batches = arrivals();
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<TelemetryBatchEvent> copy = batches;
    state.ResumeTiming();
    TelemetryCollector c;
    for (auto& b : copy) c.add(b);
    benchmark::DoNotOptimize(c.take());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * eventCount(batches)));
}
BENCHMARK(collectMerge)->Name("Telemetry/collect/merge")->Unit(benchmark::kMillisecond);

void collectSort(benchmark::State& state) {
  const std::vector<TelemetryBatchEvent> batches = arrivals();
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<TelemetryBatchEvent> copy = batches;
    state.ResumeTiming();
    std::vector<TelemetryEvent> all;
    for (auto& b : copy) all.insert(all.end(), b.events.begin(), b.events.end());
    sortByTime(all);
    benchmark::DoNotOptimize(all);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * eventCount(batches)));
}
BENCHMARK(collectSort)->Name("Telemetry/collect/sort")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
