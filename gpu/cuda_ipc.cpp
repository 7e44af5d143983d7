#include "gpu/cuda_ipc.h"

#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <utility>

#include "base/errors.h"
#include "gpu/cuda_check.h"

namespace arl::gpu {

namespace {

// The reduction kernels' vector width (gpu/reduce_kernels.cu): a slice is lent at its own
// offset modulo this, so that the peer's kernel, which reads it beside its own memory at the
// same offset in the buffer, keeps to vectors.
constexpr size_t kVecBytes = 16;

static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(PeerMemory::Handle));
static_assert(sizeof(cudaIpcEventHandle_t) == sizeof(PeerMemory::Handle));

template <typename T>
PeerMemory::Handle toHandle(const T& h) {
  PeerMemory::Handle out{};
  std::memcpy(out.data(), &h, sizeof h);
  return out;
}

template <typename T>
T fromHandle(const PeerMemory::Handle& h) {
  T out{};
  std::memcpy(&out, h.data(), sizeof out);
  return out;
}

// Devices whose memory `device` can map: itself, and those with peer access both ways.
std::vector<std::string> reachOf(int device) {
  std::vector<std::string> out{deviceUuid(device)};
  int count = 0;
  ARL_CUDA_CHECK(cudaGetDeviceCount(&count));
  for (int d = 0; d < count; ++d) {
    if (d == device) continue;
    int there = 0;
    int back = 0;
    ARL_CUDA_CHECK(cudaDeviceCanAccessPeer(&there, device, d));
    ARL_CUDA_CHECK(cudaDeviceCanAccessPeer(&back, d, device));
    if (there != 0 && back != 0) out.push_back(deviceUuid(d));
  }
  return out;
}

}  // namespace

std::string deviceUuid(int device) {
  cudaDeviceProp prop{};
  ARL_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::string out = "GPU-";
  char hex[3];
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    std::snprintf(hex, sizeof hex, "%02x", static_cast<unsigned char>(prop.uuid.bytes[i]));
    out += hex;
  }
  return out;
}

// What this process exported and may not free while a peer process can still have it open
// (gpu/ipc_pool.h says why, and when it may): the pool and the interprocess events that the
// CudaPeerMemory objects of a device left behind. The next one on the device takes them over
// (their handles stay valid) and frees the buffers the ledger releases; the process's end
// frees the rest.
struct CudaPeerMemory::Exported {
  IpcPoolLedger ledger;
  std::vector<Local> events;
};

void CudaPeerMemory::withExported(int device, const std::function<void(Exported&)>& f) {
  static std::mutex mu;
  // Never destroyed: a backend may go after the program's statics, at exit.
  static auto* byDevice = new std::map<int, Exported>();  // NOLINT(cppcoreguidelines-owning-memory)
  std::lock_guard lock(mu);
  f((*byDevice)[device]);
}

CudaPeerMemory::CudaPeerMemory(int device, std::vector<cudaStream_t> streams)
    : device_(device),
      streams_(std::move(streams)),
      stream_(streams_.at(0)),
      uuid_(deviceUuid(device)),
      reach_(reachOf(device)) {
  std::vector<void*> unused;
  withExported(device_, [&](Exported& e) {
    run_ = e.ledger.begin(pool_, unused);
    events_ = std::exchange(e.events, {});
  });
  if (unused.empty()) return;
  // No peer holds these any more (gpu/ipc_pool.h); a failure to free leaks, and nothing else.
  (void)cudaSetDevice(device_);
  for (void* p : unused) (void)cudaFree(p);
}

void CudaPeerMemory::joinOthers() {
  if (barrier_.empty()) {
    barrier_.assign(streams_.size(), nullptr);
    for (cudaEvent_t& e : barrier_) {
      ARL_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    }
  }
  // A wait takes the event as last recorded when it is enqueued, so one event per stream
  // serves every barrier.
  for (size_t i = 1; i < streams_.size(); ++i) {
    ARL_CUDA_CHECK(cudaEventRecord(barrier_[i], streams_[i]));
    ARL_CUDA_CHECK(cudaStreamWaitEvent(stream_, barrier_[i], 0));
  }
}

void CudaPeerMemory::forkOthers() {
  if (streams_.size() < 2) return;
  ARL_CUDA_CHECK(cudaEventRecord(barrier_[0], stream_));
  for (size_t i = 1; i < streams_.size(); ++i) {
    ARL_CUDA_CHECK(cudaStreamWaitEvent(streams_[i], barrier_[0], 0));
  }
}

CudaPeerMemory::~CudaPeerMemory() {
  closePeers();
  (void)cudaSetDevice(device_);
  withExported(device_, [&](Exported& e) {
    e.ledger.end(run_, std::move(pool_));
    // Another object on the device (two backends at once, in tests) may have left events in
    // the same slots: both are kept, the later ones past the end.
    e.events.insert(e.events.end(), events_.begin(), events_.end());
  });
  for (cudaEvent_t b : barrier_) (void)cudaEventDestroy(b);
}

