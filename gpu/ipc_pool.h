// The bookkeeping behind the buffers the cuda backend lends over CUDA IPC (gpu/cuda_ipc.h):
// which buffer a loan takes, and when a buffer that an earlier run made may be freed. Plain
// C++, no CUDA call: the caller allocates and frees, so that the rule is tested without a
// device.
//
// Why buffers outlive their run: CUDA leaves it undefined to free exported memory before every
// importer has closed its handle (cudaIpcOpenMemHandle), and a peer closes its handles at the
// end of its own run, which may come after the lender's. So the pool a run leaves is taken
// over by the device's next one (IpcPoolLedger), which lends from it again.
//
// When a buffer may be freed: a rank lends only after its run's Start, which the coordinator
// sends once every rank of the run has reported Ready, which a worker does only once the
// thread of its previous run has ended (one run at a time, WorkerSession), having closed every
// handle it opened (closePeers, on every path of a run). So once a pool has lent in a run that
// began after run R ended, no rank of that run holds a handle from run R or before: a buffer
// that no such later run lent is freed when the next run takes the pool over. A sweep of slice
// sizes thus holds the buffers of the last run that lent and of the run in progress, not every
// size class it ever lent; a sweep at one slice size reuses its buffers and allocates nothing
// new. (A worker that took part in run R but not in the later run, after a failed run R,
// closes its handles when its run thread stops: within 30 s of the abort, or it exits.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "backend/peer_memory.h"

namespace arl::gpu {

// The smallest buffer lent; larger ones double, so that a steady run reuses what it made.
inline constexpr size_t kMinLoanBytes = size_t{64} << 10;

// The size of the buffer that holds a loan of `bytes`: a power of two, at least kMinLoanBytes.
size_t loanBufferBytes(size_t bytes);

struct IpcBuffer {
  void* p = nullptr;            // the caller's allocation
  size_t bytes = 0;             // loanBufferBytes() of what it was made for
  PeerMemory::Handle handle{};  // its IPC handle
  bool lent = false;            // out on a loan now
  bool lentThisRun = false;     // lent since the pool's current run began
  uint64_t lastLentRunEnd = 0;  // IpcPoolLedger's tick when the last run that lent it ended
};

// One run's pool: loans by id (the buffer's index, stable for the run).
class IpcPool {
 public:
  // A buffer of `bytes` (loanBufferBytes) that is not lent, or nullopt: make one and add() it.
  std::optional<size_t> findFree(size_t bytes) const;
  // Adds a buffer the caller made; returns its id.
  size_t add(void* p, size_t bytes, const PeerMemory::Handle& handle);
  // Marks buffer `id` lent (a loan).
  void lend(size_t id);
  // Ends loan `id`; a buffer not lent is a bug.
  void giveBack(size_t id);
  const IpcBuffer& operator[](size_t id) const { return buffers_.at(id); }
  size_t size() const { return buffers_.size(); }
  // Device bytes the pool holds.
  size_t bytes() const;
  bool lentThisRun() const;

 private:
  friend class IpcPoolLedger;
  std::vector<IpcBuffer> buffers_;
};

// What the runs on one device left behind, ordered by a tick that each begin and end advances
// (runs may overlap in one process: several backends at once, in tests). Not thread-safe:
// the caller locks.
class IpcPoolLedger {
 public:
  // A run begins: it takes the pool runs left, but for the buffers a later run has shown to
  // be free of importers (above), whose addresses go into `toFree` for the caller to free.
  // Returns the run's tick, for end().
  uint64_t begin(IpcPool& pool, std::vector<void*>& toFree);
  // The run that began at `begun` ends, leaving `pool` (nothing lent any more).
  void end(uint64_t begun, IpcPool&& pool);
  // Buffers waiting for the next run.
  size_t buffers() const { return left_.buffers_.size(); }

 private:
  IpcPool left_;
  uint64_t tick_ = 0;
  // The latest begin tick of a run that lent: every run that ended before it has no
  // importer left.
  uint64_t cleared_ = 0;
};

}  // namespace arl::gpu
