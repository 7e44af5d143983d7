#include "transport/tcp/tcp_transport.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <optional>
#include <utility>

#include "base/clock.h"
#include "base/endpoint.h"
#include "base/errors.h"
#include "transport/pacing.h"
#include "transport/plane_state.h"
#include "transport/tcp/tcp_handshake.h"

namespace arl {

namespace {

using std::chrono::milliseconds;

// The wire header: the ChunkHeader, then the send's start on the wire clock (0 unpaced).
constexpr size_t kHeaderBytes = sizeof(ChunkHeader) + sizeof(int64_t);
// Reads land here first, so that one recv() takes many small messages at once; a payload
// larger than what is staged is read straight into its message's memory.
constexpr size_t kStageBytes = size_t{256} << 10;
// How long a receive keeps reading a socket that has nothing before it sleeps in poll: a
// message of a ring's next step often arrives within it, and a sleep costs a wake-up.
constexpr int64_t kSpinNs = 20'000;
// Longest time a blocked call goes without looking at the abort flag (the pipe wakes it
// sooner); and the wait between dialling attempts a listener refused.
constexpr milliseconds kAbortCheck{50};
constexpr milliseconds kRedial{50};
// How long a receive that finds its peer's connection ended waits before it fails: a killed
// worker's connection ends at once, and the run's liveness, which can say why the peer went
// (killed by a signal, with its pid), should speak first; its abort ends the wait.
constexpr int64_t kEndGraceNs = 1'000'000'000;
// A payload larger than this is refused when BindOptions::maxMessageBytes sets no limit.
constexpr uint64_t kLengthSanity = uint64_t{1} << 40;
// Held sends (TcpDataPlane::holdSmallSends): a message of at most kHoldMessageBytes of
// payload, sent while messages already read wait in a queue, is copied into its peer's held
// bytes, which leave in one sendmsg with the first send made when the queues are empty, before
// the caller could wait, or once they reach kHoldFlushBytes or kHoldFlushMessages (a bound on
// how long a peer waits for a message this rank has made: about the time to make that many).
constexpr size_t kHoldMessageBytes = size_t{16} << 10;
constexpr size_t kHoldFlushBytes = size_t{64} << 10;
constexpr size_t kHoldFlushMessages = 64;

std::string errnoText(int e) { return std::strerror(e); }

int until(SteadyClock::time_point deadline) {
  const auto left = deadline - SteadyClock::now();
  if (left.count() <= 0) return 0;
  return static_cast<int>(
      std::min<int64_t>(std::chrono::ceil<milliseconds>(left).count(), kAbortCheck.count()));
}

class TcpInMessage final : public InMessage {
 public:
  TcpInMessage(const ChunkHeader& h, int64_t sentWireNs)
      : h_(h),
        data_(std::make_unique_for_overwrite<char[]>(static_cast<size_t>(h.length))),
        sentWireNs_(sentWireNs) {}
  const ChunkHeader& header() const override { return h_; }
  const void* data() const override { return data_.get(); }
  size_t size() const override { return static_cast<size_t>(h_.length); }
  char* writable() { return data_.get(); }
  int64_t sentWireNs() const { return sentWireNs_; }

 private:
  ChunkHeader h_;
  std::unique_ptr<char[]> data_;
  int64_t sentWireNs_;
};

// One partner's connection and what has been read from it.
struct Conn {
  int fd = -1;
  std::unique_ptr<char[]> stage;
  size_t head = 0;  // unread staged bytes are stage[head, tail)
  size_t tail = 0;
  std::unique_ptr<TcpInMessage> partial;  // a payload being read straight into its memory
  size_t partialGot = 0;
  std::deque<std::unique_ptr<TcpInMessage>> queue;
  bool ended = false;  // no more bytes will come: endReason says why
  std::string endReason;
  int64_t endedAtNs = 0;
  std::vector<char> held;  // whole messages sent and not yet written (holdSmallSends)
  size_t heldMessages = 0;
};

void setSocketOptions(int fd, int bufferBytes) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (bufferBytes > 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufferBytes, sizeof bufferBytes);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufferBytes, sizeof bufferBytes);
  }
}

// The first address of HOST:PORT (numeric or a name). Throws ConfigError.
sockaddr_storage resolve(const std::string& host, const std::string& port, socklen_t& len,
                         bool passive) {
  std::string h = host;
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h == "*") h = "0.0.0.0";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(h.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    throw ConfigError("cannot resolve " + host + ":" + port + ": " + ::gai_strerror(rc));
  }
  sockaddr_storage out{};
  std::memcpy(&out, res->ai_addr, res->ai_addrlen);
  len = res->ai_addrlen;
  ::freeaddrinfo(res);
  return out;
}

