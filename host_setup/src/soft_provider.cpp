// The software HCA provider: an arena, its tables, and the engine that executes WQEs with the
// semantics of soft/hca.hpp. Two placements:
// - CPU engine: the arena is a memfd (mapped by peers in other processes via
//   /proc/<pid>/fd/<fd>), executed by a host thread. MRs over GPU memory of this process are
//   served through CUDA copies on the engine's own streams (CpuEnv).
// - GPU engine: the arena is GPU memory (shared with other processes through CUDA IPC),
//   executed by a persistent kernel (gpu_engine.cu). The host keeps its own copy of the header
//   and tables (tab_) and publishes every change with a copy on its control stream; it reads
//   what the engine writes (QP state, events, epochs) back the same way.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <memory>
#include <thread>
#include <unordered_map>
#include <vector>

#include "../soft/hca.hpp"
#include "provider.hpp"

#if GPUVERBS_HAVE_CUDA
#include <cuda_runtime.h>

#include "cuda_util.hpp"

#include "gpu_engine.hpp"
#endif

namespace gv::detail {
namespace {

using soft::Arena;
using soft::ArenaHeader;
using soft::CqCtx;
using soft::MrEntry;
using soft::QpCtx;
namespace m5 = ib::mlx5;


using soft::kMaxCqs;
using soft::kMaxMrs;
using soft::kMaxQps;

std::string errno_text(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

/// First-fit allocator over the arena's heap range. Offsets only; owner process only.
class Heap {
 public:
  void init(std::uint64_t begin, std::uint64_t end) { free_[begin] = end - begin; }

  std::uint64_t alloc(std::uint64_t bytes, std::uint64_t align) {
    bytes = (bytes + 63) & ~std::uint64_t{63};
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      const std::uint64_t start = (it->first + align - 1) & ~(align - 1);
      const std::uint64_t end = it->first + it->second;
      if (start + bytes > end) continue;
      const std::uint64_t lead = start - it->first;
      free_.erase(it);
      if (lead) free_[start - lead] = lead;
      if (end > start + bytes) free_[start + bytes] = end - (start + bytes);
      used_[start] = bytes;
      return start;
    }
    return 0;
  }

  /// Size of the live allocation starting at off, or 0.
  std::uint64_t size_of(std::uint64_t off) const {
    auto it = used_.find(off);
    return it == used_.end() ? 0 : it->second;
  }

  /// True if [off, off+len) lies inside one live allocation.
  bool inside_live(std::uint64_t off, std::uint64_t len) const {
    auto it = used_.upper_bound(off);
    if (it == used_.begin()) return false;
    --it;
    return off >= it->first && off + len <= it->first + it->second;
  }

  void release(std::uint64_t off) {
    auto it = used_.find(off);
    std::uint64_t start = off, size = it->second;
    used_.erase(it);
    auto next = free_.lower_bound(start);
    if (next != free_.end() && start + size == next->first) {
      size += next->second;
      free_.erase(next);
    }
    auto prev = free_.lower_bound(start);
    if (prev != free_.begin()) {
      --prev;
      if (prev->first + prev->second == start) {
        start = prev->first;
        size += prev->second;
        free_.erase(prev);
      }
    }
    free_[start] = size;
  }

 private:
  std::map<std::uint64_t, std::uint64_t> free_, used_;
};

/// A mapping of a whole arena file.
struct Mapping {
  std::byte* base = nullptr;
  std::size_t size = 0;
};

Mapping map_arena_path(const char* path) {
  const int fd = ::open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return {};
  struct stat st {};
  Mapping m;
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    void* p = mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ | PROT_WRITE,
                   MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) m = {static_cast<std::byte*>(p), static_cast<std::size_t>(st.st_size)};
  }
  ::close(fd);
  const auto* h = reinterpret_cast<const ArenaHeader*>(m.base);
  if (m.base && (h->magic != soft::kArenaMagic || h->version != soft::kArenaVersion)) {
    munmap(m.base, m.size);
    return {};
  }
  return m;
}

#if GPUVERBS_HAVE_CUDA
/// GPU memory registered with the CPU-engine devices of this process: the ranges whose bytes
/// the CPU engines move with CUDA copies instead of memcpy. Process-wide, because an engine
/// also writes into its peers' MRs, which may belong to another Device of this process. Host
/// memory never enters it: while no GPU memory is registered the host path pays one load, and
/// otherwise a shared lock and a scan of the registered GPU ranges (few, in practice).
class GpuRanges {
 public:
  /// Called before the MR's key is published, so an engine that resolved the key finds it.
  void add(std::uintptr_t begin, std::size_t len, int gpu) {
    std::unique_lock lk(mu_);
    ranges_.push_back(Range{begin, begin + len, gpu});
    any_.store(true, std::memory_order_release);
  }
  void remove(std::uintptr_t begin, std::size_t len) {
    std::unique_lock lk(mu_);
    for (auto it = ranges_.begin(); it != ranges_.end(); ++it) {
      if (it->begin == begin && it->end == begin + len) {
        ranges_.erase(it);
        break;
      }
    }
    any_.store(!ranges_.empty(), std::memory_order_release);
  }
  bool any() const { return any_.load(std::memory_order_acquire); }
  /// The GPU holding registered memory at a, else at b; -1 if neither is registered GPU memory.
  int find(const void* a, const void* b = nullptr) const {
    const auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
    std::shared_lock lk(mu_);
    int found = -1;
    for (const Range& r : ranges_) {
      if (pa >= r.begin && pa < r.end) return r.gpu;
      if (pb >= r.begin && pb < r.end) found = r.gpu;
    }
    return found;
  }

 private:
  struct Range {
    std::uintptr_t begin, end;
    int gpu;
  };
  mutable std::shared_mutex mu_;
  std::vector<Range> ranges_;
  std::atomic<bool> any_{false};
};
GpuRanges g_gpu_ranges;

/// Serialises the CPU engines' read-modify-writes of atomics on GPU memory, process-wide: they
/// are atomic with respect to each other (IBV_ATOMIC_HCA), not to GPU threads' own atomics.
std::mutex g_gpu_atomics_mu;
#endif

/// The CPU engine's environment for soft::Hca (see the Env contract in soft/hca.hpp): host
/// memory moved with memcpy and host atomics, registered GPU memory (with CUDA) through copies
/// on streams the engine owns, peers mapped on first use.
class CpuEnv {
 public:
  /// `report(qpn, message)`: an asynchronous event for the device's owner (a failed copy).
  using Report = std::function<void(std::uint32_t, std::string)>;
  CpuEnv(Arena own, std::string own_path, Report report)
      : own_(own), path_(std::move(own_path)), pid_(getpid()), report_(std::move(report)) {}
  ~CpuEnv() {
    for (auto& [path, p] : peers_) munmap(p.arena.base, p.size);
#if GPUVERBS_HAVE_CUDA
    for (std::size_t g = 0; g < streams_.size(); ++g) {
      if (streams_[g] == nullptr) continue;
      (void)cudaSetDevice(static_cast<int>(g));
      (void)cudaStreamDestroy(streams_[g]);  // fails harmlessly if CUDA is already unloading
    }
    (void)cudaGetLastError();
#endif
  }
  CpuEnv(const CpuEnv&) = delete;
  CpuEnv& operator=(const CpuEnv&) = delete;

  const Arena& own() const { return own_; }
  std::int32_t self_pid() const { return pid_; }
  std::uint64_t now_ns() const { return sync::now_ns(); }
  sync::Scope scope(const Arena&) const { return sync::Scope::kSystem; }

  /// The QP whose WQEs the engine executes next (named in reports of failed copies).
  void set_current_qp(std::uint32_t qpn) { qpn_ = qpn; }

