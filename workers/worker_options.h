// allreduce-worker's command line, on CLI11 like allreduce-lab's: the options, bound to
// WorkerOptions (runtime/worker_runtime.h), and the checks CLI11 does not make.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "runtime/worker_runtime.h"

namespace arl::worker {

// The text of each valued option, as given; checked into WorkerOptions by toOptions().
struct WorkerArgs {
  std::string connect, backend = "cpu", name, host, device, parentPid, keys, serverKey;
  bool verbose = false;
};

// Declares allreduce-worker's options on `app`, bound to `args`.
void declareOptions(CLI::App& app, WorkerArgs& args);

// Registers the GPU library's backends (in a build that has it) for the device that --device
// names, so that toOptions() accepts them; does nothing otherwise. Call after parsing.
// Throws ConfigError for a malformed --device.
void registerGpuBackends(const WorkerArgs& args);

// Checks the parsed arguments. Throws ConfigError as "<flag> <value>: <rule>", or with the
// reason a GPU backend cannot run on this host ("backend 'cuda': no CUDA device (...)").
WorkerOptions toOptions(const WorkerArgs& args);

}  // namespace arl::worker
