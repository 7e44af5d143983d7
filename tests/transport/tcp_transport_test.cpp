// The TCP data plane over real sockets on 127.0.0.1, one thread per rank: the Transport
// contract the ZeroMQ plane's tests hold it to, and the handshake that keeps strangers out.
#include "transport/tcp/tcp_transport.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "base/clock.h"
#include "base/endpoint.h"
#include "base/errors.h"
#include "exec/executor.h"
#include "schedule/generators.h"
#include "transport/tcp/tcp_handshake.h"
#include "transport/zmq/curve_keys.h"
#include "transport_test_util.h"

namespace arl {
namespace {

using arl::transport_test::headerFor;
using arl::transport_test::onThreads;
using arl::transport_test::pattern;
using arl::transport_test::samePayload;
using std::chrono::milliseconds;

// A send that finds no reader fails the test after 20 s instead of hanging it.
BindOptions tcpOptions() {
  BindOptions o;
  o.kind = BindOptions::Kind::Tcp;
  o.sendTimeout = milliseconds(20000);
  return o;
}

// Every rank's CURVE pair, as the coordinator hands them out (RunConfig::data_keys).
struct RunKeys {
  std::vector<CurveKeyPair> pairs;
  explicit RunKeys(int n) {
    for (int r = 0; r < n; ++r) pairs.push_back(makeCurveKeyPair());
  }
  BindOptions options(int rank, BindOptions o = tcpOptions()) const {
    o.curveSecretKey = pairs[static_cast<size_t>(rank)].secretKey;
    for (const CurveKeyPair& p : pairs) o.curvePeerKeys.push_back(p.publicKey);
    return o;
  }
};

// n planes, each connected to every other rank (on parallel threads: connect() waits for its
// partners); closed on parallel threads so that each goodbye meets its peer's.
struct Mesh {
  std::vector<std::unique_ptr<TcpDataPlane>> dp;
  TcpDataPlane* operator[](size_t r) const { return dp[r].get(); }
  std::vector<bool> closeAll() {
    std::vector<char> clean(dp.size(), 0);
    onThreads(static_cast<int>(dp.size()),
              [&](int r) { clean[static_cast<size_t>(r)] = dp[static_cast<size_t>(r)]->close(); });
    return {clean.begin(), clean.end()};
  }
  ~Mesh() { closeAll(); }
};

std::unique_ptr<Mesh> makeMesh(int n, const BindOptions& opt, const RunKeys* keys = nullptr) {
  auto mesh = std::make_unique<Mesh>();
  std::vector<std::string> endpoints;
  for (int r = 0; r < n; ++r) {
    mesh->dp.push_back(std::make_unique<TcpDataPlane>(r, n));
    endpoints.push_back(mesh->dp.back()->bind(keys ? keys->options(r, opt) : opt));
  }
  onThreads(n, [&](int r) {
    std::vector<int> partners;
    for (int p = 0; p < n; ++p) {
      if (p != r) partners.push_back(p);
    }
    mesh->dp[static_cast<size_t>(r)]->connect(endpoints, partners, milliseconds(20000));
  });
  return mesh;
}

// A plain client socket connected to a tcp:// endpoint on loopback.
int dialRaw(const std::string& endpoint) {
  const auto ep = splitTcp(endpoint);
  EXPECT_TRUE(ep.has_value()) << endpoint;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(std::stoi(ep->port)));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
  return fd;
}

void writeRaw(int fd, const std::string& bytes) {
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

std::string readRaw(int fd, size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    const ssize_t k = ::recv(fd, out.data() + got, n - got, 0);
    if (k <= 0) return out.substr(0, got);
    got += static_cast<size_t>(k);
  }
  return out;
}

// Plays rank `from` dialling rank `to` through the whole handshake, with `keys` (empty: a
// run without keys). Returns the connected socket.
int dialAsRank(const std::string& endpoint, int from, int to, const TcpKeys& keys) {
  const int fd = dialRaw(endpoint);
  const TcpHello hello{from, to, randomNonce()};
  writeRaw(fd, tcpHello(from, to, hello.nonce));
  TcpNonce theirs{};
  EXPECT_EQ(checkTcpReply(keys, hello, readRaw(fd, kTcpReplyBytes), theirs), std::nullopt);
  writeRaw(fd, tcpProof(keys, hello, theirs));
  return fd;
}

std::string wireHeader(ChunkHeader h) {
  std::string s(64, '\0');
  std::memcpy(s.data(), &h, sizeof h);
  return s;
}

TEST(TcpDataPlane, EndpointIsTheListeningAddress) {
  TcpDataPlane dp(0, 1);
  const std::string ep = dp.bind(tcpOptions());
  EXPECT_EQ(ep, dp.endpoint());
  EXPECT_EQ(ep.rfind("tcp://127.0.0.1:", 0), 0u) << ep;
  EXPECT_NE(splitTcp(ep)->port, "0");
}

TEST(TcpDataPlane, BindRefusesBadOptions) {
  BindOptions ipc;
  EXPECT_THROW(TcpDataPlane(0, 2).bind(ipc), ConfigError);
  BindOptions wild = tcpOptions();
  wild.tcpHost = "0.0.0.0";
  EXPECT_THROW(TcpDataPlane(0, 2).bind(wild), ConfigError);
  BindOptions keys = tcpOptions();
  keys.curvePeerKeys = {"x"};
  EXPECT_THROW(TcpDataPlane(0, 2).bind(keys), ConfigError);
  EXPECT_THROW(TcpDataPlane(2, 2), ConfigError);
}

// Two senders interleave messages of mixed sizes (some far larger than a socket buffer);
// the receiver asks in an order of its own and gets each peer's messages in the order sent.
TEST(TcpDataPlane, FifoPerPeerWithInterleavedSenders) {
  constexpr int kRanks = 3;
  constexpr uint32_t kMessages = 40;
  RunKeys keys(kRanks);
  auto dp = makeMesh(kRanks, tcpOptions(), &keys);
  auto sizeOf = [](int src, uint32_t i) -> size_t {
    if (i % 13 == 5) return (size_t{3} << 20) + i;
    return (i + static_cast<uint32_t>(src)) % 3 == 0 ? 64 * 1024 + i : 100 + i;
  };
  std::vector<std::vector<std::vector<unsigned char>>> sent(kRanks);
  for (int src = 1; src < kRanks; ++src) {
    for (uint32_t i = 0; i < kMessages; ++i) sent[src].push_back(pattern(src, i, sizeOf(src, i)));
  }
  onThreads(kRanks, [&](int r) {
    TcpDataPlane& t = *(*dp)[static_cast<size_t>(r)];
    if (r != 0) {
      for (uint32_t i = 0; i < kMessages; ++i) {
        const auto& p = sent[r][i];
        EXPECT_TRUE(t.send(0, headerFor(i, i * 10), p.data(), p.size())->done());
      }
      return;
    }
    uint32_t next[kRanks] = {0, 0, 0};
    auto take = [&](int src) {
      const uint32_t i = next[src]++;
      auto m = t.recv(src, i, milliseconds(10000));
      ASSERT_EQ(m->header().src, src);
      EXPECT_EQ(m->header().step, i) << "out of order from rank " << src;
      EXPECT_EQ(m->header().chunk, i * 10);
      EXPECT_EQ(m->header().epoch, 7u);
      EXPECT_TRUE(samePayload(*m, sent[src][i])) << "payload of rank " << src << " message " << i;
    };
    while (next[1] < kMessages || next[2] < kMessages) {
      for (int k = 0; k < 2 && next[2] < kMessages; ++k) take(2);
      if (next[1] < kMessages) take(1);
    }
    EXPECT_EQ(t.queued(1), 0u);
    EXPECT_EQ(t.queued(2), 0u);
  });
}

TEST(TcpDataPlane, ReadySaysWhetherAMessageHasArrived) {
  auto dp = makeMesh(3, tcpOptions());
  TcpDataPlane& t = *(*dp)[0];
  EXPECT_FALSE(t.ready(1, 0));
  const auto fromTwo = pattern(2, 0, 100);
  const auto fromOne = pattern(1, 0, 70000);
  (*dp)[2]->send(0, headerFor(0, 0), fromTwo.data(), fromTwo.size());
  const auto giveUp = SteadyClock::now() + milliseconds(10000);
  while (!t.ready(2, 0) && SteadyClock::now() < giveUp) {
    EXPECT_FALSE(t.ready(1, 0));
    std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_TRUE(t.ready(2, 0));
  (*dp)[1]->send(0, headerFor(0, 0), fromOne.data(), fromOne.size());
  while (!t.ready(1, 0) && SteadyClock::now() < giveUp)
    std::this_thread::sleep_for(milliseconds(1));
  EXPECT_TRUE(t.ready(1, 0));
  EXPECT_TRUE(samePayload(*t.recv(1, 0, milliseconds(1000)), fromOne));
  EXPECT_TRUE(samePayload(*t.recv(2, 0, milliseconds(1000)), fromTwo));
  EXPECT_FALSE(t.ready(1, 1));
  EXPECT_FALSE(t.ready(2, 1));
}

// arrived() is ready() that a shaped plane answers too; recv() paces, and the send's start
// travels with the message.
TEST(TcpDataPlane, ArrivedSaysAMessageIsThereOnAShapedPlane) {
  BindOptions opt = tcpOptions();
  opt.shaping.addedLatencySeconds = 0.05;
  auto dp = makeMesh(2, opt);
  TcpDataPlane& t = *(*dp)[0];
  EXPECT_FALSE(t.arrived(1));
  const auto p = pattern(1, 0, 100);
  const auto sentAt = SteadyClock::now();
  (*dp)[1]->send(0, headerFor(0, 0), p.data(), p.size())->wait();
  const auto giveUp = SteadyClock::now() + milliseconds(10000);
  while (!t.arrived(1) && SteadyClock::now() < giveUp) std::this_thread::sleep_for(milliseconds(1));
  EXPECT_TRUE(t.arrived(1));
  EXPECT_FALSE(t.ready(1, 0));
  EXPECT_TRUE(samePayload(*t.recv(1, 0, milliseconds(1000)), p));
  EXPECT_GE(SteadyClock::now() - sentAt, milliseconds(50)) << "the added latency was not paced";
  EXPECT_FALSE(t.arrived(1));
}

// While rank 0 waits for rank 2, what rank 1 sends is queued, then delivered in order.
TEST(TcpDataPlane, MessagesFromOtherPeersAreQueuedWhileWaiting) {
  BindOptions opt = tcpOptions();
  opt.closeLinger = milliseconds(300);
  auto dp = makeMesh(3, opt);
  constexpr uint32_t kMessages = 5;
  std::vector<std::vector<unsigned char>> sent;
  for (uint32_t i = 0; i < kMessages; ++i) sent.push_back(pattern(1, i, 1000 + i));
  for (uint32_t i = 0; i < kMessages; ++i) {
    EXPECT_TRUE((*dp)[1]->send(0, headerFor(i), sent[i].data(), sent[i].size())->done());
  }
  const auto giveUp = SteadyClock::now() + std::chrono::seconds(10);
  while ((*dp)[0]->queued(1) < kMessages && SteadyClock::now() < giveUp) {
    EXPECT_THROW((*dp)[0]->recv(2, 0, milliseconds(20)), PeerError);
  }
  ASSERT_EQ((*dp)[0]->queued(1), kMessages);
  for (uint32_t i = 0; i < kMessages; ++i) {
    auto m = (*dp)[0]->recv(1, i, milliseconds(0));
    EXPECT_EQ(m->header().step, i);
    EXPECT_TRUE(samePayload(*m, sent[i]));
  }
}

// Two ranks send each other far more than the sockets hold before either receives (a
// recursive-doubling exchange): a blocked send reads its peer's data meanwhile, so neither
// waits for the other forever.
TEST(TcpDataPlane, LargeExchangesBothWaysDoNotWedge) {
  BindOptions opt = tcpOptions();
  opt.tcpBufferBytes = 64 * 1024;
  auto dp = makeMesh(2, opt);
  constexpr uint32_t kMessages = 6;
  constexpr size_t kBytes = size_t{8} << 20;
  onThreads(2, [&](int r) {
    TcpDataPlane& t = *(*dp)[static_cast<size_t>(r)];
    std::vector<std::vector<unsigned char>> mine;
    for (uint32_t i = 0; i < kMessages; ++i) mine.push_back(pattern(r, i, kBytes));
    for (uint32_t i = 0; i < kMessages; ++i) {
      t.send(1 - r, headerFor(i), mine[i].data(), kBytes);
    }
    for (uint32_t i = 0; i < kMessages; ++i) {
      auto m = t.recv(1 - r, i, milliseconds(20000));
      EXPECT_TRUE(samePayload(*m, pattern(1 - r, i, kBytes))) << "message " << i;
    }
  });
}

// A send returns with its bytes in the kernel: done at once, later changes do not travel.
TEST(TcpDataPlane, SendIsDoneAtOnceAndEmptyPayloadsTravel) {
  auto dp = makeMesh(2, tcpOptions());
  std::vector<unsigned char> buf = pattern(0, 1, 512);
  const auto original = buf;
  EXPECT_TRUE((*dp)[0]->send(1, headerFor(1), buf.data(), buf.size())->done());
  std::fill(buf.begin(), buf.end(), 0xEE);
  EXPECT_TRUE(samePayload(*(*dp)[1]->recv(0, 1, milliseconds(10000)), original));
  (*dp)[0]->send(1, headerFor(2), nullptr, 0);
  auto e = (*dp)[1]->recv(0, 2, milliseconds(10000));
  EXPECT_EQ(e->size(), 0u);
  EXPECT_EQ(e->header().length, 0u);
}

TEST(TcpDataPlane, RecvTimeoutNamesPeerAndStep) {
  auto dp = makeMesh(2, tcpOptions());
  try {
    (*dp)[0]->recv(1, 5, milliseconds(100));
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

// A member whose stream goes wrong: each malformed header is refused with the reason and the
// sender, on a connection of its own (the stream cannot be trusted after one).
TEST(TcpDataPlane, MalformedMessagesAreRejected) {
  auto header = [](int src, uint64_t length) {
    ChunkHeader h;
    h.src = src;
    h.step = 4;
    h.length = length;
    return h;
  };
  ChunkHeader badMagic = header(0, 3);
  badMagic.magic = 0xDEADBEEF;
  struct Case {
    std::string name;
    std::string bytes;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"bad magic", wireHeader(badMagic) + "abc", "bad magic 0xDEADBEEF"},
      {"another sender", wireHeader(header(1, 3)) + "abc", "header names rank 1 as sender"},
      {"too long", wireHeader(header(0, 5000)), "5000 payload bytes, more than the 4096 allowed"},
      {"cut short", wireHeader(header(0, 100)) + "abc", "closed its connection in the middle"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    TcpDataPlane dp(1, 2);
    BindOptions opt = tcpOptions();
    opt.maxMessageBytes = 4096;
    const std::string ep = dp.bind(opt);
    int fd = -1;
    std::thread peer([&] { fd = dialAsRank(ep, 0, 1, TcpKeys{}); });
    dp.connect({"", ep}, {0}, milliseconds(10000));
    peer.join();
    writeRaw(fd, c.bytes);
    if (c.name == "cut short") ::close(fd);
    try {
      dp.recv(0, 4, milliseconds(10000));
      FAIL() << "malformed message accepted";
    } catch (const PeerError& e) {
      EXPECT_EQ(e.rank, 1);
      EXPECT_EQ(e.peer, 0);
      EXPECT_EQ(e.step, 4);
      EXPECT_NE(std::string(e.what()).find(c.reason), std::string::npos) << e.what();
    }
    if (c.name != "cut short") ::close(fd);
  }
}

TEST(TcpDataPlane, AbortUnblocksWaitingRecvAndFailsLaterCalls) {
  auto dp = makeMesh(2, tcpOptions());
  std::string error;
  SteadyClock::time_point failedAt;
  std::thread waiter([&] {
    try {
      (*dp)[0]->recv(1, 3, milliseconds(60000));
    } catch (const PeerError& e) {
      failedAt = SteadyClock::now();
      error = e.what();
    }
  });
  std::this_thread::sleep_for(milliseconds(100));
  const auto abortedAt = SteadyClock::now();
  (*dp)[0]->abort();
  waiter.join();
  EXPECT_NE(error.find("rank 0: run aborted"), std::string::npos) << error;
  EXPECT_NE(error.find("step 3"), std::string::npos) << error;
  EXPECT_LT(failedAt - abortedAt, std::chrono::seconds(2));
  const char byte = 1;
  EXPECT_THROW((*dp)[0]->send(1, headerFor(0), &byte, 1), PeerError);
  EXPECT_THROW((*dp)[0]->recv(1, 4, milliseconds(10)), PeerError);
}

// A sender blocked on a full connection (the receiver never reads) is released by abort.
TEST(TcpDataPlane, AbortUnblocksABlockedSend) {
  BindOptions opt = tcpOptions();
  opt.tcpBufferBytes = 64 * 1024;
  auto dp = makeMesh(2, opt);
  const std::vector<unsigned char> big(4u << 20, 0x5A);
  std::string sendError;
  std::thread sender([&] {
    try {
      for (uint32_t i = 0; i < 64; ++i) (*dp)[0]->send(1, headerFor(i), big.data(), big.size());
    } catch (const PeerError& e) {
      sendError = e.what();
    }
  });
  std::this_thread::sleep_for(milliseconds(300));
  (*dp)[0]->abort();
  sender.join();
  EXPECT_NE(sendError.find("run aborted"), std::string::npos) << sendError;
}

TEST(TcpDataPlane, SendTimesOutWhenPeerNeverReads) {
  BindOptions opt = tcpOptions();
  opt.tcpBufferBytes = 64 * 1024;
  opt.sendTimeout = milliseconds(200);
  auto dp = makeMesh(2, opt);
  const std::vector<unsigned char> big(4u << 20, 0x33);
  try {
    for (uint32_t i = 0; i < 64; ++i) (*dp)[0]->send(1, headerFor(i), big.data(), big.size());
    FAIL() << "256 MiB sent to a rank that reads nothing";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.peer, 1);
    EXPECT_NE(std::string(e.what()).find("rank 1 accepted no data for step"), std::string::npos)
        << e.what();
  }
}

// A rank may close right after its last send: the receiver, starting late, still reads
// everything, and both goodbyes complete.
TEST(TcpDataPlane, CloseRightAfterSendingLosesNothing) {
  auto dp = makeMesh(2, tcpOptions());
  std::vector<std::vector<unsigned char>> sent;
  for (uint32_t i = 0; i < 300; ++i) sent.push_back(pattern(0, i, 1000 + 997 * (i % 7)));
  std::vector<char> clean(2, 0);
  onThreads(2, [&](int r) {
    if (r == 0) {
      for (uint32_t i = 0; i < sent.size(); ++i) {
        (*dp)[0]->send(1, headerFor(i), sent[i].data(), sent[i].size());
      }
      clean[0] = (*dp)[0]->close();
      return;
    }
    std::this_thread::sleep_for(milliseconds(300));
    for (uint32_t i = 0; i < sent.size(); ++i) {
      auto m = (*dp)[1]->recv(0, i, milliseconds(10000));
      ASSERT_EQ(m->header().step, i);
      ASSERT_TRUE(samePayload(*m, sent[i])) << "message " << i;
    }
    clean[1] = (*dp)[1]->close();
  });
  EXPECT_TRUE(clean[0]);
  EXPECT_TRUE(clean[1]);
}

// Held sends (tcp_transport.h): small messages made while arrived messages wait in a queue
// are held until the queues are empty, until the sender could wait, or until 64 of them are
// held, and leave in one write; a larger one goes after them in order; close() sends them
// before its goodbye.
TEST(TcpDataPlane, HeldSendsLeaveTogetherBeforeTheSenderWaits) {
  auto dp = makeMesh(2, tcpOptions());
  TcpDataPlane& a = *(*dp)[0];
  TcpDataPlane& b = *(*dp)[1];
  a.holdSmallSends(true);
  std::vector<std::vector<unsigned char>> sent;
  auto sendNext = [&](size_t bytes) {
    const auto i = static_cast<uint32_t>(sent.size());
    sent.push_back(pattern(0, i, bytes));
    EXPECT_TRUE(a.send(1, headerFor(i), sent.back().data(), bytes)->done());
  };
  uint32_t fromB = 0;
  auto queueOneFromB = [&] {  // a message from b that a has read and not yet taken
    const int v = 7;
    b.send(0, headerFor(fromB++), &v, sizeof v);
    const auto giveUp = SteadyClock::now() + milliseconds(10000);
    while (!a.ready(1, 0) && SteadyClock::now() < giveUp)
      std::this_thread::sleep_for(milliseconds(1));
    ASSERT_TRUE(a.ready(1, 0));
  };
  auto takeFromB = [&] {
    EXPECT_EQ(a.recv(1, fromB - 1, milliseconds(1000))->header().step, fromB - 1);
  };
  auto bTakes = [&](uint32_t from) {
    for (uint32_t i = from; i < sent.size(); ++i) {
      auto m = b.recv(0, i, milliseconds(10000));
      ASSERT_EQ(m->header().step, i);
      ASSERT_TRUE(samePayload(*m, sent[i])) << "message " << i;
    }
  };

  sendNext(16);  // nothing queued: written at once
  bTakes(0);
  queueOneFromB();
  const size_t before = a.writes();
  for (int i = 0; i < 40; ++i) sendNext(16);
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_FALSE(b.ready(0, 1)) << "40 small messages are held";
  EXPECT_EQ(a.writes(), before);
  a.flush();
  EXPECT_EQ(a.writes(), before + 1) << "40 messages in one write";
  for (int i = 0; i < 200; ++i) sendNext(i % 2 == 0 ? 16 : 200);
  EXPECT_EQ(a.writes(), before + 4) << "held messages leave every 64";
  sendNext(20000);  // more than is held: after the 8 held, in order
  for (int i = 0; i < 10; ++i) sendNext(16);
  const size_t held10 = a.writes();
  takeFromB();   // the queue is empty now
  sendNext(16);  // so this one leaves, after the 10 held, in one write
  EXPECT_EQ(a.writes(), held10 + 1);
  bTakes(1);

  queueOneFromB();
  const auto from = static_cast<uint32_t>(sent.size());
  for (int i = 0; i < 5; ++i) sendNext(16);
  takeFromB();
  EXPECT_FALSE(a.ready(1, 2));  // would wait: sends the 5
  bTakes(from);

  // Nothing queued, but each send announced by sendFollows (a ring window's first sends): held,
  // and the first one not announced carries them, in one write. A hint holds one send only.
  const auto announcedFrom = static_cast<uint32_t>(sent.size());
  const size_t beforeAnnounced = a.writes();
  for (int i = 0; i < 7; ++i) {
    a.sendFollows(1, 1);
    sendNext(16);
  }
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_FALSE(b.ready(0, announcedFrom)) << "7 announced messages are held";
  EXPECT_EQ(a.writes(), beforeAnnounced);
  sendNext(16);
  EXPECT_EQ(a.writes(), beforeAnnounced + 1) << "8 messages in one write";
  sendNext(16);
  EXPECT_EQ(a.writes(), beforeAnnounced + 2) << "the hint was spent";
  a.sendFollows(1, 1);
  sendNext(16);
  EXPECT_FALSE(a.ready(1, 3));  // would wait: writes the announced one
  EXPECT_EQ(a.writes(), beforeAnnounced + 3);
  a.heedSendFollows(false);  // ARL_TCP_HOLD_SENDS=queued: hints ignored
  a.sendFollows(1, 1);
  sendNext(16);
  EXPECT_EQ(a.writes(), beforeAnnounced + 4);
  a.heedSendFollows(true);
  bTakes(announcedFrom);

  queueOneFromB();
  sendNext(16);
  std::vector<char> clean(2, 0);
  onThreads(2, [&](int r) {
    if (r == 1) bTakes(static_cast<uint32_t>(sent.size()) - 1);
    clean[static_cast<size_t>(r)] = (*dp)[static_cast<size_t>(r)]->close();
  });
  EXPECT_TRUE(clean[0]);
  EXPECT_TRUE(clean[1]) << "close sends what is held before its goodbye";
}

// Waiting for data from a rank that has closed fails at once, naming it.
TEST(TcpDataPlane, RecvFromClosedPeerFailsFast) {
  BindOptions opt = tcpOptions();
  opt.closeLinger = milliseconds(500);  // rank 1 closes only at the end of the test
  auto dp = makeMesh(2, opt);
  const char byte = 1;
  std::thread closer([&] {
    (*dp)[0]->send(1, headerFor(0), &byte, 1);
    (*dp)[0]->close();
  });
  EXPECT_EQ((*dp)[1]->recv(0, 0, milliseconds(10000))->size(), 1u);
  const auto t0 = SteadyClock::now();
  try {
    (*dp)[1]->recv(0, 1, milliseconds(20000));
    FAIL() << "recv returned data that was never sent";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.peer, 0);
    EXPECT_NE(std::string(e.what()).find(
                  "rank 1: rank 0 closed its connection before sending data for step 1"),
              std::string::npos)
        << e.what();
  }
  EXPECT_LT(SteadyClock::now() - t0, std::chrono::seconds(10));
  closer.join();
}

// A peer whose process vanishes (its socket reset, as the kernel does for a killed process
// with unread data) fails the receive that waits for it, naming it.
TEST(TcpDataPlane, AVanishedPeerFailsTheReceiveNamingIt) {
  TcpDataPlane dp(1, 2);
  const std::string ep = dp.bind(tcpOptions());
  int fd = -1;
  std::thread peer([&] { fd = dialAsRank(ep, 0, 1, TcpKeys{}); });
  dp.connect({"", ep}, {0}, milliseconds(10000));
  peer.join();
  const char byte = 1;
  dp.send(0, headerFor(0), &byte, 1);  // unread by the peer: its close resets the connection
  std::this_thread::sleep_for(milliseconds(50));
  ::close(fd);
  try {
    dp.recv(0, 2, milliseconds(20000));
    FAIL() << "recv from a vanished peer returned";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.peer, 0);
    EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("before sending data for step 2"), std::string::npos)
        << e.what();
  }
}

