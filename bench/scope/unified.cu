// Family 3, unified memory: demand migration (the destination touches one byte per page after
// the pages were prefetched to the source; Comm|Scope's UM_Demand, once UM_Coherence), prefetch
// in each direction, and the fault latency of a pointer chase through pages left on the host.
#include <chrono>
#include <cstdio>
#include <thread>

#include "family.hpp"
#include "host_env.hpp"

namespace gv::scope {
namespace {

constexpr std::size_t kPage = 4096;
constexpr std::size_t kChaseStride = 128 << 10;  // Comm|Scope's UM_Latency stride

cudaMemLocation on_gpu(int g) { return cudaMemLocation{cudaMemLocationTypeDevice, g}; }
cudaMemLocation on_host() { return cudaMemLocation{cudaMemLocationTypeHost, 0}; }

void prefetch_sync(const Buffer& b, cudaMemLocation to, int gpu) {
  detail::DeviceGuard g(gpu);
  cuda_check(cudaMemPrefetchAsync(b.device(), b.bytes(), to, 0, nullptr), "cudaMemPrefetchAsync");
  cuda_check(cudaStreamSynchronize(nullptr), "cudaMemPrefetchAsync");
}

/// Lane 0 of each warp... every thread writes one byte of its own page.
__global__ void touch_pages(unsigned char* p, std::size_t pages, unsigned char v) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < pages; i += std::size_t{gridDim.x} * blockDim.x)
    p[i * kPage] = v;
}

__global__ void chase(const std::uint64_t* p, std::size_t steps, std::uint64_t* end) {
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < steps; ++i) at = p[at];
  *end = at;
}

/// The GPU touches pages that were prefetched to `from` (host or another GPU).
class DemandToGpu final : public Case {
 public:
  DemandToGpu(int gpu, int from_gpu, std::uint64_t bytes)
      : gpu_(gpu), from_(from_gpu), buf_(Mem::kManaged, bytes, gpu) {}
  std::uint64_t bytes() const override { return buf_.bytes(); }
  void before() override { prefetch_sync(buf_, from_ < 0 ? on_host() : on_gpu(from_), gpu_); }
  void enqueue(int, cudaStream_t s) override {
    const std::size_t pages = buf_.bytes() / kPage;
    touch_pages<<<static_cast<unsigned>((pages + 255) / 256), 256, 0, s>>>(static_cast<unsigned char*>(buf_.device()), pages, ++v_);
    cuda_check(cudaGetLastError(), "touch kernel");
  }
  void verify() override {
    cuda_check(cudaDeviceSynchronize(), "touch kernel");
    const auto* p = static_cast<const unsigned char*>(buf_.host());
    for (std::size_t i = 0; i < buf_.bytes() / kPage; ++i)
      if (p[i * kPage] != v_) throw Error("demand migration: page " + std::to_string(i) + " lacks the GPU's write");
  }

 private:
  int gpu_, from_;
  Buffer buf_;
  unsigned char v_ = 0;
};

class Prefetch final : public Case {
 public:
  Prefetch(int gpu, bool to_gpu, std::uint64_t bytes) : gpu_(gpu), to_gpu_(to_gpu), buf_(Mem::kManaged, bytes, gpu) {
    fill_host(buf_.host(), bytes, 0xf0);
    want_ = checksum_host(buf_.host(), bytes);
  }
  std::uint64_t bytes() const override { return buf_.bytes(); }
  void before() override { prefetch_sync(buf_, to_gpu_ ? on_host() : on_gpu(gpu_), gpu_); }
  void enqueue(int, cudaStream_t s) override {
    cuda_check(cudaMemPrefetchAsync(buf_.device(), buf_.bytes(), to_gpu_ ? on_gpu(gpu_) : on_host(), 0, s),
               "cudaMemPrefetchAsync");
  }
  void verify() override {
    prefetch_sync(buf_, on_host(), gpu_);
    if (checksum_host(buf_.host(), buf_.bytes()) != want_) throw Error("prefetch changed the data");
  }

 private:
  int gpu_;
  bool to_gpu_;
  Buffer buf_;
  std::uint64_t want_ = 0;
};

