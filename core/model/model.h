// Cost model of collective schedules. Three tools, all predictions, never measurements:
//  1. closed forms in the alpha-beta-gamma (Hockney) model, per algorithm and collective
//     (Thakur, Rabenseifner & Gropp 2005; Patarasuk & Yuan 2009; NCCL's tuning model);
//  2. a discrete-event simulation of any Schedule over a link model of full-duplex ports
//     (egress and ingress) and links, yielding a predicted timeline in the shape of measured
//     telemetry (ModelTimeline, flagged `predicted`);
//  3. least-squares fits of alpha and beta from measured (bytes, time) points.
// predict() picks the closed form where it can say the network's shaping and the simulation
// where it cannot.
// docs/algorithms.md lists every formula with its source.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/shaping.h"
#include "base/types.h"
#include "exec/telemetry.h"
#include "schedule/schedule.h"

namespace arl {

// Hockney / alpha-beta-gamma parameters.
//   alpha: seconds per message (latency a message pays once, whatever its size)
//   beta:  seconds per byte through a rank's port, each direction (1 / port bandwidth); a
//          port is full duplex: a rank sends and receives at once, each at 1 / beta
//   gamma: seconds per byte reduced (1 / reduction rate)
// The defaults describe the machines this lab is built on (a few cores, worker processes
// over ZeroMQ ipc:// at one to two GB/s, a core reducing floats at a few GB/s). They are
// defaults for teaching, not measurements; `allreduce-lab calibrate` measures a machine's
// (fitModel() in model_fit.h), and `bench --fit` fits alpha and beta to a sweep's rows.
struct ModelParams {
  double alpha = 20e-6;
  double beta = 1.0 / 1.5e9;
  double gamma = 1.0 / 4e9;
  // Messages between ranks of one host when the ranks span several hosts (the hierarchical
  // algorithm's first and last phases; a LinkModel with hosts). On one host alpha and beta
  // are its links'. Unset: the same as alpha and beta, so nothing changes until they are set.
  std::optional<double> intraHostAlpha;
  std::optional<double> intraHostBeta;
  double hostAlpha() const { return intraHostAlpha.value_or(alpha); }
  double hostBeta() const { return intraHostBeta.value_or(beta); }
  // The shared-memory plane on one host, unshaped (predictSharedMemory()): seconds per byte a
  // rank's own thread copies, into a peer's ring when it sends and out of one when it receives
  // without reducing; and the cores the ranks share (0: as many as there are ranks). Unset:
  // such runs are costed with the ports above, as any other.
  std::optional<double> shmCopy;
  int cores = 0;
  // The plane's sends as they run, seconds per byte a sender copies into its receiver's ring (a
  // region of a few slices written round and round, so mostly in the cache): from a buffer of
  // its own (shmSend), and from a payload the op has just produced on its core (shmSendFresh: a
  // RecvReduceSend's temporary or a RecvReduceCopySend's destination, just reduced; a
  // RecvCopySend's message, just received and copied out). `calibrate` measures both; unset
  // (calibrations before 2026-12-02): every send at shmCopy, as a copy between buffers.
  std::optional<double> shmSend;
  std::optional<double> shmSendFresh;
  // How much longer a rank's copying and reducing takes in a run than shmCopy and gamma say
  // (measured on quiet buffers): ranks that switch on shared cores lose caches and TLBs.
  // `calibrate` fits it to its ring runs of 1 MiB and more; 1: as measured.
  double shmWorkScale = 1.0;
  // The shared-memory model's own cost of a message (seconds): its receiver's wake-up, as
  // work on a core. `calibrate` fits it with shmWorkScale to its ring runs through this model
  // (fitSharedMemory(), model_fit.h), at the rank count it ran. Unset (calibrations before
  // version 5): alpha, which is fitted through the closed forms, where no ranks share cores.
  std::optional<double> shmAlpha;
  // The copy rate and gamma measured on a working set that fits in the last-level cache
  // (seconds per byte, every core at once), and that cache's size in bytes (0: unknown).
  // predictSharedMemory() costs a run whose working set on the host
  // (sharedMemoryWorkingSet()) fits in llcBytes with them, scaled as the others; unset (or
  // llcBytes 0): with shmCopy and gamma whatever the run's size.
  std::optional<double> shmCopyCached;
  std::optional<double> gammaCached;
  uint64_t llcBytes = 0;

