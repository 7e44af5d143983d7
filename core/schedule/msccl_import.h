// MSCCL algorithm files (the XML that msccl-tools' compiler emits and MSCCL's executor runs)
// turned into lab schedules, so the verifier proves them and the workers run them.
//
// An MSCCL program gives each GPU thread blocks (tb) that run concurrently; a tb sends to at
// most one peer and receives from at most one, on one channel, and its steps run in order.
// A step may wait for a step of another tb of its GPU (depid/deps). A lab rank runs one
// sequence of ops, so the import orders every GPU's steps: each step as early as its own tb,
// its declared dependency and the message it receives allow (the longest path to it in the
// graph of those edges), ties broken by tb and step. Messages between one pair of GPUs on
// several channels share the lab's one FIFO per pair: the import orders them so both ends
// agree, or refuses the file.
//
// Chunks: the collective's count is cut into equal chunks, count / i_chunks for all-reduce
// and all-gather, count / o_chunks for reduce-scatter (a count that is not a multiple is
// refused). MSCCL's executor loops over the buffer, each loop moving one piece of every
// chunk; the lab's slice is that piece: loop l moves elements [l*S, l*S + S) of every chunk
// of S = slice elements (the last loop fewer), laid out as MSCCL lays its loops out.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/errors.h"
#include "schedule/schedule.h"

namespace arl {

// A refused file: what() reads "FILE:LINE: reason" (LINE 0 when the whole file is at fault).
struct MscclImportError : ConfigError {
  MscclImportError(const std::string& file, int line, const std::string& reason);
  int line;
  std::string reason;
};

// The caps on what a file may declare, so a hostile file cannot make the import allocate
// without bound (MSCCL's own executor allows 256 steps per tb and 32 tbs per channel).
// A file travels whole to every worker in a control message (runtime/protocol.h's 4 MiB body).
inline constexpr size_t kMscclMaxFileBytes = size_t{1} << 20;
inline constexpr int kMscclMaxTbsPerGpu = 256;
inline constexpr int kMscclMaxStepsPerTb = 1024;
inline constexpr int kMscclMaxSteps = 1 << 16;  // all GPUs together
inline constexpr int kMscclMaxChunks = 4096;    // per buffer, per loop
inline constexpr int kMscclMaxChannels = 32;
// Ops of one imported schedule, all loops and ranks together (each is held in memory).
inline constexpr uint64_t kMscclMaxOps = uint64_t{8} << 20;

enum class MscclStepType : uint8_t {
  Send,
  Recv,
  RecvReduceCopy,
  RecvCopySend,
  RecvReduceSend,
  RecvReduceCopySend,
  Copy,
  Nop
};

// MSCCL's buffers: i (input), o (output), s (scratch).
enum class MscclBuffer : uint8_t { Input, Output, Scratch };

struct MscclStep {
  MscclStepType type = MscclStepType::Nop;
  MscclBuffer srcbuf = MscclBuffer::Input;
  MscclBuffer dstbuf = MscclBuffer::Input;
  int srcoff = 0;
  int dstoff = 0;
  int cnt = 1;
  int depid = -1;  // tb of this GPU the step waits for, -1 none
  int deps = -1;   // that tb's step
  int line = 0;
};

struct MscclTb {
  int id = 0;
  int send = -1;
  int recv = -1;
  int chan = 0;
  int line = 0;
  std::vector<MscclStep> steps;
};

struct MscclGpu {
  int id = 0;
  int iChunks = 0;
  int oChunks = 0;
  int sChunks = 0;
  int line = 0;
  std::vector<MscclTb> tbs;
};

struct MscclProgram {
  std::string file;  // as named in errors
  std::string name;
  Collective collective = Collective::AllReduce;
  int ngpus = 0;
  int nchunksperloop = 0;
  int nchannels = 1;
  bool inPlace = false;
  int line = 0;                // of <algo>
  std::vector<MscclGpu> gpus;  // indexed by id
};

// Where a lab op came from.
struct MscclOrigin {
  int gpu = 0;
  int tb = 0;
  int step = 0;
  int line = 0;  // 0: an op the import adds (the in-place program's first copy)
};

// Parses and checks `text` (named `file` in errors): structure, numbers, ranges, references,
// send/recv pairing and ordering. Throws MscclImportError.
MscclProgram parseMscclProgram(std::string_view text, const std::string& file);

// Checks a program's meaning: chunk counts against the collective, chunk ranges, the peers
// and dependencies of steps, the pairing of every send with a receive of the same size, and
// that the steps can be ordered. parseMscclProgram calls it. Throws MscclImportError.
void checkMscclProgram(const MscclProgram& p);

// Reads `path` (at most kMscclMaxFileBytes, a regular file) and parses it.
MscclProgram readMscclProgram(const std::string& path);

// The lab schedule of `p` for `count` elements (the NCCL API count) in slices of
// `sliceElems`; `origins`, when not null, receives per rank per op the step it came from.
// Throws MscclImportError for a count the file's chunks cannot divide.
Schedule mscclSchedule(const MscclProgram& p, uint64_t count, uint64_t sliceElems,
                       std::vector<std::vector<MscclOrigin>>* origins = nullptr);

// The schedule's algorithm name for a program: "msccl:" and its name.
std::string mscclAlgorithmName(const MscclProgram& p);

// `message` (a verifier's, naming ops as "rank R op I") with each such op followed by the
// MSCCL step it came from: "[gpu 1 tb 0 step 3, line 42]".
std::string withMscclOrigins(const std::string& message,
                             const std::vector<std::vector<MscclOrigin>>& origins);

}  // namespace arl