/// One GPU thread follows a chain through pages that start on the host: one fault per step.
class FaultChase final : public Case {
 public:
  FaultChase(int gpu, std::uint64_t bytes) : gpu_(gpu), buf_(Mem::kManaged, bytes, gpu), end_(Mem::kPinned, 8, gpu) {
    auto* w = static_cast<std::uint64_t*>(buf_.host());
    steps_ = bytes / kChaseStride;
    const std::size_t stride = kChaseStride / 8;
    for (std::size_t i = 0; i < steps_; ++i) w[i * stride] = ((i + 1) % steps_) * stride;
  }
  std::uint64_t bytes() const override { return steps_ * 8; }
  void before() override { prefetch_sync(buf_, on_host(), gpu_); }
  void enqueue(int, cudaStream_t s) override {
    chase<<<1, 1, 0, s>>>(static_cast<const std::uint64_t*>(buf_.device()), steps_,
                          static_cast<std::uint64_t*>(end_.device()));
    cuda_check(cudaGetLastError(), "chase kernel");
  }
  void verify() override {
    cuda_check(cudaDeviceSynchronize(), "chase kernel");
    if (*static_cast<std::uint64_t*>(end_.host()) != 0) throw Error("fault chase did not come back to its start");
  }
  void counters(benchmark::State& st, double s) const override {
    st.counters["latency_ns"] = s * 1e9 / static_cast<double>(steps_);
  }

 private:
  int gpu_;
  Buffer buf_, end_;
  std::size_t steps_ = 0;
};

/// CPU threads touch pages prefetched to the GPU (host wall time: the faults are the CPU's).
void demand_to_host(benchmark::State& st, const Where& w, int threads) {
  NumaScope pin(w.numa);
  const std::uint64_t bytes = std::uint64_t{1} << st.range(0);
  Buffer buf(Mem::kManaged, bytes, w.gpu);
  const std::size_t pages = bytes / kPage;
  auto* p = static_cast<volatile unsigned char*>(buf.host());
  unsigned char v = 0;
  for (auto _ : st) {
    prefetch_sync(buf, on_gpu(w.gpu), w.gpu);
    ++v;
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([=] {
        for (std::size_t i = static_cast<std::size_t>(t); i < pages; i += static_cast<std::size_t>(threads)) p[i * kPage] = v;
      });
    for (auto& th : pool) th.join();
    st.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  for (std::size_t i = 0; i < pages; ++i)
    if (p[i * kPage] != v) return st.SkipWithError("demand migration to the host lost a write");
  st.counters["bytes"] = static_cast<double>(bytes);
  st.counters["cuda_id"] = w.gpu;
  st.counters["numa_id"] = w.numa;
  st.counters["threads"] = threads;
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations() * bytes));
}

}  // namespace

void register_unified(const Plan& plan) {
  constexpr int kUmMax = 30;  // never more managed memory than a card has free
  for (std::size_t i = 0; i < plan.gpus.size(); ++i) {
    const Where w{plan.numa_of_gpu[i], plan.gpus[i]};
    add_sized(plan, "UM_Demand_HostToGPU", w, [](const Where& x, std::uint64_t n) {
      return std::make_unique<DemandToGpu>(x.gpu, -1, n);
    }, 12, kUmMax);
    add_sized(plan, "UM_Prefetch_HostToGPU", w, [](const Where& x, std::uint64_t n) {
      return std::make_unique<Prefetch>(x.gpu, true, n);
    }, 12, kUmMax);
    add_sized(plan, "UM_Prefetch_GPUToHost", w, [](const Where& x, std::uint64_t n) {
      return std::make_unique<Prefetch>(x.gpu, false, n);
    }, 12, kUmMax);
    add_sized(plan, "UM_Latency_HostToGPU", w, [](const Where& x, std::uint64_t n) {
      return std::make_unique<FaultChase>(x.gpu, n);
    }, 20, 26);
    const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (const int t : {1, 4, 16}) {
      if (t > hw) break;
      auto* b = benchmark::RegisterBenchmark((row_name(t == 1 ? "UM_Demand_GPUToHost" : "UM_Demand_GPUToHostMt", w)).c_str(),
                                             [=](benchmark::State& st) {
                                               try {
                                                 demand_to_host(st, w, t);
                                               } catch (const std::exception& e) {
                                                 st.SkipWithError(e.what());
                                               }
                                             });
      b->UseManualTime()->Unit(benchmark::kMicrosecond)->ArgNames({"log2(N)", "threads"});
      if (!plan.min_time_given) b->MinTime(0.05);
      for (int k = std::max(12, plan.opt.log2_lo); k <= std::min(kUmMax, plan.opt.log2_hi); k += plan.opt.log2_step)
        b->Args({k, t});
    }
  }
  const auto pairs = peer_pairs(plan);
  if (pairs.empty()) {
    std::fprintf(stderr, "gv_scope: UM_Demand_GPUToGPU not registered: it needs two GPUs\n");
    return;
  }
  for (const auto& [a, b] : pairs)
    add_sized(plan, "UM_Demand_GPUToGPU", Where{0, b, a}, [](const Where& x, std::uint64_t n) {
      return std::make_unique<DemandToGpu>(x.gpu, x.peer, n);
    }, 12, kUmMax);
}

}  // namespace gv::scope
