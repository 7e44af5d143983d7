// A training run on the run thread (run_job_steps.h, runTrainJob): the rank's replica of the
// model (train/replica.h) trains cfg.train->steps steps on its shard of the data.
//
// Synchronous modes (allreduce, ps): the backward pass hands each bucket, as soon as its last
// gradient is written, to a reducer thread that runs the bucket's collective with the run's
// algorithm and slice over the run's data plane (the same executor as any run), so the
// collective of one bucket overlaps the backward pass of the layers before it; with overlap
// off every bucket waits for the end of the backward pass. Every rank then applies the same
// summed gradient, and reports the digest of its weights, by which the client checks that
// the replicas are bitwise identical.
//
// ps-async: rank 0 is the parameter server as well as a worker. Each worker pushes its whole
// gradient to the server when its backward pass ends and waits for the weights the server
// sends back after applying it; the server applies each push as it comes, without waiting
// for the other workers (Dean et al., "Large Scale Distributed Deep Networks", NIPS 2012:
// Downpour SGD). The server measures, at each push, how many updates happened since the
// worker pulled (staleness) and how far the worker's weights are from its own (spread).
//
// Telemetry (at any level but off): every compute span (a layer's forward or backward pass,
// the optimizer) is an event of its own kind in the rank's ring, and the buckets' executors
// record their chunk events there at the run's level, so that one timeline per rank holds the
// compute and the collectives it overlapped. ps-async's push and pull record no events.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "backend/registry.h"
#include "base/clock.h"
#include "base/errors.h"
#include "exec/executor.h"
#include "exec/telemetry_ring.h"
#include "runtime/run_job_steps.h"
#include "runtime/worker_log.h"
#include "train/replica.h"

namespace arl::jobsteps {
namespace {

constexpr int kComputeNice = 5;

// The spans of one step of this rank, from the compute thread and the reducer thread.
class StepSpans {
 public:
  void begin(int64_t t0) {
    std::lock_guard<std::mutex> lock(mu_);
    t0_ = t0;
    spans_.clear();
  }
  void add(TrainSpan::Kind k, uint32_t index, int64_t start, int64_t end) {
    std::lock_guard<std::mutex> lock(mu_);
    spans_.push_back(TrainSpan{k, index, start - t0_, end - t0_});
  }
  std::vector<TrainSpan> take() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<TrainSpan> out = std::move(spans_);
    spans_.clear();
    std::sort(out.begin(), out.end(),
              [](const TrainSpan& a, const TrainSpan& b) { return a.startNs < b.startNs; });
    return out;
  }

 private:
  std::mutex mu_;
  int64_t t0_ = 0;
  std::vector<TrainSpan> spans_;
};

// Time covered by spans of the kinds `pick` accepts (overlapping spans counted once).
int64_t coveredNs(const std::vector<TrainSpan>& spans, bool (*pick)(TrainSpan::Kind)) {
  std::vector<std::pair<int64_t, int64_t>> iv;
  for (const TrainSpan& s : spans)
    if (pick(s.kind)) iv.emplace_back(s.startNs, s.endNs);
  std::sort(iv.begin(), iv.end());
  int64_t total = 0, curS = 0, curE = 0;
  bool open = false;
  for (const auto& [s, e] : iv) {
    if (open && s <= curE) {
      curE = std::max(curE, e);
      continue;
    }
    if (open) total += curE - curS;
    curS = s;
    curE = e;
    open = true;
  }
  if (open) total += curE - curS;
  return total;
}

bool isCommunication(TrainSpan::Kind k) { return !isCompute(k); }

// Time covered both by compute spans and by communication spans.
int64_t overlapNs(const std::vector<TrainSpan>& spans) {
  std::vector<TrainSpan> both;
  for (const TrainSpan& c : spans) {
    if (!isCompute(c.kind)) continue;
    for (const TrainSpan& m : spans) {
      if (isCompute(m.kind)) continue;
      const int64_t s = std::max(c.startNs, m.startNs), e = std::min(c.endNs, m.endNs);
      if (s < e) both.push_back(TrainSpan{TrainSpan::Kind::Forward, 0, s, e});
    }
  }
  return coveredNs(both, isCompute);
}

// The schedule of one bucket's collective: the run's algorithm and slice on `count` floats,
// annotated as any run's for chunk telemetry.
Schedule bucketSchedule(const RunJob& j, uint64_t count) {
  RunConfig b = j.cfg;
  b.count = count;
  return runSchedule(b, j.rank, j.cancelled);
}

// The rank's ring, shared by the compute thread (compute spans) and the reducer thread (the
// buckets' chunk events). The ring takes one producer, so the two take turns under a lock: a
// record is tens of nanoseconds and a step records a few dozen compute spans, so the reducer
// thread seldom waits on it.
class SharedSink final : public TelemetrySink {
 public:
  explicit SharedSink(TelemetryRing& ring) : ring_(ring) {}
  void record(const TelemetryEvent& e) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    ring_.record(e);
  }