TEST(TcpDataPlane, CloseSkipsTheGoodbyeAfterAbort) {
  BindOptions opt = tcpOptions();
  opt.closeLinger = milliseconds(60000);
  auto dp = makeMesh(2, opt);
  (*dp)[0]->abort();
  const auto t0 = SteadyClock::now();
  EXPECT_FALSE((*dp)[0]->close());
  EXPECT_LT(SteadyClock::now() - t0, std::chrono::seconds(10));
}

TEST(TcpDataPlane, CloseGivesUpAfterLinger) {
  BindOptions opt = tcpOptions();
  opt.closeLinger = milliseconds(200);
  auto dp = makeMesh(2, opt);
  const auto t0 = SteadyClock::now();
  EXPECT_FALSE((*dp)[0]->close());  // rank 1 neither reads nor closes
  const auto took = SteadyClock::now() - t0;
  EXPECT_GE(took, milliseconds(200));
  EXPECT_LT(took, std::chrono::seconds(10));
}

// With keys, connections that do not prove a member's key are refused, and the run's own
// connect all the same: a client that sends no hello, one that claims rank 0 without its
// key, and one that claims a rank that does not dial this one.
TEST(TcpDataPlane, StrayClientsAreRefused) {
  RunKeys keys(2);
  RunKeys strangers(2);
  TcpDataPlane one(1, 2);
  TcpDataPlane zero(0, 2);
  const std::vector<std::string> eps = {zero.bind(keys.options(0)), one.bind(keys.options(1))};
  const BindOptions forged = strangers.options(0);
  const TcpKeys forgedKeys = tcpKeysFromZ85(forged.curveSecretKey, keys.options(0).curvePeerKeys);
  std::thread acceptor([&] { one.connect(eps, {0}, milliseconds(20000)); });
  const int junk = dialRaw(eps[1]);
  writeRaw(junk, std::string(48, 'x'));
  const int impostor = dialRaw(eps[1]);
  const TcpHello hello{0, 1, randomNonce()};
  writeRaw(impostor, tcpHello(0, 1, hello.nonce));
  TcpNonce theirs{};
  const std::string reply = readRaw(impostor, kTcpReplyBytes);
  EXPECT_NE(checkTcpReply(forgedKeys, hello, reply, theirs), std::nullopt)
      << "a reply proved rank 1 to a stranger's keys";
  writeRaw(impostor, tcpProof(forgedKeys, hello, theirs));
  const int wrongRank = dialRaw(eps[1]);
  writeRaw(wrongRank, tcpHello(1, 1, randomNonce()));
  std::this_thread::sleep_for(milliseconds(200));
  zero.connect(eps, {1}, milliseconds(20000));
  acceptor.join();
  EXPECT_GE(one.refused(), 3u);
  const char byte = 9;
  zero.send(1, headerFor(0), &byte, 1);
  EXPECT_EQ(static_cast<const char*>(one.recv(0, 0, milliseconds(10000))->data())[0], 9);
  for (int fd : {junk, impostor, wrongRank}) {
    EXPECT_EQ(readRaw(fd, 1), "") << "a refused connection stayed open";
    ::close(fd);
  }
  onThreads(2, [&](int r) { r == 0 ? zero.close() : one.close(); });
}

