// The wait-and-drain step shared by the coordinator's and the worker's control loops.
// Private to core/src.
#pragma once

#include <zmq.hpp>

#include <cerrno>
#include <chrono>
#include <iterator>
#include <vector>

#include "coord_wakeup.h"

namespace arl {

// Waits up to `timeout` for messages on `sock` or a raised `wake`, then hands each waiting
// multipart message, at most `maxMessages` of them, to `onFrames(std::vector<message_t>&)`,
// which returns false to stop draining. Bounded so that a flood of messages cannot starve
// the loop's other duties (heartbeats, liveness checks).
template <typename OnFrames>
void pollAndDrain(zmq::socket_t& sock, Wakeup& wake, std::chrono::milliseconds timeout,
                  int maxMessages, OnFrames&& onFrames) {
  zmq::pollitem_t items[] = {{sock.handle(), 0, ZMQ_POLLIN, 0},
                             {nullptr, wake.fd(), ZMQ_POLLIN, 0}};
  try {
    zmq::poll(items, 2, timeout);
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) throw;
  }
  if (items[1].revents & ZMQ_POLLIN) wake.clear();
  for (int i = 0; i < maxMessages; ++i) {
    std::vector<zmq::message_t> frames;
    zmq::recv_result_t got;
    try {
      got = zmq::recv_multipart(sock, std::back_inserter(frames), zmq::recv_flags::dontwait);
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      throw;
    }
    if (!got || !onFrames(frames)) break;
  }
}

}  // namespace arl
