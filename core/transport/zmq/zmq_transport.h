// ZeroMQ data plane: the Transport that moves chunk payloads between worker processes.
//
// Each rank binds one PULL socket (ipc:// in a private temp dir when all ranks share a host,
// tcp:// otherwise) and connects one PUSH socket per peer it sends to; a PUSH socket with a
// single peer is the only way to address a peer with PUSH/PULL, since PUSH round-robins.
// Creation is two-phase because endpoints travel through the coordinator:
//
//   ZmqDataPlane dp(rank, nranks);
//   std::string mine = dp.bind(opts);              // send `mine` to the coordinator
//   dp.connect(allEndpoints, dataPlanePeers(schedule, rank).sendTo);
//   Executor(schedule, rank, dp, backend, sink, execOpts).run(...);
//   dp.close();                                    // or let the destructor do it
//
// Every message is two frames: the 56-byte ChunkHeader (64 bytes with the send's start when
// shaped, see BindOptions::shaping) and the payload. Payloads of at least
// BindOptions::zeroCopyMinBytes are sent without copying: ZeroMQ reads the caller's memory,
// and the SendCompletion turns done when ZeroMQ releases it (the bytes are in the kernel).
//
// Closing. A done send is not yet a delivered one: a copied message may still sit in
// ZeroMQ's queue, and ZeroMQ discards what a receiver at its high-water mark has not read
// when the sender disconnects. So close() says goodbye first: it sends a FIN after its data
// to every rank it sent to and waits (at most closeLinger) for each to acknowledge having
// read everything up to the FIN, while acknowledging the FINs of the ranks it received
// from. A rank that has finished may therefore close at once. Receiving a FIN where data was
// expected fails the receive with "rank P closed its data plane". After abort(), after a
// failed send or receive, or in a destructor running during unwinding, close() is immediate.
//
// Threads: one thread (the executor's) makes every call except abort(), which any thread
// may call. Memory of a send that is not done is still read by ZeroMQ's I/O thread: close
// (or destroy) the data plane before freeing it when a run ends with sends outstanding.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/shaping.h"
#include "schedule/schedule.h"
#include "transport/transport.h"

namespace arl {

struct BindOptions {
  enum class Kind : uint8_t { Ipc, Tcp };
  Kind kind = Kind::Ipc;
  // Ipc: parent of the private directory created for this rank's socket ("" = $TMPDIR or
  // /tmp). The socket path must fit in sockaddr_un (107 bytes).
  std::string ipcBaseDir;
  // Tcp: address to bind (an interface address, "0.0.0.0" or "*" for all interfaces) and
  // the address peers should use; "" = the bound address, which must then be concrete.
  std::string tcpHost = "127.0.0.1";
  std::string tcpAdvertiseHost;
  // Per-peer queue limits in messages on each side (ZMQ_SNDHWM / ZMQ_RCVHWM). Together with
  // the kernel's socket buffers they bound the bytes in flight on each link.
  int sndHwm = 8;
  int rcvHwm = 8;
  // Kernel socket buffers for tcp (ZMQ_SNDBUF / ZMQ_RCVBUF); 0 keeps Linux's autotuning,
  // which usually beats a fixed value because setsockopt caps it at net.core.wmem_max.
  int tcpBufferBytes = 0;
  // Payloads this large or larger are sent zero-copy; smaller ones are copied (cheaper than
  // ZeroMQ's per-message free callback) and their completion is done at once.
  size_t zeroCopyMinBytes = 8192;
  // Largest message the PULL socket accepts (ZMQ_MAXMSGSIZE); -1 = unlimited. A peer that
  // exceeds it is disconnected by ZeroMQ, which then shows as a stall (exec/progress.h).
  int64_t maxMessageBytes = -1;
  // How long send() may wait for room in a peer's queue, and SendCompletion::wait() for
  // ZeroMQ to release a zero-copy payload, before failing with PeerError. None by default:
  // a peer that reads slowly is alive; a run's deadline is its stall timeout, and abort()
  // ends the wait.
  std::chrono::milliseconds sendTimeout = kNoTimeout;
  // Longest time close() waits for its peers' goodbyes (see "Closing" above); a peer that
  // neither reads nor closes makes close() wait this long.
  std::chrono::milliseconds closeLinger{5000};
  int ioThreads = 1;  // ZeroMQ I/O threads of this rank's context
  // The network this rank's sends and receives are paced to (transport/pacing.h); empty = not
  // paced. Every rank of a run must be given the same. A paced data message's header frame
  // carries the send's start after the ChunkHeader (8 more bytes, on the coordinator's clock:
  // this one's plus clockOffsetNs, the Ping exchange's offset), so ranks on several hosts
  // read each other's times.
  LinkShaping shaping;
  int64_t clockOffsetNs = 0;
  // CurveZMQ between the ranks (RFC 26; docs/security.md): this rank's secret key and every
  // rank's public key, by rank (Z85). Set, the PULL socket is a CURVE server that admits the
  // keys of curvePeerKeys alone (a ZAP handler, transport/zmq/zap_handler.h, in this rank's
  // context), and each PUSH socket authenticates with this rank's pair and checks the
  // peer's key: a process that is not a member of the run can neither connect nor read.
  // Empty: in the clear.
  std::string curveSecretKey;
  std::vector<std::string> curvePeerKeys;
};

// The peers a rank exchanges data with in a schedule (sorted, without duplicates).
struct DataPlanePeers {
  std::vector<int> sendTo;
  std::vector<int> recvFrom;
};
DataPlanePeers dataPlanePeers(const Schedule& s, int rank);

class ZmqDataPlane final : public Transport {
 public:
  // Throws ConfigError when rank is not in [0, nranks).
  ZmqDataPlane(int rank, int nranks);
  ~ZmqDataPlane() override;
  ZmqDataPlane(const ZmqDataPlane&) = delete;
  ZmqDataPlane& operator=(const ZmqDataPlane&) = delete;