// The dialler checks the acceptor too: an address that answers without rank 1's key is no
// rank 1, and connect() fails naming it.
TEST(TcpDataPlane, AnAcceptorWithoutTheKeyIsRefused) {
  RunKeys keys(2);
  RunKeys strangers(2);
  TcpDataPlane fake(1, 2);
  TcpDataPlane zero(0, 2);
  BindOptions fakeOpt = strangers.options(1);
  fakeOpt.curvePeerKeys = keys.options(1).curvePeerKeys;  // knows the public keys only
  const std::vector<std::string> eps = {zero.bind(keys.options(0)), fake.bind(fakeOpt)};
  std::thread acceptor([&] {
    try {
      fake.connect(eps, {0}, milliseconds(1000));
    } catch (const PeerError&) {
      // rank 0 gives up on it, so its proof never comes
    }
  });
  try {
    zero.connect(eps, {1}, milliseconds(10000));
    FAIL() << "connected to a rank that does not hold its key";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.peer, 1);
    EXPECT_NE(std::string(e.what()).find("does not prove rank 1's key"), std::string::npos)
        << e.what();
  }
  acceptor.join();
}

TEST(TcpDataPlane, ConnectNamesARankThatNeverComes) {
  TcpDataPlane zero(0, 2);
  TcpDataPlane one(1, 2);
  const std::vector<std::string> eps = {zero.bind(tcpOptions()), one.bind(tcpOptions())};
  try {
    one.connect(eps, {0}, milliseconds(200));
    FAIL() << "connected to nobody";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.peer, 0);
    EXPECT_NE(std::string(e.what()).find("no data-plane connection with rank 0 within 200 ms"),
              std::string::npos)
        << e.what();
  }
}

