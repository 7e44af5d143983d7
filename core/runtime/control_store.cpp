#include "runtime/control_store.h"

#include <algorithm>
#include <mutex>

#include "base/errors.h"
#include "runtime/run_job.h"

namespace arl {

namespace {

using Clock = std::chrono::steady_clock;

// A key not there yet is asked for again after this, doubling up to kMaxPause: the first
// answers come fast when every rank joins at once, and a rank that waits long costs the
// coordinator a message every 20 ms.
constexpr std::chrono::milliseconds kFirstPause{1};
constexpr std::chrono::milliseconds kMaxPause{20};

std::string quotedKey(const std::string& key) { return "'" + key + "'"; }

}  // namespace

void ControlStore::set(const std::string& key, const std::string& value) {
  StoreSet m;
  m.epoch = j_.cfg.epoch;
  m.rank = j_.rank;
  m.key = key;
  m.value = value;
  if (auto e = validate(Message(m))) {
    throw PeerError(j_.rank, -1, -1, "the run's store refuses key " + quotedKey(key) + ": " + *e);
  }
  j_.out.post(std::move(m));
}

bool ControlStore::ask(const std::string& key, Clock::time_point deadline, std::string& value) {
  StoreGet m;
  m.epoch = j_.cfg.epoch;
  m.rank = j_.rank;
  m.seq = ++seq_;
  m.key = key;
  if (auto e = validate(Message(m))) {
    throw PeerError(j_.rank, -1, -1, "the run's store refuses key " + quotedKey(key) + ": " + *e);
  }
  j_.out.post(std::move(m));
  std::unique_lock<std::mutex> lock(j_.mu);
  const bool answered = j_.cv.wait_until(lock, deadline, [&] {
    return j_.aborted || (j_.storeAnswer && j_.storeAnswer->seq == seq_);
  });
  if (j_.aborted) {
    throw PeerError(j_.rank, -1, -1, "run aborted while waiting for store key " + quotedKey(key));
  }
  if (!answered) return false;
  const bool found = j_.storeAnswer->found;
  if (found) value = std::move(j_.storeAnswer->value);
  j_.storeAnswer.reset();
  return found;
}

std::string ControlStore::get(const std::string& key, std::chrono::milliseconds timeout,
                              const std::atomic<bool>& cancel) {
  const Clock::time_point deadline = Clock::now() + timeout;
  std::chrono::milliseconds pause = kFirstPause;
  std::string value;
  for (;;) {
    if (cancel.load()) {
      throw PeerError(j_.rank, -1, -1, "run aborted while waiting for store key " + quotedKey(key));
    }
    if (ask(key, deadline, value)) return value;
    if (Clock::now() >= deadline) break;
    std::unique_lock<std::mutex> lock(j_.mu);
    j_.cv.wait_until(lock, std::min(deadline, Clock::now() + pause), [&] { return j_.aborted; });
    pause = std::min(pause * 2, kMaxPause);
  }
  throw PeerError(j_.rank, -1, -1,
                  "no rank set store key " + quotedKey(key) + " within " +
                      std::to_string(timeout.count()) + " ms (a rank did not join the rendezvous)");
}

}  // namespace arl
