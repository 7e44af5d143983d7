// Executor: header validation, timeouts, pipelining hazards and telemetry.
//
// Besides the CPU backend, these tests drive the executor with two adversaries that stand in
// for what a CUDA backend and a zero-copy socket transport do: a backend whose operations
// complete only when waited for (and whose staging is a separate copy), and a transport that
// reads a sent buffer as late as it can and scribbles over received messages once they are
// released. A missing wait in the executor shows up as wrong data.
#include "exec/executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "backend/cpu/cpu_backend.h"
#include "base/errors.h"
#include "exec/check.h"
#include "exec/local_run.h"
#include "exec/numeric.h"
#include "schedule/generators.h"
#include "schedule/verifier.h"
#include "transport/forwarding_transport.h"
#include "transport/loopback.h"

namespace arl {
namespace {

using namespace std::chrono_literals;

// Operations run only when waited for (or one per done() poll), never on issue; staging
// copies into a separate buffer, like a device backend's pinned staging.
class DeferredBackend final : public Backend {
 public:
  ~DeferredBackend() override {
    for (auto* p : allocs_) delete[] p;
  }
  std::string_view name() const override { return "deferred"; }
  MemoryKind memoryKind() const override { return MemoryKind::Device; }
  void* allocate(size_t bytes) override {
    auto* p = new unsigned char[std::max<size_t>(bytes, 1)]();
    allocs_.insert(p);
    return p;
  }
  void deallocate(void* p) override {
    auto* b = static_cast<unsigned char*>(p);
    EXPECT_EQ(allocs_.erase(b), 1u) << "deallocate of unknown memory";
    delete[] b;
  }
  void upload(void* dst, const void* host, size_t bytes) override {
    synchronize();
    std::memcpy(dst, host, bytes);
  }
  void download(void* host, const void* src, size_t bytes) override {
    synchronize();
    std::memcpy(host, src, bytes);
  }
  Ticket reduceFromHost(void* dst, const void* local, const void* payload, size_t count, DataType t,
                        RedOp op) override {
    return enqueue([=] {
      const size_t es = dtypeSize(t);
      for (size_t i = 0; i < count; ++i) {
        reduceScalar(t, op, static_cast<const unsigned char*>(local) + i * es,
                     static_cast<const unsigned char*>(payload) + i * es,
                     static_cast<unsigned char*>(dst) + i * es);
      }
    });
  }
  Ticket copyFromHost(void* dst, const void* payload, size_t bytes) override {
    return enqueue([=] { std::memcpy(dst, payload, bytes); });
  }
  Ticket copy(void* dst, const void* src, size_t bytes) override {
    return enqueue([=] { std::memmove(dst, src, bytes); });
  }
  Ticket stageOut(const void* src, size_t bytes, const void** hostView) override {
    auto buf = std::make_unique<std::vector<unsigned char>>(bytes + 1, 0xEE);
    unsigned char* p = buf->data();
    *hostView = p;
    staged_[p] = std::move(buf);
    return enqueue([=] { std::memcpy(p, src, bytes); });
  }
  void releaseStaged(const void* hostView) override {
    EXPECT_EQ(staged_.erase(hostView), 1u) << "releaseStaged of an unknown view";
  }
  Ticket finalize(void* dst, size_t count, DataType t, RedOp op, int nranks) override {
    ++finalizeCalls;
    return enqueue([=] {
      const size_t es = dtypeSize(t);
      for (size_t i = 0; i < count; ++i) {
        finalizeScalar(t, op, static_cast<unsigned char*>(dst) + i * es, nranks);
      }
    });
  }
  bool done(Ticket t) override {
    if (t > completed_ && !queue_.empty()) runOne();
    return t <= completed_;
  }
  void wait(Ticket t) override {
    while (completed_ < t) runOne();
  }
  void synchronize() override {
    while (!queue_.empty()) runOne();
  }

  size_t stagedOutstanding() const { return staged_.size(); }
  int finalizeCalls = 0;

 private:
  Ticket enqueue(std::function<void()> f) {
    queue_.push_back(std::move(f));
    return ++issued_;
  }
  void runOne() {
    if (queue_.empty()) throw std::logic_error("waiting for a ticket that was never issued");
    queue_.front()();
    queue_.pop_front();
    ++completed_;
  }

