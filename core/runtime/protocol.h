// Control-plane protocol between the coordinator and the workers (docs/protocol.md).
//
// Every control message is two frames: a fixed 16-byte header frame (magic "ARL1", protocol
// version, message type, run epoch; little-endian) and a body frame (protobuf, kept inside
// core/runtime). This file is plain bytes and plain structs: no ZeroMQ, no protobuf, so the codec
// is testable without sockets and its users never see generated code.
//
// Decoding never throws and never trusts the peer: every frame size, enum, rank, count and
// string is checked, and a bad message yields a DecodeError with a reason fit for a log line.
// Encoding checks the same rules with ARL_ENFORCE (a message we cannot decode ourselves is a
// bug on the sending side), except that free text (reasons, log lines) is made valid instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "base/clock_sample.h"
#include "base/errors.h"
#include "base/limits.h"
#include "base/shaping.h"
#include "base/types.h"
#include "exec/flight_recorder.h"
#include "exec/progress.h"
#include "exec/telemetry.h"
#include "train/train_types.h"
#include "transport/transport.h"

namespace arl {

// ---- Versions, sizes, limits --------------------------------------------------------------

// Version written into every header. A receiver rejects any other version.
// 2: Heartbeat carries the run (phase, progress, waits); no per-wait receive timeout.
// 3: IterationResult carries the times of consecutive iterations (moreTimesNs).
// 4: TelemetryBatch carries packed fixed-size records instead of per-field columns.
// 5: RunConfig carries the link shaping that the data planes pace.
// 6: a library run (nccl-ring, nccl-tree) passes NCCL's unique id as rank 0's Ready endpoint
//    "nccl://id/TOKEN", which Start carries to every rank.
// 7: CUDA IPC between ranks of one host: RunConfig carries cudaIpc, Ready the rank's device
//    (PeerDeviceInfo), Start every rank's device; the lent slices travel as notices on the
//    data plane.
// 8: random data: RunConfig carries randomData, RunDone the output's digest and sample.
// 9: RunConfig's check counts the iterations checked (-c N); it was a bool.
// 10: Heartbeat and RunFailed say which of the check's iterations after the timed ones a rank
//     is in (checkIteration); RunDone's wrongTotal counts them, IterationResult's wrong not.
// 11: training: RunConfig carries a TrainConfig, IterationResult a rank's TrainStep.
// 12: a library that rendezvous through a key-value store (Gloo) keeps it on the coordinator:
//     StoreSet, StoreGet and StoreValue; its ranks report "gloo://store" in Ready.
// 13: a rank on several hosts' run uses shared memory inside its host and ZeroMQ across: its
//     Ready names both endpoints, "shm://NAME,tcp://HOST:PORT". RunConfig carries an MSCCL
//     algorithm file's text (scheduleXml) that every rank imports.
//     CURVE on the data plane: Hello carries the worker's data-plane public key (dataKey),
//     RunConfig every rank's (dataKeys).
//     RunConfig carries each link's own latency (link_latencies: a named topology's hops).
// 14: RunConfig carries the torus the ranks lie on (torusDims), whose dimensions swing takes
//     in turn, and knomial's radix (radix). FlightRecord: a worker's last collectives, sent
//     when a run fails or is aborted on it. The tcp data plane (DataPlaneKind::Tcp,
//     DATA_PLANE_TCP): plain TCP between the ranks, with a handshake on the CURVE keys of
//     protocol 13. Hello carries where a cluster launcher placed the
//     worker (launchRank, launchLocalRank).
// 15: RunConfig carries ring's window of slices (window, GenParams::window): the order of a
//     rank's ops, which every rank must share.
inline constexpr uint16_t kProtocolVersion = 15;

inline constexpr size_t kHeaderBytes = 16;
inline constexpr char kHeaderMagic[4] = {'A', 'R', 'L', '1'};

inline constexpr size_t kMaxBodyBytes = size_t{4} << 20;
inline constexpr size_t kMaxNameBytes = 255;      // worker, host, backend and algorithm names
inline constexpr size_t kMaxEndpointBytes = 255;  // "tcp://host:port", "ipc:///path"
inline constexpr size_t kMaxTextBytes = 4096;     // failure reasons, log lines
// Records in one TelemetryBatch: 16384 x 48 bytes = 768 KiB, within kMaxBodyBytes.
inline constexpr size_t kMaxEventsPerBatch = 16384;
// The largest control frame either side accepts (ZMQ_MAXMSGSIZE): a header and the largest
// body. libzmq drops a peer as soon as its frame header claims more, before holding any of it,
// so a stranger's frame claiming 4 GiB costs nothing.
inline constexpr int64_t kMaxControlMessageBytes =
    static_cast<int64_t>(kHeaderBytes + kMaxBodyBytes);
// Iterations one IterationResult reports: 4096 x 10 bytes at most, within kMaxBodyBytes.
inline constexpr size_t kMaxIterationsPerResult = 4096;
inline constexpr int32_t kMaxDeviceIndex = 1023;
inline constexpr size_t kMaxOutputSampleBytes = 64;  // RunDone::outputSample
// Spans one TrainStep carries: a forward and a backward span per layer, the optimizer, and a
// collective per bucket (at most one bucket per float of a layer's worth: bounded by this).
inline constexpr size_t kMaxTrainSpans = 4096;
// A run's store (StoreSet): keys are identifiers (printable ASCII without spaces) of at most
// kMaxNameBytes; values at most kMaxStoreValueBytes (Gloo's full mesh sets one key per rank
// holding an address per peer, about 150 bytes each); at most kMaxStoreKeys keys per run.
inline constexpr size_t kMaxStoreValueBytes = size_t{64} << 10;
inline constexpr size_t kMaxStoreKeys = 4 * static_cast<size_t>(kMaxRanks);
inline constexpr uint32_t kMaxHeartbeatIntervalMs = 60'000;
inline constexpr uint32_t kMaxHeartbeatLiveness = 100;

// Liveness targets (Paranoid Pirate): the worker heartbeats every interval; the coordinator
// declares a worker dead after `liveness` intervals without any message from it, and a worker
// leaves after `liveness` intervals without any message from the coordinator.
inline constexpr uint32_t kDefaultHeartbeatIntervalMs = 250;
inline constexpr uint32_t kDefaultHeartbeatLiveness = 4;

// ---- Frames -------------------------------------------------------------------------------

using Bytes = std::vector<uint8_t>;
using ByteView = std::span<const uint8_t>;
// An encoded message: always two frames, [0] the header, [1] the body.
using Frames = std::vector<Bytes>;

// Wire values are fixed forever within a protocol version; 0 is never a valid type.
enum class MsgType : uint16_t {
  Hello = 1,
  Welcome = 2,
  Ping = 3,
  Pong = 4,
  Heartbeat = 5,
  RunConfig = 6,
  Ready = 7,
  Start = 8,
  IterationResult = 9,
  TelemetryBatch = 10,
  RunDone = 11,
  RunFailed = 12,
  Abort = 13,
  Shutdown = 14,
  Log = 15,
  StoreSet = 16,
  StoreGet = 17,
  StoreValue = 18,
  FlightRecord = 19,
};
inline constexpr uint16_t kMaxMsgType = 19;

// "Hello", "RunFailed", ...; "?" for a value outside the enum.
std::string_view typeName(MsgType t);
// Which side may send a type (a receiver rejects the other direction at its own level).
bool sentByWorker(MsgType t);
bool sentByCoordinator(MsgType t);
// Run-scoped messages carry the run's epoch (>= 1) in the header; a receiver drops those whose
// epoch is not the current run's (stale traffic of an aborted run). Session messages carry 0.
bool isRunScoped(MsgType t);

// The header frame, decoded. Layout (little-endian): magic[4] version u16 type u16 epoch u64.
struct FrameHeader {
  uint16_t version = kProtocolVersion;
  MsgType type = MsgType::Heartbeat;
  uint64_t epoch = 0;
  bool operator==(const FrameHeader&) const = default;
};

// ---- Decode errors and results --------------------------------------------------------------

enum class DecodeErrc : uint8_t {
  FrameCount,          // not exactly two frames
  HeaderSize,          // header frame is not kHeaderBytes long
  BadMagic,            // header frame does not start with "ARL1"
  UnsupportedVersion,  // header version is not kProtocolVersion
  UnknownType,         // header type is not a MsgType
  BodyTooLarge,        // body frame exceeds kMaxBodyBytes
  MalformedBody,       // body does not parse as the header's type
  InvalidField,        // body parses but a field is out of range or inconsistent
  UnexpectedType,      // a typed decode (Hello::decode, ...) met another type
};
std::string_view toString(DecodeErrc c);

struct DecodeError {
  DecodeErrc code = DecodeErrc::MalformedBody;
  std::string reason;  // e.g. "RunConfig: root 9 is not a rank of a world of 4"
  // The header, when it was read completely (known type, supported version): lets a
  // receiver name the type and epoch of a message whose body it refused.
  std::optional<FrameHeader> header;

