// The lending transport (transport/peer_transport.h) and its pairing rule
// (transport/peer_pairing.h), without a GPU: the pairing of ranks by host, pid namespace and
// device; the notices' encoding; and every algorithm run for real (runLocal: threads over the
// loopback transport, CPU backend) with every slice lent in place through a PeerMemory of
// host memory that also checks the transport's event discipline: no event is recorded again
// before its peer has waited for the previous recording.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/errors.h"
#include "exec/local_run.h"
#include "schedule/generators.h"
#include "transport/loopback.h"
#include "transport/peer_pairing.h"
#include "transport/peer_transport.h"

namespace arl {
namespace {

using namespace std::chrono_literals;

// ---- Pairing ---------------------------------------------------------------------------------

PeerPlace place(std::string host, uint64_t ns, std::string device,
                std::vector<std::string> reach = {}) {
  if (reach.empty() && !device.empty()) reach = {device};
  return PeerPlace{std::move(host), ns, std::move(device), std::move(reach)};
}

TEST(PeerPairing, SameHostNamespaceAndDeviceShareMemory) {
  const std::vector<PeerPlace> places = {place("a", 7, "GPU-0"), place("a", 7, "GPU-0"),
                                         place("a", 7, "GPU-0")};
  for (int r = 0; r < 3; ++r) {
    const PeerPairing p = pairPeerMemory(places, r);
    for (int q = 0; q < 3; ++q) {
      EXPECT_EQ(p.viaPeerMemory[static_cast<size_t>(q)], q != r) << r << " " << q;
      EXPECT_EQ(p.refused[static_cast<size_t>(q)], "") << r << " " << q;
    }
  }
}

TEST(PeerPairing, AnotherHostIsRefusedNamingBothRanksAndHosts) {
  const std::vector<PeerPlace> places = {place("alpha", 7, "GPU-0"), place("alpha", 7, "GPU-0"),
                                         place("beta", 7, "GPU-0")};
  const PeerPairing p0 = pairPeerMemory(places, 0);
  EXPECT_TRUE(p0.viaPeerMemory[1]);
  EXPECT_FALSE(p0.viaPeerMemory[2]);
  EXPECT_EQ(p0.refused[2],
            "CUDA IPC between rank 0 (host alpha) and rank 2 (host beta) refused: they are on "
            "different hosts; they use staged copies");
  // The same words from the other end.
  const PeerPairing p2 = pairPeerMemory(places, 2);
  EXPECT_FALSE(p2.viaPeerMemory[0]);
  EXPECT_EQ(p2.refused[0], p0.refused[2]);
}

TEST(PeerPairing, AnotherPidNamespaceIsRefused) {
  const std::vector<PeerPlace> places = {place("a", 7, "GPU-0"), place("a", 9, "GPU-0")};
  const PeerPairing p = pairPeerMemory(places, 1);
  EXPECT_FALSE(p.viaPeerMemory[0]);
  EXPECT_NE(p.refused[0].find("rank 0 (host a) and rank 1 (host a)"), std::string::npos);
  EXPECT_NE(p.refused[0].find("different pid namespaces (7 and 9)"), std::string::npos);
}

TEST(PeerPairing, ADeviceThePeerCannotMapIsRefused) {
  // Rank 1's device is on this host, but not among those rank 0 can map (no peer access,
  // or hidden by CUDA_VISIBLE_DEVICES).
  const std::vector<PeerPlace> places = {place("a", 7, "GPU-0", {"GPU-0"}),
                                         place("a", 7, "GPU-1", {"GPU-1", "GPU-0"})};
  for (int r = 0; r < 2; ++r) {
    const PeerPairing p = pairPeerMemory(places, r);
    EXPECT_FALSE(p.viaPeerMemory[static_cast<size_t>(1 - r)]);
    EXPECT_NE(p.refused[static_cast<size_t>(1 - r)].find(
                  "rank 1's device GPU-1 is not one rank 0 can map"),
              std::string::npos)
        << p.refused[static_cast<size_t>(1 - r)];
  }
  // Peer access both ways: shared.
  const std::vector<PeerPlace> both = {place("a", 7, "GPU-0", {"GPU-0", "GPU-1"}),
                                       place("a", 7, "GPU-1", {"GPU-1", "GPU-0"})};
  EXPECT_TRUE(pairPeerMemory(both, 0).viaPeerMemory[1]);
  EXPECT_TRUE(pairPeerMemory(both, 1).viaPeerMemory[0]);
}

TEST(PeerPairing, NoDeviceMemoryOrSwitchedOffIsRefused) {
  const std::vector<PeerPlace> places = {place("a", 7, "GPU-0"), place("a", 7, "")};
  const PeerPairing p = pairPeerMemory(places, 0);
  EXPECT_FALSE(p.viaPeerMemory[1]);
  EXPECT_NE(p.refused[1].find("rank 1 has no device memory to share"), std::string::npos);
  const std::vector<PeerPlace> same = {place("a", 7, "GPU-0"), place("a", 7, "GPU-0")};
  const PeerPairing off = pairPeerMemory(same, 0, false);
  EXPECT_FALSE(off.viaPeerMemory[1]);
  EXPECT_NE(off.refused[1].find("switched off"), std::string::npos);
}

TEST(PeerPairing, EveryRankAgreesOnEveryPair) {
  const std::vector<PeerPlace> places = {place("a", 1, "GPU-0", {"GPU-0", "GPU-1"}),
                                         place("a", 1, "GPU-1", {"GPU-1"}),
                                         place("a", 2, "GPU-0"),
                                         place("b", 1, "GPU-0"),
                                         place("a", 1, "GPU-0", {"GPU-0", "GPU-1"}),
                                         place("a", 1, "")};
  const int n = static_cast<int>(places.size());
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      const auto x = static_cast<size_t>(a);
      const auto y = static_cast<size_t>(b);
      EXPECT_EQ(pairPeerMemory(places, a).viaPeerMemory[y],
                pairPeerMemory(places, b).viaPeerMemory[x])
          << a << " " << b;
      EXPECT_EQ(pairPeerMemory(places, a).refused[y], pairPeerMemory(places, b).refused[x]);
    }
  }
  EXPECT_TRUE(pairPeerMemory(places, 0).viaPeerMemory[4]);
}

