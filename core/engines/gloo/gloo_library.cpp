#include "engines/gloo/gloo_library.h"

#include <gloo/algorithm.h>
#include <gloo/allgather.h>
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "base/errors.h"

namespace arl::gloo_engine {

namespace {

constexpr std::string_view kStoreEndpoint = "gloo://store";

// Gloo's Store over the run's store: Gloo's waits carry its context's timeout, and the run's
// abort ends them between asks.
class StoreAdapter final : public ::gloo::rendezvous::Store {
 public:
  StoreAdapter(RendezvousStore& store, std::chrono::milliseconds timeout,
               const std::atomic<bool>& cancel)
      : store_(store), timeout_(timeout), cancel_(cancel) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const std::string v = store_.get(key, timeout_, cancel_);
    return {v.begin(), v.end()};
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& t) override {
    for (const std::string& k : keys) (void)store_.get(k, t, cancel_);
  }

 private:
  RendezvousStore& store_;
  std::chrono::milliseconds timeout_;
  const std::atomic<bool>& cancel_;
};

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

// The element type of `t` as a tag, for the templates of Gloo's algorithms.
template <class F>
void withType(DataType t, F&& f) {
  switch (t) {
    case DataType::Float: return f(float{});
    case DataType::Double: return f(double{});
    case DataType::Half: return f(::gloo::float16{});
    case DataType::Int32: return f(int32_t{});
    case DataType::Int64: return f(int64_t{});
    case DataType::Uint8: return f(uint8_t{});
    case DataType::BFloat16: break;
  }
  ARL_ENFORCE(false, "no Gloo type for " << toString(t));
}

template <class T>
const ::gloo::ReductionFunction<T>* reductionOf(RedOp op) {
  switch (op) {
    case RedOp::Sum: return ::gloo::ReductionFunction<T>::sum;
    case RedOp::Prod: return ::gloo::ReductionFunction<T>::product;
    case RedOp::Min: return ::gloo::ReductionFunction<T>::min;
    case RedOp::Max: return ::gloo::ReductionFunction<T>::max;
    case RedOp::Avg: break;
  }
  ARL_ENFORCE(false, "no Gloo reduction for " << toString(op));
}

template <class T>
ReduceFn reduceFnOf(RedOp op) {
  switch (op) {
    case RedOp::Sum: return static_cast<ReduceFn>(&::gloo::sum<T>);
    case RedOp::Prod: return static_cast<ReduceFn>(&::gloo::product<T>);
    case RedOp::Min: return static_cast<ReduceFn>(&::gloo::min<T>);
    case RedOp::Max: return static_cast<ReduceFn>(&::gloo::max<T>);
    case RedOp::Avg: break;
  }
  ARL_ENFORCE(false, "no Gloo reduction for " << toString(op));
}

// Gloo's all-reduce class for `variant`, in place on `buf`.
template <class T>
std::unique_ptr<::gloo::Algorithm> makeAllreduce(std::string_view variant,
                                                 const std::shared_ptr<::gloo::Context>& ctx,
                                                 T* buf, int count, RedOp op) {
  const std::vector<T*> ptrs{buf};
  const auto* fn = reductionOf<T>(op);
  if (variant == "AllreduceRing")
    return std::make_unique<::gloo::AllreduceRing<T>>(ctx, ptrs, count, fn);
  if (variant == "AllreduceRingChunked") {
    return std::make_unique<::gloo::AllreduceRingChunked<T>>(ctx, ptrs, count, fn);
  }
  if (variant == "AllreduceHalvingDoubling") {
    return std::make_unique<::gloo::AllreduceHalvingDoubling<T>>(ctx, ptrs, count, fn);
  }
  ARL_ENFORCE(variant == "AllreduceBcube", "no Gloo all-reduce called " << variant);
  return std::make_unique<::gloo::AllreduceBcube<T>>(ctx, ptrs, count, fn);
}

}  // namespace

void checkGlooRun(const LibraryAlgorithm& algo, Collective c, DataType t, RedOp op) {
  const std::string who = std::string(algo.name) + ": ";
  if (!algo.supports(c)) {
    throw ConfigError(who + "Gloo's " + std::string(algo.variant) + " has no " +
                      std::string(toString(c)) + " (it runs " +
                      (algo.collectives.size() == 1 ? "allreduce only" : "other collectives") +
                      ")");
  }
  if (t == DataType::BFloat16) {
    throw ConfigError(who +
                      "Gloo has no bfloat16 arithmetic (float, double, half, int32, "
                      "int64 and uint8 it has)");
  }
  const bool reduces = c != Collective::AllGather && c != Collective::Broadcast;
  if (reduces && op == RedOp::Avg) {
    throw ConfigError(who + "Gloo has no avg reduction (sum, prod, min and max it has)");
  }
}

