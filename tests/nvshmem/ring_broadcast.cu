// An NVSHMEM program (NVSHMEM's API only; written for gpuverbs' tests): PE 0's array travels
// around the ring. Each PE waits for the signal that its predecessor's put arrived, checks the
// data, and forwards it with putmem_signal; then every PE writes its number into its
// successor with nvshmem_int_p and checks what it got after a barrier on the stream.
// Exit 0 and "PE n: ok" when everything arrived; builds against NVSHMEM as well.
#include <nvshmem.h>
#include <nvshmemx.h>

#include "start_pe.hpp"

#include <cstdio>
#include <cstdlib>


constexpr int kCount = 4096;

__global__ void relay(int* data, uint64_t* sig, int* errors) {
  const int me = nvshmem_my_pe(), n = nvshmem_n_pes(), next = (me + 1) % n;
  if (me != 0) {
    if (threadIdx.x == 0) nvshmem_signal_wait_until(sig, NVSHMEM_CMP_EQ, 1);
    __syncthreads();
    for (int i = threadIdx.x; i < kCount; i += blockDim.x)
      if (data[i] != i * 3 + 7) atomicAdd(errors, 1);
    __syncthreads();
  }
  if (next != 0) nvshmemx_putmem_signal_block(data, data, kCount * sizeof(int), sig, 1, NVSHMEM_SIGNAL_SET, next);
}

__global__ void neighbours(int* slot) {
  const int me = nvshmem_my_pe(), n = nvshmem_n_pes();
  nvshmem_int_p(slot, me, (me + 1) % n);
}

int main() {
  start_pe();
  const int me = nvshmem_my_pe(), n = nvshmem_n_pes();
  int* data = static_cast<int*>(nvshmem_malloc(kCount * sizeof(int)));
  uint64_t* sig = static_cast<uint64_t*>(nvshmem_calloc(1, sizeof(uint64_t)));
  int* slot = static_cast<int*>(nvshmem_malloc(sizeof(int)));
  int* errors = nullptr;
  CUDA_CHECK(cudaMalloc(&errors, sizeof(int)));
  CUDA_CHECK(cudaMemset(errors, 0, sizeof(int)));
  if (me == 0) {
    int host[kCount];
    for (int i = 0; i < kCount; ++i) host[i] = i * 3 + 7;
    CUDA_CHECK(cudaMemcpy(data, host, sizeof(host), cudaMemcpyHostToDevice));
  } else {
    CUDA_CHECK(cudaMemset(data, 0xff, kCount * sizeof(int)));
  }
  nvshmem_barrier_all();
  relay<<<1, 256>>>(data, sig, errors);
  CUDA_CHECK(cudaGetLastError());
  nvshmemx_barrier_all_on_stream(0);
  neighbours<<<1, 1>>>(slot);
  nvshmemx_barrier_all_on_stream(0);
  CUDA_CHECK(cudaDeviceSynchronize());
  int bad = 0, got = -1;
  CUDA_CHECK(cudaMemcpy(&bad, errors, sizeof(int), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(&got, slot, sizeof(int), cudaMemcpyDeviceToHost));
  const bool ok = bad == 0 && got == (me + n - 1) % n;
  std::printf("PE %d: %s (%d wrong elements, neighbour %d)\n", me, ok ? "ok" : "FAILED", bad, got);
  nvshmem_free(slot);
  nvshmem_free(sig);
  nvshmem_free(data);
  CUDA_CHECK(cudaFree(errors));
  nvshmem_finalize();
  return ok ? 0 : 1;
}
