#include "transport/zmq/zmq_transport.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <mutex>
#include <set>
#include <string_view>
#include <system_error>
#include <thread>
#include <zmq.hpp>

#include "base/clock.h"
#include "base/endpoint.h"
#include "base/errors.h"
#include "transport/pacing.h"
#include "transport/plane_state.h"
#include "transport/stale_owner.h"
#include "transport/zmq/chunk_frame.h"
#include "transport/zmq/curve_keys.h"
#include "transport/zmq/zap_handler.h"

namespace arl {

namespace {

using std::chrono::milliseconds;

// Longest time a blocked call goes without looking at the abort flag; the abort pipe wakes
// it sooner, this is the backstop.
constexpr milliseconds kAbortCheck{50};
// Poll interval while an acknowledgement waits for its connection to come up.
constexpr milliseconds kAckRetry{5};

// CURVE keys given: every rank's, each a Z85 key, and this rank's secret among them.
void checkCurve(const BindOptions& opt, int nranks, const std::string& who) {
  if (opt.curvePeerKeys.empty() && opt.curveSecretKey.empty()) return;
  if (!curveAvailable()) throw ConfigError(who + "this libzmq was built without CURVE");
  if (opt.curvePeerKeys.size() != static_cast<size_t>(nranks)) {
    throw ConfigError(who + std::to_string(opt.curvePeerKeys.size()) + " CURVE keys for " +
                      std::to_string(nranks) + " ranks");
  }
  if (!isZ85Key(opt.curveSecretKey)) throw ConfigError(who + "the CURVE secret key is not Z85");
  for (size_t r = 0; r < opt.curvePeerKeys.size(); ++r) {
    if (!isZ85Key(opt.curvePeerKeys[r])) {
      throw ConfigError(who + "the CURVE key of rank " + std::to_string(r) + " is not Z85");
    }
  }
}
// How long a failing rank still tries to acknowledge goodbyes it owes.
constexpr milliseconds kAckGrace{300};

milliseconds until(SteadyClock::time_point deadline) {
  const auto left = deadline - SteadyClock::now();
  return left.count() <= 0 ? milliseconds(0) : std::chrono::ceil<milliseconds>(left);
}

using SharedState = PlaneState;

// Set by ZeroMQ's I/O thread when it releases a zero-copy payload.
struct ZeroCopyState {
  std::mutex m;
  std::condition_variable cv;
  std::atomic<bool> done{false};
};

// zmq_free_fn: runs on ZeroMQ's I/O thread (or on the caller's when a message is dropped).
// The hint owns a reference so the state outlives a completion the caller already dropped.
extern "C" void releaseZeroCopy(void* /*data*/, void* hint) {
  auto* holder = static_cast<std::shared_ptr<ZeroCopyState>*>(hint);
  {
    std::lock_guard<std::mutex> lk((*holder)->m);
    (*holder)->done.store(true, std::memory_order_release);
  }
  (*holder)->cv.notify_all();
  delete holder;
}

class ZeroCopyCompletion final : public SendCompletion {
 public:
  ZeroCopyCompletion(std::shared_ptr<ZeroCopyState> st, std::shared_ptr<SharedState> shared,
                     int rank, int peer, uint32_t step, milliseconds timeout)
      : st_(std::move(st)),
        shared_(std::move(shared)),
        rank_(rank),
        peer_(peer),
        step_(step),
        timeout_(timeout) {}

  bool done() const override { return st_->done.load(std::memory_order_acquire); }

  void wait() override {
    if (done()) {
      return;
    }
    const auto deadline = deadlineAfter(timeout_);
    std::unique_lock<std::mutex> lk(st_->m);
    while (!st_->done.load(std::memory_order_acquire)) {
      if (shared_->isAborted()) {
        throw shared_->fail(rank_, peer_, step_, "run aborted");
      }
      const auto now = SteadyClock::now();
      if (now >= deadline) {
        throw shared_->fail(rank_, peer_, step_,
                            "send to rank " + std::to_string(peer_) + " for step " +
                                std::to_string(step_) + " not taken within " +
                                formatDuration(timeout_) + " (peer not reading)");
      }
      st_->cv.wait_for(lk, std::min<SteadyClock::duration>(deadline - now, kAbortCheck));
    }
  }