  // "<code>: <reason>", one line for a log.
  std::string message() const;
};

// The value of a successful decode or the DecodeError that says why there is none.
template <class T>
class [[nodiscard]] DecodeResult {
 public:
  DecodeResult(T value) : v_(std::in_place_index<0>, std::move(value)) {}
  DecodeResult(DecodeError error) : v_(std::in_place_index<1>, std::move(error)) {}

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  // Precondition: ok().
  const T& value() const& {
    ARL_ENFORCE(ok(), "value() of a failed decode: " << std::get<1>(v_).message());
    return std::get<0>(v_);
  }
  T& value() & {
    ARL_ENFORCE(ok(), "value() of a failed decode: " << std::get<1>(v_).message());
    return std::get<0>(v_);
  }
  T&& value() && {
    ARL_ENFORCE(ok(), "value() of a failed decode: " << std::get<1>(v_).message());
    return std::get<0>(std::move(v_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  // Precondition: !ok().
  const DecodeError& error() const {
    ARL_ENFORCE(!ok(), "error() of a successful decode");
    return std::get<1>(v_);
  }

 private:
  std::variant<T, DecodeError> v_;
};

// ---- Messages -------------------------------------------------------------------------------
// Each struct encodes itself into Frames and decodes from a (header, body) pair. decode()
// fails with UnexpectedType when the frames hold another type; to take whatever arrives, use
// the free decode() below and switch on the variant.

// worker -> coordinator: first message of a session.
struct Hello {
  static constexpr MsgType kType = MsgType::Hello;
  std::string name;                             // worker's display name, 1..kMaxNameBytes of UTF-8
  std::string hostName;                         // 1..kMaxNameBytes of UTF-8
  int64_t pid = 0;                              // > 0
  std::string backend;                          // "cpu", "cuda", ...: printable ASCII, no spaces
  int32_t deviceIndex = -1;                     // -1: not tied to a device; else 0..kMaxDeviceIndex
  uint16_t protocolVersion = kProtocolVersion;  // what the worker speaks; >= 1
  uint64_t pidNamespace = 0;                    // its pid namespace's id; 0: unknown
  // Public key (Z85) of the key pair the worker made for its data planes this session; "":
  // in the clear. Sent over the control connection, encrypted when it is (CURVE).
  std::string dataKey;
  // Where a cluster launcher placed the worker (runtime/launcher.h): its rank in the launch
  // and on its host, 0..kMaxRanks-1; -1: not started by one.
  int32_t launchRank = -1;
  int32_t launchLocalRank = -1;

  Frames encode() const;
  static DecodeResult<Hello> decode(ByteView header, ByteView body);
  bool operator==(const Hello&) const = default;
};

// coordinator -> worker: the worker is admitted with a rank.
struct Welcome {
  static constexpr MsgType kType = MsgType::Welcome;
  int32_t rank = 0;                                            // 0 <= rank < worldSize
  int32_t worldSize = 1;                                       // 1..kMaxRanks
  uint32_t heartbeatIntervalMs = kDefaultHeartbeatIntervalMs;  // 1..kMaxHeartbeatIntervalMs
  uint32_t heartbeatLiveness = kDefaultHeartbeatLiveness;      // 1..kMaxHeartbeatLiveness

  Frames encode() const;
  static DecodeResult<Welcome> decode(ByteView header, ByteView body);
  bool operator==(const Welcome&) const = default;
};

// worker -> coordinator: clock-offset probe. Timestamps are ns, >= 0, each on its sender's
// clock (steady_clock on both sides).
struct Ping {
  static constexpr MsgType kType = MsgType::Ping;
  uint32_t seq = 0;
  int64_t t0Ns = 0;  // worker clock when the Ping left

  Frames encode() const;
  static DecodeResult<Ping> decode(ByteView header, ByteView body);
  bool operator==(const Ping&) const = default;
};

// coordinator -> worker: answer to a Ping.
struct Pong {
  static constexpr MsgType kType = MsgType::Pong;
  uint32_t seq = 0;
  int64_t t0Ns = 0;  // echoed from the Ping
  int64_t t1Ns = 0;  // coordinator clock when the Ping arrived
  int64_t t2Ns = 0;  // coordinator clock when the Pong left

  // The Pong for `ping`, received at `recvNs` and sent at `sendNs` (coordinator clock).
  static Pong answering(const Ping& ping, int64_t recvNs, int64_t sendNs);

  Frames encode() const;
  static DecodeResult<Pong> decode(ByteView header, ByteView body);
  bool operator==(const Pong&) const = default;
};

// Both ways. Any message counts as life; a Heartbeat is what a side sends when it has
// nothing else to say. A worker reports where it is, so that a rank that goes silent can be
// named with the iteration and step it stopped at.
struct Heartbeat {
  static constexpr MsgType kType = MsgType::Heartbeat;
  bool inRun = false;
  uint32_t iteration = 0;  // meaningful when inRun
  uint32_t step = 0;       // meaningful when inRun
  // worker -> coordinator: its run (epoch 0: none), where in it, a counter that moves while
  // the run moves (exec/progress.h), and what its run thread waits for.
  uint64_t epoch = 0;
  RunPhase phase = RunPhase::Idle;
  uint64_t progress = 0;
  WaitKind wait = WaitKind::None;
  int32_t waitPeer = -1;
  uint32_t waitStep = 0;
  // coordinator -> worker: the result of run `epoch` has not arrived; send it again.
  bool wantReport = false;
  // worker -> coordinator, when inRun: the check's iteration after the timed ones it runs (k
  // of RunConfig.check, 2..check, IterationPlace); 0 in the others. `iteration` is 0 then.
  uint32_t checkIteration = 0;

  Frames encode() const;
  static DecodeResult<Heartbeat> decode(ByteView header, ByteView body);
  bool operator==(const Heartbeat&) const = default;
};

// coordinator -> worker: one benchmark run (warmup + timed iterations of one collective). Its
// data plane is set up in two phases: each worker binds for this run and reports its endpoint
// in Ready; Start carries every rank's.
struct RunConfig {
  static constexpr MsgType kType = MsgType::RunConfig;
  uint64_t runId = 0;
  uint64_t epoch = 0;     // >= 1; also the header's epoch
  int32_t worldSize = 0;  // 1..kMaxRanks
  std::string algorithm;  // "ring", "tree", ...: printable ASCII, no spaces
  Collective collective = Collective::AllReduce;
  DataType dtype = DataType::Float;
  RedOp op = RedOp::Sum;
  uint64_t count = 0;         // NCCL count; count * dtypeSize * worldSize fits in 64 bits
  uint64_t sliceBytes = 0;    // the pipeline slice: most bytes one message carries; >= 1
  int32_t root = 0;           // 0 <= root < worldSize
  uint32_t ranksPerHost = 1;  // 1..worldSize
  uint32_t radix = 4;         // knomial's k: 2..kMaxRanks (one above worldSize draws one round)
  uint32_t inflight = 4;      // 1..kMaxInflight
  uint32_t window = 1;        // ring's window of slices (GenParams::window): 1..kMaxInflight
  bool inPlace = false;
  uint32_t warmup = 0;      // 0..kMaxIterations
  uint32_t iterations = 1;  // 1..kMaxIterations
  uint32_t check = 1;       // 0..kMaxIterations: iterations checked (RankRunOptions::check)
  TelemetryLevel telemetry = TelemetryLevel::Chunks;
  std::vector<int32_t> ringOrder;  // a permutation of 0..worldSize-1
  // The torus the ranks lie on (GenParams::torusDims): each 1..worldSize, their product
  // worldSize; empty: none.
  std::vector<uint32_t> torusDims;
  // hosts[r]: host name of rank r, or empty (not given). A worker binds ipc:// when every
  // rank is on its host, tcp:// otherwise.
  std::vector<std::string> hosts;
  // pidNamespaces[r]: rank r's pid namespace (Hello::pidNamespace), or empty (not given).
  std::vector<uint64_t> pidNamespaces;
  // dataKeys[r]: rank r's data-plane public key (Hello::dataKey, Z85), or empty (in the clear):
  // a tcp:// data plane admits these keys alone (BindOptions::curvePeerKeys).
  std::vector<std::string> dataKeys;
  // Auto: shared memory when every rank is on one host (see hosts) and in one pid namespace,
  // ZeroMQ otherwise. Shm with ranks on several hosts or namespaces is refused.
  DataPlaneKind dataPlane = DataPlaneKind::Auto;
  // The network the data planes pace (transport/pacing.h); empty = not shaped. checkShaping
  // holds for worldSize.
  LinkShaping shaping;
  // Lend slices in place between ranks of one host that share device memory (CUDA IPC,
  // transport/peer_transport.h); false stages every pair.
  bool cudaIpc = true;
  // Seeded random inputs (RunRequest::randomData): not checked; RunDone carries a digest.
  bool randomData = false;
  // A training run (core/train/train_types.h): `iterations` steps of it, no collective of
  // `count` elements timed; unset for every other run.
  std::optional<TrainConfig> train;
  // An MSCCL algorithm file's text (RunRequest::scheduleXml; protocol 13): every rank imports
  // its schedule instead of generating `algorithm`'s. Empty for every other run.
  std::string scheduleXml;

  Frames encode() const;
  static DecodeResult<RunConfig> decode(ByteView header, ByteView body);
  bool operator==(const RunConfig&) const = default;
};

// A rank's device for CUDA IPC (transport/peer_pairing.h): its UUID, "" when it has no
// device memory to share, and the devices whose memory it can map. At most kMaxRanks of
// them, each an identifier (printable ASCII without spaces, 1..255 bytes).
struct PeerDeviceInfo {
  std::string id;
  std::vector<std::string> reach;
  bool operator==(const PeerDeviceInfo&) const = default;
};

// worker -> coordinator: buffers ready and data plane bound for the run.
struct Ready {
  static constexpr MsgType kType = MsgType::Ready;
  uint64_t epoch = 0;  // >= 1
  int32_t rank = 0;
  uint64_t runId = 0;
  std::string dataEndpoint;  // where this rank's data plane is bound for the run (validEndpoint)
  // The clock offset, in the lab's one sign convention (ClockSample::offsetNs): coordinator
  // clock minus worker clock, so a worker timestamp t is t + clockOffsetNs on the
  // coordinator's clock. The worker's telemetry timestamps already have it added.
  int64_t clockOffsetNs = 0;
  PeerDeviceInfo device;  // for CUDA IPC; empty id: none

  Frames encode() const;
  static DecodeResult<Ready> decode(ByteView header, ByteView body);
  bool operator==(const Ready&) const = default;
};

// coordinator -> worker: every rank is Ready; go.
struct Start {
  static constexpr MsgType kType = MsgType::Start;
  uint64_t epoch = 0;  // >= 1
  uint64_t runId = 0;
  // endpoints[r]: where rank r's data plane is bound (from its Ready); 1..kMaxRanks of them.
  std::vector<std::string> endpoints;
  // devices[r]: rank r's device from its Ready; as many as endpoints, or none.
  std::vector<PeerDeviceInfo> devices;

  Frames encode() const;
  static DecodeResult<Start> decode(ByteView header, ByteView body);
  bool operator==(const Start&) const = default;
};

// worker -> coordinator: the times of one or more consecutive timed iterations (warmup
// iterations are not reported). A worker sends one every few milliseconds rather than one per
// iteration: a message per iteration and rank cost the machine more CPU than a small
// iteration itself (docs/telemetry.md, "The tail").
struct IterationResult {
  static constexpr MsgType kType = MsgType::IterationResult;
  uint64_t epoch = 0;  // >= 1
  int32_t rank = 0;
  uint32_t iteration = 0;  // 0-based index among the timed iterations of the first one
  uint64_t timeNs = 0;     // the first one's time
  // Elements that differ from the expected result in the last iteration reported (0 when
  // check is 0; the earlier ones are not checked). The check's further iterations after the
  // timed ones count in RunDone's wrongTotal alone.
  uint64_t wrong = 0;
  // The times of iterations iteration + 1, iteration + 2, ...: at most
  // kMaxIterationsPerResult - 1, and iteration + their number stays below 2^32.
  std::vector<uint64_t> moreTimesNs;
  // A training run's step `iteration` (moreTimesNs empty then): loss, times, spans, digest.
  std::optional<TrainRankStep> train;

  // Iterations reported: 1 + moreTimesNs.size().
  size_t count() const { return 1 + moreTimesNs.size(); }
  // The time of the k-th iteration reported (k < count()): iteration + k.
  uint64_t timeOf(size_t k) const { return k == 0 ? timeNs : moreTimesNs[k - 1]; }

  Frames encode() const;
  static DecodeResult<IterationResult> decode(ByteView header, ByteView body);
  bool operator==(const IterationResult&) const = default;
};

// worker -> coordinator: telemetry, lossless and in order on the control connection. Every
// event's runId and rank equal the batch's (they travel once per batch). On the wire the
// events are packed records (exec/telemetry_record.h), checked when decoded.
struct TelemetryBatch {
  static constexpr MsgType kType = MsgType::TelemetryBatch;
  uint64_t epoch = 0;  // >= 1
  int32_t rank = 0;
  uint64_t runId = 0;
  uint64_t seq = 0;      // 0, 1, 2, ... per run and rank: a gap means a lost batch
  uint64_t dropped = 0;  // events the worker's sink dropped in this run so far (cumulative)
  std::vector<TelemetryEvent> events;  // at most kMaxEventsPerBatch

  Frames encode() const;
  // The frames encode() makes, for events already packed as records (exec/telemetry_record.h)
  // in one or two pieces (a ring's wrap): the worker's way, which never unpacks them. `events`
  // must be empty. Checks the head and every record as encode() does (ARL_ENFORCE).
  Frames encodeRecords(std::span<const uint8_t> first, std::span<const uint8_t> second = {}) const;
  static DecodeResult<TelemetryBatch> decode(ByteView header, ByteView body);
  bool operator==(const TelemetryBatch&) const = default;
};

// worker -> coordinator: every iteration of the run completed on this rank.
struct RunDone {
  static constexpr MsgType kType = MsgType::RunDone;
  uint64_t epoch = 0;  // >= 1
  int32_t rank = 0;
  // Elements wrong over every iteration checked: the last timed one and the check's further
  // ones (RunConfig.check).
  uint64_t wrongTotal = 0;
  uint64_t eventsDropped = 0;
  // With random data: a digest of the rank's output and the bytes of elements spread evenly
  // over it (RankRun::outputDigest; at most kMaxOutputSampleBytes).
  std::optional<uint64_t> outputDigest;
  std::string outputSample;

  Frames encode() const;
  static DecodeResult<RunDone> decode(ByteView header, ByteView body);
  bool operator==(const RunDone&) const = default;
};

// worker -> coordinator: the run failed on this rank. Carries what PeerError carries.
struct RunFailed {
  static constexpr MsgType kType = MsgType::RunFailed;
  uint64_t epoch = 0;  // >= 1
  int32_t rank = 0;
  int32_t peer = -1;       // -1: no peer involved; else a rank
  int64_t step = -1;       // -1: not tied to a step
  int64_t iteration = -1;  // -1: not tied to a timed iteration
  std::string reason;      // UTF-8; encode() truncates beyond kMaxTextBytes
  // Failed in the check's iteration k after the timed ones (2..checkIterations, RunConfig.check;
  // IterationPlace), with iteration -1; 0: not in one.
  uint32_t checkIteration = 0;
  uint32_t checkIterations = 0;

  // From the PeerError a rank's executor threw.
  static RunFailed from(const PeerError& e, uint64_t epoch, int64_t iteration = -1);
  // "rank 2: no data from rank 1 for step 5 within 3 s (iteration 3)", "... (checking
  // iteration 2 of 3)".
  std::string message() const;

  Frames encode() const;
  static DecodeResult<RunFailed> decode(ByteView header, ByteView body);
  bool operator==(const RunFailed&) const = default;
};

// coordinator -> worker: stop the run now (another rank failed, or the user stopped it).
struct Abort {
  static constexpr MsgType kType = MsgType::Abort;
  uint64_t epoch = 0;  // >= 1
  uint64_t runId = 0;
  std::string reason;  // UTF-8; encode() truncates beyond kMaxTextBytes

  Frames encode() const;
  static DecodeResult<Abort> decode(ByteView header, ByteView body);
  bool operator==(const Abort&) const = default;
};

// coordinator -> worker: leave the session and exit.
struct Shutdown {
  static constexpr MsgType kType = MsgType::Shutdown;
  std::string reason;  // UTF-8, may be empty; encode() truncates beyond kMaxTextBytes

  Frames encode() const;
  static DecodeResult<Shutdown> decode(ByteView header, ByteView body);
  bool operator==(const Shutdown&) const = default;
};

enum class LogLevel : uint8_t { Debug, Info, Warning, Error };
std::string_view toString(LogLevel l);

// Both ways: a line for the other side's log.
struct Log {
  static constexpr MsgType kType = MsgType::Log;
  LogLevel level = LogLevel::Info;
  std::string text;  // UTF-8; encode() truncates beyond kMaxTextBytes

  Frames encode() const;
  static DecodeResult<Log> decode(ByteView header, ByteView body);
  bool operator==(const Log&) const = default;
};

// worker -> coordinator: sets `key` in the current run's store (a library's rendezvous, e.g.
// Gloo's). The coordinator keeps the run's keys until the run ends; a set beyond
// kMaxStoreKeys fails the run, naming the rank.
struct StoreSet {
  static constexpr MsgType kType = MsgType::StoreSet;
  uint64_t epoch = 0;  // >= 1
  int32_t rank = 0;
  std::string key;    // an identifier, 1..kMaxNameBytes
  std::string value;  // bytes, at most kMaxStoreValueBytes

  Frames encode() const;
  static DecodeResult<StoreSet> decode(ByteView header, ByteView body);
  bool operator==(const StoreSet&) const = default;
};

// worker -> coordinator: asks for `key` of the current run's store; the coordinator answers
// at once with a StoreValue (found or not: a rank that waits for a key asks again).
struct StoreGet {
  static constexpr MsgType kType = MsgType::StoreGet;
  uint64_t epoch = 0;  // >= 1
  int32_t rank = 0;
  uint32_t seq = 0;  // echoed in the answer
  std::string key;   // an identifier, 1..kMaxNameBytes

  Frames encode() const;
  static DecodeResult<StoreGet> decode(ByteView header, ByteView body);
  bool operator==(const StoreGet&) const = default;
};

// coordinator -> worker: the answer to StoreGet `seq`.
struct StoreValue {
  static constexpr MsgType kType = MsgType::StoreValue;
  uint64_t epoch = 0;  // >= 1
  uint32_t seq = 0;
  bool found = false;
  std::string value;  // bytes, at most kMaxStoreValueBytes; empty when not found

  Frames encode() const;
  static DecodeResult<StoreValue> decode(ByteView header, ByteView body);
  bool operator==(const StoreValue&) const = default;
};

// worker -> coordinator, when a run fails on this rank or is aborted: its flight recorder's
// records (exec/flight_recorder.h), sent just before its RunFailed, so that the coordinator
// holds them when it counts the rank's acknowledgement.
struct FlightRecord {
  static constexpr MsgType kType = MsgType::FlightRecord;
  uint64_t epoch = 0;  // >= 1
  int32_t rank = 0;
  uint64_t recorded = 0;  // collectives recorded since the worker started: >= records.size()
  // Oldest first, at most kFlightRecords, in the order they ran (seq ascending). Each names
  // its run, algorithm (an identifier), a world of 1..kMaxRanks, a last step below its nsteps
  // (or -1), ranks waited on within the world, an end no earlier than its start.
  std::vector<CollectiveRecord> records;

  Frames encode() const;
  static DecodeResult<FlightRecord> decode(ByteView header, ByteView body);
  bool operator==(const FlightRecord&) const = default;
};

// Any message. The index order is MsgType's order: index i holds type i+1.
using Message = std::variant<Hello, Welcome, Ping, Pong, Heartbeat, RunConfig, Ready, Start,
                             IterationResult, TelemetryBatch, RunDone, RunFailed, Abort, Shutdown,
                             Log, StoreSet, StoreGet, StoreValue, FlightRecord>;

struct Envelope {
  FrameHeader header;
  Message message;
  MsgType type() const { return header.type; }
  uint64_t epoch() const { return header.epoch; }
};

// ---- Codec ----------------------------------------------------------------------------------

MsgType typeOf(const Message& m);
std::string_view typeName(const Message& m);

// Encodes any message. Throws EnforceError when it breaks a rule a receiver would reject
// (the sender's bug); free text is truncated and made valid UTF-8 instead.
Frames encode(const Message& m);

// The 16-byte header frame.
Bytes encodeHeader(const FrameHeader& h);
// Reads and checks a header frame (size, magic, version, type).
DecodeResult<FrameHeader> decodeHeader(ByteView frame);

// ---- Between protocol versions ---------------------------------------------------------------
// Three things never change from one protocol version to the next, so that two builds of
// different versions can tell each other so instead of ignoring each other: the header's layout
// (magic, version, type, epoch), the type numbers of Hello (1) and Shutdown (14), and
// Shutdown's body (field 1, the reason).

// The version a header frame of the right size and magic carries, whatever it is; nullopt for
// anything else.
std::optional<uint16_t> headerVersion(ByteView frame);
// A Shutdown written in protocol version `version`, so that a peer speaking it reads `reason`.
Frames shutdownInVersion(uint16_t version, const std::string& reason);
// The reason of a Shutdown of any protocol version; nullopt when the frames are not one.
std::optional<std::string> shutdownReasonAnyVersion(ByteView header, ByteView body);
// The line both sides print when they meet a peer of protocol version `theirs`: it names both
// versions and what to do.
std::string versionMismatch(uint16_t theirs, std::string_view peer);

// Decodes a header frame and its body frame. Never throws for any input bytes.
DecodeResult<Envelope> decode(ByteView header, ByteView body);
// The same for a whole multipart message: exactly two frames, else FrameCount.
DecodeResult<Envelope> decode(std::span<const Bytes> frames);

// One line for logs: "RunFailed epoch=3 rank=2 peer=1 step=5 iteration=0: reason".
std::string describe(const Message& m);

// Checks a message against the rules decode() applies: nullopt when valid, else the reason.
std::optional<std::string> validate(const Message& m);

// An endpoint a peer can connect to: "tcp://HOST:PORT", "ipc://PATH", "inproc://NAME" or
// "shm://NAME" (a shared-memory segment, NAME without '/'), printable ASCII without spaces,
// at most kMaxEndpointBytes; or, for a library run (exec/collective_library.h), rank 0's
// bootstrap token "nccl://id/TOKEN" (TOKEN base64url) or another rank's "nccl://member", or
// a Gloo rank's "gloo://store" (it rendezvous through the run's store).
bool validEndpoint(std::string_view endpoint);

// ---- Clock alignment ------------------------------------------------------------------------

// The sample of one Ping/Pong exchange (base/clock_sample.h), t3Ns the worker's receive time.
ClockSample clockSample(const Pong& pong, int64_t t3Ns);

}  // namespace arl
