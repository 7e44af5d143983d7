// The shared-memory data plane (see shm_transport.h): segments, SPSC rings of records, and
// the poll-yield-sleep wait between the two processes of a channel.
#include "transport/shm/shm_transport.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <new>
#include <random>
#include <string_view>
#include <system_error>

#include "base/clock.h"
#include "base/errors.h"
#include "base/limits.h"
#include "transport/pacing.h"
#include "transport/stale_owner.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace arl {

namespace {

using std::chrono::milliseconds;

constexpr uint64_t kSegMagic = 0x314D48534C524141ull;  // "AARLSHM1"
constexpr uint32_t kSegVersion = 2;
constexpr size_t kLine = kShmLineBytes;
constexpr size_t kPage = 4096;
constexpr size_t kMinRing = kShmMinRingBytes;
// Longest sleep between looks at the abort flag, the peer's process and the deadline.
constexpr milliseconds kSleepSlice{10};
constexpr const char* kNamePrefix = "arl-dp-";

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

size_t roundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

// roundUp() that reports overflow instead of wrapping: false when v rounded up to a does not
// fit a size_t (and so no ring or segment of that size could exist).
bool roundUpChecked(size_t v, size_t a, size_t& out) {
  if (v > std::numeric_limits<size_t>::max() - (a - 1)) return false;
  out = roundUp(v, a);
  return true;
}

// Segment layout: SegHeader, then one ChannelCtl per inbound channel, then (page aligned)
// one ring of SegHeader::ringBytes per channel.
struct SegHeader {
  uint64_t magic;
  uint32_t version;
  int32_t ownerRank;
  int32_t nranks;
  int32_t ownerPid;
  uint64_t ownerPidNs;  // pidNamespaceId() of the owner: ownerPid means nothing elsewhere
  uint64_t ringBytes;
  uint64_t totalBytes;
  uint32_t channels;
  std::atomic<uint32_t> attached;  // senders that have mapped the segment
  int8_t channelOf[kMaxRanks];     // sender rank -> channel index, -1 = none
};

// One line the producer writes, one the consumer writes. Each side sleeps on a 32-bit
// signal the other side bumps (and wakes) when it sees a sleeper count above zero.
struct ChannelCtl {
  alignas(kLine) std::atomic<uint64_t> head;  // bytes published (producer)
  std::atomic<uint32_t> dataSignal;           // bumped by the producer
  std::atomic<uint32_t> spaceWaiters;         // producers asleep waiting for room
  std::atomic<uint32_t> producerState;        // 0 none, 1 attached, 2 closed
  std::atomic<int32_t> producerPid;
  alignas(kLine) std::atomic<uint64_t> tail;  // bytes given back (consumer)
  std::atomic<uint32_t> spaceSignal;          // bumped by the consumer
  std::atomic<uint32_t> dataWaiters;          // consumers asleep waiting for data
  std::atomic<uint32_t> consumerState;        // 0 open, 2 closed
};
static_assert(sizeof(ChannelCtl) == 2 * kLine);

enum : uint32_t { kStateAttached = 1, kStateClosed = 2 };
enum : uint32_t { kRecData = 0x44415441, kRecWrap = 0x57524150 };  // "DATA", "WRAP"

// The 64-byte head of every record in a ring.
struct RecHead {
  uint32_t kind;
  uint32_t sentUs;  // shaped runs: when the send started (stampMicros32); else 0
  ChunkHeader h;
};
static_assert(sizeof(RecHead) == kShmRecordHeadBytes);

size_t ctlOffset() { return roundUp(sizeof(SegHeader), kLine); }
size_t ringsOffset(size_t channels) {
  return roundUp(ctlOffset() + channels * sizeof(ChannelCtl), kPage);
}

long futexWait(std::atomic<uint32_t>* word, uint32_t expected, milliseconds t) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(t.count() / 1000);
  ts.tv_nsec = static_cast<long>((t.count() % 1000) * 1000000);
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr,
                   0);
}