 private:
  std::shared_ptr<ZeroCopyState> st_;
  std::shared_ptr<SharedState> shared_;
  int rank_;
  int peer_;
  uint32_t step_;
  milliseconds timeout_;
};

class ZmqInMessage final : public InMessage {
 public:
  ZmqInMessage(const ChunkHeader& h, zmq::message_t payload, int64_t sentWireNs)
      : h_(h), payload_(std::move(payload)), sentWireNs_(sentWireNs) {}
  const ChunkHeader& header() const override { return h_; }
  const void* data() const override { return payload_.data(); }
  size_t size() const override { return payload_.size(); }
  // Shaped runs: when the send started, on the wire clock (Pacer::toWire); else 0.
  int64_t sentWireNs() const { return sentWireNs_; }

 private:
  ChunkHeader h_;
  zmq::message_t payload_;
  int64_t sentWireNs_;
};

// Waits until `sock` has `events` or the abort pipe fires, at most `timeout` (and never
// longer than kAbortCheck).
void waitSocket(zmq::socket_t& sock, short events, const SharedState& st, milliseconds timeout) {
  std::array<zmq_pollitem_t, 2> items{};
  items[0].socket = sock.handle();
  items[0].events = events;
  items[1].fd = st.fds[0];
  items[1].events = ZMQ_POLLIN;
  try {
    zmq::poll(items, std::min(timeout, kAbortCheck));
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) {
      throw;
    }
  }
}

std::span<const uint8_t> bytesOf(const zmq::message_t& frame) {
  return {static_cast<const uint8_t*>(frame.data()), frame.size()};
}

constexpr std::string_view kIpcDirPrefix = "arl-dp-";

// Removes the socket directories under `base` ("arl-dp-<owner tag>-XXXXXX") whose owner is
// dead, as a SIGKILLed rank leaves them: only this user's real directories, and in them only
// rank sockets; a directory holding anything else is left alone.
void sweepStaleIpcDirs(const std::string& base) {
  DIR* d = ::opendir(base.c_str());
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    const std::string_view name(e->d_name);
    if (name.substr(0, kIpcDirPrefix.size()) != kIpcDirPrefix) continue;
    if (!ownerTagGone(name.substr(kIpcDirPrefix.size()))) continue;
    const std::string dir = base + "/" + std::string(name);
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
      continue;
    }
    if (DIR* inner = ::opendir(dir.c_str())) {
      while (dirent* f = ::readdir(inner)) {
        const std::string_view file(f->d_name);
        if (file.starts_with("rank") && file.ends_with(".sock")) {
          ::unlink((dir + "/" + std::string(file)).c_str());
        }
      }
      ::closedir(inner);
    }
    ::rmdir(dir.c_str());
  }
  ::closedir(d);
}

std::string fromWhom(int src) {
  return src >= 0 ? "from rank " + std::to_string(src) : "from an unknown sender";
}

}  // namespace

struct ZmqDataPlane::Impl {
  int rank = 0;
  int nranks = 0;
  BindOptions opt;
  std::unique_ptr<zmq::context_t> ctx;
  std::unique_ptr<ZapHandler> zap;  // with CURVE: admits the run's members to `pull`
  std::string curvePublicKey;       // this rank's, with CURVE
  zmq::socket_t pull;
  std::vector<zmq::socket_t> push;  // by rank; no handle until connected
  std::vector<std::string> endpoints;
  std::vector<std::deque<std::unique_ptr<ZmqInMessage>>> queues;  // by sender rank
  std::unique_ptr<Pacer> pacer;                                   // null when unshaped
  std::shared_ptr<SharedState> shared = std::make_shared<SharedState>();
  std::string ipcDir;   // private directory holding the ipc socket ("" for tcp)
  std::string ipcFile;  // the ipc socket file
  bool closed = false;

  // Goodbye bookkeeping, by rank.
  std::vector<char> sentTo;    // we sent data there: it gets a FIN and must ACK it
  std::vector<char> recvFrom;  // data came from there: its FIN is expected, and ACKed
  std::vector<char> finSeen;
  std::vector<char> ackSeen;
  std::vector<char> ackOwed;
  size_t acksOwed = 0;

  Impl(int r, int n)
      : rank(r),
        nranks(n),
        push(static_cast<size_t>(n)),
        queues(static_cast<size_t>(n)),
        sentTo(static_cast<size_t>(n), 0),
        recvFrom(static_cast<size_t>(n), 0),
        finSeen(static_cast<size_t>(n), 0),
        ackSeen(static_cast<size_t>(n), 0),
        ackOwed(static_cast<size_t>(n), 0) {}

