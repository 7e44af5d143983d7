#include "window/setup_settings.h"

#include <algorithm>

#include "backend/registry.h"
#include "base/errors.h"
#include "schedule/generators.h"

namespace arl::ui {

namespace {

void saveRange(QSettings& st, const QString& key, const SweepRange& r) {
  st.setValue(key + QStringLiteral("/sweep"), r.on);
  st.setValue(key + QStringLiteral("/single"), QVariant::fromValue<qulonglong>(r.single));
  st.setValue(key + QStringLiteral("/min"), QVariant::fromValue<qulonglong>(r.min));
  st.setValue(key + QStringLiteral("/max"), QVariant::fromValue<qulonglong>(r.max));
  st.setValue(key + QStringLiteral("/factor"), QVariant::fromValue<qulonglong>(r.factor));
}

SweepRange loadRange(QSettings& st, const QString& key, const SweepRange& d) {
  SweepRange r;
  r.on = st.value(key + QStringLiteral("/sweep"), d.on).toBool();
  r.single = st.value(key + QStringLiteral("/single"), qulonglong{d.single}).toULongLong();
  r.min = st.value(key + QStringLiteral("/min"), qulonglong{d.min}).toULongLong();
  r.max = st.value(key + QStringLiteral("/max"), qulonglong{d.max}).toULongLong();
  r.factor = st.value(key + QStringLiteral("/factor"), qulonglong{d.factor}).toULongLong();
  return r;
}

template <class Enum, class Parse>
Enum loadEnum(QSettings& st, const QString& key, Enum d, Parse parse) {
  const auto v = parse(st.value(key).toString().toStdString());
  return v ? *v : d;
}

}  // namespace

void saveSetup(QSettings& st, const SessionSetup& s) {
  st.beginGroup(QStringLiteral("setup"));
  st.setValue(QStringLiteral("localWorkers"), s.localWorkers);
  st.setValue(QStringLiteral("remoteWorkers"), s.remoteWorkers);
  st.setValue(QStringLiteral("listen"), QString::fromStdString(s.listen));
  st.setValue(QStringLiteral("backend"), QString::fromStdString(s.backend));
  st.setValue(QStringLiteral("devices"), QString::fromStdString(formatRingOrder(s.devices)));
  st.setValue(QStringLiteral("algorithm"), QString::fromStdString(s.algorithm));
  st.setValue(QStringLiteral("collective"),
              QString::fromStdString(std::string(toString(s.collective))));
  st.setValue(QStringLiteral("dtype"), QString::fromStdString(std::string(toString(s.dtype))));
  st.setValue(QStringLiteral("op"), QString::fromStdString(std::string(toString(s.op))));
  st.setValue(QStringLiteral("root"), s.root);
  saveRange(st, QStringLiteral("size"), s.size);
  saveRange(st, QStringLiteral("slice"), s.slice);
  saveRange(st, QStringLiteral("inflight"), s.inflight);
  st.setValue(QStringLiteral("iterations"), s.iterations);
  st.setValue(QStringLiteral("warmup"), s.warmup);
  st.setValue(QStringLiteral("ranksPerHost"), s.ranksPerHost);
  st.setValue(QStringLiteral("radix"), s.radix);
  st.setValue(QStringLiteral("window"), s.window);
  st.setValue(QStringLiteral("ringOrder"), QString::fromStdString(formatRingOrder(s.ringOrder)));
  st.setValue(QStringLiteral("portMBps"), s.portMBps);
  st.setValue(QStringLiteral("latencyUs"), s.latencyUs);
  st.setValue(QStringLiteral("slowRank"), s.slowRank);
  st.setValue(QStringLiteral("slowRankMBps"), s.slowRankMBps);
  st.setValue(QStringLiteral("slowLinkFrom"), s.slowLinkFrom);
  st.setValue(QStringLiteral("slowLinkTo"), s.slowLinkTo);
  st.setValue(QStringLiteral("slowLinkMBps"), s.slowLinkMBps);
  st.setValue(QStringLiteral("topology"), QString::fromStdString(s.topology));
  st.endGroup();
}

SessionSetup loadSetup(QSettings& st) {
  const SessionSetup d;
  SessionSetup s;
  st.beginGroup(QStringLiteral("setup"));
  s.localWorkers = st.value(QStringLiteral("localWorkers"), d.localWorkers).toInt();
  s.remoteWorkers = st.value(QStringLiteral("remoteWorkers"), d.remoteWorkers).toInt();
  s.listen = st.value(QStringLiteral("listen")).toString().toStdString();
  // A backend this build lacks falls back to the default; a bad device list is dropped.
  const std::string backend = st.value(QStringLiteral("backend"), QString::fromStdString(s.backend))
                                  .toString()
                                  .toStdString();
  if (!backendUnavailable(backend)) s.backend = backend;
  try {
    s.devices = parseDevices(st.value(QStringLiteral("devices")).toString().toStdString());
  } catch (const ConfigError&) {
    s.devices.clear();
  }
  s.algorithm = st.value(QStringLiteral("algorithm"), QString::fromStdString(d.algorithm))
                    .toString()
                    .toStdString();
  const auto& names = algorithmNames();
  if (s.algorithm != "all" && std::find(names.begin(), names.end(), s.algorithm) == names.end()) {
    s.algorithm = d.algorithm;
  }
  s.collective = loadEnum(st, QStringLiteral("collective"), d.collective, parseCollective);
  s.dtype = loadEnum(st, QStringLiteral("dtype"), d.dtype, parseDataType);
  s.op = loadEnum(st, QStringLiteral("op"), d.op, parseRedOp);
  s.root = st.value(QStringLiteral("root"), d.root).toInt();
  s.size = loadRange(st, QStringLiteral("size"), d.size);
  s.slice = loadRange(st, QStringLiteral("slice"), d.slice);
  s.inflight = loadRange(st, QStringLiteral("inflight"), d.inflight);
  s.iterations = st.value(QStringLiteral("iterations"), d.iterations).toInt();
  s.warmup = st.value(QStringLiteral("warmup"), d.warmup).toInt();
  s.ranksPerHost = st.value(QStringLiteral("ranksPerHost"), d.ranksPerHost).toInt();
  s.radix = st.value(QStringLiteral("radix"), d.radix).toInt();
  s.window = st.value(QStringLiteral("window"), d.window).toInt();
  try {
    s.ringOrder = parseRingOrder(st.value(QStringLiteral("ringOrder")).toString().toStdString());
  } catch (const ConfigError&) {
    s.ringOrder.clear();
  }
  s.portMBps = st.value(QStringLiteral("portMBps"), d.portMBps).toDouble();
  s.latencyUs = st.value(QStringLiteral("latencyUs"), d.latencyUs).toDouble();
  s.slowRank = st.value(QStringLiteral("slowRank"), d.slowRank).toInt();
  s.slowRankMBps = st.value(QStringLiteral("slowRankMBps"), d.slowRankMBps).toDouble();
  s.slowLinkFrom = st.value(QStringLiteral("slowLinkFrom"), d.slowLinkFrom).toInt();
  s.slowLinkTo = st.value(QStringLiteral("slowLinkTo"), d.slowLinkTo).toInt();
  s.slowLinkMBps = st.value(QStringLiteral("slowLinkMBps"), d.slowLinkMBps).toDouble();
  s.topology = st.value(QStringLiteral("topology"), QString()).toString().toStdString();
  st.endGroup();
  return s;
}

}  // namespace arl::ui
