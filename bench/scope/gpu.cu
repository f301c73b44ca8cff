#include "gpu.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <gpuverbs/splitmix.hpp>
#include <gpuverbs/sync.hpp>

namespace gv::scope {
namespace {

/// Holds its stream until the host raises *flag, for at most budget_ns (then says so in
/// *timed_out and lets the stream go: a measurement never hangs on a lost release).
__global__ void hold_kernel(const std::uint32_t* flag, std::uint64_t budget_ns, std::uint32_t* timed_out) {
  const Status st = sync::bounded_wait([&] { return sync::load_host_flag(flag) != 0; }, Budget{budget_ns}, nullptr);
  if (st != Status::kOk) *timed_out = 1;
}

/// Word i's contribution: its value mixed with its place, so a shifted copy fails too.
GV_HD inline std::uint64_t term(std::uint64_t w, std::uint64_t i) { return splitmix64(w ^ (i * 0x100000001b3ull)); }

__global__ void checksum_kernel(const std::uint64_t* p, std::size_t words, unsigned long long* out) {
  std::uint64_t acc = 0;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += std::size_t{gridDim.x} * blockDim.x)
    acc += term(p[i], i);
  atomicAdd(out, static_cast<unsigned long long>(acc));
}

__global__ void fill_kernel(std::uint64_t* p, std::size_t words, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += std::size_t{gridDim.x} * blockDim.x)
    p[i] = splitmix64(seed + i);
}

constexpr unsigned kHostFlags = cudaHostAllocPortable | cudaHostAllocMapped;

}  // namespace

const char* mem_name(Mem m) {
  switch (m) {
    case Mem::kPageable: return "Host";
    case Mem::kPinned: return "Pinned";
    case Mem::kRegistered: return "Registered";
    case Mem::kWc: return "WC";
    case Mem::kDevice: return "GPU";
    case Mem::kManaged: return "Managed";
  }
  return "?";
}

Buffer::Buffer(Mem kind, std::size_t bytes, int gpu) : kind_(kind), bytes_(bytes), gpu_(gpu) {
  detail::DeviceGuard g(gpu);
  const std::size_t page = 4096, rounded = (bytes + page - 1) / page * page;
  switch (kind) {
    case Mem::kPageable:
    case Mem::kRegistered:
      host_ = std::aligned_alloc(page, rounded);
      if (host_ == nullptr) throw Error("aligned_alloc of " + std::to_string(bytes) + " bytes failed");
      std::memset(host_, 0, rounded);
      if (kind == Mem::kRegistered) {
        const cudaError_t e = cudaHostRegister(host_, rounded, cudaHostRegisterPortable | cudaHostRegisterMapped);
        if (e != cudaSuccess) {
          std::free(host_);
          host_ = nullptr;
          cuda_check(e, "cudaHostRegister");
        }
        cuda_check(cudaHostGetDevicePointer(&device_, host_, 0), "cudaHostGetDevicePointer");
      }
      break;
    case Mem::kPinned:
    case Mem::kWc:
      cuda_check(cudaHostAlloc(&host_, rounded, kHostFlags | (kind == Mem::kWc ? cudaHostAllocWriteCombined : 0)),
                 "cudaHostAlloc");
      std::memset(host_, 0, rounded);
      cuda_check(cudaHostGetDevicePointer(&device_, host_, 0), "cudaHostGetDevicePointer");
      break;
    case Mem::kDevice: cuda_check(cudaMalloc(&device_, rounded), "cudaMalloc"); break;
    case Mem::kManaged:
      cuda_check(cudaMallocManaged(&device_, rounded), "cudaMallocManaged");
      host_ = device_;
      break;
  }
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    kind_ = o.kind_;
    bytes_ = o.bytes_;
    gpu_ = o.gpu_;
    host_ = std::exchange(o.host_, nullptr);
    device_ = std::exchange(o.device_, nullptr);
  }
  return *this;
}

Buffer::~Buffer() { release(); }

void Buffer::release() {
  if (host_ == nullptr && device_ == nullptr) return;
  detail::DeviceGuard g(gpu_, false);
  switch (kind_) {
    case Mem::kPageable: std::free(host_); break;
    case Mem::kRegistered:
      (void)cudaHostUnregister(host_);
      std::free(host_);
      break;
    case Mem::kPinned:
    case Mem::kWc: (void)cudaFreeHost(host_); break;
    case Mem::kDevice:
    case Mem::kManaged: (void)cudaFree(device_); break;
  }
  host_ = device_ = nullptr;
}

std::uint64_t checksum_host(const void* p, std::size_t bytes) {
  const auto* w = static_cast<const std::uint64_t*>(p);
  std::uint64_t acc = 0;
  for (std::size_t i = 0; i < bytes / 8; ++i) acc += term(w[i], i);
  return acc;
}

std::uint64_t checksum_device(const void* p, std::size_t bytes, cudaStream_t s) {
  unsigned long long* sum = nullptr;
  cuda_check(cudaMallocHost(&sum, sizeof(*sum)), "cudaMallocHost(checksum)");
  *sum = 0;
  checksum_kernel<<<264, 512, 0, s>>>(static_cast<const std::uint64_t*>(p), bytes / 8, sum);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  const std::uint64_t v = *sum;
  (void)cudaFreeHost(sum);
  cuda_check(e, "checksum kernel");
  return v;
}