  std::string who() const { return "rank " + std::to_string(rank) + ": data plane: "; }

  // Connects the PUSH socket to `peer` unless it exists. Throws ConfigError.
  zmq::socket_t& pushTo(int peer) {
    zmq::socket_t& s = push[static_cast<size_t>(peer)];
    if (s.handle() != nullptr) {
      return s;
    }
    if (endpoints.empty() || endpoints[static_cast<size_t>(peer)].empty()) {
      throw ConfigError(who() + "no endpoint known for rank " + std::to_string(peer));
    }
    const std::string& ep = endpoints[static_cast<size_t>(peer)];
    try {
      zmq::socket_t sock(*ctx, zmq::socket_type::push);
      sock.set(zmq::sockopt::linger, 0);
      sock.set(zmq::sockopt::sndhwm, opt.sndHwm);
      // Queue only on a live connection: a send before the peer's connection is up blocks
      // (bounded by sendTimeout) instead of filling a pipe that a reconnect may discard.
      sock.set(zmq::sockopt::immediate, true);
      if (!opt.curvePeerKeys.empty()) {
        sock.set(zmq::sockopt::curve_serverkey, opt.curvePeerKeys[static_cast<size_t>(peer)]);
        sock.set(zmq::sockopt::curve_publickey, curvePublicKey);
        sock.set(zmq::sockopt::curve_secretkey, opt.curveSecretKey);
      }
      if (opt.kind == BindOptions::Kind::Tcp && opt.tcpBufferBytes > 0) {
        sock.set(zmq::sockopt::sndbuf, opt.tcpBufferBytes);
      }
      sock.connect(ep);
      s = std::move(sock);
    } catch (const zmq::error_t& e) {
      throw ConfigError(who() + "cannot connect to rank " + std::to_string(peer) + " at " + ep +
                        ": " + e.what());
    }
    return s;
  }