  Arena peer(const soft::QpVisit& v) {
    const char* path = v.ctx->peer_arena;
    if (std::strncmp(path, path_.c_str(), soft::kMaxPathLen) == 0) return own_;
    const std::string key(path, strnlen(path, soft::kMaxPathLen));
    auto it = peers_.find(key);
    if (it != peers_.end()) return it->second.arena;
    const Mapping m = map_arena_path(key.c_str());
    if (m.base == nullptr) return Arena{};  // peer gone: the requester sees retry-exceeded
    return (peers_[key] = MappedPeer{Arena{m.base}, m.size}).arena;
  }

  /// Data mover. With `publish`, the last byte is stored last with release semantics: a
  /// receiver polling it sees the whole message, as with an HCA's in-order PCIe writes.
  void copy(void* d, const void* s, std::uint64_t n, bool publish) {
#if GPUVERBS_HAVE_CUDA
    if (g_gpu_ranges.any()) {
      if (const int gpu = g_gpu_ranges.find(d, s); gpu >= 0) return gpu_copy(gpu, d, s, n, publish);
    }
#endif
    if (!publish) {
      std::memcpy(d, s, n);
      return;
    }
    std::memcpy(d, s, n - 1);
    std::uint8_t last;
    std::memcpy(&last, static_cast<const std::uint8_t*>(s) + n - 1, 1);
    sync::store_release(static_cast<std::uint8_t*>(d) + n - 1, last);
  }
  /// The n <= 8 low bytes of v, as copy() moves bytes (host byte order is little-endian).
  void put(void* d, std::uint64_t v, std::uint32_t n, bool publish) { copy(d, &v, n, publish); }
  /// Every copy is settled when it returns (its last byte is a release store).
  void settle() {}

  std::uint64_t fetch_add(std::uint64_t* t, std::uint64_t v) {
#if GPUVERBS_HAVE_CUDA
    if (g_gpu_ranges.any()) {
      if (const int gpu = g_gpu_ranges.find(t); gpu >= 0)
        return gpu_rmw(gpu, t, [v](std::uint64_t cur, std::uint64_t& next) { next = cur + v; return true; });
    }
#endif
    return sync::fetch_add(t, v);
  }

  std::uint64_t compare_swap(std::uint64_t* t, std::uint64_t expected, std::uint64_t desired) {
#if GPUVERBS_HAVE_CUDA
    if (g_gpu_ranges.any()) {
      if (const int gpu = g_gpu_ranges.find(t); gpu >= 0)
        return gpu_rmw(gpu, t, [=](std::uint64_t cur, std::uint64_t& next) {
          next = desired;
          return cur == expected;
        });
    }
#endif
    sync::compare_exchange(t, expected, desired);  // expected <- the value found
    return expected;
  }

  std::uint8_t take_fault() {
    const std::uint8_t f = fault_;
    fault_ = 0;
    return f;
  }

 private:
#if GPUVERBS_HAVE_CUDA
  /// Moves bytes of which one side is GPU memory with cudaMemcpyAsync on the engine's own
  /// non-blocking stream of `gpu` and waits for it. Never the legacy default stream and never
  /// cudaMemcpy: a kernel on the legacy stream that waits for a completion would wait for us
  /// while we waited for it. With `publish`, n - 1 bytes first, then the last byte.
  void gpu_copy(int gpu, void* d, const void* s, std::uint64_t n, bool publish) {
    if (fault_ != 0) return;  // the WQE has failed already: move nothing more for it
    const cudaStream_t st = stream(gpu);
    if (st == nullptr) return;
    auto* dst = static_cast<std::byte*>(d);
    const auto* src = static_cast<const std::byte*>(s);
    const std::uint64_t body = publish ? n - 1 : n;
    if (body != 0 && !move(st, dst, src, body)) return;
    if (publish) (void)move(st, dst + n - 1, src + n - 1, 1);  // after the body is complete
  }

  bool move(cudaStream_t st, void* d, const void* s, std::uint64_t n) {
    cudaError_t e = cudaMemcpyAsync(d, s, n, cudaMemcpyDefault, st);
    const char* what = "cudaMemcpyAsync";
    if (e == cudaSuccess) {
      e = cudaStreamSynchronize(st);
      what = "cudaStreamSynchronize";
    }
    if (e == cudaSuccess) return true;
    fail(std::string(what) + " of " + std::to_string(n) + " bytes from " +
             hex(reinterpret_cast<std::uintptr_t>(s)) + " to " + hex(reinterpret_cast<std::uintptr_t>(d)),
         e);
    return false;
  }

  /// Read-modify-write of 8 bytes of GPU memory under the process-wide atomics lock. `f(cur,
  /// next)` says whether to store `next`. Returns the value found (0 after a failure, which
  /// fails the WQE).
  template <class F>
  std::uint64_t gpu_rmw(int gpu, std::uint64_t* t, F f) {
    if (fault_ != 0) return 0;
    const cudaStream_t st = stream(gpu);
    if (st == nullptr) return 0;
    std::lock_guard lk(g_gpu_atomics_mu);
    std::uint64_t cur = 0, next = 0;
    if (!move(st, &cur, t, 8)) return 0;
    if (f(cur, next) && next != cur) (void)move(st, t, &next, 8);
    return cur;
  }

  /// The engine's stream on `gpu` (created on first use), made current for this thread.
  cudaStream_t stream(int gpu) {
    if (static_cast<std::size_t>(gpu) >= streams_.size()) streams_.resize(gpu + 1, nullptr);
    cudaError_t e = cudaSuccess;
    if (gpu != cur_gpu_) {
      e = cudaSetDevice(gpu);
      if (e != cudaSuccess) {
        fail("cudaSetDevice(" + std::to_string(gpu) + ")", e);
        return nullptr;
      }
      cur_gpu_ = gpu;
    }
    if (streams_[gpu] == nullptr) {
      e = cudaStreamCreateWithFlags(&streams_[gpu], cudaStreamNonBlocking);
      if (e != cudaSuccess) {
        streams_[gpu] = nullptr;
        fail("cudaStreamCreateWithFlags on GPU " + std::to_string(gpu), e);
        return nullptr;
      }
    }
    return streams_[gpu];
  }

  /// A failed copy fails the WQE being executed (LOCAL_PROT_ERR through take_fault(), and its
  /// QP enters the error state) and raises an asynchronous event that says why.
  void fail(const std::string& what, cudaError_t e) {
    (void)cudaGetLastError();  // clear a non-sticky error for the next WQE
    fault_ = m5::kSyndLocalProtErr;
    if (report_)
      report_(qpn_, "QP " + hex(qpn_) + ": the CPU engine's " + what + " failed (" + cuda_error_text(e) +
                        "); the WQE completed with a local protection error and the QP is in error. "
                        "Is the registered GPU memory still allocated?");
  }

  std::vector<cudaStream_t> streams_;  ///< by GPU; the engine's own non-blocking streams
  int cur_gpu_ = -1;
#endif

  Arena own_;
  std::string path_;
  std::int32_t pid_;
  Report report_;
  std::uint32_t qpn_ = 0;
  std::uint8_t fault_ = 0;
  struct MappedPeer {
    Arena arena;
    std::size_t size;
  };
  std::unordered_map<std::string, MappedPeer> peers_;  ///< peer arenas mapped on first use
};

#if GPUVERBS_HAVE_CUDA
/// Zero n bytes of GPU memory with copies from host memory, then wait for them. Not cudaMemset:
/// a memset is a kernel, and while user kernels occupy every SM it would wait for them (open()
/// could not report that the engine cannot start; a QP could not be created beside a
/// persistent user kernel). Copies need only the copy engines.
void clear_by_copies(void* p, std::size_t n, cudaStream_t s, const std::string& what) {
  static const std::vector<std::byte> zeros(std::size_t{1} << 20);
  for (std::size_t off = 0; off < n; off += zeros.size())
    cuda_check(cudaMemcpyAsync(static_cast<std::byte*>(p) + off, zeros.data(), std::min(zeros.size(), n - off),
                               cudaMemcpyHostToDevice, s),
               what);
  cuda_check(cudaStreamSynchronize(s), what);
}