struct GlooLibrary::State {
  LibraryRunSpec spec;
  std::shared_ptr<::gloo::transport::Device> device;
  std::shared_ptr<::gloo::rendezvous::Context> ctx;
  // The all-reduce and reduce-scatter classes bind their buffers when made: made at the
  // first iteration on its buffers, and again only if RankRun hands other ones.
  std::unique_ptr<::gloo::Algorithm> algorithm;
  void* boundTo = nullptr;
  std::vector<char> work;  // reduce-scatter: Gloo reduces the whole input in place
  uint32_t tag = 0;        // the collectives of gloo/*.h: one tag per call
  bool failed = false;     // a collective or the rendezvous failed: no goodbye
  const std::atomic<bool>* cancel = nullptr;  // the run's abort, from join()

  // Gloo's error as this rank's failure. A pair that breaks is most often a peer that died,
  // which the coordinator sees itself and names: the rank waits for the run's abort up to the
  // liveness bound, so that the cause is reported before this consequence of it.
  [[noreturn]] void fail(const std::string& what, const std::atomic<bool>& cancel) {
    failed = true;
    const auto until = std::chrono::steady_clock::now() + spec.timeout;
    while (!cancel.load() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (cancel.load()) throw PeerError(spec.rank, -1, -1, "run aborted (Gloo: " + what + ")");
    throw PeerError(spec.rank, -1, -1, "Gloo: " + what);
  }
  template <class T>
  void allreduce(const RankBuffers& b);
  template <class T>
  void reduceScatter(const RankBuffers& b);
  template <class T>
  void allgather(const RankBuffers& b);
  template <class T>
  void reduce(const RankBuffers& b);
  template <class T>
  void broadcast(const RankBuffers& b);
};

// The lab's out-of-place all-reduce copies its input into the output first: Gloo's classes
// reduce in place. The copy is inside the iteration's time.
template <class T>
void GlooLibrary::State::allreduce(const RankBuffers& b) {
  const size_t bytes = spec.count * sizeof(T);
  if (b.input != b.output) std::memcpy(b.output, b.input, bytes);
  if (!algorithm || boundTo != b.output) {
    algorithm = makeAllreduce<T>(spec.algorithm->variant, ctx, static_cast<T*>(b.output),
                                 static_cast<int>(spec.count), spec.op);
    boundTo = b.output;
  }
  algorithm->run();
}

// ReduceScatterHalvingDoubling reduces n x count elements in place and leaves the rank's
// `count` at the front of the buffer (its distribution phase copies each received piece to
// offset 0 on, gloo/reduce_scatter.h); the lab's input stays as it was, so Gloo works on a copy.
template <class T>
void GlooLibrary::State::reduceScatter(const RankBuffers& b) {
  const size_t n = static_cast<size_t>(spec.nranks);
  const size_t bytes = spec.count * sizeof(T);
  work.resize(n * bytes);
  std::memcpy(work.data(), b.input, n * bytes);
  if (!algorithm || boundTo != work.data()) {
    const std::vector<T*> ptrs{reinterpret_cast<T*>(work.data())};
    const std::vector<int> recvElems(n, static_cast<int>(spec.count));
    algorithm = std::make_unique<::gloo::ReduceScatterHalvingDoubling<T>>(
        ctx, ptrs, static_cast<int>(n * spec.count), recvElems, reductionOf<T>(spec.op));
    boundTo = work.data();
  }
  algorithm->run();
  std::memcpy(b.output, work.data(), bytes);
}

// In place (NCCL's convention: the input is the rank's piece of the output) Gloo's allgather
// is given no input.
template <class T>
void GlooLibrary::State::allgather(const RankBuffers& b) {
  ::gloo::AllgatherOptions o(ctx);
  T* out = static_cast<T*>(b.output);
  if (b.input != out + static_cast<size_t>(spec.rank) * spec.count) {
    o.setInput(static_cast<T*>(b.input), spec.count);
  }
  o.setOutput(out, spec.count * static_cast<size_t>(spec.nranks));
  o.setTag(tag++);
  o.setTimeout(spec.timeout);
  ::gloo::allgather(o);
}

template <class T>
void GlooLibrary::State::reduce(const RankBuffers& b) {
  ::gloo::ReduceOptions o(ctx);
  o.setInput(static_cast<T*>(b.input), spec.count);
  o.setOutput(static_cast<T*>(b.output), spec.count);
  o.setRoot(spec.root);
  o.setReduceFunction(reduceFnOf<T>(spec.op));
  o.setTag(tag++);
  o.setTimeout(spec.timeout);
  ::gloo::reduce(o);
}

template <class T>
void GlooLibrary::State::broadcast(const RankBuffers& b) {
  ::gloo::BroadcastOptions o(ctx);
  if (spec.rank == spec.root) o.setInput(static_cast<T*>(b.input), spec.count);
  o.setOutput(static_cast<T*>(b.output), spec.count);
  o.setRoot(spec.root);
  o.setTag(tag++);
  o.setTimeout(spec.timeout);
  ::gloo::broadcast(o);
}

GlooLibrary::GlooLibrary(const LibraryRunSpec& spec) : st_(std::make_unique<State>()) {
  ARL_ENFORCE(spec.algorithm != nullptr, "a Gloo run without its algorithm");
  checkGlooRun(*spec.algorithm, spec.collective, spec.dtype, spec.op);
  if (spec.store == nullptr) {
    throw ConfigError(std::string(spec.algorithm->name) +
                      " needs the run's store for its rendezvous; this program gives none");
  }
  const uint64_t elems = spec.collective == Collective::ReduceScatter
                             ? spec.count * static_cast<uint64_t>(spec.nranks)
                             : spec.count;
  if (elems > static_cast<uint64_t>(INT_MAX)) {
    throw ConfigError(std::string(spec.algorithm->name) + ": " + std::to_string(elems) +
                      " elements, more than Gloo's algorithms count (an int, " +
                      std::to_string(INT_MAX) + ")");
  }
  st_->spec = spec;
}

// After a run that went well, a barrier before the pairs close: a rank that closed a socket
// with a peer's bytes still unread in it would reset the connection (TCP's RST), and the
// peer, still finishing its last collective, would fail with "Connection closed by peer".
GlooLibrary::~GlooLibrary() {
  State& s = *st_;
  if (!s.ctx || s.failed || (s.cancel != nullptr && s.cancel->load())) return;
  try {
    ::gloo::BarrierOptions o(s.ctx);
    o.setTag(s.tag++);
    o.setTimeout(s.spec.timeout);
    ::gloo::barrier(o);
  } catch (const std::exception&) {
    // A peer gone at the very end: the run's result is already decided.
  }
}

std::string GlooLibrary::newBootstrap() { return std::string(kStoreEndpoint); }
std::string GlooLibrary::memberEndpoint() { return std::string(kStoreEndpoint); }

void GlooLibrary::join(const std::string& /*bootstrap*/, const std::atomic<bool>& cancel) {
  State& s = *st_;
  s.cancel = &cancel;
  try {
    ::gloo::transport::tcp::attr attr;
    attr.hostname = s.spec.hostAddress;
    s.device = ::gloo::transport::tcp::CreateDevice(attr);
    s.ctx = std::make_shared<::gloo::rendezvous::Context>(s.spec.rank, s.spec.nranks);
    s.ctx->setTimeout(s.spec.timeout);
    StoreAdapter store(*s.spec.store, s.spec.timeout, cancel);
    s.ctx->connectFullMesh(store, s.device);
  } catch (const PeerError&) {
    s.failed = true;
    throw;
  } catch (const std::exception& e) {
    s.fail(std::string("joining the full mesh on ") + s.spec.hostAddress + ": " + e.what(), cancel);
  }
}

void GlooLibrary::run(const RankBuffers& b, const std::atomic<bool>& cancel) {
  State& s = *st_;
  if (cancel.load()) {
    s.failed = true;
    throw PeerError(s.spec.rank, -1, -1, "run aborted");
  }
  ARL_ENFORCE(s.ctx != nullptr, "a Gloo collective before join()");
  if (s.spec.count == 0) return;
  try {
    withType(s.spec.dtype, [&](auto tag) {
      using T = decltype(tag);
      switch (s.spec.collective) {
        case Collective::AllReduce: return s.allreduce<T>(b);
        case Collective::ReduceScatter: return s.reduceScatter<T>(b);
        case Collective::AllGather: return s.allgather<T>(b);
        case Collective::Reduce: return s.reduce<T>(b);
        case Collective::Broadcast: return s.broadcast<T>(b);
      }
    });
  } catch (const PeerError&) {
    s.failed = true;
    throw;
  } catch (const std::exception& e) {
    s.fail(e.what(), cancel);
  }
}

void registerGloo() {
  registerCollectiveLibrary("gloo", [](const LibraryRunSpec& spec) {
    return std::unique_ptr<CollectiveLibrary>(std::make_unique<GlooLibrary>(spec));
  });
}

}  // namespace arl::gloo_engine
