// What every gv_scope family shares on the GPU side: buffers by memory kind, a stream held behind
// a spinning kernel while a timed region is enqueued (nvbandwidth's method), event timing with a
// bounded wait, the checksum a copy is verified with, and the plain measurement beside it.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "../common/cuda_check.hpp"  // the benchmarks' one CUDA check
#include "cuda_util.hpp"             // host_setup's DeviceGuard

namespace gv::scope {

using bench::cuda_check;

/// Longest any one timed region may take before the run fails instead of hanging.
inline constexpr double kWaitSeconds = 20.0;

enum class Mem : std::uint8_t {
  kPageable,    ///< aligned_alloc + memset
  kPinned,      ///< cudaHostAlloc(Portable | Mapped)
  kRegistered,  ///< aligned_alloc + cudaHostRegister(Portable | Mapped)
  kWc,          ///< cudaHostAlloc(WriteCombined | Portable | Mapped)
  kDevice,      ///< cudaMalloc on the current GPU
  kManaged,     ///< cudaMallocManaged
};
const char* mem_name(Mem m);

/// A buffer of one kind; host kinds are touched on allocation (first touch on the bound node).
class Buffer {
 public:
  Buffer() = default;
  Buffer(Mem kind, std::size_t bytes, int gpu);
  ~Buffer();
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  void* host() const { return host_; }      ///< null for device memory
  void* device() const { return device_; }  ///< the GPU's pointer (mapped host, device, managed)
  std::size_t bytes() const { return bytes_; }
  Mem kind() const { return kind_; }
  int gpu() const { return gpu_; }  ///< the GPU it was allocated for (device kinds: where it lives)

 private:
  void release();
  Mem kind_ = Mem::kDevice;
  std::size_t bytes_ = 0;
  int gpu_ = 0;
  void* host_ = nullptr;
  void* device_ = nullptr;
};

/// Order-independent 64-bit checksum of a buffer; the device version gives the same value.
std::uint64_t checksum_host(const void* p, std::size_t bytes);
std::uint64_t checksum_device(const void* p, std::size_t bytes, cudaStream_t s);
/// Fills with seeded data (host or device pointer), so a copy of zeros cannot pass.
void fill_host(void* p, std::size_t bytes, std::uint64_t seed);
void fill_device(void* p, std::size_t bytes, std::uint64_t seed, cudaStream_t s);

/// Waits for `e` at most kWaitSeconds (cudaEventQuery in a loop); throws gv::Error after.
void wait_event(cudaEvent_t e, const std::string& what);

/// One GPU's timing kit: streams, events, and the host flag its hold kernels spin on.
class Timer {
 public:
  explicit Timer(int gpu, int streams = 1);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  cudaStream_t stream(int i = 0) const { return streams_[static_cast<std::size_t>(i)]; }
  int gpu() const { return gpu_; }

  /// Milliseconds of `work`, enqueued while every stream is held behind a spinning kernel, from
  /// the first stream's start event to the last stop event. `work(i)` enqueues stream i's part.
  double held(const std::function<void(int)>& work);
  /// Milliseconds of `work` with events recorded right around it, nothing held: the plain
  /// measurement each family sits beside.
  double plain(const std::function<void(int)>& work);

 private:
  double span() const;  ///< ms from the earliest start event to the latest stop event
  int gpu_;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> start_, stop_;
  std::uint32_t* flag_ = nullptr;      ///< mapped pinned host word: 0 holds, 1 releases
  std::uint32_t* timed_out_ = nullptr; ///< mapped: set by a hold kernel whose budget ran out
};

}  // namespace gv::scope
