// CUDA_CHECK for the NVSHMEM-style test programs (which build against NVSHMEM too, so they use
// nothing of gpuverbs but nvshmem.h): a failed CUDA call prints "PE ? FAILED" and exits 1.
#pragma once
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CUDA_CHECK(x)                                                                  \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::printf("PE ? FAILED: %s: %s\n", #x, cudaGetErrorString(e_));                 \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)