void futexWakeAll(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Wakes the other side if it sleeps. Pairs with the sleeper's waiters increment followed by
// its look at the ring: with both sequentially consistent, either the sleeper sees the new
// state or this sees the sleeper.
void notify(std::atomic<uint32_t>& signal, std::atomic<uint32_t>& waiters) {
  if (waiters.load(std::memory_order_seq_cst) != 0) {
    signal.fetch_add(1, std::memory_order_seq_cst);
    futexWakeAll(&signal);
  }
}

void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

std::string errnoText(int e) { return std::system_category().message(e); }

// Makes this process's first access to each page of [p, p + n) happen now, at setup, and not
// in a timed iteration. The pages exist (bind() reserves them), but every process pays for its
// first touch of each page of its mapping: a guest page fault, and on a virtual machine the
// hypervisor's work for the page on top (about 28 us a page here, 7 ms for 1 MiB, against
// 0.04 ms to copy 1 MiB into pages already touched). A ring of inflight + 2 records is written
// through once only after that many messages, so without this the first inflight + 2
// messages of every channel paid it on both sides: after one warm-up iteration, the first
// five timed iterations of a run whose channels carry one message per iteration
// (docs/dataplane.md, "Pages"). MADV_POPULATE_WRITE (Linux 5.14) fills the page tables in one
// call; a read of each page then does what only an access does (on this machine that cuts the
// cost of the reads alone by about 40%). Reading leaves the bytes alone, so it is safe on a ring
// another process may be writing.
void prefault(void* p, size_t n) {
#ifdef MADV_POPULATE_WRITE
  (void)::madvise(p, n, MADV_POPULATE_WRITE);  // an optimisation: the reads below suffice
#endif
  const auto* b = static_cast<const volatile unsigned char*>(p);
  for (size_t off = 0; off < n; off += kPage) (void)b[off];
}

enum class WaitEnd { Ready, Timeout, Aborted, PeerGone, Closed };

// Until this steady-clock time (ns since its epoch), waits sleep without yielding (see
// ShmOptions::yieldCostLimit). For the whole process: what made its yields costly is outside
// this data plane, and outlives it.
std::atomic<int64_t> g_noYieldUntil{0};
YieldCost g_yieldCost;

// Polls, yields, then sleeps on `signal` until ready(); see "Waiting" in the header.
// closed() is looked at only when not ready, and ready() once more after it is true, so
// whatever was published before the close is still taken.
template <class Ready, class Closed>
WaitEnd waitFor(const ShmOptions& o, const std::atomic<bool>& aborted, Ready ready, Closed closed,
                std::atomic<uint32_t>& signal, std::atomic<uint32_t>& waiters,
                const std::atomic<int32_t>& peerPid, SteadyClock::time_point deadline) {
  if (ready()) return WaitEnd::Ready;
  // The spin and yield phases look at the abort flag as often as at the clock: an abort ends
  // a wait within microseconds whatever spin and yieldFor are.
  const auto isAborted = [&] { return aborted.load(std::memory_order_relaxed); };
  if (o.spin.count() > 0) {
    const auto spinEnd = std::min(SteadyClock::now() + o.spin, deadline);
    do {
      for (int i = 0; i < 32; ++i) {
        cpuRelax();
        if (ready()) return WaitEnd::Ready;
      }
      if (isAborted()) return WaitEnd::Aborted;
    } while (SteadyClock::now() < spinEnd);
  }
  if (o.yieldFor.count() > 0) {
    auto now = SteadyClock::now();
    if (now.time_since_epoch().count() >= g_noYieldUntil.load(std::memory_order_relaxed)) {
      const auto yieldEnd = std::min(now + o.yieldFor, deadline);
      do {
        ::sched_yield();
        const auto before = now;
        now = SteadyClock::now();
        // Yields this costly hand the core to what runs whole time slices: sleep instead of
        // yielding for a while.
        const bool costly = g_yieldCost.costly(now - before, o.yieldCostLimit);
        if (costly) {
          g_noYieldUntil.store((now + o.yieldBackoff).time_since_epoch().count(),
                               std::memory_order_relaxed);
        }
        if (ready()) return WaitEnd::Ready;
        if (isAborted()) return WaitEnd::Aborted;
        if (costly) break;
      } while (now < yieldEnd);
    }
  }
  for (;;) {
    if (aborted.load(std::memory_order_relaxed)) return WaitEnd::Aborted;
    if (closed()) return ready() ? WaitEnd::Ready : WaitEnd::Closed;
    const auto now = SteadyClock::now();
    if (now >= deadline) return WaitEnd::Timeout;
    if (processGone(peerPid.load(std::memory_order_relaxed))) {
      return ready() ? WaitEnd::Ready : WaitEnd::PeerGone;
    }
    const uint32_t seen = signal.load(std::memory_order_seq_cst);
    waiters.fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (ready()) {
      waiters.fetch_sub(1, std::memory_order_seq_cst);
      return WaitEnd::Ready;
    }
    const auto left = std::chrono::ceil<milliseconds>(deadline - now);
    futexWait(&signal, seen, std::min(left, kSleepSlice));
    waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (ready()) return WaitEnd::Ready;
  }
}

// A mapped segment; unmapped when its last user (data plane or received message) lets go.
struct Mapping {
  void* base = MAP_FAILED;
  size_t bytes = 0;
  Mapping(void* b, size_t n) : base(b), bytes(n) {}
  ~Mapping() {
    if (base != MAP_FAILED) ::munmap(base, bytes);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  SegHeader* header() const { return static_cast<SegHeader*>(base); }
  ChannelCtl* ctl(size_t i) const {
    return reinterpret_cast<ChannelCtl*>(static_cast<unsigned char*>(base) + ctlOffset()) + i;
  }
  unsigned char* ring(size_t i) const {
    const SegHeader* h = header();
    return static_cast<unsigned char*>(base) + ringsOffset(h->channels) + i * h->ringBytes;
  }
};

// Receiving end of one channel, shared with the messages it handed out.
struct InChannel {
  std::shared_ptr<Mapping> map;
  ChannelCtl* ctl = nullptr;
  unsigned char* ring = nullptr;
  uint64_t cap = 0;
  uint64_t readPos = 0;  // next record to read
  // Records read and not yet given back, in ring order; front has sequence number baseSeq.
  struct Held {
    uint64_t end;
    bool released;
  };
  std::deque<Held> held;
  uint64_t baseSeq = 0;

  uint64_t hold(uint64_t end, bool released) {
    held.push_back({end, released});
    const uint64_t seq = baseSeq + held.size() - 1;
    if (released) release(seq);
    return seq;
  }
  // Marks a record given back and moves the tail over the given-back prefix.
  void release(uint64_t seq) {
    held[static_cast<size_t>(seq - baseSeq)].released = true;
    uint64_t tail = 0;
    bool moved = false;
    while (!held.empty() && held.front().released) {
      tail = held.front().end;
      held.pop_front();
      ++baseSeq;
      moved = true;
    }
    if (moved) {
      ctl->tail.store(tail, std::memory_order_seq_cst);
      notify(ctl->spaceSignal, ctl->spaceWaiters);
    }
  }
};

class ShmMessage final : public InMessage {
 public:
  ShmMessage(std::shared_ptr<InChannel> ch, uint64_t seq, const ChunkHeader& h, const void* data)
      : ch_(std::move(ch)), seq_(seq), h_(h), data_(data) {}
  ~ShmMessage() override { ch_->release(seq_); }
  const ChunkHeader& header() const override { return h_; }
  const void* data() const override { return data_; }
  size_t size() const override { return static_cast<size_t>(h_.length); }

 private:
  std::shared_ptr<InChannel> ch_;
  uint64_t seq_;
  ChunkHeader h_;  // a copy: the ring is writable by the peer
  const void* data_;
};

// Sending end of one channel.
struct OutChannel {
  std::shared_ptr<Mapping> map;
  ChannelCtl* ctl = nullptr;
  unsigned char* ring = nullptr;
  uint64_t cap = 0;
  uint64_t head = 0;
  uint64_t tailSeen = 0;
  std::atomic<int32_t> ownerPid{0};
};

// Reads the decimal number that ends at the next '-' of `s`, moving `s` past the dash;
// false when there is none or it is not a plain number below 1e15.
bool takeNumber(std::string_view& s, uint64_t& out) {
  const size_t dash = s.find('-');
  if (dash == 0 || dash == std::string_view::npos || dash > 15) return false;
  out = 0;
  for (char c : s.substr(0, dash)) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + static_cast<uint64_t>(c - '0');
  }
  s.remove_prefix(dash + 1);
  return true;
}

// Segment names are arl-dp-<pid>-ns<pid namespace>-r<rank>-<n>-<random>. A pid means something
// only in its own namespace, and kill() cannot see into another: a live owner in another
// container sharing /dev/shm looks dead from here. So only names of this namespace are
// judged, and those of the others (and names of any other form) are never touched.
bool staleInThisNamespace(std::string_view name, uint64_t ns) {
  const std::string_view prefix(kNamePrefix);
  if (ns == 0 || name.substr(0, prefix.size()) != prefix) return false;
  std::string_view rest = name.substr(prefix.size());
  uint64_t nameNs = 0;
  uint64_t pid = 0;
  if (!takeNumber(rest, pid) || rest.substr(0, 2) != "ns") return false;
  rest.remove_prefix(2);
  if (!takeNumber(rest, nameNs) || rest.empty() || rest[0] != 'r') return false;
  return nameNs == ns && pid <= INT32_MAX && processGone(static_cast<int32_t>(pid));
}

// The paths (/dev/shm/NAME) of the segments this process holds named, for
// unlinkOwnShmSegmentsFromSignal(): fixed slots that a handler can read without locks. A slot
// is claimed by its `used` flag, then filled, then published by `ready`.
struct NamedSlot {
  std::atomic<bool> used{false};
  std::atomic<bool> ready{false};
  char path[128] = {};
};
constexpr size_t kNamedSlots = 256;
NamedSlot gNamed[kNamedSlots];

// The slot now holding `shmName` ("/arl-dp-..."), or -1 when every slot is taken (the name is
// then only swept later, as before).
int rememberName(const std::string& shmName) {
  const std::string path = "/dev/shm" + shmName;
  if (path.size() >= sizeof(NamedSlot::path)) return -1;
  for (size_t i = 0; i < kNamedSlots; ++i) {
    bool expected = false;
    if (!gNamed[i].used.compare_exchange_strong(expected, true)) continue;
    std::memcpy(gNamed[i].path, path.c_str(), path.size() + 1);
    gNamed[i].ready.store(true, std::memory_order_release);
    return static_cast<int>(i);
  }
  return -1;
}

void forgetName(int slot) {
  if (slot < 0) return;
  gNamed[slot].ready.store(false, std::memory_order_release);
  gNamed[slot].used.store(false, std::memory_order_release);
}

}  // namespace