  std::set<unsigned char*> allocs_;
  std::map<const void*, std::unique_ptr<std::vector<unsigned char>>> staged_;
  std::deque<std::function<void()>> queue_;
  Ticket issued_ = 0;
  Ticket completed_ = 0;
};

// Zero-copy and lazy: a sent buffer is read only when the sender waits for the send, or when
// it would otherwise block in recv(). Released messages are overwritten.
class LazyTransport final : public Transport {
 public:
  explicit LazyTransport(Transport& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }

  std::shared_ptr<SendCompletion> send(int peer, const ChunkHeader& h, const void* data,
                                       size_t bytes) override {
    auto c = std::make_shared<Completion>(this, ++sent_);
    pending_.push_back({peer, h, data, bytes});
    return c;
  }

  std::unique_ptr<InMessage> recv(int peer, uint32_t step,
                                  std::chrono::milliseconds timeout) override {
    std::unique_ptr<InMessage> m;
    try {
      m = inner_.recv(peer, step, 0ms);
    } catch (const PeerError&) {
      flushThrough(sent_);
      m = inner_.recv(peer, step, timeout);
    }
    return std::make_unique<Poisoned>(std::move(m));
  }
  void abort() override { inner_.abort(); }

 private:
  struct Pending {
    int peer;
    ChunkHeader h;
    const void* data;
    size_t bytes;
  };
  class Completion final : public SendCompletion {
   public:
    Completion(LazyTransport* t, uint64_t id) : t_(t), id_(id) {}
    bool done() const override { return t_->flushed_ >= id_; }
    void wait() override { t_->flushThrough(id_); }

   private:
    LazyTransport* t_;
    uint64_t id_;
  };
  class Poisoned final : public InMessage {
   public:
    explicit Poisoned(std::unique_ptr<InMessage> m) : m_(std::move(m)) {}
    ~Poisoned() override { std::memset(const_cast<void*>(m_->data()), 0xA5, m_->size()); }
    const ChunkHeader& header() const override { return m_->header(); }
    const void* data() const override { return m_->data(); }
    size_t size() const override { return m_->size(); }

   private:
    std::unique_ptr<InMessage> m_;
  };

  void flushThrough(uint64_t id) {
    while (flushed_ < id) {
      const Pending p = pending_.front();
      pending_.pop_front();
      inner_.send(p.peer, p.h, p.data, p.bytes);
      ++flushed_;
    }
  }

  Transport& inner_;
  std::deque<Pending> pending_;
  uint64_t sent_ = 0;
  uint64_t flushed_ = 0;
};

// Forwards everything and logs, for each send, whether Transport::sendFollows announced it
// (naming its peer) just before it, and whether each hint was a promise kept: the next send a
// send to that peer, the one after it a send to the named next peer, both before the run's end.
class HintLog final : public ForwardingTransport {
 public:
  using ForwardingTransport::ForwardingTransport;
  void sendFollows(int peer, int nextPeer) override {
    if (hint_) ++brokenHints;  // two hints in a row
    hint_ = {peer, nextPeer};
  }
  std::shared_ptr<SendCompletion> send(int peer, const ChunkHeader& h, const void* data,
                                       size_t bytes) override {
    if (expectNext_ && *expectNext_ != peer) ++brokenHints;
    expectNext_.reset();
    if (hint_ && hint_->first != peer) ++brokenHints;
    announced.push_back(hint_.has_value());
    if (hint_) expectNext_ = hint_->second;
    hint_.reset();
    return ForwardingTransport::send(peer, h, data, bytes);
  }
  void reclaimAll(uint32_t step) override {
    if (hint_ || expectNext_) ++brokenHints;  // the run ends before the promised sends
    hint_.reset();
    expectNext_.reset();
    ForwardingTransport::reclaimAll(step);
  }

  std::vector<bool> announced;  // per send, in order
  int brokenHints = 0;

