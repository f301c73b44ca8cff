// The software HCA provider: an arena in a memfd (mappable by peers in other processes via
// /proc/<pid>/fd/<fd>), its tables, and the CPU engine thread that executes WQEs with the
// semantics of soft/hca.hpp.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "../soft/hca.hpp"
#include "provider.hpp"

#if GPUVERBS_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace gv::detail {
namespace {

using soft::Arena;
using soft::ArenaHeader;
using soft::CqCtx;
using soft::MrEntry;
using soft::QpCtx;
namespace m5 = ib::mlx5;


constexpr std::uint32_t kMaxMrs = 4096;
constexpr std::uint32_t kMaxQps = 1024;
constexpr std::uint32_t kMaxCqs = 1024;

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
  if (m.base && reinterpret_cast<ArenaHeader*>(m.base)->magic != soft::kArenaMagic) {
    munmap(m.base, m.size);
    return {};
  }
  return m;
}

/// The CPU engine's environment for soft::Hca: host memory, peers mapped on first use.
class CpuEnv {
 public:
  CpuEnv(Arena own, std::string own_path) : own_(own), path_(std::move(own_path)), pid_(getpid()) {}
  ~CpuEnv() {
    for (auto& [path, p] : peers_) munmap(p.arena.base, p.size);
  }
  CpuEnv(const CpuEnv&) = delete;
  CpuEnv& operator=(const CpuEnv&) = delete;

  const Arena& own() const { return own_; }
  std::int32_t self_pid() const { return pid_; }
  std::uint64_t now_ns() const { return sync::now_ns(); }

  const Arena* peer(const QpCtx& q) {
    if (std::strncmp(q.peer_arena, path_.c_str(), soft::kMaxPathLen) == 0) return &own_;
    const std::string key(q.peer_arena, strnlen(q.peer_arena, soft::kMaxPathLen));
    auto it = peers_.find(key);
    if (it != peers_.end()) return &it->second.arena;
    const Mapping m = map_arena_path(key.c_str());
    if (m.base == nullptr) return nullptr;  // peer gone: the requester sees retry-exceeded
    return &(peers_[key] = MappedPeer{Arena{m.base}, m.size}).arena;
  }

  /// Host data mover. With `publish`, the last byte is stored last with release semantics:
  /// a receiver polling it sees the whole message, as with an HCA's in-order PCIe writes.
  void copy(void* d, const void* s, std::uint64_t n, bool publish) {
    if (!publish) {
      std::memcpy(d, s, n);
      return;
    }
    std::memcpy(d, s, n - 1);
    std::uint8_t last;
    std::memcpy(&last, static_cast<const std::uint8_t*>(s) + n - 1, 1);
    sync::store_release(static_cast<std::uint8_t*>(d) + n - 1, last);
  }

 private:
  Arena own_;
  std::string path_;
  std::int32_t pid_;
  struct MappedPeer {
    Arena arena;
    std::size_t size;
  };
  std::unordered_map<std::string, MappedPeer> peers_;  ///< peer arenas mapped on first use
};

class SoftProvider final : public Provider {
 public:
  explicit SoftProvider(const DeviceOptions& opt) : name_("soft") {
    const std::size_t size = opt.arena_bytes;
    if (size < (std::size_t{8} << 20))
      throw Error("Device::open(soft): arena_bytes " + std::to_string(size) +
                  " is too small: use at least 8 MiB");
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
    arena_ = Arena{static_cast<std::byte*>(p)};
    size_ = size;
    path_ = "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(fd_);

    ArenaHeader* h = arena_.hdr();
    h->magic = soft::kArenaMagic;
    h->version = soft::kArenaVersion;
    h->pid = getpid();
    h->size = size;
    h->max_mrs = kMaxMrs;
    h->max_qps = kMaxQps;
    h->max_cqs = kMaxCqs;
    std::uint64_t off = (sizeof(ArenaHeader) + 63) & ~std::uint64_t{63};
    h->mr_table_off = off;
    off += sizeof(MrEntry) * kMaxMrs;
    h->qp_table_off = off = (off + 63) & ~std::uint64_t{63};
    off += sizeof(QpCtx) * kMaxQps;
    h->cq_table_off = off = (off + 63) & ~std::uint64_t{63};
    off += sizeof(CqCtx) * kMaxCqs;
    h->heap_off = off = (off + 4095) & ~std::uint64_t{4095};
    heap_.init(off, size);
    mr_tags_.assign(kMaxMrs, 0);
    if (opt.map_to_gpus) {
      try {
        map_to_gpus();
      } catch (...) {
        munmap(arena_.base, size_);
        ::close(fd_);
        throw;
      }
    }
    engine_ = std::thread([this] { engine_loop(); });
  }