// A resident engine and lazy module loading deadlock: with CUDA_MODULE_LOADING=LAZY (the
// default since CUDA 12) the first launch of each kernel loads its module, and loading waits
// for the kernels running on the device, the engine included, forever. Ask for eager loading
// before anything initialises CUDA (a user's explicit setting wins; open() checks it).
[[maybe_unused]] const bool g_eager_loading = [] {
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  return true;
}();

/// True if this process loads CUDA modules lazily (or the driver cannot say).
bool lazy_module_loading() {
  using Fn = int (*)(int*);  // CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode*)
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion("cuModuleGetLoadingMode", &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      fn == nullptr) {
    (void)cudaGetLastError();
    return false;  // a driver without the query predates lazy loading
  }
  int mode = 0;
  return reinterpret_cast<Fn>(fn)(&mode) == 0 && mode == 2;  // CU_MODULE_LAZY_LOADING
}

/// GPU arenas open in this process, by name, so that QPs of two devices connect without IPC.
struct GpuArenaRef {
  std::byte* base;
  int gpu;
};
std::mutex g_gpu_arenas_mu;
std::map<std::string, GpuArenaRef> g_gpu_arenas;
#endif

constexpr char kGpuArenaPrefix[] = "gpu:";
bool is_gpu_arena_name(const char* name) { return std::strncmp(name, kGpuArenaPrefix, 4) == 0; }

#if GPUVERBS_HAVE_CUDA
/// The outcome of a GPU engine launch made on a thread of its own (see start_gpu_engine).
class EngineLaunch {
 public:
  void made(cudaError_t e) {
    std::lock_guard lk(mu_);
    err_ = e;
    done_ = true;
    cv_.notify_all();
  }
  void wait_made() {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [this] { return done_; });
  }
  /// The launch's error (cudaSuccess while it is not made yet).
  cudaError_t error() {
    std::lock_guard lk(mu_);
    return err_;
  }
  /// Whether the launch was made and its kernel has run to its end on `stream`.
  bool ran(cudaStream_t stream) {
    {
      std::lock_guard lk(mu_);
      if (!done_) return false;
    }
    const cudaError_t q = cudaStreamQuery(stream);
    if (q == cudaErrorNotReady) return false;
    (void)cudaGetLastError();
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  cudaError_t err_ = cudaSuccess;
};
#endif

class SoftProvider final : public Provider {
 public:
  explicit SoftProvider(const DeviceOptions& opt) : name_("soft") {
    const std::size_t size = opt.arena_bytes;
    if (size < (std::size_t{8} << 20))
      throw Error("Device::open(soft): arena_bytes " + std::to_string(size) +
                  " is too small: use at least 8 MiB");
    const std::uint64_t heap_off = soft::ArenaLayout::kHeap;
    if (opt.engine == DeviceOptions::Engine::kGpu) {
      open_gpu_arena(opt, size);
    } else {
      open_host_arena(opt, size);
    }
    ArenaHeader* h = tab_.hdr();
    h->magic = soft::kArenaMagic;
    h->version = soft::kArenaVersion;
    h->pid = getpid();
    h->size = size;
    heap_.init(heap_off, size);
    mr_tags_.assign(kMaxMrs, 0);
    push(tab_.base, heap_off);
    if (on_gpu()) {
#if GPUVERBS_HAVE_CUDA
      try {
        start_gpu_engine(false);
      } catch (...) {
        abandon_gpu_arena();
        throw;
      }
      watchdog_ = std::thread([this] { watchdog_loop(); });
#endif
    } else {
      engine_ = std::thread([this] { engine_loop(); });
    }
  }

  ~SoftProvider() override {
    if (on_gpu()) {
#if GPUVERBS_HAVE_CUDA
      {
        std::lock_guard lk(wd_mu_);
        wd_stop_ = true;
      }
      wd_cv_.notify_all();
      watchdog_.join();
      if (engine_running_) (void)stop_gpu_engine_nothrow();
      close_gpu_arena();  // nothing in it throws
#endif
      return;
    }
    stop_.store(true);
    engine_.join();
    for (std::uint32_t i = 0; i < kMaxMrs; ++i) forget_gpu_mr(i);  // MRs left registered
#if GPUVERBS_HAVE_CUDA
    if (gpu_mapped_) (void)cudaHostUnregister(arena_.base);
#endif
    munmap(arena_.base, size_);
    ::close(fd_);
  }

  const std::string& name() const override { return name_; }

  // ---- memory ----
  void* alloc(std::size_t bytes) override {
    if (bytes == 0) throw Error("Device::alloc: 0 bytes requested");
    std::lock_guard lk(mu_);
    const std::uint64_t off = heap_.alloc(bytes, bytes >= 4096 ? 4096 : 64);
    if (off == 0)
      throw Error("Device::alloc: " + std::to_string(bytes) +
                  " bytes do not fit in the soft device's arena; open the device with larger "
                  "DeviceOptions::arena_bytes");
    return arena_.base + off;
  }

  void free(void* p) override {
    std::lock_guard lk(mu_);
    const std::uint64_t off = arena_offset(p);
    if (off == 0 || heap_.size_of(off) == 0)
      throw Error("Device::free: " + hex(reinterpret_cast<std::uintptr_t>(p)) +
                  " was not returned by Device::alloc (or was freed already)");
    const std::uint64_t len = heap_.size_of(off);
    for (std::uint32_t i = 0; i < kMaxMrs; ++i) {
      const MrEntry& e = tab_.mrs()[i];
      if (e.key != 0 && e.in_arena && e.arena_off < off + len && off < e.arena_off + e.length)
        throw Error("Device::free: memory at " + hex(reinterpret_cast<std::uintptr_t>(p)) +
                    " is still registered (MR key " + hex(e.key) + "); deregister it first");
    }
    heap_.release(off);
  }

  // ---- protection domains and memory regions ----
  std::uint32_t alloc_pd() override {
    std::lock_guard lk(mu_);
    return ++last_pdn_;
  }
  void dealloc_pd(std::uint32_t) override {}

  std::uint32_t reg_mr(std::uint32_t pdn, void* addr, std::size_t len,
                       std::uint32_t access) override {
    std::lock_guard lk(mu_);
    const auto a = reinterpret_cast<std::uintptr_t>(addr);
    const std::uint64_t off = arena_offset(addr);
    const bool in_arena = off != 0;
    if (in_arena && !heap_.inside_live(off, len))
      throw Error("reg_mr: [" + hex(a) + ", +" + std::to_string(len) +
                  ") lies in the device's memory but not inside one live Device::alloc "
                  "allocation (freed, or past its end)");
    const int gpu = in_arena ? -1 : check_reachable(addr);
    std::uint32_t slot = 0;
    while (slot < kMaxMrs && tab_.mrs()[slot].key != 0) ++slot;
    if (slot == kMaxMrs)
      throw Error("reg_mr: all " + std::to_string(kMaxMrs) +
                  " memory-region slots are in use; deregister some first");
    mr_tags_[slot] = static_cast<std::uint8_t>(mr_tags_[slot] % 255 + 1);  // 1..255, never 0
    MrEntry& e = tab_.mrs()[slot];
    e.access = access;
    e.pdn = pdn;
    e.in_arena = in_arena ? 1 : 0;
    e.addr = a;
    e.length = len;
    e.arena_off = off;
    push(&e, sizeof(e));  // key still 0: the engine ignores the slot
#if GPUVERBS_HAVE_CUDA
    if (gpu >= 0) g_gpu_ranges.add(a, len, gpu);  // before the key: the engine then finds it
    gpu_mr_[slot] = gpu >= 0;
#else
    (void)gpu;
#endif
    const std::uint32_t key = (slot << 8) | mr_tags_[slot];
    sync::store_release(&e.key, key);
    push(&e.key, sizeof(e.key));
    return key;
  }

