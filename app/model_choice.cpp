#include "model_choice.h"

#include <sys/stat.h>

#include <cstdio>

#include "base/input_file.h"

namespace arl::app {

namespace {

bool isFile(const std::string& path) {
  struct stat st {};
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode);
}

ModelChoice fromFile(const std::string& path) {
  ModelChoice m;
  m.calibration = readCalibration(path);
  const Calibration& c = *m.calibration;
  m.params = c.params;
  m.path = path;
  m.source = "calibration " + path + " (" + c.machine + ", " + c.date + ", data plane " +
             c.dataPlane + ", " + std::to_string(c.workers) + " workers)";
  return m;
}

}  // namespace

void declareModelOption(Options& o) {
  o.value("--model", "FILE|default",
          "cost-model parameters: a calibration file that 'allreduce-lab calibrate' wrote, or "
          "'default' for the built-in ones (default: the saved calibration, $ARL_CALIBRATION or "
          "$XDG_CONFIG_HOME/allreduce-lab/calibration.json, when there is one)");
}

ModelChoice chooseModel(const std::optional<Arg>& model) {
  if (model && model->text == "default") {
    return ModelChoice{ModelParams{}, "default parameters (" + model->flag + " default)", {}, {}};
  }
  if (model) {
    if (!isFile(model->text)) throw refuse(*model, "no such file");
    try {
      return fromFile(model->text);
    } catch (const CalibrationError& e) {
      throw UsageError{e.what()};
    }
  }
  const std::string path = calibrationPath();
  if (const std::string kind = path.empty() ? "" : nonRegularKind(path);
      !kind.empty() && kind != "missing") {
    throw UsageError{"the calibration path " + path + " is " + kind +
                     ", not a calibration file (set $ARL_CALIBRATION to a file, or use --model "
                     "default)"};
  }
  if (!isFile(path)) {
    return ModelChoice{ModelParams{},
                       path.empty() ? std::string("default parameters (no calibration: neither "
                                                  "$ARL_CALIBRATION nor $HOME is set)")
                                    : "default parameters (no calibration at " + path + ")",
                       {},
                       {}};
  }
  try {
    return fromFile(path);
  } catch (const CalibrationError& e) {
    throw UsageError{std::string(e.what()) +
                     " (run 'allreduce-lab calibrate' again, or use --model default)"};
  }
}

std::string paramsText(const ModelParams& p) {
  char buf[160];
  std::string out = alphaBetaGammaText(p);
  if (p.shmCopy) {
    std::snprintf(buf, sizeof buf, "; shared memory: copy %.2f GB/s, %d cores, work x%.2f",
                  1e-9 / *p.shmCopy, p.cores, p.shmWorkScale);
    out += buf;
    if (p.shmAlpha) {
      std::snprintf(buf, sizeof buf, ", %.1f us per message", *p.shmAlpha * 1e6);
      out += buf;
    }
  }
  if (p.shmSend && p.shmSendFresh) {
    std::snprintf(buf, sizeof buf, ", send %.2f GB/s (fresh %.2f GB/s)", 1e-9 / *p.shmSend,
                  1e-9 / *p.shmSendFresh);
    out += buf;
  }
  if (p.shmCopyCached && p.gammaCached && p.llcBytes > 0) {
    std::snprintf(buf, sizeof buf, "; in a %s cache: copy %.2f GB/s, reduce %.2f GB/s",
                  formatSize(p.llcBytes).c_str(), 1e-9 / *p.shmCopyCached, 1e-9 / *p.gammaCached);
    out += buf;
  }
  return out;
}

}  // namespace arl::app
