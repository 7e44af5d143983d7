// The window's item models under QAbstractItemModelTester, and the setup's checks.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QFont>
#include <QMimeData>
#include <QSettings>
#include <QTemporaryDir>
#include <algorithm>
#include <memory>

#include "backend/registry.h"
#include "base/errors.h"
#include "export/bench_sweep.h"
#include "topology/topology_run.h"
#include "window/flight_record_view.h"
#include "window/ring_order_model.h"
#include "window/setup.h"
#include "window/setup_settings.h"
#include "window/worker_list_model.h"

namespace arl::ui {
namespace {

using Tester = QAbstractItemModelTester;

WorkerInfo worker(int rank, bool local) {
  WorkerInfo w;
  w.serial = static_cast<uint64_t>(rank + 1);
  w.rank = rank;
  w.name = "w" + std::to_string(rank);
  w.host = local ? "here" : "there";
  w.backend = "cpu";
  w.local = local;
  w.pid = 100 + rank;
  return w;
}

TEST(WindowModels, WorkerListPassesTheModelTester) {
  WorkerListModel m;
  Tester t(&m, Tester::FailureReportingMode::Fatal);
  m.setWorkers({worker(0, true), worker(1, true), worker(2, false)});
  EXPECT_EQ(m.rowCount(), 3);
  EXPECT_EQ(m.remoteCount(), 1);
  EXPECT_EQ(m.data(m.index(2, WorkerListModel::Host)).toString(), QStringLiteral("there"));
  EXPECT_EQ(m.data(m.index(2, WorkerListModel::Origin)).toString(), QStringLiteral("remote"));
  WorkerInfo spare = worker(3, false);
  spare.spare = true;
  spare.rank = -1;
  m.setWorkers({worker(0, true), spare});
  EXPECT_EQ(m.data(m.index(1, WorkerListModel::Rank)).toString(), QStringLiteral("spare"));
  EXPECT_EQ(m.data(m.index(1, WorkerListModel::State)).toString(),
            QStringLiteral("spare: joins the next run"));
  EXPECT_EQ(m.data(m.index(0, WorkerListModel::State)).toString(), QStringLiteral("ranked"));
  // A spare's whole row is set apart (grey, italics); a ranked worker's is not.
  for (int c = 0; c < WorkerListModel::ColumnCount; ++c) {
    EXPECT_TRUE(m.data(m.index(1, c), Qt::FontRole).value<QFont>().italic()) << c;
    EXPECT_TRUE(m.data(m.index(1, c), Qt::ForegroundRole).isValid()) << c;
    EXPECT_FALSE(m.data(m.index(0, c), Qt::FontRole).isValid()) << c;
  }
  EXPECT_FALSE(m.data(m.index(1, WorkerListModel::Rank), Qt::DecorationRole).isValid());
  EXPECT_TRUE(m.data(m.index(1, WorkerListModel::Name), Qt::ToolTipRole)
                  .toString()
                  .contains(QStringLiteral("takes part from the next run")));
  m.setWorkers({});
  EXPECT_EQ(m.rowCount(), 0);
}

// Rank `r` of a 3-rank run 5: timed iteration 0 completed, iteration 1 aborted after
// `lastStep`, waiting on rank 2.
RankFlight flightOf(int r, int lastStep) {
  FlightRecorder f;
  FlightRun run;
  run.runId = 5;
  run.algorithm = "ring";
  run.nranks = 3;
  run.nsteps = 4;
  f.setRun(run);
  f.begin({IterationPlace::Kind::Timed, 0}, 1);
  f.stepDone(3);
  f.end(CollectiveState::Completed, 2);
  f.begin({IterationPlace::Kind::Timed, 1}, 3);
  for (int s = 0; s <= lastStep; ++s) f.stepDone(static_cast<uint32_t>(s));
  f.waitedOn(uint64_t{1} << 2);
  f.end(CollectiveState::Aborted, 4);
  RankFlight rf;
  rf.rank = r;
  rf.received = true;
  rf.records = f.records();
  return rf;
}

TEST(WindowModels, FlightRecordPassesTheModelTesterAndNamesTheRankThatNeverReachedTheStep) {
  FlightRecordModel m;
  Tester t(&m, Tester::FailureReportingMode::Fatal);
  RankFlight gone;
  gone.rank = 2;
  gone.missing = "the process is gone";
  const std::vector<RankFlight> flight = {flightOf(0, 0), flightOf(1, 1), gone};
  m.setAnalysis(analyzeFlight(flight, 5));
  ASSERT_EQ(m.rowCount(), 3);
  EXPECT_EQ(m.data(m.index(0, FlightRecordModel::State)).toString(), QStringLiteral("aborted"));
  EXPECT_EQ(m.data(m.index(0, FlightRecordModel::LastStep)).toString(), QStringLiteral("0"));
  EXPECT_EQ(m.data(m.index(0, FlightRecordModel::WaitedOn)).toString(), QStringLiteral("2"));
  EXPECT_EQ(m.data(m.index(0, FlightRecordModel::Reached)).toString(), QStringLiteral("yes"));
  EXPECT_EQ(m.data(m.index(2, FlightRecordModel::Reached)).toString(),
            QStringLiteral("never reached step 1"));
  EXPECT_EQ(m.data(m.index(2, FlightRecordModel::Note)).toString(),
            QStringLiteral("no record, the process is gone"));
  EXPECT_EQ(flightHeadline(m.analysis()),
            QStringLiteral("Failed in iteration 1 (timed) at step 1 of 4 (numbered from 0)"));
  EXPECT_EQ(flightNeverReachedText(m.analysis()),
            QStringLiteral("Ranks that never reached step 1: 2"));
  m.setAnalysis({});
  EXPECT_EQ(m.rowCount(), 0);
}

TEST(WindowModels, RingOrderMovesRanksAndPassesTheModelTester) {
  RingOrderModel m;
  Tester t(&m, Tester::FailureReportingMode::Fatal);
  m.setRing(4, {});
  EXPECT_EQ(m.order(), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(m.isIdentity());
  std::vector<int> edited;
  QObject::connect(&m, &RingOrderModel::orderEdited,
                   [&](const std::vector<int>& o) { edited = o; });
  // Rank 2 moved before rank 1, as a drag does.
  ASSERT_TRUE(m.moveRows({}, 2, 1, {}, 1));
  EXPECT_EQ(m.order(), (std::vector<int>{0, 2, 1, 3}));
  EXPECT_EQ(edited, m.order());
  // A drag from the view: the first rank dropped at the end.
  std::unique_ptr<QMimeData> drag(m.mimeData({m.index(0)}));
  ASSERT_TRUE(drag);
  EXPECT_TRUE(m.canDropMimeData(drag.get(), Qt::MoveAction, 4, 0, {}));
  m.dropMimeData(drag.get(), Qt::MoveAction, 4, 0, {});
  EXPECT_EQ(m.order(), (std::vector<int>{2, 1, 3, 0}));
  EXPECT_FALSE(m.moveRows({}, 1, 1, {}, 1));  // onto itself
  EXPECT_FALSE(m.moveRows({}, 3, 2, {}, 0));  // past the end
  m.setRing(3, {2, 2, 1});                    // not a permutation: the default ring
  EXPECT_EQ(m.order(), (std::vector<int>{0, 1, 2}));
  m.setRing(3, {2, 0, 1});
  EXPECT_EQ(m.data(m.index(0), Qt::UserRole).toInt(), 2);
}

TEST(WindowSetup, CoreRefusalsLandOnTheirFields) {
  SessionSetup s;
  EXPECT_TRUE(checkSetup(s).empty());
  s.ringOrder = {0, 1, 1, 3};
  s.slice.single = 1001;  // not a whole number of floats
  s.collective = Collective::Reduce;
  s.root = 7;
  const auto problems = checkSetup(s);
  auto find = [&](SetupField f) {
    for (const auto& p : problems) {
      if (p.field == f) return p.rule;
    }
    return std::string();
  };
  EXPECT_NE(find(SetupField::RingOrder).find("comes twice"), std::string::npos)
      << find(SetupField::RingOrder);
  EXPECT_NE(find(SetupField::Slice).find("whole number"), std::string::npos)
      << find(SetupField::Slice);
  EXPECT_NE(find(SetupField::Root).find("0..3"), std::string::npos) << find(SetupField::Root);
}

TEST(WindowSetup, SweepsShapingAndWorldsAreChecked) {
  SessionSetup s;
  s.size = {true, 0, 64 << 10, 4 << 10, 4};  // max below min
  s.slowLinkFrom = 2;
  s.slowLinkTo = 2;
  s.portMBps = 0;
  auto has = [](const std::vector<SetupProblem>& ps, SetupField f) {
    return std::any_of(ps.begin(), ps.end(), [f](const SetupProblem& p) { return p.field == f; });
  };
  auto ps = checkSetup(s);
  EXPECT_TRUE(has(ps, SetupField::Size));
  EXPECT_TRUE(has(ps, SetupField::SlowLink));
  EXPECT_FALSE(has(ps, SetupField::PortRate));
  s = SessionSetup{};
  s.localWorkers = 0;
  EXPECT_TRUE(has(checkSetup(s), SetupField::LocalWorkers));
  s = SessionSetup{};
  s.slowRank = 9;
  EXPECT_TRUE(has(checkSetup(s), SetupField::SlowRank));
  s = SessionSetup{};
  s.algorithm = "hierarchical";
  EXPECT_TRUE(has(checkSetup(s, {"a", "a", "a", "b"}), SetupField::RanksPerHost));
  EXPECT_FALSE(has(checkSetup(s, {"a", "a", "b", "b"}), SetupField::RanksPerHost));
}

// A shaping that core refuses lands on the control that set it, and the check goes on to the
// other fields (a refusal of the shaping is no problem of the algorithm's).
TEST(WindowSetup, ShapingRefusalsLandOnTheirOwnFields) {
  auto fieldsOf = [](const std::vector<SetupProblem>& ps) {
    std::vector<SetupField> out;
    for (const SetupProblem& p : ps) out.push_back(p.field);
    return out;
  };
  SessionSetup s;
  s.slowRank = 7;
  s.collective = Collective::Reduce;
  s.root = 5;
  const auto ps = checkSetup(s);
  EXPECT_EQ(fieldsOf(ps), (std::vector<SetupField>{SetupField::SlowRank, SetupField::Root}));
  ASSERT_FALSE(ps.empty());
  EXPECT_NE(ps[0].rule.find("rank 7 is out of range for 4 ranks"), std::string::npos) << ps[0].rule;
  s = SessionSetup{};
  s.slowLinkFrom = 1;
  s.slowLinkTo = 6;
  s.latencyUs = -3;
  EXPECT_EQ(fieldsOf(checkSetup(s)),
            (std::vector<SetupField>{SetupField::Latency, SetupField::SlowLink}));
}

TEST(WindowSetup, TheSessionsConfigAndTheReplayedRunCarryTheShaping) {
  SessionSetup s;
  s.portMBps = 200;
  s.slowLinkFrom = 1;
  s.slowLinkTo = 2;
  s.slowLinkMBps = 25;
  EXPECT_EQ(benchConfigOf(s).shaping, s.shaping());
  BenchReport report;
  report.config = benchConfigOf(s);
  SweepRow row;
  row.result.nranks = 4;
  row.result.request.shaping = s.shaping();
  const TopologyRun run = topologyRunOf(report, row);
  EXPECT_EQ(run.shaping, s.shaping());
  EXPECT_DOUBLE_EQ(run.shaping.linkRate(1, 2), 25e6);
}

TEST(WindowSetup, SweepSpecFollowsTheSetup) {
  SessionSetup s;
  s.size = {true, 0, 4 << 10, 64 << 10, 4};
  s.slice = {true, 0, 16 << 10, 64 << 10, 2};
  s.portMBps = 200;
  const SweepSpec spec = sweepSpecOf(s);
  EXPECT_EQ(spec.sizes, (std::vector<uint64_t>{4 << 10, 16 << 10, 64 << 10}));
  EXPECT_EQ(spec.sliceSizes, (std::vector<uint64_t>{16 << 10, 32 << 10, 64 << 10}));
  EXPECT_EQ(spec.inflights, (std::vector<int>{4}));
  EXPECT_DOUBLE_EQ(spec.shaping.portBytesPerSecond, 200e6);
  EXPECT_TRUE(spec.keepTelemetry);
  EXPECT_EQ(parseRingOrder("0 2, 1  3"), (std::vector<int>{0, 2, 1, 3}));
  EXPECT_THROW(parseRingOrder("0 x 1"), ConfigError);
}

// The window's setup and bench's flags that say the same: the same sweep, field for field.
// The setup stands for `bench --workers 3 --expect 1 --algo tree --collective allgather
// --dtype int32 --op max --root 2 -b 4K -e 64K -f 4 --slice 16K,32K,64K --inflight 1,2,4,8
// --iters 7 --warmup_iters 2 --ranks-per-host 2 --ring-order 0,2,1,3 --nic-bw 200M
// --link-latency 5us --slow-rank 1:50M --slow-link 0-3:25M`; what the panel has no field for
// (data plane, CUDA IPC, stall timeout, telemetry and its event limit) is bench's default.
TEST(WindowSetup, BuildsTheSweepBenchBuildsFromTheSameSettings) {
  SessionSetup s;
  s.localWorkers = 3;
  s.remoteWorkers = 1;
  s.algorithm = "tree";
  s.collective = Collective::AllGather;
  s.dtype = DataType::Int32;
  s.op = RedOp::Max;
  s.root = 2;
  s.size = {true, 0, 4 << 10, 64 << 10, 4};
  s.slice = {true, 0, 16 << 10, 64 << 10, 2};
  s.inflight = {true, 0, 1, 8, 2};
  s.window = 8;
  s.iterations = 7;
  s.warmup = 2;
  s.ranksPerHost = 2;
  s.ringOrder = {0, 2, 1, 3};
  s.portMBps = 200;
  s.latencyUs = 5;
  s.slowRank = 1;
  s.slowRankMBps = 50;
  s.slowLinkFrom = 0;
  s.slowLinkTo = 3;
  s.slowLinkMBps = 25;

  BenchConfig bench;  // as BenchOptions::check() leaves it for those flags
  bench.workers = 3;
  bench.expect = 1;
  bench.algorithms = {"tree"};
  bench.collective = Collective::AllGather;
  bench.dtype = DataType::Int32;
  bench.op = RedOp::Max;
  bench.root = 2;
  bench.minBytes = 4 << 10;
  bench.maxBytes = 64 << 10;
  bench.stepFactor = 4;
  bench.sliceSizes = {16 << 10, 32 << 10, 64 << 10};
  bench.inflights = {1, 2, 4, 8};
  bench.window = 8;
  bench.iters = 7;
  bench.warmup = 2;
  bench.ranksPerHost = 2;
  bench.ringOrder = {0, 2, 1, 3};
  bench.shaping.portBytesPerSecond = 200e6;
  bench.shaping.addedLatencySeconds = 5e-6;
  bench.shaping.rankPortBytesPerSecond[1] = 50e6;
  bench.shaping.linkBytesPerSecond[{0, 3}] = 25e6;
  SweepSpec expected = arl::sweepSpecOf(bench, {4 << 10, 16 << 10, 64 << 10});
  expected.keepTelemetry = true;  // the window keeps each run's telemetry for its charts

  const SweepSpec spec = sweepSpecOf(s);
  EXPECT_EQ(spec.algorithms, expected.algorithms);
  EXPECT_EQ(spec.sizes, expected.sizes);
  EXPECT_EQ(spec.sliceSizes, expected.sliceSizes);
  EXPECT_EQ(spec.inflights, expected.inflights);
  EXPECT_EQ(spec.shaping, expected.shaping);
  EXPECT_EQ(spec.base.shaping, expected.base.shaping);
  EXPECT_EQ(spec.base.ringOrder, expected.base.ringOrder);
  EXPECT_EQ(spec.base.telemetry, expected.base.telemetry);
  EXPECT_EQ(spec.base, expected.base);
  EXPECT_EQ(spec, expected);
  EXPECT_EQ(spec.base.dataPlane, DataPlaneKind::Auto);
  EXPECT_TRUE(spec.base.cudaIpc);
  EXPECT_EQ(spec.base.stallTimeout, BenchConfig{}.stallTimeout);
  EXPECT_EQ(spec.base.maxEvents, BenchConfig{}.maxEvents);
  const int n = s.nranks();
  for (const SweepPoint& p : sweepPoints(spec)) {
    EXPECT_EQ(sweepRequest(spec, p, n), sweepRequest(expected, p, n));
  }

  // Slices in flight beyond int saturate, as the check sees them, and are refused.
  s.inflight = {false, uint64_t{1} << 32, 1, 8, 2};
  EXPECT_EQ(sweepSpecOf(s).inflights, (std::vector<int>{1 << 30}));
  EXPECT_EQ(benchConfigOf(s).inflights, (std::vector<int>{1 << 30}));
  const auto problems = checkSetup(s);
  EXPECT_TRUE(std::any_of(problems.begin(), problems.end(),
                          [](const SetupProblem& p) { return p.field == SetupField::Inflight; }));

  // Ring's window: each run's request carries it, and one beyond 1024 lands on its own field.
  s.inflight = {false, 4, 1, 8, 2};
  s.algorithm = "ring";
  ASSERT_TRUE(checkSetup(s).empty());
  for (const SweepPoint& p : sweepPoints(sweepSpecOf(s))) {
    EXPECT_EQ(sweepRequest(sweepSpecOf(s), p, n).window, 8);
  }
  s.window = 2000;
  const auto wide = checkSetup(s);
  ASSERT_EQ(wide.size(), 1u);
  EXPECT_EQ(wide.front().field, SetupField::Window);
  EXPECT_NE(wide.front().rule.find("1024"), std::string::npos) << wide.front().rule;
}

TEST(WindowSetup, SettingsRoundTrip) {
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  QSettings st(dir.filePath(QStringLiteral("lab.ini")), QSettings::IniFormat);
  SessionSetup s;
  s.localWorkers = 6;
  s.algorithm = "tree";
  s.collective = Collective::AllGather;
  s.dtype = DataType::Int32;
  s.size = {false, 123456, 1, 2, 3};
  s.ringOrder = {5, 4, 3, 2, 1, 0};
  s.slowLinkFrom = 1;
  s.slowLinkTo = 2;
  s.slowLinkMBps = 42;
  s.devices = {1, 0, 3, 2, 5, 4};
  s.window = 16;
  saveSetup(st, s);
  EXPECT_EQ(loadSetup(st), s);
  st.setValue(QStringLiteral("setup/algorithm"), QStringLiteral("no-such-algorithm"));
  EXPECT_EQ(loadSetup(st).algorithm, "ring");
}

// The backend and the local workers' GPUs: a backend this build lacks, devices for a backend
// without any, a list of the wrong length, and NCCL's one rank per GPU land on their fields.
TEST(WindowSetup, BackendsAndDevicesAreChecked) {
  auto has = [](const std::vector<SetupProblem>& ps, SetupField f) {
    return std::any_of(ps.begin(), ps.end(), [f](const SetupProblem& p) { return p.field == f; });
  };
  SessionSetup s;
  s.localWorkers = 2;
  EXPECT_TRUE(checkSetup(s).empty());
  s.devices = {0};
  EXPECT_TRUE(has(checkSetup(s), SetupField::Devices)) << "cpu uses no device";
  s.devices.clear();
  s.backend = "nccl";
  if (backendUnavailable("nccl")) {
    EXPECT_TRUE(has(checkSetup(s), SetupField::Backend));
    return;
  }
  s.algorithm = "ring";
  EXPECT_TRUE(has(checkSetup(s), SetupField::Algorithm)) << "nccl runs NCCL's collectives only";
  s.algorithm = "nccl-ring";
  EXPECT_TRUE(checkSetup(s).empty()) << "the default devices are 0 and 1";
  EXPECT_EQ(s.localDevices(), (std::vector<int>{0, 1}));
  s.devices = {0};
  EXPECT_TRUE(has(checkSetup(s), SetupField::Devices)) << "two ranks on device 0";
  s.devices = {0, 1, 2};
  EXPECT_TRUE(has(checkSetup(s), SetupField::Devices)) << "three devices for two workers";
  s.devices.clear();
  s.algorithm = "all";
  EXPECT_EQ(s.algorithms(), (std::vector<std::string>{"nccl-ring", "nccl-tree"}));
  s.backend = "cuda";
  const auto onCuda = s.algorithms();
  EXPECT_NE(std::find(onCuda.begin(), onCuda.end(), "ring"), onCuda.end());
  EXPECT_NE(std::find(onCuda.begin(), onCuda.end(), "nccl-tree"), onCuda.end());
  s.backend = "cpu";
  const auto onCpu = s.algorithms();
  EXPECT_EQ(std::find(onCpu.begin(), onCpu.end(), "nccl-ring"), onCpu.end());
  EXPECT_THROW(parseDevices("0,x"), ConfigError);
  EXPECT_EQ(parseDevices("2, 3"), (std::vector<int>{2, 3}));
}

// A recorded run is replayed on the network it was paced to: its slow link is drawn slow.
TEST(WindowReplay, ARecordedRunKeepsItsShaping) {
  BenchReport report;
  report.config.shaping.portBytesPerSecond = 200e6;
  report.config.shaping.linkBytesPerSecond[{0, 1}] = 50e6;
  SweepRow row;
  row.result.nranks = 4;
  row.result.request.algorithm = "parameter-server";
  TopologyRun run = topologyRunOf(report, row);
  EXPECT_EQ(run.nranks, 4);
  EXPECT_EQ(run.shaping.linkRate(0, 1), 50e6);
  EXPECT_EQ(run.shaping.portBytesPerSecond, 200e6);
  // The run's own request, when it names a network, is what it ran on.
  row.result.request.shaping.linkBytesPerSecond[{2, 3}] = 10e6;
  run = topologyRunOf(report, row);
  EXPECT_EQ(run.shaping.linkRate(2, 3), 10e6);
  EXPECT_EQ(run.shaping.linkRate(0, 1), 0);
}

}  // namespace
}  // namespace arl::ui