  void dereg_mr(std::uint32_t key) override {
    std::lock_guard lk(mu_);
    const std::uint32_t slot = soft::mr_slot(key);
    std::uint32_t* k = &tab_.mrs()[slot].key;
    sync::store_release(k, std::uint32_t{0});
    (void)try_push(k, sizeof(*k));  // fails only with the engine's context dead
    forget_gpu_mr(slot);
  }

  // ---- completion queues ----
  CqDesc create_cq(std::uint32_t entries) override {
    std::lock_guard lk(mu_);
    std::uint32_t slot = 0;
    while (slot < kMaxCqs && tab_.cqs()[slot].cqn != 0) ++slot;
    if (slot == kMaxCqs) throw Error("create_cq: all " + std::to_string(kMaxCqs) + " CQ slots are in use");
    const std::uint64_t ring = heap_alloc_or_throw("create_cq", std::uint64_t{entries} * m5::kCqeSize, 4096);
    const std::uint64_t dbrec = heap_alloc_or_throw("create_cq", 64, 64);
    std::vector<m5::Cqe> cqes(entries);
    for (auto& c : cqes) {
      std::memset(&c, 0, sizeof(c));
      c.op_own = static_cast<std::uint8_t>(m5::kCqeInvalid << 4);
    }
    write_at(ring, cqes.data(), cqes.size() * sizeof(m5::Cqe));
    zero_at(dbrec, 64);
    if (!on_gpu()) cq_state_[slot] = alloc_counters("create_cq", sizeof(ib::CqState));
    else cq_state_[slot] = arena_.at<void>(heap_alloc_zeroed("create_cq", sizeof(ib::CqState)));
    CqCtx& c = tab_.cqs()[slot];
    c.cqn = 0;
    c.log_cqes = ib::log2_pow2(entries);
    c.ring_off = ring;
    c.dbrec_off = dbrec;
    c.produced = 0;
    c.error = 0;
    push(&c, sizeof(c));
    sync::store_release(&c.cqn, slot + 1);
    push(&c.cqn, sizeof(c.cqn));
    return CqDesc{slot + 1, entries};
  }

  void destroy_cq(std::uint32_t cqn) override {
    std::lock_guard lk(mu_);
    CqCtx& c = tab_.cqs()[cqn - 1];
    sync::store_release(&c.cqn, std::uint32_t{0});
    if (!try_push(&c.cqn, sizeof(c.cqn))) return;  // the engine may not know: keep the ring
    heap_.release(c.ring_off);
    heap_.release(c.dbrec_off);
    free_counters(cq_state_[cqn - 1]);
  }

  ib::CqHandle cq_handle(std::uint32_t cqn) const override {
    const CqCtx& c = tab_.cqs()[cqn - 1];
    ib::CqHandle h;
    h.cqn = cqn;
    h.ring = arena_.at<m5::Cqe>(c.ring_off);
    h.dbrec = arena_.at<m5::CqDbrec>(c.dbrec_off);
    h.state = static_cast<ib::CqState*>(cq_state_[cqn - 1]);
    h.abort = engine_ptr(tab_.hdr()->abort);
    h.error = engine_ptr(tab_.cqs()[cqn - 1].error);
    h.log_cqes = c.log_cqes;
    h.executor = on_gpu() ? sync::Scope::kGpu : sync::Scope::kSystem;
    return h;
  }

  // ---- queue pairs ----
  std::uint32_t create_qp(const QpLayout& l) override {
    std::lock_guard lk(mu_);
    std::uint32_t slot = 0;
    while (slot < kMaxQps && tab_.qps()[slot].qpn != 0) ++slot;
    if (slot == kMaxQps) throw Error("create_qp: all " + std::to_string(kMaxQps) + " QP slots are in use");
    QpCtx& q = tab_.qps()[slot];
    std::memset(&q, 0, sizeof(q));
    q.sq_off = heap_alloc_zeroed("create_qp", std::uint64_t{l.sq_bbs} * m5::kSendWqeBB, 4096);
    q.rq_off = heap_alloc_zeroed("create_qp", std::uint64_t{l.rq_wqes} << l.rq_stride_shift, 4096);
    q.dbrec_off = heap_alloc_zeroed("create_qp", 64, 64);
    q.doorbell_off = heap_alloc_zeroed("create_qp", 64, 64);
    if (!on_gpu()) qp_state_[slot] = alloc_counters("create_qp", sizeof(ib::QpState));
    else qp_state_[slot] = arena_.at<void>(heap_alloc_zeroed("create_qp", sizeof(ib::QpState)));
    q.state = static_cast<std::uint32_t>(QpState::kReset);
    q.pdn = l.pdn;
    q.send_cq = l.send_cqn - 1;
    q.recv_cq = l.recv_cqn - 1;
    q.sq_bbs = l.sq_bbs;
    q.rq_wqes = l.rq_wqes;
    q.rq_stride_shift = l.rq_stride_shift;
    q.max_recv_sge = l.caps.max_recv_sge;
    q.max_send_sge = l.caps.max_send_sge;
    q.max_inline = l.caps.max_inline;
    push(&q, sizeof(q));
    const std::uint32_t qpn = soft::kQpnBase + slot;
    sync::store_release(&q.qpn, qpn);
    push(&q.qpn, sizeof(q.qpn));
    if (slot + 1 > qp_high_.load()) {
      qp_high_.store(slot + 1);
      tab_.hdr()->qp_high = slot + 1;
      push(&tab_.hdr()->qp_high, sizeof(std::uint32_t));
    }
    return qpn;
  }

  void destroy_qp(std::uint32_t qpn) override {
    std::lock_guard lk(mu_);
    QpCtx& q = ctx(qpn);
    sync::store_release(&q.qpn, std::uint32_t{0});
    // Free the rings only once no engine warp can still hold them; otherwise they stay
    // allocated (a failed engine, or a dead context, is not waited for).
    if (!try_push(&q.qpn, sizeof(q.qpn)) || !engine_swept()) return;
    heap_.release(q.sq_off);
    heap_.release(q.rq_off);
    heap_.release(q.dbrec_off);
    heap_.release(q.doorbell_off);
    free_counters(qp_state_[qpn - soft::kQpnBase]);
  }

  QpState qp_state(std::uint32_t qpn) const override {
    return static_cast<QpState>(pull(ctx(qpn).state));
  }

  QpInfo qp_info(std::uint32_t qpn) const override {
    QpInfo i;
    i.qpn = qpn;
    i.pid = getpid();
    std::snprintf(i.arena, sizeof(i.arena), "%s", path_.c_str());
    static_assert(sizeof(i.ipc) == sizeof(ipc_));
    std::memcpy(i.ipc, ipc_, sizeof(ipc_));
    return i;
  }

  void modify_to_init(std::uint32_t qpn, std::uint32_t access) override {
    std::lock_guard lk(mu_);
    QpCtx& q = ctx(qpn);
    expect_state(q, QpState::kReset, "modify_to_init", "INIT");
    q.access = access;
    push(&q.access, sizeof(q.access));
    set_state(q, QpState::kInit);
  }

  void modify_to_rtr(std::uint32_t qpn, const QpConnect& c) override {
    std::lock_guard lk(mu_);
    QpCtx& q = ctx(qpn);
    if (q.peer_qpn != 0)
      throw Error("modify_to_rtr: QP " + hex(qpn) + " is already connected to QP " +
                  hex(q.peer_qpn) + "; an RC QP connects once: create a new QP");
    expect_state(q, QpState::kInit, "modify_to_rtr", "RTR");
    q.peer_base = peer_base_for(qpn, c.remote);
    q.peer_qpn = c.remote.qpn;
    q.peer_pid = c.remote.pid;
    std::snprintf(q.peer_arena, sizeof(q.peer_arena), "%s", c.remote.arena);
    q.min_rnr_timer = c.min_rnr_timer;
    push(&q, sizeof(q));  // the engine does not touch a QP in INIT
    set_state(q, QpState::kRtr);
  }