int portOf(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
}

// One connection's handshake in progress (transport/tcp/tcp_handshake.h).
struct Handshake {
  int fd = -1;
  bool dialer = false;
  bool connecting = false;  // a dialer's connect() not yet complete
  int peer = -1;            // the dialed rank; for an acceptor, known from the hello
  std::string out;          // to write, from outSent
  size_t outSent = 0;
  std::string in;  // read so far, towards `want` bytes
  size_t want = 0;
  TcpHello hello;
  TcpNonce acceptorNonce{};
  bool done = false;
  bool retry = false;     // the dial failed before any handshake byte: dial again
  std::string lastError;  // of the last failed dial
};

// The handshakes of connect(); whatever is still open when it returns or throws is closed.
struct PendingHandshakes {
  std::vector<Handshake> v;
  PendingHandshakes() = default;
  PendingHandshakes(const PendingHandshakes&) = delete;
  PendingHandshakes& operator=(const PendingHandshakes&) = delete;
  ~PendingHandshakes() {
    for (Handshake& hs : v) {
      if (hs.fd >= 0) ::close(hs.fd);
    }
  }
};

}  // namespace

std::vector<int> partnersOf(const DataPlanePeers& p) {
  std::vector<int> out = p.sendTo;
  out.insert(out.end(), p.recvFrom.begin(), p.recvFrom.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

struct TcpDataPlane::Impl {
  int rank = 0;
  int nranks = 0;
  BindOptions opt;
  TcpKeys keys;
  int listenFd = -1;
  std::vector<Conn> conns;  // by rank; fd -1 for a rank that is no partner
  std::unique_ptr<Pacer> pacer;
  std::shared_ptr<PlaneState> state = std::make_shared<PlaneState>();
  size_t refused = 0;
  bool bound = false;
  bool closed = false;
  bool hold = false;        // holdSmallSends
  bool follows = false;     // sendFollows: the next send() may be held
  bool heedFollows = true;  // heedSendFollows
  size_t holding = 0;       // peers with held bytes
  size_t writes = 0;        // sendmsg calls that wrote data

  Impl(int r, int n) : rank(r), nranks(n), conns(static_cast<size_t>(n)) {}

  std::string who() const { return "rank " + std::to_string(rank) + ": tcp data plane: "; }
  PeerError fail(int peer, int64_t step, const std::string& reason) {
    return state->fail(rank, peer, step, reason);
  }
  PeerError malformed(int peer, uint32_t step, const std::string& what) {
    return fail(peer, step, "malformed message from rank " + std::to_string(peer) + ": " + what);
  }
  void checkAbort(int peer, int64_t step) {
    if (state->isAborted()) throw fail(peer, step, "run aborted");
  }

  // -- receiving --------------------------------------------------------------------------

  // Checks a header read from `peer` and starts its message.
  std::unique_ptr<TcpInMessage> startMessage(int peer, uint32_t step, const char* at) {
    ChunkHeader h;
    int64_t wire = 0;
    std::memcpy(&h, at, sizeof h);
    std::memcpy(&wire, at + sizeof h, sizeof wire);
    if (h.magic != ChunkHeader::kMagic && h.magic != ChunkHeader::kNoticeMagic) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "bad magic 0x%08X, expected 0x%08X", h.magic,
                    ChunkHeader::kMagic);
      throw malformed(peer, step, buf);
    }
    if (h.src != peer) {
      throw malformed(peer, step, "header names rank " + std::to_string(h.src) + " as sender");
    }
    const uint64_t cap =
        opt.maxMessageBytes >= 0 ? static_cast<uint64_t>(opt.maxMessageBytes) : kLengthSanity;
    if (h.length > cap) {
      throw malformed(peer, step,
                      std::to_string(h.length) + " payload bytes, more than the " +
                          std::to_string(cap) + " allowed");
    }
    if (pacer && h.magic == ChunkHeader::kMagic && wire == 0) {
      throw malformed(peer, step, "a data message without its send time in a shaped run");
    }
    return std::make_unique<TcpInMessage>(h, wire);
  }

  // Turns the staged bytes into messages; a payload that is not all staged becomes `partial`.
  void parseStaged(Conn& c, int peer, uint32_t step) {
    while (c.tail - c.head >= kHeaderBytes) {
      auto m = startMessage(peer, step, c.stage.get() + c.head);
      c.head += kHeaderBytes;
      const size_t len = m->size();
      const size_t have = std::min(len, c.tail - c.head);
      if (have > 0) std::memcpy(m->writable(), c.stage.get() + c.head, have);
      c.head += have;
      if (have < len) {
        c.partial = std::move(m);
        c.partialGot = have;
        c.head = c.tail = 0;  // the stage held nothing but this payload's start
        return;
      }
      c.queue.push_back(std::move(m));
    }
    if (c.head == c.tail) {
      c.head = c.tail = 0;
    } else if (c.head > 0) {
      std::memmove(c.stage.get(), c.stage.get() + c.head, c.tail - c.head);
      c.tail -= c.head;
      c.head = 0;
    }
  }

  // One recv() on `c`: into the partial payload or the stage. False when nothing was there.
  bool readOnce(Conn& c, int peer, uint32_t step) {
    char* into = c.partial ? c.partial->writable() + c.partialGot : c.stage.get() + c.tail;
    const size_t room = c.partial ? c.partial->size() - c.partialGot : kStageBytes - c.tail;
    const ssize_t n = ::recv(c.fd, into, room, MSG_DONTWAIT);
    if (n > 0) {
      if (c.partial) {
        c.partialGot += static_cast<size_t>(n);
        if (c.partialGot == c.partial->size()) c.queue.push_back(std::move(c.partial));
      } else {
        c.tail += static_cast<size_t>(n);
        parseStaged(c, peer, step);
      }
      return true;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
    c.ended = true;
    c.endedAtNs = steadyNowNs();
    const bool midMessage = c.partial || c.tail > c.head;
    c.endReason =
        n == 0 ? "rank " + std::to_string(peer) + " closed its connection" +
                     (midMessage ? " in the middle of a message" : "")
               : "the connection to rank " + std::to_string(peer) + " failed: " + errnoText(errno);
    return false;
  }

  // Reads what `peer`'s socket holds, until it is empty or (stopAtMessage) a message is
  // queued.
  void pump(int peer, uint32_t step, bool stopAtMessage) {
    Conn& c = conns[static_cast<size_t>(peer)];
    if (c.fd < 0 || c.ended) return;
    while (readOnce(c, peer, step)) {
      if (stopAtMessage && !c.queue.empty()) return;
    }
  }

  // Sleeps in poll until `wantFd` has `events`, any partner's socket has data (read into its
  // queue) or abort, at most `ms`.
  void waitSockets(int wantFd, short events, int ms, uint32_t step) {
    std::vector<pollfd> fds;
    std::vector<int> peers;
    fds.push_back({state->fds[0], POLLIN, 0});
    peers.push_back(-1);
    for (int p = 0; p < nranks; ++p) {
      const Conn& c = conns[static_cast<size_t>(p)];
      if (c.fd < 0 || c.ended) continue;
      fds.push_back({c.fd, static_cast<short>(POLLIN | (c.fd == wantFd ? events : 0)), 0});
      peers.push_back(p);
    }
    if (::poll(fds.data(), fds.size(), ms) <= 0) return;
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) pump(peers[i], step, false);
    }
  }

  // Whether `peer` has a message queued, after reading what its socket holds. Never waits.
  bool readAhead(int peer, uint32_t step) {
    ARL_ENFORCE(peer >= 0 && peer < nranks, "rank " << rank << " peer " << peer);
    if (!bound || closed || state->isAborted()) return false;
    pump(peer, step, true);
    return !conns[static_cast<size_t>(peer)].queue.empty();
  }

  // Waits up to `ns` for an abort (and throws "run aborted" then): see kEndGraceNs.
  void awaitAbortFor(int64_t ns, int peer, int64_t step) {
    pollfd p{state->fds[0], POLLIN, 0};
    for (const int64_t end = steadyNowNs() + ns; steadyNowNs() < end;) {
      checkAbort(peer, step);
      ::poll(&p, 1, static_cast<int>(kAbortCheck.count()));
    }
    checkAbort(peer, step);
  }

  std::unique_ptr<TcpInMessage> pop(Conn& c) {
    auto m = std::move(c.queue.front());
    c.queue.pop_front();
    return m;
  }

  std::unique_ptr<TcpInMessage> take(int peer, uint32_t step, milliseconds timeout) {
    Conn& c = conns[static_cast<size_t>(peer)];
    checkAbort(peer, step);
    if (!c.queue.empty()) return pop(c);
    if (c.fd < 0) {
      throw fail(peer, step, "no data-plane connection with rank " + std::to_string(peer));
    }
    const auto deadline = deadlineAfter(timeout);
    const int64_t spinEnd = steadyNowNs() + kSpinNs;
    for (;;) {
      pump(peer, step, true);
      if (!c.queue.empty()) return pop(c);
      if (holding > 0) {
        flushAll(step);  // nothing to read: what is held goes before this rank waits
        continue;
      }
      if (c.ended &&
          (steadyNowNs() - c.endedAtNs >= kEndGraceNs || SteadyClock::now() >= deadline)) {
        throw fail(peer, step,
                   c.endReason + " before sending data for step " + std::to_string(step));
      }
      checkAbort(peer, step);
      if (steadyNowNs() < spinEnd) continue;
      if (SteadyClock::now() >= deadline) {
        throw fail(peer, step,
                   "no data from rank " + std::to_string(peer) + " for step " +
                       std::to_string(step) + " within " + formatDuration(timeout));
      }
      waitSockets(-1, 0, until(deadline), step);
    }
  }

  // -- sending ----------------------------------------------------------------------------

  // Writes what is held for `peer`, with `more` (a message's header and payload) after it.
  void flushPeer(int peer, uint32_t step, iovec* more = nullptr, int moreCount = 0) {
    Conn& c = conns[static_cast<size_t>(peer)];
    iovec iov[3];
    int n = 0;
    if (!c.held.empty()) iov[n++] = {c.held.data(), c.held.size()};
    for (int i = 0; i < moreCount; ++i) iov[n++] = more[i];
    if (n > 0) writeAll(peer, step, iov, n);
    if (!c.held.empty()) {
      c.held.clear();
      c.heldMessages = 0;
      --holding;
    }
  }

  // Whether messages already read wait in a queue: the caller is handling a batch that has
  // arrived, and its sends may wait for the batch's end.
  bool anyQueued() const {
    return std::any_of(conns.begin(), conns.end(), [](const Conn& c) { return !c.queue.empty(); });
  }

  // Writes what is held for every peer.
  void flushAll(uint32_t step) {
    for (int p = 0; p < nranks && holding > 0; ++p) {
      if (!conns[static_cast<size_t>(p)].held.empty()) flushPeer(p, step);
    }
  }

  // Holds a message of header `head` and `bytes` at `data` for `peer`; writes the peer's held
  // bytes once they reach the flush bounds.
  void holdMessage(int peer, uint32_t step, const char* head, const void* data, size_t bytes) {
    Conn& c = conns[static_cast<size_t>(peer)];
    if (c.held.empty()) ++holding;
    c.held.insert(c.held.end(), head, head + kHeaderBytes);
    const auto* d = static_cast<const char*>(data);
    c.held.insert(c.held.end(), d, d + bytes);
    ++c.heldMessages;
    if (c.held.size() >= kHoldFlushBytes || c.heldMessages >= kHoldFlushMessages) {
      flushPeer(peer, step);
    }
  }

  // Writes the whole of `iov` to `peer`, reading the partners' data while the socket is full.
  void writeAll(int peer, uint32_t step, iovec* iov, int count) {
    Conn& c = conns[static_cast<size_t>(peer)];
    const auto deadline = deadlineAfter(opt.sendTimeout);
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    while (msg.msg_iovlen > 0) {
      checkAbort(peer, step);
      const ssize_t n = ::sendmsg(c.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        const std::string why = errnoText(errno);
        awaitAbortFor(kEndGraceNs, peer, step);
        throw fail(peer, step,
                   "the connection to rank " + std::to_string(peer) + " failed: " + why);
      }
      if (n > 0) ++writes;
      for (size_t left = n > 0 ? static_cast<size_t>(n) : 0; left > 0;) {
        const size_t use = std::min(left, msg.msg_iov->iov_len);
        msg.msg_iov->iov_base = static_cast<char*>(msg.msg_iov->iov_base) + use;
        msg.msg_iov->iov_len -= use;
        left -= use;
        if (msg.msg_iov->iov_len == 0) ++msg.msg_iov, --msg.msg_iovlen;
      }
      while (msg.msg_iovlen > 0 && msg.msg_iov->iov_len == 0) ++msg.msg_iov, --msg.msg_iovlen;
      if (msg.msg_iovlen == 0 || n > 0) continue;
      if (SteadyClock::now() >= deadline) {
        throw fail(peer, step,
                   "rank " + std::to_string(peer) + " accepted no data for step " +
                       std::to_string(step) + " within " + formatDuration(opt.sendTimeout));
      }
      waitSockets(c.fd, POLLOUT, until(deadline), step);
    }
  }

  // -- connecting -------------------------------------------------------------------------

  void dial(Handshake& hs, const std::string& endpoint) {
    const auto ep = splitTcp(endpoint);
    if (!ep)
      throw ConfigError(who() + "rank " + std::to_string(hs.peer) + "'s endpoint '" + endpoint +
                        "' is not tcp://HOST:PORT");
    socklen_t len = 0;
    const sockaddr_storage addr = resolve(ep->host, ep->port, len, false);
    hs.fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (hs.fd < 0) throw ConfigError(who() + "socket: " + errnoText(errno));
    setSocketOptions(hs.fd, opt.tcpBufferBytes);
    const int rc = ::connect(hs.fd, reinterpret_cast<const sockaddr*>(&addr), len);
    if (rc != 0 && errno != EINPROGRESS) {
      hs.lastError = "connect: " + errnoText(errno);
      ::close(hs.fd);
      hs.fd = -1;  // dialled again after kRedial
      return;
    }
    hs.connecting = true;
    hs.hello = TcpHello{rank, hs.peer, randomNonce()};
    hs.out = tcpHello(rank, hs.peer, hs.hello.nonce);
    hs.want = kTcpReplyBytes;
  }

  // The acceptor has a hello: answer it, or refuse (nullopt = answered).
  std::optional<std::string> answerHello(Handshake& hs, const std::vector<int>& partners) {
    if (auto bad = readTcpHello(hs.in, nranks, hs.hello)) return bad;
    const int from = hs.hello.from;
    if (hs.hello.to != rank) return "hello for rank " + std::to_string(hs.hello.to);
    if (from >= rank || !std::binary_search(partners.begin(), partners.end(), from)) {
      return "rank " + std::to_string(from) + " is not a rank that dials this one";
    }
    if (conns[static_cast<size_t>(from)].fd >= 0) {
      return "rank " + std::to_string(from) + " is connected already";
    }
    hs.peer = from;
    hs.acceptorNonce = randomNonce();
    hs.out = tcpReply(keys, hs.hello, hs.acceptorNonce);
    hs.outSent = 0;
    hs.in.clear();
    hs.want = kTcpProofBytes;
    return std::nullopt;
  }

  // A handshake message is complete: the next step, or the reason to refuse.
  std::optional<std::string> advance(Handshake& hs, const std::vector<int>& partners) {
    if (!hs.dialer && hs.peer < 0) return answerHello(hs, partners);
    if (!hs.dialer) {
      if (auto bad = checkTcpProof(keys, hs.hello, hs.acceptorNonce, hs.in)) return bad;
      hs.done = true;
      return std::nullopt;
    }
    if (auto bad = checkTcpReply(keys, hs.hello, hs.in, hs.acceptorNonce)) return bad;
    hs.out = tcpProof(keys, hs.hello, hs.acceptorNonce);
    hs.outSent = 0;
    hs.want = 0;
    return std::nullopt;
  }

  // Moves a handshake on as far as its socket allows; the reason when it fails.
  std::optional<std::string> handshakeStep(Handshake& hs, const std::vector<int>& partners) {
    if (hs.connecting) {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(hs.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err == EINPROGRESS || err == EALREADY) return std::nullopt;
      if (err != 0) {
        hs.retry = true;  // the listener may not be up yet: dial again
        return "connect: " + errnoText(err);
      }
      pollfd p{hs.fd, POLLOUT, 0};
      if (::poll(&p, 1, 0) <= 0) return std::nullopt;
      hs.connecting = false;
    }
    while (hs.outSent < hs.out.size()) {
      const ssize_t n = ::send(hs.fd, hs.out.data() + hs.outSent, hs.out.size() - hs.outSent,
                               MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) return std::nullopt;
        return "send: " + errnoText(errno);
      }
      hs.outSent += static_cast<size_t>(n);
    }
    if (hs.dialer && hs.want == 0) {
      hs.done = true;  // the proof is out
      return std::nullopt;
    }
    while (hs.in.size() < hs.want) {
      char buf[kTcpReplyBytes];
      const ssize_t n = ::recv(hs.fd, buf, hs.want - hs.in.size(), MSG_DONTWAIT);
      if (n == 0) return std::string("the connection closed during the handshake");
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) return std::nullopt;
        return "recv: " + errnoText(errno);
      }
      hs.in.append(buf, static_cast<size_t>(n));
    }
    if (auto bad = advance(hs, partners)) return bad;
    return hs.done ? std::nullopt : handshakeStep(hs, partners);
  }

  void adopt(Handshake& hs) {
    Conn& c = conns[static_cast<size_t>(hs.peer)];
    c.fd = hs.fd;
    c.stage = std::make_unique_for_overwrite<char[]>(kStageBytes);
    hs.fd = -1;
  }

  void acceptPending(std::vector<Handshake>& pending) {
    for (;;) {
      const int fd = ::accept4(listenFd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      setSocketOptions(fd, opt.tcpBufferBytes);
      Handshake hs;
      hs.fd = fd;
      hs.want = kTcpHelloBytes;
      pending.push_back(std::move(hs));
    }
  }

  void pollHandshakes(const std::vector<Handshake>& pending, int ms) {
    std::vector<pollfd> fds{{state->fds[0], POLLIN, 0}, {listenFd, POLLIN, 0}};
    for (const Handshake& hs : pending) {
      if (hs.fd < 0) continue;
      const bool writing = hs.connecting || hs.outSent < hs.out.size();
      fds.push_back({hs.fd, static_cast<short>(writing ? POLLOUT : POLLIN), 0});
    }
    ::poll(fds.data(), fds.size(), ms);
  }

  void connectAll(const std::vector<std::string>& endpoints, const std::vector<int>& partners,
                  milliseconds timeout);
  bool closeAll(bool graceful);
};

