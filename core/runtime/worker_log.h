// The worker's log: one line per event on stderr, "allreduce-worker[PID]: text", written by
// its control thread, its run thread and the test hooks alike. Private to core/runtime.
#pragma once

#include <string>

namespace arl {

// Writes one line and flushes it (stderr is where a coordinator's child is heard).
void workerLog(const std::string& text);

// Sets what precedes every line ("allreduce-worker" until set); only while no other thread
// of the worker logs.
void setWorkerLogPrefix(std::string prefix);

}  // namespace arl