void unlinkOwnShmSegmentsFromSignal() {
  for (NamedSlot& s : gNamed) {
    if (s.ready.load(std::memory_order_acquire)) ::unlink(s.path);
  }
}

namespace {

// Removes the names of this pid namespace's segments whose creating process no longer exists
// (killed, or exited before every sender attached).
void sweepStaleSegments() {
  const uint64_t ns = pidNamespaceId();
  DIR* d = ::opendir("/dev/shm");
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    const std::string_view name(e->d_name);
    if (staleInThisNamespace(name, ns)) ::shm_unlink(("/" + std::string(name)).c_str());
  }
  ::closedir(d);
}

}  // namespace

void sweepStaleShmSegments() { sweepStaleSegments(); }

namespace {

std::chrono::microseconds microsecondsFromEnv(const char* name, std::chrono::microseconds dflt) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return dflt;
  int64_t x = 0;
  const char* end = v + std::strlen(v);
  const auto [p, ec] = std::from_chars(v, end, x);
  if (ec != std::errc() || p != end || x < 0 || x > 1'000'000'000) {
    throw ConfigError(std::string(name) + "='" + v +
                      "' is not a whole number of microseconds from 0 to 1000000000");
  }
  return std::chrono::microseconds(x);
}

}  // namespace

ShmOptions shmWaitsFromEnv(ShmOptions base) {
  base.spin = microsecondsFromEnv("ARL_SHM_SPIN_US", base.spin);
  base.yieldFor = microsecondsFromEnv("ARL_SHM_YIELD_US", base.yieldFor);
  base.yieldCostLimit = microsecondsFromEnv("ARL_SHM_YIELD_COST_US", base.yieldCostLimit);
  return base;
}

