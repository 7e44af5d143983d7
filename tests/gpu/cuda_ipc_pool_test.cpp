// The bookkeeping of the buffers the cuda backend lends over CUDA IPC (gpu/ipc_pool.h): size
// classes, loans by id, and which buffers a run taking the pool over may free. No device: the
// buffers are made-up addresses, never touched.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/errors.h"
#include "gpu/ipc_pool.h"

namespace arl::gpu {
namespace {

void* fakeAddress(uintptr_t n) { return reinterpret_cast<void*>(n << 20); }

// A run on the pool, as CudaPeerMemory is one: begins (taking the pool over), lends, ends.
class PoolRun {
 public:
  explicit PoolRun(IpcPoolLedger& ledger) : ledger_(ledger) {
    tick_ = ledger_.begin(pool_, freed_);
  }

  // A loan of `bytes`, from a free buffer of its size or a new one; returns its id.
  size_t lend(size_t bytes) {
    const size_t size = loanBufferBytes(bytes);
    auto id = pool_.findFree(size);
    if (!id) id = pool_.add(fakeAddress(++made_), size, {});
    pool_.lend(*id);
    return *id;
  }
  void giveBack(size_t id) { pool_.giveBack(id); }
  void end() { ledger_.end(tick_, std::move(pool_)); }

  const IpcPool& pool() const { return pool_; }
  const std::vector<void*>& freed() const { return freed_; }

 private:
  static inline uintptr_t made_ = 0;
  IpcPoolLedger& ledger_;
  IpcPool pool_;
  std::vector<void*> freed_;
  uint64_t tick_ = 0;
};

std::vector<size_t> sizes(const IpcPool& pool) {
  std::vector<size_t> out;
  for (size_t i = 0; i < pool.size(); ++i) out.push_back(pool[i].bytes);
  std::sort(out.begin(), out.end());
  return out;
}

constexpr size_t k64K = size_t{64} << 10;

TEST(IpcPool, BuffersArePowersOfTwoFrom64KiB) {
  EXPECT_EQ(loanBufferBytes(0), k64K);
  EXPECT_EQ(loanBufferBytes(1), k64K);
  EXPECT_EQ(loanBufferBytes(k64K), k64K);
  EXPECT_EQ(loanBufferBytes(k64K + 1), 2 * k64K);
  EXPECT_EQ(loanBufferBytes((size_t{4} << 20) + 15), size_t{8} << 20);
}

TEST(IpcPool, ALoanTakesAFreeBufferOfItsSizeAndAGiveBackFreesIt) {
  IpcPoolLedger ledger;
  PoolRun r(ledger);
  const size_t a = r.lend(1000);
  const size_t b = r.lend(1000);
  EXPECT_NE(a, b) << "a lent buffer is not lent twice";
  const size_t c = r.lend(200 << 10);
  EXPECT_EQ(r.pool().size(), 3u);
  EXPECT_EQ(r.pool().bytes(), 2 * k64K + (256 << 10));
  r.giveBack(a);
  EXPECT_EQ(r.lend(k64K), a) << "the buffer given back is lent again";
  EXPECT_EQ(r.pool().size(), 3u);
  r.giveBack(c);
  EXPECT_THROW(r.giveBack(c), EnforceError) << "a buffer given back twice";
  EXPECT_THROW(r.giveBack(7), EnforceError) << "no such loan";
  r.end();
}

TEST(IpcPool, ASteadySweepMakesNoNewBuffersAndFreesNone) {
  IpcPoolLedger ledger;
  for (int run = 0; run < 4; ++run) {
    PoolRun r(ledger);
    EXPECT_TRUE(r.freed().empty()) << "run " << run;
    EXPECT_EQ(r.pool().size(), run == 0 ? 0u : 2u) << "run " << run;
    const size_t a = r.lend(1 << 20);
    const size_t b = r.lend(1 << 20);
    r.giveBack(a);
    r.giveBack(b);
    EXPECT_EQ(r.pool().size(), 2u);
    r.end();
  }
}

// A slice-size sweep: each run lends one size. A buffer is freed once a run that began after
// the last run that lent it has lent: the pool holds the last lending run's buffers and the
// current run's, never every size lent.
TEST(IpcPool, ASliceSweepFreesTheSizesTheLastRunDidNotLend) {
  IpcPoolLedger ledger;
  size_t most = 0;
  for (size_t slice : {k64K, 4 * k64K, 16 * k64K, 64 * k64K, 4 * k64K}) {
    PoolRun r(ledger);
    (void)r.lend(slice);
    (void)r.lend(slice);
    most = std::max(most, r.pool().bytes());
    r.end();
  }
  EXPECT_EQ(most, 2 * 64 * k64K + 2 * 16 * k64K) << "the previous run's two buffers and two new";
  PoolRun last(ledger);
  EXPECT_EQ(sizes(last.pool()), (std::vector<size_t>{4 * k64K, 4 * k64K}));
  EXPECT_EQ(last.freed().size(), 2u) << "the 4 MiB buffers of the run before";
  last.end();
}

TEST(IpcPool, ARunThatLendsNothingFreesNothing) {
  IpcPoolLedger ledger;
  {
    PoolRun r(ledger);
    (void)r.lend(k64K);
    r.end();
  }
  for (int run = 0; run < 3; ++run) {
    PoolRun idle(ledger);  // staged, or no peer to lend to: proves nothing about the importers
    EXPECT_TRUE(idle.freed().empty());
    EXPECT_EQ(idle.pool().size(), 1u);
    idle.end();
  }
}

// The run that proves a buffer free must have begun after the buffer's last run ended: a run
// that overlapped it (two backends at once on one device) does not.
TEST(IpcPool, AnOverlappingRunFreesNothingOfTheOther) {
  IpcPoolLedger ledger;
  PoolRun a(ledger);
  PoolRun b(ledger);  // began while a runs
  (void)a.lend(k64K);
  a.end();
  (void)b.lend(4 * k64K);
  b.end();
  PoolRun c(ledger);
  EXPECT_TRUE(c.freed().empty()) << "b began before a ended: a's peers may still read";
  EXPECT_EQ(sizes(c.pool()), (std::vector<size_t>{k64K, 4 * k64K}));
  (void)c.lend(4 * k64K);
  c.end();
  PoolRun d(ledger);
  EXPECT_EQ(d.freed().size(), 1u) << "c began after a ended and lent";
  EXPECT_EQ(sizes(d.pool()), (std::vector<size_t>{4 * k64K}));
  d.end();
  EXPECT_EQ(ledger.buffers(), 1u);
}

}  // namespace
}  // namespace arl::gpu
