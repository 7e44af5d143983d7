// Throughput of the ZeroMQ data plane between two ranks in one process (each with its own
// ZeroMQ context and I/O thread, as two worker processes would have): ipc:// against
// tcp://127.0.0.1, zero-copy sends against copying ones, 64 KiB to 16 MiB messages.
//
// The sender keeps at most 4 sends in flight, as the executor does with its default
// ExecOptions::inflight; the receiver takes each message and drops it without reading the
// payload, so the figure is the transport's alone. One iteration moves at least 64 MiB and
// ends when the receiver has every message. GB/s is 1e9 bytes per second of wall time.
//
//   dataplane_bench                                    # everything, once
//   dataplane_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
//   dataplane_bench --benchmark_filter='ipc/.*/1MiB'
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "arl/errors.h"
#include "arl/zmq_transport.h"

namespace {

using arl::BindOptions;
using arl::ChunkHeader;
using arl::SendCompletion;
using arl::ZmqDataPlane;

constexpr size_t KiB = size_t{1} << 10;
constexpr size_t MiB = size_t{1} << 20;
constexpr int kInflight = 4;

void dataPlaneThroughput(benchmark::State& state, BindOptions::Kind kind, bool zeroCopy,
                         size_t bytes) {
  BindOptions opt;
  opt.kind = kind;
  if (!zeroCopy) {
    opt.zeroCopyMinBytes = std::numeric_limits<size_t>::max();
  }
  ZmqDataPlane tx(0, 2);
  ZmqDataPlane rx(1, 2);
  const std::vector<std::string> endpoints = {tx.bind(opt), rx.bind(opt)};
  tx.connect(endpoints, {1});
  rx.connect(endpoints, {});

  const size_t batch = std::max<size_t>(8, 64 * MiB / bytes);
  const uint64_t total = static_cast<uint64_t>(state.max_iterations) * batch;
  std::vector<unsigned char> payload(bytes);
  std::memset(payload.data(), 0x5a, bytes);  // touched once, outside the timing

  std::atomic<uint64_t> received{0};
  std::string rxError;
  std::thread receiver([&] {
    try {
      for (uint64_t i = 0; i < total; ++i) {
        rx.recv(0, static_cast<uint32_t>(i), std::chrono::seconds(30));
        received.store(i + 1, std::memory_order_release);
        received.notify_one();
      }
    } catch (const arl::PeerError& e) {
      rxError = e.what();
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
  if (!txError.empty()) {
    tx.abort();  // close() then releases the payloads at once
  }
  receiver.join();
  if (!txError.empty() || !rxError.empty()) {
    state.SkipWithError((txError.empty() ? rxError : txError).c_str());
  }
  // Both ranks close at once, as finished workers do, so each goodbye meets its peer's.
  std::thread closer([&] { rx.close(); });
  tx.close();
  closer.join();

  const double moved = static_cast<double>(state.iterations()) * static_cast<double>(batch) *
                       static_cast<double>(bytes);
  state.SetBytesProcessed(static_cast<int64_t>(moved));
  state.counters["GB/s"] = benchmark::Counter(moved / 1e9, benchmark::Counter::kIsRate);
  state.counters["msgs"] = static_cast<double>(batch);
}

const bool kRegistered = [] {
  for (auto kind : {BindOptions::Kind::Ipc, BindOptions::Kind::Tcp}) {
    for (bool zeroCopy : {true, false}) {
      for (size_t bytes : {64 * KiB, 1 * MiB, 16 * MiB}) {
        const std::string name = std::string("DataPlane/") +
                                 (kind == BindOptions::Kind::Ipc ? "ipc" : "tcp") + "/" +
                                 (zeroCopy ? "zerocopy" : "copy") + "/" +
                                 (bytes >= MiB ? std::to_string(bytes / MiB) + "MiB"
                                               : std::to_string(bytes / KiB) + "KiB");
        benchmark::RegisterBenchmark(name.c_str(), dataPlaneThroughput, kind, zeroCopy, bytes)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