  bool operator==(const ModelParams&) const = default;
};

// A closed-form cost as coefficients of the parameters:
//   seconds = alphaCount * alpha + betaBytes * beta + gammaBytes * gamma
//           + hostAlphaCount * hostAlpha + hostBetaBytes * hostBeta.
// Keeping the form linear in the parameters is what lets fitAlphaBeta() fit it.
struct CostTerms {
  double alphaCount = 0;      // messages on the critical path (between hosts, for hierarchical)
  double betaBytes = 0;       // bytes through the busiest port on the critical path
  double gammaBytes = 0;      // bytes reduced on the critical path
  double hostAlphaCount = 0;  // the same inside a host (hierarchical only)
  double hostBetaBytes = 0;
  double seconds(const ModelParams& p) const {
    return alphaCount * p.alpha + betaBytes * p.beta + gammaBytes * p.gamma +
           hostAlphaCount * p.hostAlpha() + hostBetaBytes * p.hostBeta();
  }
  // Every coefficient times k (k passes of the same cost, or a cost divided by a time).
  CostTerms scaled(double k) const {
    return {alphaCount * k, betaBytes * k, gammaBytes * k, hostAlphaCount * k, hostBetaBytes * k};
  }
};

// What the model is asked about: one run. `bytes` is the collective's size S as nccl-tests
// reports it (collectiveBytes() in metrics.h: count*elem, or nranks*count*elem for
// reduce-scatter and all-gather). `sliceBytes` is the pipeline slice (0 = unsliced). The
// closed forms read the algorithm, collective, ranks, bytes, slice and ranks per host; the
// rest describes the schedule predict() simulates when a closed form cannot say the shaping.
struct CostQuery {
  std::string_view algorithm;
  Collective collective = Collective::AllReduce;
  int nranks = 1;
  uint64_t bytes = 0;
  uint64_t sliceBytes = 0;
  int ranksPerHost = 0;  // consecutive ranks per host; 0 = all ranks on one host
  DataType dtype = DataType::Float;
  int root = 0;                // reduce and broadcast
  std::vector<int> ringOrder;  // empty = 0, 1, ..., n-1
  int radix = 4;               // knomial's k (GenParams::radix)
  std::vector<int> torusDims;  // swing's torus (GenParams::torusDims); empty: one ring
  int inflight = 4;            // as SimOptions::inflight
  int window = 1;              // ring's window of slices (GenParams::window); others 1
  LinkShaping shaping;         // the network the run is shaped to (empty: the machine's own)
  bool sharedMemory = false;   // the data plane is shared memory (every rank on one host)
};

// Closed-form cost of the algorithm on uniform ports (formulas in model.cpp and
// docs/algorithms.md); it ignores q.shaping. Throws GenError for an unknown algorithm or a
// collective it does not implement. Where closedFormIsPerIteration(q) it is the time of one
// iteration among back-to-back ones, as bench measures; elsewhere of one collective alone.
CostTerms closedForm(const CostQuery& q);

// Whether closedForm(q) has a form at q's rank count. Swing's bandwidth-optimal form off a power
// of two has none: its steps' overlapping reach sets split a step into a rank-dependent number
// of messages (gen_swing.cpp), so closedForm() refuses it and predict() simulates it. True
// elsewhere (closedForm() may still refuse an unknown algorithm or collective).
bool hasClosedForm(const CostQuery& q);

// closedForm() as docs/algorithms.md writes it, in that page's notation (UTF-8): for the
// ring's all-reduce "2(n−1)·k(S/n)·α + 2(n−1)/n·S·β + (n−1)/n·S·γ"; what qualifies it follows
// a "; " ("…; x = S/2"). A ring's window of W > 1 slices writes ⌈k(S/n)/W⌉ for k(S/n) and
// "; W = 8" after the form. Empty for an algorithm or collective without a closed form.
std::string closedFormText(std::string_view algorithm, Collective c, int window = 1);

// What every rank sends in one collective by the algorithm's formula, where every rank sends
// the same: the ring's 2(n−1)/n·S for all-reduce, (n−1)/n·S for reduce-scatter and all-gather;
// bruck's and pat's the same as ring's; swing's on an even n and halving-doubling's on a power
// of two 2(n−1)/n·S, recursive doubling's and swing-latency's log₂n·S (the bytes the generators'
// opening comments give). `text` in docs/algorithms.md's notation, `bytes` for
// S = `bytes`. None elsewhere (ranks that send different amounts: a tree's, a server's, a
// fold's).
struct SentFormula {
  std::string text;
  double bytes = 0;
};
std::optional<SentFormula> sentFormula(std::string_view algorithm, Collective c, int nranks,
                                       uint64_t bytes);

// Whether closedForm(q) is the time of one iteration among back-to-back ones: every
// all-reduce, and the reduce-scatter and all-gather of ring, bruck and pat (every rank busy
// in every step). The rooted collectives (reduce,
// broadcast) and the tree's reduce-scatter and all-gather give one collective alone: back to
// back, their upstream ranks run ahead into the next iteration while the downstream ones
// finish (a chain's head is never held by its root), which the simulation says.
bool closedFormIsPerIteration(const CostQuery& q);

// Whether the closed form can say q's network: any uniform shaping (every port at one rate,
// an added latency); for the ring's all-reduce, reduce-scatter and all-gather also slow ranks,
// slow links and links' own latencies (a named topology), since every byte crosses every link
// of the ring and the ring runs at its slowest link's pace. With ranks on several hosts only the
// hierarchical algorithm's closed form knows which messages stay inside a host (and so use the
// host's links, not its port). Never where the closed form is not per iteration
// (closedFormIsPerIteration). Elsewhere the simulation of the schedule is the authority.
bool closedFormCovers(const CostQuery& q);

// The parameters the closed form is evaluated with under q.shaping: alpha plus the added
// latency (for the ring: the mean over its links of the added latency plus the link's own), beta no
// less than 1 / the port rate (for the ring: 1 / its slowest link's rate),
// inside and between hosts alike (one machine's data plane paces every transfer).
ModelParams shapedParams(const CostQuery& q, const ModelParams& p);

// SharedMemoryCached: predictSharedMemory() with the cache-resident rates (ModelParams).
enum class PredictionMethod : uint8_t { ClosedForm, Simulation, SharedMemory, SharedMemoryCached };
std::string_view toString(PredictionMethod m);

struct Prediction {
  double seconds = 0;
  PredictionMethod method = PredictionMethod::ClosedForm;
};

// Whether predict() costs q with the shared-memory plane's model: q runs over shared memory,
// unshaped, and p has its copy rate (a calibration of a shared-memory run gives it).
bool sharedMemoryCovers(const CostQuery& q, const ModelParams& p);

// The model's time for q: predictSharedMemory() when sharedMemoryCovers(q, p); else the closed
// form with shapedParams() when closedFormCovers(q); else the simulation of q's schedule over
// linkModelFor(q, p) (also where !hasClosedForm(q)). Throws GenError as closedForm(), or for a
// schedule the generator refuses.
Prediction predict(const CostQuery& q, const ModelParams& p = {});

// The network's parameters for people: "alpha 8.1 us per message, port 2.95 GB/s each way,
// reduce 4.00 GB/s".
std::string alphaBetaGammaText(const ModelParams& p);

// predict(q, p).seconds.
double predictSeconds(const CostQuery& q, const ModelParams& p = {});

// The simulation of q's schedule over linkModelFor(q, p) (iterationSeconds()), whether or not
// a closed form covers q. Throws GenError for a schedule the generator refuses.
double simulatedSeconds(const CostQuery& q, const ModelParams& p = {});

// The shared-memory plane, unshaped: there are no ports. A send is its sender's thread copying
// the slice into the receiver's ring (transport/shm), so it holds the sender for bytes *
// shmCopy and nobody else; the receiver reduces from the ring, or copies out of it, once the
// copy is done. The schedule is simulated so (LinkModel::sendersCopy), with every rank's work
// list-scheduled onto the p.cores cores the ranks share (LinkModel::cores; with fewer cores
// than ranks a message's alpha is its receiver's wake-up, on a core: LinkModel::wakeOnCore),
// so that no iteration takes less than all ranks' copying, reducing and waking spread over the
// cores, and more where the dependencies leave cores idle. The rates
// are the cache-resident ones when p has them and the run's working set on the host fits in
// p.llcBytes, else shmCopy and gamma; both times shmWorkScale. Requires p.shmCopy. Throws as
// predict().
struct SharedMemoryCost {
  double seconds = 0;
  uint64_t workingSetBytes = 0;  // sharedMemoryWorkingSet() of the run
  bool cacheRates = false;       // costed with the cache-resident rates
};
SharedMemoryCost costSharedMemory(const CostQuery& q, const ModelParams& p);

// costSharedMemory(q, p).seconds.
double predictSharedMemory(const CostQuery& q, const ModelParams& p);

// The bytes a run of `s` over the shared-memory plane keeps touching on its host, every
// rank's: its input and output buffers (out of place, as bench runs), its scratch, its
// RecvReduceSend temporaries (one per op up to `inflight`, of the largest, as the executor
// allocates them), and one inbound ring per rank it receives from, of shmRingBytes() for the
// largest message it receives (as the worker sizes them), counted whole: a ring is written
// round and round, so back-to-back iterations touch all of it. Control words, headers and
// the lab's own code and stacks are left out (kilobytes).
uint64_t sharedMemoryWorkingSet(const Schedule& s, DataType dtype, int inflight);

// ---- discrete-event simulation ----

// A rank's port: bytes per second it can send and receive, each on its own (full duplex).
// 0 = unlimited.
struct PortParams {
  double egressBytesPerSecond = 0;
  double ingressBytesPerSecond = 0;
};

// A directed link: a rate cap on top of the ports at its ends (0 = none) and the latency a
// message pays on it.
struct LinkParams {
  double bytesPerSecond = 0;
  double latencySeconds = 20e-6;
};

// The network between ranks and the speed of each rank's arithmetic. A message from a to b
// goes out of a's egress port, over the link a -> b and into b's ingress port, as the data
// planes pace it (transport/pacing.h): it starts when a's egress and the link are free, holds
// each for bytes / that one's own rate and has left at the slower; b takes it through its
// ingress from its start or when the ingress is free, for bytes / the ingress's rate, and has
// it when both are done, the link's latency later. With equal rates this is one message at a
// time through each port.
// Ports are every rank's `port` unless `rankPorts` names it. With hosts (ranksPerHost > 0),
// ranks h*K .. h*K+K-1 share host h, and messages inside a host use each rank's `hostPort` and
// the `hostLink` instead; `overrides` name a directed link wherever it is.
struct LinkModel {
  PortParams port{1.5e9, 1.5e9};
  std::map<int, PortParams> rankPorts;                  // rank -> its network port
  LinkParams defaults;                                  // every link between hosts
  std::map<std::pair<int, int>, LinkParams> overrides;  // (from, to) -> params
  int ranksPerHost = 0;                                 // 0 = no hosts: every message a network one
  PortParams hostPort{1.5e9, 1.5e9};                    // every rank's port inside its host
  LinkParams hostLink;                                  // every link inside a host
  double reduceBytesPerSecond = 4e9;                    // every rank unless overridden
  std::map<int, double> rankReduceBytesPerSecond;       // rank -> reduce rate
  double copyBytesPerSecond = 10e9;                     // local copies (memcpy)
  // The shared-memory plane's sends: a send is its sender's copy at the egress rate, which
  // holds the sender's own thread (it reduces nothing meanwhile), and ingress ports are not
  // claimed; a receive that does not reduce copies out at copyBytesPerSecond.
  bool sendersCopy = false;
  // With sendersCopy: bytes per second of a send whose payload its op has just produced on the
  // rank's core (sendPayloadIsFresh()), instead of the egress rate; 0: at the egress rate.
  double freshSendBytesPerSecond = 0;
  // The cores the ranks' threads share; 0: a core per rank, none shared. With cores, every
  // piece of a rank's work (a reduction, a copy, a copying sender's send, a wake-up) runs on
  // one: it asks for a core when the rank has reached it and its data is ready, and takes the
  // earliest free one (the first of equals), in the order the pieces become ready (ties: first
  // come, first served). That is list scheduling, non-preemptive: the prediction follows the
  // dependencies and the cores together. With cores >= ranks no piece ever waits, and the
  // result equals that without cores.
  int cores = 0;
  // With fewer cores than ranks: a message's latency is its receiver's wake-up, work on a core
  // (a rank that waits for data sleeps, and the message wakes it), not a delay on the link.
  bool wakeOnCore = false;