void fill_host(void* p, std::size_t bytes, std::uint64_t seed) {
  auto* w = static_cast<std::uint64_t*>(p);
  for (std::size_t i = 0; i < bytes / 8; ++i) w[i] = splitmix64(seed + i);
}

void fill_device(void* p, std::size_t bytes, std::uint64_t seed, cudaStream_t s) {
  fill_kernel<<<264, 512, 0, s>>>(static_cast<std::uint64_t*>(p), bytes / 8, seed);
  cuda_check(cudaGetLastError(), "fill kernel");
  cuda_check(cudaStreamSynchronize(s), "fill kernel");
}

void wait_event(cudaEvent_t e, const std::string& what) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(kWaitSeconds);
  for (;;) {
    const cudaError_t r = cudaEventQuery(e);
    if (r == cudaSuccess) return;
    if (r != cudaErrorNotReady) cuda_check(r, what);
    if (std::chrono::steady_clock::now() > until)
      throw Error(what + ": not done after " + std::to_string(static_cast<int>(kWaitSeconds)) +
                  " s (a stuck transfer or kernel; the run stops here)");
    std::this_thread::yield();
  }
}

Timer::Timer(int gpu, int streams) : gpu_(gpu) {
  detail::DeviceGuard g(gpu);
  streams_.resize(static_cast<std::size_t>(streams));
  start_.resize(streams_.size());
  stop_.resize(streams_.size());
  for (std::size_t i = 0; i < streams_.size(); ++i) {
    cuda_check(cudaStreamCreateWithFlags(&streams_[i], cudaStreamNonBlocking), "cudaStreamCreate");
    cuda_check(cudaEventCreate(&start_[i]), "cudaEventCreate");
    cuda_check(cudaEventCreate(&stop_[i]), "cudaEventCreate");
  }
  cuda_check(cudaHostAlloc(&flag_, 2 * sizeof(std::uint32_t), kHostFlags), "cudaHostAlloc(flag)");
  timed_out_ = flag_ + 1;
  *flag_ = *timed_out_ = 0;
}

Timer::~Timer() {
  detail::DeviceGuard g(gpu_, false);
  for (std::size_t i = 0; i < streams_.size(); ++i) {
    (void)cudaStreamSynchronize(streams_[i]);
    (void)cudaEventDestroy(start_[i]);
    (void)cudaEventDestroy(stop_[i]);
    (void)cudaStreamDestroy(streams_[i]);
  }
  (void)cudaFreeHost(flag_);
}

double Timer::span() const {
  float first = 0, last = 0;
  for (std::size_t i = 0; i < streams_.size(); ++i) {
    float a = 0, b = 0;
    cuda_check(cudaEventElapsedTime(&a, start_[0], start_[i]), "cudaEventElapsedTime");
    cuda_check(cudaEventElapsedTime(&b, start_[0], stop_[i]), "cudaEventElapsedTime");
    first = std::min(first, a);
    last = std::max(last, b);
  }
  return last - first;
}

double Timer::held(const std::function<void(int)>& work) {
  detail::DeviceGuard g(gpu_);
  __atomic_store_n(flag_, 0u, __ATOMIC_RELEASE);
  *timed_out_ = 0;
  std::uint32_t* dflag = nullptr;
  cuda_check(cudaHostGetDevicePointer(&dflag, flag_, 0), "cudaHostGetDevicePointer(flag)");
  const int n = static_cast<int>(streams_.size());
  for (int i = 0; i < n; ++i) {
    hold_kernel<<<1, 1, 0, streams_[i]>>>(dflag, 2'000'000'000ull, dflag + 1);
    cuda_check(cudaGetLastError(), "hold kernel");
  }
  try {
    for (int i = 0; i < n; ++i) cuda_check(cudaEventRecord(start_[i], streams_[i]), "cudaEventRecord");
    for (int i = 0; i < n; ++i) work(i);
    for (int i = 0; i < n; ++i) cuda_check(cudaEventRecord(stop_[i], streams_[i]), "cudaEventRecord");
  } catch (...) {
    __atomic_store_n(flag_, 1u, __ATOMIC_RELEASE);  // let the hold kernels go before reporting
    throw;
  }
  __atomic_store_n(flag_, 1u, __ATOMIC_RELEASE);
  for (int i = 0; i < n; ++i) wait_event(stop_[i], "timed region");
  if (__atomic_load_n(timed_out_, __ATOMIC_ACQUIRE) != 0)
    throw Error("the hold kernel ran out of its 2 s budget before the work was enqueued");
  return span();
}

double Timer::plain(const std::function<void(int)>& work) {
  detail::DeviceGuard g(gpu_);
  const int n = static_cast<int>(streams_.size());
  for (int i = 0; i < n; ++i) {
    cuda_check(cudaEventRecord(start_[i], streams_[i]), "cudaEventRecord");
    work(i);
    cuda_check(cudaEventRecord(stop_[i], streams_[i]), "cudaEventRecord");
  }
  for (int i = 0; i < n; ++i) wait_event(stop_[i], "plain measurement");
  return span();
}

}  // namespace gv::scope
