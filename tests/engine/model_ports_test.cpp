// The cost model's network: full-duplex ports (ingress charged as well as egress), shaping
// per rank and per link, the closed forms against the simulation, and the hierarchical
// algorithm's two sets of parameters.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "model/metrics.h"
#include "model/model.h"
#include "schedule/generators.h"
#include "schedule/verifier.h"

namespace arl {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kSlice = 64 << 10;
// The shaped port of the lab's network benchmark (--nic-bw 200M).
constexpr double kPort = 200e6;

CostQuery query(std::string_view algo, int n, uint64_t bytes,
                Collective c = Collective::AllReduce) {
  CostQuery q;
  q.algorithm = algo;
  q.collective = c;
  q.nranks = n;
  q.bytes = bytes;
  q.sliceBytes = kSlice;
  return q;
}

// The schedule q describes (floats, kSlice slices).
Schedule scheduleOf(const CostQuery& q) {
  GenParams p;
  p.collective = q.collective;
  p.nranks = q.nranks;
  p.count = apiCountForSize(q.collective, q.nranks, q.bytes, DataType::Float);
  p.sliceElems = kSlice / 4;
  p.ranksPerHost = q.ranksPerHost;
  p.ring = q.ringOrder;
  Schedule s = generate(q.algorithm, p);
  const VerifyResult vr = annotate(s);
  EXPECT_TRUE(vr.ok) << vr.message;
  return s;
}

// The simulated time per iteration of back-to-back iterations, as bench measures it.
double simulated(const CostQuery& q, const ModelParams& p) {
  return iterationSeconds(scheduleOf(q), linkModelFor(q, p));
}

// What the closed form of q describes in the simulation: an iteration among back-to-back
// ones, or one collective alone (closedFormIsPerIteration).
double simulatedAsClosed(const CostQuery& q, const ModelParams& p) {
  if (closedFormIsPerIteration(q)) return simulated(q, p);
  return simulate(scheduleOf(q), linkModelFor(q, p)).totalSeconds;
}

double closed(const CostQuery& q, const ModelParams& p) {
  return closedForm(q).seconds(shapedParams(q, p));
}

ModelParams portsAt(double rate) {
  ModelParams p;
  p.beta = 1.0 / rate;
  return p;
}

// A hand-made schedule: for each (from, to), `from` sends 2 floats (8 bytes) to `to`. Every
// rank issues its sends before its receives.
Schedule transfers(int n, const std::vector<std::pair<int, int>>& pairs) {
  Schedule s;
  s.algorithm = "hand-made";
  s.nranks = n;
  s.count = s.sliceElems = s.inputElems = s.outputElems = 2;
  s.nsteps = 1;
  s.ranks.resize(static_cast<size_t>(n));
  for (const auto& [from, to] : pairs) {
    Op send;
    send.kind = OpKind::Send;
    send.sendPeer = to;
    send.src = {Buffer::Input, 0};
    send.count = 2;
    s.ranks[static_cast<size_t>(from)].push_back(send);
  }
  for (const auto& [from, to] : pairs) {
    Op recv;
    recv.kind = OpKind::Recv;
    recv.recvPeer = from;
    recv.dst = {Buffer::Output, 0};
    recv.count = 2;
    s.ranks[static_cast<size_t>(to)].push_back(recv);
  }
  return s;
}

// Ports at 8 B/s each way, no latency, free copies: one 8-byte transfer takes 1 s.
LinkModel handLinks(double latency = 0) {
  LinkModel m;
  m.port = {8, 8};
  m.defaults = {0, latency};
  m.copyBytesPerSecond = 0;
  return m;
}

TEST(ModelPorts, SendersToOneReceiverShareItsIngress) {
  const LinkModel m = handLinks();
  EXPECT_DOUBLE_EQ(simulate(transfers(4, {{1, 0}}), m).totalSeconds, 1.0);
  // Three senders, one receiver: its ingress takes them one after another, in the order it
  // receives, while each sender's egress is free after its own message (as the pacing of a
  // data plane: the sender claims its egress, the receiver its ingress).
  const ModelTimeline three = simulate(transfers(4, {{1, 0}, {2, 0}, {3, 0}}), m);
  EXPECT_DOUBLE_EQ(three.totalSeconds, 3.0);
  EXPECT_DOUBLE_EQ(three.rankSeconds[0], 3.0);
  std::vector<double> sendEnds, recvEnds;
  for (const TelemetryEvent& e : three.events) {
    const double t = static_cast<double>(e.tNs) * 1e-9;
    if (e.kind == EventKind::SendEnd) sendEnds.push_back(t);
    if (e.kind == EventKind::RecvEnd) recvEnds.push_back(t);
  }
  EXPECT_EQ(sendEnds, (std::vector<double>{1.0, 1.0, 1.0}));
  EXPECT_EQ(recvEnds, (std::vector<double>{1.0, 2.0, 3.0}));
  // Latency is paid once per message and does not hold the port.
  EXPECT_DOUBLE_EQ(simulate(transfers(4, {{1, 0}, {2, 0}, {3, 0}}), handLinks(0.5)).totalSeconds,
                   3.5);
  // Two senders to two receivers share nothing.
  EXPECT_DOUBLE_EQ(simulate(transfers(4, {{1, 0}, {2, 3}}), m).totalSeconds, 1.0);
}

TEST(ModelPorts, AReceiverTakesItsIngressInProgramOrder) {
  // Rank 0 receives from 1, then from 2. Rank 2 sends at once; rank 1 first takes 8 bytes
  // from 3 (1 s) and then sends. The ingress of rank 0 serves 1's message first, from 1 s to
  // 2 s, and only then 2's, from 2 s to 3 s, though 2's started at 0: a data plane's receiver
  // claims its ingress when it takes a message, in its program order. (Served first come,
  // first served, rank 0 would be done at 2 s.)
  Schedule s = transfers(4, {{3, 1}, {1, 0}, {2, 0}});
  // Rank 1 receives from 3 before it sends: move its Send after its Recv.
  std::swap(s.ranks[1][0], s.ranks[1][1]);
  const ModelTimeline tl = simulate(s, handLinks());
  EXPECT_DOUBLE_EQ(tl.rankSeconds[0], 3.0);
  std::vector<std::pair<int, double>> recvEnds;  // (peer, time) on rank 0
  for (const TelemetryEvent& e : tl.events) {
    if (e.kind == EventKind::RecvEnd && e.rank == 0)
      recvEnds.emplace_back(e.peer, static_cast<double>(e.tNs) * 1e-9);
  }
  EXPECT_EQ(recvEnds, (std::vector<std::pair<int, double>>{{1, 2.0}, {2, 3.0}}));
}

TEST(ModelPorts, OneSenderToManyPaysItsEgressAndPortsAreFullDuplex) {
  const LinkModel m = handLinks();
  EXPECT_DOUBLE_EQ(simulate(transfers(4, {{0, 1}, {0, 2}, {0, 3}}), m).totalSeconds, 3.0);
  // A rank sends and receives at once.
  EXPECT_DOUBLE_EQ(simulate(transfers(2, {{0, 1}, {1, 0}}), m).totalSeconds, 1.0);
  EXPECT_DOUBLE_EQ(simulate(transfers(3, {{0, 1}, {1, 2}, {2, 0}}), m).totalSeconds, 1.0);
}

TEST(ModelPorts, RankPortsAndLinksCapTheirTransfers) {
  LinkModel m = handLinks();
  m.rankPorts[0] = {8, 2};  // rank 0 receives at 2 B/s
  EXPECT_DOUBLE_EQ(simulate(transfers(2, {{1, 0}}), m).totalSeconds, 4.0);
  EXPECT_DOUBLE_EQ(simulate(transfers(2, {{0, 1}}), m).totalSeconds, 1.0);
  m.overrides[{0, 1}] = {4, 0};  // the link 0 -> 1 at 4 B/s
  EXPECT_DOUBLE_EQ(simulate(transfers(2, {{0, 1}}), m).totalSeconds, 2.0);
  EXPECT_DOUBLE_EQ(m.rate(0, 1), 4.0);
  EXPECT_DOUBLE_EQ(m.rate(1, 0), 2.0);
}

// The ideal ratio is the ratio of the bytes through the busiest port: (n-1) S into and out of
// the server at once, against 2(n-1)/n S through every ring port, i.e. n/2.
TEST(ModelPorts, ParameterServerTakesHalfNTimesRing) {
  // Ports alone (no latency, free reductions): the closed forms give n/2 (1 + slice/S), and
  // the simulation's pipeline fills and drains add under 3% at 256 slices.
  ModelParams ideal = portsAt(kPort);
  ideal.alpha = 0;
  ideal.gamma = 0;
  for (int n : {4, 8}) {
    const double half = n / 2.0;
    const CostQuery ring = query("ring", n, 16 * kMiB),
                    ps = query("parameter-server", n, 16 * kMiB);
    EXPECT_NEAR(closed(ps, ideal) / closed(ring, ideal), half, 0.01 * half) << n;
    EXPECT_NEAR(simulated(ps, ideal) / simulated(ring, ideal), half, 0.03 * half) << n;
  }
  // Under --nic-bw 200M with the default latency and reduction rate: the ring's 2(n-1)
  // latencies per slice (about 6% of its time) lower the ratio; the server's reductions add
  // 5% to it in the closed form, which adds them to the port time, and nothing in the
  // simulation, which overlaps them. So about 2x at 4 ranks and about 4x at 8, within
  // [0.85, 1.02] n/2 (measured: 0.97 n/2 closed, 0.92 n/2 simulated).
  const ModelParams p;
  for (int n : {4, 8}) {
    const double half = n / 2.0;
    CostQuery ring = query("ring", n, 16 * kMiB), ps = query("parameter-server", n, 16 * kMiB);
    ring.shaping.portBytesPerSecond = ps.shaping.portBytesPerSecond = kPort;
    const Prediction pr = predict(ring, p), pp = predict(ps, p);
    EXPECT_EQ(pr.method, PredictionMethod::ClosedForm);
    EXPECT_EQ(pp.method, PredictionMethod::ClosedForm);
    for (const double r : {pp.seconds / pr.seconds, simulated(ps, p) / simulated(ring, p)}) {
      EXPECT_GT(r, 0.85 * half) << n;
      EXPECT_LT(r, 1.02 * half) << n;
    }
  }
}

// Every algorithm and collective, at 2 to 16 ranks (odd counts, a smaller last host for
// hierarchical), on uniform ports.
std::vector<CostQuery> everyQuery(uint64_t bytes) {
  std::vector<CostQuery> out;
  for (const std::string& a : algorithmNames()) {
    for (Collective c : kAllCollectives) {
      if (!algorithmSupports(a, c)) continue;
      for (int n : {2, 3, 4, 5, 7, 8, 16}) {
        if (!rankCountRefusal(a, n).empty()) continue;
        const bool split = c == Collective::ReduceScatter || c == Collective::AllGather;
        CostQuery q = query(a, n, split ? bytes / (4 * n) * (4 * n) : bytes, c);
        if (a == "hierarchical" && n >= 4) q.ranksPerHost = (n + 1) / 2;
        if (!hasClosedForm(q)) continue;  // swing off a power of two: simulated only
        out.push_back(q);
      }
    }
  }
  return out;
}

TEST(ModelPorts, ClosedFormsAgreeWithTheSimulation) {
  // Each closed form against the simulation of what it describes: an iteration among
  // back-to-back ones (every all-reduce), or one collective alone (closedFormIsPerIteration).
  // Bandwidth-bound (16 MiB, 200 MB/s ports, the regime of the network benchmark): the
  // closed forms count the bytes through the busiest port, which is what the simulation
  // serializes, and with 16 or more slices per pipeline the fills are small: within 10%, but
  // for the tree all-reduce at 5 ranks, where one rank is interior in both trees and carries
  // 8 x where the closed form says 7 x (+14%), and the tree's reduce-scatter at 16 ranks, one
  // collective alone whose sixteen passes overlap (-12%): within 15%.
  const ModelParams shaped = portsAt(kPort);
  for (const CostQuery& q : everyQuery(16 * kMiB)) {
    const double r = simulatedAsClosed(q, shaped) / closed(q, shaped);
    const bool tree = q.algorithm == "tree";
    EXPECT_NEAR(r, 1.0, tree ? 0.15 : 0.1)
        << q.algorithm << " " << toString(q.collective) << " n=" << q.nranks;
  }
  // Everywhere else (4000 bytes to 16 MiB, default and shaped ports) within [0.55, 1.25]: the
  // closed forms add reduction time to port time where the simulation overlaps them (up to
  // gamma / (beta + gamma) = 27% with the defaults), leave out local copies (the ring
  // all-gather's receives copy; +21% at 2 ranks with the defaults), and charge the tree's
  // consecutive passes in full where, with one slice per pass, the simulation overlaps them.
  // The parameter server at 16 ranks on the default ports goes to 1.30: the executor's window
  // of 4 ops lets the server's 15 reductions of a slice overlap only the last 3 of its sends,
  // which the closed form does not count. The switch's 15 reductions and 16 sends likewise.
  for (const ModelParams& p : {ModelParams{}, shaped}) {
    for (uint64_t bytes : {uint64_t{4000}, kMiB, 16 * kMiB}) {
      for (const CostQuery& q : everyQuery(bytes)) {
        const double r = simulatedAsClosed(q, p) / closed(q, p);
        const bool server = q.algorithm == "parameter-server" || q.algorithm == "switch";
        const double high = server && q.nranks == 16 ? 1.35 : 1.25;
        EXPECT_GT(r, 0.55) << q.algorithm << " " << toString(q.collective) << " " << q.bytes;
        EXPECT_LT(r, high) << q.algorithm << " " << toString(q.collective) << " " << q.bytes;
      }
    }
  }
}

TEST(ModelPorts, SlowLinkSlowsTheRingByTheRateRatio) {
  // --nic-bw 200M --slow-link 1-2:50M at 4 and 8 ranks: every byte of a ring crosses the link
  // 1 -> 2, so the ring runs at its pace. Ports alone: 4x, in the closed form exactly, in the
  // simulation less its pipeline fill (1%).
  ModelParams ideal;
  ideal.alpha = 0;
  ideal.gamma = 0;
  const ModelParams p;
  for (int n : {4, 8}) {
    CostQuery q = query("ring", n, 16 * kMiB);
    q.shaping.portBytesPerSecond = kPort;
    const double idealBase = predictSeconds(q, ideal), idealSimBase = simulated(q, ideal);
    const double base = predictSeconds(q, p), simBase = simulated(q, p);
    q.shaping.linkBytesPerSecond[{1, 2}] = 50e6;
    EXPECT_NEAR(predictSeconds(q, ideal) / idealBase, 4.0, 1e-9) << n;
    EXPECT_NEAR(simulated(q, ideal) / idealSimBase, 4.0, 0.05) << n;
    // With the default latency and reductions, which the link does not slow: between 3.5x and
    // 4x (measured 3.76x closed, 3.65x simulated), and the two agree within 5%.
    const Prediction slow = predict(q, p);
    EXPECT_EQ(slow.method, PredictionMethod::ClosedForm);
    for (const double r : {slow.seconds / base, simulated(q, p) / simBase}) {
      EXPECT_GT(r, 3.5) << n;
      EXPECT_LT(r, 4.0) << n;
    }
    EXPECT_NEAR(slow.seconds / simulated(q, p), 1.0, 0.05) << n;

    // The ring never sends from 2 to 1.
    CostQuery reverse = q;
    reverse.shaping.linkBytesPerSecond = {{{2, 1}, 50e6}};
    EXPECT_DOUBLE_EQ(predictSeconds(reverse, p), base);
    EXPECT_NEAR(simulated(reverse, p) / simBase, 1.0, 1e-9);

    // A slow rank's port slows the ring's two links at it alike.
    CostQuery rank = q;
    rank.shaping.linkBytesPerSecond.clear();
    rank.shaping.rankPortBytesPerSecond[2] = 50e6;
    EXPECT_NEAR(predictSeconds(rank, p) / simulated(rank, p), 1.0, 0.05) << n;

    // Halving-doubling sends over 1 -> 2 less (its partners of rank 1 are 0, 3 and 5).
    CostQuery hd = q;
    hd.algorithm = "halving-doubling";
    const Prediction hdSlow = predict(hd, p);
    EXPECT_EQ(hdSlow.method, PredictionMethod::Simulation);
    hd.shaping.linkBytesPerSecond.clear();
    EXPECT_LT(hdSlow.seconds / predictSeconds(hd, p), 2.0) << n;
  }
}

TEST(ModelPorts, PredictSimulatesWhatTheClosedFormCannotSay) {
  const ModelParams p;
  CostQuery q = query("parameter-server", 4, 4 * kMiB);
  q.shaping.portBytesPerSecond = kPort;
  EXPECT_TRUE(closedFormCovers(q));
  const double uniform = predictSeconds(q, p);
  EXPECT_DOUBLE_EQ(uniform, closedForm(q).seconds(shapedParams(q, p)));
  // The server's port at a quarter of the others': its ingress and egress both carry (n-1) S.
  q.shaping.rankPortBytesPerSecond[0] = kPort / 4;
  EXPECT_FALSE(closedFormCovers(q));
  const Prediction slow = predict(q, p);
  EXPECT_EQ(slow.method, PredictionMethod::Simulation);
  EXPECT_DOUBLE_EQ(slow.seconds, simulated(q, p));
  EXPECT_NEAR(slow.seconds / uniform, 4.0, 0.4);
  // A slow worker barely matters: the server's port was the bottleneck already.
  q.shaping.rankPortBytesPerSecond = {{3, kPort / 2}};
  EXPECT_LT(predictSeconds(q, p) / uniform, 1.2);
  // A shaped latency is paid by every message on the critical path.
  CostQuery lat = query("ring", 8, 4 * kMiB);
  const double before = predictSeconds(lat, p);
  lat.shaping.addedLatencySeconds = 1e-3;
  EXPECT_NEAR(predictSeconds(lat, p) - before, closedForm(lat).alphaCount * 1e-3, 1e-12);
  // Unknown algorithms are refused as by closedForm().
  EXPECT_THROW(predict(query("no-such", 4, kMiB), p), GenError);
}

TEST(ModelPorts, HierarchicalHasHostAndNetworkParameters) {
  // 8 ranks on 2 hosts of 4: reduce-scatter and all-gather inside the hosts, an all-reduce of
  // each quarter across them.
  CostQuery q = query("hierarchical", 8, 16 * kMiB);
  q.ranksPerHost = 4;
  const CostTerms t = closedForm(q);
  const CostTerms rs = closedForm(query("ring", 4, 16 * kMiB, Collective::ReduceScatter));
  const CostTerms ag = closedForm(query("ring", 4, 16 * kMiB, Collective::AllGather));
  const CostTerms across = closedForm(query("ring", 2, 4 * kMiB));
  EXPECT_DOUBLE_EQ(t.hostAlphaCount, rs.alphaCount + ag.alphaCount);
  EXPECT_DOUBLE_EQ(t.hostBetaBytes, rs.betaBytes + ag.betaBytes);
  EXPECT_DOUBLE_EQ(t.alphaCount, across.alphaCount);
  EXPECT_DOUBLE_EQ(t.betaBytes, across.betaBytes);
  EXPECT_DOUBLE_EQ(t.gammaBytes, rs.gammaBytes + across.gammaBytes);

  // Unset, the host's parameters are the network's: the three ring costs at alpha and beta.
  const ModelParams same;
  EXPECT_DOUBLE_EQ(predictSeconds(q, same),
                   rs.seconds(same) + ag.seconds(same) + across.seconds(same));

  // Inside a host 10 GB/s and 2 us, between hosts 1 GB/s and 50 us.
  ModelParams split;
  split.alpha = 50e-6;
  split.beta = 1.0 / 1e9;
  split.intraHostAlpha = 2e-6;
  split.intraHostBeta = 1.0 / 10e9;
  ModelParams host = split;
  host.alpha = *split.intraHostAlpha;
  host.beta = *split.intraHostBeta;
  EXPECT_DOUBLE_EQ(predictSeconds(q, split),
                   rs.seconds(host) + ag.seconds(host) + across.seconds(split));
  // The simulation over hosts of 4 agrees (local copies, which the closed form leaves out,
  // run at the hosts' 10 GB/s here: free them).
  LinkModel hosts = LinkModel::fromParams(split, 4);
  EXPECT_EQ(hosts.hostLink.latencySeconds, 2e-6);
  EXPECT_EQ(hosts.defaults.latencySeconds, 50e-6);
  hosts.copyBytesPerSecond = 0;
  const double hierSim = simulate(scheduleOf(q), hosts).totalSeconds;
  EXPECT_NEAR(hierSim / predictSeconds(q, split), 1.0, 0.1);
  // The flat ring's closed form knows no hosts: the simulation predicts it. It pushes
  // 2(n-1)/n of the vector through the network and takes about twice as long.
  CostQuery ring = query("ring", 8, 16 * kMiB);
  ring.ranksPerHost = 4;
  const Prediction flat = predict(ring, split);
  EXPECT_EQ(flat.method, PredictionMethod::Simulation);
  EXPECT_LT(1.5 * predictSeconds(q, split), flat.seconds);
  // On one host there is no network: alpha and beta are the host's links.
  q.ranksPerHost = 8;
  EXPECT_EQ(closedForm(q).hostBetaBytes, 0);
  EXPECT_EQ(predict(q, split).method, PredictionMethod::ClosedForm);
}

TEST(ModelPorts, ShapedLinkModelFollowsTheFlags) {
  ModelParams p;  // ports at 1.5 GB/s
  LinkShaping s;
  s.portBytesPerSecond = kPort;
  s.addedLatencySeconds = 50e-6;
  s.rankPortBytesPerSecond[3] = 50e6;
  s.rankPortBytesPerSecond[1] = 5e9;  // above the machine's own rate: the machine's
  s.linkBytesPerSecond[{1, 2}] = 10e6;
  const LinkModel m = LinkModel::shaped(p, s);
  EXPECT_DOUBLE_EQ(m.rate(0, 2), kPort);
  EXPECT_DOUBLE_EQ(m.rate(0, 3), 50e6);
  EXPECT_DOUBLE_EQ(m.rate(3, 0), 50e6);
  EXPECT_DOUBLE_EQ(m.rate(1, 0), kPort);  // rank 0's ingress
  EXPECT_DOUBLE_EQ(m.portOf(1, false).egressBytesPerSecond, 1.5e9);
  EXPECT_DOUBLE_EQ(m.rate(1, 2), 10e6);
  EXPECT_DOUBLE_EQ(m.rate(2, 1), kPort);
  EXPECT_DOUBLE_EQ(m.link(0, 1).latencySeconds, p.alpha + 50e-6);
  EXPECT_DOUBLE_EQ(m.link(1, 2).latencySeconds, p.alpha + 50e-6);
  // Unshaped, it is the parameters' link model.
  const LinkModel plain = LinkModel::shaped(p, {});
  EXPECT_DOUBLE_EQ(plain.rate(0, 1), 1.5e9);
  EXPECT_DOUBLE_EQ(plain.link(0, 1).latencySeconds, p.alpha);
  // With hosts, a slow rank's messages inside its host are capped too.
  const LinkModel hosts = LinkModel::shaped(p, s, 2);
  EXPECT_TRUE(hosts.sameHost(2, 3));
  EXPECT_DOUBLE_EQ(hosts.rate(2, 3), 50e6);
  EXPECT_DOUBLE_EQ(hosts.rate(3, 2), 50e6);
  EXPECT_DOUBLE_EQ(hosts.rate(0, 1), kPort);
}

// The shared-memory plane (LinkModel::sendersCopy): a send is its sender's copy, on its own
// thread, into the receiver's ring; there is no ingress to share.
TEST(ModelPorts, ASharedMemorySenderCopiesOnItsOwnThreadAndSharesNoIngress) {
  LinkModel m = handLinks();
  m.sendersCopy = true;
  // Three senders copy into three rings at once: 1 s, where ports would take 3 s.
  EXPECT_DOUBLE_EQ(simulate(transfers(4, {{1, 0}, {2, 0}, {3, 0}}), m).totalSeconds, 1.0);
  EXPECT_DOUBLE_EQ(simulate(transfers(4, {{1, 0}, {2, 0}, {3, 0}}), handLinks()).totalSeconds, 3.0);
  // One sender to three copies one after another.
  EXPECT_DOUBLE_EQ(simulate(transfers(4, {{0, 1}, {0, 2}, {0, 3}}), m).totalSeconds, 3.0);
  // The copy holds the sender's thread: a local copy after the send waits for it (2 s), where
  // a port would move the bytes while the rank copies (1 s).
  Schedule s = transfers(2, {{0, 1}});
  Op copy;
  copy.kind = OpKind::Copy;
  copy.src = {Buffer::Input, 0};
  copy.dst = {Buffer::Output, 0};
  copy.count = 2;
  s.ranks[0].push_back(copy);
  LinkModel ports = handLinks();
  ports.copyBytesPerSecond = 8;
  m.copyBytesPerSecond = 8;
  EXPECT_DOUBLE_EQ(simulate(s, ports).rankSeconds[0], 1.0);
  EXPECT_DOUBLE_EQ(simulate(s, m).rankSeconds[0], 2.0);
  // Every rank's work: rank 0's send (1 s) and copy (1 s), rank 1's receive into its
  // destination (1 s); the send costs nothing on a rank's thread when ports move it.
  EXPECT_DOUBLE_EQ(cpuSeconds(s, m, DataType::Float), 3.0);
  EXPECT_DOUBLE_EQ(cpuSeconds(s, ports, DataType::Float), 2.0);
}

ModelParams sharedMemoryParams(int cores) {
  ModelParams p;
  p.alpha = 10e-6;
  p.gamma = 1.0 / 8e9;
  p.shmCopy = 1.0 / 12e9;
  p.cores = cores;
  return p;
}

TEST(ModelPorts, PredictCostsUnshapedSharedMemoryRunsWithTheCopyRateAndTheCores) {
  CostQuery q = query("parameter-server", 4, 64 * kMiB);
  q.sharedMemory = true;
  const ModelParams p = sharedMemoryParams(2);
  EXPECT_TRUE(sharedMemoryCovers(q, p));
  const Prediction pr = predict(q, p);
  EXPECT_EQ(pr.method, PredictionMethod::SharedMemory);
  EXPECT_EQ(toString(pr.method), "shared memory");
  // With a core per rank the simulation alone decides; with fewer, the ranks' work waits for
  // the cores: one core does all of it, one piece after another, which two can at best halve
  // (here the dependencies keep them from it).
  const double own = predictSharedMemory(q, sharedMemoryParams(4));
  const double one = predictSharedMemory(q, sharedMemoryParams(1));
  EXPECT_GE(pr.seconds, own);
  EXPECT_GT(one, pr.seconds);
  EXPECT_LE(one, 2 * pr.seconds * (1 + 1e-9));
  // The work scale stretches the copying and reducing, not alpha's share: without latency
  // in proportion, with it by less.
  ModelParams noLatency = p, slower = p;
  noLatency.alpha = 0;
  slower.shmWorkScale = 1.5;
  ModelParams slowerNoLatency = slower;
  slowerNoLatency.alpha = 0;
  EXPECT_NEAR(predictSharedMemory(q, slowerNoLatency) / predictSharedMemory(q, noLatency), 1.5,
              1e-9);
  const double stretched = predictSharedMemory(q, slower) / pr.seconds;
  EXPECT_GT(stretched, 1.0);
  EXPECT_LT(stretched, 1.5);
  // Not covered: shaped, over ZeroMQ, or without a copy rate; those are costed by the ports.
  CostQuery shaped = q;
  shaped.shaping.portBytesPerSecond = kPort;
  EXPECT_FALSE(sharedMemoryCovers(shaped, p));
  EXPECT_NE(predict(shaped, p).method, PredictionMethod::SharedMemory);
  CostQuery zmq = q;
  zmq.sharedMemory = false;
  EXPECT_NE(predict(zmq, p).method, PredictionMethod::SharedMemory);
  ModelParams ports = p;
  ports.shmCopy.reset();
  EXPECT_FALSE(sharedMemoryCovers(q, ports));
  EXPECT_NE(predict(q, ports).method, PredictionMethod::SharedMemory);
}

}  // namespace
}  // namespace arl
