// An NVSHMEM program (NVSHMEM's API only; written for gpuverbs' tests): every block puts its
// slice of a float array to the next PE with nvshmemx_float_put_block, quiet and barrier; then
// each block gets its slice back from the previous PE with nvshmemx_float_get_block, and warps
// fetch single values with nvshmem_float_g. All against a host reference. Exit 0 when right.
#include <nvshmem.h>
#include <nvshmemx.h>

#include "start_pe.hpp"

#include <cstdio>
#include <cstdlib>
#include <vector>


constexpr int kBlocks = 8, kSlice = 50000;

float value(int pe, int i) { return static_cast<float>(pe * 1000003 + i) * 0.5f; }

__global__ void put_slices(float* dst, const float* src) {
  const int next = (nvshmem_my_pe() + 1) % nvshmem_n_pes();
  nvshmemx_float_put_block(dst + blockIdx.x * kSlice, src + blockIdx.x * kSlice, kSlice, next);
  nvshmem_quiet();
}

__global__ void get_slices(float* back, const float* src, float* probes) {
  const int prev = (nvshmem_my_pe() + nvshmem_n_pes() - 1) % nvshmem_n_pes();
  nvshmemx_float_get_block(back + blockIdx.x * kSlice, src + blockIdx.x * kSlice, kSlice, prev);
  if (threadIdx.x % 32 == 0) {
    const int i = blockIdx.x * kSlice + threadIdx.x * 37;
    probes[blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32] = nvshmem_float_g(src + i, prev);
  }
}

int main() {
  start_pe();
  const int me = nvshmem_my_pe(), n = nvshmem_n_pes(), prev = (me + n - 1) % n;
  const std::size_t count = std::size_t{kBlocks} * kSlice;
  float* src = static_cast<float*>(nvshmem_malloc(count * sizeof(float)));
  float* dst = static_cast<float*>(nvshmem_malloc(count * sizeof(float)));
  float* back = static_cast<float*>(nvshmem_malloc(count * sizeof(float)));
  float* probes = nullptr;
  CUDA_CHECK(cudaMalloc(&probes, kBlocks * 8 * sizeof(float)));
  std::vector<float> h(count);
  for (std::size_t i = 0; i < count; ++i) h[i] = value(me, static_cast<int>(i));
  CUDA_CHECK(cudaMemcpy(src, h.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(dst, 0xff, count * sizeof(float)));
  nvshmem_barrier_all();
  put_slices<<<kBlocks, 256>>>(dst, src);
  CUDA_CHECK(cudaGetLastError());
  nvshmemx_barrier_all_on_stream(0);
  get_slices<<<kBlocks, 256>>>(back, src, probes);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  nvshmem_barrier_all();
  std::vector<float> got(count), gb(count), pr(kBlocks * 8);
  CUDA_CHECK(cudaMemcpy(got.data(), dst, count * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(gb.data(), back, count * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(pr.data(), probes, pr.size() * sizeof(float), cudaMemcpyDeviceToHost));
  long bad = 0;
  for (std::size_t i = 0; i < count; ++i) bad += got[i] != value(prev, static_cast<int>(i)) || gb[i] != value(prev, static_cast<int>(i));
  for (int b = 0; b < kBlocks; ++b)
    for (int w = 0; w < 8; ++w) bad += pr[b * 8 + w] != value(prev, b * kSlice + w * 32 * 37);
  std::printf("PE %d: %s (%ld wrong)\n", me, bad == 0 ? "ok" : "FAILED", bad);
  nvshmem_free(back);
  nvshmem_free(dst);
  nvshmem_free(src);
  CUDA_CHECK(cudaFree(probes));
  nvshmem_finalize();
  return bad == 0 ? 0 : 1;
}
