// Pacing by a LinkShaping in every data plane (loopback, shared memory, ZeroMQ): a shaped
// transfer takes about the time its rate says, a receiver fed by several senders is held by
// its ingress port, and an added latency delays every message without serializing them.
// Tolerances are loose (0.7x to 3x of the shaped time): they tell pacing from none, not
// one machine's speed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/errors.h"
#include "transport/loopback.h"
#include "transport/pacing.h"
#include "transport/shm/shm_transport.h"
#include "transport/zmq/zmq_transport.h"
#include "transport_test_util.h"

namespace arl {
namespace {

using namespace std::chrono_literals;
using transport_test::headerFor;
using transport_test::onThreads;

enum class Plane { Loopback, Shm, Zmq };

std::string planeName(const testing::TestParamInfo<Plane>& p) {
  switch (p.param) {
    case Plane::Loopback: return "Loopback";
    case Plane::Shm: return "Shm";
    case Plane::Zmq: return "Zmq";
  }
  return "?";
}

// n endpoints of one plane, each rank connected to every other, shaped by `shaping`.
struct World {
  std::unique_ptr<LoopbackFabric> fabric;
  std::vector<std::unique_ptr<ShmDataPlane>> shm;
  std::vector<std::unique_ptr<ZmqDataPlane>> zmq;

