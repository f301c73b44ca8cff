// An NVSHMEM program (NVSHMEM's API only; written for gpuverbs' tests): every block of every
// PE sends its stamp to every other PE with putmem_signal_nbi and NVSHMEM_SIGNAL_ADD on one
// signal word per receiver; each receiver waits until the signal counts all of them, then
// checks every slot. Atomics: every thread fetch-adds PE 0's counter, and the old values must
// be a permutation. Exit 0 when right.
#include <nvshmem.h>
#include <nvshmemx.h>

#include "start_pe.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>


constexpr int kBlocks = 16, kThreads = 64, kWords = 32;

__global__ void collect(unsigned long long* all, const unsigned long long* olds) {
  for (int q = 0; q < nvshmem_n_pes(); ++q)
    nvshmemx_getmem_block(all + q * kBlocks * kThreads, olds, kBlocks * kThreads * sizeof(unsigned long long), q);
}

__global__ void scatter(long long* slots, long long* stamps, uint64_t* sig, unsigned long long* counter,
                        unsigned long long* olds, int* errors) {
  const int me = nvshmem_my_pe(), n = nvshmem_n_pes();
  long long* mine = stamps + blockIdx.x * kWords;
  for (int i = threadIdx.x; i < kWords; i += blockDim.x) mine[i] = (static_cast<long long>(me) << 32) | (blockIdx.x * 1000 + i);
  __syncthreads();
  for (int q = 0; q < n; ++q) {
    if (q == me) continue;
    nvshmemx_putmem_signal_nbi_block(slots + (me * kBlocks + blockIdx.x) * kWords, mine, kWords * sizeof(long long), sig, 1,
                                     NVSHMEM_SIGNAL_ADD, q);
  }
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  olds[t] = nvshmem_ulonglong_atomic_fetch_add(counter, 1ull, 0);  // olds: symmetric, PE 0 collects them
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    nvshmem_signal_wait_until(sig, NVSHMEM_CMP_EQ, static_cast<uint64_t>(kBlocks) * (n - 1));
    for (int q = 0; q < n; ++q)
      for (int b = 0; q != me && b < kBlocks; ++b)
        for (int i = 0; i < kWords; ++i)
          if (slots[(q * kBlocks + b) * kWords + i] != ((static_cast<long long>(q) << 32) | (b * 1000 + i))) atomicAdd(errors, 1);
  }
}

int main() {
  start_pe();
  const int me = nvshmem_my_pe(), n = nvshmem_n_pes();
  auto* slots = static_cast<long long*>(nvshmem_calloc(static_cast<std::size_t>(n) * kBlocks * kWords, sizeof(long long)));
  auto* stamps = static_cast<long long*>(nvshmem_malloc(kBlocks * kWords * sizeof(long long)));
  auto* sig = static_cast<uint64_t*>(nvshmem_calloc(1, sizeof(uint64_t)));
  auto* counter = static_cast<unsigned long long*>(nvshmem_calloc(1, sizeof(unsigned long long)));
  auto* olds = static_cast<unsigned long long*>(nvshmem_malloc(kBlocks * kThreads * sizeof(unsigned long long)));
  int* errors = nullptr;
  CUDA_CHECK(cudaMalloc(&errors, sizeof(int)));
  CUDA_CHECK(cudaMemset(errors, 0, sizeof(int)));
  nvshmem_barrier_all();
  scatter<<<kBlocks, kThreads>>>(slots, stamps, sig, counter, olds, errors);
  CUDA_CHECK(cudaGetLastError());
  nvshmemx_barrier_all_on_stream(0);
  CUDA_CHECK(cudaDeviceSynchronize());
  int bad = 0;
  CUDA_CHECK(cudaMemcpy(&bad, errors, sizeof(int), cudaMemcpyDeviceToHost));
  const std::size_t total = std::size_t{kBlocks} * kThreads * static_cast<std::size_t>(n);
  unsigned long long* all = nullptr;
  CUDA_CHECK(cudaMalloc(&all, total * sizeof(unsigned long long)));
  if (me == 0) {
    collect<<<1, 128>>>(all, olds);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<unsigned long long> h(total);
    CUDA_CHECK(cudaMemcpy(h.data(), all, total * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    std::sort(h.begin(), h.end());
    for (std::size_t i = 0; i < total; ++i)
      if (h[i] != i) {
        std::printf("PE 0: fetch_add returned %llu at position %zu: not exactly once\n", h[i], i);
        ++bad;
        break;
      }
  }
  nvshmem_barrier_all();
  std::printf("PE %d: %s (%d wrong words)\n", me, bad == 0 ? "ok" : "FAILED", bad);
  nvshmem_free(olds);
  nvshmem_free(counter);
  nvshmem_free(sig);
  nvshmem_free(stamps);
  nvshmem_free(slots);
  CUDA_CHECK(cudaFree(all));
  CUDA_CHECK(cudaFree(errors));
  nvshmem_finalize();
  return bad == 0 ? 0 : 1;
}