void TcpDataPlane::Impl::connectAll(const std::vector<std::string>& endpoints,
                                    const std::vector<int>& partners, milliseconds timeout) {
  PendingHandshakes open;
  std::vector<Handshake>& pending = open.v;
  for (int p : partners) {
    if (p < rank) continue;
    Handshake hs;
    hs.dialer = true;
    hs.peer = p;
    pending.push_back(std::move(hs));
  }
  const auto deadline = deadlineAfter(timeout);
  std::string lastError;
  auto connectedAll = [&] {
    return std::all_of(partners.begin(), partners.end(),
                       [&](int p) { return conns[static_cast<size_t>(p)].fd >= 0; });
  };
  while (!connectedAll()) {
    checkAbort(-1, -1);
    acceptPending(pending);
    for (Handshake& hs : pending) {
      if (hs.dialer && hs.fd < 0) dial(hs, endpoints[static_cast<size_t>(hs.peer)]);
      if (hs.fd < 0) continue;
      const std::optional<std::string> bad = handshakeStep(hs, partners);
      if (bad && hs.retry) {
        ::close(hs.fd);
        hs = Handshake{.dialer = true, .peer = hs.peer, .lastError = *bad};
        continue;
      }
      if (bad && hs.dialer) {
        throw fail(hs.peer, -1,
                   "cannot connect to rank " + std::to_string(hs.peer) + " at " +
                       endpoints[static_cast<size_t>(hs.peer)] + ": " + *bad);
      }
      if (bad) {
        ++refused;
        ::close(hs.fd);
        hs.fd = -1;
      } else if (hs.done) {
        adopt(hs);
      }
    }
    std::erase_if(pending, [](const Handshake& hs) { return hs.fd < 0 && !hs.dialer; });
    std::erase_if(pending, [&](const Handshake& hs) {
      return hs.dialer && conns[static_cast<size_t>(hs.peer)].fd >= 0;
    });
    if (connectedAll()) break;
    if (SteadyClock::now() >= deadline) {
      const int missing = *std::find_if(partners.begin(), partners.end(), [&](int p) {
        return conns[static_cast<size_t>(p)].fd < 0;
      });
      std::string why;
      for (const Handshake& hs : pending) {
        if (hs.peer == missing && !hs.lastError.empty()) why = " (" + hs.lastError + ")";
      }
      throw fail(missing, -1,
                 "no data-plane connection with rank " + std::to_string(missing) + " within " +
                     formatDuration(timeout) + why);
    }
    pollHandshakes(pending, std::min(until(deadline), static_cast<int>(kRedial.count())));
  }
  refused += static_cast<size_t>(std::count_if(pending.begin(), pending.end(),
                                               [](const Handshake& hs) { return hs.fd >= 0; }));
  ::close(listenFd);  // every partner is in: nobody else may connect
  listenFd = -1;
}

