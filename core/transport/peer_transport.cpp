#include "transport/peer_transport.h"

#include <cstring>

#include "base/clock.h"
#include "base/errors.h"

namespace arl {

namespace {

enum : uint32_t { kSliceKind = 1, kReturnKind = 2 };

// kind, slot, seq, offset, length, returnsSeen, memory, event
constexpr size_t kSliceBytes = sizeof(NoticeHead) + 4 + 4 + 4 * 8 + 2 * 64;
// kind, slot, seq, event
constexpr size_t kReturnBytes = sizeof(NoticeHead) + 4 + 4 + 8 + 64;

class Writer {
 public:
  explicit Writer(size_t bytes) : out_(bytes) {}
  template <typename T>
  Writer& put(const T& v) {
    std::memcpy(out_.data() + at_, &v, sizeof v);
    at_ += sizeof v;
    return *this;
  }
  std::vector<unsigned char> done() {
    ARL_ENFORCE(at_ == out_.size(), "notice of " << at_ << " bytes, expected " << out_.size());
    return std::move(out_);
  }

 private:
  std::vector<unsigned char> out_;
  size_t at_ = 0;
};

class Reader {
 public:
  explicit Reader(const void* p) : p_(static_cast<const unsigned char*>(p)) {}
  template <typename T>
  T get() {
    T v;
    std::memcpy(&v, p_ + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }

 private:
  const unsigned char* p_;
  size_t at_ = 0;
};

}  // namespace

std::vector<unsigned char> encodeNotice(const SliceNotice& n) {
  NoticeHead head;
  head.pacedBytes = n.length;
  head.paced = 1;
  Writer w(kSliceBytes);
  w.put(head).put(uint32_t{kSliceKind}).put(n.eventSlot).put(n.seq).put(n.offset).put(n.length);
  w.put(n.returnsSeen).put(n.memory).put(n.event);
  return w.done();
}

std::vector<unsigned char> encodeNotice(const ReturnNotice& n) {
  Writer w(kReturnBytes);
  w.put(NoticeHead{}).put(uint32_t{kReturnKind}).put(n.eventSlot).put(n.seq).put(n.event);
  return w.done();
}

std::variant<PeerNotice, std::string> decodeNotice(const void* payload, size_t bytes) {
  if (bytes < sizeof(NoticeHead) + 4) {
    return "a notice of " + std::to_string(bytes) + " bytes is too short to say its kind";
  }
  Reader r(payload);
  const auto head = r.get<NoticeHead>();
  const auto kind = r.get<uint32_t>();
  if (kind == kSliceKind) {
    if (bytes != kSliceBytes) {
      return "a slice notice is " + std::to_string(kSliceBytes) + " bytes, got " +
             std::to_string(bytes);
    }
    SliceNotice n;
    n.eventSlot = r.get<uint32_t>();
    n.seq = r.get<uint64_t>();
    n.offset = r.get<uint64_t>();
    n.length = r.get<uint64_t>();
    n.returnsSeen = r.get<uint64_t>();
    n.memory = r.get<PeerMemory::Handle>();
    n.event = r.get<PeerMemory::Handle>();
    if (head.paced != 1 || head.pacedBytes != n.length) {
      return "a slice notice of " + std::to_string(n.length) + " bytes paced as " +
             (head.paced == 1 ? std::to_string(head.pacedBytes) + " bytes" : "nothing");
    }
    return PeerNotice{n};
  }
  if (kind == kReturnKind) {
    if (bytes != kReturnBytes) {
      return "a return notice is " + std::to_string(kReturnBytes) + " bytes, got " +
             std::to_string(bytes);
    }
    ReturnNotice n;
    n.eventSlot = r.get<uint32_t>();
    n.seq = r.get<uint64_t>();
    n.event = r.get<PeerMemory::Handle>();
    if (head.paced != 0) return std::string("a return notice that asks to be paced");
    return PeerNotice{n};
  }
  return "unknown notice kind " + std::to_string(kind);
}

// ---- A slice received in place -----------------------------------------------------------

class PeerMemoryTransport::SliceMessage final : public InMessage {
 public:
  SliceMessage(PeerMemoryTransport& t, int peer, const ChunkHeader& h, uint64_t seq,
               const void* data)
      : t_(t), peer_(peer), h_(h), seq_(seq), data_(data) {}
  const ChunkHeader& header() const override { return h_; }
  const void* data() const override { return data_; }
  size_t size() const override { return static_cast<size_t>(h_.length); }
  bool inPeerMemory() const override { return true; }
  void readIssued() override {
    if (returned_) return;
    returned_ = true;
    t_.sendReturn(peer_, seq_, h_.step);
  }

