#include "base/errors.h"

namespace arl {

namespace {
std::string peerMessage(int rank, int peer, int64_t step, const std::string& reason) {
  // rank -1: the whole run failed, no rank in particular (a stall).
  std::string m = rank >= 0 ? "rank " + std::to_string(rank) + ": " + reason : reason;
  if (peer >= 0 && reason.find("rank " + std::to_string(peer)) == std::string::npos) {
    m += " (peer rank " + std::to_string(peer) + ")";
  }
  if (step >= 0 && reason.find("step") == std::string::npos) {
    m += " at step " + std::to_string(step);
  }
  return m;
}
}  // namespace

PeerError::PeerError(int rank_, int peer_, int64_t step_, const std::string& reason_)
    : std::runtime_error(peerMessage(rank_, peer_, step_, reason_)),
      rank(rank_),
      peer(peer_),
      step(step_),
      reason(reason_) {}

namespace detail {
void enforceFailed(const char* file, int line, const char* cond, const std::string& msg) {
  std::string m = std::string(file) + ":" + std::to_string(line) + ": enforce failed: " + cond;
  if (!msg.empty()) m += " (" + msg + ")";
  throw EnforceError(m);
}
}  // namespace detail

}  // namespace arl