  // The link model that corresponds to alpha-beta-gamma parameters: every port at 1 / beta
  // each way, links uncapped with latency alpha (inside hosts: hostBeta, hostAlpha).
  static LinkModel fromParams(const ModelParams& p, int ranksPerHost = 0);
  // fromParams(), then the shaping: every port (network and host) at the lower of its rate
  // and the shaped one, slow ranks' ports (and, with hosts, their links inside the host) at
  // theirs, slow links capped, the added latency on every link and a link's own latency on it.
  static LinkModel shaped(const ModelParams& p, const LinkShaping& s, int ranksPerHost = 0);
  bool sameHost(int a, int b) const;
  PortParams portOf(int rank, bool insideHost) const;
  LinkParams link(int from, int to) const;
  // Bytes per second of a message from -> to when nothing else uses its ports (0 = unlimited):
  // sendRate() of a send from a buffer.
  double rate(int from, int to) const;
  // The egress rate of a send of `kind` out of `from`: freshSendBytesPerSecond for a copying
  // sender's fresh payload (sendPayloadIsFresh()) when it is set, else the port's.
  double egressRate(int from, bool insideHost, OpKind kind) const;
  // rate(from, to) for a send of `kind`, with egressRate().
  double sendRate(int from, int to, OpKind kind) const;
  double reduceRate(int rank) const;
  // Sets both directions between a and b.
  void setLinkBothWays(int a, int b, LinkParams lp);
};

// Whether op's send carries a payload the op itself has just produced on its rank's core (a
// reduction's result, or a message it has just received), rather than one in a buffer.
bool sendPayloadIsFresh(OpKind kind);

// The links costSharedMemory() simulates: senders that copy at p.shmSend (p.shmCopy without
// it) and, a payload the op has just produced (sendPayloadIsFresh()), at p.shmSendFresh;
// receives that copy out at p.shmCopy; reductions at p.gamma (with `cacheRates` the
// cache-resident copy rate for every copy and send, and gamma's), all times p.shmWorkScale; the
// work on p.cores cores with each wake-up on one, of p.shmAlpha (p.alpha without it). Requires
// p.shmCopy (and the cache rates when asked for them).
LinkModel sharedMemoryLinks(const ModelParams& p, bool cacheRates);

// The link model predict() simulates q over: LinkModel::shaped(p, q.shaping) with q's hosts
// when the ranks span several (1 <= ranksPerHost < nranks), none on one host.
LinkModel linkModelFor(const CostQuery& q, const ModelParams& p);

struct SimOptions {
  DataType dtype = DataType::Float;
  // Ops a rank may have unretired before it waits for the oldest (the executor's
  // ExecOptions::inflight): ops retire in program order, a send once it has left the port,
  // any other op when it is done; at least 1.
  int inflight = 4;
  // Iterations run back to back, as bench runs them: each rank starts its next iteration as
  // soon as its previous one is done, without waiting for the others; at least 1.
  int iterations = 1;
  TelemetryLevel telemetry = TelemetryLevel::Chunks;  // which events to predict
  uint64_t runId = 0;
  uint32_t iteration = 0;
};

// A predicted run. Its events have the fields and kinds of measured telemetry, timestamps in
// ns from the start of the iteration; `predicted` is always true so nothing downstream can
// mistake it for a measurement.
struct ModelTimeline {
  bool predicted = true;
  double totalSeconds = 0;          // slowest rank's finish time (of the last iteration)
  std::vector<double> rankSeconds;  // each rank's finish time
  // Per iteration, the slowest rank's time of it, each rank timing it from the end of its
  // previous one (as RankRun times an iteration).
  std::vector<double> iterationSeconds;
  std::vector<TelemetryEvent> events;
};

// Simulates opt.iterations back-to-back iterations of `s` by the rules of the data planes'
// pacing (transport/pacing.h) and the executor. Each rank performs its ops in program order,
// with at most `inflight` unretired. A send starts when its payload is ready and the sender's
// egress port and the link are free, and holds each for its bytes at that one's rate; the
// receiver takes its messages in program order, each through its ingress port from the
// message's start or when the ingress is free, and has it when it has left its sender and come
// in, plus the link's latency. So senders to one receiver share its ingress, in the order the
// receiver takes them, and a sender to many holds each message on its egress in turn. A
// reduction occupies the rank for bytes / reduceRate, a local copy bytes / copyRate; with
// links.cores, on one of the cores as LinkModel::cores says. A rank's iteration ends when its
// last op is done and its sends have left. Throws ConfigError naming
// the rank, op and step when the schedule cannot complete (a receive no send ever matches).
ModelTimeline simulate(const Schedule& s, const LinkModel& links, const SimOptions& opt = {});

// Seconds of one iteration's work on every rank's own thread, summed over ranks: sends when
// links.sendersCopy (bytes at the sender's egress rate), reductions (bytes at reduceRate),
// copies (a local copy, or a receive's copy into its destination; bytes at copyBytesPerSecond).
double cpuSeconds(const Schedule& s, const LinkModel& links, DataType dtype);

// Iterations iterationSeconds() simulates back to back.
inline constexpr int kSimulatedIterations = 4;

// The simulated time of an iteration as bench measures it: kSimulatedIterations back to back
// (opt.iterations is ignored), the mean of all but the first. bench times iterations that
// follow others (its warm-up ones), and a rank that is done with one early (a leaf, a worker
// of a parameter server) starts the next while the others finish theirs; the first iteration,
// from a common start, has none of that overlap. Throws as simulate().
double iterationSeconds(const Schedule& s, const LinkModel& links, SimOptions opt = {});

// ---- fitting ----

// Least-squares line y = intercept + slope * x.
struct LinearFit {
  double intercept = 0;
  double slope = 0;
  double rmsResidual = 0;  // root mean square of y - fit(x)
  size_t points = 0;
};

// Throws ConfigError with fewer than two distinct x values.
LinearFit fitLine(const std::vector<double>& x, const std::vector<double>& y);

struct MeasuredPoint {
  uint64_t bytes = 0;  // S, as CostQuery::bytes
  double seconds = 0;
};

struct AlphaBetaFit {
  double alpha = 0;
  double beta = 0;
  double rmsResidual = 0;  // seconds
  size_t points = 0;
};

// Fits alpha and beta such that seconds ~= alphaCount*alpha + betaBytes*beta +
// gammaBytes*gamma for each point's terms, with gamma held fixed (pass 0 to ignore
// reductions). One alpha and one beta: a point's host terms count as the network's (the fit
// is of a machine whose hosts' parameters equal its network's). Throws ConfigError when the points
// cannot separate alpha from beta.
AlphaBetaFit fitAlphaBeta(const std::vector<CostTerms>& terms, const std::vector<double>& seconds,
                          double gamma);

// The same for one algorithm: each point's terms come from closedForm() with q.bytes set to
// the point's bytes.
AlphaBetaFit fitAlphaBeta(const CostQuery& q, const std::vector<MeasuredPoint>& points,
                          double gamma);

}  // namespace arl