  void modify_to_rts(std::uint32_t qpn, std::uint8_t rnr_retry) override {
    std::lock_guard lk(mu_);
    QpCtx& q = ctx(qpn);
    expect_state(q, QpState::kRtr, "modify_to_rts", "RTS");
    q.rnr_retry = rnr_retry;
    push(&q.rnr_retry, sizeof(q.rnr_retry));
    set_state(q, QpState::kRts);
  }

  void modify_to_error(std::uint32_t qpn) override {
    std::lock_guard lk(mu_);
    set_state(ctx(qpn), QpState::kError);
  }

  ib::QpHandle qp_handle(std::uint32_t qpn) const override {
    const QpCtx& q = ctx(qpn);
    ib::QpHandle h;
    h.qpn = qpn;
    h.sq = arena_.at<std::byte>(q.sq_off);
    h.rq = arena_.at<std::byte>(q.rq_off);
    h.dbrec = arena_.at<m5::QpDbrec>(q.dbrec_off);
    h.doorbell = arena_.at<std::uint64_t>(q.doorbell_off);
    h.state = static_cast<ib::QpState*>(qp_state_[qpn - soft::kQpnBase]);
    h.abort = engine_ptr(tab_.hdr()->abort);
    h.sq_bbs = q.sq_bbs;
    h.rq_wqes = q.rq_wqes;
    h.rq_stride_shift = q.rq_stride_shift;
    h.max_recv_sge = q.max_recv_sge;
    h.max_send_sge = q.max_send_sge;
    h.max_inline = q.max_inline;
    // Our engine reads the send queue; the peer's engine takes our receive WQEs (until the QP
    // is connected, assume it sits elsewhere).
    const bool gpu = on_gpu();
    h.executor = gpu ? sync::Scope::kGpu : sync::Scope::kSystem;
    h.rq_executor = gpu && q.peer_base == reinterpret_cast<std::uintptr_t>(arena_.base)
                        ? sync::Scope::kGpu
                        : sync::Scope::kSystem;
    h.record_polled = 1;  // both engines execute what the record covers (Hca::serve)
    return h;
  }

  // ---- asynchronous events, abort, quiescence ----
  std::optional<AsyncEvent> poll_async_event() override {
    std::lock_guard lk(events_mu_);  // the read cursor is shared by the host's threads
    if (!engine_events_.empty()) {
      AsyncEvent e = std::move(engine_events_.front());
      engine_events_.pop_front();
      return e;
    }
    ArenaHeader* h = tab_.hdr();
    const std::uint64_t head = pull(h->events_head);
    if (events_read_ >= head) return std::nullopt;
    if (head - events_read_ > soft::kAsyncEventSlots) {
      const std::uint64_t lost = head - events_read_ - soft::kAsyncEventSlots;
      events_read_ += lost;
      return AsyncEvent{AsyncEvent::Type::kQpFatal, 0,
                        std::to_string(lost) + " asynchronous events were lost (ring of " +
                            std::to_string(soft::kAsyncEventSlots) + "); poll more often"};
    }
    soft::AsyncEvent& slot = h->events[events_read_ % soft::kAsyncEventSlots];
    const soft::AsyncEventType type = pull(slot.type);
    if (static_cast<std::uint32_t>(type) == 0) return std::nullopt;  // being written
    const soft::AsyncEvent e = pull(slot);  // written before its type
    ++events_read_;
    const std::uint32_t n = e.number;
    if (type == soft::AsyncEventType::kCqOverrun)
      return AsyncEvent{AsyncEvent::Type::kCqOverrun, n,
                        "CQ " + std::to_string(n) + " overran at CQE " + std::to_string(e.detail) +
                            ": a completion was lost, the CQ and its QPs are in error; poll it "
                            "more often or create it deeper"};
    return AsyncEvent{AsyncEvent::Type::kQpFatal, n,
                      "QP " + hex(n) + " rang a doorbell (" + hex(e.detail) +
                          ") that does not name it; the QP is in error"};
  }

  void abort() override {
    std::uint32_t* a = &tab_.hdr()->abort;
    sync::store_release(a, std::uint32_t{1});
    push(a, sizeof(*a));
  }

  void quiesce() override {
#if GPUVERBS_HAVE_CUDA
    if (!on_gpu()) return;
    std::lock_guard lk(mu_);
    if (engine_failed_) throw Error("Device::quiesce: the GPU engine failed (AsyncEvent kEngineFailed); close the device");
    if (!engine_running_) throw Error("Device::quiesce: the GPU engine is already stopped; call resume() first");
    const cudaError_t e = stop_gpu_engine_nothrow();
    cuda_check(e, "Device::quiesce: the GPU engine ended with an error");
#endif
  }

  void resume() override {
#if GPUVERBS_HAVE_CUDA
    if (!on_gpu()) return;
    std::lock_guard lk(mu_);
    if (engine_failed_) throw Error("Device::resume: the GPU engine failed (AsyncEvent kEngineFailed); close the device");
    if (engine_running_) throw Error("Device::resume: the GPU engine is running; quiesce() first");
    start_gpu_engine(true);
#endif
  }

 private:
  bool on_gpu() const { return gpu_ >= 0; }

  /// Where the engine sees a field of the host's table view.
  template <class T>
  T* engine_ptr(T& tab_field) const {
    return reinterpret_cast<T*>(arena_.base + (reinterpret_cast<std::byte*>(&tab_field) - tab_.base));
  }