  // Sends a control message without blocking; false when the peer cannot take it now.
  bool trySendControl(int peer, uint32_t magic) {
    zmq::socket_t& s = pushTo(peer);
    ChunkHeader h;
    h.magic = magic;
    h.src = rank;
    h.length = 0;
    zmq::message_t head(&h, sizeof h);
    if (!s.send(head, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      return false;
    }
    // The high-water mark is checked on the first frame only: the rest always goes.
    zmq::message_t empty;
    (void)s.send(empty, zmq::send_flags::none);
    return true;
  }

  // Answers the FINs read so far, as far as the connections allow. An ACK that cannot be
  // sent at all (no endpoint) is given up: its FIN's sender then waits out its linger.
  void flushAcks() {
    if (acksOwed == 0) {
      return;
    }
    for (int q = 0; q < nranks; ++q) {
      if (!ackOwed[static_cast<size_t>(q)]) {
        continue;
      }
      bool settled = false;
      try {
        settled = trySendControl(q, kAckMagic);
      } catch (const std::exception&) {
        settled = true;
      }
      if (settled) {
        ackOwed[static_cast<size_t>(q)] = 0;
        --acksOwed;
      }
    }
  }

  // Keeps trying to send owed ACKs for at most `budget`: a rank that is going down anyway
  // still lets the peers it acknowledges close without waiting out their linger.
  void flushAcksFor(milliseconds budget) {
    const auto deadline = SteadyClock::now() + budget;
    try {
      for (flushAcks(); acksOwed > 0 && !shared->isAborted() && SteadyClock::now() < deadline;
           flushAcks()) {
        // Unread data may be waiting on the PULL socket, so sleep rather than poll it.
        std::this_thread::sleep_for(std::min(until(deadline), kAckRetry));
      }
    } catch (const std::exception&) {
      // Best effort only.
    }
  }

  PeerError malformed(int src, uint32_t step, const std::string& what) {
    return shared->fail(rank, src, step, "malformed message " + fromWhom(src) + ": " + what);
  }

  // The header frame of a shaped data message: the ChunkHeader and the send's start.
  zmq::message_t pacedHeader(const ChunkHeader& hdr, int64_t startNs) {
    const int64_t wire = pacer->toWire(startNs);
    zmq::message_t head(kStampedHeaderBytes);
    std::memcpy(head.data(), &hdr, sizeof hdr);
    std::memcpy(static_cast<char*>(head.data()) + sizeof hdr, &wire, sizeof wire);
    return head;
  }

  // Reads one whole message if one is waiting: returns false when none is; sets `out` to a
  // data message, or leaves it empty after handling a control message. Messages are checked
  // before they are queued, so a bad one fails the receive that met it instead of waiting in
  // a queue. `step` is only for error messages.
  bool readOne(uint32_t step, int forPeer, std::unique_ptr<ZmqInMessage>& out) {
    zmq::message_t head;
    try {
      if (!pull.recv(head, zmq::recv_flags::dontwait)) {
        return false;
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) {
        return false;
      }
      throw shared->fail(rank, forPeer, step,
                         std::string("data-plane receive failed: ") + e.what());
    }
    const int src = senderOf(bytesOf(head), nranks);
    if (!head.more()) {
      throw malformed(src, step, "1 frame, expected 2 (header, payload)");
    }
    // The remaining frames of a multipart message are already here (atomic delivery).
    zmq::message_t body;
    (void)pull.recv(body, zmq::recv_flags::none);
    size_t frames = 2;
    for (bool more = body.more(); more; ++frames) {
      zmq::message_t extra;
      (void)pull.recv(extra, zmq::recv_flags::none);
      more = extra.more();
    }
    if (frames != 2) {
      throw malformed(src, step, std::to_string(frames) + " frames, expected 2 (header, payload)");
    }
    auto decoded = decodeChunkFrame(bytesOf(head), body.size(), nranks, pacer != nullptr);
    if (auto* bad = std::get_if<ChunkFrameError>(&decoded)) {
      throw malformed(bad->src, step, bad->reason);
    }
    const ChunkHeader h = std::get<ChunkFrame>(decoded).header;
    const int64_t sentWireNs = std::get<ChunkFrame>(decoded).sentWireNs;
    const auto s = static_cast<size_t>(h.src);
    if (h.magic == kFinMagic) {
      if (!finSeen[s]) {
        finSeen[s] = 1;
        ackOwed[s] = 1;
        ++acksOwed;
      }
    } else if (h.magic == kAckMagic) {
      ackSeen[s] = 1;
    } else {
      recvFrom[s] = 1;
      out = std::make_unique<ZmqInMessage>(h, std::move(body), sentWireNs);
    }
    return true;
  }

  // Both halves of the goodbye are complete.
  bool settled() const {
    for (size_t p = 0; p < static_cast<size_t>(nranks); ++p) {
      if (sentTo[p] && !ackSeen[p]) {
        return false;
      }
      if (recvFrom[p] && (!finSeen[p] || ackOwed[p])) {
        return false;
      }
    }
    return true;
  }

  // The goodbye exchange of close(); true when it completed within closeLinger.
  bool farewell() {
    const auto deadline = SteadyClock::now() + opt.closeLinger;
    SharedState& st = *shared;
    // FIN after the data: FIFO per connection puts it behind everything we sent.
    for (int p = 0; p < nranks; ++p) {
      if (!sentTo[static_cast<size_t>(p)]) {
        continue;
      }
      while (!trySendControl(p, kFinMagic)) {
        if (st.isAborted() || SteadyClock::now() >= deadline) {
          return false;
        }
        waitSocket(push[static_cast<size_t>(p)], ZMQ_POLLOUT, st, until(deadline));
      }
    }
    for (;;) {
      flushAcks();
      if (settled()) {
        return true;
      }
      if (st.isAborted() || SteadyClock::now() >= deadline) {
        return false;
      }
      std::unique_ptr<ZmqInMessage> unread;
      while (readOne(0, -1, unread)) {
        unread.reset();  // data nobody asked for is dropped
      }
      flushAcks();
      if (settled()) {
        return true;
      }
      waitSocket(pull, ZMQ_POLLIN, st,
                 std::min(until(deadline), acksOwed ? kAckRetry : kAbortCheck));
    }
  }
};

DataPlanePeers dataPlanePeers(const Schedule& s, int rank) {
  if (rank < 0 || rank >= static_cast<int>(s.ranks.size())) {
    throw ConfigError("dataPlanePeers: rank " + std::to_string(rank) + " not in schedule of " +
                      std::to_string(s.ranks.size()) + " ranks");
  }
  DataPlanePeers p;
  for (const Op& op : s.ranks[static_cast<size_t>(rank)]) {
    if (op.sendPeer >= 0) {
      p.sendTo.push_back(op.sendPeer);
    }
    if (op.recvPeer >= 0) {
      p.recvFrom.push_back(op.recvPeer);
    }
  }
  for (auto* v : {&p.sendTo, &p.recvFrom}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  return p;
}

ZmqDataPlane::ZmqDataPlane(int rank, int nranks) : rank_(rank), nranks_(nranks) {
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    throw ConfigError("data plane: rank " + std::to_string(rank) + " not in [0, " +
                      std::to_string(nranks) + ")");
  }
  impl_ = std::make_unique<Impl>(rank, nranks);
}

ZmqDataPlane::~ZmqDataPlane() { close(); }

// Creates this rank's private socket directory (named with its owner tag, after sweeping
// those of dead owners) and returns the socket path in it.
std::string ZmqDataPlane::makeIpcDir(const std::string& baseDir, const std::string& who) {
  std::string base = baseDir;
  if (base.empty()) {
    std::error_code ec;  // temp_directory_path() honours $TMPDIR
    const std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
    base = ec ? std::string("/tmp") : tmp.string();
  }
  sweepStaleIpcDirs(base);
  std::string templ = base + "/" + std::string(kIpcDirPrefix) + ownerTag() + "-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) {
    throw ConfigError(who + "cannot create a private ipc directory under " + base + ": " +
                      std::generic_category().message(errno));
  }
  impl_->ipcDir = templ;
  impl_->ipcFile = templ + "/rank" + std::to_string(rank_) + ".sock";
  // sockaddr_un::sun_path holds 108 bytes including the terminating NUL.
  if (impl_->ipcFile.size() > 107) {
    const std::string path = impl_->ipcFile;
    ::rmdir(impl_->ipcDir.c_str());
    impl_->ipcDir.clear();
    impl_->ipcFile.clear();
    throw ConfigError(who + "ipc socket path too long (" + std::to_string(path.size()) +
                      " > 107 bytes): " + path + "; choose a shorter ipcBaseDir");
  }
  return impl_->ipcFile;
}

