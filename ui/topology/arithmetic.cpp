#include "topology/arithmetic.h"

#include <QStringList>
#include <algorithm>
#include <bit>
#include <limits>

#include "exec/check.h"
#include "exec/numeric.h"

namespace arl::ui {

namespace {

QString number(double v) {
  QString s = QString::number(v, 'g', 6);
  if (v < 0) s.replace(0, 1, QChar(0x2212));  // a real minus sign
  return s;
}

}  // namespace

Arithmetic::Arithmetic(const TopologyRun& run) : run_(run) {
  const RunRequest& req = run.request;
  const int n = run.nranks;
  if (n <= 0 || n > kMaxRanks || req.count == 0 || req.count > kMaxCount) return;
  if (req.collective != Collective::AllReduce) return;  // inputs and outputs share indices
  const size_t es = dtypeSize(req.dtype);
  const uint64_t in = inputElemsFor(req.collective, n, req.count);
  std::vector<unsigned char> buf(in * es);
  elems_ = in;
  for (int r = 0; r < n; ++r) {
    fillInput(buf.data(), req.collective, req.dtype, req.op, r, n, req.count);
    std::vector<double> v(in);
    for (uint64_t e = 0; e < in; ++e) v[e] = toDouble(req.dtype, buf.data() + e * es);
    inputs_.push_back(std::move(v));
  }
}

double Arithmetic::value(uint64_t mask, uint64_t e) const {
  if (e >= elems_) return 0;
  const RedOp op = run_.request.op;
  bool first = true;
  double acc = 0;
  for (int r = 0; r < static_cast<int>(inputs_.size()); ++r) {
    if (!(mask & (uint64_t{1} << r))) continue;
    const double v = inputs_[static_cast<size_t>(r)][e];
    if (first) {
      acc = v;
      first = false;
      continue;
    }
    switch (op) {
      case RedOp::Sum:
      case RedOp::Avg: acc += v; break;
      case RedOp::Prod: acc *= v; break;
      case RedOp::Min: acc = std::min(acc, v); break;
      case RedOp::Max: acc = std::max(acc, v); break;
    }
  }
  return acc;
}

QString Arithmetic::values(uint64_t mask, uint64_t first, uint64_t n) const {
  QStringList parts;
  for (uint64_t e = first; e < first + n && e < elems_; ++e) parts << number(value(mask, e));
  return parts.size() == 1 ? parts.front()
                           : QStringLiteral("(") + parts.join(QChar(' ')) + QStringLiteral(")");
}

QString Arithmetic::opSymbol() const {
  switch (run_.request.op) {
    case RedOp::Sum:
    case RedOp::Avg: return QStringLiteral("+");
    case RedOp::Prod: return QStringLiteral("×");
    case RedOp::Min: return QStringLiteral("min");
    case RedOp::Max: return QStringLiteral("max");
  }
  return QStringLiteral("+");
}

QString Arithmetic::logLine(const CellUpdate& u, uint64_t before) const {
  const uint64_t n = std::min<uint64_t>(u.elems, elems_ > u.offset ? elems_ - u.offset : 0);
  const QString where = n == 1 ? QStringLiteral("[%1]").arg(u.offset)
                               : QStringLiteral("[%1–%2]").arg(u.offset).arg(u.offset + n - 1);
  const QString head = QStringLiteral("rank %1 %2: ").arg(u.rank).arg(where);
  if (!u.reduce) {
    return head + values(u.mask, u.offset, n) + QStringLiteral(" from rank %1").arg(u.peer);
  }
  // A reduction's event carries the payload's contributions: the incoming partial sum, or the
  // result it sends on; either way the result holds both.
  const uint64_t incoming = u.mask & ~before;
  return head + values(incoming, u.offset, n) + QChar(' ') + opSymbol() + QChar(' ') +
         values(before, u.offset, n) + QStringLiteral(" = ") + values(before | u.mask, u.offset, n);
}

}  // namespace arl::ui
