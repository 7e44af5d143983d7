#include "transport/transport.h"

#include <cstring>

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

std::string formatDuration(std::chrono::milliseconds t) {
  if (t.count() >= 1000 && t.count() % 1000 == 0) return std::to_string(t.count() / 1000) + " s";
  return std::to_string(t.count()) + " ms";
}

std::optional<uint64_t> pacedBytesOf(uint32_t magic, const void* payload, size_t bytes) {
  if (magic != ChunkHeader::kNoticeMagic) return bytes;
  if (bytes < sizeof(NoticeHead)) return std::nullopt;
  NoticeHead head;
  std::memcpy(&head, payload, sizeof head);
  if (head.paced == 0) return std::nullopt;
  return head.pacedBytes;
}

}  // namespace arl