std::string ZmqDataPlane::bind(const BindOptions& opt) {
  ARL_ENFORCE(!impl_->ctx && !impl_->closed, "data plane of rank " << rank_ << " bound twice");
  const std::string who = impl_->who();
  if (opt.sndHwm < 0 || opt.rcvHwm < 0) {
    throw ConfigError(who + "high-water marks must be >= 0");
  }
  if (opt.ioThreads < 1) {
    throw ConfigError(who + "ioThreads must be >= 1");
  }
  if (opt.tcpBufferBytes < 0) {
    throw ConfigError(who + "tcpBufferBytes must be >= 0");
  }
  if (opt.sendTimeout.count() < 0) {
    throw ConfigError(who + "sendTimeout must be >= 0");
  }
  if (opt.closeLinger.count() < 0) {
    throw ConfigError(who + "closeLinger must be >= 0");
  }
  const bool tcp = opt.kind == BindOptions::Kind::Tcp;
  if (tcp && opt.tcpHost.empty()) {
    throw ConfigError(who + "tcp host is empty");
  }
  if (tcp && opt.tcpAdvertiseHost.empty() && isWildcardHost(opt.tcpHost)) {
    throw ConfigError(who + "tcp host '" + opt.tcpHost +
                      "' is a wildcard; set an address peers can reach (tcpAdvertiseHost)");
  }
  checkShaping(opt.shaping, nranks_);
  checkCurve(opt, nranks_, who);
  impl_->opt = opt;
  impl_->pacer = Pacer::make(opt.shaping, rank_, nranks_, opt.clockOffsetNs);

  std::string bindAddr;
  if (tcp) {
    bindAddr = "tcp://" + opt.tcpHost + ":*";
  } else {
    bindAddr = "ipc://" + makeIpcDir(opt.ipcBaseDir, who);
  }

  try {
    impl_->ctx = std::make_unique<zmq::context_t>(opt.ioThreads);
    impl_->pull = zmq::socket_t(*impl_->ctx, zmq::socket_type::pull);
    impl_->pull.set(zmq::sockopt::linger, 0);
    impl_->pull.set(zmq::sockopt::rcvhwm, opt.rcvHwm);
    impl_->pull.set(zmq::sockopt::maxmsgsize, opt.maxMessageBytes);
    if (!opt.curvePeerKeys.empty()) {
      impl_->curvePublicKey = curvePublicOf(opt.curveSecretKey);
      const std::set<std::string> members(opt.curvePeerKeys.begin(), opt.curvePeerKeys.end());
      impl_->zap = std::make_unique<ZapHandler>(*impl_->ctx, members);
      impl_->pull.set(zmq::sockopt::curve_server, true);
      impl_->pull.set(zmq::sockopt::curve_secretkey, opt.curveSecretKey);
      impl_->pull.set(zmq::sockopt::zap_domain, "allreduce-lab-data");
    }
    if (tcp && opt.tcpBufferBytes > 0) {
      impl_->pull.set(zmq::sockopt::rcvbuf, opt.tcpBufferBytes);
    }
    impl_->pull.bind(bindAddr);
    endpoint_ = impl_->pull.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    impl_->shared->abort();  // nothing to say goodbye to
    close();
    throw ConfigError(who + "cannot bind " + bindAddr + ": " + e.what());
  }
  if (tcp && !opt.tcpAdvertiseHost.empty()) {
    // ZeroMQ reports the bound address ("tcp://0.0.0.0:41234"); peers need a reachable one.
    const auto bound = splitTcp(endpoint_);
    ARL_ENFORCE(bound, endpoint_);
    endpoint_ = "tcp://" + opt.tcpAdvertiseHost + ":" + bound->port;
  }
  return endpoint_;
}