 private:
  std::mutex mu_;
  TelemetryRing& ring_;
};

// The rank's telemetry of a training run: none at level Off.
struct TrainTelemetry {
  explicit TrainTelemetry(RunJob& j) {
    if (j.ring != nullptr && j.cfg.telemetry != TelemetryLevel::Off) shared.emplace(*j.ring);
  }
  TelemetrySink* sink() { return shared ? &*shared : nullptr; }
  std::optional<SharedSink> shared;
};

EventKind computeKind(TrainSpan::Kind k) {
  switch (k) {
    case TrainSpan::Kind::Forward: return EventKind::ComputeForward;
    case TrainSpan::Kind::Backward: return EventKind::ComputeBackward;
    default: return EventKind::ComputeOptimizer;
  }
}

// Records a compute span of training step `step` (steady clock times) as its event, on the
// coordinator's clock.
void recordCompute(const RunJob& j, TelemetrySink* sink, uint32_t step, TrainSpan::Kind k,
                   uint32_t index, int64_t start, int64_t end) {
  if (sink == nullptr || !isCompute(k)) return;
  TelemetryEvent e;
  e.runId = j.cfg.runId;
  e.rank = j.rank;
  e.iteration = step;
  e.kind = computeKind(k);
  e.chunk = index;
  e.tNs = end + j.offsetNs;
  e.offset = static_cast<uint64_t>(std::max<int64_t>(0, end - start));
  sink->record(e);
}

// Runs the buckets' collectives, in the order they are handed over, on a thread of its own.
class BucketReducer {
 public:
  // `sink`: where the buckets' executors record (may be null).
  BucketReducer(RunJob& j, Backend& backend, const std::vector<Bucket>& buckets,
                const std::map<uint64_t, Schedule>& schedules, TelemetrySink* sink)
      : j_(j), backend_(backend), buckets_(buckets), sink_(sink) {
    size_t total = 0;
    for (const Bucket& b : buckets) total = std::max(total, b.end);
    reduced_.assign(total, 0.0f);
    for (const Bucket& b : buckets) {
      const Schedule& s = schedules.at(b.end - b.begin);
      Slot slot;
      slot.schedule = &s;
      slot.bufs.input = backend.allocate((b.end - b.begin) * sizeof(float));
      slot.bufs.output = backend.allocate((b.end - b.begin) * sizeof(float));
      if (s.scratchElems > 0) slot.bufs.scratch = backend.allocate(s.scratchElems * sizeof(float));
      slots_.push_back(slot);
    }
    eo_ = rankRunOptions(j).exec;
  }
  ~BucketReducer() {
    stop();
    for (Slot& s : slots_) {
      backend_.deallocate(s.bufs.input);
      backend_.deallocate(s.bufs.output);
      if (s.bufs.scratch != nullptr) backend_.deallocate(s.bufs.scratch);
    }
  }
  BucketReducer(const BucketReducer&) = delete;
  BucketReducer& operator=(const BucketReducer&) = delete;

