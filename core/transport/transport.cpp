#include "transport/transport.h"

namespace arl {

namespace {

class CompletedSend final : public SendCompletion {
 public:
  bool done() const override { return true; }
  void wait() override {}
};

}  // namespace

const std::shared_ptr<SendCompletion>& completedSend() {
  static const std::shared_ptr<SendCompletion> kDone = std::make_shared<CompletedSend>();
  return kDone;
}

}  // namespace arl