  Transport& operator[](int r) {
    const auto i = static_cast<size_t>(r);
    if (fabric) return fabric->transport(r);
    if (!shm.empty()) return *shm[i];
    return *zmq[i];
  }
  // ZeroMQ's close() says goodbye to the peers: close them all at once.
  ~World() {
    if (!zmq.empty())
      onThreads(static_cast<int>(zmq.size()), [&](int r) { zmq[static_cast<size_t>(r)]->close(); });
  }
};

std::vector<int> othersOf(int rank, int n) {
  std::vector<int> v;
  for (int p = 0; p < n; ++p) {
    if (p != rank) v.push_back(p);
  }
  return v;
}

std::unique_ptr<World> makeWorld(Plane plane, int n, const LinkShaping& shaping,
                                 size_t maxMessage) {
  auto w = std::make_unique<World>();
  std::vector<std::string> endpoints;
  if (plane == Plane::Loopback) {
    w->fabric = std::make_unique<LoopbackFabric>(n, shaping);
    return w;
  }
  for (int r = 0; r < n; ++r) {
    if (plane == Plane::Shm) {
      ShmOptions o;
      o.ringBytes = shmRingBytes(maxMessage, 2);
      o.shaping = shaping;
      w->shm.push_back(std::make_unique<ShmDataPlane>(r, n));
      endpoints.push_back(w->shm.back()->bind(o, othersOf(r, n)));
    } else {
      BindOptions o;
      o.shaping = shaping;
      w->zmq.push_back(std::make_unique<ZmqDataPlane>(r, n));
      endpoints.push_back(w->zmq.back()->bind(o));
    }
  }
  for (int r = 0; r < n; ++r) {
    if (plane == Plane::Shm) w->shm[static_cast<size_t>(r)]->connect(endpoints, othersOf(r, n));
    if (plane == Plane::Zmq) w->zmq[static_cast<size_t>(r)]->connect(endpoints, othersOf(r, n));
  }
  return w;
}

// Seconds for `senders` (ranks 1..senders) to each send `bytes` to rank 0, from before the
// first send until rank 0 has taken every message.
double fanInSeconds(World& w, int senders, size_t bytes) {
  const std::vector<unsigned char> payload(bytes, 3);
  const int64_t t0 = steadyNowNs();
  int64_t t1 = 0;
  onThreads(senders + 1, [&](int r) {
    if (r == 0) {
      for (int s = 1; s <= senders; ++s) {
        auto m = w[0].recv(s, 0, 30s);
        ASSERT_EQ(m->size(), bytes);
      }
      t1 = steadyNowNs();
    } else {
      w[r].send(0, headerFor(0), payload.data(), payload.size())->wait();
    }
  });
  return static_cast<double>(t1 - t0) / 1e9;
}

// Upper bounds catch pacing that is far too slow; a loaded 2-core machine adds up to this much
// to any timed transfer (lower bounds need no slack: load only ever slows a transfer). With
// two CPU-bound programs beside the test, the shared-memory plane's 84 ms transfer took
// 435 ms and its three-message ones 834 and 967 ms (each waiter waits out a time slice).
constexpr double kSlack = 0.75;

class Pacing : public testing::TestWithParam<Plane> {};

TEST_P(Pacing, AShapedTransferTakesTheTimeItsRateSays) {
  LinkShaping s;
  s.portBytesPerSecond = 50e6;
  const size_t bytes = size_t{4} << 20;
  auto w = makeWorld(GetParam(), 2, s, bytes);
  const double expected = static_cast<double>(bytes) / 50e6;  // 84 ms
  const double took = fanInSeconds(*w, 1, bytes);
  EXPECT_GE(took, 0.7 * expected);
  EXPECT_LE(took, 3.0 * expected + kSlack);
}

TEST_P(Pacing, AReceiverFedByThreeSendersIsHeldByItsIngress) {
  LinkShaping s;
  s.portBytesPerSecond = 50e6;
  const size_t bytes = size_t{2} << 20;
  const double one = static_cast<double>(bytes) / 50e6;  // 42 ms
  auto w = makeWorld(GetParam(), 4, s, bytes);
  const double single = fanInSeconds(*w, 1, bytes);
  const double three = fanInSeconds(*w, 3, bytes);
  EXPECT_GE(single, 0.7 * one);
  EXPECT_LE(single, 3.0 * one + kSlack);
  // Each sender's egress could carry its message in `one`: only the ingress makes it 3x. The
  // lower bound is the check (a loaded machine only makes transfers slower, so a ratio of the
  // two measurements would not be one).
  EXPECT_GE(three, 0.7 * 3 * one) << "single " << single << " s, three " << three << " s";
  EXPECT_LE(three, 3.0 * 3 * one + kSlack);
}

TEST_P(Pacing, ASenderFeedingThreeReceiversIsHeldByItsEgress) {
  // Rank 0 sends one message to each of ranks 1..3 at once. Each receiver is idle and holds
  // its message at once, but the sender's egress sends them one after another: the last
  // receiver has its message only after three messages' time.
  LinkShaping s;
  s.portBytesPerSecond = 50e6;
  const size_t bytes = size_t{2} << 20;
  const double one = static_cast<double>(bytes) / 50e6;  // 42 ms
  auto w = makeWorld(GetParam(), 4, s, bytes);
  const std::vector<unsigned char> payload(bytes, 7);
  std::vector<double> took(4, 0.0);
  const int64_t t0 = steadyNowNs();
  onThreads(4, [&](int r) {
    if (r == 0) {
      std::vector<std::shared_ptr<SendCompletion>> sends;
      for (int p = 1; p <= 3; ++p)
        sends.push_back((*w)[0].send(p, headerFor(0), payload.data(), bytes));
      for (auto& c : sends) c->wait();
    } else {
      ASSERT_EQ((*w)[r].recv(0, 0, 30s)->size(), bytes);
    }
    took[static_cast<size_t>(r)] = static_cast<double>(steadyNowNs() - t0) / 1e9;
  });
  const double last = std::max({took[1], took[2], took[3]});
  EXPECT_GE(last, 0.7 * 3 * one) << took[1] << " " << took[2] << " " << took[3];
  EXPECT_LE(last, 3.0 * 3 * one + kSlack);
  EXPECT_GE(took[0], 0.7 * 3 * one);
}

TEST_P(Pacing, AddedLatencyDelaysEveryMessageAndOverlaps) {
  LinkShaping s;
  const double latency = 0.050;
  s.addedLatencySeconds = latency;
  auto w = makeWorld(GetParam(), 2, s, 4096);
  const double one = fanInSeconds(*w, 1, 64);
  EXPECT_GE(one, 0.7 * latency);
  EXPECT_LE(one, 3.0 * latency + kSlack);
  // Ten messages in flight at once arrive about one latency later, not ten.
  const std::vector<unsigned char> payload(64, 1);
  const int64_t t0 = steadyNowNs();
  for (uint32_t i = 0; i < 10; ++i) (*w)[0].send(1, headerFor(i), payload.data(), 64);
  for (uint32_t i = 0; i < 10; ++i) (*w)[1].recv(0, i, 30s);
  const double ten = static_cast<double>(steadyNowNs() - t0) / 1e9;
  EXPECT_GE(ten, 0.7 * latency);
  // Sent one after another they would take ten latencies.
  EXPECT_LE(ten, 5.0 * latency);
}

TEST_P(Pacing, ASlowLinkHoldsOnlyItsOwnDirection) {
  LinkShaping s;
  // Slow enough that the unshaped way back, even on a loaded machine, takes far less.
  s.linkBytesPerSecond[{0, 1}] = 5e6;
  const size_t bytes = size_t{1} << 20;
  auto w = makeWorld(GetParam(), 2, s, bytes);
  const std::vector<unsigned char> payload(bytes, 5);
  int64_t t0 = steadyNowNs();
  (*w)[0].send(1, headerFor(0), payload.data(), bytes)->wait();
  (*w)[1].recv(0, 0, 30s);
  const double slow = static_cast<double>(steadyNowNs() - t0) / 1e9;
  const double expected = static_cast<double>(bytes) / 5e6;  // 210 ms
  EXPECT_GE(slow, 0.7 * expected);
  EXPECT_LE(slow, 3.0 * expected + kSlack);
  t0 = steadyNowNs();
  (*w)[1].send(0, headerFor(0), payload.data(), bytes)->wait();
  (*w)[0].recv(1, 0, 30s);
  const double back = static_cast<double>(steadyNowNs() - t0) / 1e9;
  EXPECT_LT(back, 0.5 * expected) << "the link 1 -> 0 is not shaped";
}

TEST_P(Pacing, AbortEndsAWaitForAMessageOnItsWay) {
  LinkShaping s;
  s.addedLatencySeconds = 30;
  auto w = makeWorld(GetParam(), 2, s, 4096);
  int x = 1;
  (*w)[0].send(1, headerFor(0), &x, sizeof x);
  std::thread aborter([&] {
    std::this_thread::sleep_for(50ms);
    (*w)[1].abort();
  });
  const int64_t t0 = steadyNowNs();
  EXPECT_THROW((*w)[1].recv(0, 0, 60s), PeerError);
  aborter.join();
  EXPECT_LT(steadyNowNs() - t0, 5'000'000'000);
  (*w)[0].abort();
}

INSTANTIATE_TEST_SUITE_P(Planes, Pacing, testing::Values(Plane::Loopback, Plane::Shm, Plane::Zmq),
                         planeName);

TEST(PacingStamp, ThirtyTwoBitMicrosecondsComeBackWhole) {
  const int64_t now = steadyNowNs();
  for (const int64_t ago : {int64_t{0}, int64_t{1'000}, int64_t{5'000'000'000}, int64_t{-2'000'000},
                            int64_t{-5'000'000'000}}) {
    const int64_t t = now - ago;
    EXPECT_NEAR(static_cast<double>(unstampMicros32(stampMicros32(t), now)), static_cast<double>(t),
                1000.0);
  }
}

TEST(PacingClock, ClaimsFollowTheVirtualClocks) {
  LinkShaping s;
  s.portBytesPerSecond = 1e6;  // 1 byte per microsecond
  s.addedLatencySeconds = 1e-3;
  Pacer sender(s, 1, 3, 0);
  // Back-to-back sends queue on the egress port.
  EXPECT_EQ(sender.claimSend(0, 1000, 0).startNs, 0);
  EXPECT_EQ(sender.claimSend(2, 1000, 0).startNs, 1'000'000);
  Pacer receiver(s, 0, 3, 0);
  // Two messages that left at once come in one after the other, plus the latency each.
  EXPECT_EQ(receiver.claimReceive(1, 1000, 0), 2'000'000);
  EXPECT_EQ(receiver.claimReceive(2, 1000, 0), 3'000'000);
  // A stamp later than the receiver's now is a start to come: available after it.
  EXPECT_EQ(receiver.claimReceive(1, 0, 50'000'000), 51'000'000);
  EXPECT_EQ(Pacer::make(LinkShaping{}, 0, 2), nullptr);
}

TEST(PacingClock, MessagesQueuedOnOneEgressReachEachReceiverInTurn) {
  // One rank sends 1000 bytes to each of two idle receivers at once, its port at 1 byte per
  // microsecond: the second message starts when the first has left, and its receiver, though
  // it holds the message from the start, has it only 2 ms after the sends.
  LinkShaping s;
  s.portBytesPerSecond = 1e6;
  Pacer sender(s, 0, 3, 0);
  const Pacer::SendSlot first = sender.claimSend(1, 1000, 0);
  const Pacer::SendSlot second = sender.claimSend(2, 1000, 0);
  EXPECT_EQ(second.startNs, 1'000'000);
  Pacer one(s, 1, 3, 0), two(s, 2, 3, 0);
  EXPECT_EQ(one.claimReceive(0, 1000, first.startNs), 1'000'000);
  EXPECT_EQ(two.claimReceive(0, 1000, second.startNs), 2'000'000);
  // On shared memory the start travels as 32-bit microseconds: a start 1 ms after the
  // receiver's now reads back 1 ms after it, not 71 minutes before.
  const int64_t now = steadyNowNs();
  EXPECT_NEAR(static_cast<double>(unstampMicros32(stampMicros32(now + 1'000'000), now)),
              static_cast<double>(now + 1'000'000), 1000.0);
}

}  // namespace
}  // namespace arl
