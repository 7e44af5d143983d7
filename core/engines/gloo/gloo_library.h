// Gloo as a collective library (exec/collective_library.h): one rank's Gloo context for one
// run, its ranks joined by Gloo's full mesh of TCP pairs (gloo::rendezvous::Context::
// connectFullMesh) after a rendezvous through the run's store on the coordinator
// (runtime/control_store.h), so that no store server of Gloo's is needed. The buffers are the
// rank's host memory (a worker on the cpu backend); every wait of Gloo's is bounded by the
// run's liveness bound (gloo::Context::setTimeout), so a peer that is gone ends the run with
// Gloo's error within that bound, and the rendezvous looks at the run's abort between asks.
//
// The algorithms (Gloo's headers, gloo/allreduce_*.h; Gloo's README, "Algorithms"):
//  - gloo-ring: AllreduceRing, a ring that passes whole buffers: in each of n-1 rounds a rank
//    sends the buffer it last received (its own first) to the right and adds the one from the
//    left, so each rank sends (n-1) x `count` elements, not the 2(n-1)/n x `count` of a
//    reduce-scatter ring;
//  - gloo-ring-chunked: AllreduceRingChunked, a ring over chunks of at least 1 KiB that
//    reduces then broadcasts each chunk along the ring, with a chunk in flight both ways;
//  - gloo-halving-doubling: AllreduceHalvingDoubling, recursive halving then doubling
//    (Thakur, Rabenseifner and Gropp, "Optimization of collective communication operations
//    in MPICH", 2005), with the binary-blocks extension for a rank count that is not a
//    power of two; and ReduceScatterHalvingDoubling for reduce-scatter;
//  - gloo-bcube: AllreduceBcube, the BCube exchange (Guo et al., "BCube: a high performance,
//    server-centric network architecture for modular data centers", 2009) with base 2.
// gloo-ring also stands for Gloo's one allgather, reduce and broadcast (gloo/allgather.h,
// reduce.h, broadcast.h), which have no variants to choose. An iteration is timed whole: Gloo
// reports nothing per chunk.
#pragma once

#include <memory>
#include <string>

#include "exec/collective_library.h"

namespace arl::gloo_engine {

// Refuses, with a line naming it, what Gloo cannot run exactly: a dtype without Gloo
// arithmetic (bfloat16), an op without a Gloo reduction (avg), a collective the algorithm
// does not implement. Throws ConfigError.
void checkGlooRun(const LibraryAlgorithm& algo, Collective c, DataType t, RedOp op);

class GlooLibrary final : public CollectiveLibrary {
 public:
  // Checks the run (checkGlooRun) and that the spec has a store; throws ConfigError.
  explicit GlooLibrary(const LibraryRunSpec& spec);
  ~GlooLibrary() override;
  GlooLibrary(const GlooLibrary&) = delete;
  GlooLibrary& operator=(const GlooLibrary&) = delete;

  // Every rank reports "gloo://store": the rendezvous goes through the store, not Start.
  std::string newBootstrap() override;
  std::string memberEndpoint() override;
  // Makes the TCP device on spec.hostAddress and connects the full mesh through the store.
  // Throws PeerError naming Gloo's reason.
  void join(const std::string& bootstrap, const std::atomic<bool>& cancel) override;
  void run(const RankBuffers& b, const std::atomic<bool>& cancel) override;
  // 0: the lab's inputs are small integers, which every order of Gloo's sums keeps exact.
  double tolerance() const override { return 0.0; }

 private:
  struct State;
  std::unique_ptr<State> st_;
};

// Registers library "gloo" (registerCollectiveLibrary); once, at the worker's start-up.
void registerGloo();

}  // namespace arl::gloo_engine