  // Starts the thread; the executors are made on it, over `transport`.
  void start(Transport& transport) {
    th_ = std::thread([this, &transport] { loop(transport); });
  }
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (th_.joinable()) th_.join();
  }

  void beginStep(uint32_t step, StepSpans* spans) {
    std::lock_guard<std::mutex> lock(mu_);
    step_ = step;
    spans_ = spans;
    pending_ = 0;
  }
  // Bucket b's gradients are in `grads`: copied to its buffer now, reduced on the thread.
  void submit(size_t b, const float* grads) {
    const Bucket& bk = buckets_[b];
    backend_.upload(slots_[b].bufs.input, grads + bk.begin, (bk.end - bk.begin) * sizeof(float));
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(b);
      ++pending_;
    }
    cv_.notify_all();
  }
  // Waits for every bucket submitted this step; rethrows what the thread met. The reduced
  // gradient is then in reduced().
  void waitAll() {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return pending_ == 0 || error_; });
    if (error_) std::rethrow_exception(error_);
  }
  const float* reduced() const { return reduced_.data(); }

 private:
  struct Slot {
    const Schedule* schedule = nullptr;
    RankBuffers bufs;
  };

  void loop(Transport& transport) {
    std::map<const Schedule*, std::unique_ptr<Executor>> executors;
    try {
      for (;;) {
        size_t b = 0;
        uint32_t step = 0;
        StepSpans* spans = nullptr;
        {
          std::unique_lock<std::mutex> lock(mu_);
          cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
          if (queue_.empty()) return;
          b = queue_.front();
          queue_.pop_front();
          step = step_;
          spans = spans_;
        }
        Slot& slot = slots_[b];
        auto& ex = executors[slot.schedule];
        if (!ex) {
          ex = std::make_unique<Executor>(*slot.schedule, j_.rank, transport, backend_, sink_, eo_);
        }
        const int64_t t0 = steadyNowNs();
        ex->run(slot.bufs, step, uint64_t{step} * buckets_.size() + b);
        const Bucket& bk = buckets_[b];
        backend_.download(reduced_.data() + bk.begin, slot.bufs.output,
                          (bk.end - bk.begin) * sizeof(float));
        if (spans != nullptr)
          spans->add(TrainSpan::Kind::Reduce, static_cast<uint32_t>(b), t0, steadyNowNs());
        {
          std::lock_guard<std::mutex> lock(mu_);
          --pending_;
        }
        done_.notify_all();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = std::current_exception();
      done_.notify_all();
    }
  }

  RunJob& j_;
  Backend& backend_;
  const std::vector<Bucket>& buckets_;
  TelemetrySink* sink_;
  std::vector<float> reduced_;
  std::vector<Slot> slots_;
  ExecOptions eo_;
  std::thread th_;
  std::mutex mu_;
  std::condition_variable cv_, done_;
  std::deque<size_t> queue_;
  size_t pending_ = 0;
  uint32_t step_ = 0;
  StepSpans* spans_ = nullptr;
  bool stopping_ = false;
  std::exception_ptr error_;
};

// Posts step `step`'s report: its time as the iteration's, its spans and sums.
void postStep(RunJob& j, uint32_t step, double loss, int64_t stepNs, std::vector<TrainSpan> spans,
              uint64_t digest, uint32_t staleness, double spread) {
  TrainRankStep t;
  t.rank = j.rank;
  t.step = step;
  t.loss = loss;
  t.stepNs = stepNs;
  t.computeNs = coveredNs(spans, isCompute);
  t.commNs = coveredNs(spans, isCommunication);
  t.exposedNs = std::max<int64_t>(0, stepNs - t.computeNs);
  t.hiddenNs = overlapNs(spans);
  t.digest = digest;
  t.staleness = staleness;
  t.spread = spread;
  if (spans.size() > kMaxTrainSpans) spans.resize(kMaxTrainSpans);
  t.spans = std::move(spans);
  IterationResult r;
  r.epoch = j.cfg.epoch;
  r.rank = j.rank;
  r.iteration = step;
  r.timeNs = static_cast<uint64_t>(stepNs);
  r.train = std::move(t);
  j.postResult(std::move(r));
}

void throwIfCancelled(RunJob& j, uint32_t step) {
  if (j.cancelled.load())
    throw PeerError(j.rank, -1, -1, "run aborted at training step " + std::to_string(step));
}

// Marks the run at `step` for heartbeats and RunFailed.
void enterStep(RunJob& j, uint32_t step, int64_t& iteration) {
  iteration = step;
  j.iteration.store(step);
  j.step.store(0);
  j.progress.tick();
}

// Keeps each span for the step's report and records each compute span as telemetry;
// `step`: the step under way, read at each span.
SpanFn spanRecorder(RunJob& j, StepSpans& spans, TelemetrySink* sink, const uint32_t& step) {
  return [&j, &spans, sink, &step](TrainSpan::Kind k, uint32_t index, int64_t s, int64_t e) {
    j.progress.tick();
    spans.add(k, index, s, e);
    recordCompute(j, sink, step, k, index, s, e);
  };
}

