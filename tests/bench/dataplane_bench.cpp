// Throughput and small-message round trips of the two data planes between two ranks in one
// process, each rank with a data plane of its own as two worker processes would have:
//
//   DataPlane/shm/<size>                         arl::ShmDataPlane, shared-memory rings
//   DataPlane/{ipc,tcp}/{zerocopy,copy}/<size>   arl::ZmqDataPlane over ipc:// or
//                                                tcp://127.0.0.1, zero-copy or copying sends,
//                                                each rank with its own ZeroMQ context and
//                                                I/O thread
//   DataPlane/tcpplane/<size>                    arl::TcpDataPlane, plain TCP on 127.0.0.1
//                                                read and written by the ranks' own threads
//   DataPlane/{shm,ipc,tcp,tcpplane}/pingpong/{16B,4KiB}
//                                                round trip of a 16-byte or 4 KiB message
//
// Throughput, 64 KiB to 16 MiB messages: one sender thread (rank 0) and one receiver thread
// (rank 1). The sender keeps at most 4 sends in flight, as the executor does with its default
// ExecOptions::inflight. A shm send (like a copying ZeroMQ one) is complete on return, so
// there the bound is the transport's own: the receiver's ring, sized as the worker sizes it,
// shmRingBytes(message, 4) (room for 6 messages). The receiver takes each message and drops it
// without reading the payload, so the figure is the transport's alone: for shm one copy, into
// the receiver's ring; for ZeroMQ what it takes to hand the receiver a message (copying sends:
// into ZeroMQ's buffer, through the socket, into a fresh receive buffer). One iteration moves
// at least 64 MiB and ends when the receiver has every message. GB/s is 1e9 bytes per second
// of wall time. As the receiver reads nothing, a shm ring that fits in the last-level cache
// (5 messages of 64 KiB or 1 MiB) stays there: those figures are a memcpy within the cache,
// an upper bound for a receiver that reduces the data out of the ring.
//
// Round trip: rank 0 sends a 16-byte or 4 KiB message and waits for the answer; rank 1
// (another thread) receives each message, drops it unread and sends one as large back. The time of
// one iteration is one round trip (two messages, each one send and one receive), in microseconds of
// wall time; 16 untimed round trips come first (they connect ZeroMQ's sockets). ZeroMQ copies 4 KiB
// payloads (below BindOptions::zeroCopyMinBytes), so it has no zero-copy variant here.
//
// The shm cases wait as a worker does: ShmOptions' defaults, or ARL_SHM_SPIN_US and
// ARL_SHM_YIELD_US when set (docs/dataplane.md); the values used head the output. On a machine
// with fewer free cores than the two threads need, the round trips measure the scheduler.
//
//   dataplane_bench                                    # everything, once
//   dataplane_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
//   dataplane_bench --benchmark_filter='ipc/.*/1MiB'
//   dataplane_bench --benchmark_filter='shm/|pingpong'
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/errors.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/transport.h"
#include "transport/zmq/zmq_transport.h"

namespace {

using arl::BindOptions;
using arl::ChunkHeader;
using arl::SendCompletion;
using arl::ShmDataPlane;
using arl::ShmOptions;
using arl::TcpDataPlane;
using arl::Transport;
using arl::ZmqDataPlane;

constexpr size_t KiB = size_t{1} << 10;
constexpr size_t MiB = size_t{1} << 20;
constexpr int kInflight = 4;
constexpr int kWarmupRoundTrips = 16;
constexpr std::chrono::seconds kRecvTimeout{30};

// Two ranks of the ZeroMQ data plane; rank 1 sends to rank 0 only when `duplex`.
struct ZmqPair {
  ZmqDataPlane r0{0, 2};
  ZmqDataPlane r1{1, 2};

  ZmqPair(const BindOptions& opt, bool duplex) {
    const std::vector<std::string> endpoints = {r0.bind(opt), r1.bind(opt)};
    r0.connect(endpoints, {1});
    r1.connect(endpoints, duplex ? std::vector<int>{0} : std::vector<int>{});
  }
  // Both ranks close at once, as finished workers do, so each goodbye meets its peer's.
  void close() {
    std::thread closer([&] { r1.close(); });
    r0.close();
    closer.join();
  }
};

// Two ranks of the TCP data plane, connected both ways (one connection per pair).
struct TcpPair {
  TcpDataPlane r0{0, 2};
  TcpDataPlane r1{1, 2};

