// Family 4, latency and overheads: dependent loads by one GPU thread through device, pinned
// host and peer memory (a random cycle over cache lines, so no prefetcher helps), and what
// Himeno's synchronisation modes pay per step: a kernel launch, a CUDA-graph launch, a stream
// synchronisation, and launches from the device (dynamic parallelism, device graphs).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>

#include "device_launch.hpp"
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

/// A graph of what `nodes` enqueues (captured), instantiated with `flags` and uploaded.
cudaGraphExec_t instantiate(int gpu, unsigned long long flags, const std::function<cudaError_t(cudaStream_t)>& nodes) {
  detail::DeviceGuard g(gpu);
  cudaStream_t s = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaGraph_t gr = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  if (e == cudaSuccess) {
    const cudaError_t launched = nodes(s);
    e = cudaStreamEndCapture(s, &gr);  // ends the capture whatever the launch said
    if (launched != cudaSuccess) e = launched;
  }
  if (e == cudaSuccess) e = cudaGraphInstantiate(&exec, gr, flags);
  if (gr != nullptr) (void)cudaGraphDestroy(gr);
  if (e == cudaSuccess) e = cudaGraphUpload(exec, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  (void)cudaStreamDestroy(s);
  if (e != cudaSuccess && exec != nullptr) (void)cudaGraphExecDestroy(exec);
  cuda_check(e, flags != 0 ? "a device graph (capture, cudaGraphInstantiateFlagDeviceLaunch, cudaGraphUpload)"
                           : "a graph (capture, cudaGraphInstantiate, cudaGraphUpload)");
  return exec;
}

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
    exec_ = instantiate(gpu, 0, [](cudaStream_t s) {
      empty_kernel<<<1, 1, 0, s>>>();
      return cudaGetLastError();
    });
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

/// Launches from the device, as Himeno's device-launch mode makes them: a chain of kChain grids
/// (or graph runs), each tail-launching the next, or one thread firing and forgetting kChain
/// grids (kGraphFanOut graphs: a graph may fire and forget 120 per run). Timed from the host's
/// one launch to the last grid's end and divided by the launches, so the host's launch adds
/// about 2 ns to each. Every grid counts itself; verify() checks the count and the first device
/// runtime error.
enum class DevLaunch : std::uint8_t { kKernelTail, kKernelFireAndForget, kGraphTail, kGraphFireAndForget };

class DeviceLaunches final : public Case {
 public:
  static constexpr std::uint32_t kChain = 1000, kGraphFanOut = 100;
  DeviceLaunches(int gpu, DevLaunch how) : how_(how), tally_(Mem::kDevice, sizeof(DeviceTally), gpu) {
    detail::DeviceGuard g(gpu);
    cuda_check(cudaMemset(tally_.device(), 0, sizeof(DeviceTally)), "cudaMemset(tally)");
    try {
      make_graphs(gpu);
    } catch (...) {
      for (cudaGraphExec_t e : graphs_) (void)cudaGraphExecDestroy(e);
      throw;
    }
  }
  ~DeviceLaunches() override {
    for (cudaGraphExec_t e : graphs_) (void)cudaGraphExecDestroy(e);
  }
  std::uint64_t bytes() const override { return 0; }

  void enqueue(int, cudaStream_t s) override {
    switch (how_) {
      case DevLaunch::kKernelTail: cuda_check(launch_kernel_tail_chain(tally(), kChain, s), "tail-launch chain"); break;
      case DevLaunch::kKernelFireAndForget:
        cuda_check(launch_kernel_fire_and_forget(tally(), kChain, s), "fire-and-forget parent");
        break;
      case DevLaunch::kGraphTail:
      case DevLaunch::kGraphFireAndForget: cuda_check(cudaGraphLaunch(graphs_.front(), s), "cudaGraphLaunch(device graph)"); break;
    }
    ++enqueued_;
  }
  void verify() override {
    DeviceTally t;
    cuda_check(cudaMemcpy(&t, tally_.device(), sizeof(t), cudaMemcpyDeviceToHost), "cudaMemcpy(tally)");
    if (t.error != 0)
      throw Error(std::string("a device-side launch failed: ") + cudaGetErrorString(static_cast<cudaError_t>(t.error)));
    const std::uint64_t want = enqueued_ * launches();
    if (t.ran != want)
      throw Error("device-side launches: " + std::to_string(t.ran) + " grids ran by the stop event, " +
                  std::to_string(want) + " were launched");
  }
  void counters(benchmark::State& st, double s) const override {
    st.counters["per_launch_ns"] = s * 1e9 / launches();
    st.counters["launches"] = launches();
  }

 private:
  std::uint32_t launches() const { return how_ == DevLaunch::kGraphFireAndForget ? kGraphFanOut : kChain; }
  DeviceTally* tally() const { return static_cast<DeviceTally*>(tally_.device()); }
  void make_graphs(int gpu) {
    auto* t = tally();
    if (how_ == DevLaunch::kGraphTail) {
      graphs_.push_back(instantiate(gpu, cudaGraphInstantiateFlagDeviceLaunch,
                                    [t](cudaStream_t s) { return launch_graph_chain_node(t, kChain, s); }));
    } else if (how_ == DevLaunch::kGraphFireAndForget) {
      for (std::uint32_t i = 0; i < kGraphFanOut; ++i)
        graphs_.push_back(instantiate(gpu, cudaGraphInstantiateFlagDeviceLaunch,
                                      [t](cudaStream_t s) { return launch_graph_child_node(t, s); }));
      children_ = Buffer(Mem::kDevice, sizeof(cudaGraphExec_t) * kGraphFanOut, gpu);
      cuda_check(cudaMemcpy(children_.device(), graphs_.data(), children_.bytes(), cudaMemcpyHostToDevice),
                 "cudaMemcpy(children)");
      // The launching graph is a host graph (device graphs may not use dynamic parallelism); the
      // stream's launch of it completes once the children it fired have.
      const auto* kids = static_cast<const cudaGraphExec_t*>(children_.device());
      graphs_.insert(graphs_.begin(), instantiate(gpu, 0, [t, kids](cudaStream_t s) {
                       return launch_graph_scheduler_node(t, kids, kGraphFanOut, s);
                     }));
    }
  }

  DevLaunch how_;
  Buffer tally_, children_;
  std::vector<cudaGraphExec_t> graphs_;  ///< the graph the host launches first, then its children
  std::uint64_t enqueued_ = 0;
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
    for (const auto& [name, how] : {std::pair{"cudart_kernel_TailLaunch_Device", DevLaunch::kKernelTail},
                                    std::pair{"cudart_kernel_FireAndForget_Device", DevLaunch::kKernelFireAndForget},
                                    std::pair{"cudart_cudaGraphLaunch_TailLaunch_Device", DevLaunch::kGraphTail},
                                    std::pair{"cudart_cudaGraphLaunch_FireAndForget_Device", DevLaunch::kGraphFireAndForget}})
      add_single(plan, name, w, [how](const Where& x, std::uint64_t) {
        return std::make_unique<DeviceLaunches>(x.gpu, how);
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
