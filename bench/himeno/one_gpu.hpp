// The one-GPU Himeno timing loop, shared by the one-GPU table and by --ranks (the baseline every
// multi-GPU row is compared with): each repetition restores the initial p (untimed), then
// times `iters` iterations between two events on `stream`. Repetition -1 warms up. Every
// repetition must give the same Gosa bits (the sum is deterministic).
#pragma once
#include <gpuverbs/himeno/gpu.hpp>

#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_check.hpp"

namespace gv::himeno::bench {

struct OneGpuRun {
  std::vector<double> ms;  ///< per timed repetition
  double gosa = 0.0;       ///< after the last iteration
};

/// `around(true)` runs just before each timed repetition is enqueued, `around(false)` once its
/// end event completed (the caller reads its CPU time and energy counters there).
inline OneGpuRun time_one_gpu(DeviceDomain& dom, const std::vector<PlaneRange>& ranges, int iters, int reps,
                              cudaStream_t stream, const std::function<void(bool)>& around = {}) {
  double* gosa = nullptr;
  gv::bench::cuda_check(cudaMalloc(&gosa, std::size_t(iters) * sizeof(double)), "cudaMalloc(Gosa)");
  cudaEvent_t t0 = nullptr, t1 = nullptr;
  gv::bench::cuda_check(cudaEventCreate(&t0), "cudaEventCreate");
  gv::bench::cuda_check(cudaEventCreate(&t1), "cudaEventCreate");
  OneGpuRun out;
  for (int rep = -1; rep < reps; ++rep) {
    gv::bench::cuda_check(dom.reset(stream), "reset");
    gv::bench::cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    if (rep >= 0 && around) around(true);
    gv::bench::cuda_check(cudaEventRecord(t0, stream), "cudaEventRecord");
    for (int n = 0; n < iters; ++n) gv::bench::cuda_check(dom.iterate(ranges, gosa + n, stream), "iterate");
    gv::bench::cuda_check(cudaEventRecord(t1, stream), "cudaEventRecord");
    gv::bench::cuda_check(cudaEventSynchronize(t1), "cudaEventSynchronize");
    if (rep >= 0 && around) around(false);
    float m = 0.0f;
    gv::bench::cuda_check(cudaEventElapsedTime(&m, t0, t1), "cudaEventElapsedTime");
    double g = 0.0;
    gv::bench::cuda_check(cudaMemcpy(&g, gosa + iters - 1, sizeof g, cudaMemcpyDeviceToHost), "cudaMemcpy(Gosa)");
    if (rep < 0) {
      out.gosa = g;
      continue;
    }
    if (std::memcmp(&g, &out.gosa, sizeof g) != 0)
      throw std::runtime_error("Gosa differs between repetitions (" + std::to_string(g) + " vs " +
                               std::to_string(out.gosa) + ")");
    out.ms.push_back(m);
  }
  gv::bench::cuda_check(cudaEventDestroy(t0), "cudaEventDestroy");
  gv::bench::cuda_check(cudaEventDestroy(t1), "cudaEventDestroy");
  gv::bench::cuda_check(cudaFree(gosa), "cudaFree");
  return out;
}

}  // namespace gv::himeno::bench
