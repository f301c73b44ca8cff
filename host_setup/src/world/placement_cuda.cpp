// The GPU placements (CUDA builds): a GPU's memory as a Space, the cudaMalloc heap, and the GPU
// queries the World's setup makes.
#include <cuda_runtime.h>

#include <cstring>

#include "../cuda_util.hpp"
#include "placement.hpp"

namespace gv::detail {
namespace {
/// cuMemGetAddressRange through the runtime (no link against libcuda): the allocation that
/// holds `p`, since CUDA IPC exports whole allocations.
std::uintptr_t allocation_base(void* p) {
  using Fn = int (*)(unsigned long long*, std::size_t*, unsigned long long);
  static Fn fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &f, 12000, cudaEnableDefault, &q) != cudaSuccess) {
      (void)cudaGetLastError();
      f = nullptr;
    }
    return reinterpret_cast<Fn>(f);
  }();
  if (fn == nullptr) throw Error("World: the CUDA driver has no cuMemGetAddressRange");
  unsigned long long base = 0;
  std::size_t size = 0;
  if (fn(&base, &size, reinterpret_cast<unsigned long long>(p)) != 0)
    throw Error("World: cuMemGetAddressRange failed for the heap");
  return static_cast<std::uintptr_t>(base);
}

HeapExport export_gpu_heap(void* p, std::size_t bytes) {
  HeapExport e;
  e.kind = HeapExport::kCudaIpc;
  e.bytes = bytes;
  const std::uintptr_t base = allocation_base(p);
  e.offset = reinterpret_cast<std::uintptr_t>(p) - base;
  cudaIpcMemHandle_t h;
  cuda_check(cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(base)), "World: cudaIpcGetMemHandle of the heap");
  static_assert(sizeof(h) <= sizeof(e.ipc));
  std::memcpy(e.ipc, &h, sizeof(h));
  return e;
}

std::byte* open_gpu_heap(const HeapExport& e, void*& ipc_base) {
  cudaIpcMemHandle_t h;
  std::memcpy(&h, e.ipc, sizeof(h));
  cuda_check(cudaIpcOpenMemHandle(&ipc_base, h, cudaIpcMemLazyEnablePeerAccess),
             "World: opening a peer's heap through CUDA IPC");
  return static_cast<std::byte*>(ipc_base) + e.offset;
}

void close_gpu_heap(void* ipc_base) {
  if (ipc_base != nullptr) (void)cudaIpcCloseMemHandle(ipc_base);
}