 private:
  std::optional<std::pair<int, int>> hint_;
  std::optional<int> expectNext_;
};

struct RunSpec {
  DataType dtype = DataType::Float;
  RedOp op = RedOp::Sum;
  int inflight = 4;
  bool inPlace = false;
  bool deferred = false;  // DeferredBackend instead of the CPU backend
  bool lazy = false;      // LazyTransport over the loopback
  int iterations = 2;     // the executor is reused across iterations
  int window = 1;         // ring's window of slices (GenParams::window)
};

struct RunOutcome {
  uint64_t wrong = 0;
  std::vector<std::vector<unsigned char>> outputs;
  size_t stagedLeft = 0;
  int finalizeCalls = 0;
  std::vector<std::vector<bool>> announced;  // per rank, per send: HintLog::announced
  int brokenHints = 0;
};

// Runs every rank of `s` on its own thread with the chosen backend and transport, checks the
// outputs against check.h's expected values. Rethrows the first rank's exception.
RunOutcome runSchedule(const Schedule& s, const RunSpec& spec) {
  const int n = s.nranks;
  const size_t es = dtypeSize(spec.dtype);
  LoopbackFabric fabric(n);
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<RankBuffers> bufs(static_cast<size_t>(n));
  std::vector<std::vector<unsigned char>> inputs(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    if (spec.deferred) {
      backends.push_back(std::make_unique<DeferredBackend>());
    } else {
      backends.push_back(std::make_unique<CpuBackend>());
    }
    Backend& b = *backends.back();
    RankBuffers& rb = bufs[static_cast<size_t>(r)];
    const size_t off = inPlaceOffset(s, r) * es;
    if (!spec.inPlace) {
      rb.input = b.allocate(s.inputElems * es);
      rb.output = b.allocate(s.outputElems * es);
    } else if (s.collective == Collective::ReduceScatter) {
      rb.input = b.allocate(s.inputElems * es);
      rb.output = static_cast<unsigned char*>(rb.input) + off;
    } else {
      rb.output = b.allocate(s.outputElems * es);
      rb.input = static_cast<unsigned char*>(rb.output) + off;
    }
    if (s.scratchElems > 0) rb.scratch = b.allocate(s.scratchElems * es);
    auto& in = inputs[static_cast<size_t>(r)];
    in.resize(s.inputElems * es);
    fillInput(in.data(), s.collective, spec.dtype, spec.op, r, n, s.count);
  }

  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<std::vector<bool>> announced(static_cast<size_t>(n));
  std::atomic<int> brokenHints{0};
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        Backend& b = *backends[static_cast<size_t>(r)];
        LazyTransport lazy(fabric.transport(r));
        HintLog t(spec.lazy ? static_cast<Transport&>(lazy) : fabric.transport(r));
        ExecOptions eo;
        eo.dtype = spec.dtype;
        eo.op = spec.op;
        eo.inflight = spec.inflight;
        eo.telemetry = TelemetryLevel::Off;
        Executor ex(s, r, t, b, nullptr, eo);
        const RankBuffers& rb = bufs[static_cast<size_t>(r)];
        const auto& in = inputs[static_cast<size_t>(r)];
        for (int it = 0; it < spec.iterations; ++it) {
          b.upload(rb.input, in.data(), in.size());
          // Peers never read this rank's memory, only its messages, so refilling the input
          // for the next iteration cannot disturb a slower peer.
          ex.run(rb, static_cast<uint32_t>(it), static_cast<uint64_t>(it));
        }
        announced[static_cast<size_t>(r)] = t.announced;
        brokenHints += t.brokenHints;
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
        fabric.abort();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }

  RunOutcome out;
  out.announced = std::move(announced);
  out.brokenHints = brokenHints;
  std::vector<unsigned char> expected(s.outputElems * es);
  for (int r = 0; r < n; ++r) {
    Backend& b = *backends[static_cast<size_t>(r)];
    std::vector<unsigned char> got(s.outputElems * es);
    b.download(got.data(), bufs[static_cast<size_t>(r)].output, got.size());
    if (fillExpected(expected.data(), s.collective, spec.dtype, spec.op, r, n, s.count, s.root)) {
      out.wrong += countWrong(got.data(), expected.data(), spec.dtype, s.outputElems);
    }
    out.outputs.push_back(std::move(got));
    if (auto* d = dynamic_cast<DeferredBackend*>(&b)) {
      out.stagedLeft += d->stagedOutstanding();
      out.finalizeCalls += d->finalizeCalls;
    }
  }
  return out;
}

Schedule gen(std::string_view algo, Collective c, int n, uint64_t count, uint64_t slice,
             int root = 0) {
  GenParams p;
  p.collective = c;
  p.nranks = n;
  p.count = count;
  p.sliceElems = slice;
  p.root = root;
  return generate(algo, p);
}

Op makeOp(OpKind kind, int sendPeer, int recvPeer, BufRef src, BufRef dst, uint64_t count,
          uint32_t step, uint32_t chunk) {
  Op op;
  op.kind = kind;
  op.sendPeer = sendPeer;
  op.recvPeer = recvPeer;
  op.src = src;
  op.dst = dst;
  op.count = count;
  op.step = step;
  op.chunk = chunk;
  return op;
}

Schedule emptySchedule(int n, uint64_t count, uint32_t nsteps) {
  Schedule s;
  s.algorithm = "hand";
  s.collective = Collective::AllReduce;
  s.nranks = n;
  s.count = count;
  s.sliceElems = count;
  s.inputElems = count;
  s.outputElems = count;
  s.nsteps = nsteps;
  s.ranks.assign(static_cast<size_t>(n), {});
  return s;
}

TEST(OpSignature, StableAndSensitiveToEveryParameter) {
  const Schedule s = gen("ring", Collective::AllReduce, 4, 100, 10);
  const uint32_t base = opSignature(s, DataType::Float, RedOp::Sum);
  EXPECT_EQ(base, opSignature(s, DataType::Float, RedOp::Sum));
  EXPECT_NE(base, opSignature(s, DataType::Half, RedOp::Sum));
  EXPECT_NE(base, opSignature(s, DataType::Float, RedOp::Max));
  EXPECT_NE(base, opSignature(gen("ring", Collective::AllReduce, 4, 101, 10), DataType::Float,
                              RedOp::Sum));
  EXPECT_NE(base, opSignature(gen("ring", Collective::AllReduce, 5, 100, 10), DataType::Float,
                              RedOp::Sum));
  EXPECT_NE(base, opSignature(gen("ring", Collective::AllReduce, 4, 100, 11), DataType::Float,
                              RedOp::Sum));
  EXPECT_NE(base, opSignature(gen("tree", Collective::AllReduce, 4, 100, 10), DataType::Float,
                              RedOp::Sum));
  EXPECT_NE(
      opSignature(gen("ring", Collective::Reduce, 4, 100, 10, 1), DataType::Float, RedOp::Sum),
      opSignature(gen("ring", Collective::Reduce, 4, 100, 10, 2), DataType::Float, RedOp::Sum));
  // An operator a collective ignores does not make ranks incompatible.
  const Schedule ag = gen("ring", Collective::AllGather, 4, 100, 10);
  EXPECT_EQ(opSignature(ag, DataType::Float, RedOp::Sum),
            opSignature(ag, DataType::Float, RedOp::Max));
}

// Runs rank `a` with schedule sa and rank `b` with sb (each with its own options) over one
// fabric; returns the exception each threw (null when none).
std::pair<std::exception_ptr, std::exception_ptr> runPair(const Schedule& sa, int a, ExecOptions oa,
                                                          uint64_t seqA, const Schedule& sb, int b,
                                                          ExecOptions ob, uint64_t seqB,
                                                          std::vector<float>* bOutput = nullptr) {
  LoopbackFabric fabric(sa.nranks);
  std::exception_ptr ea;
  std::exception_ptr eb;
  const auto body = [&](const Schedule& s, int r, const ExecOptions& o, uint64_t seq,
                        std::exception_ptr& err, std::vector<float>* output) {
    try {
      CpuBackend backend;
      std::vector<float> in(s.inputElems, 1.0f);
      std::vector<float> out(s.outputElems, 7.0f);
      RankBuffers rb;
      rb.input = backend.allocate(in.size() * 4);
      rb.output = backend.allocate(out.size() * 4);
      backend.upload(rb.input, in.data(), in.size() * 4);
      backend.upload(rb.output, out.data(), out.size() * 4);
      Executor ex(s, r, fabric.transport(r), backend, nullptr, o);
      try {
        ex.run(rb, 0, seq);
      } catch (...) {
        if (output) {
          output->resize(out.size());
          backend.download(output->data(), rb.output, out.size() * 4);
        }
        throw;
      }
    } catch (...) {
      err = std::current_exception();
    }
  };
  std::thread ta(body, std::cref(sa), a, oa, seqA, std::ref(ea), nullptr);
  std::thread tb(body, std::cref(sb), b, ob, seqB, std::ref(eb), bOutput);
  ta.join();
  tb.join();
  return {ea, eb};
}

std::string messageOf(const std::exception_ptr& e) {
  if (!e) return "(no error)";
  try {
    std::rethrow_exception(e);
  } catch (const PeerError& pe) {
    return pe.what();
  } catch (const std::exception& ex) {
    return std::string("not a PeerError: ") + ex.what();
  }
  return "?";
}

TEST(Executor, HeaderMismatchNamesBothRanksTheStepAndTheField) {
  // Rank 2 runs a program that sends chunk 2; rank 3's copy of the schedule says rank 2
  // sends chunk 1, and rank 3 would reduce it into its output.
  Schedule sender = emptySchedule(4, 8, 5);
  sender.ranks[2].push_back(makeOp(OpKind::Send, 3, -1, {Buffer::Input, 0}, {}, 8, 4, 2));
  Schedule receiver = sender;
  receiver.ranks[2][0].chunk = 1;
  receiver.ranks[3].push_back(
      makeOp(OpKind::RecvReduceCopy, -1, 2, {Buffer::Input, 0}, {Buffer::Output, 0}, 8, 4, 1));
  sender.ranks[3] = receiver.ranks[3];
  ExecOptions o;
  o.recvTimeout = 5s;
  std::vector<float> out;
  auto [e2, e3] = runPair(sender, 2, o, 0, receiver, 3, o, 0, &out);
  EXPECT_FALSE(e2) << messageOf(e2);
  EXPECT_EQ(messageOf(e3),
            "rank 3: header mismatch from rank 2 at step 4: expected chunk 1, "
            "got chunk 2");
  try {
    std::rethrow_exception(e3);
  } catch (const PeerError& pe) {
    EXPECT_EQ(pe.rank, 3);
    EXPECT_EQ(pe.peer, 2);
    EXPECT_EQ(pe.step, 4);
  }
  // The mismatched payload was never reduced into the output.
  ASSERT_EQ(out.size(), 8u);
  for (float v : out) EXPECT_EQ(v, 7.0f);
}

TEST(Executor, SequenceEpochAndSignatureMismatchesAreCaught) {
  Schedule s = emptySchedule(2, 4, 1);
  s.ranks[0].push_back(makeOp(OpKind::Send, 1, -1, {Buffer::Input, 0}, {}, 4, 0, 0));
  s.ranks[1].push_back(makeOp(OpKind::Recv, -1, 0, {}, {Buffer::Output, 0}, 4, 0, 0));
  ExecOptions o;
  o.recvTimeout = 5s;
  {
    auto [e0, e1] = runPair(s, 0, o, 5, s, 1, o, 6);
    EXPECT_EQ(messageOf(e1),
              "rank 1: header mismatch from rank 0 at step 0: expected sequence "
              "number 6, got sequence number 5");
  }
  {
    ExecOptions other = o;
    other.epoch = 9;
    auto [e0, e1] = runPair(s, 0, other, 0, s, 1, o, 0);
    EXPECT_NE(messageOf(e1).find("expected epoch 0, got epoch 9"), std::string::npos)
        << messageOf(e1);
  }
  {
    ExecOptions other = o;
    other.op = RedOp::Max;
    auto [e0, e1] = runPair(s, 0, other, 0, s, 1, o, 0);
    EXPECT_NE(messageOf(e1).find("expected op signature 0x"), std::string::npos) << messageOf(e1);
  }
  {
    // The two sides disagree on the message's size.
    Schedule shorter = s;
    shorter.ranks[0][0].count = 3;
    auto [e0, e1] = runPair(shorter, 0, o, 0, s, 1, o, 0);
    EXPECT_NE(messageOf(e1).find("expected length 16, got length 12"), std::string::npos)
        << messageOf(e1);
  }
}

TEST(Executor, TimeoutNamesPeerAndStep) {
  Schedule s = emptySchedule(2, 4, 3);
  s.ranks[1].push_back(makeOp(OpKind::Recv, -1, 0, {}, {Buffer::Output, 0}, 4, 2, 0));
  ExecOptions o;
  o.recvTimeout = 50ms;
  auto [e0, e1] = runPair(s, 0, o, 0, s, 1, o, 0);
  EXPECT_FALSE(e0);
  EXPECT_EQ(messageOf(e1), "rank 1: no data from rank 0 for step 2 within 50 ms");
}

TEST(Executor, RejectsZeroInflight) {
  Schedule s = emptySchedule(1, 4, 0);
  LoopbackFabric fabric(1);
  CpuBackend backend;
  ExecOptions o;
  o.inflight = 0;
  EXPECT_THROW(Executor(s, 0, fabric.transport(0), backend, nullptr, o), ConfigError);
}

// Rank 0 sends its output, then receives into the same place. With a zero-copy transport
// that reads late, the executor must wait for the send before letting the receive write.
TEST(Executor, WaitsForZeroCopySendBeforeOverwritingItsBuffer) {
  Schedule s = emptySchedule(2, 4, 2);
  s.ranks[0].push_back(makeOp(OpKind::Send, 1, -1, {Buffer::Output, 0}, {}, 4, 0, 0));
  s.ranks[0].push_back(makeOp(OpKind::Recv, -1, 1, {}, {Buffer::Output, 0}, 4, 1, 0));
  s.ranks[1].push_back(makeOp(OpKind::Send, 0, -1, {Buffer::Input, 0}, {}, 4, 1, 0));
  s.ranks[1].push_back(makeOp(OpKind::Recv, -1, 0, {}, {Buffer::Output, 0}, 4, 0, 0));

  LoopbackFabric fabric(2);
  std::promise<void> rank1Sent;
  std::vector<float> got1(4);
  std::vector<float> got0(4);
  std::thread t1([&] {
    CpuBackend b;
    const std::vector<float> in{10, 11, 12, 13};
    RankBuffers rb{b.allocate(16), b.allocate(16), nullptr};
    b.upload(rb.input, in.data(), 16);
    ExecOptions o;
    o.inflight = 8;
    // Rank 0 starts only once rank 1's message is queued, so its receive finds data at once
    // and a late read of its send would see the overwritten buffer.
    o.beforeOp = [&](size_t i, const Op&) {
      if (i == 1) rank1Sent.set_value();
    };
    Executor ex(s, 1, fabric.transport(1), b, nullptr, o);
    ex.run(rb, 0, 0);
    b.download(got1.data(), rb.output, 16);
  });
  rank1Sent.get_future().wait();
  {
    CpuBackend b;
    const std::vector<float> out{1, 2, 3, 4};
    RankBuffers rb{b.allocate(16), b.allocate(16), nullptr};
    b.upload(rb.output, out.data(), 16);
    LazyTransport lazy(fabric.transport(0));
    ExecOptions o;
    o.inflight = 8;
    Executor ex(s, 0, lazy, b, nullptr, o);
    ex.run(rb, 0, 0);
    b.download(got0.data(), rb.output, 16);
  }
  t1.join();
  EXPECT_EQ(got1, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(got0, (std::vector<float>{10, 11, 12, 13}));
}

struct AdversaryCase {
  std::string algo;
  Collective coll;
  int n;
  RedOp op;
  DataType dtype;
};

void PrintTo(const AdversaryCase& c, std::ostream* os) {
  *os << c.algo << " " << toString(c.coll) << " ranks=" << c.n << " " << toString(c.dtype) << " "
      << toString(c.op);
}

class ExecutorAdversaries : public ::testing::TestWithParam<AdversaryCase> {};

// Deferred backend + lazy zero-copy transport, several window sizes, in and out of place:
// results exact, every staged view released, outputs identical to the CPU backend's.
TEST_P(ExecutorAdversaries, ExactUnderDeferredCompletionAndLateReads) {
  const AdversaryCase& c = GetParam();
  const Schedule s = gen(c.algo, c.coll, c.n, 203, 16, c.n - 1);
  RunSpec ref;
  ref.dtype = c.dtype;
  ref.op = c.op;
  const RunOutcome cpu = runSchedule(s, ref);
  ASSERT_EQ(cpu.wrong, 0u);
  for (int inflight : {1, 2, 8}) {
    for (bool inPlace : {false, true}) {
      RunSpec spec = ref;
      spec.inflight = inflight;
      spec.inPlace = inPlace;
      spec.deferred = true;
      spec.lazy = true;
      const RunOutcome o = runSchedule(s, spec);
      SCOPED_TRACE("inflight " + std::to_string(inflight) + (inPlace ? " in place" : ""));
      EXPECT_EQ(o.wrong, 0u);
      EXPECT_EQ(o.stagedLeft, 0u);
      // Avg is finalised once per iteration on every rank holding a reduced result.
      int finalizing = 0;
      if (collectiveReduces(c.coll) && c.op == RedOp::Avg) {
        finalizing = c.coll == Collective::Reduce ? 1 : c.n;
      }
      EXPECT_EQ(o.finalizeCalls, finalizing * spec.iterations);
      for (int r = 0; r < c.n; ++r) {
        if (c.coll == Collective::Reduce && r != s.root) continue;
        EXPECT_EQ(o.outputs[static_cast<size_t>(r)], cpu.outputs[static_cast<size_t>(r)])
            << "rank " << r;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, ExecutorAdversaries,
    ::testing::Values(
        AdversaryCase{"ring", Collective::AllReduce, 4, RedOp::Avg, DataType::Half},
        AdversaryCase{"ring", Collective::ReduceScatter, 3, RedOp::Sum, DataType::Float},
        AdversaryCase{"ring", Collective::AllGather, 3, RedOp::Sum, DataType::Int32},
        AdversaryCase{"tree", Collective::AllReduce, 5, RedOp::Prod, DataType::Double},
        AdversaryCase{"tree", Collective::Reduce, 4, RedOp::Avg, DataType::BFloat16},
        AdversaryCase{"tree", Collective::Broadcast, 5, RedOp::Sum, DataType::Uint8},
        AdversaryCase{"halving-doubling", Collective::AllReduce, 6, RedOp::Max, DataType::Int64}),
    [](const auto& info) {
      std::string name = info.param.algo + "_" + std::string(toString(info.param.coll)) + "_" +
                         std::to_string(info.param.n);
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

TEST(Executor, InflightAndInPlaceDoNotChangeResults) {
  for (const char* algo : {"ring", "tree"}) {
    const Schedule s = gen(algo, Collective::AllReduce, 5, 1001, 37);
    RunSpec base;
    base.inflight = 1;
    const RunOutcome one = runSchedule(s, base);
    RunSpec eight = base;
    eight.inflight = 8;
    const RunOutcome many = runSchedule(s, eight);
    RunSpec inPlace = eight;
    inPlace.inPlace = true;
    const RunOutcome ip = runSchedule(s, inPlace);
    EXPECT_EQ(one.wrong, 0u) << algo;
    EXPECT_EQ(one.outputs, many.outputs) << algo;
    EXPECT_EQ(one.outputs, ip.outputs) << algo;
  }
}

// Transport::sendFollows: the executor announces a send exactly where its next op only sends
// (a ring window's first step: W sends before anything arrives), so that the TCP plane writes
// the W together; every hint names the two sends that follow, and none is left at the end.
TEST(Executor, AnnouncesASendThatAnotherFollows) {
  for (int window : {1, 4}) {
    GenParams p;
    p.collective = Collective::AllReduce;
    p.nranks = 3;
    p.count = 3 * 64;
    p.sliceElems = 4;  // 16 slices a chunk
    p.window = static_cast<uint32_t>(window);
    const Schedule s = generate("ring", p);
    RunSpec spec;
    spec.inflight = 8;
    const RunOutcome o = runSchedule(s, spec);
    SCOPED_TRACE("window " + std::to_string(window));
    EXPECT_EQ(o.wrong, 0u);
    EXPECT_EQ(o.brokenHints, 0);
    for (int r = 0; r < s.nranks; ++r) {
      // Per send in program order: whether the op after it only sends.
      std::vector<bool> expected;
      const auto& ops = s.ranks[static_cast<size_t>(r)];
      for (size_t i = 0; i < ops.size(); ++i) {
        if (!opSends(ops[i].kind)) continue;
        expected.push_back(i + 1 < ops.size() && opSends(ops[i + 1].kind) &&
                           !opRecvs(ops[i + 1].kind));
      }
      std::vector<bool> all;  // two iterations of the same program
      for (int it = 0; it < spec.iterations; ++it) {
        all.insert(all.end(), expected.begin(), expected.end());
      }
      EXPECT_EQ(o.announced[static_cast<size_t>(r)], all) << "rank " << r;
      // Slice by slice, a send is never followed by another at once; a window of 4 has 3 of
      // its 4 first-step sends announced, in each of its 4 windows, each iteration.
      EXPECT_EQ(std::count(all.begin(), all.end(), true), window == 1 ? 0 : 2 * 4 * 3)
          << "rank " << r;
    }
  }
}

// Telemetry through runLocal: every message yields one SendStart on the sender and one
// RecvEnd on the receiver, matched in channel order, with the provenance the verifier
// derives; Steps keeps only step and iteration ends; Off records nothing.
TEST(ExecutorTelemetry, ChunksPairsEveryMessageWithItsProvenance) {
  Schedule s = gen("ring", Collective::AllReduce, 4, 103, 10);
  Schedule annotated = s;
  ASSERT_TRUE(annotate(annotated).ok);
  BoundedSink sink(100000);
  LocalRunOptions opt;
  opt.telemetry = TelemetryLevel::Chunks;
  opt.sink = &sink;
  opt.iterations = 2;
  opt.warmup = 1;
  opt.runId = 77;
  const LocalRunResult res = runLocal(s, opt);
  EXPECT_EQ(res.wrong, 0u);
  const auto events = sink.take();
  EXPECT_EQ(sink.dropped(), 0u);

  // Expected messages per channel and iteration, in the sender's program order.
  std::map<std::pair<int, int>, std::vector<const Op*>> sends;
  size_t messages = 0;
  for (int r = 0; r < s.nranks; ++r) {
    for (const Op& op : annotated.ranks[static_cast<size_t>(r)]) {
      if (opSends(op.kind)) {
        sends[{r, op.sendPeer}].push_back(&op);
        ++messages;
      }
    }
  }
  ASSERT_GT(messages, 0u);
  for (uint32_t it = 0; it < 2; ++it) {
    std::map<std::pair<int, int>, std::vector<TelemetryEvent>> starts;
    std::map<std::pair<int, int>, std::vector<TelemetryEvent>> recvs;
    size_t ends = 0;
    size_t iterationEnds = 0;
    for (const TelemetryEvent& e : events) {
      EXPECT_EQ(e.runId, 77u);
      ASSERT_LT(e.iteration, 2u) << "warmup iterations report nothing";
      if (e.iteration != it) continue;
      if (e.kind == EventKind::SendStart) starts[{e.rank, e.peer}].push_back(e);
      if (e.kind == EventKind::RecvEnd) recvs[{e.peer, e.rank}].push_back(e);
      if (e.kind == EventKind::SendEnd) ++ends;
      if (e.kind == EventKind::IterationEnd) ++iterationEnds;
    }
    EXPECT_EQ(ends, messages);
    EXPECT_EQ(iterationEnds, static_cast<size_t>(s.nranks));
    for (const auto& [chan, ops] : sends) {
      const auto& st = starts[chan];
      const auto& rv = recvs[chan];
      ASSERT_EQ(st.size(), ops.size()) << chan.first << "->" << chan.second;
      ASSERT_EQ(rv.size(), ops.size()) << chan.first << "->" << chan.second;
      for (size_t k = 0; k < ops.size(); ++k) {
        EXPECT_EQ(st[k].provenance, ops[k]->provenance);
        EXPECT_EQ(rv[k].provenance, ops[k]->provenance);
        EXPECT_NE(st[k].provenance, 0u);
        EXPECT_EQ(st[k].chunk, ops[k]->chunk);
        EXPECT_EQ(rv[k].chunk, ops[k]->chunk);
        EXPECT_EQ(st[k].step, ops[k]->step);
        EXPECT_EQ(rv[k].step, ops[k]->step);
        EXPECT_EQ(st[k].bytes, ops[k]->count * 4);
        EXPECT_EQ(rv[k].bytes, ops[k]->count * 4);
        EXPECT_LE(st[k].tNs, rv[k].tNs) << "a message is received after it is sent";
      }
    }
  }
  // The all-gather half of a ring carries fully reduced chunks.
  bool sawFull = false;
  for (const TelemetryEvent& e : events) {
    if (e.kind == EventKind::SendStart && e.phase == static_cast<uint8_t>(Phase::AllGather)) {
      EXPECT_EQ(e.provenance, 0xFu);
      sawFull = true;
    }
  }
  EXPECT_TRUE(sawFull);
}

TEST(ExecutorTelemetry, StepsKeepsStepAndIterationEndsOnlyAndOffNothing) {
  const Schedule s = gen("ring", Collective::AllReduce, 3, 30, 4);
  BoundedSink sink(100000);
  LocalRunOptions opt;
  opt.sink = &sink;
  opt.telemetry = TelemetryLevel::Steps;
  runLocal(s, opt);
  const auto events = sink.take();
  ASSERT_FALSE(events.empty());
  std::map<int, std::set<uint32_t>> stepsSeen;
  for (const TelemetryEvent& e : events) {
    EXPECT_TRUE(e.kind == EventKind::StepEnd || e.kind == EventKind::IterationEnd)
        << toString(e.kind);
    if (e.kind == EventKind::StepEnd) {
      EXPECT_TRUE(stepsSeen[e.rank].insert(e.step).second) << "one StepEnd per step";
    }
  }
  for (int r = 0; r < 3; ++r) {
    std::set<uint32_t> expect;
    for (const Op& op : s.ranks[static_cast<size_t>(r)]) expect.insert(op.step);
    EXPECT_EQ(stepsSeen[r], expect) << "rank " << r;
  }
  opt.telemetry = TelemetryLevel::Off;
  runLocal(s, opt);
  EXPECT_TRUE(sink.take().empty());
}

}  // namespace
}  // namespace arl
