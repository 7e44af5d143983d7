// TCP data plane: chunk payloads between worker processes over plain TCP, with no I/O thread
// (docs/dataplane.md, "The TCP plane"). The ZeroMQ plane hands every message to ZeroMQ's I/O
// threads and back (two thread hops and their wake-ups per message); here the rank's own
// thread writes and reads its sockets.
//
// One connection per pair of ranks that exchange data, both ways; the lower rank dials the
// higher one's listening socket. Creation is two-phase, as the ZeroMQ plane's:
//
//   TcpDataPlane dp(rank, nranks);
//   std::string mine = dp.bind(opts);                     // "tcp://HOST:PORT", to the coordinator
//   dp.connect(allEndpoints, partnersOf(dataPlanePeers(schedule, rank)));
//
// connect() dials, accepts and runs the handshake (transport/tcp/tcp_handshake.h: with keys,
// each end proves it holds its rank's key) with every partner, then closes the listening
// socket: a connection from a process that is not a member of the run is refused, and none
// is accepted once the run's are up.
//
// Framing: each message is a 64-byte header (the ChunkHeader, then the send's start on the
// wire clock when paced, else 0) and the payload, written with one sendmsg (TCP_NODELAY).
// send() returns once the kernel holds every byte (the completion is done at once, or on a
// shaped plane when the message has left the paced port); while the socket is full it reads
// what its peers send into their queues, so two ranks sending to each other never wedge.
// recv() reads the peer's socket in the caller's thread, spinning briefly before it sleeps
// in poll.
//
// Held sends (holdSmallSends, on in every run's worker): an unshaped message of at most
// 16 KiB, sent while messages already read wait in a queue or after sendFollows() said that
// another send follows it, is copied and held, and every
// peer's held messages leave together, in one sendmsg a peer, before this rank could wait: when
// recv() finds nothing to read, when ready() or arrived() says false, in flush() and reclaimAll()
// (the executor's end of a run), and before close()'s goodbye; also once a peer's held bytes reach
// 64 KiB or 64 messages. A message not held goes after what is held for its peer, in the same
// sendmsg. So a rank that handles the messages that have arrived, as a pipelined executor does,
// sends their results in one write and its peer takes them in one read: 16-byte slices cost a copy
// each instead of a system call and a wake-up each (docs/hosts.md). A caller that sends and then
// waits on something other than this plane must call flush() first. ready() and arrived()
// that write held messages wait, as send() does, while a socket is full.
//
// Closing: close() shuts down its sending side (a TCP FIN after the data) and reads until
// every partner has done the same, at most closeLinger, so no unread byte makes the kernel
// reset a connection whose data a peer still reads. A connection that ends where data was
// expected fails the receive naming the peer ("rank 3 closed its connection ..."), which is
// how a vanished peer shows.
//
// Threads: one thread makes every call except abort(), which any thread may call.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/transport.h"
#include "transport/zmq/zmq_transport.h"

namespace arl {

// The ranks a rank connects to on the TCP plane: those it sends to or receives from.
std::vector<int> partnersOf(const DataPlanePeers& p);

class TcpDataPlane final : public Transport {
 public:
  // Throws ConfigError when rank is not in [0, nranks).
  TcpDataPlane(int rank, int nranks);
  ~TcpDataPlane() override;
  TcpDataPlane(const TcpDataPlane&) = delete;
  TcpDataPlane& operator=(const TcpDataPlane&) = delete;

  // Phase 1: listens on opt.tcpHost (any free port) and returns "tcp://ADVERTISED:PORT".
  // Takes BindOptions' tcp fields, tcpBufferBytes, sendTimeout, closeLinger,
  // maxMessageBytes, shaping, clockOffsetNs and the CURVE keys (the handshake's keys); kind
  // must be Tcp. Throws ConfigError on bad options or when the listen fails.
  std::string bind(const BindOptions& opt);
  // Phase 2: connects to every rank of `partners` and authenticates it, within
  // `connectTimeout`. Both ends of a pair must list each other. Refused connections (no
  // member, a bad proof) are closed and logged by count, and the wait goes on. Throws
  // PeerError naming a partner that cannot be reached, or on abort; ConfigError on a bad
  // list.
  void connect(const std::vector<std::string>& endpointsByRank, const std::vector<int>& partners,
               std::chrono::milliseconds connectTimeout = std::chrono::seconds(60));
  const std::string& endpoint() const { return endpoint_; }
  // Connections refused during connect() (a stray client, a failed proof).
  size_t refused() const;

  // The goodbye (above) unless aborted or failed, then closes every socket. Never throws;
  // idempotent. True when every partner closed its side in time.
  bool close();

  int rank() const override { return rank_; }
  int size() const override { return nranks_; }
  // Fills the header's magic, src and length. Blocks until the kernel holds the message.
  std::shared_ptr<SendCompletion> send(int peer, const ChunkHeader& h, const void* data,
                                       size_t bytes) override;
  // The next send() may be held (above), even with nothing queued: a window's first sends,
  // made before anything has arrived, leave in one write.
  void sendFollows(int peer, int nextPeer) override;
  std::unique_ptr<InMessage> recv(int peer, uint32_t step,
                                  std::chrono::milliseconds timeout) override;
  // False on a shaped data plane, whose arrivals recv() paces.
  bool ready(int peer, uint32_t step) override;
  bool arrived(int peer) override;
  // Thread-safe; touches no socket. Blocked and later calls throw "run aborted".
  void abort() override;
  // Writes every held message (above).
  void reclaimAll(uint32_t step) override;

  // Held sends on or off (off by default; turning them off writes what is held).
  void holdSmallSends(bool on);
  // Whether sendFollows() lets the next send be held (on by default); off, only a queue of
  // arrived messages does, as before the hint existed (for measuring what it saves).
  void heedSendFollows(bool on);
  // Writes every held message now, `step` naming the run's step in an error. Throws
  // PeerError as send() does.
  void flush(uint32_t step = 0);

  // Messages received from `peer` and queued while the caller waited for another peer.
  size_t queued(int peer) const;
  // sendmsg calls that wrote data so far (held sends make one for many messages).
  size_t writes() const;

 private:
  struct Impl;
  int rank_;
  int nranks_;
  std::string endpoint_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace arl
