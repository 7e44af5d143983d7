// The ZeroMQ data plane over real ipc:// and tcp://127.0.0.1 sockets, one thread per rank.
#include "transport/zmq/zmq_transport.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "backend/cpu/cpu_backend.h"
#include "base/clock.h"
#include "base/errors.h"
#include "exec/executor.h"
#include "schedule/generators.h"
#include "transport_test_util.h"

namespace arl {
namespace {

using arl::transport_test::headerFor;
using arl::transport_test::onThreads;
using arl::transport_test::pattern;
using arl::transport_test::samePayload;
using std::chrono::milliseconds;
using Kind = BindOptions::Kind;

BindOptions optionsFor(Kind k) {
  BindOptions o;
  o.kind = k;
  return o;
}

// n data planes, bound and connected to every other rank, as the coordinator would set them
// up. Each rank of a real run closes in its own process; here they close on parallel
// threads, so that each goodbye meets its peer's.
struct Mesh {
  std::vector<std::unique_ptr<ZmqDataPlane>> dp;

  Mesh() = default;
  Mesh(Mesh&&) = default;
  Mesh& operator=(Mesh&&) = delete;
  ZmqDataPlane* operator[](size_t r) const { return dp[r].get(); }
  // close() of every rank, concurrently; returns each rank's result.
  std::vector<bool> closeAll() {
    std::vector<char> clean(dp.size(), 0);
    onThreads(static_cast<int>(dp.size()),
              [&](int r) { clean[static_cast<size_t>(r)] = dp[static_cast<size_t>(r)]->close(); });
    return {clean.begin(), clean.end()};
  }
  ~Mesh() { closeAll(); }
};

Mesh makeMesh(int n, const BindOptions& opt) {
  Mesh mesh;
  std::vector<std::string> endpoints;
  for (int r = 0; r < n; ++r) {
    mesh.dp.push_back(std::make_unique<ZmqDataPlane>(r, n));
    endpoints.push_back(mesh.dp.back()->bind(opt));
  }
  for (int r = 0; r < n; ++r) {
    std::vector<int> peers;
    for (int p = 0; p < n; ++p) {
      if (p != r) {
        peers.push_back(p);
      }
    }
    mesh.dp[static_cast<size_t>(r)]->connect(endpoints, peers);
  }
  return mesh;
}

class ZmqDataPlaneTest : public ::testing::TestWithParam<Kind> {};

INSTANTIATE_TEST_SUITE_P(Transports, ZmqDataPlaneTest, ::testing::Values(Kind::Ipc, Kind::Tcp),
                         [](const auto& info) {
                           return std::string(info.param == Kind::Ipc ? "ipc" : "tcp");
                         });

TEST_P(ZmqDataPlaneTest, EndpointMatchesTransportKind) {
  ZmqDataPlane dp(0, 1);
  const std::string ep = dp.bind(optionsFor(GetParam()));
  EXPECT_EQ(ep, dp.endpoint());
  if (GetParam() == Kind::Ipc) {
    EXPECT_EQ(ep.rfind("ipc://", 0), 0u) << ep;
  } else {
    EXPECT_EQ(ep.rfind("tcp://127.0.0.1:", 0), 0u) << ep;
    EXPECT_EQ(ep.find('*'), std::string::npos) << "ephemeral port not resolved: " << ep;
  }
}

// Two senders interleave messages of mixed sizes (copied and zero-copy); the receiver asks
// for them in an order of its own and must get each peer's messages in the order sent.
TEST_P(ZmqDataPlaneTest, FifoPerPeerWithInterleavedSenders) {
  constexpr int kRanks = 3;
  constexpr uint32_t kMessages = 40;
  auto dp = makeMesh(kRanks, optionsFor(GetParam()));
  auto sizeOf = [](int src, uint32_t i) -> size_t {
    return (i + static_cast<uint32_t>(src)) % 3 == 0 ? 64 * 1024 + i : 100 + i;
  };
  std::vector<std::vector<std::vector<unsigned char>>> sent(kRanks);
  for (int src = 1; src < kRanks; ++src) {
    for (uint32_t i = 0; i < kMessages; ++i) {
      sent[src].push_back(pattern(src, i, sizeOf(src, i)));
    }
  }
  onThreads(kRanks, [&](int r) {
    ZmqDataPlane& t = *dp[static_cast<size_t>(r)];
    if (r != 0) {
      std::vector<std::shared_ptr<SendCompletion>> pending;
      for (uint32_t i = 0; i < kMessages; ++i) {
        const auto& p = sent[r][i];
        pending.push_back(t.send(0, headerFor(i, i * 10), p.data(), p.size()));
      }
      for (auto& c : pending) {
        c->wait();
      }
      return;
    }
    // Receive order: two from rank 2, one from rank 1, repeated; leftovers at the end.
    uint32_t next[kRanks] = {0, 0, 0};
    auto take = [&](int src) {
      const uint32_t i = next[src]++;
      auto m = t.recv(src, i, milliseconds(10000));
      ASSERT_EQ(m->header().src, src);
      EXPECT_EQ(m->header().step, i) << "out of order from rank " << src;
      EXPECT_EQ(m->header().chunk, i * 10);
      EXPECT_EQ(m->header().epoch, 7u);
      EXPECT_EQ(m->header().length, sent[src][i].size());
      EXPECT_TRUE(samePayload(*m, sent[src][i])) << "payload of rank " << src << " message " << i;
    };
    while (next[1] < kMessages || next[2] < kMessages) {
      for (int k = 0; k < 2 && next[2] < kMessages; ++k) {
        take(2);
      }
      if (next[1] < kMessages) {
        take(1);
      }
    }
    EXPECT_EQ(t.queued(1), 0u);
    EXPECT_EQ(t.queued(2), 0u);
  });
}

// ready() reads what has arrived without waiting: true once a message from that peer is
// there (others' are queued on the way), false once it is taken.
TEST_P(ZmqDataPlaneTest, ReadySaysWhetherAMessageHasArrived) {
  auto dp = makeMesh(3, optionsFor(GetParam()));
  ZmqDataPlane& t = *dp[0];
  EXPECT_FALSE(t.ready(1, 0));
  const auto fromTwo = pattern(2, 0, 100);
  const auto fromOne = pattern(1, 0, 70000);  // zero-copy sized
  dp[2]->send(0, headerFor(0, 0), fromTwo.data(), fromTwo.size())->wait();
  const auto giveUp = SteadyClock::now() + milliseconds(10000);
  while (t.queued(2) == 0 && SteadyClock::now() < giveUp) {
    EXPECT_FALSE(t.ready(1, 0));
    std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_EQ(t.queued(2), 1u);  // read while asking about rank 1, kept for rank 2
  EXPECT_TRUE(t.ready(2, 0));
  dp[1]->send(0, headerFor(0, 0), fromOne.data(), fromOne.size())->wait();
  while (!t.ready(1, 0) && SteadyClock::now() < giveUp) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_TRUE(t.ready(1, 0));
  EXPECT_TRUE(samePayload(*t.recv(1, 0, milliseconds(1000)), fromOne));
  EXPECT_TRUE(samePayload(*t.recv(2, 0, milliseconds(1000)), fromTwo));
  EXPECT_FALSE(t.ready(1, 1));
  EXPECT_FALSE(t.ready(2, 1));
}

// arrived() is ready() that a shaped plane answers too: the message is there, recv() paces it.
TEST_P(ZmqDataPlaneTest, ArrivedSaysAMessageIsThereOnAShapedPlane) {
  BindOptions opt = optionsFor(GetParam());
  opt.shaping.addedLatencySeconds = 1e-6;
  auto dp = makeMesh(2, opt);
  ZmqDataPlane& t = *dp[0];
  EXPECT_FALSE(t.arrived(1));
  const auto p = pattern(1, 0, 100);
  dp[1]->send(0, headerFor(0, 0), p.data(), p.size())->wait();
  const auto giveUp = SteadyClock::now() + milliseconds(10000);
  while (!t.arrived(1) && SteadyClock::now() < giveUp) std::this_thread::sleep_for(milliseconds(1));
  EXPECT_TRUE(t.arrived(1));
  EXPECT_FALSE(t.ready(1, 0));
  EXPECT_TRUE(samePayload(*t.recv(1, 0, milliseconds(1000)), p));
  EXPECT_FALSE(t.arrived(1));
}

// While rank 0 waits for rank 2, everything rank 1 sends is queued, then delivered in order.
TEST_P(ZmqDataPlaneTest, MessagesFromOtherPeersAreQueuedWhileWaiting) {
  BindOptions opt = optionsFor(GetParam());
  opt.closeLinger = milliseconds(300);  // rank 0's deliberate timeouts spoil its goodbye
  auto dp = makeMesh(3, opt);
  constexpr uint32_t kMessages = 5;
  std::vector<std::vector<unsigned char>> sent;
  for (uint32_t i = 0; i < kMessages; ++i) {
    sent.push_back(pattern(1, i, 1000 + i));
  }
  for (uint32_t i = 0; i < kMessages; ++i) {
    EXPECT_TRUE(dp[1]->send(0, headerFor(i), sent[i].data(), sent[i].size())->done());
  }
  // Each timed-out wait for rank 2 drains what arrived from rank 1 into its queue.
  const auto giveUp = SteadyClock::now() + std::chrono::seconds(10);
  while (dp[0]->queued(1) < kMessages && SteadyClock::now() < giveUp) {
    EXPECT_THROW(dp[0]->recv(2, 0, milliseconds(20)), PeerError);
  }
  ASSERT_EQ(dp[0]->queued(1), kMessages);
  for (uint32_t i = 0; i < kMessages; ++i) {
    auto m = dp[0]->recv(1, i, milliseconds(0));
    EXPECT_EQ(m->header().step, i);
    EXPECT_TRUE(samePayload(*m, sent[i]));
  }
  EXPECT_EQ(dp[0]->queued(1), 0u);
}

// 8 MiB payloads go zero-copy. With one-message queues and small kernel buffers the link
// cannot hold all of them, so some completion must still be pending while the receiver
// has read nothing: completion tracks ZeroMQ releasing the memory, not the call returning.
TEST_P(ZmqDataPlaneTest, LargeZeroCopyPayloadsArriveIntact) {
  constexpr uint32_t kMessages = 6;
  constexpr size_t kBytes = 8u << 20;
  BindOptions opt = optionsFor(GetParam());
  opt.sndHwm = 1;
  opt.rcvHwm = 1;
  opt.tcpBufferBytes = 64 * 1024;
  auto dp = makeMesh(2, opt);
  std::vector<std::vector<unsigned char>> sent;
  for (uint32_t i = 0; i < kMessages; ++i) {
    sent.push_back(pattern(0, i, kBytes));
  }

  std::mutex m;
  std::vector<std::shared_ptr<SendCompletion>> completions;
  std::string sendError;
  std::thread sender([&] {
    try {
      for (uint32_t i = 0; i < kMessages; ++i) {
        auto c = dp[0]->send(1, headerFor(i), sent[i].data(), kBytes);
        std::lock_guard<std::mutex> lk(m);
        completions.push_back(std::move(c));
      }
    } catch (const PeerError& e) {
      sendError = e.what();
    }
  });
  // Give the link time to fill; the assertion below holds however long this takes.
  std::this_thread::sleep_for(milliseconds(300));
  {
    std::lock_guard<std::mutex> lk(m);
    // The link holds about four messages, so the sender is blocked and the last payload it
    // queued is still referenced by ZeroMQ. A copying send would report it done already.
    ASSERT_FALSE(completions.empty());
    EXPECT_LT(completions.size(), kMessages) << "the whole 48 MiB fit in a bounded link";
    EXPECT_FALSE(completions.back()->done()) << "payload released before it left the sender";
  }
  for (uint32_t i = 0; i < kMessages; ++i) {
    auto msg = dp[1]->recv(0, i, milliseconds(20000));
    EXPECT_EQ(msg->header().step, i);
    EXPECT_TRUE(samePayload(*msg, sent[i])) << "message " << i;
  }
  sender.join();
  EXPECT_EQ(sendError, "");
  ASSERT_EQ(completions.size(), kMessages);
  for (auto& c : completions) {
    c->wait();
    EXPECT_TRUE(c->done());
  }
}

// Small payloads are copied: done at once, and later changes to the buffer do not travel.
TEST_P(ZmqDataPlaneTest, SmallPayloadIsCopiedAndDoneAtOnce) {
  auto dp = makeMesh(2, optionsFor(GetParam()));
  std::vector<unsigned char> buf = pattern(0, 1, 512);
  const auto original = buf;
  auto c = dp[0]->send(1, headerFor(1), buf.data(), buf.size());
  EXPECT_TRUE(c->done());
  std::fill(buf.begin(), buf.end(), 0xEE);
  auto m = dp[1]->recv(0, 1, milliseconds(10000));
  EXPECT_TRUE(samePayload(*m, original));
  // An empty payload is a valid message too.
  dp[0]->send(1, headerFor(2), nullptr, 0);
  auto e = dp[1]->recv(0, 2, milliseconds(10000));
  EXPECT_EQ(e->size(), 0u);
  EXPECT_EQ(e->header().length, 0u);
}

TEST_P(ZmqDataPlaneTest, RecvTimeoutNamesPeerAndStep) {
  auto dp = makeMesh(2, optionsFor(GetParam()));
  try {
    dp[0]->recv(1, 5, milliseconds(100));
    FAIL() << "recv returned without data";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.rank, 0);
    EXPECT_EQ(e.peer, 1);
    EXPECT_EQ(e.step, 5);
    EXPECT_NE(std::string(e.what()).find("rank 0: no data from rank 1 for step 5 within 100 ms"),
              std::string::npos)
        << e.what();
  }
}

// A raw PUSH socket plays a faulty peer. Each malformed message is refused with a reason
// (and the sender when the header names it), and the stream carries on afterwards.
TEST_P(ZmqDataPlaneTest, MalformedMessagesAreRejected) {
  ZmqDataPlane dp(0, 3);
  const std::string ep = dp.bind(optionsFor(GetParam()));
  zmq::context_t ctx(1);
  zmq::socket_t raw(ctx, zmq::socket_type::push);
  raw.set(zmq::sockopt::linger, 0);
  raw.connect(ep);

  auto header = [](int src, uint64_t length) {
    ChunkHeader h;
    h.src = src;
    h.step = 4;
    h.length = length;
    return h;
  };
  auto sendFrames = [&](const std::vector<std::string>& frames) {
    for (size_t i = 0; i < frames.size(); ++i) {
      raw.send(zmq::buffer(frames[i]),
               i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  };
  auto bytesOf = [](const ChunkHeader& h) {
    return std::string(reinterpret_cast<const char*>(&h), sizeof h);
  };
  struct Case {
    std::string name;
    std::vector<std::string> frames;
    int peer;  // sender the error must name, -1 when the header cannot tell
    std::string reason;
  };
  ChunkHeader badMagic = header(1, 3);
  badMagic.magic = 0xDEADBEEF;
  const std::vector<Case> cases = {
      {"one frame", {bytesOf(header(1, 0))}, 1, "from rank 1: 1 frame, expected 2"},
      {"three frames", {bytesOf(header(2, 3)), "abc", "x"}, 2, "from rank 2: 3 frames"},
      {"short header", {std::string(10, 'h'), "abc"}, -1, "header frame is 10 bytes, expected 56"},
      {"bad magic", {bytesOf(badMagic), "abc"}, -1, "bad magic 0xDEADBEEF"},
      {"sender out of range", {bytesOf(header(9, 3)), "abc"}, -1, "sender rank 9 not in [0, 3)"},
      {"length mismatch",
       {bytesOf(header(1, 100)), std::string(99, 'p')},
       1,
       "from rank 1: header says 100 payload bytes, payload frame has 99"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    sendFrames(c.frames);
    sendFrames({bytesOf(header(1, 2)), "ok"});
    try {
      dp.recv(1, 4, milliseconds(10000));
      FAIL() << "malformed message accepted";
    } catch (const PeerError& e) {
      EXPECT_EQ(e.rank, 0);
      EXPECT_EQ(e.peer, c.peer);
      EXPECT_EQ(e.step, 4);
      const std::string what = e.what();
      EXPECT_NE(what.find("malformed message"), std::string::npos) << what;
      EXPECT_NE(what.find(c.reason), std::string::npos) << what;
    }
    auto ok = dp.recv(1, 4, milliseconds(10000));
    EXPECT_EQ(ok->size(), 2u);
    EXPECT_EQ(std::string(static_cast<const char*>(ok->data()), 2), "ok");
  }
}

TEST_P(ZmqDataPlaneTest, AbortUnblocksWaitingRecvAndFailsLaterCalls) {
  auto dp = makeMesh(2, optionsFor(GetParam()));
  std::atomic<bool> started{false};
  std::string error;
  SteadyClock::time_point failedAt;
  std::thread waiter([&] {
    started = true;
    try {
      dp[0]->recv(1, 3, milliseconds(60000));
    } catch (const PeerError& e) {
      failedAt = SteadyClock::now();
      error = e.what();
    }
  });
  while (!started) {
    std::this_thread::yield();
  }
  std::this_thread::sleep_for(milliseconds(100));
  const auto abortedAt = SteadyClock::now();
  dp[0]->abort();
  waiter.join();
  EXPECT_NE(error.find("rank 0: run aborted"), std::string::npos) << error;
  EXPECT_NE(error.find("step 3"), std::string::npos) << error;
  // Generous bound for a loaded 2-core machine; the design target is tens of milliseconds.
  EXPECT_LT(failedAt - abortedAt, std::chrono::seconds(2));
  const char byte = 1;
  EXPECT_THROW(dp[0]->send(1, headerFor(0), &byte, 1), PeerError);
  EXPECT_THROW(dp[0]->recv(1, 4, milliseconds(10)), PeerError);
}

// A sender blocked on a full link (the receiver never reads) is released by abort, and so is
// a wait on a zero-copy completion that ZeroMQ still holds.
TEST_P(ZmqDataPlaneTest, AbortUnblocksBlockedSendAndCompletionWait) {
  BindOptions opt = optionsFor(GetParam());
  opt.sndHwm = 1;
  opt.rcvHwm = 1;
  opt.tcpBufferBytes = 64 * 1024;
  auto dp = makeMesh(2, opt);
  const std::vector<unsigned char> big(4u << 20, 0x5A);
  std::string sendError;
  std::string waitError;
  std::thread sender([&] {
    std::vector<std::shared_ptr<SendCompletion>> pending;
    try {
      for (uint32_t i = 0; i < 64; ++i) {
        pending.push_back(dp[0]->send(1, headerFor(i), big.data(), big.size()));
      }
    } catch (const PeerError& e) {
      sendError = e.what();
    }
    for (auto& c : pending) {
      if (c->done()) {
        continue;
      }
      try {
        c->wait();
      } catch (const PeerError& e) {
        waitError = e.what();
      }
      break;
    }
  });
  std::this_thread::sleep_for(milliseconds(300));
  dp[0]->abort();
  sender.join();
  EXPECT_NE(sendError.find("run aborted"), std::string::npos) << sendError;
  EXPECT_NE(waitError.find("run aborted"), std::string::npos) << waitError;
  // Teardown releases what ZeroMQ held, so `big` may be freed after this.
  dp[0]->close();
}

TEST_P(ZmqDataPlaneTest, SendTimesOutWhenPeerNeverReads) {
  BindOptions opt = optionsFor(GetParam());
  opt.sndHwm = 1;
  opt.rcvHwm = 1;
  opt.tcpBufferBytes = 64 * 1024;
  opt.sendTimeout = milliseconds(200);
  auto dp = makeMesh(2, opt);
  const std::vector<unsigned char> big(4u << 20, 0x33);
  try {
    for (uint32_t i = 0; i < 64; ++i) {
      dp[0]->send(1, headerFor(i), big.data(), big.size());
    }
    FAIL() << "64 x 4 MiB queued on a link bounded to a few messages";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.peer, 1);
    EXPECT_NE(std::string(e.what()).find("rank 1 accepted no data for step"), std::string::npos)
        << e.what();
  }
  dp[0]->close();
}

// A rank may close right after its last send: its goodbye waits until the receiver has read
// everything. Without it ZeroMQ drops queued messages, and those a receiver at its
// high-water mark has not read, when the sender disconnects. The receiver starts late so
// that the messages are still queued when the sender closes.
TEST_P(ZmqDataPlaneTest, CloseRightAfterSendingLosesNothing) {
  BindOptions opt = optionsFor(GetParam());
  opt.rcvHwm = 2;  // the receiver stops reading its socket early
  auto dp = makeMesh(2, opt);
  // Copied payloads: each send is done at once, so rank 0 reaches close() while most of
  // them are still queued.
  std::vector<std::vector<unsigned char>> sent;
  for (uint32_t i = 0; i < 300; ++i) {
    sent.push_back(pattern(0, i, 1000));
  }
  std::vector<char> clean(2, 0);
  onThreads(2, [&](int r) {
    if (r == 0) {
      std::vector<std::shared_ptr<SendCompletion>> pending;
      for (uint32_t i = 0; i < sent.size(); ++i) {
        pending.push_back(dp[0]->send(1, headerFor(i), sent[i].data(), sent[i].size()));
      }
      for (auto& c : pending) {
        c->wait();
      }
      clean[0] = dp[0]->close();
      return;
    }
    std::this_thread::sleep_for(milliseconds(300));
    for (uint32_t i = 0; i < sent.size(); ++i) {
      auto m = dp[1]->recv(0, i, milliseconds(10000));
      ASSERT_EQ(m->header().step, i);
      ASSERT_TRUE(samePayload(*m, sent[i])) << "message " << i;
    }
    clean[1] = dp[1]->close();
  });
  EXPECT_TRUE(clean[0]) << "rank 0's goodbye was not acknowledged";
  EXPECT_TRUE(clean[1]) << "rank 1 did not see rank 0's goodbye";
}

// Waiting for data from a rank that has closed fails at once, not after the timeout.
TEST_P(ZmqDataPlaneTest, RecvFromClosedPeerFailsFast) {
  auto dp = makeMesh(2, optionsFor(GetParam()));
  const char byte = 1;
  bool clean = false;
  std::thread closer([&] {
    dp[0]->send(1, headerFor(0), &byte, 1);
    clean = dp[0]->close();
  });
  EXPECT_EQ(dp[1]->recv(0, 0, milliseconds(10000))->size(), 1u);
  const auto t0 = SteadyClock::now();
  try {
    dp[1]->recv(0, 1, milliseconds(20000));
    FAIL() << "recv returned data that was never sent";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.peer, 0);
    EXPECT_NE(std::string(e.what()).find(
                  "rank 1: rank 0 closed its data plane before sending data for step 1"),
              std::string::npos)
        << e.what();
  }
  EXPECT_LT(SteadyClock::now() - t0, std::chrono::seconds(10));
  closer.join();
  EXPECT_TRUE(clean) << "the receiver acknowledges a FIN while it runs";
}

// After abort() (or a failed call) there is nobody to wait for: close() is immediate.
TEST_P(ZmqDataPlaneTest, CloseSkipsTheGoodbyeAfterAbort) {
  BindOptions opt = optionsFor(GetParam());
  opt.closeLinger = milliseconds(60000);
  auto dp = makeMesh(2, opt);
  const char byte = 1;
  dp[0]->send(1, headerFor(0), &byte, 1);  // rank 1 never reads it
  dp[0]->abort();
  const auto t0 = SteadyClock::now();
  EXPECT_FALSE(dp[0]->close());
  EXPECT_LT(SteadyClock::now() - t0, std::chrono::seconds(10));
}

// A peer that neither reads nor closes costs closeLinger, then close() gives up.
TEST_P(ZmqDataPlaneTest, CloseGivesUpAfterLinger) {
  BindOptions opt = optionsFor(GetParam());
  opt.closeLinger = milliseconds(200);
  auto dp = makeMesh(2, opt);
  const char byte = 1;
  dp[0]->send(1, headerFor(0), &byte, 1);
  const auto t0 = SteadyClock::now();
  EXPECT_FALSE(dp[0]->close());
  const auto took = SteadyClock::now() - t0;
  EXPECT_GE(took, milliseconds(200));
  EXPECT_LT(took, std::chrono::seconds(10));
}

TEST(ZmqDataPlane, IpcFilesAreRemovedAfterTeardown) {
  namespace fs = std::filesystem;
  auto mesh = makeMesh(2, optionsFor(Kind::Ipc));
  std::vector<std::string> files;
  for (size_t r = 0; r < 2; ++r) {
    files.push_back(mesh[r]->endpoint().substr(std::strlen("ipc://")));
    EXPECT_TRUE(fs::exists(files.back())) << files.back();
  }
  const char byte = 9;
  mesh[0]->send(1, headerFor(0), &byte, 1);
  EXPECT_EQ(mesh[1]->recv(0, 0, milliseconds(10000))->size(), 1u);
  EXPECT_EQ(mesh.closeAll(), (std::vector<bool>{true, true}));
  for (const auto& f : files) {
    EXPECT_FALSE(fs::exists(f)) << f;
    EXPECT_FALSE(fs::exists(fs::path(f).parent_path())) << f;
  }
  // The destructor tears down too.
  std::string file;
  {
    ZmqDataPlane lone(0, 1);
    file = lone.bind(optionsFor(Kind::Ipc)).substr(std::strlen("ipc://"));
    EXPECT_TRUE(fs::exists(file)) << file;
  }
  EXPECT_FALSE(fs::exists(file)) << file;
  EXPECT_FALSE(fs::exists(fs::path(file).parent_path())) << file;
}

// A SIGKILLed rank leaves its socket directory; the next ipc bind removes the directories of
// dead owners of this pid namespace, and nothing else.
TEST(ZmqDataPlane, IpcBindSweepsTheDirectoriesOfDeadOwnersOnly) {
  namespace fs = std::filesystem;
  std::string base = "/tmp/arl-sweep-XXXXXX";
  ASSERT_NE(::mkdtemp(base.data()), nullptr);
  struct stat ns {};
  ASSERT_EQ(::stat("/proc/self/ns/pid", &ns), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // now a pid with no process
  const std::string self = std::to_string(ns.st_ino);
  const std::string other = std::to_string(ns.st_ino + 1);
  auto makeDir = [&](const std::string& name, const std::string& file) {
    fs::create_directory(base + "/" + name);
    std::ofstream(base + "/" + name + "/" + file) << "x";
    return base + "/" + name;
  };
  const std::string dead =
      makeDir("arl-dp-" + self + "-" + std::to_string(child) + "-aaaaaa", "rank3.sock");
  const std::string foreignFile =
      makeDir("arl-dp-" + self + "-" + std::to_string(child) + "-bbbbbb", "notes.txt");
  const std::string live =
      makeDir("arl-dp-" + self + "-" + std::to_string(::getpid()) + "-cccccc", "rank1.sock");
  const std::string otherNamespace =
      makeDir("arl-dp-" + other + "-" + std::to_string(child) + "-dddddd", "rank0.sock");
  const std::string untagged = makeDir("arl-dp-eeeeee", "rank0.sock");

  {
    BindOptions o = optionsFor(Kind::Ipc);
    o.ipcBaseDir = base;
    ZmqDataPlane p(0, 1);
    const std::string ep = p.bind(o);
    // Its own directory carries its owner tag.
    EXPECT_NE(ep.find("/arl-dp-" + self + "-" + std::to_string(::getpid()) + "-"),
              std::string::npos)
        << ep;
  }
  EXPECT_FALSE(fs::exists(dead)) << dead;
  EXPECT_TRUE(fs::exists(foreignFile + "/notes.txt")) << foreignFile;
  EXPECT_TRUE(fs::exists(live + "/rank1.sock")) << live;
  EXPECT_TRUE(fs::exists(otherNamespace + "/rank0.sock")) << otherNamespace;
  EXPECT_TRUE(fs::exists(untagged + "/rank0.sock")) << untagged;
  fs::remove_all(base);
}

TEST(ZmqDataPlane, BindRefusesBadOptions) {
  BindOptions longPath = optionsFor(Kind::Ipc);
  longPath.ipcBaseDir = "/tmp/" + std::string(120, 'd');
  ZmqDataPlane a(0, 2);
  EXPECT_THROW(a.bind(longPath), ConfigError);

  BindOptions wildcard = optionsFor(Kind::Tcp);
  wildcard.tcpHost = "0.0.0.0";
  ZmqDataPlane b(0, 2);
  try {
    b.bind(wildcard);
    FAIL() << "a wildcard endpoint was advertised";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("wildcard"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ZmqDataPlane(2, 2), ConfigError);
  ZmqDataPlane c(0, 2);
  c.bind(optionsFor(Kind::Ipc));
  EXPECT_THROW(c.connect({c.endpoint()}, {1}), ConfigError);  // one endpoint for two ranks
  EXPECT_THROW(c.connect({c.endpoint(), ""}, {1}), ConfigError);
}

// Binding on all interfaces advertises the given host with the port actually bound.
TEST(ZmqDataPlane, WildcardBindAdvertisesReachableHost) {
  BindOptions opt = optionsFor(Kind::Tcp);
  opt.tcpHost = "*";
  opt.tcpAdvertiseHost = "127.0.0.1";
  ZmqDataPlane r0(0, 2);
  ZmqDataPlane r1(1, 2);
  const std::vector<std::string> eps = {r0.bind(opt), r1.bind(opt)};
  EXPECT_EQ(eps[1].rfind("tcp://127.0.0.1:", 0), 0u) << eps[1];
  r0.connect(eps, {1});
  r1.connect(eps, {});  // sends nothing, but answers r0's goodbye
  const char byte = 4;
  r0.send(1, headerFor(0), &byte, 1);
  EXPECT_EQ(r1.recv(0, 0, milliseconds(10000))->size(), 1u);
  std::thread other([&] { EXPECT_TRUE(r0.close()); });
  EXPECT_TRUE(r1.close());
  other.join();
}

TEST(ZmqDataPlane, PeersOfRingScheduleAreItsNeighbours) {
  GenParams p;
  p.nranks = 4;
  p.count = 1024;
  p.sliceElems = 64;
  const Schedule s = generate("ring", p);
  for (int r = 0; r < 4; ++r) {
    const DataPlanePeers peers = dataPlanePeers(s, r);
    EXPECT_EQ(peers.sendTo, std::vector<int>{(r + 1) % 4}) << "rank " << r;
    EXPECT_EQ(peers.recvFrom, std::vector<int>{(r + 3) % 4}) << "rank " << r;
  }
  EXPECT_THROW(dataPlanePeers(s, 4), ConfigError);
}

// A whole ring all-reduce: the executor on every rank's thread, CPU buffers, this data plane
// in between, connected only to the schedule's peers. Inputs are small integers in floats,
// so the sums are exact and compared bit for bit. Slices of 16 Ki floats go zero-copy,
// slices of 256 floats are copied; three iterations reuse the same connections.
TEST_P(ZmqDataPlaneTest, RingAllReduceOverTheDataPlane) {
  constexpr int kRanks = 4;
  for (const uint64_t slice : {uint64_t{16384}, uint64_t{256}}) {
    SCOPED_TRACE("slice " + std::to_string(slice));
    GenParams p;
    p.nranks = kRanks;
    p.count = 100003;  // not a multiple of the ranks or the slice
    p.sliceElems = slice;
    const Schedule s = generate("ring", p);
    std::vector<std::unique_ptr<ZmqDataPlane>> dp;
    std::vector<std::string> endpoints;
    for (int r = 0; r < kRanks; ++r) {
      dp.push_back(std::make_unique<ZmqDataPlane>(r, kRanks));
      endpoints.push_back(dp.back()->bind(optionsFor(GetParam())));
    }
    for (int r = 0; r < kRanks; ++r) {
      dp[static_cast<size_t>(r)]->connect(endpoints, dataPlanePeers(s, r).sendTo);
    }
    auto input = [](int r, uint64_t i) {
      return static_cast<float>((i * 7 + static_cast<uint64_t>(r) * 3) % 11);
    };
    std::vector<uint64_t> wrong(kRanks, 0);
    std::vector<char> clean(kRanks, 0);
    onThreads(kRanks, [&](int r) {
      ZmqDataPlane& t = *dp[static_cast<size_t>(r)];
      CpuBackend backend;
      const size_t bytes = p.count * sizeof(float);
      std::vector<float> host(p.count);
      for (uint64_t i = 0; i < p.count; ++i) {
        host[i] = input(r, i);
      }
      RankBuffers bufs;
      bufs.input = backend.allocate(bytes);
      bufs.output = backend.allocate(bytes);
      backend.upload(bufs.input, host.data(), bytes);
      try {
        ExecOptions eo;
        eo.epoch = 5;
        eo.recvTimeout = milliseconds(20000);
        Executor ex(s, r, t, backend, nullptr, eo);
        for (uint32_t it = 0; it < 3; ++it) {
          ex.run(bufs, it, it);
          std::vector<float> out(p.count);
          backend.download(out.data(), bufs.output, bytes);
          for (uint64_t i = 0; i < p.count; ++i) {
            float want = 0;
            for (int q = 0; q < kRanks; ++q) {
              want += input(q, i);
            }
            if (out[i] != want) {
              ++wrong[static_cast<size_t>(r)];
            }
          }
        }
      } catch (...) {
        t.abort();  // a failed rank must not wait for goodbyes
        t.close();
        backend.deallocate(bufs.input);
        backend.deallocate(bufs.output);
        throw;
      }
      // Zero-copy sends read these buffers until the data plane is closed.
      clean[static_cast<size_t>(r)] = t.close();
      backend.deallocate(bufs.input);
      backend.deallocate(bufs.output);
    });
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_EQ(wrong[static_cast<size_t>(r)], 0u) << "#wrong on rank " << r;
      EXPECT_TRUE(clean[static_cast<size_t>(r)]) << "goodbye of rank " << r;
    }
  }
}

}  // namespace
}  // namespace arl