PeerMemory::Loan CudaPeerMemory::lend(const void* p, size_t bytes) {
  std::lock_guard lock(mu_);
  ARL_CUDA_CHECK(cudaSetDevice(device_));
  const size_t shift = reinterpret_cast<uintptr_t>(p) % kVecBytes;
  const size_t size = loanBufferBytes(bytes + shift);
  std::optional<size_t> id = pool_.findFree(size);
  if (!id) {
    void* fresh = nullptr;
    ARL_CUDA_CHECK(cudaMalloc(&fresh, size));
    cudaIpcMemHandle_t h{};
    const cudaError_t rc = cudaIpcGetMemHandle(&h, fresh);
    if (rc != cudaSuccess) {
      (void)cudaFree(fresh);
      detail::check(rc, "cudaIpcGetMemHandle");
    }
    id = pool_.add(fresh, size, toHandle(h));
  }
  const IpcBuffer& b = pool_[*id];
  if (bytes > 0) {
    joinOthers();
    ARL_CUDA_CHECK(cudaMemcpyAsync(static_cast<unsigned char*>(b.p) + shift, p, bytes,
                                   cudaMemcpyDeviceToDevice, stream_));
    forkOthers();  // nothing may write p before the copy has read it
  }
  pool_.lend(*id);
  Loan l;
  l.memory = b.handle;
  l.offset = shift;
  l.id = *id;
  return l;
}

void CudaPeerMemory::giveBack(uint64_t id) {
  std::lock_guard lock(mu_);
  pool_.giveBack(static_cast<size_t>(id));
}

size_t CudaPeerMemory::buffers() const {
  std::lock_guard lock(mu_);
  return pool_.size();
}

PeerMemory::Handle CudaPeerMemory::recordEvent(uint32_t slot) {
  std::lock_guard lock(mu_);
  ARL_CUDA_CHECK(cudaSetDevice(device_));
  if (slot >= events_.size()) events_.resize(static_cast<size_t>(slot) + 1);
  Local& l = events_[slot];
  if (l.event == nullptr) {
    ARL_CUDA_CHECK(
        cudaEventCreateWithFlags(&l.event, cudaEventInterprocess | cudaEventDisableTiming));
    cudaIpcEventHandle_t h{};
    const cudaError_t rc = cudaIpcGetEventHandle(&h, l.event);
    if (rc != cudaSuccess) {
      (void)cudaEventDestroy(l.event);
      l.event = nullptr;
      detail::check(rc, "cudaIpcGetEventHandle");
    }
    l.handle = toHandle(h);
  }
  joinOthers();
  ARL_CUDA_CHECK(cudaEventRecord(l.event, stream_));
  return l.handle;
}

const void* CudaPeerMemory::openMemory(int peer, const Handle& memory, uint64_t offset,
                                       size_t /*bytes*/) {
  std::lock_guard lock(mu_);
  const auto key = std::make_pair(peer, memory);
  auto it = openedMemory_.find(key);
  if (it == openedMemory_.end()) {
    ARL_CUDA_CHECK(cudaSetDevice(device_));
    void* p = nullptr;
    ARL_CUDA_CHECK(cudaIpcOpenMemHandle(&p, fromHandle<cudaIpcMemHandle_t>(memory),
                                        cudaIpcMemLazyEnablePeerAccess));
    it = openedMemory_.emplace(key, p).first;
  }
  return static_cast<const unsigned char*>(it->second) + offset;
}

void CudaPeerMemory::waitEvent(int peer, uint32_t slot, const Handle& event) {
  std::lock_guard lock(mu_);
  ARL_CUDA_CHECK(cudaSetDevice(device_));
  Opened& o = openedEvents_[std::make_pair(peer, slot)];
  if (o.event != nullptr && o.handle != event) {
    // The peer made a new event for the slot (it cannot within a run; be safe regardless).
    (void)cudaEventDestroy(o.event);
    o.event = nullptr;
  }
  if (o.event == nullptr) {
    ARL_CUDA_CHECK(cudaIpcOpenEventHandle(&o.event, fromHandle<cudaIpcEventHandle_t>(event)));
    o.handle = event;
  }
  for (cudaStream_t s : streams_) ARL_CUDA_CHECK(cudaStreamWaitEvent(s, o.event, 0));
}

void CudaPeerMemory::closePeers() noexcept {
  std::lock_guard lock(mu_);
  (void)cudaSetDevice(device_);
  for (auto& [key, p] : openedMemory_) (void)cudaIpcCloseMemHandle(p);
  openedMemory_.clear();
  for (auto& [key, o] : openedEvents_) {
    if (o.event != nullptr) (void)cudaEventDestroy(o.event);
  }
  openedEvents_.clear();
}

}  // namespace arl::gpu
