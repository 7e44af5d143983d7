#include "exec/nccl_events.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

namespace arl {

namespace {

bool equalNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// NCCL's names for its algorithms and protocols in NCCL 2.28 (src/collectives.cc), in enum order.
constexpr std::array<std::string_view, 8> kAlgoNames = {
    "", "TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
constexpr std::array<std::string_view, 8> kAlgoShown = {
    "?", "Tree", "Ring", "CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT"};
constexpr std::array<std::string_view, 4> kProtoNames = {"", "LL", "LL128", "SIMPLE"};
constexpr std::array<std::string_view, 4> kProtoShown = {"?", "LL", "LL128", "Simple"};

}  // namespace

NcclAlgo parseNcclAlgo(std::string_view s) {
  for (size_t i = 1; i < kAlgoNames.size(); ++i) {
    if (equalNoCase(s, kAlgoNames[i]) || equalNoCase(s, kAlgoShown[i])) {
      return static_cast<NcclAlgo>(i);
    }
  }
  return NcclAlgo::Unknown;
}

NcclProto parseNcclProto(std::string_view s) {
  for (size_t i = 1; i < kProtoNames.size(); ++i) {
    if (equalNoCase(s, kProtoNames[i])) return static_cast<NcclProto>(i);
  }
  return NcclProto::Unknown;
}

std::string_view toString(NcclAlgo a) {
  const auto i = static_cast<size_t>(a);
  return i < kAlgoShown.size() ? kAlgoShown[i] : kAlgoShown[0];
}

std::string_view toString(NcclProto p) {
  const auto i = static_cast<size_t>(p);
  return i < kProtoShown.size() ? kProtoShown[i] : kProtoShown[0];
}

uint64_t packNcclCollInfo(const NcclCollInfo& i) {
  return uint64_t{static_cast<uint8_t>(i.algo)} | uint64_t{static_cast<uint8_t>(i.proto)} << 8 |
         uint64_t{i.nChannels} << 16 | uint64_t{i.nWarps} << 24;
}

NcclCollInfo unpackNcclCollInfo(uint64_t v) {
  NcclCollInfo i;
  const auto algo = static_cast<uint8_t>(v);
  const auto proto = static_cast<uint8_t>(v >> 8);
  i.algo = algo < kAlgoNames.size() ? static_cast<NcclAlgo>(algo) : NcclAlgo::Unknown;
  i.proto = proto < kProtoNames.size() ? static_cast<NcclProto>(proto) : NcclProto::Unknown;
  i.nChannels = static_cast<uint8_t>(v >> 16);
  i.nWarps = static_cast<uint8_t>(v >> 24);
  return i;
}

std::optional<TelemetryEvent> toTelemetry(const NcclRawEvent& raw, const NcclEventContext& ctx,
                                          NcclEventFate* fate) {
  const auto says = [&](NcclEventFate f) {
    if (fate != nullptr) *fate = f;
  };
  if (raw.call == kNoNcclCall) {
    says(NcclEventFate::NoCall);
    return std::nullopt;
  }
  if (raw.call < ctx.warmup || raw.call - ctx.warmup >= ctx.timed) {
    says(NcclEventFate::Warmup);
    return std::nullopt;
  }
  if (raw.gpuClock && !ctx.gpu.known) {
    says(NcclEventFate::NoGpuClock);
    return std::nullopt;
  }
  TelemetryEvent e;
  e.kind = raw.kind;
  e.iteration = static_cast<uint32_t>(raw.call - ctx.warmup);
  const int64_t hostNs = raw.gpuClock ? raw.ns - ctx.gpu.gpuMinusHostNs : raw.ns;
  e.tNs = hostNs + ctx.clockOffsetNs;
  switch (raw.kind) {
    case EventKind::NcclColl:
      e.bytes = raw.bytes;
      e.offset = raw.count;
      e.provenance = packNcclCollInfo(raw.info);
      break;
    case EventKind::NcclKernelStart:
    case EventKind::NcclKernelEnd: e.chunk = raw.channel; break;
    case EventKind::NcclSendStepStart:
    case EventKind::NcclSendStepEnd:
    case EventKind::NcclRecvStepStart:
    case EventKind::NcclRecvStepEnd:
      e.chunk = raw.channel;
      e.step = raw.step;
      e.peer = raw.peer;
      e.bytes = raw.bytes;
      break;
    default: break;
  }
  says(NcclEventFate::Recorded);
  return e;
}

}  // namespace arl
