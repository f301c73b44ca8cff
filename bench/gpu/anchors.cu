// gv_gpu_verbs anchors: what the hardware gives without any verbs: the post and poll floors
// (synthetic.hpp) with queues in GPU memory and in pinned host memory; a flag ping-pong between
// two blocks through GPU memory and through pinned host memory, and between two GPUs by peer
// stores when two are present; cudaMemcpyPeerAsync latency, a host-driven ping-pong of such
// copies, and the message rate RC order alone allows (ordered_stores): across the GPUs, or
// within the one GPU when there is one.
#include <algorithm>
#include <cstdio>

#include "synthetic.hpp"

namespace gv::bench {
namespace {

/// Two parties bounce a counter through two flag words; party 0 times each round trip.
__global__ void flag_pingpong(std::uint32_t* mine, std::uint32_t* theirs, int iters, bool starts,
                              std::uint64_t* rtt_ns, std::uint32_t* timeouts) {
  constexpr auto kSys = gv::sync::Scope::kSystem;  // the two parties are different GPUs
  if (threadIdx.x != 0) return;
  for (int i = 1; i <= iters; ++i) {
    const std::uint64_t t0 = gv::sync::now_ns();
    if (starts) {
      gv::sync::store_release(theirs, static_cast<std::uint32_t>(i), kSys);
      if (gv::sync::bounded_wait([&] { return gv::sync::load_acquire(mine, kSys) == static_cast<std::uint32_t>(i); },
                                 gv::Budget{1'000'000'000}, nullptr) != Status::kOk) {
        ++*timeouts;
        return;
      }
      rtt_ns[i - 1] = gv::sync::now_ns() - t0;
    } else {
      if (gv::sync::bounded_wait([&] { return gv::sync::load_acquire(mine, kSys) == static_cast<std::uint32_t>(i); },
                                 gv::Budget{1'000'000'000}, nullptr) != Status::kOk) {
        ++*timeouts;
        return;
      }
      gv::sync::store_release(theirs, static_cast<std::uint32_t>(i), kSys);
    }
  }
}

__global__ void flag_pingpong_2blocks(std::uint32_t* f0, std::uint32_t* f1, int iters, std::uint64_t* rtt,
                                      std::uint32_t* timeouts) {
  // block 0 owns f0 and writes f1; block 1 the reverse.
  if (blockIdx.x == 0) {
    if (threadIdx.x == 0) {
      for (int i = 1; i <= iters; ++i) {
        const std::uint64_t t0 = gv::sync::now_ns();
        gv::sync::store_release(f1, static_cast<std::uint32_t>(i));
        if (gv::sync::bounded_wait([&] { return gv::sync::load_acquire(f0) == static_cast<std::uint32_t>(i); },
                                   gv::Budget{1'000'000'000}, nullptr) != Status::kOk) {
          ++*timeouts;
          return;
        }
        rtt[i - 1] = gv::sync::now_ns() - t0;
      }
    }
  } else if (threadIdx.x == 0) {
    for (int i = 1; i <= iters; ++i) {
      if (gv::sync::bounded_wait([&] { return gv::sync::load_acquire(f1) == static_cast<std::uint32_t>(i); },
                                 gv::Budget{1'000'000'000}, nullptr) != Status::kOk) {
        ++*timeouts;
        return;
      }
      gv::sync::store_release(f0, static_cast<std::uint32_t>(i));
    }
  }
}

/// RC order alone, the ceiling of the GPU engine's message rate: each QP's thread stores `n`
/// messages of `bytes` (8: one store, 64: four 16-byte stores) into `peer` (another GPU's
/// memory, or this GPU's) with a system-scope fence after each, the settle() the engine issues
/// between two messages of one QP. A QP is thread 0 of a block of its own (`qps` blocks: a warp
/// a QP, the engine's QPs spread over warps) or lane q of one warp (`qps` lanes of block 0: an
/// engine warp's lanes, whose fences are the warp's). t[2q], t[2q + 1]: QP q's start and end
/// (%globaltimer).
__global__ void ordered_stores(std::byte* peer, int n, std::uint32_t bytes, int qps, std::uint64_t* t) {
  constexpr auto kSys = gv::sync::Scope::kSystem;
  const int q = gridDim.x > 1 ? static_cast<int>(blockIdx.x) : static_cast<int>(threadIdx.x);
  if ((gridDim.x > 1 && threadIdx.x != 0) || q >= qps) return;
  auto* dst = reinterpret_cast<uint4*>(peer + std::uint64_t(q) * 4096);
  const std::uint64_t t0 = gv::sync::now_ns();
  for (int i = 0; i < n; ++i) {
    const auto v = static_cast<std::uint32_t>(i);
    if (bytes == 8) {
      gv::sync::store_relaxed(reinterpret_cast<std::uint64_t*>(dst) + i % 64, std::uint64_t{v}, kSys);
    } else {
      for (int k = 0; k < 4; ++k) dst[(i % 16) * 4 + k] = make_uint4(v, v, v, v);
    }
    gv::sync::release_fence(kSys);
  }
  t[2 * q] = t0;
  t[2 * q + 1] = gv::sync::now_ns();
}

void report_anchor(const char* what, std::vector<double> half_us) {
  const std::uint64_t n = half_us.size();
  const auto s = summarize(std::move(half_us));
  std::printf(" %-44s t_typical %.3f us  t_min %.3f  t_avg %.3f  99%% %.3f\n", what, s.typical, s.min, s.avg, s.p99);
  g_json.row(latency_json("anchor", std::string("\"mode\":\"none\",\"variant\":\"") + what + "\",", 8, n, s));
}

/// Messages in RC order from GPU 0 into GPU `sink_gpu`'s memory (1: across the GPUs, peer
/// access enabled; 0: within GPU 0, what one-GPU runs of the engine face), a QP a warp (blocks
/// spread over the SMs) or a lane of one warp; a system-scope fence after each message either way,
/// as the engine fences for memory outside its own arena. Stream s0 is GPU 0's.
void rc_order_ceiling(int sink_gpu, int iters, cudaStream_t s0) {
  std::printf("# anchors: RC order alone, GPU 0 to GPU %d: stores of a message, then a system-scope fence "
              "(the ceiling of the GPU engine's message rate %s)\n",
              sink_gpu, sink_gpu == 0 ? "on one GPU" : "across GPUs");
  std::printf("%-26s %-6s %-8s %-12s %-16s %s\n", "anchor", "#QPs", "#bytes", "#messages", "MsgRate[Mmsg/s]",
              "ns/message/QP");
  std::byte* sink;
  std::uint64_t* t;
  GV_BENCH_CUDA(cudaSetDevice(sink_gpu));
  GV_BENCH_CUDA(cudaMalloc(&sink, 32 * 4096));
  GV_BENCH_CUDA(cudaSetDevice(0));
  GV_BENCH_CUDA(cudaMallocHost(&t, 2 * 32 * sizeof(std::uint64_t)));
  const std::string gpus = "\"gpus\":" + std::to_string(sink_gpu == 0 ? 1 : 2) + ",";
  for (const bool lanes : {false, true}) {
    const char* variant = lanes ? "rc-order-floor-lanes" : "rc-order-floor-warps";
    for (const std::uint32_t bytes : {8u, 64u}) {
      for (const int qps : {1, 16, 32}) {
        if (lanes) ordered_stores<<<1, 32, 0, s0>>>(sink, iters, bytes, qps, t);
        else ordered_stores<<<qps, 32, 0, s0>>>(sink, iters, bytes, qps, t);
        GV_BENCH_CUDA(cudaGetLastError());
        GV_BENCH_CUDA(cudaStreamSynchronize(s0));
        std::uint64_t first = ~std::uint64_t{0}, last = 0;
        for (int q = 0; q < qps; ++q) {
          first = std::min(first, t[2 * q]);
          last = std::max(last, t[2 * q + 1]);
        }
        const double total = static_cast<double>(iters) * qps;
        const double rate = total / static_cast<double>(last - first) * 1e3;
        std::printf("%-26s %-6d %-8u %-12.0f %-16.4f %.1f\n", variant, qps, bytes, total, rate, qps * 1e3 / rate);
        g_json.row(msgrate_json(std::string("\"mode\":\"none\",\"variant\":\"") + variant + "\"," + gpus, bytes,
                                static_cast<std::uint64_t>(iters), qps, total, rate));
      }
    }
  }
  GV_BENCH_CUDA(cudaFreeHost(t));
  GV_BENCH_CUDA(cudaSetDevice(sink_gpu));
  GV_BENCH_CUDA(cudaFree(sink));
  GV_BENCH_CUDA(cudaSetDevice(0));
}

}  // namespace

/// No GPU engine is open here: device-wide synchronisation is fine.
void bench_anchors(const Options& o, Harness& h) {
  constexpr int kFloorReps = 20;
  std::printf("# floors: the bare memory operations of a post and of a poll [ns per post or poll], "
              "min/median/max of %d launches\n",
              kFloorReps);
  print_cost_header();
  for (const bool gpu : {true, false}) {
    SyntheticQueues q(gpu, h.streams[0]);
    report_floors("anchor", gpu ? "gpu-qgpu" : "gpu-qhost", measure_floors(h, kFloorReps, q));
  }

  const int iters = static_cast<int>(o.iters);
  std::printf("# anchors: half round trip of a flag ping-pong [us]\n");
  std::uint64_t* rtt;
  std::uint32_t* timeouts;
  GV_BENCH_CUDA(cudaMallocHost(&rtt, sizeof(std::uint64_t) * iters));
  GV_BENCH_CUDA(cudaMallocHost(&timeouts, sizeof(std::uint32_t)));
  auto collect = [&](const char* what) {
    if (*timeouts) throw std::runtime_error(std::string(what) + ": a flag wait timed out");
    std::vector<double> v;
    for (int i = iters / 10; i < iters; ++i) v.push_back(static_cast<double>(rtt[i]) / 2000.0);
    report_anchor(what, v);
  };
  for (const bool gpu : {true, false}) {
    std::uint32_t* f;
    if (gpu) {
      GV_BENCH_CUDA(cudaMalloc(&f, 256));
      GV_BENCH_CUDA(cudaMemset(f, 0, 256));
    } else {
      GV_BENCH_CUDA(cudaHostAlloc(&f, 256, cudaHostAllocMapped));
      std::memset(f, 0, 256);
    }
    *timeouts = 0;
    flag_pingpong_2blocks<<<2, 32>>>(f, f + 32, iters, rtt, timeouts);
    GV_BENCH_CUDA(cudaGetLastError());
    GV_BENCH_CUDA(cudaDeviceSynchronize());
    collect(gpu ? "two blocks, flags in GPU memory" : "two blocks, flags in pinned host memory");
    GV_BENCH_CUDA(gpu ? cudaFree(f) : cudaFreeHost(f));
  }
  int n = 0;
  GV_BENCH_CUDA(cudaGetDeviceCount(&n));
  if (n >= 2) {
    int can = 0;
    GV_BENCH_CUDA(cudaDeviceCanAccessPeer(&can, 0, 1));
    if (can) {
      std::uint32_t *f0, *f1;
      cudaStream_t s0, s1;
      enable_peer_access(0, 1);
      GV_BENCH_CUDA(cudaMalloc(&f0, 256));
      GV_BENCH_CUDA(cudaMemset(f0, 0, 256));
      GV_BENCH_CUDA(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
      enable_peer_access(1, 0);
      GV_BENCH_CUDA(cudaMalloc(&f1, 256));
      GV_BENCH_CUDA(cudaMemset(f1, 0, 256));
      GV_BENCH_CUDA(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
      GV_BENCH_CUDA(cudaDeviceSynchronize());
      *timeouts = 0;
      // GPU0 polls its own f0 and stores into GPU1's f1; GPU1 the reverse (peer stores).
      flag_pingpong<<<1, 32, 0, s1>>>(f1, f0, iters, false, rtt, timeouts);
      GV_BENCH_CUDA(cudaSetDevice(0));
      flag_pingpong<<<1, 32, 0, s0>>>(f0, f1, iters, true, rtt, timeouts);
      GV_BENCH_CUDA(cudaStreamSynchronize(s0));
      GV_BENCH_CUDA(cudaSetDevice(1));
      GV_BENCH_CUDA(cudaStreamSynchronize(s1));
      collect("two GPUs, peer stores (NVLink/PCIe)");

      // cudaMemcpyPeerAsync of 8 bytes, timed with events.
      GV_BENCH_CUDA(cudaSetDevice(0));
      cudaEvent_t e0, e1;
      GV_BENCH_CUDA(cudaEventCreate(&e0));
      GV_BENCH_CUDA(cudaEventCreate(&e1));
      std::vector<double> v;
      for (int i = 0; i < 1000; ++i) {
        GV_BENCH_CUDA(cudaEventRecord(e0, s0));
        GV_BENCH_CUDA(cudaMemcpyPeerAsync(f1, 1, f0, 0, 8, s0));
        GV_BENCH_CUDA(cudaEventRecord(e1, s0));
        GV_BENCH_CUDA(cudaEventSynchronize(e1));
        float ms = 0;
        GV_BENCH_CUDA(cudaEventElapsedTime(&ms, e0, e1));
        if (i >= 100) v.push_back(ms * 1000.0);
      }
      report_anchor("cudaMemcpyPeerAsync 8 B, one way (events)", v);

      // What a host-driven program without verbs does: copy 8 B to the peer GPU and wait for
      // it, then the peer copies back and waits; half the round trip by the host clock, the
      // host spinning on its waits (as host-controlled's does).
      for (const int g : {0, 1}) {
        GV_BENCH_CUDA(cudaSetDevice(g));
        GV_BENCH_CUDA(cudaSetDeviceFlags(cudaDeviceScheduleSpin));
      }
      v.clear();
      for (int i = 0; i < 1000; ++i) {
        const std::uint64_t t0 = gv::sync::now_ns();
        GV_BENCH_CUDA(cudaMemcpyPeerAsync(f1, 1, f0, 0, 8, s0));
        GV_BENCH_CUDA(cudaStreamSynchronize(s0));
        GV_BENCH_CUDA(cudaMemcpyPeerAsync(f0, 0, f1, 1, 8, s1));
        GV_BENCH_CUDA(cudaStreamSynchronize(s1));
        if (i >= 100) v.push_back(static_cast<double>(gv::sync::now_ns() - t0) / 2000.0);
      }
      for (const int g : {1, 0}) {
        GV_BENCH_CUDA(cudaSetDevice(g));
        GV_BENCH_CUDA(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
      }
      report_anchor("host-driven cudaMemcpyPeerAsync + sync ping-pong, 8 B", v);

      rc_order_ceiling(1, iters, s0);
      GV_BENCH_CUDA(cudaSetDevice(0));
      GV_BENCH_CUDA(cudaEventDestroy(e0));
      GV_BENCH_CUDA(cudaEventDestroy(e1));
      GV_BENCH_CUDA(cudaStreamDestroy(s0));
      GV_BENCH_CUDA(cudaFree(f0));
      GV_BENCH_CUDA(cudaSetDevice(1));
      GV_BENCH_CUDA(cudaStreamDestroy(s1));
      GV_BENCH_CUDA(cudaFree(f1));
      GV_BENCH_CUDA(cudaSetDevice(0));
    } else {
      std::printf(" two GPUs present but without peer access: no peer anchor\n");
    }
  } else {
    std::printf(" one GPU: no two-GPU anchors\n");
    cudaStream_t s0;
    GV_BENCH_CUDA(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
    rc_order_ceiling(0, iters, s0);
    GV_BENCH_CUDA(cudaStreamDestroy(s0));
  }
  GV_BENCH_CUDA(cudaFreeHost(rtt));
  GV_BENCH_CUDA(cudaFreeHost(timeouts));
}

}  // namespace gv::bench
