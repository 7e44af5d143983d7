#include "soak_faults.h"

#include <signal.h>
#include <sys/types.h>

#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <zmq.hpp>

#include "cli_util.h"
#include "runtime/protocol.h"
#include "soak.h"

namespace arl::app {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

void SessionEvents::drain(milliseconds wait) {
  std::vector<CoordinatorEvent> evs;
  c_.takeEvents(evs, wait);
  for (CoordinatorEvent& ev : evs) {
    if (auto* f = std::get_if<RunFinished>(&ev)) {
      iterations_.erase(f->result.runId);
      finished_[f->result.runId] = std::move(f->result);
    } else if (const auto* it = std::get_if<IterationEvent>(&ev)) {
      ++iterations_[it->runId];
    } else if (const auto* l = std::get_if<LogEvent>(&ev)) {
      logs_.push_back(l->text);
      ++logCount_;
      if (logs_.size() > 1000) logs_.pop_front();
    }
  }
}

std::optional<RunResult> SessionEvents::waitFinished(uint64_t id, milliseconds timeout) {
  if (!waitUntil([&] { return finished(id); }, timeout)) return std::nullopt;
  auto node = finished_.extract(id);
  return std::move(node.mapped());
}

bool SessionEvents::waitUntil(const std::function<bool()>& pred, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() >= deadline) return false;
    drain(milliseconds(20));
  }
  return true;
}

uint64_t SessionEvents::iterationReports(uint64_t id) const {
  const auto it = iterations_.find(id);
  return it == iterations_.end() ? 0 : it->second;
}

std::vector<std::string> SessionEvents::logsSince(uint64_t mark) const {
  std::vector<std::string> out;
  const uint64_t first = logCount_ - logs_.size();
  for (uint64_t i = std::max(mark, first); i < logCount_; ++i) out.push_back(logs_[i - first]);
  return out;
}

std::string_view toString(FaultKind k) {
  switch (k) {
    case FaultKind::Kill: return "kill";
    case FaultKind::Stop: return "stop";
    case FaultKind::Reset: return "reset";
    case FaultKind::BadFrame: return "bad-frame";
  }
  return "?";
}

std::vector<FaultKind> faultKinds() {
  return {FaultKind::Kill, FaultKind::Stop, FaultKind::Reset, FaultKind::BadFrame};
}

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

FaultOutcome failed(const std::string& why, const std::string& error = {}) {
  return {false, error, why};
}

// The run's result, expected Failed with `rank` as the failed rank and every word of `words`
// in its error.
FaultOutcome expectFailed(const std::optional<RunResult>& res, int rank,
                          const std::vector<std::string>& words) {
  if (!res) return failed("the run did not end within 15 s");
  if (res->state != RunState::Failed) {
    return failed(
        "the run ended " + std::string(toString(res->state)) + ", not Failed: " + res->error,
        res->error);
  }
  if (res->failedRank != rank) {
    return failed(
        printfString("the run named rank %d, not rank %d: ", res->failedRank, rank) + res->error,
        res->error);
  }
  for (const std::string& w : words) {
    if (!contains(res->error, w)) {
      return failed("the error does not say \"" + w + "\": " + res->error, res->error);
    }
  }
  return {true, res->error, {}};
}

// Waits until the run has `more` further iteration reports per rank; false when it ended or
// stalled instead.
bool keepsGoing(const FaultRun& fr, uint64_t id, uint64_t more, milliseconds within) {
  const uint64_t target = fr.events.iterationReports(id) + more * fr.world.size();
  return fr.events.waitUntil(
             [&] { return fr.events.finished(id) || fr.events.iterationReports(id) >= target; },
             within) &&
         !fr.events.finished(id);
}