void trainSteps(RunJob& j, Replica& replica, BucketReducer& reducer, TelemetrySink* sink,
                int64_t& iteration) {
  const TrainConfig& t = *j.cfg.train;
  StepSpans spans;
  uint32_t step = 0;
  const SpanFn span = spanRecorder(j, spans, sink, step);
  std::vector<size_t> held;
  for (; step < t.steps; ++step) {
    throwIfCancelled(j, step);
    enterStep(j, step, iteration);
    const int64_t t0 = steadyNowNs();
    spans.begin(t0);
    reducer.beginStep(step, &spans);
    held.clear();
    const double loss = replica.computeGradients(
        step,
        [&](size_t b) {
          if (t.overlap) {
            reducer.submit(b, replica.grads());
          } else {
            held.push_back(b);
          }
        },
        span);
    for (size_t b : held) reducer.submit(b, replica.grads());
    reducer.waitAll();
    replica.applyUpdate(reducer.reduced(), span);
    const int64_t stepNs = steadyNowNs() - t0;
    postStep(j, step, loss, stepNs, spans.take(), replica.digest(), 0, 0.0);
  }
}

using Fail = std::function<void(const std::exception&)>;

// Lowers this (the compute) thread's priority below the reducer thread's: with every core
// computing, a bucket's collective waited for a core at each of its messages, and stretched
// from 112 ms to 164 ms per step under overlap (2 workers on 2 cores, shaped ports, busy
// machine; docs/training.md). A GPU's copy engines do not wait for its SMs either. The run
// thread ends with the run, and its priority with it.
void yieldToCommunication() {
  errno = 0;
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kComputeNice) != 0 && errno != 0)
    workerLog("training: cannot lower the compute thread's priority: " +
              std::string(std::strerror(errno)));
}

// allreduce and ps: every step, every bucket reduced, the same update everywhere. A failure
// is reported (`fail` aborts the data plane) before the reducer thread is joined: it may be
// waiting for a peer's data. Returns false after a failure.
bool trainSynchronous(RunJob& j, Replica& replica, Backend& backend, Transport& transport,
                      const std::map<uint64_t, Schedule>& schedules, int64_t& iteration,
                      const Fail& fail) {
  TrainTelemetry telemetry(j);
  BucketReducer reducer(j, backend, replica.buckets(), schedules, telemetry.sink());
  reducer.start(transport);
  yieldToCommunication();
  try {
    trainSteps(j, replica, reducer, telemetry.sink(), iteration);
  } catch (const std::exception& e) {
    fail(e);
    return false;
  }
  reducer.stop();
  return true;
}

// ---- ps-async ------------------------------------------------------------------------------

constexpr uint32_t kPsAsyncSignature = 0x50534153;  // "PSAS": no schedule's op signature

// What the server sends ahead of the weights.
struct PullHead {
  uint64_t version = 0;    // server updates the weights have seen
  uint32_t staleness = 0;  // updates between the worker's previous pull and this push
  uint32_t reserved = 0;
  double spread = 0;  // distance of the worker's weights from the server's at the push
};

// Sends `n` floats to `peer` in slices of the run's slice size; waits until all are sent.
void sendFloats(RunJob& j, Transport& tr, int peer, uint32_t step, uint32_t chunk,
                const float* data, size_t n) {
  const size_t sliceElems = std::max<size_t>(1, j.cfg.sliceBytes / sizeof(float));
  std::vector<std::shared_ptr<SendCompletion>> sent;
  uint32_t k = 0;
  for (size_t off = 0; off < n; off += sliceElems, ++k) {
    const size_t len = std::min(sliceElems, n - off);
    ChunkHeader h;
    h.opSignature = kPsAsyncSignature;
    h.epoch = j.cfg.epoch;
    h.seq = step;
    h.src = j.rank;
    h.step = step;
    h.chunk = chunk;
    h.slice = k;
    h.offset = off;
    h.length = len * sizeof(float);
    sent.push_back(tr.send(peer, h, data + off, len * sizeof(float)));
  }
  for (auto& s : sent) s->wait();
}

