// The start of every NVSHMEM test program here (NVSHMEM's API only, so that each also builds
// against NVSHMEM itself): nvshmem_init, then the GPU of this PE's index on its node (modulo the
// node's GPUs).
#pragma once
#include <nvshmem.h>
#include <nvshmemx.h>

#include "cuda_check_exit.hpp"

inline void start_pe() {
  nvshmem_init();
  int gpus = 0;
  CUDA_CHECK(cudaGetDeviceCount(&gpus));
  CUDA_CHECK(cudaSetDevice(nvshmem_team_my_pe(NVSHMEMX_TEAM_NODE) % gpus));
}