bool TcpDataPlane::Impl::closeAll(bool graceful) {
  bool clean = false;
  if (graceful) {
    for (Conn& c : conns) {
      if (c.fd >= 0 && !c.ended) ::shutdown(c.fd, SHUT_WR);
    }
    const auto deadline = SteadyClock::now() + opt.closeLinger;
    std::vector<char> scratch(kStageBytes);
    for (;;) {
      std::vector<pollfd> fds;
      for (Conn& c : conns) {
        if (c.fd < 0 || c.ended) continue;
        ssize_t n = 0;
        while ((n = ::recv(c.fd, scratch.data(), scratch.size(), MSG_DONTWAIT)) > 0) {
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
          c.ended = true;  // the partner closed its side too (or the connection broke)
        } else {
          fds.push_back({c.fd, POLLIN, 0});
        }
      }
      clean = fds.empty();
      if (clean || state->isAborted() || SteadyClock::now() >= deadline) break;
      fds.push_back({state->fds[0], POLLIN, 0});
      ::poll(fds.data(), fds.size(), until(deadline));
    }
  }
  for (Conn& c : conns) {
    if (c.fd >= 0) ::close(c.fd);
    c.fd = -1;
    c.queue.clear();
  }
  if (listenFd >= 0) ::close(listenFd);
  listenFd = -1;
  return clean;
}

