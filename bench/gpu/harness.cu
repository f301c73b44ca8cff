#include "harness.hpp"

#include <cstdio>

namespace gv::bench {

JsonLog g_json;
std::uint32_t g_engine_warps = 4;
bool g_owner = false;
ProviderArgs g_provider;

const char* name(Mode m) {
  switch (m) {
    case Mode::kGpuQGpu: return "gpu-qgpu";
    case Mode::kGpuQHost: return "gpu-qhost";
    case Mode::kHostControlled: return "host-controlled";
    case Mode::kHostAssisted: return "host-assisted";
    case Mode::kCpuThreads: return "cpu-threads";
  }
  return "?";
}

Status serve_proxy(const Endpoint& ep, const WrPlan& plan, ProxyChannel* ch, const std::atomic<bool>& stop) {
  DirectTx tx(ep, plan);
  const auto publish = [](Status st, std::uint64_t* count, std::uint64_t v) {
    if (st == Status::kOk) gv::sync::store_release(count, v);
    return st == Status::kEmpty ? Status::kOk : st;
  };
  Status st = tx.start();
  std::uint64_t posted = 0;
  while (st == Status::kOk && !stop.load(std::memory_order_acquire)) {
    const std::uint64_t requested = gv::sync::load_acquire(&ch->requested);
    while (st == Status::kOk && posted < requested && posted < tx.done() + kWindow) st = tx.post(posted++);
    if (st == Status::kOk) {
      const Status r = tx.reap(false);
      st = publish(r, &ch->done, tx.done());
    }
    if (st == Status::kOk && plan.receives) {
      const Status r = tx.receive(false);
      st = publish(r, &ch->received, tx.received());
    }
    gv::sync::spin_pause();
  }
  if (st != Status::kOk) gv::sync::store_release(&ch->failed, std::uint32_t{1});
  return st;
}

void* alloc_mapped_bytes(std::size_t bytes) {
  void* p = nullptr;
  GV_BENCH_CUDA(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  void* dp = nullptr;
  if (cudaHostGetDevicePointer(&dp, p, 0) != cudaSuccess || dp != p) {
    (void)cudaGetLastError();
    (void)cudaFreeHost(p);
    throw std::runtime_error("pinned host memory is not mapped at its host address in the GPU (no unified addressing)");
  }
  std::memset(p, 0, bytes);
  return p;
}

void enable_peer_access(int from, int to) {
  GV_BENCH_CUDA(cudaSetDevice(from));
  const cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled)
    (void)cudaGetLastError();
  else
    GV_BENCH_CUDA(e);
}

// ---- Harness ------------------------------------------------------------------------------------

Harness::Harness(int gpus, std::uint64_t samples_per_role) : cap(samples_per_role) {
  try {
    for (int g = 0; g < gpus; ++g) {
      GV_BENCH_CUDA(cudaSetDevice(g));
      cudaStream_t s = nullptr;
      GV_BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      streams.push_back(s);
    }
    GV_BENCH_CUDA(cudaSetDevice(0));
    status = alloc_mapped<Status>(kMaxRoles);
    samples = alloc_mapped<std::uint64_t>(kMaxRoles * cap);
    chans = alloc_mapped<ProxyChannel>(kMaxRoles);
    staging = alloc_mapped<std::uint8_t>(kStaging);
  } catch (...) {
    release();
    throw;
  }
}

void Harness::release() {
  for (void* p : {static_cast<void*>(status), static_cast<void*>(samples), static_cast<void*>(chans),
                  static_cast<void*>(staging)})
    if (p) (void)cudaFreeHost(p);
  for (std::size_t g = 0; g < streams.size(); ++g) {
    (void)cudaSetDevice(static_cast<int>(g));
    (void)cudaStreamDestroy(streams[g]);
  }
  (void)cudaSetDevice(0);
}

// ---- Testbed ------------------------------------------------------------------------------------

Testbed::Testbed(Mode mode, int gpus, const Shape& s, Harness& h)
    : mode_(mode), gpus_(mode == Mode::kCpuThreads ? 1 : gpus), h_(h) {
  const int ends = 2 * s.pairs;
  const int ndev = mode_ == Mode::kGpuQGpu ? gpus_ : 1;
  // host-assisted kernels use the buffers, but the proxies use the handles on the host: the
  // device stays unmapped (its queue counters in host memory), the buffers are mapped
  // pinned memory of ours, registered from outside the device's arena.
  const bool pinned_buffers = mode_ == Mode::kHostAssisted;
  std::vector<std::unique_ptr<gv::Device>> devs;
  for (int d = 0; d < ndev; ++d) {
    gv::DeviceOptions o;
    o.arena_bytes = arena_bytes(s, ends / ndev, !pinned_buffers && mode_ != Mode::kHostControlled);
    if (mode_ == Mode::kGpuQGpu) {
      o.engine = gv::DeviceOptions::Engine::kGpu;
      o.gpu = d;
      o.engine_warps = g_engine_warps;
    }
    o.map_to_gpus = mode_ == Mode::kGpuQHost;
    if (!g_provider.nic()) {
      devs.push_back(gv::Device::open("soft", o));
      continue;
    }
    // A NIC: two QPs of one port connected to each other; its queues are in host memory.
    if (mode_ == Mode::kGpuQGpu)
      throw gv::Error("gpu-qgpu: --provider " + g_provider.provider +
                      " has its queues in host memory (gpu-qhost runs the kernels against them)");
    devs.push_back(gv::Device::open(g_provider.open_name(), g_provider.options(o)));
    std::printf("# %s: %s\n", name(mode_), devs.back()->describe().c_str());
  }
  QpBed::Buffers buffers;
  if (pinned_buffers) {
    buffers.alloc = [](int, std::size_t bytes) { return alloc_mapped<std::uint8_t>(bytes); };
    buffers.free = [](int, std::uint8_t* p) { (void)cudaFreeHost(p); };
  }
  if (mode_ == Mode::kHostControlled) {
    // cudaMalloc on the endpoint's GPU, registered with the CPU engine (no GPU engine runs:
    // CUDA allocations are free to come and go). Each endpoint's kernels get a stream there.
    buffers.alloc = [this](int e, std::size_t bytes) {
      GV_BENCH_CUDA(cudaSetDevice(gpu_of(e)));
      void* p = nullptr;
      GV_BENCH_CUDA(cudaMalloc(&p, bytes));
      return static_cast<std::uint8_t*>(p);
    };
    buffers.free = [](int, std::uint8_t* p) { (void)cudaFree(p); };
  }
  // gpu-qhost: the provider places a queue's poster/poller counters in memory of the current
  // GPU; make that the GPU whose kernel posts and polls.
  const auto select = [this](int e) {
    if (mode_ == Mode::kGpuQHost) GV_BENCH_CUDA(cudaSetDevice(gpu_of(e)));
  };
  try {
    if (mode_ == Mode::kHostControlled) {
      // Its host threads wait for kernels, and the CPU engine for its copies: they spin, as a
      // latency-minded user's would, instead of the blocking waits main() sets to leave the
      // cores to the CPU engine in the other modes (restored by teardown()).
      set_schedule(cudaDeviceScheduleSpin);
      consumed_ = alloc_mapped<std::uint32_t>(static_cast<std::size_t>(ends));
      for (int e = 0; e < ends; ++e) {
        GV_BENCH_CUDA(cudaSetDevice(gpu_of(e)));
        cudaStream_t st = nullptr;
        GV_BENCH_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
        ctl_streams_.push_back(st);
      }
    }
    bed_.emplace(std::move(devs), s, buffers, select);
  } catch (...) {
    teardown();
    throw;
  }
  GV_BENCH_CUDA(cudaSetDevice(0));
}

void Testbed::put(int e, std::size_t off, const std::uint8_t* src, std::size_t n) {
  if (!buffers_on_gpu()) return bed_->put(e, off, src, n);
  std::uint8_t* dst = bed_->buffer(e) + off;
  const int g = gpu_of(e);
  GV_BENCH_CUDA(cudaSetDevice(g));
  for (std::size_t i = 0; i < n; i += Harness::kStaging) {
    const std::size_t c = std::min(Harness::kStaging, n - i);
    std::memcpy(h_.staging, src + i, c);
    GV_BENCH_CUDA(cudaMemcpyAsync(dst + i, h_.staging, c, cudaMemcpyHostToDevice, h_.streams[static_cast<std::size_t>(g)]));
    GV_BENCH_CUDA(cudaStreamSynchronize(h_.streams[static_cast<std::size_t>(g)]));
  }
}

std::vector<std::uint8_t> Testbed::get(int e, std::size_t off, std::size_t n) {
  if (!buffers_on_gpu()) return bed_->get(e, off, n);
  const std::uint8_t* src = bed_->buffer(e) + off;
  std::vector<std::uint8_t> v(n);
  const int g = gpu_of(e);
  GV_BENCH_CUDA(cudaSetDevice(g));
  for (std::size_t i = 0; i < n; i += Harness::kStaging) {
    const std::size_t c = std::min(Harness::kStaging, n - i);
    GV_BENCH_CUDA(cudaMemcpyAsync(h_.staging, src + i, c, cudaMemcpyDeviceToHost, h_.streams[static_cast<std::size_t>(g)]));
    GV_BENCH_CUDA(cudaStreamSynchronize(h_.streams[static_cast<std::size_t>(g)]));
    std::memcpy(v.data() + i, h_.staging, c);
  }
  return v;
}

void Testbed::quiesce() {
  for (auto& d : bed_->devices()) d->quiesce();
}
void Testbed::resume() {
  for (auto& d : bed_->devices()) d->resume();
}

void Testbed::sync_ctl_streams() {
  for (std::size_t e = 0; e < ctl_streams_.size(); ++e) {
    GV_BENCH_CUDA(cudaSetDevice(gpu_of(static_cast<int>(e))));
    GV_BENCH_CUDA(cudaStreamSynchronize(ctl_streams_[e]));
  }
  GV_BENCH_CUDA(cudaSetDevice(0));
}

void Testbed::set_schedule(unsigned flags) {
  for (int g = 0; g < gpus_; ++g) {
    GV_BENCH_CUDA(cudaSetDevice(g));
    GV_BENCH_CUDA(cudaSetDeviceFlags(flags));
  }
  GV_BENCH_CUDA(cudaSetDevice(0));
}

void Testbed::teardown() noexcept {
  if (mode_ == Mode::kHostControlled) {
    try {
      set_schedule(cudaDeviceScheduleBlockingSync);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gv_gpu_verbs: warning: %s\n", e.what());
    }
  }
  for (std::size_t e = 0; e < ctl_streams_.size(); ++e) {
    (void)cudaSetDevice(gpu_of(static_cast<int>(e)));
    (void)cudaStreamDestroy(ctl_streams_[e]);
  }
  ctl_streams_.clear();
  if (consumed_) (void)cudaFreeHost(consumed_);
  consumed_ = nullptr;
  (void)cudaSetDevice(0);
  if (!bed_) return;
  if (mode_ == Mode::kGpuQGpu) {
    for (auto& d : bed_->devices()) {
      try {
        d->quiesce();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "gv_gpu_verbs: warning: %s\n", e.what());
      }
    }
  }
  bed_.reset();
}

