#include "transport/pacing.h"

#include <algorithm>
#include <cmath>

#include "base/errors.h"

namespace arl {

namespace {

double nsPerByte(double bytesPerSecond) { return bytesPerSecond > 0 ? 1e9 / bytesPerSecond : 0; }

int64_t holdNs(size_t bytes, double nsPerByte) {
  return static_cast<int64_t>(std::ceil(static_cast<double>(bytes) * nsPerByte));
}

}  // namespace

std::unique_ptr<Pacer> Pacer::make(const LinkShaping& s, int rank, int nranks,
                                   int64_t clockOffsetNs) {
  if (s.empty()) return nullptr;
  return std::make_unique<Pacer>(s, rank, nranks, clockOffsetNs);
}

Pacer::Pacer(const LinkShaping& s, int rank, int nranks, int64_t clockOffsetNs)
    : rank_(rank),
      offsetNs_(clockOffsetNs),
      egressNsPerByte_(nsPerByte(s.portRate(rank))),
      ingressNsPerByte_(egressNsPerByte_),
      linkOutNsPerByte_(static_cast<size_t>(nranks), 0),
      leaveNsPerByte_(static_cast<size_t>(nranks), 0),
      arriveNsPerByte_(static_cast<size_t>(nranks), 0),
      arriveLatencyNs_(static_cast<size_t>(nranks), 0),
      linkFreeNs_(static_cast<size_t>(nranks), 0) {
  ARL_ENFORCE(rank >= 0 && rank < nranks, "rank " << rank << " of " << nranks);
  for (int p = 0; p < nranks; ++p) {
    const auto i = static_cast<size_t>(p);
    linkOutNsPerByte_[i] = nsPerByte(s.linkRate(rank, p));
    leaveNsPerByte_[i] = std::max(egressNsPerByte_, linkOutNsPerByte_[i]);
    arriveNsPerByte_[i] = std::max(nsPerByte(s.portRate(p)), nsPerByte(s.linkRate(p, rank)));
    arriveLatencyNs_[i] = static_cast<int64_t>(std::llround(s.pathLatency(p, rank) * 1e9));
  }
}

Pacer::SendSlot Pacer::claimSend(int peer, size_t bytes, int64_t nowNs) {
  const auto p = static_cast<size_t>(peer);
  const int64_t start = std::max({nowNs, egressFreeNs_, linkFreeNs_[p]});
  egressFreeNs_ = start + holdNs(bytes, egressNsPerByte_);
  linkFreeNs_[p] = start + holdNs(bytes, linkOutNsPerByte_[p]);
  return {start, start + holdNs(bytes, leaveNsPerByte_[p])};
}

void PacedCompletion::wait() {
  if (!paceUntil(doneAtNs_, stop_)) throw PeerError(rank_, peer_, step_, "run aborted");
}

int64_t Pacer::claimReceive(int peer, size_t bytes, int64_t startNs) {
  // The start is taken as stamped, also when it is later than now: the message was handed
  // over while the sender's egress was still busy with earlier ones, and it leaves only when
  // its turn comes.
  const auto p = static_cast<size_t>(peer);
  const int64_t left = startNs + holdNs(bytes, arriveNsPerByte_[p]);
  ingressFreeNs_ = std::max(startNs, ingressFreeNs_) + holdNs(bytes, ingressNsPerByte_);
  return std::max(left, ingressFreeNs_) + arriveLatencyNs_[p];
}

uint32_t stampMicros32(int64_t ns) {
  return static_cast<uint32_t>(static_cast<uint64_t>(ns / 1000));
}

int64_t unstampMicros32(uint32_t stamp, int64_t nowNs) {
  const int64_t nowUs = nowNs / 1000;
  // The signed distance modulo 2^32: a stamp up to 35 minutes ahead of now (a send queued
  // behind others on its port) comes back ahead, as one up to 35 minutes behind comes back
  // behind.
  const auto ahead =
      static_cast<int32_t>(stamp - static_cast<uint32_t>(static_cast<uint64_t>(nowUs)));
  return (nowUs + ahead) * 1000;
}

}  // namespace arl