bool YieldCost::costly(std::chrono::nanoseconds took, std::chrono::nanoseconds limit) {
  int64_t mean = meanNs_.load(std::memory_order_relaxed);
  mean += (took.count() - mean) / 32;
  const bool over = mean >= limit.count();
  meanNs_.store(over ? 0 : mean, std::memory_order_relaxed);
  return over;
}

std::chrono::nanoseconds YieldCost::mean() const {
  return std::chrono::nanoseconds(meanNs_.load(std::memory_order_relaxed));
}

struct ShmDataPlane::Impl {
  ShmOptions opt;
  std::unique_ptr<Pacer> pacer;  // null when unshaped
  std::atomic<bool> aborted{false};
  bool bound = false;
  bool closed = false;
  std::string shmName;  // "/arl-dp-..." while the name exists
  int nameSlot = -1;    // its slot for unlinkOwnShmSegmentsFromSignal()
  uint32_t expectedSenders = 0;
  std::shared_ptr<Mapping> own;
  std::vector<std::shared_ptr<InChannel>> in;    // by sender rank
  std::vector<std::unique_ptr<OutChannel>> out;  // by receiver rank
  std::vector<std::string> endpoints;            // from connect(), for later first sends

  // The channel to `peer`, attached on first use; throws PeerError naming `step` when it
  // cannot be.
  OutChannel& outTo(int rank, int nranks, int peer, uint32_t step);

  void unlinkName() {
    if (!shmName.empty()) {
      ::shm_unlink(shmName.c_str());
      shmName.clear();
      forgetName(nameSlot);
      nameSlot = -1;
    }
  }
};

namespace {

// Bytes of a segment with `channels` rings of `ringBytes` (rounded up to a page, returned in
// `ring`). Throws ConfigError when that does not fit a file offset: a size that wrapped
// would map a segment smaller than the rings written into it.
size_t segmentBytes(size_t ringBytes, size_t channels, size_t& ring) {
  constexpr auto kMaxFile = static_cast<size_t>(std::numeric_limits<off_t>::max());
  const size_t head = ringsOffset(channels);
  if (!roundUpChecked(ringBytes, kPage, ring) ||
      (channels > 0 && ring > (kMaxFile - head) / channels)) {
    throw ConfigError("shared-memory data plane: " + std::to_string(channels) + " rings of " +
                      std::to_string(ringBytes) +
                      " bytes do not fit one segment (make the slice smaller)");
  }
  return head + channels * ring;
}

}  // namespace

ShmDataPlane::ShmDataPlane(int rank, int nranks)
    : rank_(rank), nranks_(nranks), impl_(std::make_unique<Impl>()) {
  if (nranks < 1 || nranks > kMaxRanks || rank < 0 || rank >= nranks) {
    throw ConfigError("shared-memory data plane: rank " + std::to_string(rank) + " not in [0, " +
                      std::to_string(nranks) + ") or more than " + std::to_string(kMaxRanks) +
                      " ranks");
  }
  impl_->in.resize(static_cast<size_t>(nranks));
  impl_->out.resize(static_cast<size_t>(nranks));
}

ShmDataPlane::~ShmDataPlane() { close(); }