TcpDataPlane::TcpDataPlane(int rank, int nranks) : rank_(rank), nranks_(nranks) {
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    throw ConfigError("tcp data plane: rank " + std::to_string(rank) + " not in [0, " +
                      std::to_string(nranks) + ")");
  }
  impl_ = std::make_unique<Impl>(rank, nranks);
}

TcpDataPlane::~TcpDataPlane() { close(); }

std::string TcpDataPlane::bind(const BindOptions& opt) {
  ARL_ENFORCE(!impl_->bound && !impl_->closed,
              "tcp data plane of rank " << rank_ << " bound twice");
  const std::string who = impl_->who();
  if (opt.kind != BindOptions::Kind::Tcp) throw ConfigError(who + "binds tcp only");
  if (opt.tcpHost.empty()) throw ConfigError(who + "tcp host is empty");
  if (opt.tcpAdvertiseHost.empty() && isWildcardHost(opt.tcpHost)) {
    throw ConfigError(who + "tcp host '" + opt.tcpHost +
                      "' is a wildcard; set an address peers can reach (tcpAdvertiseHost)");
  }
  if (opt.tcpBufferBytes < 0 || opt.sendTimeout.count() < 0 || opt.closeLinger.count() < 0) {
    throw ConfigError(who + "tcpBufferBytes, sendTimeout and closeLinger must be >= 0");
  }
  if (opt.curvePeerKeys.size() != 0 && opt.curvePeerKeys.size() != static_cast<size_t>(nranks_)) {
    throw ConfigError(who + std::to_string(opt.curvePeerKeys.size()) + " keys for " +
                      std::to_string(nranks_) + " ranks");
  }
  checkShaping(opt.shaping, nranks_);
  impl_->keys = tcpKeysFromZ85(opt.curveSecretKey, opt.curvePeerKeys);
  impl_->opt = opt;
  impl_->pacer = Pacer::make(opt.shaping, rank_, nranks_, opt.clockOffsetNs);
  socklen_t len = 0;
  const sockaddr_storage addr = resolve(opt.tcpHost, "0", len, true);
  const int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) throw ConfigError(who + "socket: " + errnoText(errno));
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), len) != 0 || ::listen(fd, 128) != 0) {
    const int e = errno;
    ::close(fd);
    throw ConfigError(who + "cannot listen on " + opt.tcpHost + ": " + errnoText(e));
  }
  impl_->listenFd = fd;
  impl_->bound = true;
  const std::string host = opt.tcpAdvertiseHost.empty() ? opt.tcpHost : opt.tcpAdvertiseHost;
  endpoint_ = "tcp://" + host + ":" + std::to_string(portOf(fd));
  return endpoint_;
}

