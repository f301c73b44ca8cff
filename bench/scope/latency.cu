// Family 4, latency and overheads: dependent loads by one GPU thread through device, pinned
// host and peer memory (a random cycle over cache lines, so no prefetcher helps), and what
// Himeno's synchronisation modes pay per step: a kernel launch, a CUDA-graph launch, a stream
// synchronisation.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>

#include "family.hpp"

namespace gv::scope {
namespace {

constexpr std::size_t kSteps = 4096;
constexpr std::size_t kLine = 64;

__global__ void chase_lines(const std::uint64_t* p, std::size_t steps, std::uint64_t* end) {
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < steps; ++i) at = p[at];
  *end = at;
}

__global__ void empty_kernel() {}

class LoadChase final : public Case {
 public:
  LoadChase(Mem kind, int gpu, int owner, std::uint64_t bytes)
      : buf_(kind, bytes, owner), end_(Mem::kPinned, 8, gpu) {
    const std::size_t lines = bytes / kLine, stride = kLine / 8;
    std::vector<std::uint64_t> order(lines);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin() + 1, order.end(), std::mt19937_64(0x1a7e));
    std::vector<std::uint64_t> w(bytes / 8, 0);
    for (std::size_t i = 0; i < lines; ++i) w[order[i] * stride] = order[(i + 1) % lines] * stride;
    // The word reached after kSteps steps from word 0: what the kernel must report.
    want_ = order[kSteps % lines] * stride;
    detail::DeviceGuard g(owner);
    cuda_check(cudaMemcpy(buf_.device(), w.data(), bytes, cudaMemcpyDefault), "cudaMemcpy(chain)");
  }
  std::uint64_t bytes() const override { return kSteps * 8; }
  void enqueue(int, cudaStream_t s) override {
    chase_lines<<<1, 1, 0, s>>>(static_cast<const std::uint64_t*>(buf_.device()), kSteps,
                                static_cast<std::uint64_t*>(end_.device()));
    cuda_check(cudaGetLastError(), "chase kernel");
  }
  void verify() override {
    if (*static_cast<volatile std::uint64_t*>(end_.host()) != want_) throw Error("pointer chase ended on the wrong line");
  }
  void counters(benchmark::State& st, double s) const override { st.counters["latency_ns"] = s * 1e9 / kSteps; }

 private:
  Buffer buf_, end_;
  std::uint64_t want_ = 0;
};

/// kLaunches empty kernels (or graph launches) back to back in the held stream: the GPU's time
/// per launch, with the host's enqueue cost kept out.
class Launches final : public Case {
 public:
  static constexpr int kLaunches = 1000;
  Launches(int gpu, bool graph) : graph_(graph) {
    if (!graph) return;
    detail::DeviceGuard g(gpu);
    cudaStream_t s = nullptr;
    cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    cuda_check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    empty_kernel<<<1, 1, 0, s>>>();
    cudaGraph_t gr = nullptr;
    cuda_check(cudaStreamEndCapture(s, &gr), "cudaStreamEndCapture");
    cuda_check(cudaGraphInstantiate(&exec_, gr, 0), "cudaGraphInstantiate");
    (void)cudaGraphDestroy(gr);
    (void)cudaStreamDestroy(s);
  }
  ~Launches() override {
    if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
  }
  std::uint64_t bytes() const override { return 0; }
  void enqueue(int, cudaStream_t s) override {
    for (int i = 0; i < kLaunches; ++i) {
      if (graph_)
        cuda_check(cudaGraphLaunch(exec_, s), "cudaGraphLaunch");
      else
        empty_kernel<<<1, 1, 0, s>>>();
    }
    cuda_check(cudaGetLastError(), "empty kernel");
  }
  void counters(benchmark::State& st, double s) const override { st.counters["per_launch_ns"] = s * 1e9 / kLaunches; }

 private:
  bool graph_;
  cudaGraphExec_t exec_ = nullptr;
};

/// The host's cost of one call (Comm|Scope's cudart_* rows): wall time, the stream idle.
void host_call(benchmark::State& st, int gpu, int what) {
  detail::DeviceGuard g(gpu);
  cudaStream_t s = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    if (what == 0) {
      empty_kernel<<<1, 1, 0, s>>>();
    } else {
      cuda_check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    }
    st.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (what == 0) cuda_check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  }
  cuda_check(cudaGetLastError(), "empty kernel");
  st.counters["cuda_id"] = gpu;
  (void)cudaStreamDestroy(s);
}

}  // namespace

void register_latency(const Plan& plan) {
  for (std::size_t i = 0; i < plan.gpus.size(); ++i) {
    const Where w{plan.numa_of_gpu[i], plan.gpus[i]};
    add_sized(plan, "Latency_GPU", w, [](const Where& x, std::uint64_t n) {
      return std::make_unique<LoadChase>(Mem::kDevice, x.gpu, x.gpu, n);
    }, 16);
    add_sized(plan, "Latency_Pinned", w, [](const Where& x, std::uint64_t n) {
      return std::make_unique<LoadChase>(Mem::kPinned, x.gpu, x.gpu, n);
    }, 16, 24);
    add_single(plan, "cudart_kernel_Device", w, [](const Where& x, std::uint64_t) {
      return std::make_unique<Launches>(x.gpu, false);
    }, true);
    add_single(plan, "cudart_cudaGraphLaunch_Device", w, [](const Where& x, std::uint64_t) {
      return std::make_unique<Launches>(x.gpu, true);
    }, true);
    const int gpu = plan.gpus[i];
    add_host_timed(plan, row_name("cudart_kernel", w), [gpu](benchmark::State& st) { host_call(st, gpu, 0); });
    add_host_timed(plan, row_name("cudart_cudaStreamSynchronize", w), [gpu](benchmark::State& st) { host_call(st, gpu, 1); });
  }
  for (const auto& [a, b] : peer_pairs(plan)) {
    add_sized(plan, "Latency_GPUToGPUPeer", Where{0, a, b}, [](const Where& x, std::uint64_t n) {
      peer_access(x.gpu, x.peer, true);
      return std::make_unique<LoadChase>(Mem::kDevice, x.gpu, x.peer, n);
    }, 16, 24);
  }
}

}  // namespace gv::scope