// ---- Notices ---------------------------------------------------------------------------------

PeerMemory::Handle pattern(unsigned char seed) {
  PeerMemory::Handle h{};
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<unsigned char>(seed + i * 7);
  return h;
}

TEST(PeerNotices, RoundTripAndPaceAsTheSlice) {
  SliceNotice s;
  s.seq = 12;
  s.offset = 4096;
  s.length = 1 << 20;
  s.returnsSeen = 9;
  s.eventSlot = 77;
  s.memory = pattern(1);
  s.event = pattern(2);
  const std::vector<unsigned char> b = encodeNotice(s);
  auto d = decodeNotice(b.data(), b.size());
  ASSERT_TRUE(std::holds_alternative<PeerNotice>(d)) << std::get<std::string>(d);
  EXPECT_EQ(std::get<SliceNotice>(std::get<PeerNotice>(d)), s);
  // The data planes charge a slice notice as the slice, a return as nothing.
  EXPECT_EQ(pacedBytesOf(ChunkHeader::kNoticeMagic, b.data(), b.size()), uint64_t{1} << 20);
  EXPECT_EQ(pacedBytesOf(ChunkHeader::kMagic, b.data(), b.size()), b.size());

  ReturnNotice r;
  r.seq = 12;
  r.eventSlot = 3;
  r.event = pattern(5);
  const std::vector<unsigned char> rb = encodeNotice(r);
  auto rd = decodeNotice(rb.data(), rb.size());
  ASSERT_TRUE(std::holds_alternative<PeerNotice>(rd));
  EXPECT_EQ(std::get<ReturnNotice>(std::get<PeerNotice>(rd)), r);
  EXPECT_FALSE(pacedBytesOf(ChunkHeader::kNoticeMagic, rb.data(), rb.size()).has_value());
}

TEST(PeerNotices, MalformedOnesAreRefusedWithTheReason) {
  SliceNotice s;
  s.length = 100;
  std::vector<unsigned char> b = encodeNotice(s);
  const auto reason = [](const std::vector<unsigned char>& v, size_t n) {
    auto d = decodeNotice(v.data(), n);
    return std::holds_alternative<std::string>(d) ? std::get<std::string>(d) : std::string();
  };
  EXPECT_EQ(reason(b, 10), "a notice of 10 bytes is too short to say its kind");
  EXPECT_EQ(reason(b, b.size() - 1), "a slice notice is 184 bytes, got 183");
  std::vector<unsigned char> odd = b;
  odd[16] = 9;  // the kind
  EXPECT_EQ(reason(odd, odd.size()), "unknown notice kind 9");
  std::vector<unsigned char> unpaced = b;
  unpaced[8] = 0;  // NoticeHead::paced
  EXPECT_EQ(reason(unpaced, unpaced.size()), "a slice notice of 100 bytes paced as nothing");
  const std::vector<unsigned char> r = encodeNotice(ReturnNotice{});
  EXPECT_EQ(reason(r, r.size() + 0), "");
}

