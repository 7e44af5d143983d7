// NCCL's profiler plugin interface, version 5 (NCCL 2.28), declared here because NCCL ships no
// header for it. Written from NVIDIA's nccl repository at tag v2.28.9-1:
// ext-profiler/example/nccl/profiler_v5.h (the descriptor, the state arguments, the function
// table), ext-profiler/example/nccl/profiler.h (the event type bits and the states) and
// ext-profiler/example/nccl/common.h (the logger's type). The layouts must be NCCL's exactly:
// NCCL writes the descriptors and calls through the table. The static_asserts below pin the
// x86-64 and aarch64 (LP64) offsets they give.
//
// How NCCL finds the table (src/plugin/plugin_open.cc, src/plugin/profiler/profiler_v5.cc):
// NCCL_PROFILER_PLUGIN=STATIC_PLUGIN makes it dlopen(NULL) (the program itself) and
// dlsym(that handle, "ncclProfiler_v5"), so the table must be in the program's dynamic symbol
// table (the worker is linked with ENABLE_EXPORTS).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace arl::gpu::ncclprof {

// ncclResult_t (nccl.h): a C enum, passed and returned as an int; 0 is ncclSuccess.
using Result = int;
inline constexpr Result kSuccess = 0;
inline constexpr Result kInternalError = 3;  // ncclInternalError

// ncclDebugLogger_t (common.h): NCCL's logger, handed to init. The level is a C enum.
using DebugLogger = void (*)(int level, unsigned long flags, const char* file, int line,
                             const char* fmt, ...);

// The event type bits (profiler.h, ncclProfile*): a descriptor's `type`, and the activation
// mask init returns.
enum EventType : uint64_t {
  kGroup = 1 << 0,
  kColl = 1 << 1,
  kP2p = 1 << 2,
  kProxyOp = 1 << 3,
  kProxyStep = 1 << 4,
  kProxyCtrl = 1 << 5,
  kKernelCh = 1 << 6,
  kNetPlugin = 1 << 7,
  kGroupApi = 1 << 8,
  kCollApi = 1 << 9,
  kP2pApi = 1 << 10,
  kKernelLaunch = 1 << 11,
};

// ncclProfilerEventState_v5_t (profiler.h): a C enum, passed as an int. The states this
// plugin looks at; NCCL passes others too.
enum EventState : int {
  kProxyStepSendGPUWait = 8,
  kProxyStepSendWait = 9,
  kProxyStepRecvWait = 10,
  kProxyStepRecvFlushWait = 11,
  kProxyStepRecvGPUWait = 12,
  kProxyStepSendPeerWait = 20,
  kNetPluginUpdate = 21,
  kKernelChStop = 22,
};

// ncclProfilerEventDescr_v5_t.
struct EventDescr {
  uint64_t type;    // one EventType bit
  void* parentObj;  // the handle this plugin returned for the parent event, or null
  int rank;
  union {
    struct {
      int graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      pid_t pid;  // the process that started the proxy op (another one's parent is not ours)
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;  // the kernel's start on the GPU's global timer (ns)
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
};

// ncclProfilerEventStateArgs_v5_t.
union EventStateArgs {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;  // the kernel's end on the GPU's global timer (ns)
  } kernelCh;
};

// ncclProfiler_v5_t: the table NCCL looks up as "ncclProfiler_v5".
struct ProfilerV5 {
  const char* name;
  Result (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                 int nNodes, int nranks, int rank, DebugLogger logfn);
  Result (*startEvent)(void* context, void** eHandle, EventDescr* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, EventStateArgs* eStateArgs);
  Result (*finalize)(void* context);
};

static_assert(sizeof(void*) == 8, "the layouts below are those of LP64 targets");
static_assert(offsetof(EventDescr, type) == 0);
static_assert(offsetof(EventDescr, parentObj) == 8);
static_assert(offsetof(EventDescr, rank) == 16);
static_assert(offsetof(EventDescr, coll) == 24);
static_assert(offsetof(EventDescr, coll.nChannels) == 24 + 56);
static_assert(offsetof(EventDescr, coll.algo) == 24 + 64);
static_assert(offsetof(EventDescr, coll.parentGroup) == 24 + 80);
static_assert(offsetof(EventDescr, proxyOp.channelId) == 24 + 4);
static_assert(offsetof(EventDescr, proxyOp.peer) == 24 + 8);
static_assert(offsetof(EventDescr, proxyOp.isSend) == 24 + 20);
static_assert(offsetof(EventDescr, kernelCh.pTimer) == 24 + 8);
static_assert(sizeof(EventDescr) == 24 + 88);
static_assert(sizeof(EventStateArgs) == 8);
static_assert(sizeof(ProfilerV5) == 6 * sizeof(void*));

}  // namespace arl::gpu::ncclprof
