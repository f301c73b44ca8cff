// CUDA_CHECK for the samples: a failed CUDA call names itself and ends the program (exit 1).
#pragma once
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CUDA_CHECK(x)                                                                               \
  do {                                                                                              \
    const cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                        \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));       \
      std::exit(1);                                                                                 \
    }                                                                                               \
  } while (0)
