// Shared by the GPU-engine test programs (test_gpu_engine*, one per fixture): the engine's
// options, host access to GPU buffers on a non-blocking stream and seeded bytes (children of the
// test binary itself come from processes.hpp).
//
// While a kGpu device is open its engine kernel is resident: these tests launch on
// non-blocking streams and synchronise those streams only, and allocate CUDA memory before
// opening the device (or while it is quiesced).
#pragma once
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <gpuverbs/host/verbs.hpp>

#include "processes.hpp"

namespace gvt {

inline gv::DeviceOptions engine_on(int gpu) {
  gv::DeviceOptions o;
  o.engine = gv::DeviceOptions::Engine::kGpu;
  o.gpu = gpu;
  return o;
}

/// Host-side access to GPU buffers, on a non-blocking stream (never the legacy one).
struct Stream {
  cudaStream_t s = nullptr;
  Stream() { EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess); }
  ~Stream() { (void)cudaStreamDestroy(s); }
  void put(void* dst, const void* src, std::size_t n) {
    ASSERT_EQ(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  }
  std::vector<std::uint8_t> get(const void* src, std::size_t n) {
    std::vector<std::uint8_t> v(n);
    EXPECT_EQ(cudaMemcpyAsync(v.data(), src, n, cudaMemcpyDefault, s), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    return v;
  }
  void sync() { ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess); }
};

inline std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) b = static_cast<std::uint8_t>(rng());
  return v;
}


}  // namespace gvt
