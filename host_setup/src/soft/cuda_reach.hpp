// What the host-memory placement and its CPU engine need of CUDA, in one seam: cuda_reach.cpp
// in CUDA builds, no_cuda.cpp without CUDA (where no GPU memory exists for them: nothing is
// GPU memory, nothing is registered, no mover is made, and mapping to GPUs is refused).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace gv::detail {

/// The GPU whose memory `addr` is (cudaMalloc memory of this process, any GPU), or -1.
int gpu_holding(const void* addr);

/// GPU memory registered with the CPU-engine devices of this process: the ranges whose bytes
/// the CPU engines move with CUDA copies instead of memcpy. Process-wide, because an engine
/// also writes into its peers' MRs, which may belong to another Device of this process.
/// Host memory never enters it. Null without CUDA (no GPU memory can be registered).
class GpuRanges {
 public:
  virtual ~GpuRanges() = default;
  /// Called before the MR's key is published, so an engine that resolved the key finds it.
  virtual void add(std::uintptr_t begin, std::size_t len, int gpu) = 0;
  virtual void remove(std::uintptr_t begin, std::size_t len) = 0;
};
GpuRanges* gpu_ranges();

/// A CPU engine's mover of bytes to and from registered GPU memory, on streams of its own.
/// A failed CUDA call fails the WQE being executed: take_fault() then returns LOCAL_PROT_ERR,
/// and `report(qpn, why)` is called.
class GpuMover {
 public:
  using Report = std::function<void(std::uint32_t qpn, std::string why)>;
  virtual ~GpuMover() = default;
  /// The GPU holding registered memory at a, else at b; -1 if neither is registered GPU memory.
  /// While no GPU memory is registered, one load.
  virtual int find(const void* a, const void* b = nullptr) const = 0;
  /// The QP whose WQE is executed next (named in reports).
  virtual void set_current_qp(std::uint32_t qpn) = 0;
  /// n bytes, one side in GPU `gpu`'s memory; with `publish`, the last byte after the rest.
  virtual void copy(int gpu, void* d, const void* s, std::uint64_t n, bool publish) = 0;
  /// 8-byte atomics on GPU memory: read-modify-writes under a process-wide lock, atomic with
  /// respect to every verbs atomic of this process, not to GPU threads' own.
  virtual std::uint64_t fetch_add(int gpu, std::uint64_t* t, std::uint64_t v) = 0;
  virtual std::uint64_t compare_swap(int gpu, std::uint64_t* t, std::uint64_t expected, std::uint64_t desired) = 0;
  virtual std::uint8_t take_fault() = 0;
};
/// Null without CUDA.
std::unique_ptr<GpuMover> make_gpu_mover(GpuMover::Report report);

/// A host arena pinned and mapped into every GPU at its host addresses (UVA), so the handles'
/// pointers are valid in kernels too; undone by destruction. Poster counters then live in GPU
/// memory (GPU atomics on host memory are not guaranteed over PCIe).
class GpuMapping {
 public:
  virtual ~GpuMapping() = default;
  virtual void* alloc_counters(const char* who, std::size_t bytes) = 0;
  virtual void free_counters(void* p) = 0;
};
/// Throws when it cannot map (no GPU, no CUDA build, no unified addressing).
std::unique_ptr<GpuMapping> map_to_gpus(void* base, std::size_t size);

}  // namespace gv::detail
