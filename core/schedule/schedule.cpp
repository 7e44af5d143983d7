#include "schedule/schedule.h"

namespace arl {

bool opSends(OpKind k) {
  return k == OpKind::Send || k == OpKind::RecvReduceSend || k == OpKind::RecvReduceCopySend ||
         k == OpKind::RecvCopySend;
}
bool opRecvs(OpKind k) { return k != OpKind::Send && k != OpKind::Copy; }
bool opReduces(OpKind k) {
  return k == OpKind::RecvReduceSend || k == OpKind::RecvReduceCopySend ||
         k == OpKind::RecvReduceCopy;
}
bool opReadsSrc(OpKind k) { return k == OpKind::Send || k == OpKind::Copy || opReduces(k); }
bool opWritesDst(OpKind k) {
  return k == OpKind::Recv || k == OpKind::RecvReduceCopySend || k == OpKind::RecvCopySend ||
         k == OpKind::RecvReduceCopy || k == OpKind::Copy;
}

std::string_view toString(OpKind k) {
  switch (k) {
    case OpKind::Send: return "Send";
    case OpKind::Recv: return "Recv";
    case OpKind::RecvReduceSend: return "RecvReduceSend";
    case OpKind::RecvReduceCopySend: return "RecvReduceCopySend";
    case OpKind::RecvCopySend: return "RecvCopySend";
    case OpKind::RecvReduceCopy: return "RecvReduceCopy";
    case OpKind::Copy: return "Copy";
  }
  return "?";
}

std::string_view toString(Phase p) {
  switch (p) {
    case Phase::ReduceScatter: return "reduce-scatter";
    case Phase::AllGather: return "all-gather";
    case Phase::Reduce: return "reduce";
    case Phase::Broadcast: return "broadcast";
    case Phase::Local: return "local";
  }
  return "?";
}

uint64_t inputElemsFor(Collective c, int nranks, uint64_t count) {
  return c == Collective::ReduceScatter ? count * static_cast<uint64_t>(nranks) : count;
}

uint64_t outputElemsFor(Collective c, int nranks, uint64_t count) {
  return c == Collective::AllGather ? count * static_cast<uint64_t>(nranks) : count;
}

uint64_t inPlaceOffset(const Schedule& s, int rank) {
  if (s.collective == Collective::AllGather || s.collective == Collective::ReduceScatter) {
    return static_cast<uint64_t>(rank) * s.count;
  }
  return 0;
}

uint64_t bytesSent(const Schedule& s, int rank, DataType t) {
  uint64_t n = 0;
  for (const Op& op : s.ranks.at(static_cast<size_t>(rank))) {
    if (opSends(op.kind)) n += op.count;
  }
  return n * dtypeSize(t);
}

}  // namespace arl
