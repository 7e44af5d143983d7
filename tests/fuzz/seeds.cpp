// Writes the seeds that are binary or must match the writer's format exactly: control_frame's
// (one valid message of every type, the codec tests' samples, header frame and body frame back
// to back as the target reads them) and calibration's (calibrationJson of a plain and of a
// complete calibration). Run it again when the protocol or the calibration format changes: a
// seed of another version only reaches the version check.
//   fuzz_seeds tests/fuzz/corpus
#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>

#include "export/calibration.h"
#include "runtime/protocol.h"
#include "sample_messages.h"

namespace {

using namespace arl;

bool write(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) std::fprintf(stderr, "fuzz_seeds: cannot write %s\n", path.c_str());
  return static_cast<bool>(out);
}

Calibration plainCalibration() {
  Calibration c;
  c.params.alpha = 9.5e-6;
  c.params.beta = 1.0 / 2.2e9;
  c.params.gamma = 1.0 / 5.1e9;
  c.machine = "vm";
  c.date = "2026-12-01T19:56:19Z";
  c.dataPlane = "shm";
  c.workers = 4;
  c.sliceBytes = 1 << 20;
  c.inflight = 4;
  c.iterations = 10;
  c.warmup = 3;
  c.rmsRelativeResidual = 0.21;
  c.rounds = 3;
  c.runs = {{"ring", 4096, 80.5, 70.25, 75.0}, {"ring", 16 << 20, 9000.0, 8800.0, 9100.0}};
  c.reduce = {32 << 20, 1 << 20, 7, 6.5e-3, "avx2"};
  return c;
}

// Every optional measurement and parameter set.
Calibration completeCalibration() {
  Calibration c = plainCalibration();
  c.roundSlowness = {1.0, 0.875, 1.25};
  c.copy = CopyMeasurement{32 << 20, 1 << 20, 7, 2.8e-3};
  c.params.shmCopy = 2.8e-3 / (32 << 20);
  c.params.cores = 2;
  c.params.shmWorkScale = 1.25;
  c.copyCached = CopyMeasurement{4 << 20, 1 << 20, 56, 1.4e-4};
  c.reduceCached = ReduceMeasurement{5 << 20, 1 << 20, 84, 1.9e-4, "avx2"};
  c.llcSource = "--llc";
  c.params.shmCopyCached = 1.4e-4 / (4 << 20);
  c.params.gammaCached = 1.9e-4 / (5 << 20);
  c.params.llcBytes = 32 << 20;
  c.send = SendMeasurement{6 << 20, {32 << 20, 1 << 20, 7, 3.2e-3}, {32 << 20, 1 << 20, 7, 2.1e-3}};
  c.params.shmSend = 3.2e-3 / (32 << 20);
  c.params.shmSendFresh = 2.1e-3 / (32 << 20);
  c.params.shmAlpha = 4.5e-6;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS-DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  bool ok = true;
  for (const Message& m : sampleMessages()) {
    std::string bytes;
    for (const Bytes& frame : encode(m)) bytes.append(frame.begin(), frame.end());
    ok = write(dir + "/control_frame/" + std::string(typeName(m)), bytes) && ok;
  }
  ok = write(dir + "/calibration/plain.json", calibrationJson(plainCalibration())) && ok;
  ok = write(dir + "/calibration/complete.json", calibrationJson(completeCalibration())) && ok;
  return ok ? 0 : 1;
}