void TcpDataPlane::connect(const std::vector<std::string>& endpointsByRank,
                           const std::vector<int>& partners, std::chrono::milliseconds timeout) {
  ARL_ENFORCE(impl_->bound && !impl_->closed, "connect before bind on rank " << rank_);
  const std::string who = impl_->who();
  if (endpointsByRank.size() != static_cast<size_t>(nranks_)) {
    throw ConfigError(who + std::to_string(endpointsByRank.size()) + " endpoints for " +
                      std::to_string(nranks_) + " ranks");
  }
  std::vector<int> sorted = partners;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  for (int p : sorted) {
    if (p < 0 || p >= nranks_ || p == rank_) {
      throw ConfigError(who + "cannot connect to peer rank " + std::to_string(p));
    }
    if (p > rank_ && endpointsByRank[static_cast<size_t>(p)].empty()) {
      throw ConfigError(who + "no endpoint for peer rank " + std::to_string(p));
    }
  }
  impl_->connectAll(endpointsByRank, sorted, timeout);
}

size_t TcpDataPlane::refused() const { return impl_->refused; }

bool TcpDataPlane::close() {
  if (!impl_ || impl_->closed) return false;
  PlaneState& st = *impl_->state;
  const bool graceful =
      impl_->bound && !st.isAborted() && !st.failed.load() && std::uncaught_exceptions() == 0;
  try {
    if (graceful) flush(0);  // what is held goes before the goodbye
  } catch (const std::exception&) {
    impl_->closed = true;
    impl_->closeAll(false);
    return false;
  }
  impl_->closed = true;
  try {
    return impl_->closeAll(graceful);
  } catch (const std::exception&) {
    impl_->closeAll(false);
    return false;
  }
}