 private:
  PeerMemoryTransport& t_;
  int peer_;
  ChunkHeader h_;
  uint64_t seq_;
  const void* data_;
  bool returned_ = false;
};

// ---- The transport ---------------------------------------------------------------------------

PeerMemoryTransport::PeerMemoryTransport(Transport& inner, PeerMemory& memory, PeerPairing pairing,
                                         uint32_t loansPerPeer)
    : inner_(inner), memory_(memory), pairing_(std::move(pairing)), loansPerPeer_(loansPerPeer) {
  ARL_ENFORCE(loansPerPeer_ >= 1, "loansPerPeer " << loansPerPeer_);
  const auto n = static_cast<size_t>(inner_.size());
  ARL_ENFORCE(pairing_.viaPeerMemory.size() == n && pairing_.refused.size() == n,
              "a pairing of " << pairing_.viaPeerMemory.size() << " ranks for a world of " << n);
  channels_.resize(n);
}

PeerMemoryTransport::~PeerMemoryTransport() { close(); }

void PeerMemoryTransport::close() noexcept {
  if (closed_) return;
  closed_ = true;
  memory_.closePeers();
}

bool PeerMemoryTransport::readsBackendMemory(int peer) const {
  return peer >= 0 && peer < size() && pairing_.viaPeerMemory[static_cast<size_t>(peer)];
}

uint32_t PeerMemoryTransport::slot(int peer, bool returns, uint64_t seq) const {
  const auto channel = static_cast<uint32_t>(peer) * 2 + (returns ? 1 : 0);
  return channel * loansPerPeer_ + static_cast<uint32_t>(seq % loansPerPeer_);
}

void PeerMemoryTransport::malformed(int peer, uint32_t step, const std::string& what) const {
  throw PeerError(rank(), peer, step,
                  "malformed notice from rank " + std::to_string(peer) + ": " + what);
}

std::shared_ptr<SendCompletion> PeerMemoryTransport::send(int peer, const ChunkHeader& h,
                                                          const void* data, size_t bytes) {
  if (!readsBackendMemory(peer)) return inner_.send(peer, h, data, bytes);
  Channel& ch = channels_[static_cast<size_t>(peer)];
  const uint64_t seq = ch.slicesSent;
  // At most loansPerPeer slices out to a peer; the event slot of slice seq was last used by
  // slice seq - loansPerPeer, which the peer has waited for once it came back.
  while (ch.returnsWaited + loansPerPeer_ <= seq) pull(peer, h.step, kNoTimeout);
  const PeerMemory::Loan loan = memory_.lend(data, bytes);
  ch.loans.push_back(loan.id);
  SliceNotice n;
  n.seq = seq;
  n.length = bytes;
  n.returnsSeen = ch.returnsWaited;
  n.memory = loan.memory;
  n.offset = loan.offset;
  n.eventSlot = slot(peer, false, seq);
  n.event = memory_.recordEvent(n.eventSlot);
  const std::vector<unsigned char> payload = encodeNotice(n);
  ChunkHeader nh = h;
  nh.magic = ChunkHeader::kNoticeMagic;
  nh.src = rank();
  nh.length = payload.size();
  // A notice is a few hundred bytes: every data plane copies it, so `payload` may go. Its
  // completion is the caller's (a shaped one turns done once the slice's bytes have left).
  std::shared_ptr<SendCompletion> sent = inner_.send(peer, nh, payload.data(), payload.size());
  ++ch.slicesSent;
  return sent;
}

void PeerMemoryTransport::reclaimAll(uint32_t step) {
  inner_.reclaimAll(step);  // what the inner plane holds back leaves first
  for (int p = 0; p < size(); ++p) {
    Channel& ch = channels_[static_cast<size_t>(p)];
    if (ch.slicesSent > 0) awaitReturn(p, ch.slicesSent - 1, step);
  }
}

void PeerMemoryTransport::pull(int peer, uint32_t step, std::chrono::milliseconds timeout) {
  std::unique_ptr<InMessage> m = inner_.recv(peer, step, timeout);
  const ChunkHeader& h = m->header();
  if (h.magic != ChunkHeader::kNoticeMagic) {
    malformed(peer, step, "a staged payload on a channel where the two ranks share device memory");
  }
  auto decoded = decodeNotice(m->data(), m->size());
  if (auto* why = std::get_if<std::string>(&decoded)) malformed(peer, step, *why);
  Channel& ch = channels_[static_cast<size_t>(peer)];
  const PeerNotice& notice = std::get<PeerNotice>(decoded);
  if (const auto* r = std::get_if<ReturnNotice>(&notice)) {
    if (r->seq != ch.returnsWaited || r->seq >= ch.slicesSent) {
      malformed(peer, step,
                "return of slice " + std::to_string(r->seq) + " where slice " +
                    std::to_string(ch.returnsWaited) + " was due (" +
                    std::to_string(ch.slicesSent) + " lent)");
    }
    memory_.waitEvent(peer, r->eventSlot, r->event);
    memory_.giveBack(ch.loans.front());
    ch.loans.pop_front();
    ++ch.returnsWaited;
    return;
  }
  const auto& s = std::get<SliceNotice>(notice);
  if (s.seq != ch.slicesReceived + ch.pending.size()) {
    malformed(peer, step,
              "slice " + std::to_string(s.seq) + " where slice " +
                  std::to_string(ch.slicesReceived + ch.pending.size()) + " was due");
  }
  // The event this rank records for return s.seq was last used for return
  // s.seq - loansPerPeer, which the sender must have waited for.
  if (s.returnsSeen + loansPerPeer_ <= s.seq) {
    malformed(peer, step,
              "slice " + std::to_string(s.seq) + " lent with only " +
                  std::to_string(s.returnsSeen) + " returns waited for");
  }
  ChunkHeader data = h;
  data.magic = ChunkHeader::kMagic;
  data.length = s.length;
  ch.pending.emplace_back(data, s);
}

void PeerMemoryTransport::awaitReturn(int peer, uint64_t seq, uint32_t step) {
  Channel& ch = channels_[static_cast<size_t>(peer)];
  ARL_ENFORCE(seq < ch.slicesSent, "slice " << seq << " to rank " << peer << " was never lent");
  while (ch.returnsWaited <= seq) pull(peer, step, kNoTimeout);
}

std::unique_ptr<InMessage> PeerMemoryTransport::recv(int peer, uint32_t step,
                                                     std::chrono::milliseconds timeout) {
  if (!readsBackendMemory(peer)) {
    std::unique_ptr<InMessage> m = inner_.recv(peer, step, timeout);
    if (m->header().magic == ChunkHeader::kNoticeMagic && peer >= 0 && peer < size()) {
      throw PeerError(rank(), peer, step,
                      "a CUDA IPC notice from rank " + std::to_string(peer) + ", but " +
                          pairing_.refused[static_cast<size_t>(peer)]);
    }
    return m;
  }
  Channel& ch = channels_[static_cast<size_t>(peer)];
  while (ch.pending.empty()) pull(peer, step, timeout);
  auto [h, s] = ch.pending.front();
  ch.pending.pop_front();
  ++ch.slicesReceived;
  const void* data = memory_.openMemory(peer, s.memory, s.offset, s.length);
  memory_.waitEvent(peer, s.eventSlot, s.event);
  return std::make_unique<SliceMessage>(*this, peer, h, s.seq, data);
}

void PeerMemoryTransport::sendReturn(int peer, uint64_t seq, uint32_t step) {
  Channel& ch = channels_[static_cast<size_t>(peer)];
  ARL_ENFORCE(seq == ch.returnsSent, "rank " << rank() << " returns slice " << seq << " of rank "
                                             << peer << " out of order (next is " << ch.returnsSent
                                             << ")");
  ReturnNotice r;
  r.seq = seq;
  r.eventSlot = slot(peer, true, seq);
  r.event = memory_.recordEvent(r.eventSlot);
  const std::vector<unsigned char> payload = encodeNotice(r);
  ChunkHeader h;
  h.magic = ChunkHeader::kNoticeMagic;
  h.src = rank();
  h.step = step;
  h.length = payload.size();
  // Unpaced and copied by every data plane: complete on return.
  (void)inner_.send(peer, h, payload.data(), payload.size());
  ++ch.returnsSent;
}

}  // namespace arl
