// Pacing of a data plane by a LinkShaping (base/shaping.h): what makes one machine behave like
// a cluster of shaped ports. Every data plane (loopback, shared memory, ZeroMQ) holds one Pacer
// per rank when the run is shaped, and none when it is not, so an unshaped run pays a null
// check per message and nothing else.
//
// Virtual clocks. A port direction (this rank's egress, its ingress) and a directed link are
// each a "next free" time; a message of b bytes holds each for b / that one's rate, starting
// no earlier than it is free. The two sides split the work, as a NIC and its switch port do:
//
//  - The sender claims its egress port and the link to the receiver: the message starts
//    leaving at  start = max(now, egress free, link free), holds the egress for b / egress rate
//    and the link for b / link rate, and has left at start + b / min(egress, link). send()
//    stamps the message with its start and hands it over at once, as a rank hands a message
//    to its NIC's queue, so the rank goes on (receives, reduces) while its port sends; the
//    send's completion turns done when the message has left (PacedCompletion), so a rank
//    with `inflight` sends outstanding waits for its port as it would for a NIC.
//  - The receiver claims its ingress port when it takes the message: the bytes come in from
//    max(start, ingress free) for b / ingress rate, so a rank fed by k senders at once takes
//    k times as long as from one (a parameter server's port). The message is available at
//      max(start + b / min(egress, link), ingress end) + latency
//    and recv() waits until then, where the latency is the added one plus the link's own
//    (LinkShaping::pathLatency). It is added to the arrival of each message, not held on a
//    port: messages in flight overlap their latencies.
//
// The cost model's simulation (model/model.h, simulate()) follows the same rules. A port
// shaped faster than the machine's own transfers takes the machine's time: pacing only ever
// slows a transfer.
//
// Clocks. Stamps travel on the wire clock: this process's steady clock plus `clockOffsetNs`
// (the coordinator's clock minus this one, 0 on one host), so ranks on different hosts read
// each other's stamps. A stamp later than the receiver's now is taken as it is: on one host it
// is a message queued behind others on its sender's egress, which leaves only when its turn
// comes; across hosts an offset's error moves a message's arrival by that error, as a latency.
//
// Threads: one Pacer serves one rank's endpoint, whose calls come from one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/shaping.h"
#include "transport/transport.h"

namespace arl {

class Pacer {
 public:
  // Null when `s` is empty: the endpoint is not paced at all.
  static std::unique_ptr<Pacer> make(const LinkShaping& s, int rank, int nranks,
                                     int64_t clockOffsetNs = 0);

  Pacer(const LinkShaping& s, int rank, int nranks, int64_t clockOffsetNs);

  struct SendSlot {
    int64_t startNs = 0;  // when the message starts to leave (>= the send's time)
    int64_t leftNs = 0;   // when its last byte has left the port and the link
  };
  // Sender: claims the egress port and the link to `peer` for `bytes` sent at `nowNs` (this
  // process's steady clock).
  SendSlot claimSend(int peer, size_t bytes, int64_t nowNs);
  // Receiver: claims the ingress port for a message of `bytes` from `peer` that starts to
  // leave at `startNs` (this process's clock; it may be later than now); returns when it
  // becomes available.
  int64_t claimReceive(int peer, size_t bytes, int64_t startNs);

  // Between this process's clock and the clock of stamps on the wire.
  int64_t toWire(int64_t localNs) const { return localNs + offsetNs_; }
  int64_t fromWire(int64_t wireNs) const { return wireNs - offsetNs_; }

  int rank() const { return rank_; }

 private:
  int rank_;
  int64_t offsetNs_;
  double egressNsPerByte_ = 0;            // this rank's egress (0 = unshaped)
  double ingressNsPerByte_ = 0;           // this rank's ingress (0 = unshaped)
  std::vector<double> linkOutNsPerByte_;  // by peer: the link this rank -> peer (0 = none)
  std::vector<double> leaveNsPerByte_;    // by peer: the slower of the egress and that link
  std::vector<double> arriveNsPerByte_;   // by peer: the pace of its messages here, the
                                          // slower of its egress and the link peer -> rank
  std::vector<int64_t> arriveLatencyNs_;  // by peer: the latency of its messages here
  int64_t egressFreeNs_ = 0;
  int64_t ingressFreeNs_ = 0;
  std::vector<int64_t> linkFreeNs_;  // by peer
};

// Below this much time left, a pacing wait stops sleeping and yields until its deadline:
// a sleep overshoots by the timer's slack (about 50 us on Linux).
inline constexpr int64_t kPaceSpinNs = 200'000;
// Longest sleep between looks at the stop condition.
inline constexpr int64_t kPaceSliceNs = 10'000'000;

// Waits until steadyNowNs() >= untilNs: sleeps while more than kPaceSpinNs is left (in slices
// of at most kPaceSliceNs), then yields the core until the deadline. Returns false as soon as
// stop() returns true (looked at between slices and yields).
template <typename Stop>
bool paceUntil(int64_t untilNs, Stop&& stop) {
  for (;;) {
    const int64_t now = steadyNowNs();
    if (now >= untilNs) return true;
    if (stop()) return false;
    const int64_t left = untilNs - now;
    if (left > kPaceSpinNs) {
      const int64_t nap = left - kPaceSpinNs < kPaceSliceNs ? left - kPaceSpinNs : kPaceSliceNs;
      std::this_thread::sleep_for(std::chrono::nanoseconds(nap));
    } else {
      std::this_thread::yield();
    }
  }
}

// The completion of a paced send whose payload the transport already holds: done once the
// message has left the sender's port (Pacer::SendSlot::leftNs). wait() paces until then and
// throws PeerError(rank, peer, step, "run aborted") once stop() turns true.
class PacedCompletion final : public SendCompletion {
 public:
  PacedCompletion(int64_t doneAtNs, std::function<bool()> stop, int rank, int peer, uint32_t step)
      : doneAtNs_(doneAtNs), stop_(std::move(stop)), rank_(rank), peer_(peer), step_(step) {}
  bool done() const override { return steadyNowNs() >= doneAtNs_; }
  void wait() override;

 private:
  int64_t doneAtNs_;
  std::function<bool()> stop_;
  int rank_;
  int peer_;
  uint32_t step_;
};

// A send's start as the 32-bit stamp of the shared-memory ring's record head (microseconds,
// modulo 2^32), and back: the full time nearest `nowNs` with those low bits, before or after
// it (a send queued behind others on its port starts after the receiver has its record). A
// record is read within minutes of being written, far less than half the stamp's 71-minute
// period.
uint32_t stampMicros32(int64_t ns);
int64_t unstampMicros32(uint32_t stamp, int64_t nowNs);

}  // namespace arl