// Receives `n` floats from `peer` (sent by sendFloats with `chunk`) into `out`.
void recvFloats(RunJob& j, Transport& tr, int peer, uint32_t chunk, float* out, size_t n) {
  const size_t sliceElems = std::max<size_t>(1, j.cfg.sliceBytes / sizeof(float));
  for (size_t off = 0; off < n; off += sliceElems) {
    const size_t len = std::min(sliceElems, n - off);
    std::unique_ptr<InMessage> m = tr.recv(peer, 0, kNoTimeout);
    const ChunkHeader& h = m->header();
    if (h.opSignature != kPsAsyncSignature || h.epoch != j.cfg.epoch || h.src != peer ||
        h.chunk != chunk || h.offset != off || h.length != len * sizeof(float) ||
        m->size() != len * sizeof(float)) {
      throw PeerError(j.rank, peer, static_cast<int64_t>(h.step),
                      "ps-async: rank " + std::to_string(peer) +
                          " sent a message that is not the expected part of its " +
                          (chunk == 0 ? "gradient" : "weights") + " (offset " +
                          std::to_string(h.offset) + ", expected " + std::to_string(off) + ")");
    }
    std::memcpy(out + off, m->data(), len * sizeof(float));
  }
}

// The server's state on rank 0: the weights every worker holds and the one it updates.
class PsServer {
 public:
  PsServer(const TrainConfig& t, int nranks)
      : opt_(t, 0, nranks),
        n_(opt_.paramCount()),
        nranks_(nranks),
        sent_(static_cast<size_t>(nranks), std::vector<float>(n_)),
        sentVersion_(static_cast<size_t>(nranks), 0),
        scaled_(n_) {
    for (auto& w : sent_) std::memcpy(w.data(), opt_.params(), n_ * sizeof(float));
  }
  size_t paramCount() const { return n_; }
  // Applies rank r's gradient of its step `step` and records what r holds afterwards: the
  // weights now. The head's spread is step `step`'s when this push completes it (every rank
  // has done the step), else 0.
  PullHead push(int r, uint32_t step, const float* g) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto k = static_cast<size_t>(r);
    PullHead h;
    h.staleness = static_cast<uint32_t>(version_ - sentVersion_[k]);
    // A push is one rank's shard; the update it makes is that shard's mean gradient.
    for (size_t i = 0; i < n_; ++i) scaled_[i] = g[i] * static_cast<float>(nranks_);
    opt_.applyUpdate(scaled_.data(), [](TrainSpan::Kind, uint32_t, int64_t, int64_t) {});
    ++version_;
    std::memcpy(sent_[k].data(), opt_.params(), n_ * sizeof(float));
    sentVersion_[k] = version_;
    h.version = version_;
    h.spread = noteStep(r, step, sent_[k].data());
    return h;
  }
  // The weights rank r now holds (until its next push).
  const float* sentTo(int r) const { return sent_[static_cast<size_t>(r)].data(); }

 private:
  // Step `step` of every rank, until the last rank has done it: rank 0's weights after it, or
  // the weights of the ranks that did it before rank 0, and the largest distance so far.
  struct StepWeights {
    int done = 0;
    std::vector<float> rank0;
    std::vector<std::vector<float>> early;
    double spread = 0;
  };

  // Rank r holds `w` after its step `step`. The spread of a step is the largest distance of a
  // rank's weights after that step from rank 0's after the same step: a slow rank pulls
  // weights that the fast ranks have moved on further at each step, so it grows while they
  // run ahead. Returns it once every rank has done the step, else 0.
  double noteStep(int r, uint32_t step, const float* w) {
    StepWeights& s = steps_[step];
    if (r == 0) {
      s.rank0.assign(w, w + n_);
      for (const auto& e : s.early) s.spread = std::max(s.spread, weightDistance(e.data(), w, n_));
      s.early.clear();
    } else if (!s.rank0.empty()) {
      s.spread = std::max(s.spread, weightDistance(w, s.rank0.data(), n_));
    } else {
      s.early.emplace_back(w, w + n_);
    }
    if (++s.done < nranks_) return 0;
    const double spread = s.spread;
    steps_.erase(step);
    return spread;
  }

  std::map<uint32_t, StepWeights> steps_;
  std::mutex mu_;
  Replica opt_;  // the server's weights and optimizer state
  size_t n_;
  int nranks_;
  std::vector<std::vector<float>> sent_;
  std::vector<uint64_t> sentVersion_;
  uint64_t version_ = 0;
  std::vector<float> scaled_;
};