  void open_host_arena(const DeviceOptions& opt, std::size_t size) {
    fd_ = memfd_create("gpuverbs-soft-arena", MFD_CLOEXEC);
    if (fd_ < 0) throw Error(errno_text("Device::open(soft): memfd_create"));
    if (ftruncate(fd_, static_cast<off_t>(size)) != 0) {
      ::close(fd_);
      throw Error(errno_text("Device::open(soft): ftruncate"));
    }
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) {
      ::close(fd_);
      throw Error(errno_text("Device::open(soft): mmap"));
    }
    arena_ = tab_ = Arena{static_cast<std::byte*>(p)};
    size_ = size;
    path_ = "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(fd_);
    if (opt.map_to_gpus) {
      try {
        map_to_gpus();
      } catch (...) {
        munmap(arena_.base, size_);
        ::close(fd_);
        throw;
      }
    }
  }

  /// Pin the arena and map it into every GPU at its host addresses (UVA), so the handles'
  /// pointers are valid in kernels too.
  void map_to_gpus() {
#if GPUVERBS_HAVE_CUDA
    require_gpus("Device::open(soft): map_to_gpus");
    cuda_check(cudaHostRegister(arena_.base, size_, cudaHostRegisterMapped | cudaHostRegisterPortable),
               "Device::open(soft): cudaHostRegister of the arena");
    gpu_mapped_ = true;
    void* dptr = nullptr;
    const cudaError_t e = cudaHostGetDevicePointer(&dptr, arena_.base, 0);
    if (e != cudaSuccess || dptr != arena_.base)
      throw Error("Device::open(soft): this GPU cannot use host pointers of registered memory "
                  "(no unified addressing); kernels could not use the handles");
#else
    throw Error("Device::open(soft): map_to_gpus needs gpuverbs built with CUDA (nvcc was not found)");
#endif
  }

  void open_gpu_arena(const DeviceOptions& opt, std::size_t size) {
    if (opt.engine_warps < 1 || opt.engine_warps > soft::kMaxEngineWarps)
      throw Error("Device::open(soft): engine_warps " + std::to_string(opt.engine_warps) +
                  " is invalid: must be 1.." + std::to_string(soft::kMaxEngineWarps));
#if GPUVERBS_HAVE_CUDA
    const int n = require_gpus("Device::open(soft): the GPU engine");
    if (opt.gpu < 0 || opt.gpu >= n)
      throw Error("Device::open(soft): gpu " + std::to_string(opt.gpu) + " does not exist: this machine has " +
                  std::to_string(n) + " GPU(s), 0.." + std::to_string(n - 1));
    DeviceGuard g(opt.gpu);
    if (lazy_module_loading())
      throw Error("Device::open(soft): the GPU engine cannot run with lazy CUDA module loading "
                  "(CUDA_MODULE_LOADING=LAZY): the first launch of any kernel would wait for the "
                  "resident engine forever. Set CUDA_MODULE_LOADING=EAGER before the process starts "
                  "CUDA (gpuverbs asks for it unless the variable is already set)");
    void* p = nullptr;
    cuda_check(cudaMalloc(&p, size), "Device::open(soft): cannot allocate the GPU engine's arena of " +
                                         std::to_string(size) + " bytes on GPU " + std::to_string(opt.gpu));
    gpu_ = opt.gpu;
    warps_ = opt.engine_warps;
    arena_ = Arena{static_cast<std::byte*>(p)};
    size_ = size;
    shadow_.assign(soft::ArenaLayout::kHeap, std::byte{0});  // header and tables
    tab_ = Arena{shadow_.data()};
    try {
      cuda_check(cudaStreamCreateWithFlags(&ctl_, cudaStreamNonBlocking), "Device::open(soft): control stream");
      cuda_check(cudaStreamCreateWithFlags(&engine_stream_, cudaStreamNonBlocking), "Device::open(soft): engine stream");
      clear_by_copies(p, size, ctl_, "Device::open(soft): clearing the arena");
      cuda_check(cudaHostAlloc(&beacon_, sizeof(EngineBeacon), cudaHostAllocMapped | cudaHostAllocPortable),
                 "Device::open(soft): the GPU engine's beacon (pinned host memory)");
      cudaIpcMemHandle_t h{};
      if (cudaIpcGetMemHandle(&h, p) == cudaSuccess) {
        static_assert(sizeof(h) == sizeof(ipc_));
        std::memcpy(ipc_, &h, sizeof(h));
      } else {
        (void)cudaGetLastError();  // other processes cannot connect; said at their connect
      }
    } catch (...) {
      close_gpu_arena();
      throw;
    }
    char name[64];
    std::snprintf(name, sizeof(name), "%s%d:%d:%p", kGpuArenaPrefix, getpid(), gpu_, p);
    path_ = name;
    std::lock_guard lk(g_gpu_arenas_mu);
    g_gpu_arenas[path_] = GpuArenaRef{arena_.base, gpu_};
#else
    (void)opt, (void)size;
    throw Error("Device::open(soft): the GPU engine needs gpuverbs built with CUDA (nvcc was not found)");
#endif
  }