std::string ShmDataPlane::bind(const ShmOptions& opt, const std::vector<int>& recvFrom) {
  Impl& im = *impl_;
  if (im.bound) throw ConfigError("shared-memory data plane: bind() called twice");
  if (opt.ringBytes < kMinRing / 16 || opt.yieldFor.count() < 0 || opt.spin.count() < 0) {
    throw ConfigError("shared-memory data plane: ring of " + std::to_string(opt.ringBytes) +
                      " bytes is too small (at least 4096) or a negative wait phase");
  }
  std::vector<int> senders = recvFrom;
  std::sort(senders.begin(), senders.end());
  senders.erase(std::unique(senders.begin(), senders.end()), senders.end());
  for (int r : senders) {
    if (r < 0 || r >= nranks_) {
      throw ConfigError("shared-memory data plane: sender rank " + std::to_string(r) +
                        " not in [0, " + std::to_string(nranks_) + ")");
    }
  }
  checkShaping(opt.shaping, nranks_);
  im.opt = opt;
  im.pacer = Pacer::make(opt.shaping, rank_, nranks_);
  const size_t channels = senders.size();
  const size_t total = segmentBytes(opt.ringBytes, channels, im.opt.ringBytes);

  sweepStaleSegments();
  static std::atomic<uint32_t> counter{0};
  std::random_device rd;
  char rnd[9];
  std::snprintf(rnd, sizeof rnd, "%08x", rd());
  const std::string name = "/" + std::string(kNamePrefix) + std::to_string(::getpid()) + "-ns" +
                           std::to_string(pidNamespaceId()) + "-r" + std::to_string(rank_) + "-" +
                           std::to_string(counter++) + "-" + rnd;
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw ConfigError("shared-memory data plane: cannot create " + name +
                      " in /dev/shm: " + errnoText(errno));
  }
  im.shmName = name;
  im.nameSlot = rememberName(name);
  // Reserving the pages now turns a full /dev/shm into this error instead of a SIGBUS on the
  // first write.
  const int fe = ::posix_fallocate(fd, 0, static_cast<off_t>(total));
  if (fe != 0) {
    ::close(fd);
    im.unlinkName();
    throw ConfigError("shared-memory data plane: cannot reserve " + std::to_string(total >> 10) +
                      " KiB in /dev/shm for rank " + std::to_string(rank_) + ": " + errnoText(fe) +
                      " (free space there, or use the zmq data plane)");
  }
  void* base = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int me = errno;
  ::close(fd);
  if (base == MAP_FAILED) {
    im.unlinkName();
    throw ConfigError("shared-memory data plane: cannot map " + name + ": " + errnoText(me));
  }
  im.own = std::make_shared<Mapping>(base, total);
  prefault(base, total);
  auto* h = new (base) SegHeader{};
  h->version = kSegVersion;
  h->ownerRank = rank_;
  h->nranks = nranks_;
  h->ownerPid = static_cast<int32_t>(::getpid());
  h->ownerPidNs = pidNamespaceId();
  h->ringBytes = im.opt.ringBytes;
  h->totalBytes = total;
  h->channels = static_cast<uint32_t>(channels);
  std::fill(std::begin(h->channelOf), std::end(h->channelOf), int8_t{-1});
  for (size_t i = 0; i < channels; ++i) {
    h->channelOf[senders[i]] = static_cast<int8_t>(i);
    ChannelCtl* c = new (im.own->ctl(i)) ChannelCtl{};
    auto ch = std::make_shared<InChannel>();
    ch->map = im.own;
    ch->ctl = c;
    ch->ring = im.own->ring(i);
    ch->cap = im.opt.ringBytes;
    im.in[static_cast<size_t>(senders[i])] = std::move(ch);
  }
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kSegMagic;
  im.expectedSenders = static_cast<uint32_t>(channels);
  im.bound = true;
  if (channels == 0) im.unlinkName();  // nobody will map it
  endpoint_ = std::string(kScheme) + name.substr(1);
  return endpoint_;
}

namespace {

// Maps the segment behind `endpoint` and attaches to the channel `rank` sends on.
std::unique_ptr<OutChannel> attach(const std::string& endpoint, int rank, int peer, int nranks) {
  const std::string_view scheme(ShmDataPlane::kScheme);
  const auto bad = [&](const std::string& why) {
    return ConfigError("shared-memory data plane: rank " + std::to_string(rank) +
                       " cannot use rank " + std::to_string(peer) + "'s endpoint '" + endpoint +
                       "': " + why);
  };
  if (endpoint.compare(0, scheme.size(), scheme) != 0 || endpoint.size() == scheme.size() ||
      endpoint.find('/', scheme.size()) != std::string::npos) {
    throw bad("not a shm:// endpoint");
  }
  const std::string name = "/" + endpoint.substr(scheme.size());
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    const int e = errno;
    throw bad(errnoText(e) + (e == EACCES
                                  ? " (a worker of another user? run with the zmq data plane)"
                                  : " (is it on another host?)"));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < sizeof(SegHeader)) {
    ::close(fd);
    throw bad("segment too small");
  }
  const size_t bytes = static_cast<size_t>(st.st_size);
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int me = errno;
  ::close(fd);
  if (base == MAP_FAILED) throw bad("mmap: " + errnoText(me));
  auto map = std::make_shared<Mapping>(base, bytes);
  SegHeader* h = map->header();
  std::atomic_thread_fence(std::memory_order_acquire);
  if (h->magic != kSegMagic || h->version != kSegVersion) throw bad("not a data-plane segment");
  if (h->ownerRank != peer || h->nranks != nranks || h->totalBytes != bytes ||
      h->channels > kMaxRanks || h->ringBytes == 0 ||
      ringsOffset(h->channels) + h->channels * h->ringBytes != bytes) {
    throw bad("segment belongs to rank " + std::to_string(h->ownerRank) + " of " +
              std::to_string(h->nranks) + " or is inconsistent");
  }
  const int idx = h->channelOf[rank];
  if (idx < 0 || static_cast<uint32_t>(idx) >= h->channels) {
    throw bad("it receives nothing from rank " + std::to_string(rank));
  }
  auto out = std::make_unique<OutChannel>();
  out->map = map;
  out->ctl = map->ctl(static_cast<size_t>(idx));
  out->ring = map->ring(static_cast<size_t>(idx));
  out->cap = h->ringBytes;
  prefault(out->ring, out->cap);  // this channel's ring only: the others are other senders'
  out->head = out->ctl->head.load(std::memory_order_relaxed);
  out->tailSeen = out->ctl->tail.load(std::memory_order_acquire);
  // Across pid namespaces a pid names another process or none: neither side may judge the
  // other's life by it (0 = unknown), and only a deadline or an abort ends a wait there.
  const uint64_t ns = pidNamespaceId();
  const bool sameNs = ns != 0 && h->ownerPidNs == ns;
  out->ownerPid.store(sameNs ? h->ownerPid : 0, std::memory_order_relaxed);
  // The channel is single-producer: a second sender (a stale worker, a duplicate rank) would
  // interleave its records with the first one's and corrupt both, so it is refused.
  uint32_t none = 0;
  if (!out->ctl->producerState.compare_exchange_strong(none, kStateAttached,
                                                       std::memory_order_acq_rel)) {
    throw bad("its channel from rank " + std::to_string(rank) + " already has a producer (pid " +
              std::to_string(out->ctl->producerPid.load(std::memory_order_relaxed)) +
              "): two workers claim rank " + std::to_string(rank));
  }
  out->ctl->producerPid.store(sameNs ? static_cast<int32_t>(::getpid()) : 0,
                              std::memory_order_relaxed);
  h->attached.fetch_add(1, std::memory_order_acq_rel);
  return out;
}

}  // namespace

