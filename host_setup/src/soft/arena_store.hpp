// Where a soft device's arena lives and how the host library reads and writes it, as one object
// for both placements:
// - host memory (HostArena, the CPU engine's): a memfd that peers in other processes map via
//   /proc/<pid>/fd/<fd>; optionally pinned and mapped into every GPU (DeviceOptions::map_to_gpus);
// - GPU memory (GpuArena, the GPU engine's; CUDA builds): one cudaMalloc, shared with other
//   processes through CUDA IPC. The host keeps its own copy of header and tables and publishes
//   every change with a copy (push); it reads what the engine writes the same way (pull).
// Each placement also starts the engine that serves it (start_engine).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "semantics/hca.hpp"
#include "../provider.hpp"
#include "heap.hpp"

namespace gv::detail {

/// What an engine needs of the provider that owns it.
struct EngineSite {
  std::mutex& tables;                          ///< guards the tables; the CPU engine holds it a sweep
  const std::atomic<std::uint32_t>& qp_high;   ///< table slots below this may hold QPs
  std::function<void(AsyncEvent)> report;      ///< an asynchronous event for the device's owner
  std::function<void()> abort;                 ///< raise the device's abort flag
};

/// The engine that executes an arena's WQEs; destroying it stops it.
class Engine {
 public:
  virtual ~Engine() = default;
  /// Stop / restart (queues keep their state); see Device::quiesce(). Called under the tables' lock.
  virtual void quiesce() {}
  virtual void resume() {}
  /// After a QP left the table (under the tables' lock): true once no part of the engine can
  /// still use its rings; false when that cannot be known (the caller then keeps them).
  virtual bool swept() noexcept { return true; }
  /// After a QP was created (under the tables' lock): returns once no part of the engine can
  /// act on what a cache of its own still holds of the slot's earlier QP (the GPU engine's
  /// warps read the QP's fields as L1 hits until they fence).
  virtual void forget_stale() noexcept {}
};

class ArenaStore {
 public:
  virtual ~ArenaStore() = default;
  ArenaStore() = default;
  ArenaStore(const ArenaStore&) = delete;
  ArenaStore& operator=(const ArenaStore&) = delete;

  /// The engine's view: every pointer handed out points here.
  const soft::Arena& arena() const { return arena_; }
  /// The host's view of header and tables (the engine's own for host memory).
  const soft::Arena& tables() const { return tab_; }
  std::size_t size() const { return size_; }
  /// How peers reach the arena (QpInfo::arena).
  const std::string& path() const { return path_; }
  virtual bool on_gpu() const = 0;
  /// Where the arena lives, in words (Device::describe).
  virtual std::string placement() const { return on_gpu() ? "GPU memory" : "host memory"; }
  /// What a peer in another process needs besides the path (QpInfo::ipc).
  virtual void describe(QpInfo& info) const { (void)info; }

  /// Start the engine that serves this arena. A failed start throws.
  virtual std::unique_ptr<Engine> start_engine(const DeviceOptions& opt, const EngineSite& site) = 0;

  /// Where the engine sees a field of the host's table view.
  template <class T>
  T* engine_ptr(T& tab_field) const {
    return reinterpret_cast<T*>(arena_.base + (reinterpret_cast<std::byte*>(&tab_field) - tab_.base));
  }

  /// Publish [p, p + n) of the host's table view to the engine's (nothing to do in host memory).
  virtual void push(const void* p, std::size_t n) = 0;
  /// push() for teardown (destructors of MRs, CQs and QPs): false instead of a throw when the
  /// copy fails, as it does once a fault has killed the CUDA context.
  bool try_push(const void* p, std::size_t n) noexcept {
    try {
      push(p, n);
      return true;
    } catch (...) {
      return false;
    }
  }
  /// The engine's current value of a table field.
  template <class T>
  T pull(const T& field) const {
    if (on_gpu()) {
      T v;
      pull_bytes(&v, &field, sizeof(T));
      return v;
    }
    if constexpr (sizeof(T) <= 8) {
      return sync::load_acquire(&field);
    } else {
      return field;
    }
  }

  /// Write or clear heap bytes (rings, doorbell records) where the engine reads them.
  virtual void write_at(std::uint64_t off, const void* src, std::size_t n) = 0;
  virtual void zero_at(std::uint64_t off, std::size_t n) = 0;

  // ---- the heap (the owner's first-fit allocator of arena offsets) ----
  std::uint64_t heap_alloc(std::uint64_t bytes, std::uint64_t align) { return heap_.alloc(bytes, align); }
  std::uint64_t heap_alloc_or_throw(const char* who, std::uint64_t bytes, std::uint64_t align);
  std::uint64_t heap_alloc_zeroed(const char* who, std::uint64_t bytes, std::uint64_t align = 64);
  void heap_release(std::uint64_t off) { heap_.release(off); }
  std::uint64_t heap_size_of(std::uint64_t off) const { return heap_.size_of(off); }
  bool heap_inside_live(std::uint64_t off, std::uint64_t len) const { return heap_.inside_live(off, len); }
  /// The heap offset of p, or 0 if p does not lie in the heap.
  std::uint64_t offset_of(const void* p) const;

  /// Poster/poller counters (ib::QpCounters, ib::CqCounters), zeroed: where their users run.
  /// The engine never touches them.
  virtual void* alloc_counters(const char* who, std::size_t bytes);
  virtual void free_counters(void* p) { heap_.release(offset_of(p)); }

  /// Memory outside the arena an MR may cover: throws if this placement's engine cannot reach
  /// [addr, addr + len) with the rights `access` grants (host memory: every page mapped, and
  /// writable for write access; host_pages.hpp); returns the GPU holding it when the engine
  /// moves its bytes with CUDA copies (the CPU engine and cudaMalloc memory), else -1.
  virtual int reachable(const void* addr, std::size_t len, std::uint32_t access) const = 0;

  /// An MR of slot `slot` over [addr, addr + len) of GPU `gpu`, which reachable() named: known
  /// to the engine before its key is published. forget_gpu_mr(slot) at deregistration (for
  /// every slot: nothing to do where none was admitted).
  virtual void admit_gpu_mr(std::uint32_t slot, std::uintptr_t addr, std::size_t len, int gpu) {
    (void)slot, (void)addr, (void)len, (void)gpu;
  }
  virtual void forget_gpu_mr(std::uint32_t slot) { (void)slot; }

  /// modify_to_rtr: the peer's arena for QP `qpn`'s engine (QpCtx::peer_base; 0 when the engine
  /// maps peers itself, by path).
  virtual std::uint64_t peer_base(std::uint32_t qpn, const QpInfo& remote) = 0;

 protected:
  /// Lay out a fresh arena of `size` bytes at `engine_base` (tables seen at `table_base`).
  void init(std::byte* engine_base, std::byte* table_base, std::size_t size, std::string path);
  virtual void pull_bytes(void* dst, const void* tab_field, std::size_t n) const = 0;

  soft::Arena arena_;
  soft::Arena tab_;
  std::size_t size_ = 0;
  std::string path_;
  Heap heap_;
};

/// The two placements. open_gpu_arena() needs a CUDA build (it says so otherwise).
std::unique_ptr<ArenaStore> open_host_arena(const DeviceOptions& opt);
std::unique_ptr<ArenaStore> open_gpu_arena(const DeviceOptions& opt);

/// GPU arenas are named "gpu:<pid>:<gpu>:<address>"; host ones by the path of their memfd.
bool is_gpu_arena_name(const char* name);

}  // namespace gv::detail