void ZmqDataPlane::connect(const std::vector<std::string>& endpointsByRank,
                           const std::vector<int>& peers) {
  ARL_ENFORCE(impl_->ctx && !impl_->closed, "connect before bind on rank " << rank_);
  const std::string who = impl_->who();
  if (endpointsByRank.size() != static_cast<size_t>(nranks_)) {
    throw ConfigError(who + std::to_string(endpointsByRank.size()) + " endpoints for " +
                      std::to_string(nranks_) + " ranks");
  }
  for (int p : peers) {
    if (p < 0 || p >= nranks_ || p == rank_) {
      throw ConfigError(who + "cannot connect to peer rank " + std::to_string(p));
    }
    if (endpointsByRank[static_cast<size_t>(p)].empty()) {
      throw ConfigError(who + "no endpoint for peer rank " + std::to_string(p));
    }
  }
  impl_->endpoints = endpointsByRank;
  for (int p : peers) {
    impl_->pushTo(p);
  }
}

bool ZmqDataPlane::close() {
  if (!impl_ || impl_->closed) {
    return false;
  }
  SharedState& st = *impl_->shared;
  const bool graceful =
      impl_->ctx && !st.isAborted() && !st.failed.load() && std::uncaught_exceptions() == 0;
  bool clean = false;
  if (graceful) {
    try {
      clean = impl_->farewell();
    } catch (const std::exception&) {
      clean = false;  // a malformed message or a socket error: close without more ado
    }
  } else if (impl_->ctx && !st.isAborted()) {
    impl_->flushAcksFor(kAckGrace);
  }
  impl_->closed = true;
  // The last ACKs we sent may still be queued: give them a moment. Everything else was
  // either acknowledged or is not worth waiting for.
  const int linger =
      graceful ? static_cast<int>(std::min<int64_t>(impl_->opt.closeLinger.count(), 1000)) : 0;
  for (auto& s : impl_->push) {
    if (s.handle() == nullptr) {
      continue;
    }
    try {
      s.set(zmq::sockopt::linger, linger);
    } catch (const zmq::error_t&) {
      // The socket keeps LINGER 0 from its creation; teardown goes on.
    }
    s.close();
  }
  impl_->pull.close();
  impl_->zap.reset();  // its socket is the context's too
  // Termination drops what is left and releases every zero-copy payload (their completions
  // turn done) before it returns: afterwards ZeroMQ reads no caller memory.
  if (impl_->ctx) {
    impl_->ctx->close();
    impl_->ctx.reset();
  }
  if (!impl_->ipcFile.empty()) {
    ::unlink(impl_->ipcFile.c_str());
  }
  if (!impl_->ipcDir.empty()) {
    ::rmdir(impl_->ipcDir.c_str());
  }
  return clean;
}

