// The shared-memory data plane: several ShmDataPlane objects in this one process, each rank
// on its own thread where a call blocks, talking through real POSIX shared memory.
#include "transport/shm/shm_transport.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "base/clock.h"
#include "base/errors.h"
#include "exec/executor.h"
#include "schedule/generators.h"
#include "transport/zmq/zmq_transport.h"  // dataPlanePeers
#include "transport_test_util.h"

namespace arl {
namespace {

namespace fs = std::filesystem;
using arl::transport_test::headerFor;
using arl::transport_test::onThreads;
using arl::transport_test::pattern;
using arl::transport_test::samePayload;
using std::chrono::milliseconds;

constexpr size_t kSmallRing = size_t{64} << 10;
// A record is a 64-byte head and the payload padded to 64 bytes: with 10 KiB payloads a
// 64 KiB ring holds exactly six records (61824 bytes); a seventh needs a wrap it has no
// room for until the first record is given back.
constexpr size_t kTenK = 10 * 1024;
constexpr uint32_t kTenKPerSmallRing = 6;
const milliseconds kLong(10000);  // a wait that only a hang runs out

// Rings of `bytes`; a send stuck by a failing test gives up after kLong.
ShmOptions ringOf(size_t bytes) {
  ShmOptions o;
  o.ringBytes = bytes;
  o.sendTimeout = kLong;
  return o;
}

// The /dev/shm file behind an endpoint.
std::string shmPath(const std::string& endpoint) {
  return "/dev/shm/" + endpoint.substr(std::strlen(ShmDataPlane::kScheme));
}

// Polls cond until it holds or `limit` passes; true when it held.
bool eventually(const std::function<bool()>& cond, milliseconds limit = kLong) {
  const auto giveUp = SteadyClock::now() + limit;
  while (!cond()) {
    if (SteadyClock::now() > giveUp) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

// n data planes set up as the coordinator would: every rank binds with a ring per rank that
// sends to it, then connects to the ranks it sends to. Closing needs no goodbye, so the
// destructors tear them down in any order.
struct Mesh {
  std::vector<std::unique_ptr<ShmDataPlane>> dp;
  std::vector<std::string> endpoints;
  ShmDataPlane& operator[](int r) const { return *dp[static_cast<size_t>(r)]; }
};

Mesh makeMesh(int n, const std::vector<std::vector<int>>& sendTo, const ShmOptions& opt) {
  Mesh mesh;
  for (int r = 0; r < n; ++r) {
    std::vector<int> recvFrom;
    for (int s = 0; s < n; ++s) {
      const auto& to = sendTo[static_cast<size_t>(s)];
      if (std::find(to.begin(), to.end(), r) != to.end()) recvFrom.push_back(s);
    }
    mesh.dp.push_back(std::make_unique<ShmDataPlane>(r, n));
    mesh.endpoints.push_back(mesh.dp.back()->bind(opt, recvFrom));
  }
  for (int r = 0; r < n; ++r) mesh[r].connect(mesh.endpoints, sendTo[static_cast<size_t>(r)]);
  return mesh;
}

// Rank 0 sends to rank 1 only.
Mesh oneWay(const ShmOptions& opt) { return makeMesh(2, {{1}, {}}, opt); }

// Every rank sends to every other.
Mesh fullMesh(int n, const ShmOptions& opt) {
  std::vector<std::vector<int>> sendTo(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    for (int p = 0; p < n; ++p) {
      if (p != r) sendTo[static_cast<size_t>(r)].push_back(p);
    }
  }
  return makeMesh(n, sendTo, opt);
}

size_t recordBytes(size_t payload) { return 64 + (payload + 63) / 64 * 64; }

// The inode of this process's pid namespace, as segment names carry it.
uint64_t pidNamespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

// A pid no process of this namespace has (for names that look stale), 0 when none is found.
pid_t deadPid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  if (child < 0 || ::waitpid(child, &status, 0) != child) return 0;
  return child;  // reaped: the pid names nobody now
}

// An empty file in /dev/shm named like a segment.
void makeSegmentFile(const std::string& name) {
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  EXPECT_GE(fd, 0) << name;
  if (fd >= 0) {
    EXPECT_EQ(::ftruncate(fd, 4096), 0);
    ::close(fd);
  }
}

// Sends `count` messages of `bytes` each from rank 0 to rank 1 (pattern stream 0, step i),
// counting the sends that returned; records the first error. A test that ends early aborts
// the producer rather than wait out its send timeout.
struct Producer {
  ShmDataPlane& dp;
  std::atomic<uint32_t> sent{0};
  std::string error;
  std::thread thread;

  Producer(ShmDataPlane& t, uint32_t count, size_t bytes) : dp(t) {
    thread = std::thread([this, count, bytes] {
      try {
        for (uint32_t i = 0; i < count; ++i) {
          const auto p = pattern(0, i, bytes);
          EXPECT_TRUE(dp.send(1, headerFor(i), p.data(), p.size())->done());
          sent.fetch_add(1);
        }
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
  }
  ~Producer() {
    if (thread.joinable()) {
      dp.abort();
      thread.join();
    }
  }
  void join() { thread.join(); }
};

TEST(ShmDataPlane, BindReturnsShmEndpointInDevShm) {
  ShmDataPlane dp(0, 2);
  const std::string ep = dp.bind(ShmOptions{}, {1});
  EXPECT_EQ(ep, dp.endpoint());
  EXPECT_EQ(ep.rfind("shm://arl-dp-" + std::to_string(::getpid()) + "-ns", 0), 0u) << ep;
  EXPECT_NE(ep.find("-r0-"), std::string::npos) << ep;
  EXPECT_EQ(ep.find('/', std::strlen("shm://")), std::string::npos) << ep;
  EXPECT_TRUE(fs::exists(shmPath(ep))) << ep;
  EXPECT_EQ(dp.rank(), 0);
  EXPECT_EQ(dp.size(), 2);
  // Each bind makes a new name, even for the same rank in the same process.
  ShmDataPlane again(0, 2);
  EXPECT_NE(again.bind(ShmOptions{}, {1}), ep);
  EXPECT_THROW(dp.bind(ShmOptions{}, {1}), ConfigError);  // twice
}

// The name goes as soon as every expected sender has mapped the segment and the owner has
// looked (any recv, even one that times out); the mapping lives on.
TEST(ShmDataPlane, NameIsRemovedOnceEverySenderHasAttached) {
  Mesh mesh;
  for (int r = 0; r < 3; ++r) mesh.dp.push_back(std::make_unique<ShmDataPlane>(r, 3));
  mesh.endpoints = {mesh[0].bind(ringOf(kSmallRing), {1, 2}), mesh[1].bind(ringOf(kSmallRing), {}),
                    mesh[2].bind(ringOf(kSmallRing), {})};
  const std::string file = shmPath(mesh.endpoints[0]);
  // Nobody will ever map a segment without channels: its name goes at once.
  EXPECT_FALSE(fs::exists(shmPath(mesh.endpoints[1])));
  EXPECT_FALSE(fs::exists(shmPath(mesh.endpoints[2])));

  EXPECT_THROW(mesh[0].recv(1, 0, milliseconds(0)), PeerError);
  EXPECT_TRUE(fs::exists(file)) << "removed before any sender attached";
  mesh[1].connect(mesh.endpoints, {0});
  EXPECT_THROW(mesh[0].recv(1, 0, milliseconds(0)), PeerError);
  EXPECT_TRUE(fs::exists(file)) << "removed while rank 2 still has to attach";
  mesh[2].connect(mesh.endpoints, {0});
  EXPECT_TRUE(fs::exists(file)) << "removed before the owner looked";
  EXPECT_THROW(mesh[0].recv(1, 0, milliseconds(0)), PeerError);
  EXPECT_FALSE(fs::exists(file)) << "every sender attached and the owner called recv";

  // Both senders still reach the segment.
  const char a = 'a', b = 'b';
  mesh[1].send(0, headerFor(0), &a, 1);
  mesh[2].send(0, headerFor(0), &b, 1);
  auto ma = mesh[0].recv(1, 0, kLong);
  auto mb = mesh[0].recv(2, 0, kLong);
  EXPECT_EQ(*static_cast<const char*>(ma->data()), 'a');
  EXPECT_EQ(*static_cast<const char*>(mb->data()), 'b');
}

TEST(ShmDataPlane, CloseRemovesTheNameAndIsIdempotent) {
  std::string file;
  {
    ShmDataPlane dp(0, 2);
    file = shmPath(dp.bind(ringOf(kSmallRing), {1}));
    EXPECT_TRUE(fs::exists(file));
    EXPECT_TRUE(dp.close());
    EXPECT_FALSE(fs::exists(file)) << "a sender never attached, close() removes the name";
    EXPECT_FALSE(dp.close());
    EXPECT_FALSE(dp.close());
  }
  // The destructor closes too.
  {
    ShmDataPlane dp(1, 2);
    file = shmPath(dp.bind(ringOf(kSmallRing), {0}));
    EXPECT_TRUE(fs::exists(file));
  }
  EXPECT_FALSE(fs::exists(file));
  // Closing an unbound data plane is harmless.
  ShmDataPlane unbound(0, 1);
  EXPECT_TRUE(unbound.close());
  EXPECT_FALSE(unbound.close());
}

// A received message pins its mapping: it stays readable after its data plane is closed and
// destroyed.
TEST(ShmDataPlane, ReceivedMessageOutlivesTheDataPlane) {
  auto mesh = oneWay(ringOf(kSmallRing));
  const auto p = pattern(0, 5, 3000);
  mesh[0].send(1, headerFor(5), p.data(), p.size());
  auto m = mesh[1].recv(0, 5, kLong);
  EXPECT_TRUE(mesh[1].close());
  mesh.dp[1].reset();
  mesh.dp[0].reset();
  EXPECT_EQ(m->header().step, 5u);
  EXPECT_TRUE(samePayload(*m, p));
}

// Messages of sizes around the 64-byte record padding, and up to half the ring, pass through
// a 64 KiB ring many times over; every header field and payload byte arrives as sent. The
// transport fills in magic, src and length whatever the caller put there.
TEST(ShmDataPlane, FifoAcrossManyWrapsOfASmallRing) {
  auto mesh = oneWay(ringOf(kSmallRing));
  const std::vector<size_t> sizes = {0,     1,     63, 64,  65,   4096,  kTenK, 10000, 127,
                                     32704, 20000, 3,  128, 8191, 12345, 0,     30000, 64 * 7};
  constexpr uint32_t kMessages = 1000;
  auto sizeOf = [&](uint32_t i) { return sizes[(i * 7 + i / sizes.size()) % sizes.size()]; };
  size_t ringTraffic = 0;
  for (uint32_t i = 0; i < kMessages; ++i) ringTraffic += recordBytes(sizeOf(i));
  ASSERT_GT(ringTraffic, 50 * kSmallRing) << "the test must wrap the ring many times";

  auto headerOf = [](uint32_t i) {
    ChunkHeader h;
    h.magic = 0xBAADF00D;  // overwritten by the transport
    h.src = 42;            // overwritten
    h.length = 999999;     // overwritten
    h.opSignature = 0xABCD0000u + i;
    h.epoch = 11;
    h.seq = 1000 + i;
    h.step = i;
    h.chunk = i * 3;
    h.slice = i % 5;
    h.offset = (uint64_t{i} << 33) + 17;
    return h;
  };
  onThreads(2, [&](int r) {
    if (r == 0) {
      for (uint32_t i = 0; i < kMessages; ++i) {
        const auto p = pattern(0, i, sizeOf(i));
        EXPECT_TRUE(mesh[0].send(1, headerOf(i), p.data(), p.size())->done());
      }
      return;
    }
    for (uint32_t i = 0; i < kMessages; ++i) {
      auto m = mesh[1].recv(0, i, kLong);
      const ChunkHeader& h = m->header();
      const ChunkHeader want = headerOf(i);
      ASSERT_EQ(h.step, i) << "out of order";
      EXPECT_EQ(h.magic, ChunkHeader::kMagic);
      EXPECT_EQ(h.src, 0);
      EXPECT_EQ(h.length, sizeOf(i));
      EXPECT_EQ(m->size(), sizeOf(i));
      EXPECT_EQ(h.opSignature, want.opSignature);
      EXPECT_EQ(h.epoch, want.epoch);
      EXPECT_EQ(h.seq, want.seq);
      EXPECT_EQ(h.chunk, want.chunk);
      EXPECT_EQ(h.slice, want.slice);
      EXPECT_EQ(h.offset, want.offset);
      ASSERT_TRUE(samePayload(*m, pattern(0, i, sizeOf(i)))) << "message " << i;
    }
  });
}

// ready() turns true once a record is published and false once it is taken, also when the
// ring's end is padded (a wrap record alone is no message); a shaped plane says false.
TEST(ShmDataPlane, ReadySaysWhetherARecordIsWaiting) {
  auto mesh = oneWay(ringOf(kSmallRing));
  EXPECT_FALSE(mesh[1].ready(0, 0));
  for (uint32_t i = 0; i < 4 * kTenKPerSmallRing; ++i) {  // wraps the ring three times
    const auto p = pattern(0, i, kTenK + 100);
    mesh[0].send(1, headerFor(i), p.data(), p.size());
    EXPECT_TRUE(mesh[1].ready(0, i)) << "message " << i;
    auto m = mesh[1].recv(0, i, kLong);
    EXPECT_TRUE(samePayload(*m, p)) << "message " << i;
    m.reset();
    EXPECT_FALSE(mesh[1].ready(0, i)) << "message " << i;
  }
  ShmOptions shaped = ringOf(kSmallRing);
  shaped.shaping.addedLatencySeconds = 1e-6;
  auto paced = oneWay(shaped);
  const auto p = pattern(0, 0, 10);
  EXPECT_FALSE(paced[1].arrived(0));
  paced[0].send(1, headerFor(0), p.data(), p.size());
  EXPECT_FALSE(paced[1].ready(0, 0));
  EXPECT_TRUE(paced[1].arrived(0));  // there, though recv() paces it
  EXPECT_TRUE(samePayload(*paced[1].recv(0, 0, kLong), p));
  EXPECT_FALSE(paced[1].arrived(0));
}

// Large payloads through the default 4 MiB ring, the largest being half of it.
TEST(ShmDataPlane, LargePayloadsArriveIntact) {
  auto mesh = oneWay(ringOf(ShmOptions{}.ringBytes));
  const std::vector<size_t> sizes = {(size_t{1} << 20) + 3, 5, (size_t{2} << 20) - 64,
                                     (size_t{3} << 19) + 1};
  constexpr uint32_t kMessages = 12;
  onThreads(2, [&](int r) {
    for (uint32_t i = 0; i < kMessages; ++i) {
      const auto p = pattern(0, i, sizes[i % sizes.size()]);
      if (r == 0) {
        mesh[0].send(1, headerFor(i), p.data(), p.size());
      } else {
        auto m = mesh[1].recv(0, i, kLong);
        ASSERT_EQ(m->header().step, i);
        EXPECT_TRUE(samePayload(*m, p)) << "message " << i;
      }
    }
  });
}

// The sender's memory is free on return: later changes to it do not travel.
TEST(ShmDataPlane, SendCopiesAndIsDoneAtOnce) {
  auto mesh = oneWay(ringOf(kSmallRing));
  std::vector<unsigned char> buf = pattern(0, 1, 512);
  const auto original = buf;
  EXPECT_TRUE(mesh[0].send(1, headerFor(1), buf.data(), buf.size())->done());
  std::fill(buf.begin(), buf.end(), 0xEE);
  auto m = mesh[1].recv(0, 1, kLong);
  EXPECT_TRUE(samePayload(*m, original));
  mesh[0].send(1, headerFor(2), nullptr, 0);
  auto e = mesh[1].recv(0, 2, kLong);
  EXPECT_EQ(e->size(), 0u);
  EXPECT_EQ(e->header().length, 0u);
}

// Several messages held at once and given back in a shuffled order: the ring is reused only
// behind the oldest message still held, the producer keeps going, and nothing is corrupted.
TEST(ShmDataPlane, MessagesReleasedOutOfOrderFreeTheRing) {
  auto mesh = oneWay(ringOf(kSmallRing));
  constexpr uint32_t kMessages = 600;
  auto sizeOf = [](uint32_t i) -> size_t { return (i * 2654435761u) % 12000; };
  std::mt19937 rng(12345);
  onThreads(2, [&](int r) {
    if (r == 0) {
      for (uint32_t i = 0; i < kMessages; ++i) {
        const auto p = pattern(0, i, sizeOf(i));
        mesh[0].send(1, headerFor(i), p.data(), p.size());
      }
      return;
    }
    uint32_t next = 0;
    while (next < kMessages) {
      // Up to four at a time: with payloads under 12000 bytes four records always fit.
      const uint32_t batch = std::min<uint32_t>(1 + rng() % 4, kMessages - next);
      std::vector<std::unique_ptr<InMessage>> held;
      std::vector<uint32_t> index;
      for (uint32_t k = 0; k < batch; ++k, ++next) {
        held.push_back(mesh[1].recv(0, next, kLong));
        index.push_back(next);
      }
      std::vector<size_t> order(batch);
      for (size_t k = 0; k < batch; ++k) order[k] = k;
      std::shuffle(order.begin(), order.end(), rng);
      for (size_t k : order) {
        // Checked just before it is given back: all the others given back so far must not
        // have let the producer overwrite it.
        ASSERT_EQ(held[k]->header().step, index[k]);
        ASSERT_TRUE(samePayload(*held[k], pattern(0, index[k], sizeOf(index[k]))))
            << "message " << index[k] << " corrupted";
        held[k].reset();
      }
    }
  });
}

// The oldest message pins the ring even when every later one has been given back: the
// producer fills the ring and stops, and the pinned payload stays intact until released.
TEST(ShmDataPlane, OldestHeldMessagePinsTheRing) {
  auto mesh = oneWay(ringOf(kSmallRing));
  constexpr uint32_t kMessages = 20;
  Producer producer(mesh[0], kMessages, kTenK);
  std::vector<std::unique_ptr<InMessage>> got;
  for (uint32_t i = 0; i < kTenKPerSmallRing; ++i) got.push_back(mesh[1].recv(0, i, kLong));
  for (uint32_t i = 1; i < kTenKPerSmallRing; ++i) got[i].reset();  // all but the oldest
  ASSERT_TRUE(eventually([&] { return producer.sent.load() >= kTenKPerSmallRing; }));
  // Five records are free again, but behind the held one: no seventh message can come.
  EXPECT_THROW(mesh[1].recv(0, kTenKPerSmallRing, milliseconds(200)), PeerError);
  EXPECT_EQ(producer.sent.load(), kTenKPerSmallRing);
  EXPECT_TRUE(samePayload(*got[0], pattern(0, 0, kTenK))) << "held message overwritten";
  got[0].reset();
  // The timed-out recv lost nothing: the rest arrive in order.
  for (uint32_t i = kTenKPerSmallRing; i < kMessages; ++i) {
    auto m = mesh[1].recv(0, i, kLong);
    ASSERT_EQ(m->header().step, i);
    EXPECT_TRUE(samePayload(*m, pattern(0, i, kTenK))) << "message " << i;
  }
  producer.join();
  EXPECT_EQ(producer.error, "");
  EXPECT_EQ(producer.sent.load(), kMessages);
}

// send() waits while the ring is full and goes on when the receiver gives records back.
TEST(ShmDataPlane, SendBlocksOnAFullRingAndResumes) {
  auto mesh = oneWay(ringOf(kSmallRing));
  constexpr uint32_t kMessages = 30;
  Producer producer(mesh[0], kMessages, kTenK);
  ASSERT_TRUE(eventually([&] { return producer.sent.load() >= kTenKPerSmallRing; }));
  std::this_thread::sleep_for(milliseconds(100));  // time to overrun the ring, were it to
  EXPECT_EQ(producer.sent.load(), kTenKPerSmallRing) << "sent more than the ring holds";
  for (uint32_t i = 0; i < kMessages; ++i) {
    auto m = mesh[1].recv(0, i, kLong);
    ASSERT_EQ(m->header().step, i);
    EXPECT_TRUE(samePayload(*m, pattern(0, i, kTenK))) << "message " << i;
  }
  producer.join();
  EXPECT_EQ(producer.error, "");
  EXPECT_EQ(producer.sent.load(), kMessages);
}

TEST(ShmDataPlane, SendTimesOutWhenThePeerNeverReads) {
  ShmOptions opt = ringOf(kSmallRing);
  opt.sendTimeout = milliseconds(200);
  auto mesh = oneWay(opt);
  const auto p = pattern(0, 0, kTenK);
  for (uint32_t i = 0; i < kTenKPerSmallRing; ++i)
    mesh[0].send(1, headerFor(i), p.data(), p.size());
  const auto t0 = SteadyClock::now();
  try {
    mesh[0].send(1, headerFor(kTenKPerSmallRing), p.data(), p.size());
    FAIL() << "a seventh 10 KiB record fit a 64 KiB ring";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.rank, 0);
    EXPECT_EQ(e.peer, 1);
    EXPECT_EQ(e.step, kTenKPerSmallRing);
    EXPECT_NE(std::string(e.what()).find("rank 1 accepted no data for step 6 within 200 ms"),
              std::string::npos)
        << e.what();
  }
  const auto took = SteadyClock::now() - t0;
  EXPECT_GE(took, milliseconds(200));
  EXPECT_LT(took, std::chrono::seconds(3));
}

TEST(ShmDataPlane, MessageLargerThanTheRingIsRefused) {
  auto mesh = oneWay(ringOf(kSmallRing));
  const size_t tooBig = kSmallRing - 64 + 1;  // record of 64 KiB + 64
  const std::vector<unsigned char> big(tooBig, 0x11);
  const auto t0 = SteadyClock::now();
  try {
    mesh[0].send(1, headerFor(3), big.data(), big.size());
    FAIL() << "a record larger than the ring was sent";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.peer, 1);
    EXPECT_EQ(e.step, 3);
    EXPECT_NE(std::string(e.what()).find("message of 65473 bytes does not fit rank 1's ring of "
                                         "65536 bytes"),
              std::string::npos)
        << e.what();
  }
  EXPECT_LT(SteadyClock::now() - t0, std::chrono::seconds(1)) << "refused only after a wait";
  // The largest that fits, head included, goes through an empty ring.
  const auto fits = pattern(0, 1, kSmallRing - 64);
  mesh[0].send(1, headerFor(4), fits.data(), fits.size());
  auto m = mesh[1].recv(0, 4, kLong);
  EXPECT_TRUE(samePayload(*m, fits));
}

// A message whose record fits the ring is delivered wherever the ring's write position
// happens to be, and never waits out the send timeout in front of a receiver that reads. Here
// the write position is mid-ring, where a 40000-byte record fits neither before the end nor
// (with the wrap record) from the start: the wrap goes out alone, and the record follows once
// the receiver has passed it.
TEST(ShmDataPlane, RecordLargerThanHalfTheRingNeverWaitsOnAnEmptyRing) {
  ShmOptions opt = ringOf(kSmallRing);
  opt.sendTimeout = milliseconds(2000);
  auto mesh = oneWay(opt);
  const auto half = pattern(0, 0, kSmallRing / 2 - 64);
  mesh[0].send(1, headerFor(0), half.data(), half.size());
  mesh[1].recv(0, 0, kLong).reset();  // the ring is empty, the write position at 32 KiB
  const auto p = pattern(0, 1, 40000);
  bool same = false;
  std::string rxError;
  std::thread receiver([&] {
    try {
      auto m = mesh[1].recv(0, 1, kLong);
      same = samePayload(*m, p);
    } catch (const std::exception& e) {
      rxError = e.what();
    }
  });
  const auto t0 = SteadyClock::now();
  try {
    mesh[0].send(1, headerFor(1), p.data(), p.size());
  } catch (const PeerError& e) {
    ADD_FAILURE() << e.what();
    mesh[1].abort();
  }
  receiver.join();
  EXPECT_TRUE(rxError.empty()) << rxError;
  EXPECT_TRUE(same);
  EXPECT_LT(SteadyClock::now() - t0, milliseconds(1000)) << "waited in front of an empty ring";
  // The ring goes on working from there.
  for (uint32_t k = 2; k < 8; ++k) {
    const auto q = pattern(0, k, 20000);
    mesh[0].send(1, headerFor(k), q.data(), q.size());
    auto m = mesh[1].recv(0, k, kLong);
    EXPECT_TRUE(samePayload(*m, q)) << k;
  }
}

TEST(ShmDataPlane, RecvTimeoutNamesPeerAndStep) {
  auto mesh = oneWay(ringOf(kSmallRing));
  const auto t0 = SteadyClock::now();
  try {
    mesh[1].recv(0, 5, milliseconds(100));
    FAIL() << "recv returned without data";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.rank, 1);
    EXPECT_EQ(e.peer, 0);
    EXPECT_EQ(e.step, 5);
    EXPECT_NE(std::string(e.what()).find("rank 1: no data from rank 0 for step 5 within 100 ms"),
              std::string::npos)
        << e.what();
  }
  const auto took = SteadyClock::now() - t0;
  EXPECT_GE(took, milliseconds(100));
  EXPECT_LT(took, std::chrono::seconds(2));
  // A whole number of seconds reads as such; a zero timeout only looks.
  try {
    mesh[1].recv(0, 6, milliseconds(0));
    FAIL() << "recv returned without data";
  } catch (const PeerError& e) {
    EXPECT_NE(std::string(e.what()).find("for step 6 within 0 ms"), std::string::npos) << e.what();
  }
  // Data that comes later is still delivered.
  const char byte = 9;
  mesh[0].send(1, headerFor(5), &byte, 1);
  EXPECT_EQ(mesh[1].recv(0, 5, kLong)->header().step, 5u);
}

TEST(ShmDataPlane, AbortUnblocksWaitingRecvAndFailsLaterCalls) {
  auto mesh = fullMesh(2, ringOf(kSmallRing));
  std::atomic<bool> started{false};
  std::string error;
  SteadyClock::time_point failedAt;
  std::thread waiter([&] {
    started = true;
    try {
      mesh[0].recv(1, 3, kLong);
    } catch (const PeerError& e) {
      failedAt = SteadyClock::now();
      error = e.what();
    }
  });
  while (!started) std::this_thread::yield();
  std::this_thread::sleep_for(milliseconds(100));  // past polling, asleep on the futex
  const auto abortedAt = SteadyClock::now();
  mesh[0].abort();
  waiter.join();
  EXPECT_NE(error.find("rank 0: run aborted"), std::string::npos) << error;
  EXPECT_NE(error.find("step 3"), std::string::npos) << error;
  EXPECT_LT(failedAt - abortedAt, milliseconds(500));
  const char byte = 1;
  try {
    mesh[0].send(1, headerFor(8), &byte, 1);
    FAIL() << "send after abort";
  } catch (const PeerError& e) {
    EXPECT_NE(std::string(e.what()).find("run aborted"), std::string::npos) << e.what();
  }
  EXPECT_THROW(mesh[0].recv(1, 4, milliseconds(10)), PeerError);
  // Data already waiting does not matter either.
  mesh[1].send(0, headerFor(4), &byte, 1);
  EXPECT_THROW(mesh[0].recv(1, 4, kLong), PeerError);
  // The other rank is unaffected.
  mesh[0].close();
  EXPECT_THROW(mesh[1].recv(0, 0, kLong), PeerError);  // closed, not a 10 s wait
}

// An abort ends a wait in its polling and yielding phases too, not only once it sleeps: here
// each phase alone would last 5 s.
struct WaitPhase {
  const char* name;
  std::chrono::microseconds spin;
  std::chrono::microseconds yieldFor;
};

void PrintTo(const WaitPhase& p, std::ostream* os) { *os << p.name; }

class ShmAbortDuringWait : public ::testing::TestWithParam<WaitPhase> {};

TEST_P(ShmAbortDuringWait, EndsTheWaitAtOnce) {
  const WaitPhase phase = GetParam();
  ShmOptions opt = ringOf(kSmallRing);
  opt.spin = phase.spin;
  opt.yieldFor = phase.yieldFor;
  opt.yieldCostLimit = std::chrono::hours(1);  // this test's yields never switch yielding off
  // Costly yields in an earlier test of this process switch yielding off for yieldBackoff
  // (1 s) in every wait: wait that out, so the wait below does yield.
  std::this_thread::sleep_for(milliseconds(1100));
  auto mesh = fullMesh(2, opt);
  std::string error;
  std::thread waiter([&] {
    try {
      mesh[0].recv(1, 3, kLong);
    } catch (const PeerError& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(milliseconds(100));  // well inside the 5 s phase
  const auto abortedAt = SteadyClock::now();
  mesh[0].abort();
  waiter.join();
  const double ms =
      std::chrono::duration<double, std::milli>(SteadyClock::now() - abortedAt).count();
  std::printf("[ measured ] %s: the wait ended %.2f ms after the abort\n", phase.name, ms);
  EXPECT_NE(error.find("rank 0: run aborted"), std::string::npos) << error;
  // Microseconds in fact; the bound leaves room for a loaded machine, and is far below the
  // 5 s that the phase would have lasted.
  EXPECT_LT(ms, 500.0);
}

INSTANTIATE_TEST_SUITE_P(
    Phases, ShmAbortDuringWait,
    ::testing::Values(WaitPhase{"spin", std::chrono::seconds(5), std::chrono::microseconds(0)},
                      WaitPhase{"yield", std::chrono::microseconds(0), std::chrono::seconds(5)}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ShmDataPlane, AbortUnblocksBlockedSend) {
  auto mesh = oneWay(ringOf(kSmallRing));
  Producer producer(mesh[0], 100, kTenK);
  ASSERT_TRUE(eventually([&] { return producer.sent.load() >= kTenKPerSmallRing; }));
  std::this_thread::sleep_for(milliseconds(100));  // past polling, asleep on the futex
  const auto abortedAt = SteadyClock::now();
  mesh[0].abort();
  producer.join();
  EXPECT_LT(SteadyClock::now() - abortedAt, milliseconds(500));
  EXPECT_EQ(producer.sent.load(), kTenKPerSmallRing);
  EXPECT_NE(producer.error.find("rank 0: run aborted"), std::string::npos) << producer.error;
  EXPECT_NE(producer.error.find("step 6"), std::string::npos) << producer.error;
  // What was sent before the abort is intact on the receiving side.
  for (uint32_t i = 0; i < kTenKPerSmallRing; ++i) {
    auto m = mesh[1].recv(0, i, kLong);
    EXPECT_TRUE(samePayload(*m, pattern(0, i, kTenK))) << "message " << i;
  }
}

// A rank may close right after its last send: the data stays readable, and only then does
// a receive fail, at once, saying the sender closed.
TEST(ShmDataPlane, CloseAfterSendingLosesNothing) {
  auto mesh = oneWay(ringOf(kSmallRing));
  for (uint32_t i = 0; i < 3; ++i) {
    const auto p = pattern(0, i, 1000 + i);
    mesh[0].send(1, headerFor(i), p.data(), p.size());
  }
  EXPECT_TRUE(mesh[0].close());
  for (uint32_t i = 0; i < 3; ++i) {
    auto m = mesh[1].recv(0, i, kLong);
    ASSERT_EQ(m->header().step, i);
    EXPECT_TRUE(samePayload(*m, pattern(0, i, 1000 + i)));
  }
  const auto t0 = SteadyClock::now();
  try {
    mesh[1].recv(0, 3, kLong);
    FAIL() << "recv returned data that was never sent";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.peer, 0);
    EXPECT_NE(std::string(e.what()).find(
                  "rank 1: rank 0 closed its data plane before sending data for step 3"),
              std::string::npos)
        << e.what();
  }
  EXPECT_LT(SteadyClock::now() - t0, std::chrono::seconds(2));
}

// A receiver already asleep is woken by the sender's close.
TEST(ShmDataPlane, CloseWakesAWaitingReceiver) {
  auto mesh = oneWay(ringOf(kSmallRing));
  std::string error;
  std::atomic<bool> started{false};
  std::thread waiter([&] {
    started = true;
    try {
      mesh[1].recv(0, 0, kLong);
    } catch (const PeerError& e) {
      error = e.what();
    }
  });
  while (!started) std::this_thread::yield();
  std::this_thread::sleep_for(milliseconds(100));
  const auto closedAt = SteadyClock::now();
  EXPECT_TRUE(mesh[0].close());
  waiter.join();
  EXPECT_LT(SteadyClock::now() - closedAt, milliseconds(500));
  EXPECT_NE(error.find("rank 0 closed its data plane before sending data for step 0"),
            std::string::npos)
      << error;
}

// drain() waits until the receiver has taken (and given back) everything sent to it: a rank
// that finished first waits for its receivers before it tears down.
TEST(ShmDataPlane, DrainWaitsUntilTheReceiverTookEverything) {
  auto mesh = oneWay(ringOf(kSmallRing));
  EXPECT_TRUE(mesh[1].drain()) << "nothing sent: nothing to wait for";
  for (uint32_t i = 0; i < 3; ++i) {
    const auto p = pattern(0, i, 1000 + i);
    mesh[0].send(1, headerFor(i), p.data(), p.size());
  }
  std::atomic<bool> drained{false};
  std::atomic<bool> result{false};
  std::thread drainer([&] {
    result = mesh[0].drain();
    drained = true;
  });
  // Not a timing bound: nothing was taken, so the drain must still wait after 100 ms.
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_FALSE(drained.load());
  for (uint32_t i = 0; i < 2; ++i) EXPECT_EQ(mesh[1].recv(0, i, kLong)->header().step, i);
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_FALSE(drained.load()) << "the third message is still in the ring";
  {
    auto last = mesh[1].recv(0, 2, kLong);
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_FALSE(drained.load()) << "taken but not given back: a reduction may still read it";
  }
  // Generous: the wake-up of a sleeping drain is a futex away.
  EXPECT_TRUE(eventually([&] { return drained.load(); }, milliseconds(2000)));
  drainer.join();
  EXPECT_TRUE(result.load());
  EXPECT_TRUE(mesh[0].close());
  EXPECT_FALSE(mesh[0].drain()) << "closed";
}

// A drain ends without the data taken when the receiver closes, when the plane is aborted,
// and after closeLinger; each returns false.
TEST(ShmDataPlane, DrainEndsOnCloseAbortOrLinger) {
  const char byte = 7;
  {
    auto mesh = oneWay(ringOf(kSmallRing));
    mesh[0].send(1, headerFor(0), &byte, 1);
    std::thread closer([&] {
      std::this_thread::sleep_for(milliseconds(50));
      mesh[1].close();
    });
    EXPECT_FALSE(mesh[0].drain());
    closer.join();
  }
  {
    auto mesh = oneWay(ringOf(kSmallRing));
    mesh[0].send(1, headerFor(0), &byte, 1);
    std::thread aborter([&] {
      std::this_thread::sleep_for(milliseconds(50));
      mesh[0].abort();
    });
    EXPECT_FALSE(mesh[0].drain());
    aborter.join();
    EXPECT_FALSE(mesh[0].drain()) << "aborted: no wait at all";
  }
  {
    ShmOptions o = ringOf(kSmallRing);
    o.closeLinger = milliseconds(50);
    auto mesh = oneWay(o);
    mesh[0].send(1, headerFor(0), &byte, 1);
    const auto t0 = SteadyClock::now();
    EXPECT_FALSE(mesh[0].drain());
    const auto waited = SteadyClock::now() - t0;
    EXPECT_GE(waited, milliseconds(50));
    EXPECT_LT(waited, milliseconds(5000)) << "closeLinger, not the default";
  }
}

// A sender blocked on a full ring fails when the receiver closes instead of reading.
TEST(ShmDataPlane, ReceiverCloseFailsABlockedSend) {
  auto mesh = oneWay(ringOf(kSmallRing));
  Producer producer(mesh[0], 100, kTenK);
  ASSERT_TRUE(eventually([&] { return producer.sent.load() >= kTenKPerSmallRing; }));
  std::this_thread::sleep_for(milliseconds(50));
  const auto closedAt = SteadyClock::now();
  EXPECT_TRUE(mesh[1].close());
  producer.join();
  EXPECT_LT(SteadyClock::now() - closedAt, milliseconds(500));
  EXPECT_EQ(producer.sent.load(), kTenKPerSmallRing);
  EXPECT_NE(producer.error.find("rank 1 closed its data plane before taking data for step 6"),
            std::string::npos)
      << producer.error;
}

TEST(ShmDataPlane, BadArgumentsAreConfigErrors) {
  EXPECT_THROW(ShmDataPlane(2, 2), ConfigError);
  EXPECT_THROW(ShmDataPlane(-1, 2), ConfigError);
  EXPECT_THROW(ShmDataPlane(0, 0), ConfigError);
  EXPECT_THROW(ShmDataPlane(0, 65), ConfigError);
  EXPECT_NO_THROW(ShmDataPlane(63, 64));
  {
    ShmDataPlane dp(0, 2);
    EXPECT_THROW(dp.bind(ringOf(1000), {1}), ConfigError);  // ring too small
  }
  {
    ShmDataPlane dp(0, 2);
    EXPECT_THROW(dp.bind(ringOf(kSmallRing), {2}), ConfigError);  // sender out of range
  }
  {
    ShmOptions opt = ringOf(kSmallRing);
    opt.yieldFor = std::chrono::microseconds(-1);
    ShmDataPlane dp(0, 2);
    EXPECT_THROW(dp.bind(opt, {1}), ConfigError);
  }
  ShmDataPlane unbound(0, 2);
  EXPECT_THROW(unbound.connect({"shm://x", "shm://y"}, {1}), ConfigError);  // before bind
  ShmDataPlane a(0, 2);
  const std::string ep = a.bind(ringOf(kSmallRing), {1});
  EXPECT_THROW(a.connect({ep}, {1}), ConfigError);      // one endpoint for two ranks
  EXPECT_THROW(a.connect({ep, ep}, {2}), ConfigError);  // peer out of range
}

// Each bad endpoint is refused with a message that names the rank, the peer, the endpoint
// and the reason.
TEST(ShmDataPlane, ConnectRefusesBadEndpoints) {
  Mesh mesh;
  for (int r = 0; r < 3; ++r) mesh.dp.push_back(std::make_unique<ShmDataPlane>(r, 3));
  const std::string e0 = mesh[0].bind(ringOf(kSmallRing), {1});  // hears rank 1 only
  const std::string e1 = mesh[1].bind(ringOf(kSmallRing), {0, 2});
  const std::string e2 = mesh[2].bind(ringOf(kSmallRing), {});

  // A file in /dev/shm that is not a data-plane segment.
  const std::string foreign = "arl-test-foreign-" + std::to_string(::getpid());
  const int fd = ::shm_open(("/" + foreign).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 8192), 0);
  ::close(fd);

  struct Case {
    std::string name;
    std::string endpoint;  // rank 2 connects to it as rank `peer`'s endpoint
    int peer;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"zmq endpoint", "ipc:///tmp/x", 1, "not a shm:// endpoint"},
      {"empty name", "shm://", 1, "not a shm:// endpoint"},
      {"path", "shm://a/b", 1, "not a shm:// endpoint"},
      {"empty", "", 1, "not a shm:// endpoint"},
      {"no such segment", "shm://arl-dp-none-" + std::to_string(::getpid()), 1,
       "No such file or directory"},
      {"not a segment", "shm://" + foreign, 1, "not a data-plane segment"},
      {"another rank's segment", e1, 0, "belongs to rank 1 of 3"},
      {"no channel for this rank", e0, 0, "it receives nothing from rank 2"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<std::string> eps = {e0, e1, e2};
    eps[static_cast<size_t>(c.peer)] = c.endpoint;
    ShmDataPlane dp(2, 3);
    dp.bind(ringOf(kSmallRing), {});
    try {
      dp.connect(eps, {c.peer});
      FAIL() << "connected to " << c.endpoint;
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("rank 2 cannot use rank " + std::to_string(c.peer) + "'s endpoint '" +
                          c.endpoint + "'"),
                std::string::npos)
          << what;
      EXPECT_NE(what.find(c.reason), std::string::npos) << what;
    }
  }
  ::shm_unlink(("/" + foreign).c_str());

  // Connecting to what is there works, and then so do sends.
  mesh[2].connect({e0, e1, e2}, {1});
  const char byte = 2;
  mesh[2].send(1, headerFor(0), &byte, 1);
  EXPECT_EQ(mesh[1].recv(2, 0, kLong)->header().src, 2);
}

// Receiving from a rank bind() was not told about, or sending where connect() has no
// endpoint, fails as a PeerError; a peer left out of connect() is attached on first send.
TEST(ShmDataPlane, UnknownChannelsArePeerErrors) {
  Mesh mesh;
  for (int r = 0; r < 3; ++r) mesh.dp.push_back(std::make_unique<ShmDataPlane>(r, 3));
  mesh.endpoints = {mesh[0].bind(ringOf(kSmallRing), {1}), mesh[1].bind(ringOf(kSmallRing), {0}),
                    mesh[2].bind(ringOf(kSmallRing), {1})};
  try {
    mesh[0].recv(2, 7, kLong);
    FAIL() << "received from a rank without a channel";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.peer, 2);
    EXPECT_EQ(e.step, 7);
    EXPECT_NE(std::string(e.what()).find("no channel from rank 2"), std::string::npos) << e.what();
  }
  const char byte = 3;
  try {
    mesh[0].send(1, headerFor(2), &byte, 1);
    FAIL() << "sent without connect()";
  } catch (const PeerError& e) {
    EXPECT_NE(std::string(e.what()).find("connect() not called"), std::string::npos) << e.what();
  }
  mesh[0].connect(mesh.endpoints, {});  // endpoints known, nobody attached yet
  mesh[0].send(1, headerFor(2), &byte, 1);
  EXPECT_EQ(mesh[1].recv(0, 2, kLong)->header().step, 2u);
  try {
    mesh[0].send(2, headerFor(2), &byte, 1);  // rank 2 hears rank 1 only
    FAIL() << "sent to a rank without a channel for rank 0";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.peer, 2);
    EXPECT_NE(std::string(e.what()).find("receives nothing from rank 0"), std::string::npos)
        << e.what();
  }
}

// A channel has one producer: a second process (or data plane) attaching as the same rank is
// refused, and the first one's messages still arrive alone.
TEST(ShmDataPlane, SecondProducerForAChannelIsRefused) {
  Mesh mesh;
  for (int r = 0; r < 3; ++r) mesh.dp.push_back(std::make_unique<ShmDataPlane>(r, 3));
  // Rank 1 waits for two senders, so its name stays while the impostor tries.
  mesh.endpoints = {mesh[0].bind(ringOf(kSmallRing), {}), mesh[1].bind(ringOf(kSmallRing), {0, 2}),
                    mesh[2].bind(ringOf(kSmallRing), {})};
  mesh[0].connect(mesh.endpoints, {1});
  ShmDataPlane impostor(0, 3);
  impostor.bind(ringOf(kSmallRing), {});
  try {
    impostor.connect(mesh.endpoints, {1});
    FAIL() << "a second producer attached to rank 1's channel from rank 0";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 0 cannot use rank 1's endpoint"), std::string::npos) << what;
    EXPECT_NE(what.find("already has a producer (pid " + std::to_string(::getpid()) + ")"),
              std::string::npos)
        << what;
  }
  const char one = 1;
  mesh[0].send(1, headerFor(5), &one, 1);
  auto m = mesh[1].recv(0, 5, kLong);
  EXPECT_EQ(m->header().src, 0);
  EXPECT_EQ(*static_cast<const char*>(m->data()), 1);
}

// A WRAP record that starts the ring, or reaches past what was published, is reported as
// malformed at once instead of moving the read position into unpublished bytes (which then
// waits out the timeout). The record is forged by writing into the segment: its first
// channel's control block is at byte 128 (head first), its ring at byte 4096.
TEST(ShmDataPlane, MalformedWrapRecordIsRefused) {
  ShmDataPlane dp(1, 2);
  const std::string ep = dp.bind(ringOf(kSmallRing), {0});
  const int fd = ::open(shmPath(ep).c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  void* base = ::mmap(nullptr, 4096 + kSmallRing, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  ASSERT_NE(base, MAP_FAILED);
  auto* bytes = static_cast<unsigned char*>(base);
  const uint32_t wrap = 0x57524150;  // "WRAP"
  std::memcpy(bytes + 4096, &wrap, sizeof wrap);
  reinterpret_cast<std::atomic<uint64_t>*>(bytes + 128)->store(64);
  const auto t0 = SteadyClock::now();
  try {
    dp.recv(0, 0, milliseconds(3000));
    FAIL() << "a WRAP at the ring's start was taken";
  } catch (const PeerError& e) {
    EXPECT_NE(std::string(e.what()).find("malformed wrap record from rank 0 at ring offset 0"),
              std::string::npos)
        << e.what();
  }
  EXPECT_LT(SteadyClock::now() - t0, milliseconds(1000));
  ::munmap(base, 4096 + kSmallRing);
}

// Three ranks, each sending to and receiving from both others at once, a few messages
// ahead; every channel carries 1000 messages of mixed sizes, checked byte for byte.
TEST(ShmDataPlane, ThreeRanksExchangeInBothDirections) {
  constexpr int kRanks = 3;
  constexpr uint32_t kMessages = 1000;
  constexpr uint32_t kAhead = 2;
  auto mesh = fullMesh(kRanks, ringOf(kSmallRing));
  auto sizeOf = [](int src, int dst, uint32_t i) -> size_t {
    return (i * 7919u + static_cast<uint32_t>(src * 3 + dst) * 131u) % 12001u;
  };
  auto stream = [](int src, int dst) { return src * 8 + dst; };
  onThreads(kRanks, [&](int r) {
    ShmDataPlane& t = mesh[r];
    auto take = [&](uint32_t i) {
      for (int p = 0; p < kRanks; ++p) {
        if (p == r) continue;
        auto m = t.recv(p, i, kLong);
        ASSERT_EQ(m->header().src, p);
        ASSERT_EQ(m->header().step, i) << "out of order from rank " << p;
        ASSERT_TRUE(samePayload(*m, pattern(stream(p, r), i, sizeOf(p, r, i))))
            << "rank " << p << " -> " << r << " message " << i;
      }
    };
    for (uint32_t i = 0; i < kMessages; ++i) {
      for (int p = 0; p < kRanks; ++p) {
        if (p == r) continue;
        const auto data = pattern(stream(r, p), i, sizeOf(r, p, i));
        t.send(p, headerFor(i), data.data(), data.size());
      }
      if (i >= kAhead) take(i - kAhead);
    }
    for (uint32_t i = kMessages - kAhead; i < kMessages; ++i) take(i);
  });
}

// bind() removes the names of this pid namespace's segments whose process is gone, and leaves
// live ones alone, and those of other namespaces (a dead pid here may be alive there) and
// names without a namespace.
TEST(ShmDataPlane, BindRemovesSegmentsOfDeadProcesses) {
  const pid_t dead = deadPid();
  ASSERT_GT(dead, 0);
  const uint64_t ns = pidNamespace();
  ASSERT_NE(ns, 0u) << "/proc/self/ns/pid unreadable";
  const std::string d = std::to_string(dead);
  const std::string stale = "/arl-dp-" + d + "-ns" + std::to_string(ns) + "-r0-0-deadbeef";
  const std::string live =
      "/arl-dp-" + std::to_string(::getpid()) + "-ns" + std::to_string(ns) + "-r9-0-deadbeef";
  const std::string otherNs = "/arl-dp-" + d + "-ns" + std::to_string(ns + 1) + "-r0-0-deadbeef";
  const std::string noNs = "/arl-dp-" + d + "-r0-0-deadbeef";
  for (const auto& n : {stale, live, otherNs, noNs}) makeSegmentFile(n);
  ASSERT_TRUE(fs::exists("/dev/shm" + stale));
  ShmDataPlane dp(0, 1);
  dp.bind(ringOf(kSmallRing), {});
  EXPECT_FALSE(fs::exists("/dev/shm" + stale)) << "stale segment of pid " << dead << " kept";
  EXPECT_TRUE(fs::exists("/dev/shm" + live)) << "segment of a live process removed";
  EXPECT_TRUE(fs::exists("/dev/shm" + otherNs)) << "segment of another pid namespace removed";
  EXPECT_TRUE(fs::exists("/dev/shm" + noNs)) << "segment of an unknown namespace removed";
  for (const auto& n : {stale, live, otherNs, noNs}) ::shm_unlink(n.c_str());
}

// Runs `body` in a forked child that binds rank 0 of 2 (expecting rank 1, who never comes),
// sends its endpoint back and then calls `after`; returns the endpoint ("" on failure).
std::string bindInChild(pid_t& child, const std::function<void()>& after) {
  int fds[2];
  if (::pipe(fds) != 0) return "";
  child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    ShmDataPlane dp(0, 2);
    const std::string ep = dp.bind(ringOf(kSmallRing), {1});
    if (::write(fds[1], ep.data(), ep.size()) != static_cast<ssize_t>(ep.size())) ::_exit(1);
    ::close(fds[1]);
    after();
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string ep;
  char buf[256];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
    ep.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  return ep;
}

// A worker that dies between binding and its first receive (before its senders attached, so
// the name is still there) leaves its segment; the next bind in this namespace removes it.
TEST(ShmDataPlane, SegmentOfAWorkerDeadBeforeItsFirstReceiveIsSwept) {
  for (const bool killed : {false, true}) {
    SCOPED_TRACE(killed ? "SIGKILLed" : "_exit");
    pid_t child = -1;
    const std::string ep = bindInChild(child, [killed] {
      if (killed) ::pause();  // until the SIGKILL
    });
    ASSERT_GT(child, 0);
    ASSERT_FALSE(ep.empty());
    if (killed) ::kill(child, SIGKILL);
    // Until it is reaped the dead child is a zombie, whose pid still exists: no sweep, of this
    // process or of a test running beside it, takes its segment yet.
    siginfo_t info{};
    ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
    ASSERT_TRUE(fs::exists(shmPath(ep))) << "the dead worker's segment went by itself";
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_EQ(killed, WIFSIGNALED(status));
    ShmDataPlane next(0, 1);
    next.bind(ringOf(kSmallRing), {});
    EXPECT_FALSE(fs::exists(shmPath(ep))) << ep << " kept after its owner died";
  }
}

// Moves the calling (single-threaded) process's future children into a new pid namespace:
// directly when privileged, else inside a new user namespace that maps our own ids. False
// when the system allows neither.
bool unsharePidNamespace() {
  if (::unshare(CLONE_NEWPID) == 0) return true;
  const uid_t uid = ::getuid();
  const gid_t gid = ::getgid();
  if (::unshare(CLONE_NEWUSER | CLONE_NEWPID) != 0) return false;
  std::ofstream("/proc/self/setgroups") << "deny";
  std::ofstream("/proc/self/uid_map") << uid << " " << uid << " 1";
  std::ofstream("/proc/self/gid_map") << gid << " " << gid << " 1";
  return ::getuid() == uid;
}

// Writes a line to a pipe from a forked child.
void writeLine(int fd, const std::string& line) {
  const std::string l = line + "\n";
  if (::write(fd, l.data(), l.size()) != static_cast<ssize_t>(l.size())) ::_exit(1);
}

// The pid-namespace child of PeerInAnotherPidNamespaceKeepsItsSegment: forks until a child
// gets pid `target`, which binds, reports its endpoint on `out` and holds until `hold` ends.
[[noreturn]] void bindAsPidInNamespace(pid_t target, int out, int hold) {
  for (;;) {
    const pid_t c = ::fork();
    if (c < 0) ::_exit(2);
    if (c == 0) {
      if (::getpid() != target) ::_exit(0);
      ShmDataPlane dp(0, 2);
      writeLine(out, dp.bind(ringOf(kSmallRing), {1}));
      char b;
      while (::read(hold, &b, 1) > 0) {
      }
      dp.close();
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(c, &status, 0);
    if (c >= target) ::_exit(0);
  }
}

// A live peer in another pid namespace, whose pid names no process here: bind() here must
// keep its segment (before, it took it for dead and removed it). Uses a new pid namespace
// (and a user namespace when unprivileged); skipped where the system allows neither.
TEST(ShmDataPlane, PeerInAnotherPidNamespaceKeepsItsSegment) {
  pid_t target = 0;
  for (pid_t p = 2; p < 4096 && target == 0; ++p) {
    if (::kill(p, 0) != 0 && errno == ESRCH) target = p;
  }
  if (target == 0) GTEST_SKIP() << "no free small pid here";
  int out[2];
  int hold[2];
  ASSERT_EQ(::pipe(out), 0);
  ASSERT_EQ(::pipe(hold), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(out[0]);
    ::close(hold[1]);
    if (!unsharePidNamespace()) writeLine(out[1], "SKIP");
    const pid_t first = ::fork();  // pid 1 of the new namespace
    if (first == 0) bindAsPidInNamespace(target, out[1], hold[0]);
    int status = 0;
    if (first > 0) ::waitpid(first, &status, 0);
    ::_exit(0);
  }
  ::close(out[1]);
  ::close(hold[0]);
  std::string ep;
  char c;
  while (::read(out[0], &c, 1) == 1 && c != '\n') ep.push_back(c);
  ::close(out[0]);
  bool kept = false;
  if (ep.rfind(ShmDataPlane::kScheme, 0) == 0) {
    ShmDataPlane here(0, 1);
    here.bind(ringOf(kSmallRing), {});
    kept = fs::exists(shmPath(ep));
  }
  ::close(hold[1]);  // the peer closes and exits
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  if (ep == "SKIP") GTEST_SKIP() << "no new pid namespace allowed here";
  ASSERT_EQ(ep.rfind("shm://arl-dp-" + std::to_string(target) + "-ns", 0), 0u) << ep;
  EXPECT_EQ(ep.find("-ns" + std::to_string(pidNamespace()) + "-"), std::string::npos) << ep;
  EXPECT_TRUE(kept) << "the segment of a live peer in another pid namespace was removed";
  EXPECT_FALSE(fs::exists(shmPath(ep))) << "the peer's own close() left its name";
}

TEST(ShmDataPlane, RingSizeHoldsInflightPlusTwoRecords) {
  EXPECT_EQ(shmRingBytes(0, 1), kSmallRing);
  EXPECT_EQ(shmRingBytes(1000, 4), kSmallRing);
  EXPECT_GE(shmRingBytes(1000, 0), kSmallRing);
  for (const size_t max : {size_t{1}, size_t{100000}, size_t{1} << 20, (size_t{1} << 20) + 1}) {
    for (const int inflight : {1, 2, 4, 8}) {
      const size_t ring = shmRingBytes(max, inflight);
      EXPECT_GE(ring, kSmallRing);
      EXPECT_GE(ring, recordBytes(max) * static_cast<size_t>(inflight + 2))
          << max << " bytes, " << inflight << " in flight";
    }
  }
  EXPECT_GE(shmRingBytes(size_t{1} << 20, 0), 3 * recordBytes(size_t{1} << 20));
}

// Sizes that would wrap around are refused, not computed modulo 2^64.
TEST(ShmDataPlane, HugeSizesAreConfigErrorsNotWrappedSizes) {
  constexpr size_t kMax = std::numeric_limits<size_t>::max();
  EXPECT_THROW(shmRingBytes(kMax, 1), ConfigError);
  EXPECT_THROW(shmRingBytes(kMax - 63, 1), ConfigError);
  EXPECT_THROW(shmRingBytes(kMax / 3, 1), ConfigError);
  EXPECT_THROW(shmRingBytes(kMax / 8, 64), ConfigError);
  try {
    shmRingBytes(kMax / 4, 4);
    FAIL() << "a ring of 6 x 2^62 bytes";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("make the slice smaller"), std::string::npos) << e.what();
  }
  for (const size_t ring : {kMax, kMax - 100, kMax / 2, size_t{1} << 63}) {
    ShmDataPlane dp(0, 3);
    EXPECT_THROW(dp.bind(ringOf(ring), {1, 2}), ConfigError) << ring;
  }
  // A message size that would round up to a small record is refused before any copy.
  auto mesh = oneWay(ringOf(kSmallRing));
  const char byte = 0;
  for (const size_t bytes : {kMax, kMax - 62, kMax - 64}) {
    try {
      mesh[0].send(1, headerFor(0), &byte, bytes);
      FAIL() << "sent " << bytes << " bytes";
    } catch (const PeerError& e) {
      EXPECT_NE(std::string(e.what()).find("does not fit rank 1's ring"), std::string::npos)
          << e.what();
    }
  }
}

// A ring sized by shmRingBytes() takes `inflight` messages of the largest size without the
// receiver taking any, wherever its write position starts.
TEST(ShmDataPlane, RingSizedForInflightNeverBlocksThatMany) {
  constexpr size_t kMax = 100000;
  constexpr int kInflight = 3;
  ShmOptions opt = ringOf(shmRingBytes(kMax, kInflight));
  opt.sendTimeout = milliseconds(2000);
  auto mesh = oneWay(opt);
  const auto big = pattern(0, 0, kMax);
  uint32_t step = 0;
  for (const size_t shift : {size_t{0}, size_t{64}, size_t{5000}, size_t{70000}, size_t{99999},
                             size_t{12345}, size_t{100000}, size_t{1}, size_t{64 * 999}}) {
    SCOPED_TRACE("shift " + std::to_string(shift));
    // Move the write position on, and drain.
    const auto filler = pattern(0, 1, shift);
    mesh[0].send(1, headerFor(step), filler.data(), filler.size());
    mesh[1].recv(0, step++, kLong).reset();
    // A send that had to wait would wait for good (nobody reads) and fail after 2 s.
    for (int k = 0; k < kInflight; ++k) mesh[0].send(1, headerFor(step + k), big.data(), kMax);
    std::vector<std::unique_ptr<InMessage>> held;
    for (int k = 0; k < kInflight; ++k) held.push_back(mesh[1].recv(0, step++, kLong));
    for (auto& m : held) EXPECT_TRUE(samePayload(*m, big));
  }
}

// The case a ring of inflight + 1 records could not take: the receiver holds `inflight`
// records (it may keep them until the next arrives) and the next record must wrap. With the
// old size the send waits for a release that never comes; here it must not wait at all,
// wherever the write position starts.
TEST(ShmDataPlane, RingSizedForInflightTakesTheNextWhileThoseAreHeld) {
  constexpr size_t kMax = 100000;
  for (const int inflight : {1, 2, 3}) {
    ShmOptions opt = ringOf(shmRingBytes(kMax, inflight));
    opt.sendTimeout = milliseconds(1000);
    auto mesh = oneWay(opt);
    const auto big = pattern(0, 0, kMax);
    uint32_t step = 0;
    for (const size_t shift : {size_t{0}, size_t{64}, size_t{5000}, size_t{50000}, size_t{70000},
                               size_t{99999}, size_t{12345}, size_t{100000}, size_t{64 * 999}}) {
      SCOPED_TRACE("inflight " + std::to_string(inflight) + ", shift " + std::to_string(shift));
      const auto filler = pattern(0, 1, shift);
      mesh[0].send(1, headerFor(step), filler.data(), filler.size());
      mesh[1].recv(0, step++, kLong).reset();
      std::vector<std::unique_ptr<InMessage>> held;
      for (int k = 0; k < inflight; ++k) {
        mesh[0].send(1, headerFor(step), big.data(), kMax);
        held.push_back(mesh[1].recv(0, step++, kLong));
      }
      try {
        mesh[0].send(1, headerFor(step), big.data(), kMax);  // would wait for good
      } catch (const PeerError& e) {
        FAIL() << e.what();
      }
      auto next = mesh[1].recv(0, step++, kLong);
      EXPECT_TRUE(samePayload(*next, big));
      for (auto& m : held) EXPECT_TRUE(samePayload(*m, big));
    }
  }
}

// Pages of this process's mappings of the file `name` (a /dev/shm file name without the
// directory): one entry per mapping, the number of its pages that are mapped now (present in
// /proc/self/pagemap, bit 63) and how many it has.
struct MappedPages {
  size_t present = 0;
  size_t total = 0;
};
std::vector<MappedPages> mappedPagesOf(const std::string& name) {
  const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  std::ifstream maps("/proc/self/maps");
  // pagemap takes whole 8-byte entries at their offsets only: a buffered stream reads other
  // sizes and fails.
  const int pagemap = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  EXPECT_GE(pagemap, 0) << "cannot open /proc/self/pagemap";
  std::vector<MappedPages> out;
  std::string line;
  while (pagemap >= 0 && std::getline(maps, line)) {
    if (line.find("/dev/shm/" + name) == std::string::npos) continue;
    const uint64_t lo = std::stoull(line.substr(0, line.find('-')), nullptr, 16);
    const uint64_t hi = std::stoull(line.substr(line.find('-') + 1), nullptr, 16);
    MappedPages m;
    for (uint64_t a = lo; a < hi; a += page) {
      uint64_t entry = 0;
      const auto at = static_cast<off_t>(a / page * sizeof entry);
      EXPECT_EQ(::pread(pagemap, &entry, sizeof entry, at), static_cast<ssize_t>(sizeof entry))
          << "cannot read /proc/self/pagemap";
      if ((entry >> 63) & 1) ++m.present;
      ++m.total;
    }
    out.push_back(m);
  }
  if (pagemap >= 0) ::close(pagemap);
  return out;
}

// Setup maps every ring page a process will use into it, so that no send or receive pays a
// first-touch page fault: bind() the whole segment of its receiver, connect() the ring of
// its own channel and none of another sender's (docs/dataplane.md, "Pages").
TEST(ShmDataPlane, SetupMapsTheRingPagesEachSideUses) {
  constexpr size_t kRing = size_t{256} << 10;
  const size_t ringPages = kRing / static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<std::unique_ptr<ShmDataPlane>> dp;
  for (int r = 0; r < 3; ++r) dp.push_back(std::make_unique<ShmDataPlane>(r, 3));
  const std::string ep = dp[0]->bind(ringOf(kRing), {1, 2});
  const std::string name = ep.substr(std::strlen(ShmDataPlane::kScheme));
  const std::vector<std::string> endpoints = {ep, dp[1]->bind(ringOf(kRing), {}),
                                              dp[2]->bind(ringOf(kRing), {})};

  auto maps = mappedPagesOf(name);
  ASSERT_EQ(maps.size(), 1u) << "the owner's mapping";
  EXPECT_EQ(maps[0].present, maps[0].total) << "bind() left pages of its rings unmapped";
  EXPECT_GE(maps[0].total, 2 * ringPages);

  dp[2]->connect(endpoints, {0});  // only rank 2 sends
  maps = mappedPagesOf(name);
  ASSERT_EQ(maps.size(), 2u) << "the owner's mapping and rank 2's";
  std::sort(maps.begin(), maps.end(),
            [](const MappedPages& a, const MappedPages& b) { return a.present < b.present; });
  const MappedPages& sender = maps[0];
  EXPECT_EQ(maps[1].present, maps[1].total);
  EXPECT_GE(sender.present, ringPages) << "connect() left pages of its ring unmapped";
  EXPECT_LT(sender.present, sender.total) << "connect() touched rank 1's ring as well";

  // The touched rings work as before.
  const auto data = pattern(2, 0, 100000);
  dp[2]->send(0, headerFor(0), data.data(), data.size());
  EXPECT_TRUE(samePayload(*dp[0]->recv(2, 0, kLong), data));
}

// A whole all-reduce: the executor on every rank's thread (more ranks than cores), CPU
// buffers, this data plane in between, bound and connected to the schedule's peers only.
// Inputs are small integers in floats, so the sums are exact and compared bit for bit; two
// iterations reuse the same rings, and the tree schedule sends both ways between ranks.
TEST(ShmDataPlane, AllReduceOverTheDataPlane) {
  constexpr int kRanks = 4;
  for (const std::string algo : {"ring", "tree"}) {
    for (const uint64_t slice : {uint64_t{16384}, uint64_t{512}}) {
      SCOPED_TRACE(algo + ", slice " + std::to_string(slice));
      GenParams p;
      p.nranks = kRanks;
      p.count = 50021;  // not a multiple of the ranks or the slice
      p.sliceElems = slice;
      const Schedule s = generate(algo, p);
      ExecOptions eo;
      eo.epoch = 5;
      eo.recvTimeout = milliseconds(20000);
      ShmOptions opt = ringOf(shmRingBytes(slice * sizeof(float), eo.inflight));
      std::vector<std::unique_ptr<ShmDataPlane>> dp;
      std::vector<std::string> endpoints;
      for (int r = 0; r < kRanks; ++r) {
        dp.push_back(std::make_unique<ShmDataPlane>(r, kRanks));
        endpoints.push_back(dp.back()->bind(opt, dataPlanePeers(s, r).recvFrom));
      }
      for (int r = 0; r < kRanks; ++r) {
        dp[static_cast<size_t>(r)]->connect(endpoints, dataPlanePeers(s, r).sendTo);
      }
      auto input = [](int r, uint64_t i) {
        return static_cast<float>((i * 7 + static_cast<uint64_t>(r) * 3) % 11);
      };
      std::vector<uint64_t> wrong(kRanks, 0);
      onThreads(kRanks, [&](int r) {
        ShmDataPlane& t = *dp[static_cast<size_t>(r)];
        CpuBackend backend;
        const size_t bytes = p.count * sizeof(float);
        std::vector<float> host(p.count);
        for (uint64_t i = 0; i < p.count; ++i) host[i] = input(r, i);
        RankBuffers bufs;
        bufs.input = backend.allocate(bytes);
        bufs.output = backend.allocate(bytes);
        backend.upload(bufs.input, host.data(), bytes);
        try {
          Executor ex(s, r, t, backend, nullptr, eo);
          for (uint32_t it = 0; it < 2; ++it) {
            ex.run(bufs, it, it);
            std::vector<float> out(p.count);
            backend.download(out.data(), bufs.output, bytes);
            for (uint64_t i = 0; i < p.count; ++i) {
              float want = 0;
              for (int q = 0; q < kRanks; ++q) want += input(q, i);
              if (out[i] != want) ++wrong[static_cast<size_t>(r)];
            }
          }
        } catch (...) {
          t.abort();
          t.close();
          backend.deallocate(bufs.input);
          backend.deallocate(bufs.output);
          throw;
        }
        EXPECT_TRUE(t.close());
        backend.deallocate(bufs.input);
        backend.deallocate(bufs.output);
      });
      for (int r = 0; r < kRanks; ++r) {
        EXPECT_EQ(wrong[static_cast<size_t>(r)], 0u) << "#wrong on rank " << r;
        EXPECT_FALSE(fs::exists(shmPath(endpoints[static_cast<size_t>(r)]))) << "rank " << r;
      }
    }
  }
}

}  // namespace
}  // namespace arl

namespace arl {
namespace {

// The wait settings a worker takes from its environment, and the refusal of anything that is
// not a whole number of microseconds.
TEST(ShmDataPlane, WaitSettingsFromTheEnvironment) {
  const char* names[] = {"ARL_SHM_SPIN_US", "ARL_SHM_YIELD_US", "ARL_SHM_YIELD_COST_US"};
  for (const char* n : names) ::unsetenv(n);
  ShmOptions base;
  base.spin = std::chrono::microseconds(3);
  const ShmOptions same = shmWaitsFromEnv(base);
  EXPECT_EQ(same.spin.count(), 3);
  EXPECT_EQ(same.yieldFor, base.yieldFor);
  EXPECT_EQ(same.yieldCostLimit, base.yieldCostLimit);

  ::setenv("ARL_SHM_SPIN_US", "7", 1);
  ::setenv("ARL_SHM_YIELD_US", "0", 1);
  ::setenv("ARL_SHM_YIELD_COST_US", "1000000000", 1);
  const ShmOptions set = shmWaitsFromEnv(base);
  EXPECT_EQ(set.spin.count(), 7);
  EXPECT_EQ(set.yieldFor.count(), 0);
  EXPECT_EQ(set.yieldCostLimit.count(), 1'000'000'000);

  for (const char* bad : {"-1", "1e3", "12 ", "abc", "1000000001"}) {
    ::setenv("ARL_SHM_YIELD_COST_US", bad, 1);
    try {
      (void)shmWaitsFromEnv(base);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("ARL_SHM_YIELD_COST_US='") + bad + "'"),
                std::string::npos)
          << e.what();
    }
  }
  for (const char* n : names) ::unsetenv(n);
}

// What switches yielding off (ShmOptions::yieldCostLimit): the mean of the recent yields, not
// one slow yield. A rank of the lab's own that computes for a whole slice stalls a yield now
// and then; a program that keeps the cores busy stalls most of them.
TEST(YieldCost, OneStalledYieldAmongQuickOnesDoesNotSwitchYieldingOff) {
  using std::chrono::microseconds;
  const microseconds limit(300);
  YieldCost cost;
  for (int i = 0; i < 1000; ++i) ASSERT_FALSE(cost.costly(microseconds(2), limit)) << i;
  EXPECT_LT(cost.mean(), microseconds(5));
  EXPECT_FALSE(cost.costly(microseconds(5000), limit));  // a whole slice: 5 ms
  EXPECT_GT(cost.mean(), microseconds(100));
  // The quick yields after it bring the mean back down.
  for (int i = 0; i < 200; ++i) ASSERT_FALSE(cost.costly(microseconds(2), limit)) << i;
  EXPECT_LT(cost.mean(), microseconds(5));
  // Two whole slices waited out one after the other do.
  EXPECT_FALSE(cost.costly(microseconds(5000), limit));
  EXPECT_TRUE(cost.costly(microseconds(5000), limit));
}

TEST(YieldCost, YieldsThatEachWaitOutSomeoneElsesSliceSwitchItOffWithinAFewAndStartAfresh) {
  using std::chrono::microseconds;
  const microseconds limit(300);
  YieldCost cost;
  for (int i = 0; i < 100; ++i) ASSERT_FALSE(cost.costly(microseconds(2), limit));
  // Yields of 1.5 ms each, below any single-yield threshold of 2.5 ms: costly all the same.
  int yields = 0;
  while (!cost.costly(microseconds(1500), limit)) ASSERT_LT(++yields, 12);
  EXPECT_GE(yields, 3);
  // Measured afresh after the backoff: the first slow yield alone is not enough again.
  EXPECT_EQ(cost.mean(), microseconds(0));
  EXPECT_FALSE(cost.costly(microseconds(1500), limit));
}

}  // namespace
}  // namespace arl