// Whole all-reduces, ring and recursive halving-doubling (pairs that exchange both ways),
// on four ranks with keys; small integers in floats, so the sums are exact. Three
// iterations reuse the connections.
TEST(TcpDataPlane, AllReduceOverTheDataPlaneIsExact) {
  constexpr int kRanks = 4;
  for (const std::string algo : {"ring", "halving-doubling"}) {
    for (const uint64_t slice : {uint64_t{16384}, uint64_t{256}, uint64_t{4}}) {
      for (const bool hold : {false, true}) {
        SCOPED_TRACE(algo + " slice " + std::to_string(slice) + (hold ? " held sends" : ""));
        if (slice == 4 && !hold) continue;  // 16-byte slices one write each: slow, no more cover
        GenParams p;
        p.nranks = kRanks;
        p.count = slice == 4 ? 4099 : 100003;
        p.sliceElems = slice;
        const Schedule s = generate(algo, p);
        RunKeys keys(kRanks);
        std::vector<std::unique_ptr<TcpDataPlane>> dp;
        std::vector<std::string> endpoints;
        for (int r = 0; r < kRanks; ++r) {
          dp.push_back(std::make_unique<TcpDataPlane>(r, kRanks));
          endpoints.push_back(dp.back()->bind(keys.options(r)));
        }
        auto input = [](int r, uint64_t i) {
          return static_cast<float>((i * 7 + static_cast<uint64_t>(r) * 3) % 11);
        };
        std::vector<uint64_t> wrong(kRanks, 0);
        onThreads(kRanks, [&](int r) {
          TcpDataPlane& t = *dp[static_cast<size_t>(r)];
          t.connect(endpoints, partnersOf(dataPlanePeers(s, r)), milliseconds(20000));
          t.holdSmallSends(hold);
          CpuBackend backend;
          const size_t bytes = p.count * sizeof(float);
          std::vector<float> host(p.count);
          for (uint64_t i = 0; i < p.count; ++i) host[i] = input(r, i);
          RankBuffers bufs;
          bufs.input = backend.allocate(bytes);
          bufs.output = backend.allocate(bytes);
          backend.upload(bufs.input, host.data(), bytes);
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
              for (int q = 0; q < kRanks; ++q) want += input(q, i);
              if (out[i] != want) ++wrong[static_cast<size_t>(r)];
            }
          }
          t.close();
          backend.deallocate(bufs.input);
          backend.deallocate(bufs.output);
        });
        for (int r = 0; r < kRanks; ++r)
          EXPECT_EQ(wrong[static_cast<size_t>(r)], 0u) << "rank " << r;
      }
    }
  }
}

}  // namespace
}  // namespace arl