void TcpDataPlane::abort() { impl_->state->abort(); }

size_t TcpDataPlane::writes() const { return impl_->writes; }

size_t TcpDataPlane::queued(int peer) const {
  ARL_ENFORCE(peer >= 0 && peer < nranks_, peer);
  return impl_->conns[static_cast<size_t>(peer)].queue.size();
}

std::shared_ptr<SendCompletion> TcpDataPlane::send(int peer, const ChunkHeader& h, const void* data,
                                                   size_t bytes) {
  ARL_ENFORCE(peer >= 0 && peer < nranks_ && peer != rank_, "rank " << rank_ << " peer " << peer);
  ARL_ENFORCE(impl_->bound && !impl_->closed,
              "send on a data plane not bound or closed, rank " << rank_);
  impl_->checkAbort(peer, h.step);
  if (impl_->conns[static_cast<size_t>(peer)].fd < 0) {
    throw impl_->fail(peer, h.step, "no data-plane connection with rank " + std::to_string(peer));
  }
  char head[kHeaderBytes] = {};
  ChunkHeader hdr = h;
  const bool notice = h.magic == ChunkHeader::kNoticeMagic;
  hdr.magic = notice ? ChunkHeader::kNoticeMagic : ChunkHeader::kMagic;
  hdr.src = rank_;
  hdr.length = bytes;
  std::shared_ptr<SendCompletion> completion = completedSend();
  const std::optional<uint64_t> pacedBytes = pacedBytesOf(hdr.magic, data, bytes);
  if (impl_->pacer && pacedBytes) {
    const Pacer::SendSlot slot =
        impl_->pacer->claimSend(peer, static_cast<size_t>(*pacedBytes), steadyNowNs());
    const int64_t wire = impl_->pacer->toWire(slot.startNs);
    std::memcpy(head + sizeof hdr, &wire, sizeof wire);
    std::shared_ptr<PlaneState> st = impl_->state;
    completion = std::make_shared<PacedCompletion>(
        slot.leftNs, [st] { return st->isAborted(); }, rank_, peer, h.step);
  }
  std::memcpy(head, &hdr, sizeof hdr);
  const bool follows = std::exchange(impl_->follows, false);
  if (impl_->hold && !impl_->pacer && bytes <= kHoldMessageBytes &&
      (follows || impl_->anyQueued())) {
    impl_->holdMessage(peer, h.step, head, data, bytes);
    return completion;  // copied: the caller's memory is free
  }
  // After what is held for this peer, in the same sendmsg: a channel stays in order.
  iovec iov[2] = {{head, kHeaderBytes}, {const_cast<void*>(data), bytes}};
  impl_->flushPeer(peer, h.step, iov, bytes > 0 ? 2 : 1);
  return completion;
}

