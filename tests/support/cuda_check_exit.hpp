// CUDA_CHECK for the test programs that are not GoogleTest binaries (the NVSHMEM-style programs,
// which build against NVSHMEM too and so use nothing of gpuverbs but nvshmem.h; rma_rank_gpu): a
// failed CUDA call prints "FAILED: <call>: <reason>" (their ctest entries fail on "FAILED") and
// exits 1. GoogleTest binaries use GV_CUDA_CHECK / GV_CUDA_EXPECT (gpu_test.hpp).
#pragma once
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CUDA_CHECK(x)                                                       \
  do {                                                                      \
    const cudaError_t e_ = (x);                                             \
    if (e_ != cudaSuccess) {                                                \
      std::printf("FAILED: %s: %s\n", #x, cudaGetErrorString(e_));          \
      std::fflush(stdout);                                                  \
      std::exit(1);                                                         \
    }                                                                       \
  } while (0)
