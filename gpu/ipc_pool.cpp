#include "gpu/ipc_pool.h"

#include <algorithm>
#include <utility>

#include "base/errors.h"

namespace arl::gpu {

size_t loanBufferBytes(size_t bytes) {
  size_t size = kMinLoanBytes;
  while (size < bytes) size *= 2;
  return size;
}

std::optional<size_t> IpcPool::findFree(size_t bytes) const {
  for (size_t id = 0; id < buffers_.size(); ++id) {
    if (!buffers_[id].lent && buffers_[id].bytes == bytes) return id;
  }
  return std::nullopt;
}

size_t IpcPool::add(void* p, size_t bytes, const PeerMemory::Handle& handle) {
  IpcBuffer b;
  b.p = p;
  b.bytes = bytes;
  b.handle = handle;
  buffers_.push_back(b);
  return buffers_.size() - 1;
}

void IpcPool::lend(size_t id) {
  ARL_ENFORCE(id < buffers_.size() && !buffers_[id].lent, "loan of buffer " << id << ", lent");
  buffers_[id].lent = true;
  buffers_[id].lentThisRun = true;
}

void IpcPool::giveBack(size_t id) {
  ARL_ENFORCE(id < buffers_.size() && buffers_[id].lent,
              "give-back of loan " << id << ", not lent");
  buffers_[id].lent = false;
}

size_t IpcPool::bytes() const {
  size_t n = 0;
  for (const IpcBuffer& b : buffers_) n += b.bytes;
  return n;
}

bool IpcPool::lentThisRun() const {
  return std::any_of(buffers_.begin(), buffers_.end(),
                     [](const IpcBuffer& b) { return b.lentThisRun; });
}

uint64_t IpcPoolLedger::begin(IpcPool& pool, std::vector<void*>& toFree) {
  for (IpcBuffer& b : left_.buffers_) {
    if (b.lastLentRunEnd < cleared_) {
      toFree.push_back(b.p);
      continue;
    }
    b.lent = false;
    b.lentThisRun = false;
    pool.buffers_.push_back(b);
  }
  left_.buffers_.clear();
  return ++tick_;
}

void IpcPoolLedger::end(uint64_t begun, IpcPool&& pool) {
  const uint64_t ended = ++tick_;
  if (pool.lentThisRun()) cleared_ = std::max(cleared_, begun);
  for (IpcBuffer& b : pool.buffers_) {
    if (b.lentThisRun) b.lastLentRunEnd = ended;
    b.lentThisRun = false;
    b.lent = false;
    left_.buffers_.push_back(b);
  }
  pool.buffers_.clear();
}

}  // namespace arl::gpu
