// Helpers for GPU tests: skip with a reason without a GPU, check every CUDA call. The tests'
// one CUDA check, in the three forms GoogleTest needs: GV_CUDA_CHECK (fatal: a test body or a
// void helper), GV_CUDA_EXPECT (non-fatal: later checks still run), gv_cuda_or_throw (a
// constructor, where ASSERT cannot return; gtest fails the test with the exception). Programs
// that are not GoogleTest binaries use cuda_check_exit.hpp.
#pragma once
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

/// Number of usable CUDA devices, or 0 (with the runtime's reason in *why).
inline int gv_test_gpu_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = std::string("no usable GPU: ") + cudaGetErrorString(e);
    (void)cudaGetLastError();
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device present";
  return n;
}

#define GV_REQUIRE_GPUS(n)                                                           \
  do {                                                                               \
    std::string gv_why_;                                                             \
    const int gv_have_ = gv_test_gpu_count(&gv_why_);                                \
    if (gv_have_ < (n))                                                              \
      GTEST_SKIP() << (gv_have_ == 0 ? gv_why_                                       \
                                     : "needs " + std::to_string(n) + " GPUs, found " + \
                                           std::to_string(gv_have_));                \
  } while (0)

#define GV_CUDA_CHECK(expr)                                                             \
  do {                                                                                  \
    const cudaError_t gv_e_ = (expr);                                                   \
    ASSERT_EQ(gv_e_, cudaSuccess) << #expr << ": " << cudaGetErrorString(gv_e_);         \
  } while (0)

#define GV_CUDA_EXPECT(expr)                                                            \
  do {                                                                                  \
    const cudaError_t gv_e_ = (expr);                                                   \
    EXPECT_EQ(gv_e_, cudaSuccess) << #expr << ": " << cudaGetErrorString(gv_e_);         \
  } while (0)

inline void gv_cuda_or_throw(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