// The worker's end of its control connection: its local TCP port, found among the sockets
// the process holds (by inode, in /proc/PID/net/tcp) as the one connected to `coordPort`.
std::optional<int> controlPortOf(int64_t pid, int coordPort) {
  std::set<std::string> inodes;
  std::error_code ec;
  const std::string dir = "/proc/" + std::to_string(pid);
  for (auto it = std::filesystem::directory_iterator(dir + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string target = std::filesystem::read_symlink(it->path(), ec).string();
    if (target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  std::ifstream tcp(dir + "/net/tcp");
  std::string line;
  std::getline(tcp, line);  // the header
  while (std::getline(tcp, line)) {
    std::istringstream in(line);
    std::string sl, local, remote, st, queues, timer, retr, uid, timeout, inode;
    in >> sl >> local >> remote >> st >> queues >> timer >> retr >> uid >> timeout >> inode;
    const auto port = [](const std::string& a) {
      return std::stoi(a.substr(a.find(':') + 1), nullptr, 16);
    };
    if (st == "01" && inodes.count(inode) && port(remote) == coordPort) return port(local);
  }
  return std::nullopt;
}

int portOf(const std::string& endpoint) {
  return std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
}

uint64_t submitOnWorld(const FaultRun& fr) {
  fr.coord.holdWorld(fr.world);
  const uint64_t id = fr.coord.submit(fr.req);
  fr.coord.releaseWorld();
  return id;
}

FaultOutcome killOrStop(const FaultRun& fr, uint64_t id, int signal) {
  const int64_t pid = fr.world[static_cast<size_t>(fr.victim)].pid;
  if (::kill(static_cast<pid_t>(pid), signal) != 0) return failed("cannot signal the worker");
  FaultOutcome out =
      expectFailed(fr.events.waitFinished(id, seconds(15)), fr.victim,
                   {"rank " + std::to_string(fr.victim), std::to_string(pid),
                    signal == SIGKILL ? "killed by signal 9" : "stopped responding"});
  // The session removes a lost worker (a stopped one it kills) and reaps it.
  const bool gone = fr.events.waitUntil([&] { return !sampleProcess(pid); }, seconds(10));
  if (!gone) {
    ::kill(static_cast<pid_t>(pid), SIGKILL);
    ::kill(static_cast<pid_t>(pid), SIGCONT);
    if (out.ok) out = failed("the lost worker (pid " + std::to_string(pid) + ") is still there");
  }
  return out;
}

// Resets the victim's control connection (ss -K: the kernel aborts the socket and sends a
// reset to the coordinator). The worker's socket connects again with its identity: the run
// must go on and end only when aborted, and the worker stay in the session.
FaultOutcome resetConnection(const FaultRun& fr, uint64_t id) {
  const WorkerInfo& w = fr.world[static_cast<size_t>(fr.victim)];
  const int coordPort = portOf(fr.coord.endpoint());
  const std::optional<int> local = controlPortOf(w.pid, coordPort);
  if (!local) return failed("found no control connection of worker pid " + std::to_string(w.pid));
  const std::string cmd =
      printfString("ss -K -t state established src 127.0.0.1:%d dst 127.0.0.1:%d >/dev/null 2>&1",
                   *local, coordPort);
  if (std::system(cmd.c_str()) != 0) return failed("ss -K failed: " + cmd);
  if (controlPortOf(w.pid, coordPort) == local) return failed("ss -K left the connection open");
  if (!keepsGoing(fr, id, 3, seconds(15))) {
    const auto res = fr.events.waitFinished(id, seconds(1));
    return failed("the run did not go on after the reset" + (res ? ": " + res->error : ""));
  }
  const std::string reason = "soak: the run went on after a reset of rank " +
                             std::to_string(fr.victim) + "'s control connection";
  fr.coord.abort(reason);
  const auto res = fr.events.waitFinished(id, seconds(15));
  if (!res || res->state != RunState::Aborted || !contains(res->error, reason)) {
    return failed("the run did not end Aborted: " + (res ? res->error : std::string("no result")));
  }
  for (const WorkerInfo& now : fr.coord.workers()) {
    if (now.pid == w.pid) return {true, reason, {}};
  }
  return failed("the reset worker left the session", res->error);
}

// A stranger's messages: garbage, a message only the coordinator sends, and a worker's message
// without a Hello. Each must be logged as ignored; the run must go on.
FaultOutcome badFrames(const FaultRun& fr, uint64_t id) {
  static int strangers = 0;
  const uint64_t mark = fr.events.logMark();
  {
    zmq::context_t ctx(1);
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 1000);
    s.set(zmq::sockopt::routing_id, "soak-stranger-" + std::to_string(++strangers));
    s.connect(fr.coord.endpoint());
    const auto send = [&](const Frames& f) {
      for (size_t i = 0; i < f.size(); ++i) {
        s.send(zmq::buffer(f[i]),
               i + 1 < f.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
      }
    };
    send({Bytes{0xde, 0xad, 0xbe, 0xef}, Bytes{1, 2, 3}});
    Start start;  // well formed: only its direction is wrong
    start.epoch = 1;
    start.endpoints = {"tcp://127.0.0.1:1"};
    send(start.encode());
    send(Heartbeat{}.encode());
  }
  const std::vector<std::string> expected = {
      "ignored a malformed control message from unknown "
      "sender soak-stranger",
      "(only the coordinator sends it)", "that has not said Hello"};
  std::string seen;
  const bool logged = fr.events.waitUntil(
      [&] {
        seen.clear();
        size_t found = 0;
        for (const std::string& l : fr.events.logsSince(mark)) {
          if (contains(l, "soak-stranger")) seen += (seen.empty() ? "" : " | ") + l;
        }
        for (const std::string& e : expected) found += contains(seen, e) ? 1 : 0;
        return found == expected.size();
      },
      seconds(10));
  if (!logged) return failed("the stranger's frames were not all logged: " + seen);
  if (!keepsGoing(fr, id, 2, seconds(15))) return failed("the run did not go on");
  fr.coord.abort("soak: the run went on after bad frames");
  const auto res = fr.events.waitFinished(id, seconds(15));
  if (!res || res->state != RunState::Aborted) {
    return failed("the run did not end Aborted: " + (res ? res->error : std::string("no result")));
  }
  return {true, seen, {}};
}

}  // namespace

FaultOutcome injectFault(FaultKind kind, const FaultRun& fr) {
  const uint64_t id = submitOnWorld(fr);
  if (!keepsGoing(fr, id, 2, seconds(60))) {
    const auto res = fr.events.waitFinished(id, seconds(1));
    return failed("the endless run did not get going" + (res ? ": " + res->error : ""));
  }
  switch (kind) {
    case FaultKind::Kill: return killOrStop(fr, id, SIGKILL);
    case FaultKind::Stop: return killOrStop(fr, id, SIGSTOP);
    case FaultKind::Reset: return resetConnection(fr, id);
    case FaultKind::BadFrame: return badFrames(fr, id);
  }
  return failed("unknown fault");
}

}  // namespace arl::app
