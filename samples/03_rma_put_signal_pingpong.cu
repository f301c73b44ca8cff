// Sample 03 — two GPU ranks in one process bounce a message with put_signal.
//
// Teaches: World::create_local (several ranks in one process, rank i on GPU i, or all on one
// GPU), the symmetric heap (World::alloc returns the same offset on every rank), and the core
// of GPU-initiated communication: put_signal to the peer, wait_until on your own signal word.
// When to use: a kernel that must hand data to another GPU and tell it so, without returning
// to the host. For one value, p() alone is cheaper (the value is its own flag).
// Cost: a half round trip of a few microseconds; run build/bench/gv_rma for this machine's
// figures (README lists measured ones).
//
//   build/samples/03_rma_put_signal_pingpong   (exits 77 without a GPU)
#include <cuda_runtime.h>

#include <cstdio>

#include <gpuverbs/host/world.hpp>
#include <gpuverbs/rma.hpp>
#include "cuda_check.hpp"

namespace rma = gv::rma;

__global__ void bounce(__grid_constant__ const rma::Endpoint ep, float* buf, std::uint64_t* sig, int rounds,
                       unsigned long long* ns, std::uint32_t* status) {
  const int me = static_cast<int>(ep.rank), peer = 1 - me;
  unsigned long long start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (int i = 1; i <= rounds; ++i) {
    gv::Status s = gv::Status::kOk;
    if (me == 1) s = rma::wait_until<rma::Block>(ep, sig, rma::Cmp::kGe, std::uint64_t(i));  // wait for the ping
    for (int k = threadIdx.x; k < 1024 && s == gv::Status::kOk; k += blockDim.x) buf[k] = float(i * 1024 + k);
    __syncthreads();
    if (s == gv::Status::kOk)  // data, then the signal (set to the round): the peer sees the data first
      s = rma::put_signal<rma::Block>(ep, buf, buf, 1024 * sizeof(float), sig, i, rma::SignalOp::kSet, peer);
    if (me == 0 && s == gv::Status::kOk) s = rma::wait_until<rma::Block>(ep, sig, rma::Cmp::kGe, std::uint64_t(i));
    if (s != gv::Status::kOk) {
      if (threadIdx.x == 0) *status = static_cast<std::uint32_t>(s);
      return;
    }
  }
  unsigned long long end;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(end));
  if (threadIdx.x == 0) *ns = end - start;
}

int main() try {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    std::printf("03: skipped: no NVIDIA GPU or driver found\n");
    return 77;
  }
  gv::WorldOptions o;
  o.memory = gv::WorldOptions::Memory::kGpu;
  o.heap_bytes = 1 << 20;
  auto worlds = gv::World::create_local(2, o);  // GPUs 0 and 1, or both ranks on GPU 0
  cudaStream_t s[2];
  float* buf[2];
  std::uint64_t* sig[2];
  unsigned long long* ns[2];
  std::uint32_t* status[2];
  for (int r = 0; r < 2; ++r) {
    CUDA_CHECK(cudaSetDevice(worlds[r]->gpu()));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s[r], cudaStreamNonBlocking));
    buf[r] = static_cast<float*>(worlds[r]->alloc(1024 * sizeof(float)));  // same offset on both ranks
    sig[r] = static_cast<std::uint64_t*>(worlds[r]->alloc(8));
    ns[r] = static_cast<unsigned long long*>(worlds[r]->alloc(8));
    status[r] = static_cast<std::uint32_t*>(worlds[r]->alloc(4));
  }
  constexpr int kRounds = 1000;
  for (int r : {1, 0}) {  // both kernels run at once: each waits for the other
    CUDA_CHECK(cudaSetDevice(worlds[r]->gpu()));
    bounce<<<1, 256, 0, s[r]>>>(worlds[r]->endpoint(), buf[r], sig[r], kRounds, ns[r], status[r]);
    CUDA_CHECK(cudaGetLastError());
  }
  unsigned long long t = 0;
  std::uint32_t st[2] = {0, 0};
  for (int r = 0; r < 2; ++r) {
    CUDA_CHECK(cudaSetDevice(worlds[r]->gpu()));
    CUDA_CHECK(cudaMemcpyAsync(&st[r], status[r], 4, cudaMemcpyDeviceToHost, s[r]));
    if (r == 0) CUDA_CHECK(cudaMemcpyAsync(&t, ns[0], 8, cudaMemcpyDeviceToHost, s[0]));
    CUDA_CHECK(cudaStreamSynchronize(s[r]));
  }
  if (st[0] != 0 || st[1] != 0) {
    std::fprintf(stderr, "03: failed: %s / %s\n", gv::to_string(gv::Status(st[0])), gv::to_string(gv::Status(st[1])));
    return 1;
  }
  std::printf("03: %d put_signal round trips of 4 KiB between ranks on GPUs %d and %d over %s: %.2f us per half round trip\n",
              kRounds, worlds[0]->gpu(), worlds[1]->gpu(), rma::to_string(worlds[0]->transport_to(1)),
              static_cast<double>(t) / 1000.0 / (2.0 * kRounds));
  return 0;
} catch (const gv::Error& e) {
  std::fprintf(stderr, "03: %s\n", e.what());
  return 1;
}