void ShmDataPlane::connect(const std::vector<std::string>& endpointsByRank,
                           const std::vector<int>& peers) {
  Impl& im = *impl_;
  if (!im.bound || im.closed) {
    throw ConfigError("shared-memory data plane: connect() before bind() or after close()");
  }
  if (endpointsByRank.size() != static_cast<size_t>(nranks_)) {
    throw ConfigError("shared-memory data plane: " + std::to_string(endpointsByRank.size()) +
                      " endpoints for " + std::to_string(nranks_) + " ranks");
  }
  for (int p : peers) {
    if (p < 0 || p >= nranks_) {
      throw ConfigError("shared-memory data plane: peer rank " + std::to_string(p) +
                        " not in [0, " + std::to_string(nranks_) + ")");
    }
  }
  im.endpoints = endpointsByRank;
  for (int p : peers) {
    auto& slot = im.out[static_cast<size_t>(p)];
    if (!slot) slot = attach(endpointsByRank[static_cast<size_t>(p)], rank_, p, nranks_);
  }
}

OutChannel& ShmDataPlane::Impl::outTo(int rank, int nranks, int peer, uint32_t step) {
  auto& slot = out[static_cast<size_t>(peer)];
  if (slot) return *slot;
  if (endpoints.empty()) {
    throw PeerError(rank, peer, step,
                    "no endpoint for rank " + std::to_string(peer) + " (connect() not called)");
  }
  try {
    slot = attach(endpoints[static_cast<size_t>(peer)], rank, peer, nranks);
  } catch (const ConfigError& e) {
    throw PeerError(rank, peer, step, e.what());
  }
  return *slot;
}

