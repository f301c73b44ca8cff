// The host-memory placement: a memfd (peers in other processes map it by path), served by the
// CPU engine; with DeviceOptions::map_to_gpus also pinned and mapped into every GPU.
#include <cstring>

#include "../numa.hpp"
#include "../shared_file.hpp"
#include "arena_store.hpp"
#include "cpu_engine.hpp"
#include "cuda_reach.hpp"
#include "host_pages.hpp"

namespace gv::detail {

// ---- ArenaStore ---------------------------------------------------------------------------------

void ArenaStore::init(std::byte* engine_base, std::byte* table_base, std::size_t size, std::string path) {
  arena_ = soft::Arena{engine_base};
  tab_ = soft::Arena{table_base};
  size_ = size;
  path_ = std::move(path);
  heap_.init(soft::ArenaLayout::kHeap, size);
}

std::uint64_t ArenaStore::heap_alloc_or_throw(const char* who, std::uint64_t bytes, std::uint64_t align) {
  const std::uint64_t off = heap_.alloc(bytes, align);
  if (off != 0) return off;
  // What to set: the arena grown by the request (rounded up to MiB) holds it, whatever is
  // allocated now (a request near 2^64 has no such size).
  constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
  std::string hint = "ask for less";
  if (bytes < (std::uint64_t{1} << 48))
    hint = "open the device with DeviceOptions::arena_bytes of at least " +
           std::to_string((size_ + bytes + align + kMiB - 1) / kMiB) + " MiB, or ask for less";
  throw Error(std::string(who) + ": " + std::to_string(bytes) + " bytes do not fit in the soft device's arena (" +
              std::to_string(size_ / kMiB) + " MiB, largest free range " + std::to_string(heap_.largest_free()) +
              " bytes); " + hint);
}

std::uint64_t ArenaStore::heap_alloc_zeroed(const char* who, std::uint64_t bytes, std::uint64_t align) {
  const std::uint64_t off = heap_alloc_or_throw(who, bytes, align);
  zero_at(off, bytes);
  return off;
}

std::uint64_t ArenaStore::offset_of(const void* p) const {
  const auto* b = static_cast<const std::byte*>(p);
  return (b >= arena_.base + soft::ArenaLayout::kHeap && b < arena_.base + size_)
             ? static_cast<std::uint64_t>(b - arena_.base)
             : 0;
}

void* ArenaStore::alloc_counters(const char* who, std::size_t bytes) {
  return arena_.at<void>(heap_alloc_zeroed(who, bytes));
}

bool is_gpu_arena_name(const char* name) { return std::strncmp(name, "gpu:", 4) == 0; }

// ---- HostArena ----------------------------------------------------------------------------------

namespace {

class HostArena final : public ArenaStore {
 public:
  explicit HostArena(const DeviceOptions& opt) {
    file_ = std::make_unique<SharedFile>(opt.arena_bytes, "Device::open(soft): the arena");
    // Host rings the GPUs read across PCIe: on the NUMA node of GPU opt.gpu, before first touch.
    placement_ = opt.map_to_gpus ? place_near_gpu(file_->base(), file_->size(), opt.gpu) + ", pinned and mapped into every GPU"
                                 : "host memory (not mapped into the GPUs)";
    init(file_->base(), file_->base(), file_->size(), file_->path());
    if (opt.map_to_gpus) mapping_ = map_to_gpus(file_->base(), file_->size());
  }

  ~HostArena() override {
    for (std::uint32_t i = 0; i < soft::kMaxMrs; ++i) forget_gpu_mr(i);  // MRs left registered
    mapping_.reset();
  }

  bool on_gpu() const override { return false; }
  std::string placement() const override { return placement_; }

  std::unique_ptr<Engine> start_engine(const DeviceOptions&, const EngineSite& site) override {
    return std::make_unique<CpuEngine>(arena_, path_, site);
  }

  void push(const void*, std::size_t) override {}  // the engine reads the tables in place
  void write_at(std::uint64_t off, const void* src, std::size_t n) override { std::memcpy(arena_.base + off, src, n); }
  void zero_at(std::uint64_t off, std::size_t n) override { std::memset(arena_.base + off, 0, n); }

  /// In GPU memory when the arena is mapped into the GPUs (kernels use the handles; GPU atomics
  /// on host memory are not guaranteed over PCIe), in the arena otherwise.
  void* alloc_counters(const char* who, std::size_t bytes) override {
    if (mapping_) return mapping_->alloc_counters(who, bytes);
    void* p = arena_.at<void>(heap_alloc_or_throw(who, bytes, 64));
    std::memset(p, 0, bytes);
    return p;
  }
  void free_counters(void* p) override {
    if (mapping_) return mapping_->free_counters(p);
    ArenaStore::free_counters(p);
  }

  /// Host memory (loads and stores) and memory of any GPU of this process (CUDA copies).
  int reachable(const void* addr, std::size_t len, std::uint32_t access) const override {
    const int gpu = gpu_holding(addr);
    if (gpu < 0) require_host_pages("reg_mr", addr, len, (access & (kLocalWrite | kRemoteWrite | kRemoteAtomic)) != 0);
    return gpu;
  }

  /// Peers are mapped by path, by the engine.
  std::uint64_t peer_base(std::uint32_t qpn, const QpInfo& r) override {
    if (is_gpu_arena_name(r.arena))
      throw Error("modify_to_rtr: QP " + hex(qpn) + " is served by the CPU engine and remote QP " + hex(r.qpn) +
                  " by the GPU engine; connect QPs of devices opened with the same DeviceOptions::engine");
    return 0;
  }

  void admit_gpu_mr(std::uint32_t slot, std::uintptr_t addr, std::size_t len, int gpu) override {
    gpu_ranges()->add(addr, len, gpu);
    gpu_mr_[slot] = true;
  }
  void forget_gpu_mr(std::uint32_t slot) override {
    if (!gpu_mr_[slot]) return;
    gpu_mr_[slot] = false;
    const soft::MrEntry& e = tab_.mrs()[slot];
    gpu_ranges()->remove(e.addr, e.length);
  }

 private:
  void pull_bytes(void* dst, const void* tab_field, std::size_t n) const override { std::memcpy(dst, tab_field, n); }

  std::unique_ptr<SharedFile> file_;     ///< the arena (peers in other processes map it by path)
  std::string placement_;
  std::unique_ptr<GpuMapping> mapping_;  ///< map_to_gpus
  std::vector<bool> gpu_mr_ = std::vector<bool>(soft::kMaxMrs, false);  ///< slot covers GPU memory
};

}  // namespace

std::unique_ptr<ArenaStore> open_host_arena(const DeviceOptions& opt) { return std::make_unique<HostArena>(opt); }

}  // namespace gv::detail
