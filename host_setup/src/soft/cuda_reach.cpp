// cuda_reach.hpp in CUDA builds: the CPU engine's reach into GPU memory of this process, and a
// host arena mapped into the GPUs.
#include "cuda_reach.hpp"

#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include <gpuverbs/ib/mlx5_format.hpp>

#include "../cuda_util.hpp"
#include "../provider.hpp"

namespace gv::detail {
namespace {

class Ranges final : public GpuRanges {
 public:
  void add(std::uintptr_t begin, std::size_t len, int gpu) override {
    std::unique_lock lk(mu_);
    ranges_.push_back(Range{begin, begin + len, gpu});
    any_.store(true, std::memory_order_release);
  }
  void remove(std::uintptr_t begin, std::size_t len) override {
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
  /// Takes a shared lock and scans the registered ranges (few, in practice).
  int find(const void* a, const void* b) const {
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

Ranges g_ranges;

/// Serialises the CPU engines' read-modify-writes of atomics on GPU memory, process-wide: they
/// are atomic with respect to each other (IBV_ATOMIC_HCA), not to GPU threads' own atomics.
std::mutex g_atomics_mu;

class CudaMover final : public GpuMover {
 public:
  explicit CudaMover(Report report) : report_(std::move(report)) {}
  ~CudaMover() override {
    for (std::size_t g = 0; g < streams_.size(); ++g) {
      if (streams_[g] == nullptr) continue;
      (void)cudaSetDevice(static_cast<int>(g));
      (void)cudaStreamDestroy(streams_[g]);  // fails harmlessly if CUDA is already unloading
    }
    (void)cudaGetLastError();
  }

  int find(const void* a, const void* b) const override { return g_ranges.any() ? g_ranges.find(a, b) : -1; }
  void set_current_qp(std::uint32_t qpn) override { qpn_ = qpn; }

  /// cudaMemcpyAsync on the engine's own non-blocking stream of `gpu`, then waits for it. Never
  /// the legacy default stream and never cudaMemcpy: a kernel on the legacy stream that waits
  /// for a completion would wait for us while we waited for it.
  void copy(int gpu, void* d, const void* s, std::uint64_t n, bool publish) override {
    if (fault_ != 0) return;  // the WQE has failed already: move nothing more for it
    const cudaStream_t st = stream(gpu);
    if (st == nullptr) return;
    auto* dst = static_cast<std::byte*>(d);
    const auto* src = static_cast<const std::byte*>(s);
    const std::uint64_t body = publish ? n - 1 : n;
    if (body != 0 && !move(st, dst, src, body)) return;
    if (publish) (void)move(st, dst + n - 1, src + n - 1, 1);  // after the body is complete
  }

  std::uint64_t fetch_add(int gpu, std::uint64_t* t, std::uint64_t v) override {
    return rmw(gpu, t, [v](std::uint64_t cur, std::uint64_t& next) {
      next = cur + v;
      return true;
    });
  }
  std::uint64_t compare_swap(int gpu, std::uint64_t* t, std::uint64_t expected, std::uint64_t desired) override {
    return rmw(gpu, t, [=](std::uint64_t cur, std::uint64_t& next) {
      next = desired;
      return cur == expected;
    });
  }

  std::uint8_t take_fault() override {
    const std::uint8_t f = fault_;
    fault_ = 0;
    return f;
  }

 private:
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
  std::uint64_t rmw(int gpu, std::uint64_t* t, F f) {
    if (fault_ != 0) return 0;
    const cudaStream_t st = stream(gpu);
    if (st == nullptr) return 0;
    std::lock_guard lk(g_atomics_mu);
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
    fault_ = ib::mlx5::kSyndLocalProtErr;
    if (report_)
      report_(qpn_, "QP " + hex(qpn_) + ": the CPU engine's " + what + " failed (" + cuda_error_text(e) +
                        "); the WQE completed with a local protection error and the QP is in error. "
                        "Is the registered GPU memory still allocated?");
  }

  Report report_;
  std::vector<cudaStream_t> streams_;  ///< by GPU; the engine's own non-blocking streams
  int cur_gpu_ = -1;
  std::uint32_t qpn_ = 0;
  std::uint8_t fault_ = 0;
};

class CudaMapping final : public GpuMapping {
 public:
  explicit CudaMapping(void* base) : base_(base) {}
  ~CudaMapping() override { (void)cudaHostUnregister(base_); }
  void* alloc_counters(const char* who, std::size_t bytes) override {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess || cudaMemset(p, 0, bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      throw Error(std::string(who) + ": cannot allocate queue counters in GPU memory");
    }
    return p;
  }
  void free_counters(void* p) override { (void)cudaFree(p); }

 private:
  void* base_;
};

}  // namespace

int gpu_holding(const void* addr) {
  cudaPointerAttributes at{};
  const cudaError_t e = cudaPointerGetAttributes(&at, addr);
  (void)cudaGetLastError();
  return e == cudaSuccess && at.type == cudaMemoryTypeDevice ? at.device : -1;
}

GpuRanges* gpu_ranges() { return &g_ranges; }

std::unique_ptr<GpuMover> make_gpu_mover(GpuMover::Report report) { return std::make_unique<CudaMover>(std::move(report)); }

std::unique_ptr<GpuMapping> map_to_gpus(void* base, std::size_t size) {
  require_gpus("Device::open(soft): map_to_gpus");
  cuda_check(cudaHostRegister(base, size, cudaHostRegisterMapped | cudaHostRegisterPortable),
             "Device::open(soft): cudaHostRegister of the arena");
  auto m = std::make_unique<CudaMapping>(base);
  void* dptr = nullptr;
  const cudaError_t e = cudaHostGetDevicePointer(&dptr, base, 0);
  if (e != cudaSuccess || dptr != base)
    throw Error("Device::open(soft): this GPU cannot use host pointers of registered memory "
                "(no unified addressing); kernels could not use the handles");
  return m;
}

}  // namespace gv::detail
