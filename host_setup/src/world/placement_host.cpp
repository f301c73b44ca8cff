// The host placements: host memory as a Space, the shared-memory heap, the software HCA's heap,
// the peers' mapped heaps; and what a build without CUDA says about GPUs.
#include "placement.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

namespace gv::detail {
namespace {

class HostSpace final : public Space {
 public:
  void* alloc(std::size_t bytes, const char*) override {
    void* p = nullptr;
    const std::size_t n = bytes == 0 ? 64 : (bytes + 63) & ~std::size_t{63};
    if (posix_memalign(&p, 64, n) != 0) throw std::bad_alloc();
    std::memset(p, 0, n);
    return p;
  }
  void free(void* p) override { std::free(p); }
  void copy_in(void* dst, const void* src, std::size_t bytes, const char*) override { std::memcpy(dst, src, bytes); }
  void clear(void* p, std::size_t bytes, const char*) override { std::memset(p, 0, bytes); }
  void snapshot(void* dst, const void* src, std::size_t bytes) override { std::memcpy(dst, src, bytes); }  // racy, for diagnosis
  std::uint32_t* alloc_flag() override { return static_cast<std::uint32_t*>(alloc(64, "abort flag")); }
  void free_flag(std::uint32_t* flag) override { std::free(flag); }
  void raise(std::uint32_t* word, const std::uint32_t* flag) override {
    __atomic_store_n(word, __atomic_load_n(flag, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
  }
  HeapExport export_ipc(void*, std::size_t) override { return {}; }  // nothing a peer could map
  std::byte* open_ipc(const HeapExport&) override {
    throw Error("World: a peer's heap is GPU memory, but this rank's is host memory: ranks mix host and GPU heaps");
  }
};

class SharedHeap final : public HeapPlacement {
 public:
  explicit SharedHeap(std::size_t bytes) : HeapPlacement(nullptr, bytes, host_space()), file_(bytes, "World: the heap") {
    base_ = file_.base();  // a new file reads as zeros
  }
  HeapExport exported() const override {
    HeapExport e;
    e.kind = HeapExport::kShared;
    e.bytes = bytes_;
    std::snprintf(e.path, sizeof(e.path), "%s", file_.path().c_str());
    return e;
  }

 private:
  SharedFile file_;
};

class DeviceHeap final : public HeapPlacement {
 public:
  DeviceHeap(Device& dev, std::size_t bytes, Space& memory, bool ipc)
      : HeapPlacement(static_cast<std::byte*>(dev.alloc(bytes)), bytes, memory) {
    memory.clear(base_, bytes, "World: clearing the heap");
    if (ipc) exp_ = memory.export_ipc(base_, bytes);
  }
  HeapExport exported() const override { return exp_; }

 private:
  HeapExport exp_;
};

}  // namespace

Space& host_space() {
  static HostSpace s;
  return s;
}

std::unique_ptr<HeapPlacement> shared_heap(std::size_t bytes) { return std::make_unique<SharedHeap>(bytes); }

std::unique_ptr<HeapPlacement> device_heap(Device& dev, std::size_t bytes, Space& memory, bool ipc) {
  return std::make_unique<DeviceHeap>(dev, bytes, memory, ipc);
}

std::byte* PeerHeaps::map(const HeapExport& e) {
  switch (e.kind) {
    case HeapExport::kShared: {
      const Mapping m = map_shared_file(e.path);
      if (m.base == nullptr || m.size < e.offset + e.bytes)
        throw Error(std::string("World: cannot map a peer's heap (") + e.path + "): has its process ended?");
      shared_.push_back(m);
      return m.base + e.offset;
    }
    case HeapExport::kCudaIpc: return space_.open_ipc(e);
    default: return nullptr;
  }
}

PeerHeaps::~PeerHeaps() {
  for (const Mapping& m : shared_) unmap_shared_file(m);
}

std::size_t gpu_heap_allocation(std::size_t bytes, bool ipc) {
  constexpr std::size_t kLargePage = std::size_t{2} << 20;
  return ipc ? (bytes + kLargePage - 1) & ~(kLargePage - 1) : bytes;
}

#if !GPUVERBS_HAVE_CUDA
int gpu_count() { return 0; }
void use_gpu(int, unsigned char*) { throw Error("World: gpuverbs was built without CUDA"); }
bool gpu_reaches(int, const unsigned char*, bool) { return false; }
std::unique_ptr<Space> gpu_space(int) { throw Error("World: GPU memory needs gpuverbs built with CUDA"); }
std::unique_ptr<HeapPlacement> cuda_heap(std::size_t, Space&, bool) {
  throw Error("World: GPU heaps need gpuverbs built with CUDA");
}
#endif

}  // namespace gv::detail