// ---- Lending over the loopback transport -----------------------------------------------------

// Host memory "shared" between the ranks of one process: a loan is a copy in a buffer of
// this rank's own pool, its handle holds the address; a buffer given back is overwritten at
// once, so a read after the give-back would show in the results. Events are bookkeeping: each
// records how often it was recorded and how often a peer waited on a recording, and recording one
// whose last recording nobody waited for yet is refused, as it would make a CUDA peer wait on the
// wrong work.
class EventBook {
 public:
  void record(int rank, uint32_t slot) {
    std::lock_guard lock(mu_);
    Entry& e = book_[{rank, slot}];
    ARL_ENFORCE(e.recorded == e.waited, "rank " << rank << " records event " << slot << " again ("
                                                << e.recorded << " recordings, " << e.waited
                                                << " waited for)");
    ++e.recorded;
  }
  void wait(int peer, uint32_t slot) {
    std::lock_guard lock(mu_);
    Entry& e = book_[{peer, slot}];
    ARL_ENFORCE(e.waited + 1 == e.recorded, "a wait on event " << slot << " of rank " << peer
                                                               << " recorded " << e.recorded
                                                               << " times, waited " << e.waited);
    ++e.waited;
  }
  size_t recordings() {
    std::lock_guard lock(mu_);
    size_t n = 0;
    for (const auto& [k, e] : book_) n += e.recorded;
    return n;
  }

 private:
  struct Entry {
    uint64_t recorded = 0;
    uint64_t waited = 0;
  };
  std::mutex mu_;
  std::map<std::pair<int, uint32_t>, Entry> book_;
};

class HostPeerMemory final : public PeerMemory {
 public:
  HostPeerMemory(int rank, EventBook& book) : rank_(rank), book_(book) {}
  std::string deviceId() const override { return "host"; }
  std::vector<std::string> reachableDevices() const override { return {"host"}; }
  Loan lend(const void* p, size_t bytes) override {
    size_t id = 0;
    while (id < pool_.size() && (lent_[id] || pool_[id].size() < bytes)) ++id;
    if (id == pool_.size()) {
      pool_.emplace_back(std::max<size_t>(bytes, 1));
      lent_.push_back(false);
    }
    lent_[id] = true;
    std::memcpy(pool_[id].data(), p, bytes);
    Loan l;
    const unsigned char* at = pool_[id].data();
    std::memcpy(l.memory.data(), &at, sizeof at);
    l.id = id;
    return l;
  }
  void giveBack(uint64_t id) override {
    ARL_ENFORCE(id < lent_.size() && lent_[id], "give-back of loan " << id << ", not lent");
    lent_[id] = false;
    std::fill(pool_[id].begin(), pool_[id].end(), 0xA5);
  }
  size_t outstanding() const {
    return static_cast<size_t>(std::count(lent_.begin(), lent_.end(), true));
  }
  size_t buffers() const { return pool_.size(); }
  Handle recordEvent(uint32_t slot) override {
    book_.record(rank_, slot);
    Handle h{};
    std::memcpy(h.data(), &rank_, sizeof rank_);
    std::memcpy(h.data() + sizeof rank_, &slot, sizeof slot);
    return h;
  }
  const void* openMemory(int, const Handle& memory, uint64_t offset, size_t) override {
    const void* p = nullptr;
    std::memcpy(&p, memory.data(), sizeof p);
    ++opened;
    return static_cast<const unsigned char*>(p) + offset;
  }
  void waitEvent(int peer, uint32_t slot, const Handle& event) override {
    int owner = -1;
    uint32_t s = 0;
    std::memcpy(&owner, event.data(), sizeof owner);
    std::memcpy(&s, event.data() + sizeof owner, sizeof s);
    ARL_ENFORCE(owner == peer && s == slot, "event of rank " << owner << " slot " << s
                                                             << " named as rank " << peer
                                                             << " slot " << slot);
    book_.wait(peer, slot);
  }
  void closePeers() noexcept override { ++closed; }

  size_t opened = 0;
  int closed = 0;

 private:
  int rank_;
  EventBook& book_;
  std::vector<std::vector<unsigned char>> pool_;
  std::vector<bool> lent_;
};