  ~SoftProvider() override {
    stop_.store(true);
    engine_.join();
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
      const MrEntry& e = arena_.mrs()[i];
      if (e.key != 0 && e.in_arena && e.arena_off < off + len && off < e.arena_off + e.length)
        throw Error("Device::free: memory at " + hex(reinterpret_cast<std::uintptr_t>(p)) +
                    " is still registered (MR key " + hex(e.key) + "); deregister it first");
    }
    heap_.release(off);
  }

  /// Pin the arena and map it into every GPU at its host addresses (UVA), so the handles'
  /// pointers are valid in kernels too.
  void map_to_gpus() {
#if GPUVERBS_HAVE_CUDA
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
      (void)cudaGetLastError();
      throw Error(std::string("Device::open(soft): map_to_gpus needs a GPU; the CUDA runtime says: ") +
                  (e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device"));
    }
    e = cudaHostRegister(arena_.base, size_, cudaHostRegisterMapped | cudaHostRegisterPortable);
    if (e != cudaSuccess)
      throw Error(std::string("Device::open(soft): cudaHostRegister of the arena failed: ") + cudaGetErrorString(e));
    gpu_mapped_ = true;
    void* dptr = nullptr;
    e = cudaHostGetDevicePointer(&dptr, arena_.base, 0);
    if (e != cudaSuccess || dptr != arena_.base)
      throw Error("Device::open(soft): this GPU cannot use host pointers of registered memory "
                  "(no unified addressing); kernels could not use the handles");
#else
    throw Error("Device::open(soft): map_to_gpus needs gpuverbs built with CUDA (nvcc was not found)");
#endif
  }

  // ---- protection domains and memory regions ----
  std::uint32_t alloc_pd() override {
    std::lock_guard lk(mu_);
    return ++last_pdn_;
  }
  void dealloc_pd(std::uint32_t) override {}

  std::uint32_t reg_mr(std::uint32_t pdn, void* addr, std::size_t len,
                       std::uint32_t access) override {
    reject_gpu_memory(addr);
    std::lock_guard lk(mu_);
    const auto a = reinterpret_cast<std::uintptr_t>(addr);
    const std::uint64_t off = arena_offset(addr);
    const bool in_arena = off != 0;
    if (in_arena && !heap_.inside_live(off, len))
      throw Error("reg_mr: [" + hex(a) + ", +" + std::to_string(len) +
                  ") lies in the device's memory but not inside one live Device::alloc "
                  "allocation (freed, or past its end)");
    std::uint32_t slot = 0;
    while (slot < kMaxMrs && arena_.mrs()[slot].key != 0) ++slot;
    if (slot == kMaxMrs)
      throw Error("reg_mr: all " + std::to_string(kMaxMrs) +
                  " memory-region slots are in use; deregister some first");
    mr_tags_[slot] = static_cast<std::uint8_t>(mr_tags_[slot] % 255 + 1);  // 1..255, never 0
    MrEntry& e = arena_.mrs()[slot];
    e.access = access;
    e.pdn = pdn;
    e.in_arena = in_arena ? 1 : 0;
    e.addr = a;
    e.length = len;
    e.arena_off = off;
    const std::uint32_t key = (slot << 8) | mr_tags_[slot];
    sync::store_release(&e.key, key);
    return key;
  }

  void dereg_mr(std::uint32_t key) override {
    std::lock_guard lk(mu_);
    sync::store_release(&arena_.mrs()[soft::mr_slot(key)].key, std::uint32_t{0});
  }

  // ---- completion queues ----
  CqDesc create_cq(std::uint32_t entries) override {
    std::lock_guard lk(mu_);
    std::uint32_t slot = 0;
    while (slot < kMaxCqs && arena_.cqs()[slot].cqn != 0) ++slot;
    if (slot == kMaxCqs) throw Error("create_cq: all " + std::to_string(kMaxCqs) + " CQ slots are in use");
    const std::uint64_t ring = heap_alloc_or_throw("create_cq", std::uint64_t{entries} * m5::kCqeSize, 4096);
    const std::uint64_t dbrec = heap_alloc_or_throw("create_cq", 64, 64);
    auto* cqes = arena_.at<m5::Cqe>(ring);
    for (std::uint32_t i = 0; i < entries; ++i) {
      std::memset(&cqes[i], 0, sizeof(m5::Cqe));
      cqes[i].op_own = static_cast<std::uint8_t>(m5::kCqeInvalid << 4);
    }
    std::memset(arena_.at<void>(dbrec), 0, 64);
    CqCtx& c = arena_.cqs()[slot];
    c.log_cqes = ib::log2_pow2(entries);
    c.ring_off = ring;
    c.dbrec_off = dbrec;
    c.produced = 0;
    c.error = 0;
    cq_state_[slot] = alloc_counters("create_cq", sizeof(ib::CqState));
    sync::store_release(&c.cqn, slot + 1);
    return CqDesc{slot + 1, entries};
  }

  void destroy_cq(std::uint32_t cqn) override {
    std::lock_guard lk(mu_);
    CqCtx& c = arena_.cqs()[cqn - 1];
    heap_.release(c.ring_off);
    heap_.release(c.dbrec_off);
    free_counters(cq_state_[cqn - 1]);
    sync::store_release(&c.cqn, std::uint32_t{0});
  }

  ib::CqHandle cq_handle(std::uint32_t cqn) const override {
    const CqCtx& c = arena_.cqs()[cqn - 1];
    ib::CqHandle h;
    h.cqn = cqn;
    h.ring = arena_.at<m5::Cqe>(c.ring_off);
    h.dbrec = arena_.at<m5::CqDbrec>(c.dbrec_off);
    h.state = static_cast<ib::CqState*>(cq_state_[cqn - 1]);
    h.abort = &arena_.hdr()->abort;
    h.error = &c.error;
    h.log_cqes = c.log_cqes;
    return h;
  }

  // ---- queue pairs ----
  std::uint32_t create_qp(const QpLayout& l) override {
    std::lock_guard lk(mu_);
    std::uint32_t slot = 0;
    while (slot < kMaxQps && arena_.qps()[slot].qpn != 0) ++slot;
    if (slot == kMaxQps) throw Error("create_qp: all " + std::to_string(kMaxQps) + " QP slots are in use");
    QpCtx& q = arena_.qps()[slot];
    std::memset(&q, 0, sizeof(q));
    q.sq_off = heap_alloc_or_throw("create_qp", std::uint64_t{l.sq_bbs} * m5::kSendWqeBB, 4096);
    q.rq_off = heap_alloc_or_throw("create_qp", std::uint64_t{l.rq_wqes} << l.rq_stride_shift, 4096);
    q.dbrec_off = heap_alloc_or_throw("create_qp", 64, 64);
    q.doorbell_off = heap_alloc_or_throw("create_qp", 64, 64);
    std::memset(arena_.at<void>(q.sq_off), 0, std::uint64_t{l.sq_bbs} * m5::kSendWqeBB);
    std::memset(arena_.at<void>(q.rq_off), 0, std::uint64_t{l.rq_wqes} << l.rq_stride_shift);
    std::memset(arena_.at<void>(q.dbrec_off), 0, 64);
    std::memset(arena_.at<void>(q.doorbell_off), 0, 64);
    qp_state_[slot] = alloc_counters("create_qp", sizeof(ib::QpState));
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
    const std::uint32_t qpn = soft::kQpnBase + slot;
    sync::store_release(&q.qpn, qpn);
    if (slot + 1 > qp_high_.load()) qp_high_.store(slot + 1);
    return qpn;
  }

  void destroy_qp(std::uint32_t qpn) override {
    std::lock_guard lk(mu_);
    QpCtx& q = ctx(qpn);
    sync::store_release(&q.qpn, std::uint32_t{0});
    heap_.release(q.sq_off);
    heap_.release(q.rq_off);
    heap_.release(q.dbrec_off);
    heap_.release(q.doorbell_off);
    free_counters(qp_state_[qpn - soft::kQpnBase]);
  }

  QpState qp_state(std::uint32_t qpn) const override {
    return static_cast<QpState>(sync::load_acquire(&ctx(qpn).state));
  }

  QpInfo qp_info(std::uint32_t qpn) const override {
    QpInfo i;
    i.qpn = qpn;
    i.pid = getpid();
    std::snprintf(i.arena, sizeof(i.arena), "%s", path_.c_str());
    return i;
  }

  void modify_to_init(std::uint32_t qpn, std::uint32_t access) override {
    std::lock_guard lk(mu_);
    QpCtx& q = ctx(qpn);
    expect_state(q, QpState::kReset, "modify_to_init", "INIT");
    q.access = access;
    sync::store_release(&q.state, static_cast<std::uint32_t>(QpState::kInit));
  }

  void modify_to_rtr(std::uint32_t qpn, const QpConnect& c) override {
    std::lock_guard lk(mu_);
    QpCtx& q = ctx(qpn);
    if (q.peer_qpn != 0)
      throw Error("modify_to_rtr: QP " + hex(qpn) + " is already connected to QP " +
                  hex(q.peer_qpn) + "; an RC QP connects once: create a new QP");
    expect_state(q, QpState::kInit, "modify_to_rtr", "RTR");
    q.peer_qpn = c.remote.qpn;
    q.peer_pid = c.remote.pid;
    std::snprintf(q.peer_arena, sizeof(q.peer_arena), "%s", c.remote.arena);
    q.min_rnr_timer = c.min_rnr_timer;
    sync::store_release(&q.state, static_cast<std::uint32_t>(QpState::kRtr));
  }

  void modify_to_rts(std::uint32_t qpn, std::uint8_t rnr_retry) override {
    std::lock_guard lk(mu_);
    QpCtx& q = ctx(qpn);
    expect_state(q, QpState::kRtr, "modify_to_rts", "RTS");
    q.rnr_retry = rnr_retry;
    sync::store_release(&q.state, static_cast<std::uint32_t>(QpState::kRts));
  }

  void modify_to_error(std::uint32_t qpn) override {
    std::lock_guard lk(mu_);
    soft::set_qp_error(ctx(qpn));
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
    h.abort = &arena_.hdr()->abort;
    h.sq_bbs = q.sq_bbs;
    h.rq_wqes = q.rq_wqes;
    h.rq_stride_shift = q.rq_stride_shift;
    h.max_recv_sge = q.max_recv_sge;
    h.max_send_sge = q.max_send_sge;
    h.max_inline = q.max_inline;
    return h;
  }

  // ---- asynchronous events and abort ----
  std::optional<AsyncEvent> poll_async_event() override {
    std::lock_guard lk(events_mu_);  // the read cursor is shared by the host's threads
    ArenaHeader* h = arena_.hdr();
    const std::uint64_t head = sync::load_acquire(&h->events_head);
    if (events_read_ >= head) return std::nullopt;
    if (head - events_read_ > soft::kAsyncEventSlots) {
      const std::uint64_t lost = head - events_read_ - soft::kAsyncEventSlots;
      events_read_ += lost;
      return AsyncEvent{AsyncEvent::Type::kQpFatal, 0,
                        std::to_string(lost) + " asynchronous events were lost (ring of " +
                            std::to_string(soft::kAsyncEventSlots) + "); poll more often"};
    }
    soft::AsyncEvent* e = &h->events[events_read_ % soft::kAsyncEventSlots];
    const auto type = static_cast<soft::AsyncEventType>(
        sync::load_acquire(reinterpret_cast<std::uint32_t*>(&e->type)));
    if (static_cast<std::uint32_t>(type) == 0) return std::nullopt;  // being written
    ++events_read_;
    const std::uint32_t n = e->number;
    if (type == soft::AsyncEventType::kCqOverrun)
      return AsyncEvent{AsyncEvent::Type::kCqOverrun, n,
                        "CQ " + std::to_string(n) + " overran at CQE " + std::to_string(e->detail) +
                            ": a completion was lost, the CQ and its QPs are in error; poll it "
                            "more often or create it deeper"};
    return AsyncEvent{AsyncEvent::Type::kQpFatal, n,
                      "QP " + hex(n) + " rang a doorbell (" + hex(e->detail) +
                          ") that does not name it; the QP is in error"};
  }

  void abort() override { sync::store_release(&arena_.hdr()->abort, std::uint32_t{1}); }

 private:
  std::uint64_t arena_offset(const void* p) const {
    const auto* b = static_cast<const std::byte*>(p);
    return (b >= arena_.base + arena_.hdr()->heap_off && b < arena_.base + size_)
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

  /// The CPU engine moves data with host loads and stores: GPU memory is not yet served.
  static void reject_gpu_memory(const void* addr) {
#if GPUVERBS_HAVE_CUDA
    cudaPointerAttributes at{};
    if (cudaPointerGetAttributes(&at, addr) == cudaSuccess && at.type == cudaMemoryTypeDevice)
      throw Error("reg_mr: the soft provider's CPU engine cannot reach GPU memory yet; register "
                  "host memory from Device::alloc (open the device with map_to_gpus for kernels)");
    (void)cudaGetLastError();
#else
    (void)addr;
#endif
  }

  std::uint64_t heap_alloc_or_throw(const char* who, std::uint64_t bytes, std::uint64_t align) {
    const std::uint64_t off = heap_.alloc(bytes, align);
    if (off == 0)
      throw Error(std::string(who) + ": the soft device's arena is full; open the device with "
                  "larger DeviceOptions::arena_bytes");
    return off;
  }

  QpCtx& ctx(std::uint32_t qpn) const { return arena_.qps()[qpn - soft::kQpnBase]; }

  static void expect_state(const QpCtx& q, QpState want, const char* who, const char* target) {
    const auto have = static_cast<QpState>(q.state);
    if (have != want)
      throw Error(std::string(who) + ": QP " + hex(q.qpn) + " is in " + to_string(have) + "; " +
                  target + " needs " + to_string(want));
  }

  void engine_loop() {
    CpuEnv env(arena_, path_);
    std::uint32_t idle = 0;
    while (!stop_.load(std::memory_order_relaxed)) {
      bool any = false;
      {
        std::lock_guard lk(mu_);
        const std::uint32_t n = qp_high_.load();
        for (std::uint32_t i = 0; i < n; ++i) {
          QpCtx& q = arena_.qps()[i];
          if (sync::load_acquire(&q.qpn) != 0) any |= soft::Hca<CpuEnv>::step(env, q);
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
  Arena arena_;
  std::size_t size_ = 0;
  std::string path_;
  Heap heap_;
  std::vector<std::uint8_t> mr_tags_;
  void* cq_state_[kMaxCqs] = {};
  void* qp_state_[kMaxQps] = {};
  std::uint32_t last_pdn_ = 0;
  std::mutex events_mu_;
  std::uint64_t events_read_ = 0;
  bool gpu_mapped_ = false;
  std::atomic<std::uint32_t> qp_high_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;  ///< guards tables and heap; the engine holds it for each sweep
  std::thread engine_;
};

}  // namespace

std::unique_ptr<Provider> open_soft_provider(const DeviceOptions& opt) {
  return std::make_unique<SoftProvider>(opt);
}

}  // namespace gv::detail
