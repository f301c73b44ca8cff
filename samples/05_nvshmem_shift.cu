// Sample 05 — an NVSHMEM program, unchanged, on gpuverbs.
//
// Teaches: the NVSHMEM face. This file uses NVSHMEM's API only; CMake links it with
// gpuverbs::nvshmem instead of NVSHMEM, and it runs on gpuverbs' World (gvrun -n N, or mpirun).
// Each PE writes its number into the next PE's `destination` with nvshmem_int_p, the stream
// barrier makes it visible, and every PE prints what it received.
// When to use: to move an NVSHMEM code base over as it is; new code may use gv::rma directly.
// Cost: as the rma calls it maps to (one store for nvshmem_int_p over p2p).
//
//   build/host_setup/gvrun -n 2 build/samples/05_nvshmem_shift      (exits 77 without a GPU)
#include <nvshmem.h>
#include <nvshmemx.h>
#include "cuda_check.hpp"

#include <cstdio>

__global__ void simple_shift(int* destination) {
  const int mype = nvshmem_my_pe(), npes = nvshmem_n_pes();
  nvshmem_int_p(destination, mype, (mype + 1) % npes);
}

int main() {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    std::printf("05: skipped: no NVIDIA GPU or driver found\n");
    return 77;
  }
  nvshmem_init();
  const int mype = nvshmem_my_pe(), npes = nvshmem_n_pes();
  CUDA_CHECK(cudaSetDevice(nvshmem_team_my_pe(NVSHMEMX_TEAM_NODE) % gpus));
  int* destination = static_cast<int*>(nvshmem_malloc(sizeof(int)));
  simple_shift<<<1, 1>>>(destination);
  CUDA_CHECK(cudaGetLastError());
  nvshmemx_barrier_all_on_stream(0);
  int got = -1;
  CUDA_CHECK(cudaMemcpy(&got, destination, sizeof(int), cudaMemcpyDeviceToHost));
  const int want = (mype + npes - 1) % npes;
  std::printf("05: PE %d of %d received %d: %s\n", mype, npes, got, got == want ? "ok" : "WRONG");
  nvshmem_free(destination);
  nvshmem_finalize();
  return got == want ? 0 : 1;
}