// A PeerMemoryTransport that owns its PeerMemory, for runLocal's wrapTransport.
class LendingEndpoint final : public Transport {
 public:
  LendingEndpoint(Transport& inner, int rank, EventBook& book, PeerPairing pairing)
      : memory_(rank, book), lend_(inner, memory_, std::move(pairing)) {}
  int rank() const override { return lend_.rank(); }
  int size() const override { return lend_.size(); }
  std::shared_ptr<SendCompletion> send(int peer, const ChunkHeader& h, const void* data,
                                       size_t bytes) override {
    return lend_.send(peer, h, data, bytes);
  }
  std::unique_ptr<InMessage> recv(int peer, uint32_t step, std::chrono::milliseconds t) override {
    return lend_.recv(peer, step, t);
  }
  void abort() override { lend_.abort(); }
  bool readsBackendMemory(int peer) const override { return lend_.readsBackendMemory(peer); }
  void reclaimAll(uint32_t step) override {
    lend_.reclaimAll(step);
    ARL_ENFORCE(memory_.outstanding() == 0, memory_.outstanding() << " loans outstanding");
  }

 private:
  HostPeerMemory memory_;
  PeerMemoryTransport lend_;
};

struct LendCase {
  std::string algo;
  Collective coll;
  int n;
  int inflight;
  uint64_t count;
  uint64_t slice;
  bool inPlace;
};

LocalRunResult runLent(const LendCase& c, EventBook& book, const std::vector<PeerPlace>& places,
                       DataType t = DataType::Float, RedOp op = RedOp::Sum) {
  GenParams gp;
  gp.collective = c.coll;
  gp.nranks = c.n;
  gp.count = c.count;
  gp.sliceElems = c.slice;
  const Schedule s = generate(c.algo, gp);
  LocalRunOptions o;
  o.dtype = t;
  o.op = op;
  o.inPlace = c.inPlace;
  o.inflight = c.inflight;
  o.iterations = 2;
  o.warmup = 1;
  o.stallTimeout = 20s;
  o.wrapTransport = [&](Transport& endpoint, Backend&, int rank) {
    return std::make_unique<LendingEndpoint>(endpoint, rank, book, pairPeerMemory(places, rank));
  };
  return runLocal(s, o);
}

std::vector<PeerPlace> oneHost(int n) {
  return std::vector<PeerPlace>(static_cast<size_t>(n), place("h", 1, "host"));
}

TEST(PeerLending, EveryAlgorithmIsExactWithEverySliceLent) {
  size_t k = 0;
  for (const std::string& a : algorithmNames()) {
    for (Collective coll : kAllCollectives) {
      if (!algorithmSupports(a, coll)) continue;
      for (int n : {2, 3, 4, 5}) {
        if (!rankCountRefusal(a, n).empty()) continue;
        const int inflight = 1 + static_cast<int>(k % 4);  // 1 to 4
        const LendCase c{a, coll, n, inflight, 1001, k % 2 == 0 ? 100u : 333u, k % 4 == 3};
        ++k;
        SCOPED_TRACE(a + " " + std::string(toString(coll)) + " ranks=" + std::to_string(n) +
                     " inflight=" + std::to_string(inflight));
        EventBook book;
        LocalRunResult r;
        ASSERT_NO_THROW(r = runLent(c, book, oneHost(n + helperWorkers(a))));
        EXPECT_EQ(r.wrong, 0u);
        EXPECT_GT(book.recordings(), 0u);  // slices were lent, not sent
      }
    }
  }
}

TEST(PeerLending, EveryTypeAndOperatorOnTheRing) {
  for (DataType t : kAllDataTypes) {
    for (RedOp op : kAllRedOps) {
      SCOPED_TRACE(std::string(toString(t)) + " " + std::string(toString(op)));
      EventBook book;
      LocalRunResult r;
      ASSERT_NO_THROW(r = runLent({"ring", Collective::AllReduce, 3, 2, 777, 64, false}, book,
                                  oneHost(3), t, op));
      EXPECT_EQ(r.wrong, 0u);
    }
  }
}

TEST(PeerLending, MoreSlicesThanLoansPerPeerReuseEventsSafely) {
  // 1001 elements in slices of 4: hundreds of slices per channel against 64 event slots, in
  // an exchange (recursive doubling: both ranks of a pair send before they receive) and a
  // ring.
  for (const std::string algo : {"recursive-doubling", "ring"}) {
    SCOPED_TRACE(algo);
    EventBook book;
    LocalRunResult r;
    ASSERT_NO_THROW(
        r = runLent({algo, Collective::AllReduce, 4, 4, 1001, 4, false}, book, oneHost(4)));
    EXPECT_EQ(r.wrong, 0u);
    EXPECT_GT(book.recordings(), size_t{4} * 2 * PeerMemoryTransport::kDefaultLoansPerPeer);
  }
}

