#include "cpu_engine.hpp"

#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <unordered_map>

#include "cuda_reach.hpp"

namespace gv::detail {
namespace {

using soft::Arena;

/// The CPU engine's environment for soft::Hca (the EngineEnv concept, semantics/env.hpp): host
/// memory moved with memcpy and host atomics, registered GPU memory through its GpuMover
/// (CUDA builds), peers mapped on first use.
class CpuEnv {
 public:
  /// `report(qpn, message)`: an asynchronous event for the device's owner (a failed copy).
  using Report = std::function<void(std::uint32_t, std::string)>;
  CpuEnv(Arena own, std::string own_path, Report report)
      : own_(own), path_(std::move(own_path)), pid_(getpid()), gpu_(make_gpu_mover(std::move(report))) {}
  ~CpuEnv() {
    for (auto& [path, p] : peers_) munmap(p.arena.base, p.size);
  }
  CpuEnv(const CpuEnv&) = delete;
  CpuEnv& operator=(const CpuEnv&) = delete;

  const Arena& own() const { return own_; }
  std::int32_t self_pid() const { return pid_; }
  std::uint64_t now_ns() const { return sync::now_ns(); }
  sync::Scope scope(const Arena&) const { return sync::Scope::kSystem; }

  /// The QP whose WQEs the engine executes next (named in reports of failed copies).
  void set_current_qp(std::uint32_t qpn) {
    if (gpu_) gpu_->set_current_qp(qpn);
  }

  /// The arena a QP's peer names, if it is a soft device's arena owned by the process the peer
  /// named (QpInfo::pid decides whether the peer's MRs of private memory are addresses here);
  /// else none, and the requester sees retry-exceeded.
  Arena peer(const soft::QpVisit& v) {
    const char* path = v.ctx->peer_arena;
    if (std::strncmp(path, path_.c_str(), soft::kMaxPathLen) == 0) return own_;
    const std::string key(path, strnlen(path, soft::kMaxPathLen));
    auto it = peers_.find(key);
    if (it == peers_.end()) {
      const Mapping m = map_arena_path(key.c_str());
      if (m.base == nullptr) return Arena{};  // peer gone, or not an arena
      it = peers_.emplace(key, MappedPeer{Arena{m.base}, m.size}).first;
    }
    if (it->second.arena.hdr()->pid != v.ctx->peer_pid) return Arena{};
    return it->second.arena;
  }

  /// Data mover. With `publish`, the last byte is stored last with release semantics: a
  /// receiver polling it sees the whole message, as with an HCA's in-order PCIe writes.
  void copy(void* d, const void* s, std::uint64_t n, bool publish) {
    if (gpu_)
      if (const int gpu = gpu_->find(d, s); gpu >= 0) return gpu_->copy(gpu, d, s, n, publish);
    if (!publish) {
      std::memcpy(d, s, n);
      return;
    }
    std::memcpy(d, s, n - 1);
    std::uint8_t last;
    std::memcpy(&last, static_cast<const std::uint8_t*>(s) + n - 1, 1);
    sync::store_release(static_cast<std::uint8_t*>(d) + n - 1, last);
  }
  /// The n <= 8 low bytes of v, as copy() moves bytes (host byte order is little-endian). An
  /// aligned 4- or 8-byte word in host memory is one atomic store, as an HCA's aligned PCIe
  /// write is: a receiver polling that word (an rma signal) sees it whole.
  void put(void* d, std::uint64_t v, std::uint32_t n, bool publish) {
    const bool aligned = reinterpret_cast<std::uintptr_t>(d) % n == 0;
    const bool host = !gpu_ || gpu_->find(d) < 0;
    if (host && aligned && (n == 8 || n == 4)) {
      const auto order = publish ? std::memory_order_release : std::memory_order_relaxed;
      if (n == 8) std::atomic_ref<std::uint64_t>(*static_cast<std::uint64_t*>(d)).store(v, order);
      else std::atomic_ref<std::uint32_t>(*static_cast<std::uint32_t*>(d)).store(static_cast<std::uint32_t>(v), order);
      return;
    }
    copy(d, &v, n, publish);
  }
  /// Every copy is settled when it returns (its last byte is a release store).
  void settle() {}
  void order_messages() {}
  /// The thread's loop polls every QP in turn.
  bool poll_again(bool, std::uint32_t) { return false; }

  std::uint64_t fetch_add(std::uint64_t* t, std::uint64_t v) {
    if (gpu_)
      if (const int gpu = gpu_->find(t); gpu >= 0) return gpu_->fetch_add(gpu, t, v);
    return sync::fetch_add(t, v);
  }

  std::uint64_t compare_swap(std::uint64_t* t, std::uint64_t expected, std::uint64_t desired) {
    if (gpu_)
      if (const int gpu = gpu_->find(t); gpu >= 0) return gpu_->compare_swap(gpu, t, expected, desired);
    sync::compare_exchange(t, expected, desired);  // expected <- the value found
    return expected;
  }

  std::uint8_t take_fault() { return gpu_ ? gpu_->take_fault() : 0; }

  /// A host thread moves any payload within its visit.
  bool may_move(std::uint64_t) const { return true; }

 private:
  Arena own_;
  std::string path_;
  std::int32_t pid_;
  std::unique_ptr<GpuMover> gpu_;  ///< null without CUDA
  struct MappedPeer {
    Arena arena;
    std::size_t size;
  };
  std::unordered_map<std::string, MappedPeer> peers_;  ///< peer arenas mapped on first use
};
static_assert(soft::EngineEnv<CpuEnv>);

}  // namespace

Mapping map_arena_path(const char* path) {
  // Whatever a peer names: map_shared_file never blocks opening it (a FIFO) and maps only a
  // regular file; it must be large enough to hold an arena's header and tables.
  const Mapping m = map_shared_file(path);
  const auto* h = reinterpret_cast<const soft::ArenaHeader*>(m.base);
  if (m.base && (m.size < soft::ArenaLayout::kHeap || h->magic != soft::kArenaMagic || h->version != soft::kArenaVersion)) {
    unmap_shared_file(m);
    return {};
  }
  return m;
}

CpuEngine::CpuEngine(soft::Arena arena, std::string path, const EngineSite& site)
    : arena_(arena), path_(std::move(path)), site_(site), thread_([this] { loop(); }) {}

CpuEngine::~CpuEngine() {
  stop_.store(true);
  thread_.join();
}

void CpuEngine::loop() {
  CpuEnv env(arena_, path_, [this](std::uint32_t qpn, std::string why) {
    site_.report(AsyncEvent{AsyncEvent::Type::kCopyFailed, qpn, std::move(why)});
  });
  std::uint32_t idle = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    bool any = false;
    {
      std::lock_guard lk(site_.tables);
      const std::uint32_t n = site_.qp_high.load();
      for (std::uint32_t i = 0; i < n; ++i) {
        soft::QpCtx& q = arena_.qps()[i];
        if (sync::load_acquire(&q.qpn) == 0) continue;
        env.set_current_qp(q.qpn);
        any |= soft::Hca<CpuEnv>::step(env, q);
      }
    }
    // Spin while busy; when idle, yield, then sleep briefly so an idle device costs no core.
    idle = any ? 0 : idle + 1;
    if (idle > 20000) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    } else if (idle > 256) {
      std::this_thread::yield();
    }
  }
}

}  // namespace gv::detail