std::shared_ptr<SendCompletion> ShmDataPlane::send(int peer, const ChunkHeader& h, const void* data,
                                                   size_t bytes) {
  ARL_ENFORCE(peer >= 0 && peer < nranks_, "rank " << rank_ << " peer " << peer);
  Impl& im = *impl_;
  ARL_ENFORCE(im.bound && !im.closed, "send on a data plane not bound or closed, rank " << rank_);
  if (im.aborted.load(std::memory_order_relaxed)) {
    throw PeerError(rank_, peer, h.step, "run aborted");
  }
  OutChannel& o = im.outTo(rank_, nranks_, peer, h.step);
  // bytes is checked first: rounding a size near SIZE_MAX up would wrap it to a small one.
  if (bytes > o.cap || sizeof(RecHead) + roundUp(bytes, kLine) > o.cap) {
    throw PeerError(rank_, peer, h.step,
                    "message of " + std::to_string(bytes) + " bytes does not fit rank " +
                        std::to_string(peer) + "'s ring of " + std::to_string(o.cap) + " bytes");
  }
  const uint64_t need = sizeof(RecHead) + roundUp(bytes, kLine);
  ChannelCtl& c = *o.ctl;
  Pacer::SendSlot paced;
  const bool notice = h.magic == ChunkHeader::kNoticeMagic;
  const std::optional<uint64_t> pacedBytes = pacedBytesOf(h.magic, data, bytes);
  const bool pace = im.pacer && pacedBytes;
  if (pace) paced = im.pacer->claimSend(peer, static_cast<size_t>(*pacedBytes), steadyNowNs());
  // Waits until `want` more bytes fit behind the head.
  const auto waitForRoom = [&](uint64_t want) {
    if (o.cap - (o.head - o.tailSeen) >= want) return;
    const auto room = [&] {
      o.tailSeen = c.tail.load(std::memory_order_acquire);
      return o.cap - (o.head - o.tailSeen) >= want;
    };
    const auto closed = [&] {
      return c.consumerState.load(std::memory_order_acquire) == kStateClosed;
    };
    const auto deadline = deadlineAfter(im.opt.sendTimeout);
    switch (waitFor(im.opt, im.aborted, room, closed, c.spaceSignal, c.spaceWaiters, o.ownerPid,
                    deadline)) {
      case WaitEnd::Ready: return;
      case WaitEnd::Aborted: throw PeerError(rank_, peer, h.step, "run aborted");
      case WaitEnd::Closed:
        throw PeerError(rank_, peer, h.step,
                        "rank " + std::to_string(peer) +
                            " closed its data plane before taking data for step " +
                            std::to_string(h.step));
      case WaitEnd::PeerGone:
        throw PeerError(rank_, peer, h.step,
                        "rank " + std::to_string(peer) + "'s process exited during step " +
                            std::to_string(h.step));
      case WaitEnd::Timeout:
        throw PeerError(rank_, peer, h.step,
                        "rank " + std::to_string(peer) + " accepted no data for step " +
                            std::to_string(h.step) + " within " +
                            formatDuration(im.opt.sendTimeout));
    }
  };
  const uint64_t pos = o.head % o.cap;
  const uint64_t atEnd = o.cap - pos;
  uint64_t at = pos;
  if (atEnd < need) {
    // The record does not fit before the ring's end: a WRAP record fills the rest. When the
    // wrap and the record together fit, both go out with one head update; otherwise (a
    // record larger than the part of the ring before the write position) the wrap is
    // published alone, and the record waits for the ring to drain from its start.
    const bool together = atEnd + need <= o.cap;
    waitForRoom(together ? atEnd + need : atEnd);
    auto* wrap = reinterpret_cast<RecHead*>(o.ring + pos);
    wrap->kind = kRecWrap;
    o.head += atEnd;
    at = 0;
    if (!together) {
      c.head.store(o.head, std::memory_order_seq_cst);
      notify(c.dataSignal, c.dataWaiters);
      waitForRoom(need);
    }
  } else {
    waitForRoom(need);
  }
  auto* rec = reinterpret_cast<RecHead*>(o.ring + at);
  rec->kind = kRecData;
  rec->sentUs = pace ? stampMicros32(paced.startNs) : 0;
  rec->h = h;
  rec->h.magic = notice ? ChunkHeader::kNoticeMagic : ChunkHeader::kMagic;
  rec->h.src = rank_;
  rec->h.length = bytes;
  if (bytes > 0) std::memcpy(o.ring + at + sizeof(RecHead), data, bytes);
  o.head += need;
  c.head.store(o.head, std::memory_order_seq_cst);
  notify(c.dataSignal, c.dataWaiters);
  if (!pace) return completedSend();
  const Impl* imp = &im;  // the data plane outlives its sends' completions (transport.h)
  return std::make_shared<PacedCompletion>(
      paced.leftNs, [imp] { return imp->aborted.load(std::memory_order_relaxed); }, rank_, peer,
      h.step);
}

std::unique_ptr<InMessage> ShmDataPlane::recv(int peer, uint32_t step,
                                              std::chrono::milliseconds timeout) {
  ARL_ENFORCE(peer >= 0 && peer < nranks_, "rank " << rank_ << " peer " << peer);
  Impl& im = *impl_;
  ARL_ENFORCE(im.bound && !im.closed, "recv on a data plane not bound or closed, rank " << rank_);
  if (im.aborted.load(std::memory_order_relaxed)) throw PeerError(rank_, peer, step, "run aborted");
  if (!im.shmName.empty() &&
      im.own->header()->attached.load(std::memory_order_relaxed) >= im.expectedSenders) {
    im.unlinkName();
  }
  const std::shared_ptr<InChannel>& chp = im.in[static_cast<size_t>(peer)];
  if (!chp) {
    throw PeerError(rank_, peer, step,
                    "no channel from rank " + std::to_string(peer) +
                        " (bind() was not told this rank sends here)");
  }
  InChannel& ch = *chp;
  ChannelCtl& c = *ch.ctl;
  const auto deadline = deadlineAfter(timeout);
  for (;;) {
    const auto ready = [&] { return c.head.load(std::memory_order_acquire) > ch.readPos; };
    const auto closed = [&] {
      return c.producerState.load(std::memory_order_acquire) == kStateClosed;
    };
    switch (waitFor(im.opt, im.aborted, ready, closed, c.dataSignal, c.dataWaiters, c.producerPid,
                    deadline)) {
      case WaitEnd::Ready: break;
      case WaitEnd::Aborted: throw PeerError(rank_, peer, step, "run aborted");
      case WaitEnd::Closed:
        throw PeerError(rank_, peer, step,
                        "rank " + std::to_string(peer) +
                            " closed its data plane before sending data for step " +
                            std::to_string(step));
      case WaitEnd::PeerGone:
        throw PeerError(rank_, peer, step,
                        "rank " + std::to_string(peer) + "'s process exited before sending data " +
                            "for step " + std::to_string(step));
      case WaitEnd::Timeout:
        throw PeerError(rank_, peer, step,
                        "no data from rank " + std::to_string(peer) + " for step " +
                            std::to_string(step) + " within " + formatDuration(timeout));
    }
    const uint64_t head = c.head.load(std::memory_order_acquire);
    const uint64_t pos = ch.readPos % ch.cap;
    const auto* rec = reinterpret_cast<const RecHead*>(ch.ring + pos);
    const uint32_t kind = rec->kind;
    if (kind == kRecWrap) {
      // A WRAP pads the ring's end: it never starts the ring, and all of it was published.
      if (pos == 0 || ch.readPos + (ch.cap - pos) > head) {
        throw PeerError(rank_, peer, step,
                        "malformed wrap record from rank " + std::to_string(peer) + " at ring " +
                            "offset " + std::to_string(pos) + " (" +
                            std::to_string(head - ch.readPos) + " bytes published)");
      }
      ch.readPos += ch.cap - pos;
      ch.hold(ch.readPos, true);
      continue;
    }
    const ChunkHeader hdr = rec->h;
    const uint64_t need = sizeof(RecHead) + roundUp(hdr.length, kLine);
    if (kind != kRecData || hdr.length > ch.cap || need > ch.cap - pos ||
        ch.readPos + need > head) {
      throw PeerError(rank_, peer, step,
                      "malformed record from rank " + std::to_string(peer) + " (kind " +
                          std::to_string(kind) + ", " + std::to_string(hdr.length) + " bytes)");
    }
    const unsigned char* payload = ch.ring + pos + sizeof(RecHead);
    if (im.pacer) {
      if (const auto paced = pacedBytesOf(hdr.magic, payload, hdr.length)) {
        paceReceive(peer, step, *paced, rec->sentUs);
      }
    }
    ch.readPos += need;
    const uint64_t seq = ch.hold(ch.readPos, false);
    return std::make_unique<ShmMessage>(chp, seq, hdr, payload);
  }
}