// Rank 0's server thread: serves the other ranks' pushes as they come, until each has pushed
// `steps` times.
void serveOthers(RunJob& j, PsServer& server, Transport& tr, uint32_t steps,
                 const std::atomic<bool>& stop) {
  const int n = j.cfg.worldSize;
  std::vector<uint32_t> pushes(static_cast<size_t>(n), 0);
  std::vector<float> grad(server.paramCount());
  int left = n - 1;
  auto idleSince = steadyNowNs();
  while (left > 0) {
    bool served = false;
    for (int p = 1; p < n; ++p) {
      if (pushes[static_cast<size_t>(p)] >= steps || !tr.arrived(p)) continue;
      recvFloats(j, tr, p, 0, grad.data(), grad.size());
      const PullHead head = server.push(p, pushes[static_cast<size_t>(p)], grad.data());
      ChunkHeader h;
      h.opSignature = kPsAsyncSignature;
      h.epoch = j.cfg.epoch;
      h.src = 0;
      h.chunk = 1;
      h.length = sizeof head;
      tr.send(p, h, &head, sizeof head)->wait();
      sendFloats(j, tr, p, pushes[static_cast<size_t>(p)], 2, server.sentTo(p),
                 server.paramCount());
      if (++pushes[static_cast<size_t>(p)] == steps) --left;
      served = true;
    }
    if (j.cancelled.load() || stop.load())
      throw PeerError(0, -1, -1, "run aborted while serving pushes");
    if (served) {
      idleSince = steadyNowNs();
      continue;
    }
    // Nothing to serve: a short sleep that grows while idle keeps a core for the workers.
    const int64_t idle = steadyNowNs() - idleSince;
    std::this_thread::sleep_for(std::chrono::microseconds(idle < 2'000'000 ? 20 : 200));
  }
}

// A worker's (rank > 0) push of its gradient and pull of the server's weights.
PullHead pushAndPull(RunJob& j, Transport& tr, Replica& replica, uint32_t step, StepSpans& spans) {
  const size_t n = replica.paramCount();
  const int64_t t0 = steadyNowNs();
  sendFloats(j, tr, 0, step, 0, replica.grads(), n);
  const int64_t t1 = steadyNowNs();
  spans.add(TrainSpan::Kind::Push, 0, t0, t1);
  std::unique_ptr<InMessage> m = tr.recv(0, 0, kNoTimeout);
  if (m->header().opSignature != kPsAsyncSignature || m->header().chunk != 1 ||
      m->size() != sizeof(PullHead)) {
    throw PeerError(j.rank, 0, step, "ps-async: the server's reply is not a pull head");
  }
  PullHead head;
  std::memcpy(&head, m->data(), sizeof head);
  m.reset();
  recvFloats(j, tr, 0, 2, replica.params(), n);
  spans.add(TrainSpan::Kind::Pull, 0, t1, steadyNowNs());
  return head;
}

bool trainAsync(RunJob& j, Replica& replica, Transport& tr, int64_t& iteration, const Fail& fail) {
  const TrainConfig& t = *j.cfg.train;
  std::unique_ptr<PsServer> server;
  std::thread serving;
  std::exception_ptr serveError;
  std::atomic<bool> serveFailed{false};
  std::atomic<bool> stopServing{false};
  if (j.rank == 0) {
    server = std::make_unique<PsServer>(t, j.cfg.worldSize);
    serving = std::thread([&] {
      try {
        serveOthers(j, *server, tr, t.steps, stopServing);
      } catch (...) {
        serveError = std::current_exception();
        serveFailed.store(true);
      }
    });
  }
  TrainTelemetry telemetry(j);
  StepSpans spans;
  uint32_t step = 0;
  const SpanFn span = spanRecorder(j, spans, telemetry.sink(), step);
  try {
    for (; step < t.steps; ++step) {
      throwIfCancelled(j, step);
      if (serveFailed.load()) {
        serving.join();
        std::rethrow_exception(serveError);
      }
      enterStep(j, step, iteration);
      const int64_t t0 = steadyNowNs();
      spans.begin(t0);
      const double loss = replica.computeGradients(step, {}, span);
      PullHead head;
      if (j.rank == 0) {
        const int64_t s0 = steadyNowNs();
        head = server->push(0, step, replica.grads());
        std::memcpy(replica.params(), server->sentTo(0), replica.paramCount() * sizeof(float));
        span(TrainSpan::Kind::Optimizer, 0, s0, steadyNowNs());
      } else {
        head = pushAndPull(j, tr, replica, step, spans);
      }
      const int64_t stepNs = steadyNowNs() - t0;
      postStep(j, step, loss, stepNs, spans.take(), replica.digest(), head.staleness, head.spread);
    }
  } catch (const std::exception& e) {
    fail(e);  // aborts the data plane, which ends the server thread's waits
    stopServing.store(true);
    if (serving.joinable()) serving.join();
    return false;
  }
  if (serving.joinable()) serving.join();
  if (serveError) {
    try {
      std::rethrow_exception(serveError);
    } catch (const std::exception& e) {
      fail(e);
    }
    return false;
  }
  return true;
}