void ZmqDataPlane::abort() { impl_->shared->abort(); }

size_t ZmqDataPlane::queued(int peer) const {
  ARL_ENFORCE(peer >= 0 && peer < nranks_, peer);
  return impl_->queues[static_cast<size_t>(peer)].size();
}

std::shared_ptr<SendCompletion> ZmqDataPlane::send(int peer, const ChunkHeader& h, const void* data,
                                                   size_t bytes) {
  ARL_ENFORCE(peer >= 0 && peer < nranks_ && peer != rank_, "rank " << rank_ << " peer " << peer);
  ARL_ENFORCE(impl_->ctx && !impl_->closed,
              "send on a data plane not bound or closed, rank " << rank_);
  SharedState& st = *impl_->shared;
  if (st.isAborted()) {
    throw st.fail(rank_, peer, h.step, "run aborted");
  }
  zmq::socket_t* sockp = nullptr;
  try {
    sockp = &impl_->pushTo(peer);
  } catch (const ConfigError& e) {
    throw st.fail(rank_, peer, h.step, e.what());
  }
  zmq::socket_t& sock = *sockp;

  // The transport owns the framing fields; the caller's header supplies the rest.
  ChunkHeader hdr = h;
  const bool notice = h.magic == ChunkHeader::kNoticeMagic;
  hdr.magic = notice ? ChunkHeader::kNoticeMagic : ChunkHeader::kMagic;
  hdr.src = rank_;
  hdr.length = bytes;
  zmq::message_t head(&hdr, sizeof hdr);
  zmq::message_t body;
  std::shared_ptr<SendCompletion> completion;
  const std::optional<uint64_t> pacedBytes = pacedBytesOf(hdr.magic, data, bytes);
  if (impl_->pacer && pacedBytes) {
    // Copied, and complete once the message has left this rank's port (transport/pacing.h).
    const Pacer::SendSlot slot =
        impl_->pacer->claimSend(peer, static_cast<size_t>(*pacedBytes), steadyNowNs());
    head = impl_->pacedHeader(hdr, slot.startNs);
    if (bytes > 0) body = zmq::message_t(data, bytes);
    std::shared_ptr<SharedState> shared = impl_->shared;
    completion = std::make_shared<PacedCompletion>(
        slot.leftNs, [shared] { return shared->isAborted(); }, rank_, peer, h.step);
  } else if (bytes >= impl_->opt.zeroCopyMinBytes && bytes > 0 && !notice) {
    auto zc = std::make_shared<ZeroCopyState>();
    auto* hint = new std::shared_ptr<ZeroCopyState>(zc);
    try {
      // ZeroMQ never writes through this pointer; the API is merely not const-correct.
      body = zmq::message_t(const_cast<void*>(data), bytes, &releaseZeroCopy, hint);
    } catch (...) {
      delete hint;  // init failed, so ZeroMQ will never call releaseZeroCopy
      throw;
    }
    completion = std::make_shared<ZeroCopyCompletion>(std::move(zc), impl_->shared, rank_, peer,
                                                      h.step, impl_->opt.sendTimeout);
  } else {
    if (bytes > 0) {
      body = zmq::message_t(data, bytes);
    }
    // ZeroMQ owns a copy: the caller's memory is free at once.
    completion = completedSend();
  }

  const auto deadline = deadlineAfter(impl_->opt.sendTimeout);
  auto sendFrame = [&](zmq::message_t& m, zmq::send_flags more) {
    for (;;) {
      if (st.isAborted()) {
        throw st.fail(rank_, peer, h.step, "run aborted");
      }
      try {
        if (sock.send(m, more | zmq::send_flags::dontwait)) {
          return;
        }
      } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) {
          throw st.fail(rank_, peer, h.step,
                        "send to rank " + std::to_string(peer) + " failed: " + e.what());
        }
        continue;
      }
      if (SteadyClock::now() >= deadline) {
        throw st.fail(rank_, peer, h.step,
                      "rank " + std::to_string(peer) + " accepted no data for step " +
                          std::to_string(h.step) + " within " +
                          formatDuration(impl_->opt.sendTimeout));
      }
      waitSocket(sock, ZMQ_POLLOUT, st, until(deadline));
    }
  };
  // ZeroMQ delivers multipart messages atomically and checks the high-water mark on the
  // first frame only, so once the header is queued the payload is accepted too.
  sendFrame(head, zmq::send_flags::sndmore);
  sendFrame(body, zmq::send_flags::none);
  impl_->sentTo[static_cast<size_t>(peer)] = 1;
  return completion;
}