// ---- rows ---------------------------------------------------------------------------------------

bool skips_host_controlled(Mode m, const char* bench) {
  if (m != Mode::kHostControlled) return false;
  std::printf("# %s, host-controlled: not measured; the host-controlled baseline is the ping-pong\n", bench);
  return true;
}

std::string where(const Testbed& tb) {
  const std::string gpus = tb.gpus() == 1 ? "1 GPU" : "2 GPUs (a side on each)";
  if (tb.mode() == Mode::kCpuThreads) return "host threads, host memory (a CPU figure)";
  if (tb.mode() == Mode::kHostControlled) return "host threads post and poll, buffers and kernels on " + gpus;
  return gpus;
}

std::string lead(const char* mode, const char* variant) {
  char b[64];
  std::snprintf(b, sizeof(b), " %-13s %-10s", mode, variant);
  return b;
}

std::string json_keys(Mode m, const char* variant, int gpus) {
  char b[192];
  const bool gpu_posts = m == Mode::kGpuQGpu || m == Mode::kGpuQHost;
  std::snprintf(b, sizeof(b), "\"mode\":\"%s\",\"variant\":\"%s\",\"gpus\":%d,\"engine_warps\":%u,\"poster\":\"%s\",",
                name(m), variant, gpus, m == Mode::kGpuQGpu ? g_engine_warps : 0u,
                gpu_posts && g_owner ? "owner" : "exclusive");
  return b;
}

void print_latency(const char* bench, const Testbed& tb, const char* variant, std::uint64_t bytes,
                   std::uint64_t iters, const LatencyStats& s) {
  print_latency_row(stdout, bytes, iters, s, lead(name(tb.mode()), variant));
  g_json.row(latency_json(bench, json_keys(tb.mode(), variant, tb.gpus()), bytes, iters, s));
}

}  // namespace gv::bench
