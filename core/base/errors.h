// Two tiers of errors (as in Gloo): ARL_ENFORCE for broken invariants (bugs), typed
// exceptions for expected failures that carry the rank, the peer and the step.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace arl {

// A broken invariant: a bug in the lab, not a user or network problem.
struct EnforceError : std::logic_error {
  using std::logic_error::logic_error;
};

// An expected failure in a run: peer gone, timeout, malformed or mismatched data.
// what() reads like "rank 2: rank 1's process exited before sending data for step 5"; with
// rank -1 (the run as a whole, as in a stall) it is the reason alone.
struct PeerError : std::runtime_error {
  PeerError(int rank, int peer, int64_t step, const std::string& reason);
  int rank;
  int peer;      // -1 when no peer is involved
  int64_t step;  // -1 when not tied to a step
  std::string reason;
};

// Bad configuration or input supplied by the user.
struct ConfigError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

namespace detail {
[[noreturn]] void enforceFailed(const char* file, int line, const char* cond,
                                const std::string& msg);
}  // namespace detail

}  // namespace arl

// ARL_ENFORCE(cond, values...) throws EnforceError with file, line, the condition and the
// streamed values when cond is false.
#define ARL_ENFORCE(cond, ...)                                                        \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::ostringstream arl_enforce_os_;                                             \
      ((void)(arl_enforce_os_ << "" __VA_OPT__(<<) __VA_ARGS__));                     \
      ::arl::detail::enforceFailed(__FILE__, __LINE__, #cond, arl_enforce_os_.str()); \
    }                                                                                 \
  } while (0)