#if GPUVERBS_HAVE_CUDA
  /// What open_gpu_arena() acquired, freed on GPU `gpu` (after the engine has ended).
  static void free_gpu_arena(int gpu, std::byte* base, cudaStream_t ctl, cudaStream_t es,
                             EngineBeacon* beacon) {
    DeviceGuard g(gpu, false);
    if (ctl) (void)cudaStreamDestroy(ctl);
    if (es) (void)cudaStreamDestroy(es);
    if (beacon) (void)cudaFreeHost(beacon);
    (void)cudaFree(base);
  }

  void close_gpu_arena() {
    {
      std::lock_guard lk(g_gpu_arenas_mu);
      g_gpu_arenas.erase(path_);
    }
    {
      DeviceGuard g(gpu_, false);
      for (auto& [name, base] : ipc_peers_) (void)cudaIpcCloseMemHandle(base);
    }
    free_gpu_arena(gpu_, arena_.base, ctl_, engine_stream_, beacon_);
  }

  /// After a failed start: the engine's launch may still be queued behind other kernels, and
  /// its arena must outlive it. A detached thread frees everything once the launch has run
  /// (it sees the beacon's stop and exits at once).
  void abandon_gpu_arena() {
    {
      std::lock_guard lk(g_gpu_arenas_mu);
      g_gpu_arenas.erase(path_);
    }
    std::thread([gpu = gpu_, base = arena_.base, ctl = ctl_, es = engine_stream_, beacon = beacon_,
                 launch = launch_] {
      if (launch) launch->wait_made();
      {
        DeviceGuard g(gpu, false);
        (void)cudaStreamSynchronize(es);
      }
      free_gpu_arena(gpu, base, ctl, es, beacon);
    }).detach();
  }

  /// Launches the engine and waits for its heartbeat; open() and resume() (`resuming`).
  void start_gpu_engine(bool resuming) {
    const std::string who = resuming ? "Device::resume" : "Device::open(soft)";
    // A launch abandoned by an earlier failed start may still wait for an SM: a second
    // engine must not join it (and a copy now would wait behind it).
    if (launch_ && !launch_->ran(engine_stream_))
      throw Error(who + ": the GPU engine's previous start is still waiting for an SM on GPU " + std::to_string(gpu_) +
                  ": kernels running there occupy it; call resume() again once they have ended");
    ArenaHeader* h = tab_.hdr();
    for (auto& e : h->epoch) e = 0;
    push(h->epoch, sizeof(h->epoch));
    sync::store_relaxed(&beacon_->started, std::uint32_t{0});
    sync::store_release(&beacon_->stop, std::uint32_t{0});
    // Launched from a thread of its own: on a GPU full of other kernels the launch itself can
    // block (the driver grows the local-memory pool for the engine's stack, which waits for
    // the running kernels), and open() must still report within 5 s.
    launch_ = std::make_shared<EngineLaunch>();
    std::thread([l = launch_, gpu = gpu_, es = engine_stream_, arena = arena_, warps = warps_, beacon = beacon_] {
      DeviceGuard g(gpu, false);
      l->made(launch_gpu_engine(es, arena, getpid(), warps, beacon));
    }).detach();
    // The engine must be resident before anyone relies on it: a GPU full of long-running
    // kernels would otherwise leave every post unanswered without a word. Its start is read
    // from the beacon in mapped host memory, never with a copy: while the launch waits for an
    // SM, copies on our other streams wait behind it (measured on H100 and H200).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (sync::load_acquire(&beacon_->started) == 0) {
      // (an error is known only once the launch was made)
      cuda_check(launch_->error(), who + ": launching the GPU engine");
      if (std::chrono::steady_clock::now() > deadline) {
        sync::store_release(&beacon_->stop, std::uint32_t{1});
        throw Error(who + ": the GPU engine did not start within 5 s on GPU " + std::to_string(gpu_) +
                    ": kernels already running there occupy it (the engine needs " + std::to_string(warps_) +
                    " warps, in blocks of up to 8, for the device's lifetime); " +
                    (resuming ? "call resume() again once they have ended"
                              : "open the device before launching long-running kernels"));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    engine_running_ = true;
  }

  cudaError_t stop_gpu_engine_nothrow() {
    sync::store_release(&beacon_->stop, std::uint32_t{1});
    engine_running_ = false;
    DeviceGuard g(gpu_, false);
    return cudaStreamSynchronize(engine_stream_);
  }

  /// Reports an engine that ended or stopped advancing, and raises abort so that every
  /// device-side wait of this device ends.
  void watchdog_loop() {
    using clock = std::chrono::steady_clock;
    (void)cudaSetDevice(gpu_);
    std::uint64_t last = 0;
    auto last_change = clock::now();
    bool reported = false;
    std::unique_lock lk(wd_mu_);
    while (!wd_cv_.wait_for(lk, std::chrono::milliseconds(100), [this] { return wd_stop_; })) {
      std::unique_lock plk(mu_, std::try_to_lock);
      if (!plk.owns_lock() || !engine_running_ || reported) {
        last_change = clock::now();
        continue;
      }
      const cudaError_t e = cudaStreamQuery(engine_stream_);
      std::string why;
      if (e != cudaErrorNotReady) {
        (void)cudaGetLastError();
        why = std::string("the GPU engine on GPU ") + std::to_string(gpu_) + " ended unexpectedly (" +
              (e == cudaSuccess ? "no error" : cuda_error_text(e)) +
              "); the device's queues are dead: close it";
      } else {
        std::uint64_t now = last;
        try {
          now = pull(tab_.hdr()->epoch[0]);
        } catch (const Error&) {
        }
        if (now != last) {
          last = now;
          last_change = clock::now();
        } else if (clock::now() - last_change > std::chrono::seconds(2)) {
          why = "the GPU engine on GPU " + std::to_string(gpu_) +
                " has not advanced for 2 s: it is not being scheduled (a debugger, or a process "
                "holding the GPU exclusively); its queues are stalled";
        }
      }
      if (!why.empty()) {
        reported = true;
        engine_failed_ = true;
        if (e != cudaErrorNotReady) engine_running_ = false;  // ended: nothing left to stop or wait for
        plk.unlock();
        {
          std::lock_guard elk(events_mu_);
          engine_events_.push_back(AsyncEvent{AsyncEvent::Type::kEngineFailed, 0, why});
        }
        try {
          abort();
        } catch (const Error&) {
        }
      }
    }
  }

#endif

  /// Publish [p, p + n) of the host's table view to the engine's (GPU engine only).
  void push(const void* p, std::size_t n) {
#if GPUVERBS_HAVE_CUDA
    if (!on_gpu()) return;
    std::byte* dst = engine_ptr(*static_cast<std::byte*>(const_cast<void*>(p)));
    cuda_check(cudaMemcpyAsync(dst, p, n, cudaMemcpyHostToDevice, ctl_), "soft GPU engine: table update");
    cuda_check(cudaStreamSynchronize(ctl_), "soft GPU engine: table update");
#else
    (void)p, (void)n;
#endif
  }

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

  /// The engine's current value of a table field (the field itself for the CPU engine).
  template <class T>
  T pull(const T& field) const {
#if GPUVERBS_HAVE_CUDA
    if (on_gpu()) {
      T v;
      cuda_check(cudaMemcpyAsync(&v, engine_ptr(const_cast<T&>(field)), sizeof(T), cudaMemcpyDeviceToHost, ctl_),
                 "soft GPU engine: reading its state");
      cuda_check(cudaStreamSynchronize(ctl_), "soft GPU engine: reading its state");
      return v;
    }
#endif
    if constexpr (sizeof(T) <= 8) {
      return sync::load_acquire(&field);
    } else {
      return field;
    }
  }

  /// Write or clear heap bytes (rings, doorbell records) where the engine reads them.
  void write_at(std::uint64_t off, const void* src, std::size_t n) {
#if GPUVERBS_HAVE_CUDA
    if (on_gpu()) {
      cuda_check(cudaMemcpyAsync(arena_.base + off, src, n, cudaMemcpyHostToDevice, ctl_), "soft GPU engine: ring setup");
      cuda_check(cudaStreamSynchronize(ctl_), "soft GPU engine: ring setup");
      return;
    }
#endif
    std::memcpy(arena_.base + off, src, n);
  }
  void zero_at(std::uint64_t off, std::size_t n) {
#if GPUVERBS_HAVE_CUDA
    if (on_gpu()) {
      clear_by_copies(arena_.base + off, n, ctl_, "soft GPU engine: ring setup");
      return;
    }
#endif
    std::memset(arena_.base + off, 0, n);
  }
  std::uint64_t heap_alloc_zeroed(const char* who, std::uint64_t bytes, std::uint64_t align = 64) {
    const std::uint64_t off = heap_alloc_or_throw(who, bytes, align);
    zero_at(off, bytes);
    return off;
  }

  void set_state(QpCtx& q, QpState s) {
    sync::store_release(&q.state, static_cast<std::uint32_t>(s));
    push(&q.state, sizeof(q.state));
  }

  /// After a QP left the table: true once every engine warp has finished a sweep, so none still
  /// uses the QP's rings (GPU engine; the CPU engine sweeps under mu_, which we hold). False,
  /// without waiting, for an engine the watchdog reported (it may never sweep again), and after
  /// 2 s without a sweep: the caller then keeps the rings allocated (a destructor cannot throw).
  bool engine_swept() noexcept {
#if GPUVERBS_HAVE_CUDA
    if (!on_gpu() || !engine_running_) return true;
    if (engine_failed_) return false;
    try {
      std::uint64_t seen[soft::kMaxEngineWarps];
      for (std::uint32_t w = 0; w < warps_; ++w) seen[w] = pull(tab_.hdr()->epoch[w]);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      for (std::uint32_t w = 0; w < warps_; ++w) {
        while (pull(tab_.hdr()->epoch[w]) == seen[w]) {
          if (std::chrono::steady_clock::now() > deadline) return false;
          std::this_thread::yield();
        }
      }
    } catch (...) {
      return false;  // the engine's state cannot be read (dead context)
    }
#endif
    return true;
  }

  /// GPU engine: the peer arena's address in this process (same arena, another device of this
  /// process, or another process's arena opened through CUDA IPC). CPU engine: 0 (mapped by path).
  std::uint64_t peer_base_for(std::uint32_t qpn, const QpInfo& r) {
    const bool remote_gpu = is_gpu_arena_name(r.arena);
    if (remote_gpu != on_gpu())
      throw Error("modify_to_rtr: QP " + hex(qpn) + " is served by the " + (on_gpu() ? "GPU" : "CPU") +
                  " engine and remote QP " + hex(r.qpn) + " by the " + (remote_gpu ? "GPU" : "CPU") +
                  " engine; connect QPs of devices opened with the same DeviceOptions::engine");
    if (!on_gpu()) return 0;
#if GPUVERBS_HAVE_CUDA
    if (path_ == r.arena) return reinterpret_cast<std::uintptr_t>(arena_.base);
    DeviceGuard g(gpu_);
    if (r.pid == getpid()) {
      GpuArenaRef ref{};
      {
        std::lock_guard lk(g_gpu_arenas_mu);
        auto it = g_gpu_arenas.find(r.arena);
        if (it == g_gpu_arenas.end())
          throw Error("modify_to_rtr: remote QP " + hex(r.qpn) + " belongs to a device that is closed");
        ref = it->second;
      }
      if (ref.gpu != gpu_) {
        int can = 0;
        cuda_check(cudaDeviceCanAccessPeer(&can, gpu_, ref.gpu), "modify_to_rtr: cudaDeviceCanAccessPeer");
        if (!can)
          throw Error("modify_to_rtr: GPU " + std::to_string(gpu_) + " cannot access GPU " +
                      std::to_string(ref.gpu) + "'s memory (no peer access): the GPU engines cannot connect");
        const cudaError_t e = cudaDeviceEnablePeerAccess(ref.gpu, 0);
        if (e != cudaErrorPeerAccessAlreadyEnabled) cuda_check(e, "modify_to_rtr: cudaDeviceEnablePeerAccess");
        (void)cudaGetLastError();
      }
      return reinterpret_cast<std::uintptr_t>(ref.base);
    }
    const std::string key(r.arena, strnlen(r.arena, sizeof(r.arena)));
    auto it = ipc_peers_.find(key);
    if (it != ipc_peers_.end()) return reinterpret_cast<std::uintptr_t>(it->second);
    cudaIpcMemHandle_t h;
    std::memcpy(&h, r.ipc, sizeof(h));
    void* p = nullptr;
    cuda_check(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess),
               "modify_to_rtr: opening remote QP " + hex(r.qpn) + "'s arena (process " +
                   std::to_string(r.pid) + ") through CUDA IPC");
    ipc_peers_[key] = p;
    return reinterpret_cast<std::uintptr_t>(p);
#else
    return 0;
#endif
  }

  std::uint64_t arena_offset(const void* p) const {
    const auto* b = static_cast<const std::byte*>(p);
    return (b >= arena_.base + soft::ArenaLayout::kHeap && b < arena_.base + size_)
               ? static_cast<std::uint64_t>(b - arena_.base)
               : 0;
  }

  /// Poster/poller counters (QpState, CqState) live where their users run: GPU memory for a
  /// GPU-mapped device (kernels use the handles; GPU atomics on host memory are not
  /// guaranteed over PCIe), the arena otherwise. The engine never touches them.
  void* alloc_counters(const char* who, std::size_t bytes) {
#if GPUVERBS_HAVE_CUDA
    if (gpu_mapped_) {
      void* p = nullptr;
      if (cudaMalloc(&p, bytes) != cudaSuccess || cudaMemset(p, 0, bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        throw Error(std::string(who) + ": cannot allocate queue counters in GPU memory");
      }
      return p;
    }
#endif
    void* p = arena_.at<void>(heap_alloc_or_throw(who, bytes, 64));
    std::memset(p, 0, bytes);
    return p;
  }

  void free_counters(void* p) {
#if GPUVERBS_HAVE_CUDA
    if (gpu_mapped_) {
      (void)cudaFree(p);
      return;
    }
#endif
    heap_.release(arena_offset(p));
  }

  /// Memory outside the arena that an MR may cover: what this provider's engine can reach.
  /// The CPU engine: host memory (loads and stores) and memory of any GPU (CUDA copies).
  /// The GPU engine: memory of its GPU, of a GPU it can reach as a peer, and host memory
  /// pinned and mapped for the GPUs. Returns the GPU holding `addr` if the CPU engine must
  /// move its bytes with CUDA copies, else -1.
  int check_reachable(const void* addr) const {
#if GPUVERBS_HAVE_CUDA
    cudaPointerAttributes at{};
    const cudaError_t e = cudaPointerGetAttributes(&at, addr);
    (void)cudaGetLastError();
    const bool cuda_known = e == cudaSuccess;
    if (!on_gpu()) return cuda_known && at.type == cudaMemoryTypeDevice ? at.device : -1;
    if (!cuda_known || at.type == cudaMemoryTypeUnregistered)
      throw Error("reg_mr: the GPU engine cannot reach pageable host memory at " +
                  hex(reinterpret_cast<std::uintptr_t>(addr)) +
                  "; use Device::alloc, cudaMalloc, or pin it with cudaHostRegister(..., cudaHostRegisterMapped)");
    if (at.type == cudaMemoryTypeHost && at.devicePointer != addr)
      throw Error("reg_mr: pinned host memory at " + hex(reinterpret_cast<std::uintptr_t>(addr)) +
                  " is not mapped at the same address on the GPU; register it with cudaHostRegisterMapped");
    if (at.type == cudaMemoryTypeDevice && at.device != gpu_) {
      int can = 0;
      (void)cudaDeviceCanAccessPeer(&can, gpu_, at.device);
      if (!can)
        throw Error("reg_mr: memory of GPU " + std::to_string(at.device) + " is not reachable from GPU " +
                    std::to_string(gpu_) + " (no peer access)");
      DeviceGuard g(gpu_);
      const cudaError_t pe = cudaDeviceEnablePeerAccess(at.device, 0);
      if (pe != cudaErrorPeerAccessAlreadyEnabled) cuda_check(pe, "reg_mr: cudaDeviceEnablePeerAccess");
      (void)cudaGetLastError();
    }
#else
    (void)addr;
#endif
    return -1;
  }

  /// Drop the GPU range of MR slot `slot` (CPU engine) from the process's registry.
  void forget_gpu_mr(std::uint32_t slot) {
#if GPUVERBS_HAVE_CUDA
    if (!gpu_mr_[slot]) return;
    gpu_mr_[slot] = false;
    const MrEntry& e = tab_.mrs()[slot];
    g_gpu_ranges.remove(e.addr, e.length);
#else
    (void)slot;
#endif
  }

  std::uint64_t heap_alloc_or_throw(const char* who, std::uint64_t bytes, std::uint64_t align) {
    const std::uint64_t off = heap_.alloc(bytes, align);
    if (off == 0)
      throw Error(std::string(who) + ": the soft device's arena is full; open the device with "
                  "larger DeviceOptions::arena_bytes");
    return off;
  }

  QpCtx& ctx(std::uint32_t qpn) const { return tab_.qps()[qpn - soft::kQpnBase]; }

  void expect_state(const QpCtx& q, QpState want, const char* who, const char* target) const {
    const auto have = static_cast<QpState>(pull(q.state));
    if (have != want)
      throw Error(std::string(who) + ": QP " + hex(q.qpn) + " is in " + to_string(have) + "; " +
                  target + " needs " + to_string(want));
  }

  void engine_loop() {
    CpuEnv env(arena_, path_, [this](std::uint32_t qpn, std::string why) {
      std::lock_guard elk(events_mu_);
      engine_events_.push_back(AsyncEvent{AsyncEvent::Type::kCopyFailed, qpn, std::move(why)});
    });
    std::uint32_t idle = 0;
    while (!stop_.load(std::memory_order_relaxed)) {
      bool any = false;
      {
        std::lock_guard lk(mu_);
        const std::uint32_t n = qp_high_.load();
        for (std::uint32_t i = 0; i < n; ++i) {
          QpCtx& q = arena_.qps()[i];
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

  std::string name_;
  int fd_ = -1;
  Arena arena_;  ///< the engine's view: every pointer handed out points here
  Arena tab_;    ///< the host's view of header and tables (== arena_ for the CPU engine)
  std::vector<std::byte> shadow_;  ///< GPU engine: storage of tab_
  std::size_t size_ = 0;
  std::string path_;
  unsigned char ipc_[64] = {};
  Heap heap_;
  std::vector<std::uint8_t> mr_tags_;
  std::vector<bool> gpu_mr_ = std::vector<bool>(kMaxMrs, false);  ///< CPU engine: slot covers GPU memory
  void* cq_state_[kMaxCqs] = {};
  void* qp_state_[kMaxQps] = {};
  std::uint32_t last_pdn_ = 0;
  std::mutex events_mu_;
  std::uint64_t events_read_ = 0;
  std::deque<AsyncEvent> engine_events_;  ///< raised by the watchdog or the CPU engine's copies
  bool gpu_mapped_ = false;
  int gpu_ = -1;  ///< GPU engine: its GPU; -1 for the CPU engine
  std::uint32_t warps_ = 0;
#if GPUVERBS_HAVE_CUDA
  cudaStream_t ctl_ = nullptr, engine_stream_ = nullptr;
  EngineBeacon* beacon_ = nullptr;  ///< pinned, mapped: the engine's start and the host's stop
  std::shared_ptr<EngineLaunch> launch_;  ///< the engine's last launch (shared with its thread)
  std::map<std::string, void*> ipc_peers_;
#endif
  bool engine_running_ = false;
  bool engine_failed_ = false;  ///< the watchdog reported kEngineFailed (under mu_)
  std::atomic<std::uint32_t> qp_high_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;  ///< guards tables and heap; the CPU engine holds it for each sweep
  std::thread engine_;
  std::thread watchdog_;
  std::mutex wd_mu_;
  std::condition_variable wd_cv_;
  bool wd_stop_ = false;
};

}  // namespace

std::unique_ptr<Provider> open_soft_provider(const DeviceOptions& opt) {
  return std::make_unique<SoftProvider>(opt);
}

}  // namespace gv::detail