  // Phase 1: binds this rank's PULL socket and returns the endpoint peers connect to
  // ("ipc:///tmp/arl-dp-<ns>-<pid>-XXXXXX/rank3.sock", "tcp://10.0.0.5:41234"). Call once.
  // An ipc bind first removes the socket directories of dead owners (a SIGKILLed rank's).
  // Throws ConfigError on bad options or when the bind fails.
  std::string bind(const BindOptions& opt);
  // Phase 2: connects PUSH sockets to `peers` (ranks) at endpointsByRank[peer]. Sending to a
  // rank not listed connects on first use, and so does acknowledging a peer's goodbye: call
  // connect() on every rank, with no peers if it sends nothing. Throws ConfigError on a bad
  // list.
  void connect(const std::vector<std::string>& endpointsByRank, const std::vector<int>& peers);
  // The endpoint returned by bind() ("" before).
  const std::string& endpoint() const { return endpoint_; }

  // Teardown: the goodbye exchange unless aborted or failed (see "Closing" above), then
  // closes every socket, ends the ZeroMQ context, so no memory of an outstanding send is read
  // afterwards, and removes the ipc socket file and its directory. Never throws. Idempotent;
  // the destructor calls it. After a failed run, abort() first so that close() does not wait.
  // Returns true when this call completed the goodbye exchange (trivially, with no peers),
  // false when it was skipped or timed out, or the data plane was already closed.
  bool close();

  int rank() const override { return rank_; }
  int size() const override { return nranks_; }
  // The transport fills the header's magic, src and length; the caller supplies the rest.
  // Blocks while the peer's queue is full (until abort(), or BindOptions::sendTimeout).
  std::shared_ptr<SendCompletion> send(int peer, const ChunkHeader& h, const void* data,
                                       size_t bytes) override;
  std::unique_ptr<InMessage> recv(int peer, uint32_t step,
                                  std::chrono::milliseconds timeout) override;
  // Reads what has arrived (queueing other peers' messages, as recv() does) without waiting.
  // False on a shaped data plane, whose arrivals recv() paces.
  bool ready(int peer, uint32_t step) override;
  bool arrived(int peer) override;
  // Thread-safe; touches no socket. Blocked and later send/recv/wait throw "run aborted".
  void abort() override;

  // Messages received from `peer` and queued while recv() waited for another peer.
  size_t queued(int peer) const;

 private:
  bool readAhead(int peer, uint32_t step);
  std::string makeIpcDir(const std::string& baseDir, const std::string& who);
  std::unique_ptr<InMessage> take(int peer, uint32_t step, std::chrono::milliseconds timeout);
  struct Impl;  // ZeroMQ state, private to zmq_transport.cpp
  int rank_;
  int nranks_;
  std::string endpoint_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace arl
