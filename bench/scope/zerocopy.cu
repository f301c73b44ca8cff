// Family 2, zero-copy: kernels that read or write mapped host memory (pinned = coherent,
// write-combined, registered) or a peer GPU's memory in place, 16 bytes per load or store.
#include <cstdio>

#include "family.hpp"

namespace gv::scope {
namespace {

constexpr int kThreads = 512;

/// Reads every 16-byte word; the XOR of all is stored only if it equals a value no seeded
/// buffer gives, so the loads cannot be dropped.
__global__ void read_kernel(const uint4* p, std::size_t n, uint4* sink) {
  uint4 acc{0, 0, 0, 0};
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x) {
    const uint4 v = p[i];
    acc.x ^= v.x, acc.y ^= v.y, acc.z ^= v.z, acc.w ^= v.w;
  }
  if (acc.x == 0x5c09e5c0u && acc.y == 0x5c09e5c1u) *sink = acc;
}

/// Word i becomes (i, seed, ~i, seed): checkable on the host.
__global__ void write_kernel(uint4* p, std::size_t n, unsigned seed) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x) {
    const auto lo = static_cast<unsigned>(i);
    p[i] = uint4{lo, seed, ~lo, seed};
  }
}

class ZeroCopyCase final : public Case {
 public:
  /// `target`: the memory the kernel on `gpu` reaches (a host kind, or kDevice on `owner`).
  ZeroCopyCase(Mem target, int gpu, int owner, std::uint64_t bytes, bool write)
      : gpu_(gpu), bytes_(bytes), write_(write), buf_(target, bytes, owner), sink_(Mem::kDevice, sizeof(uint4), gpu) {
    detail::DeviceGuard g(gpu);
    cudaDeviceProp p{};
    cuda_check(cudaGetDeviceProperties(&p, gpu), "cudaGetDeviceProperties");
    int per_sm = 0;
    cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, read_kernel, kThreads, 0), "occupancy");
    blocks_ = p.multiProcessorCount * per_sm;
    if (!write && buf_.host() != nullptr) fill_host(buf_.host(), bytes, 0x2c0);
    if (!write && buf_.host() == nullptr) {
      detail::DeviceGuard o(owner);
      fill_device(buf_.device(), bytes, 0x2c0, nullptr);
    }
  }
  int max_reps() const override { return 64; }
  std::uint64_t bytes() const override { return bytes_; }
  void enqueue(int, cudaStream_t s) override {
    const std::size_t n = bytes_ / sizeof(uint4);
    if (write_)
      write_kernel<<<blocks_, kThreads, 0, s>>>(static_cast<uint4*>(buf_.device()), n, 0x2c0u);
    else
      read_kernel<<<blocks_, kThreads, 0, s>>>(static_cast<const uint4*>(buf_.device()), n,
                                               static_cast<uint4*>(sink_.device()));
    cuda_check(cudaGetLastError(), "zero-copy kernel");
  }
  void verify() override {
    detail::DeviceGuard g(gpu_);
    if (!write_) {
      // The checksum kernel reads the same memory in place; it must see what was written.
      const std::uint64_t want = buf_.host() != nullptr ? checksum_host(buf_.host(), bytes_) : checksum_device(buf_.device(), bytes_, nullptr);
      if (checksum_device(buf_.device(), bytes_, nullptr) != want) throw Error("zero-copy read: the GPU saw other data than was written");
      return;
    }
    std::vector<uint4> h(bytes_ / sizeof(uint4));
    cuda_check(cudaMemcpy(h.data(), buf_.device(), bytes_, cudaMemcpyDefault), "cudaMemcpy(verify)");
    for (std::size_t i = 0; i < h.size(); ++i) {
      const auto lo = static_cast<unsigned>(i);
      if (h[i].x != lo || h[i].y != 0x2c0u || h[i].z != ~lo || h[i].w != 0x2c0u)
        throw Error("zero-copy write: word " + std::to_string(i) + " did not arrive");
    }
  }

 private:
  int gpu_;
  std::uint64_t bytes_;
  bool write_;
  Buffer buf_, sink_;
  int blocks_ = 0;
};

}  // namespace

void register_zero_copy(const Plan& plan) {
  for (std::size_t i = 0; i < plan.gpus.size(); ++i) {
    const Where w{plan.numa_of_gpu[i], plan.gpus[i]};
    for (const Mem m : {Mem::kPinned, Mem::kWc, Mem::kRegistered}) {
      const std::string h = mem_name(m);
      add_sized(plan, "ZeroCopy_" + h + "ToGPU", w, [=](const Where& x, std::uint64_t n) {
        return std::make_unique<ZeroCopyCase>(m, x.gpu, x.gpu, n, false);
      }, 12);
      add_sized(plan, "ZeroCopy_GPUTo" + h, w, [=](const Where& x, std::uint64_t n) {
        return std::make_unique<ZeroCopyCase>(m, x.gpu, x.gpu, n, true);
      }, 12);
    }
    // The same kernels on the GPU's own memory: the HBM rate the summary sets limits against.
    add_sized(plan, "ZeroCopy_GPUToGPU_Read_Local", w, [](const Where& x, std::uint64_t n) {
      return std::make_unique<ZeroCopyCase>(Mem::kDevice, x.gpu, x.gpu, n, false);
    }, 12);
  }
  const auto pairs = peer_pairs(plan);
  if (pairs.empty()) {
    std::fprintf(stderr, "gv_scope: peer zero-copy families not registered: they need two GPUs that reach each other\n");
    return;
  }
  for (const auto& [a, b] : pairs) {
    const Where w{0, a, b};
    const auto enable = [a, b] { peer_access(a, b, true); };
    // Src GPU a's kernel reads (or writes) GPU b's memory.
    add_sized(plan, "ZeroCopy_GPUToGPU_Read", w, [=](const Where& x, std::uint64_t n) {
      enable();
      return std::make_unique<ZeroCopyCase>(Mem::kDevice, x.gpu, x.peer, n, false);
    }, 12);
    add_sized(plan, "ZeroCopy_GPUToGPU_Write", w, [=](const Where& x, std::uint64_t n) {
      enable();
      return std::make_unique<ZeroCopyCase>(Mem::kDevice, x.gpu, x.peer, n, true);
    }, 12);
  }
}

}  // namespace gv::scope