class GpuSpace final : public Space {
 public:
  explicit GpuSpace(int gpu) : gpu_(gpu) {
    DeviceGuard g(gpu_);
    // Every copy and clear of the World goes through this stream, never the legacy one.
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "World: cudaStreamCreate");
  }
  ~GpuSpace() override {
    DeviceGuard g(gpu_, false);
    for (void* b : ipc_) close_gpu_heap(b);
    (void)cudaStreamDestroy(stream_);
    (void)cudaGetLastError();
  }
  void* alloc(std::size_t bytes, const char* what) override {
    DeviceGuard g(gpu_);
    void* p = nullptr;
    cuda_check(cudaMalloc(&p, bytes == 0 ? 64 : bytes), std::string("World: cudaMalloc (") + what + ")");
    clear(p, bytes, what);
    return p;
  }
  void free(void* p) override {
    DeviceGuard g(gpu_, false);
    (void)cudaFree(p);
    (void)cudaGetLastError();
  }
  void copy_in(void* dst, const void* src, std::size_t bytes, const char* what) override {
    DeviceGuard g(gpu_);
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), what);
    cuda_check(cudaStreamSynchronize(stream_), what);
  }
  void clear(void* p, std::size_t bytes, const char* what) override {
    DeviceGuard g(gpu_);
    cuda_check(cudaMemsetAsync(p, 0, bytes, stream_), what);
    cuda_check(cudaStreamSynchronize(stream_), what);
  }
  void snapshot(void* dst, const void* src, std::size_t bytes) override {
    DeviceGuard g(gpu_, false);
    // GPU memory, or host memory mapped into the GPU (the CPU engine's queues).
    if (cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_) != cudaSuccess ||
        cudaStreamSynchronize(stream_) != cudaSuccess)
      (void)cudaGetLastError();
  }
  std::uint32_t* alloc_flag() override {
    void* p = nullptr;
    cuda_check(cudaHostAlloc(&p, 64, cudaHostAllocMapped | cudaHostAllocPortable), "World: cudaHostAlloc (abort flag)");
    std::memset(p, 0, 64);
    return static_cast<std::uint32_t*>(p);
  }
  void free_flag(std::uint32_t* flag) override {
    (void)cudaFreeHost(flag);
    (void)cudaGetLastError();
  }
  void raise(std::uint32_t* word, const std::uint32_t* flag) override {
    // From the pinned host flag, on the non-blocking stream (it runs beside a resident engine
    // kernel); not waited for: the flag stays raised.
    DeviceGuard g(gpu_, false);
    if (cudaMemcpyAsync(word, flag, sizeof(*word), cudaMemcpyHostToDevice, stream_) != cudaSuccess)
      (void)cudaGetLastError();  // the host flag still ends every wait
  }
  HeapExport export_ipc(void* p, std::size_t bytes) override {
    DeviceGuard g(gpu_);
    return export_gpu_heap(p, bytes);
  }
  std::byte* open_ipc(const HeapExport& e) override {
    DeviceGuard g(gpu_);
    void* base = nullptr;
    std::byte* p = open_gpu_heap(e, base);
    ipc_.push_back(base);
    return p;
  }

 private:
  int gpu_;
  cudaStream_t stream_ = nullptr;
  std::vector<void*> ipc_;  ///< peers' heaps opened through CUDA IPC
};

class CudaHeap final : public HeapPlacement {
 public:
  CudaHeap(std::size_t bytes, Space& memory, bool ipc)
      : HeapPlacement(static_cast<std::byte*>(memory.alloc(gpu_heap_allocation(bytes, ipc), "the heap")), bytes, memory) {
    if (ipc) exp_ = memory.export_ipc(base_, bytes);
  }
  ~CudaHeap() override { memory_.free(base_); }
  HeapExport exported() const override { return exp_; }

 private:
  HeapExport exp_;
};

}  // namespace

std::unique_ptr<Space> gpu_space(int gpu) { return std::make_unique<GpuSpace>(gpu); }

std::unique_ptr<HeapPlacement> cuda_heap(std::size_t bytes, Space& memory, bool ipc) {
  return std::make_unique<CudaHeap>(bytes, memory, ipc);
}

int gpu_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    n = 0;
  }
  return n;
}

void use_gpu(int gpu, unsigned char uuid[16]) {
  cuda_check(cudaSetDevice(gpu), "World: cudaSetDevice(" + std::to_string(gpu) + ")");
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, gpu), "World: cudaGetDeviceProperties");
  std::memcpy(uuid, &prop.uuid, 16);
}

bool gpu_reaches(int gpu, const unsigned char uuid[16], bool same_process) {
  const int n = gpu_count();
  int ordinal = -1;  // the GPU with `uuid` among this process's devices
  for (int d = 0; d < n && ordinal < 0; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) == cudaSuccess && std::memcmp(&p.uuid, uuid, 16) == 0) ordinal = d;
  }
  int can = ordinal == gpu ? 1 : 0;
  if (ordinal >= 0 && ordinal != gpu && cudaDeviceCanAccessPeer(&can, gpu, ordinal) != cudaSuccess) can = 0;
  (void)cudaGetLastError();
  if (can && ordinal != gpu && same_process) {
    const cudaError_t e = cudaDeviceEnablePeerAccess(ordinal, 0);
    if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
      cuda_check(e, "World: cudaDeviceEnablePeerAccess(" + std::to_string(ordinal) + ")");
    (void)cudaGetLastError();
  }
  return can != 0;
}

}  // namespace gv::detail
