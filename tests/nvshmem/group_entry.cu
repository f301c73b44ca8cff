// An NVSHMEM program (NVSHMEM's API only; written for gpuverbs' tests): the threads of a block
// each write their own element of a put's source, those past the first warp after a delay, and
// the block calls nvshmemx_int_put_block at once, without __syncthreads. NVSHMEM's block calls
// begin with the block's sync, so every element written before the call must arrive. The same
// for put_nbi_block (then quiet) and put_signal_block; and for get_block, whose destination
// every thread reads (the later warps late) just before the call: no thread may see the value
// the get brings. Exit 0 when right.
#include <nvshmem.h>
#include <nvshmemx.h>

#include "start_pe.hpp"

#include <cstdio>
#include <vector>

constexpr int kThreads = 256;          // 1 KiB of ints: a block's put carries it in 16-byte words,
constexpr long long kDelay = 40000;    // the first warp the first 512 B; ~20 us of clock64

__host__ __device__ int value(int pe, int kind, int t) { return pe * 1000000 + kind * 10000 + t + 1; }
__host__ __device__ int old_value(int t) { return -(t + 1); }

__device__ void late(bool yes) {
  if (!yes) return;
  const long long t0 = clock64();
  while (clock64() - t0 < kDelay) {
  }
}

// src: three areas this PE puts from, written here, and a fourth the previous PE gets from
// (written by the host); dst: three areas the previous PE puts into; back: where the get lands.
__global__ void entry(int* src, int* dst, int* back, int* seen, uint64_t* sig) {
  const int me = nvshmem_my_pe(), n = nvshmem_n_pes(), next = (me + 1) % n, prev = (me + n - 1) % n;
  const int t = threadIdx.x;
  const bool later = t >= 32;
  late(later);
  src[t] = value(me, 0, t);
  nvshmemx_int_put_block(dst, src, kThreads, next);
  late(later);
  src[kThreads + t] = value(me, 1, t);
  nvshmemx_int_put_nbi_block(dst + kThreads, src + kThreads, kThreads, next);
  nvshmem_quiet();
  late(later);
  src[2 * kThreads + t] = value(me, 2, t);
  nvshmemx_int_put_signal_block(dst + 2 * kThreads, src + 2 * kThreads, kThreads, sig, 1, NVSHMEM_SIGNAL_ADD, next);
  late(later);
  seen[t] = back[t];
  nvshmemx_int_get_block(back, src + 3 * kThreads, kThreads, prev);
}

int main() {
  start_pe();
  const int me = nvshmem_my_pe(), n = nvshmem_n_pes(), prev = (me + n - 1) % n;
  int* src = static_cast<int*>(nvshmem_malloc(4 * kThreads * sizeof(int)));
  int* dst = static_cast<int*>(nvshmem_malloc(3 * kThreads * sizeof(int)));
  int* back = static_cast<int*>(nvshmem_malloc(kThreads * sizeof(int)));
  auto* sig = static_cast<uint64_t*>(nvshmem_calloc(1, sizeof(uint64_t)));
  int* seen = nullptr;
  CUDA_CHECK(cudaMalloc(&seen, kThreads * sizeof(int)));
  // Poison: what a put copies before its element was written (-1), and what `seen` holds
  // unless a thread stores it.
  CUDA_CHECK(cudaMemset(src, 0xff, 3 * kThreads * sizeof(int)));
  CUDA_CHECK(cudaMemset(dst, 0xff, 3 * kThreads * sizeof(int)));
  CUDA_CHECK(cudaMemset(seen, 0x7f, kThreads * sizeof(int)));
  std::vector<int> h(kThreads);
  for (int t = 0; t < kThreads; ++t) h[t] = value(me, 3, t);
  CUDA_CHECK(cudaMemcpy(src + 3 * kThreads, h.data(), kThreads * sizeof(int), cudaMemcpyHostToDevice));
  for (int t = 0; t < kThreads; ++t) h[t] = old_value(t);
  CUDA_CHECK(cudaMemcpy(back, h.data(), kThreads * sizeof(int), cudaMemcpyHostToDevice));
  nvshmem_barrier_all();
  entry<<<1, kThreads>>>(src, dst, back, seen, sig);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  nvshmem_barrier_all();
  std::vector<int> got(3 * kThreads), gb(kThreads), gs(kThreads);
  uint64_t s = 0;
  CUDA_CHECK(cudaMemcpy(got.data(), dst, got.size() * sizeof(int), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(gb.data(), back, gb.size() * sizeof(int), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(gs.data(), seen, gs.size() * sizeof(int), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(&s, sig, sizeof(s), cudaMemcpyDeviceToHost));
  const char* what[] = {"put_block", "put_nbi_block", "put_signal_block"};
  int bad = 0;
  for (int k = 0; k < 3; ++k) {
    int wrong = 0, first = -1;
    for (int t = 0; t < kThreads; ++t)
      if (got[k * kThreads + t] != value(prev, k, t) && wrong++ == 0) first = t;
    if (wrong != 0)
      std::printf("PE %d: %s: %d of %d elements wrong, the first at %d (%d, want %d)\n", me, what[k], wrong, kThreads,
                  first, got[k * kThreads + first], value(prev, k, first));
    bad += wrong;
  }
  if (s != 1) {
    std::printf("PE %d: put_signal_block: signal %llu, want 1\n", me, static_cast<unsigned long long>(s));
    ++bad;
  }
  int early = 0, wrong_back = 0;
  for (int t = 0; t < kThreads; ++t) {
    early += gs[t] != old_value(t);
    wrong_back += gb[t] != value(prev, 3, t);
  }
  if (early != 0) std::printf("PE %d: get_block: %d threads read the fetched value before the call\n", me, early);
  if (wrong_back != 0) std::printf("PE %d: get_block: %d elements wrong\n", me, wrong_back);
  bad += early + wrong_back;
  nvshmem_barrier_all();
  std::printf("PE %d: %s (%d wrong)\n", me, bad == 0 ? "ok" : "FAILED", bad);
  CUDA_CHECK(cudaFree(seen));
  nvshmem_free(sig);
  nvshmem_free(back);
  nvshmem_free(dst);
  nvshmem_free(src);
  nvshmem_finalize();
  return bad == 0 ? 0 : 1;
}