  TcpPair(const BindOptions& opt, bool /*duplex*/) {
    const std::vector<std::string> endpoints = {r0.bind(opt), r1.bind(opt)};
    std::thread other([&] { r1.connect(endpoints, {0}); });
    r0.connect(endpoints, {1});
    other.join();
  }
  void close() {
    std::thread closer([&] { r1.close(); });
    r0.close();
    closer.join();
  }
};

// Two ranks of the shared-memory data plane; rank 1 sends to rank 0 only when `duplex`.
struct ShmPair {
  ShmDataPlane r0{0, 2};
  ShmDataPlane r1{1, 2};

  ShmPair(const ShmOptions& opt, bool duplex) {
    const std::vector<int> none;
    const std::vector<std::string> endpoints = {r0.bind(opt, duplex ? std::vector<int>{1} : none),
                                                r1.bind(opt, {0})};
    r0.connect(endpoints, {1});
    r1.connect(endpoints, duplex ? std::vector<int>{0} : none);
  }
  // No goodbye exchange: what a closed rank sent stays readable.
  void close() {
    r0.close();
    r1.close();
  }
};

std::string joinErrors(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + "; " + b;
}

template <class Pair, class Options>
void throughput(benchmark::State& state, const Options& opt, size_t bytes) {
  Pair pair(opt, false);
  Transport& tx = pair.r0;
  Transport& rx = pair.r1;

  const size_t batch = std::max<size_t>(8, 64 * MiB / bytes);
  const uint64_t total = static_cast<uint64_t>(state.max_iterations) * batch;
  std::vector<unsigned char> payload(bytes);
  std::memset(payload.data(), 0x5a, bytes);  // touched once, outside the timing

  std::atomic<uint64_t> received{0};
  std::string rxError;
  std::thread receiver([&] {
    try {
      for (uint64_t i = 0; i < total; ++i) {
        rx.recv(0, static_cast<uint32_t>(i), kRecvTimeout);  // dropped unread
        received.store(i + 1, std::memory_order_release);
        received.notify_one();
      }
    } catch (const arl::PeerError& e) {
      rxError = e.what();
      tx.abort();  // a sender waiting for room would wait for a reader that is gone
      received.store(total, std::memory_order_release);
      received.notify_one();
    }
  });

  uint64_t sent = 0;
  std::deque<std::shared_ptr<SendCompletion>> window;
  std::string txError;
  for (auto _ : state) {
    try {
      for (size_t i = 0; i < batch; ++i, ++sent) {
        if (window.size() >= kInflight) {
          window.front()->wait();
          window.pop_front();
        }
        ChunkHeader h;
        h.step = static_cast<uint32_t>(sent);
        window.push_back(tx.send(1, h, payload.data(), bytes));
      }
    } catch (const arl::PeerError& e) {
      txError = e.what();
      rx.abort();  // the receiver would wait for messages that never come
      break;
    }
    for (uint64_t got = received.load(std::memory_order_acquire); got < sent;
         got = received.load(std::memory_order_acquire)) {
      received.wait(got, std::memory_order_acquire);
    }
  }
  receiver.join();
  if (!txError.empty() || !rxError.empty()) {
    tx.abort();  // close() then releases the payloads at once
    rx.abort();
    state.SkipWithError(joinErrors(txError, rxError).c_str());
  }
  window.clear();
  pair.close();

  const double moved = static_cast<double>(state.iterations()) * static_cast<double>(batch) *
                       static_cast<double>(bytes);
  state.SetBytesProcessed(static_cast<int64_t>(moved));
  state.counters["GB/s"] = benchmark::Counter(moved / 1e9, benchmark::Counter::kIsRate);
  state.counters["msgs"] = static_cast<double>(batch);
}

template <class Pair, class Options>
void roundTrip(benchmark::State& state, const Options& opt, size_t pingBytes) {
  Pair pair(opt, true);
  Transport& a = pair.r0;
  Transport& b = pair.r1;

  const uint64_t total = kWarmupRoundTrips + static_cast<uint64_t>(state.max_iterations);
  std::vector<unsigned char> ping(pingBytes, 0x5a);
  std::vector<unsigned char> pong(pingBytes, 0xa5);

  std::string echoError;
  std::thread echo([&] {
    try {
      for (uint64_t i = 0; i < total; ++i) {
        const auto step = static_cast<uint32_t>(i);
        b.recv(0, step, kRecvTimeout);  // dropped unread
        ChunkHeader h;
        h.step = step;
        b.send(0, h, pong.data(), pong.size())->wait();
      }
    } catch (const arl::PeerError& e) {
      echoError = e.what();
      a.abort();  // rank 0 would wait for answers that never come
    }
  });

  uint64_t done = 0;
  const auto once = [&] {
    const auto step = static_cast<uint32_t>(done);
    ChunkHeader h;
    h.step = step;
    a.send(1, h, ping.data(), ping.size())->wait();
    a.recv(1, step, kRecvTimeout);  // dropped unread
    ++done;
  };
  std::string error;
  try {
    for (int i = 0; i < kWarmupRoundTrips; ++i) once();
  } catch (const arl::PeerError& e) {
    error = e.what();
  }
  if (error.empty()) {
    for (auto _ : state) {
      try {
        once();
      } catch (const arl::PeerError& e) {
        error = e.what();
        break;
      }
    }
  }
  if (!error.empty()) b.abort();  // the echo would wait for messages that never come
  echo.join();
  if (!error.empty() || !echoError.empty()) {
    a.abort();
    b.abort();
    state.SkipWithError(joinErrors(error, echoError).c_str());
  }
  pair.close();

  state.SetItemsProcessed(state.iterations());  // items_per_second: round trips per second
}

std::string sizeName(size_t bytes) {
  if (bytes < KiB) return std::to_string(bytes) + "B";
  return bytes >= MiB ? std::to_string(bytes / MiB) + "MiB" : std::to_string(bytes / KiB) + "KiB";
}

void registerAll(const ShmOptions& waits) {
  for (size_t bytes : {64 * KiB, 1 * MiB, 16 * MiB}) {
    ShmOptions opt = waits;
    opt.ringBytes = arl::shmRingBytes(bytes, kInflight);
    benchmark::RegisterBenchmark(
        ("DataPlane/shm/" + sizeName(bytes)).c_str(),
        [opt, bytes](benchmark::State& st) { throughput<ShmPair>(st, opt, bytes); })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (auto kind : {BindOptions::Kind::Ipc, BindOptions::Kind::Tcp}) {
    const std::string kindName = kind == BindOptions::Kind::Ipc ? "ipc" : "tcp";
    for (bool zeroCopy : {true, false}) {
      for (size_t bytes : {64 * KiB, 1 * MiB, 16 * MiB}) {
        BindOptions opt;
        opt.kind = kind;
        if (!zeroCopy) {
          opt.zeroCopyMinBytes = std::numeric_limits<size_t>::max();
        }
        const std::string name = "DataPlane/" + kindName + "/" + (zeroCopy ? "zerocopy" : "copy") +
                                 "/" + sizeName(bytes);
        benchmark::RegisterBenchmark(
            name.c_str(),
            [opt, bytes](benchmark::State& st) { throughput<ZmqPair>(st, opt, bytes); })
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }

  for (size_t bytes : {64 * KiB, 1 * MiB, 16 * MiB}) {
    BindOptions opt;
    opt.kind = BindOptions::Kind::Tcp;
    benchmark::RegisterBenchmark(
        ("DataPlane/tcpplane/" + sizeName(bytes)).c_str(),
        [opt, bytes](benchmark::State& st) { throughput<TcpPair>(st, opt, bytes); })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (size_t bytes : {size_t{16}, 4 * KiB}) {
    ShmOptions shm = waits;
    shm.ringBytes = arl::shmRingBytes(bytes, kInflight);
    benchmark::RegisterBenchmark(
        ("DataPlane/shm/pingpong/" + sizeName(bytes)).c_str(),
        [shm, bytes](benchmark::State& st) { roundTrip<ShmPair>(st, shm, bytes); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    for (auto kind : {BindOptions::Kind::Ipc, BindOptions::Kind::Tcp}) {
      BindOptions opt;
      opt.kind = kind;
      const std::string name = std::string("DataPlane/") +
                               (kind == BindOptions::Kind::Ipc ? "ipc" : "tcp") + "/pingpong/" +
                               sizeName(bytes);
      benchmark::RegisterBenchmark(
          name.c_str(), [opt, bytes](benchmark::State& st) { roundTrip<ZmqPair>(st, opt, bytes); })
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
    BindOptions tcp;
    tcp.kind = BindOptions::Kind::Tcp;
    benchmark::RegisterBenchmark(
        ("DataPlane/tcpplane/pingpong/" + sizeName(bytes)).c_str(),
        [tcp, bytes](benchmark::State& st) { roundTrip<TcpPair>(st, tcp, bytes); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  ShmOptions waits;
  try {
    waits = arl::shmWaitsFromEnv(waits);  // as the worker reads them
  } catch (const arl::ConfigError& e) {
    std::fprintf(stderr, "dataplane_bench: %s\n", e.what());
    return 2;
  }
  benchmark::AddCustomContext("shm_spin_us", std::to_string(waits.spin.count()));
  benchmark::AddCustomContext("shm_yield_us", std::to_string(waits.yieldFor.count()));
  registerAll(waits);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