// Every peer of any bucket's schedule, both ways; for ps-async rank 0 and each worker.
DataPlanePeers trainPeers(const RunConfig& c, int rank,
                          const std::map<uint64_t, Schedule>& schedules) {
  DataPlanePeers all;
  if (c.train->sync == SyncMode::PsAsync) {
    for (int p = 0; p < c.worldSize; ++p)
      if (p != rank && (rank == 0 || p == 0)) all.sendTo.push_back(p);
    all.recvFrom = all.sendTo;
    return all;
  }
  for (const auto& [count, s] : schedules) {
    const DataPlanePeers one = dataPlanePeers(s, rank);
    all.sendTo.insert(all.sendTo.end(), one.sendTo.begin(), one.sendTo.end());
    all.recvFrom.insert(all.recvFrom.end(), one.recvFrom.begin(), one.recvFrom.end());
  }
  for (auto* v : {&all.sendTo, &all.recvFrom}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  return all;
}

// Shared-memory rings that hold `inflight` + 1 of the largest message this rank receives.
ShmOptions trainShmOptions(const RunConfig& c, int rank,
                           const std::map<uint64_t, Schedule>& schedules) {
  uint64_t maxBytes = std::max<uint64_t>(c.sliceBytes, sizeof(PullHead));
  for (const auto& [count, s] : schedules)
    for (const auto& prog : s.ranks)
      for (const Op& op : prog)
        if (op.sendPeer == rank) maxBytes = std::max<uint64_t>(maxBytes, op.count * sizeof(float));
  ShmOptions so = shmWaitsFromEnv(ShmOptions{});
  so.ringBytes = shmRingBytes(maxBytes, static_cast<int>(c.inflight));
  so.shaping = c.shaping;
  return so;
}

}  // namespace

void runTrainJob(RunJob& j, RunDataPlane& plane, int64_t& iteration,
                 const std::function<void(const std::exception&)>& fail) {
  const RunConfig& c = j.cfg;
  const std::unique_ptr<Backend> backend = makeBackend(j.backend);
  Replica replica(*c.train, j.rank, c.worldSize);
  std::map<uint64_t, Schedule> schedules;
  if (c.train->sync != SyncMode::PsAsync) {
    for (const Bucket& b : replica.buckets()) {
      const uint64_t count = b.end - b.begin;
      if (schedules.count(count) == 0) schedules.emplace(count, bucketSchedule(j, count));
    }
  }
  if (j.verbose) {
    workerLog("run " + std::to_string(c.runId) + ": training " + formatLayers(c.train->layers) +
              ", " + std::to_string(replica.buckets().size()) + " buckets, sync " +
              std::string(toString(c.train->sync)));
  }
  try {
    postReady(j,
              bindDataPlaneFor(j, plane, trainPeers(c, j.rank, schedules),
                               trainShmOptions(c, j.rank, schedules)),
              nullptr);
    connectDataPlane(j, plane);
    j.progress.setPhase(RunPhase::Iterating);
    j.running.store(true);
    const bool ok =
        c.train->sync == SyncMode::PsAsync
            ? trainAsync(j, replica, *plane.dp, iteration, fail)
            : trainSynchronous(j, replica, *backend, *plane.dp, schedules, iteration, fail);
    if (!ok) return;  // reported; the data plane is aborted
    j.running.store(false);
    j.progress.setPhase(RunPhase::Closing);
    if (plane.shm) plane.shm->drain();
    plane.close();
    postDone(j, 0, 0, nullptr);
  } catch (const std::exception& e) {
    fail(e);
    plane.close();
  }
}

}  // namespace arl::jobsteps
