// One valid control message of every type: the codec's tests start from them, and the fuzz
// target of control frames (tests/fuzz) has its seeds written from them.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "runtime/protocol.h"

namespace arl {

inline RunConfig sampleConfig(int n = 4) {
  RunConfig c;
  c.runId = 42;
  c.epoch = 7;
  c.worldSize = n;
  c.algorithm = "ring";
  c.collective = Collective::AllReduce;
  c.dtype = DataType::Float;
  c.op = RedOp::Sum;
  c.count = 1 << 20;
  c.sliceBytes = 1 << 16;
  c.root = 0;
  c.ranksPerHost = static_cast<uint32_t>(n);
  c.inflight = 4;
  c.warmup = 2;
  c.iterations = 10;
  c.telemetry = TelemetryLevel::Chunks;

  for (int r = 0; r < n; ++r) c.ringOrder.push_back(n - 1 - r);
  return c;
}

inline TelemetryEvent sampleEvent(int i, int32_t rank, uint64_t runId) {
  TelemetryEvent e;
  e.runId = runId;
  e.rank = rank;
  e.iteration = static_cast<uint32_t>(i / 24);
  e.step = static_cast<uint32_t>(i % 6);
  e.kind = static_cast<EventKind>(i % 6);
  e.phase = static_cast<uint8_t>(i % 5);
  e.peer = (i % 7 == 0) ? -1 : (rank + 1) % 4;
  e.chunk = static_cast<uint32_t>(i % 4);
  e.offset = static_cast<uint64_t>(i % 4) * 65536;
  e.bytes = 262144;
  e.tNs = 5'000'000'000 + int64_t{i} * 1'700;
  e.provenance = (uint64_t{1} << (i % 4 + 1)) - 1;
  return e;
}

inline TelemetryBatch sampleBatch(size_t events) {
  TelemetryBatch b;
  b.epoch = 7;
  b.rank = 2;
  b.runId = 42;
  b.seq = 3;
  b.dropped = 11;
  for (size_t i = 0; i < events; ++i) b.events.push_back(sampleEvent(static_cast<int>(i), 2, 42));
  return b;
}

// A rank's collective that was aborted at step 3 of 6 waiting on rank 1.
inline CollectiveRecord sampleCollectiveRecord() {
  CollectiveRecord c;
  c.run = {7, "ring", Collective::AllReduce, DataType::Float, 1024, 4, 4096, 6};
  c.place = {IterationPlace::Kind::Timed, 2};
  c.startNs = 1000;
  c.endNs = 2000;
  c.lastStep = 2;
  c.waitedOn = 1u << 1;
  c.state = CollectiveState::Aborted;
  return c;
}

// One valid message of every type, in MsgType order.
inline std::vector<Message> sampleMessages() {
  return {
      Hello{"worker-a", "node01", 4242, "cpu", -1, kProtocolVersion},
      Welcome{3, 4, 250, 4},
      Ping{9, 123'456'789},
      Pong{9, 123'456'789, 987'654'321, 987'654'400},
      Heartbeat{true, 5, 3},
      sampleConfig(),
      Ready{7, 1, 42, "tcp://10.0.0.5:45123", -1'500'000},
      Start{7, 42, {"tcp://10.0.0.5:45123", "ipc:///tmp/arl-test/rank1"}},
      IterationResult{7, 1, 9, 1'234'567, 0},
      sampleBatch(50),
      RunDone{7, 1, 0, 0},
      RunFailed{7, 2, 1, 5, 3, "no data from rank 1 for step 5 within 3 s"},
      Abort{7, 42, "rank 2 failed"},
      Shutdown{"session closed"},
      Log{LogLevel::Warning, "slow link between rank 0 and rank 1"},
      StoreSet{7, 1, "1",
               std::string("\0\x01"
                           "addr",
                           6)},
      StoreGet{7, 2, 5, "1"},
      StoreValue{7, 5, true,
                 std::string("\0\x01"
                             "addr",
                             6)},
      FlightRecord{7, 2, 1, {sampleCollectiveRecord()}},
  };
}

}  // namespace arl
