// Test-only fault injection (runtime/fault_injection.h): the environment's faults, parsed,
// and the transport that corrupts a header.
#include "runtime/fault_injection.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include "base/errors.h"
#include "base/limits.h"
#include "runtime/worker_log.h"

namespace arl {

namespace {

// An integer of the environment in [lo, hi].
int parseInt(const std::string& flag, const std::string& v, int lo, int hi) {
  try {
    size_t used = 0;
    const long x = std::stol(v, &used);
    if (used != v.size() || x < lo || x > hi) throw std::out_of_range(v);
    return static_cast<int>(x);
  } catch (const std::exception&) {
    throw ConfigError(flag + ": expected an integer in [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "], got '" + v + "'");
  }
}

// The variable's value; nullopt when it is unset or empty.
std::optional<std::string> envValue(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

bool corruptible(const std::string& field) {
  return std::find(kCorruptibleFields.begin(), kCorruptibleFields.end(), field) !=
         kCorruptibleFields.end();
}

}  // namespace

bool ControlLosses::lose(MsgType t) {
  if (types.erase(t) == 0) return false;
  workerLog("test: losing the first " + std::string(typeName(t)) + " (" + kLoseControlEnv + ")");
  return true;
}

std::optional<HeaderCorruption> corruptionFromEnv() {
  const std::optional<std::string> value = envValue(kCorruptHeaderEnv);
  if (!value) return std::nullopt;
  const std::string& s = *value;
  const auto colon = s.find(':');
  HeaderCorruption c;
  if (colon != std::string::npos) {
    c.field = s.substr(colon + 1);
    try {
      c.rank = parseInt(kCorruptHeaderEnv, s.substr(0, colon), 0, kMaxRanks - 1);
    } catch (const ConfigError&) {
      c.rank = -1;
    }
  }
  if (c.rank < 0 || !corruptible(c.field)) {
    std::string fields;
    for (const std::string_view f : kCorruptibleFields) fields += " " + std::string(f);
    workerLog(std::string("ignoring ") + kCorruptHeaderEnv + "='" + s +
              "' (expected RANK:FIELD, FIELD one of" + fields + ")");
    return std::nullopt;
  }
  return c;
}

ControlLosses lossesFromEnv() {
  ControlLosses out;
  std::string rest = envValue(kLoseControlEnv).value_or("");
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string name = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    bool known = false;
    for (uint16_t t = 1; t <= kMaxMsgType; ++t) {
      if (typeName(static_cast<MsgType>(t)) == name) {
        out.types.insert(static_cast<MsgType>(t));
        known = true;
      }
    }
    if (!known) {
      workerLog(std::string("ignoring unknown type '") + name + "' in " + kLoseControlEnv);
    }
  }
  return out;
}

std::optional<StallAt> stallFromEnv() {
  const std::optional<std::string> value = envValue(kStallEnv);
  if (!value) return std::nullopt;
  const std::string& s = *value;
  const auto colon = s.find(':');
  try {
    if (colon == std::string::npos) throw ConfigError("no colon");
    const int rank = parseInt(kStallEnv, s.substr(0, colon), 0, kMaxRanks - 1);
    const int step = parseInt(kStallEnv, s.substr(colon + 1), 0, 1 << 30);
    return StallAt{rank, static_cast<uint32_t>(step)};
  } catch (const ConfigError&) {
    workerLog(std::string("ignoring ") + kStallEnv + "='" + s + "' (expected RANK:STEP)");
    return std::nullopt;
  }
}

std::shared_ptr<SendCompletion> CorruptingTransport::send(int peer, const ChunkHeader& h,
                                                          const void* data, size_t bytes) {
  if (done_) return ForwardingTransport::send(peer, h, data, bytes);
  done_ = true;
  ChunkHeader c = h;
  if (field_ == "signature") c.opSignature ^= 0x5A5A5A5Au;
  if (field_ == "epoch") c.epoch += 1000;
  if (field_ == "seq") c.seq += 7;
  if (field_ == "step") c.step += 1;
  if (field_ == "chunk") c.chunk += 1;
  if (field_ == "slice") c.slice += 1;
  if (field_ == "offset") c.offset += 1;
  if (field_ == "length") c.length += 1;
  workerLog("test: corrupting the " + field_ + " of the first data-plane header to rank " +
            std::to_string(peer) + " (" + kCorruptHeaderEnv + ")");
  return ForwardingTransport::send(peer, c, data, bytes);
}

}  // namespace arl
