// Loopback transport: FIFO channels, copies, timeouts, failure, abort and link shaping; and
// runLocal's handling of a failing rank. Timing checks are lower bounds that follow from
// causality (a message cannot be seen before it is visible), never speed claims.
#include "transport/loopback.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <thread>

#include "base/clock.h"
#include "base/errors.h"
#include "exec/local_run.h"
#include "schedule/generators.h"

namespace arl {
namespace {

using namespace std::chrono_literals;

ChunkHeader header(int src, uint32_t step, uint32_t chunk = 0) {
  ChunkHeader h;
  h.src = src;
  h.step = step;
  h.chunk = chunk;
  return h;
}

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const PeerError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Loopback, DeliversInOrderPerChannelAndCopiesThePayload) {
  LoopbackFabric fabric(3);
  int a = 1;
  int b = 2;
  auto c1 = fabric.transport(0).send(2, header(0, 0, 10), &a, sizeof a);
  EXPECT_TRUE(c1->done()) << "a loopback send completes on return";
  a = 99;  // the sender may reuse its buffer at once
  fabric.transport(0).send(2, header(0, 1, 11), &b, sizeof b);
  const int c = 3;
  fabric.transport(1).send(2, header(1, 0, 12), &c, sizeof c);

  auto m1 = fabric.transport(2).recv(1, 0, 1s);
  EXPECT_EQ(m1->header().chunk, 12u);
  auto m2 = fabric.transport(2).recv(0, 0, 1s);
  auto m3 = fabric.transport(2).recv(0, 1, 1s);
  ASSERT_EQ(m2->size(), sizeof(int));
  int v = 0;
  std::memcpy(&v, m2->data(), sizeof v);
  EXPECT_EQ(v, 1);
  std::memcpy(&v, m3->data(), sizeof v);
  EXPECT_EQ(v, 2);
  EXPECT_EQ(m2->header().chunk, 10u);
  EXPECT_EQ(m3->header().chunk, 11u);
}

TEST(Loopback, TimeoutNamesPeerAndStep) {
  LoopbackFabric fabric(2);
  EXPECT_EQ(errorOf([&] { fabric.transport(1).recv(0, 7, 30ms); }),
            "rank 1: no data from rank 0 for step 7 within 30 ms");
}

// Every transport's timeout reads so: whole seconds in s, anything else in ms.
TEST(Loopback, TimeoutsReadInWholeSecondsOrMilliseconds) {
  EXPECT_EQ(formatDuration(0ms), "0 ms");
  EXPECT_EQ(formatDuration(250ms), "250 ms");
  EXPECT_EQ(formatDuration(1000ms), "1 s");
  EXPECT_EQ(formatDuration(1500ms), "1500 ms");
  EXPECT_EQ(formatDuration(30000ms), "30 s");
}

TEST(Loopback, FailedRankWakesItsReceiversPromptly) {
  LoopbackFabric fabric(3);
  const int x = 5;
  fabric.transport(0).send(1, header(0, 0), &x, sizeof x);
  std::string err;
  std::thread waiter([&] {
    // The message sent before the failure still arrives; the next receive learns of it.
    auto m = fabric.transport(1).recv(0, 0, 10s);
    err = errorOf([&] { fabric.transport(1).recv(0, 3, 10s); });
  });
  std::this_thread::sleep_for(20ms);
  fabric.fail(0);
  waiter.join();
  // The error names the failure, not a timeout: the waiter did not sit out its 10 s.
  EXPECT_EQ(err, "rank 1: rank 0 failed at step 3");
  EXPECT_EQ(errorOf([&] { fabric.transport(2).send(0, header(2, 4), &x, sizeof x); }),
            "rank 2: rank 0 failed at step 4");
  EXPECT_EQ(errorOf([&] { fabric.transport(2).recv(0, 5, 10s); }),
            "rank 2: rank 0 failed at step 5");
}

TEST(Loopback, AbortWakesEveryBlockedReceiver) {
  LoopbackFabric fabric(3);
  std::vector<std::string> errs(3);
  std::vector<std::thread> threads;
  threads.reserve(3);
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      errs[static_cast<size_t>(r)] =
          errorOf([&] { fabric.transport(r).recv((r + 1) % 3, 1, 10s); });
    });
  }
  std::this_thread::sleep_for(20ms);
  fabric.abort();
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    const std::string& e = errs[static_cast<size_t>(r)];
    EXPECT_EQ(e.rfind("rank " + std::to_string(r) + ": run aborted", 0), 0u) << e;
    EXPECT_NE(e.find("rank " + std::to_string((r + 1) % 3)), std::string::npos) << e;
  }
  int x = 0;
  EXPECT_NE(errorOf([&] { fabric.transport(0).send(1, header(0, 2), &x, sizeof x); }),
            "(no error)");
}

