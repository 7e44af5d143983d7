// A coordinator client for tests: drains the event queue on its own thread, as the window
// will, optionally slowly, and records what arrived so tests can count and wait for it.
// Declare it after the Coordinator it drains (it must stop first).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/coordinator.h"
#include "runtime/telemetry_collector.h"

namespace arl::test {

struct RunRecord {
  std::vector<RunState> states;  // StateEvents in order
  uint64_t iterations = 0;       // IterationEvents
  uint64_t telemetryEvents = 0;  // events in TelemetryBatchEvents
  std::vector<TelemetryEvent> events;
  int finished = 0;  // RunFinished events
  std::optional<RunResult> result;
};

class EventClient {
 public:
  // `pause`: sleep after each take of at most `perTake` events: a deliberately slow client.
  explicit EventClient(Coordinator& c, std::chrono::milliseconds pause = {},
                       size_t perTake = SIZE_MAX)
      : coord_(c), pause_(pause), perTake_(perTake), thread_([this] { loop(); }) {}
  ~EventClient() { stop(); }
  EventClient(const EventClient&) = delete;
  EventClient& operator=(const EventClient&) = delete;

  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  // Waits until `pred(record of run id)` holds (checked after every take).
  template <class Pred>
  bool waitRun(uint64_t id, Pred pred,
               std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    return waitFor([&] { return pred(runs_[id]); }, timeout);
  }
  bool waitJoined(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    return waitFor([&] { return joined_ >= n; }, timeout);
  }
  bool waitLeft(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    return waitFor([&] { return left_.size() >= n; }, timeout);
  }
  // The result of run `id` (its telemetry collected into events), once it has finished.
  std::optional<RunResult> waitResult(
      uint64_t id, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    if (!waitFor([&] { return finishedLocked(id); }, timeout)) {
      return std::nullopt;
    }
    std::lock_guard<std::mutex> lock(mu_);
    RunResult r = *runs_[id].result;
    r.events = runs_[id].events;
    sortByTime(r.events);
    return r;
  }
  RunResult run(const RunRequest& req) {
    const uint64_t id = coord_.submit(req);
    auto r = waitResult(id, std::chrono::seconds(120));
    if (!r) {
      RunResult none;
      none.error = "no RunFinished within 120 s";
      return none;
    }
    return *r;
  }
  RunRecord record(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    return runs_[id];
  }
  uint64_t iterations(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    return runs_[id].iterations;
  }
  bool finished(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    return finishedLocked(id);
  }
  size_t joined() {
    std::lock_guard<std::mutex> lock(mu_);
    return joined_;
  }
  std::vector<WorkerLeft> left() {
    std::lock_guard<std::mutex> lock(mu_);
    return left_;
  }
  int logsContaining(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const auto& l : logs_) n += l.find(what) != std::string::npos;
    return n;
  }
  std::string allLogs() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string s;
    for (const auto& l : logs_) s += l + "\n";
    return s;
  }
  // Events of kinds the tests do not follow by run (order checks).
  std::vector<std::string> order() {
    std::lock_guard<std::mutex> lock(mu_);
    return order_;
  }

 private:
  template <class Pred>
  bool waitFor(Pred pred, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, pred);
  }

  bool finishedLocked(uint64_t id) const {
    auto it = runs_.find(id);
    return it != runs_.end() && it->second.finished > 0;
  }

  void loop() {
    std::vector<CoordinatorEvent> evs;
    while (!stop_) {
      evs.clear();
      coord_.takeEvents(evs, std::chrono::milliseconds(10), perTake_);
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (auto& ev : evs) std::visit([this](auto& e) { on(e); }, ev);
      }
      cv_.notify_all();
      if (pause_.count() > 0 && !evs.empty()) std::this_thread::sleep_for(pause_);
    }
  }

  void on(StateEvent& e) {
    runs_[e.runId].states.push_back(e.state);
    order_.push_back("state " + std::to_string(e.runId));
  }
  void on(WorkerJoined&) {
    ++joined_;
    order_.push_back("joined");
  }
  void on(WorkerLeft& e) { left_.push_back(e); }
  void on(TelemetryBatchEvent& e) {
    RunRecord& r = runs_[e.runId];
    r.telemetryEvents += e.events.size();
    r.events.insert(r.events.end(), e.events.begin(), e.events.end());
  }
  void on(IterationEvent& e) { ++runs_[e.runId].iterations; }
  void on(LogEvent& e) { logs_.push_back(e.text); }
  void on(RunFinished& e) {
    RunRecord& r = runs_[e.result.runId];
    ++r.finished;
    r.result = std::move(e.result);
    order_.push_back("finished " + std::to_string(r.result->runId));
  }

  Coordinator& coord_;
  std::chrono::milliseconds pause_;
  size_t perTake_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, RunRecord> runs_;
  size_t joined_ = 0;
  std::vector<WorkerLeft> left_;
  std::vector<std::string> logs_;
  std::vector<std::string> order_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace arl::test