std::unique_ptr<InMessage> TcpDataPlane::recv(int peer, uint32_t step,
                                              std::chrono::milliseconds timeout) {
  ARL_ENFORCE(peer >= 0 && peer < nranks_ && peer != rank_, "rank " << rank_ << " peer " << peer);
  ARL_ENFORCE(impl_->bound && !impl_->closed,
              "recv on a data plane not bound or closed, rank " << rank_);
  std::unique_ptr<TcpInMessage> m = impl_->take(peer, step, timeout);
  if (!impl_->pacer) return m;
  const std::optional<uint64_t> paced = pacedBytesOf(m->header().magic, m->data(), m->size());
  if (!paced) return m;  // an unpaced notice
  Pacer& pacer = *impl_->pacer;
  const int64_t visible =
      pacer.claimReceive(peer, static_cast<size_t>(*paced), pacer.fromWire(m->sentWireNs()));
  PlaneState& st = *impl_->state;
  if (!paceUntil(visible, [&] { return st.isAborted(); })) {
    throw impl_->fail(peer, step, "run aborted");
  }
  return m;
}

void TcpDataPlane::sendFollows(int /*peer*/, int /*nextPeer*/) {
  impl_->follows = impl_->heedFollows;
}

void TcpDataPlane::heedSendFollows(bool on) { impl_->heedFollows = on; }

bool TcpDataPlane::ready(int peer, uint32_t step) {
  const bool yes = !impl_->pacer && impl_->readAhead(peer, step);
  if (!yes) flush(step);  // the caller may wait next
  return yes;
}

bool TcpDataPlane::arrived(int peer) {
  const bool yes = impl_->readAhead(peer, 0);
  if (!yes) flush(0);
  return yes;
}

void TcpDataPlane::holdSmallSends(bool on) {
  if (!on) flush(0);
  impl_->hold = on;
}

void TcpDataPlane::flush(uint32_t step) {
  // An aborted run sends nothing more: its receives fail anyway.
  if (impl_->holding == 0 || !impl_->bound || impl_->closed || impl_->state->isAborted()) return;
  impl_->flushAll(step);
}

void TcpDataPlane::reclaimAll(uint32_t step) { flush(step); }

}  // namespace arl