bool ShmDataPlane::ready(int peer, uint32_t step) {
  (void)step;
  return !impl_->pacer && arrived(peer);
}

bool ShmDataPlane::arrived(int peer) {
  ARL_ENFORCE(peer >= 0 && peer < nranks_, "rank " << rank_ << " peer " << peer);
  Impl& im = *impl_;
  if (!im.bound || im.closed || im.aborted.load(std::memory_order_relaxed)) return false;
  const std::shared_ptr<InChannel>& chp = im.in[static_cast<size_t>(peer)];
  if (!chp) return false;
  const InChannel& ch = *chp;
  const uint64_t head = ch.ctl->head.load(std::memory_order_acquire);
  if (head <= ch.readPos) return false;
  const uint64_t pos = ch.readPos % ch.cap;
  // A WRAP record pads the ring's end: a message is there only once one follows it.
  if (reinterpret_cast<const RecHead*>(ch.ring + pos)->kind == kRecWrap) {
    return head > ch.readPos + (ch.cap - pos);
  }
  return true;
}

void ShmDataPlane::paceReceive(int peer, uint32_t step, uint64_t bytes, uint32_t sentUs) {
  Impl& im = *impl_;
  const int64_t now = steadyNowNs();
  const int64_t visible =
      im.pacer->claimReceive(peer, static_cast<size_t>(bytes), unstampMicros32(sentUs, now));
  if (!paceUntil(visible, [&] { return im.aborted.load(std::memory_order_relaxed); })) {
    throw PeerError(rank_, peer, step, "run aborted");
  }
}

void ShmDataPlane::abort() { impl_->aborted.store(true, std::memory_order_relaxed); }

bool ShmDataPlane::drain() {
  Impl& im = *impl_;
  if (!im.bound || im.closed) return false;
  const auto deadline = deadlineAfter(im.opt.closeLinger);
  bool all = true;
  for (const auto& slot : im.out) {
    if (!slot) continue;
    OutChannel& o = *slot;
    ChannelCtl& c = *o.ctl;
    // The consumer gives space back in ring order, so the tail reaches the head once every
    // record was taken.
    const auto taken = [&] { return c.tail.load(std::memory_order_acquire) >= o.head; };
    const auto closed = [&] {
      return c.consumerState.load(std::memory_order_acquire) == kStateClosed;
    };
    const WaitEnd end = waitFor(im.opt, im.aborted, taken, closed, c.spaceSignal, c.spaceWaiters,
                                o.ownerPid, deadline);
    if (end == WaitEnd::Aborted) return false;
    all = all && end == WaitEnd::Ready;
  }
  return all;
}

bool ShmDataPlane::close() {
  Impl& im = *impl_;
  if (im.closed) return false;
  im.closed = true;
  for (auto& o : im.out) {
    if (!o) continue;
    o->ctl->producerState.store(kStateClosed, std::memory_order_seq_cst);
    o->ctl->dataSignal.fetch_add(1, std::memory_order_seq_cst);
    futexWakeAll(&o->ctl->dataSignal);
    o.reset();
  }
  for (auto& ch : im.in) {
    if (!ch) continue;
    ch->ctl->consumerState.store(kStateClosed, std::memory_order_seq_cst);
    ch->ctl->spaceSignal.fetch_add(1, std::memory_order_seq_cst);
    futexWakeAll(&ch->ctl->spaceSignal);
    ch.reset();  // messages still alive keep the channel and its mapping
  }
  im.unlinkName();
  im.own.reset();
  return true;
}

}  // namespace arl