TEST(Loopback, ShapingDelaysVisibility) {
  LinkShaping shaping;
  shaping.addedLatencySeconds = 0.030;
  shaping.linkBytesPerSecond[{0, 1}] = 1e6;  // 10 000 bytes take 10 ms on the link 0 -> 1
  LoopbackFabric fabric(2, shaping);
  std::vector<unsigned char> payload(10000, 7);
  const int64_t t0 = steadyNowNs();
  fabric.transport(0).send(1, header(0, 0), payload.data(), payload.size());
  fabric.transport(0).send(1, header(0, 1), payload.data(), payload.size());
  fabric.transport(0).send(1, header(0, 2), nullptr, 0);
  auto m1 = fabric.transport(1).recv(0, 0, 5s);
  const int64_t t1 = steadyNowNs();
  auto m2 = fabric.transport(1).recv(0, 1, 5s);
  const int64_t t2 = steadyNowNs();
  // Lower bounds: each message's link time queues behind the previous one's.
  EXPECT_GE(t1 - t0, 40'000'000);
  EXPECT_GE(t2 - t0, 50'000'000);
  EXPECT_EQ(m2->size(), 10000u);
  // The reverse link has no rate, only the latency.
  const int64_t t3 = steadyNowNs();
  fabric.transport(1).send(0, header(1, 0), payload.data(), 4);
  fabric.transport(0).recv(1, 0, 5s);
  EXPECT_GE(steadyNowNs() - t3, 30'000'000);
  EXPECT_LT(steadyNowNs() - t3, 1'000'000'000) << "a 4-byte message waited for a rate";
}

// ready() is true exactly when a receive would not wait: a message is queued and, when
// shaped, the pacing has made it visible. The lower bound on the shaped wait is causality.
TEST(Loopback, ReadySaysWhetherAReceiveWouldWait) {
  LoopbackFabric fabric(2);
  int a = 5;
  EXPECT_FALSE(fabric.transport(1).ready(0, 0));
  fabric.transport(0).send(1, header(0, 0), &a, sizeof a);
  EXPECT_TRUE(fabric.transport(1).ready(0, 0));
  EXPECT_FALSE(fabric.transport(0).ready(1, 0));  // the other direction has nothing
  EXPECT_EQ(fabric.transport(1).recv(0, 0, 1s)->size(), sizeof a);
  EXPECT_FALSE(fabric.transport(1).ready(0, 1));

  LinkShaping shaping;
  shaping.addedLatencySeconds = 0.2;
  LoopbackFabric slow(2, shaping);
  const int64_t t0 = steadyNowNs();
  slow.transport(0).send(1, header(0, 0), &a, sizeof a);
  while (!slow.transport(1).ready(0, 0)) std::this_thread::sleep_for(1ms);
  EXPECT_GE(steadyNowNs() - t0, 200'000'000);
  EXPECT_EQ(slow.transport(1).recv(0, 0, 1s)->size(), sizeof a);
  slow.abort();
  EXPECT_FALSE(slow.transport(1).ready(0, 0));
}

TEST(Loopback, ShapingIsCheckedForTheWorld) {
  LinkShaping bad;
  bad.rankPortBytesPerSecond[2] = 1e6;
  EXPECT_THROW(LoopbackFabric(2, bad), ConfigError);
}

TEST(Loopback, AbortEndsAPacingWait) {
  LinkShaping shaping;
  shaping.addedLatencySeconds = 10;
  LoopbackFabric fabric(2, shaping);
  int x = 1;
  fabric.transport(0).send(1, header(0, 0), &x, sizeof x);
  std::thread aborter([&] {
    std::this_thread::sleep_for(30ms);
    fabric.abort();
  });
  const int64_t t0 = steadyNowNs();
  const std::string e = errorOf([&] { fabric.transport(1).recv(0, 0, 60s); });
  aborter.join();
  EXPECT_EQ(e.rfind("rank 1: run aborted", 0), 0u) << e;
  EXPECT_LT(steadyNowNs() - t0, 5'000'000'000);
}

Schedule ring(Collective c, int n, uint64_t count, uint64_t slice) {
  GenParams p;
  p.collective = c;
  p.nranks = n;
  p.count = count;
  p.sliceElems = slice;
  return generate("ring", p);
}

// With latency L on every link, every message is received at least L after it was sent, and
// the ring's chain of 2(n-1) dependent messages makes the iteration at least 2(n-1) L long.
TEST(LocalRun, LinkLatencyOrdersTelemetryTimestamps) {
  const int n = 3;
  const auto latency = 5ms;
  const Schedule s = ring(Collective::AllReduce, n, 60, 100);
  BoundedSink sink(100000);
  LocalRunOptions opt;
  opt.telemetry = TelemetryLevel::Chunks;
  opt.sink = &sink;
  opt.shaping.addedLatencySeconds = std::chrono::duration<double>(latency).count();
  const LocalRunResult res = runLocal(s, opt);
  EXPECT_EQ(res.wrong, 0u);
  const auto events = sink.take();
  std::map<std::pair<int, int>, std::vector<int64_t>> sent;
  std::map<std::pair<int, int>, std::vector<int64_t>> received;
  int64_t first = std::numeric_limits<int64_t>::max();
  int64_t last = 0;
  for (const TelemetryEvent& e : events) {
    first = std::min(first, e.tNs);
    last = std::max(last, e.tNs);
    if (e.kind == EventKind::SendStart) sent[{e.rank, e.peer}].push_back(e.tNs);
    if (e.kind == EventKind::RecvEnd) received[{e.peer, e.rank}].push_back(e.tNs);
  }
  const int64_t l = std::chrono::nanoseconds(latency).count();
  size_t pairs = 0;
  for (const auto& [chan, ts] : sent) {
    const auto& rs = received[chan];
    ASSERT_EQ(rs.size(), ts.size());
    for (size_t k = 0; k < ts.size(); ++k, ++pairs) EXPECT_GE(rs[k] - ts[k], l);
  }
  EXPECT_EQ(pairs, static_cast<size_t>(2 * (n - 1) * n));
  EXPECT_GE(last - first, 2 * (n - 1) * l);
  EXPECT_GE(res.timeUs, 2.0 * (n - 1) * static_cast<double>(l) / 1e3);
}

TEST(LocalRun, InjectedFailureStopsEveryRankAndNamesTheFailingOne) {
  const Schedule s = ring(Collective::AllReduce, 4, 400, 10);
  LocalRunOptions opt;
  opt.stallTimeout = 10s;
  opt.failRank = 2;
  opt.failAtOp = 3;
  opt.iterations = 3;
  const auto t0 = SteadyClock::now();
  try {
    runLocal(s, opt);
    ADD_FAILURE() << "no error";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.rank, 2);
    EXPECT_EQ(std::string(e.what()).rfind("rank 2: injected failure before op 3", 0), 0u)
        << e.what();
  }
  // Every other rank was stopped by the abort rather than by the 10 s stall timeout.
  EXPECT_LT(SteadyClock::now() - t0, opt.stallTimeout);
}

TEST(LocalRun, RefusesBadOptions) {
  const Schedule s = ring(Collective::AllReduce, 2, 8, 4);
  LocalRunOptions opt;
  opt.iterations = 0;
  EXPECT_THROW(runLocal(s, opt), ConfigError);
  opt.iterations = 1;
  opt.inflight = 0;
  EXPECT_THROW(runLocal(s, opt), ConfigError);
  opt.inflight = 1;
  opt.failRank = 2;
  EXPECT_THROW(runLocal(s, opt), ConfigError);
}

}  // namespace
}  // namespace arl