TEST(PeerLending, MixedPairsLendOnOneHostAndStageAcrossHosts) {
  // Ranks 0, 1 on host a; 2, 3 on host b: pairs across hosts are refused and staged.
  const std::vector<PeerPlace> places = {place("a", 1, "host"), place("a", 1, "host"),
                                         place("b", 1, "host"), place("b", 1, "host")};
  for (const std::string algo : {"ring", "tree", "hierarchical"}) {
    SCOPED_TRACE(algo);
    EventBook book;
    LocalRunResult r;
    LendCase c{algo, Collective::AllReduce, 4, 3, 1001, 100, false};
    ASSERT_NO_THROW(r = runLent(c, book, places));
    EXPECT_EQ(r.wrong, 0u);
  }
}

TEST(PeerLending, ANoticeFromAPeerNotPairedIsRefusedWithTheReason) {
  // Rank 0 lends to rank 1, which was told they are on different hosts.
  LoopbackFabric fabric(2);
  EventBook book;
  HostPeerMemory m0(0, book);
  HostPeerMemory m1(1, book);
  const std::vector<PeerPlace> same = {place("a", 1, "host"), place("a", 1, "host")};
  const std::vector<PeerPlace> apart = {place("a", 1, "host"), place("b", 1, "host")};
  PeerMemoryTransport t0(fabric.transport(0), m0, pairPeerMemory(same, 0));
  PeerMemoryTransport t1(fabric.transport(1), m1, pairPeerMemory(apart, 1));
  ASSERT_TRUE(t0.readsBackendMemory(1));
  ASSERT_FALSE(t1.readsBackendMemory(0));
  std::vector<float> slice(16, 1.0f);
  ChunkHeader h;
  h.step = 3;
  (void)t0.send(1, h, slice.data(), slice.size() * sizeof(float));
  try {
    (void)t1.recv(0, 3, 1s);
    FAIL() << "a notice was accepted on a staged channel";
  } catch (const PeerError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "a CUDA IPC notice from rank 0, but CUDA IPC between rank 0 (host a) and rank 1 "
                  "(host b) refused: they are on different hosts"),
              std::string::npos)
        << e.what();
  }
}

TEST(PeerLending, ASliceIsLentAsACopyAndComesBackAfterItsRead) {
  LoopbackFabric fabric(2);
  EventBook book;
  HostPeerMemory m0(0, book);
  HostPeerMemory m1(1, book);
  const std::vector<PeerPlace> same = {place("a", 1, "host"), place("a", 1, "host")};
  {
    PeerMemoryTransport t0(fabric.transport(0), m0, pairPeerMemory(same, 0));
    PeerMemoryTransport t1(fabric.transport(1), m1, pairPeerMemory(same, 1));
    std::vector<float> slice(16, 2.5f);
    ChunkHeader h;
    h.step = 1;
    h.length = 64;
    auto sent = t0.send(1, h, slice.data(), 64);
    EXPECT_TRUE(sent->done());  // the caller's memory is free: a copy is lent
    EXPECT_EQ(m0.outstanding(), 1u);
    std::fill(slice.begin(), slice.end(), -1.0f);  // the sender writes there again
    auto msg = t1.recv(0, 1, 1s);
    EXPECT_TRUE(msg->inPeerMemory());
    EXPECT_EQ(msg->size(), 64u);
    EXPECT_EQ(static_cast<const float*>(msg->data())[15], 2.5f);
    EXPECT_EQ(msg->header().magic, ChunkHeader::kMagic);
    EXPECT_EQ(msg->header().step, 1u);
    msg->readIssued();
    t0.reclaimAll(1);
    EXPECT_EQ(m0.outstanding(), 0u);
    // The buffer given back is lent again for the next slice.
    (void)t0.send(1, h, slice.data() + 4, 16);
    auto msg2 = t1.recv(0, 1, 1s);
    EXPECT_EQ(static_cast<const float*>(msg2->data())[0], -1.0f);
    msg2->readIssued();
    t0.reclaimAll(1);
    EXPECT_EQ(m0.buffers(), 1u);
    EXPECT_EQ(m1.closed, 0);
  }
  EXPECT_EQ(m1.closed, 1);  // closed with the transport
  EXPECT_EQ(m0.closed, 1);
}

}  // namespace
}  // namespace arl