std::unique_ptr<InMessage> ZmqDataPlane::recv(int peer, uint32_t step,
                                              std::chrono::milliseconds timeout) {
  if (!impl_->pacer) return take(peer, step, timeout);
  std::unique_ptr<InMessage> m = take(peer, step, timeout);
  const std::optional<uint64_t> paced = pacedBytesOf(m->header().magic, m->data(), m->size());
  if (!paced) return m;  // an unpaced notice
  Pacer& pacer = *impl_->pacer;
  const int64_t sent = pacer.fromWire(static_cast<const ZmqInMessage&>(*m).sentWireNs());
  const int64_t visible = pacer.claimReceive(peer, static_cast<size_t>(*paced), sent);
  SharedState& st = *impl_->shared;
  if (!paceUntil(visible, [&] { return st.isAborted(); })) {
    throw st.fail(rank_, peer, step, "run aborted");
  }
  return m;
}

bool ZmqDataPlane::ready(int peer, uint32_t step) { return !impl_->pacer && readAhead(peer, step); }

bool ZmqDataPlane::arrived(int peer) { return readAhead(peer, 0); }

// Moves what the socket holds into the peers' queues until `peer`'s has a message; whether it
// has one. Pacing is recv()'s: nothing here waits.
bool ZmqDataPlane::readAhead(int peer, uint32_t step) {
  ARL_ENFORCE(peer >= 0 && peer < nranks_, "rank " << rank_ << " peer " << peer);
  if (!impl_->ctx || impl_->closed || impl_->shared->isAborted()) return false;
  auto& mine = impl_->queues[static_cast<size_t>(peer)];
  std::unique_ptr<ZmqInMessage> m;
  while (mine.empty() && impl_->readOne(step, peer, m)) {
    if (!m) continue;  // a goodbye message
    const int src = m->header().src;
    impl_->queues[static_cast<size_t>(src)].push_back(std::move(m));
  }
  impl_->flushAcks();
  return !mine.empty();
}

std::unique_ptr<InMessage> ZmqDataPlane::take(int peer, uint32_t step,
                                              std::chrono::milliseconds timeout) {
  ARL_ENFORCE(peer >= 0 && peer < nranks_, "rank " << rank_ << " peer " << peer);
  ARL_ENFORCE(impl_->ctx && !impl_->closed,
              "recv on a data plane not bound or closed, rank " << rank_);
  SharedState& st = *impl_->shared;
  auto& mine = impl_->queues[static_cast<size_t>(peer)];
  if (st.isAborted()) {
    throw st.fail(rank_, peer, step, "run aborted");
  }
  if (!mine.empty()) {
    auto m = std::move(mine.front());
    mine.pop_front();
    return m;
  }

  const auto deadline = deadlineAfter(timeout);
  for (;;) {
    std::unique_ptr<ZmqInMessage> m;
    while (impl_->readOne(step, peer, m)) {
      if (!m) {
        continue;  // a goodbye message
      }
      const int src = m->header().src;
      if (src == peer) {
        impl_->flushAcks();
        return m;
      }
      impl_->queues[static_cast<size_t>(src)].push_back(std::move(m));
    }
    impl_->flushAcks();
    if (st.isAborted()) {
      throw st.fail(rank_, peer, step, "run aborted");
    }
    // A FIN follows a peer's last message, so with its queue empty nothing more will come.
    if (impl_->finSeen[static_cast<size_t>(peer)]) {
      impl_->flushAcksFor(kAckGrace);
      throw st.fail(rank_, peer, step,
                    "rank " + std::to_string(peer) +
                        " closed its data plane before sending data for step " +
                        std::to_string(step));
    }
    if (SteadyClock::now() >= deadline) {
      throw st.fail(rank_, peer, step,
                    "no data from rank " + std::to_string(peer) + " for step " +
                        std::to_string(step) + " within " + formatDuration(timeout));
    }
    waitSocket(impl_->pull, ZMQ_POLLIN, st,
               std::min(until(deadline), impl_->acksOwed ? kAckRetry : kAbortCheck));
  }
}

}  // namespace arl
