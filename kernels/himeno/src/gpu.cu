#include <gpuverbs/himeno/gpu.hpp>

#include "block_sum.cuh"
#include "cuda_check.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace gv::himeno {
namespace {

// Two blocks per multiprocessor (<= 128 registers): 512 threads, each with about 260 bytes
// of loads in flight per plane step, cover the latency of HBM at full bandwidth.
template <class T>
__global__ void __launch_bounds__(LaunchPlan::kThreads, 2)
    sweep_kernel(const __grid_constant__ SweepArgs a, const PlaneRange r, const LaunchPlan plan,
                 double* __restrict__ partials) {
  const ThreadWork w =
      thread_work(plan, a.layout, r, int(blockIdx.x), int(blockIdx.y), int(blockIdx.z),
                  int(threadIdx.x));
  const double mine = w.active ? sweep_column<T>(a, w.j, w.k0, w.i_begin, w.i_end) : 0.0;
  const double block = detail::block_total(mine);
  if (threadIdx.x == 0)
    partials[blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)] = block;
}

// Deterministic final step (detail::sum_partials): no atomics, so the bits depend on `count`
// and the partials only.
__global__ void __launch_bounds__(detail::kBlockThreads)
    gosa_sum_kernel(const double* partials, int count, double* __restrict__ gosa) {
  const double total = detail::sum_partials(partials, count);
  if (threadIdx.x == 0) *gosa = total;
}

using detail::check;

}  // namespace

cudaError_t launch_sweep(const SweepArgs& a, PlaneRange r, const LaunchPlan& plan,
                         double* partials, cudaStream_t stream) {
  if (plan.blocks() == 0) return cudaSuccess;
  const dim3 grid(unsigned(plan.grid_x), unsigned(plan.grid_y), unsigned(plan.grid_z));
  if (plan.arithmetic == Arithmetic::kDouble)
    sweep_kernel<double><<<grid, LaunchPlan::kThreads, 0, stream>>>(a, r, plan, partials);
  else
    sweep_kernel<float><<<grid, LaunchPlan::kThreads, 0, stream>>>(a, r, plan, partials);
  return cudaGetLastError();
}

cudaError_t launch_gosa_sum(const double* partials, int count, double* gosa, cudaStream_t stream) {
  gosa_sum_kernel<<<1, detail::kBlockThreads, 0, stream>>>(partials, count, gosa);
  return cudaGetLastError();
}

DeviceDomain::DeviceDomain(const HostFields& init, int planes_per_block, Arithmetic arithmetic)
    : layout_(init.layout),
      planes_per_block_(planes_per_block > 0 ? planes_per_block : kDefaultPlanesPerBlock),
      arithmetic_(arithmetic),
      partials_capacity_(max_sweep_blocks(init.layout)) {
  const std::size_t field = std::size_t(layout_.elems()) * sizeof(float);
  try {
    check(cudaMalloc(&p_[0], field), "cudaMalloc(p)");
    check(cudaMalloc(&p_[1], field), "cudaMalloc(p)");
    check(cudaMalloc(&p_init_, field), "cudaMalloc(p initial)");
    check(cudaMalloc(&coef_, kCoefCount * field), "cudaMalloc(coefficients)");
    check(cudaMalloc(&partials_, std::size_t(partials_capacity_) * sizeof(double)),
          "cudaMalloc(partials)");
    check(cudaMemcpy(p_init_, init.p.data(), field, cudaMemcpyHostToDevice), "cudaMemcpy(p)");
    check(cudaMemcpy(coef_, init.coef.data(), kCoefCount * field, cudaMemcpyHostToDevice),
          "cudaMemcpy(coefficients)");
    check(reset(nullptr), "reset");
    check(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
  } catch (...) {
    release();
    throw;
  }
}

DeviceDomain::~DeviceDomain() { release(); }

void DeviceDomain::release() noexcept {
  // Frees whatever was allocated; cudaFree(nullptr) is a no-op. A failure here has no caller
  // to report to and nothing left to undo.
  for (float*& b : p_) (void)cudaFree(std::exchange(b, nullptr));
  (void)cudaFree(std::exchange(p_init_, nullptr));
  (void)cudaFree(std::exchange(coef_, nullptr));
  (void)cudaFree(std::exchange(partials_, nullptr));
}

SweepArgs DeviceDomain::args() const {
  SweepArgs a;
  a.layout = layout_;
  a.p_in = p_[current_];
  a.p_out = p_[current_ ^ 1];
  a.coef = coef_;
  return a;
}

cudaError_t DeviceDomain::iterate(std::span<const PlaneRange> ranges, double* gosa,
                                  cudaStream_t stream) {
  const SweepArgs a = args();
  std::int64_t used = 0;
  for (const PlaneRange& r : ranges) {
    if (r.begin < 1 || r.end > layout_.ni - 1 || r.begin > r.end) return cudaErrorInvalidValue;
    const LaunchPlan plan = plan_sweep(layout_, r, planes_per_block_, arithmetic_);
    // Disjoint ranges never exceed the capacity; overlapping ones may, and are refused
    // before a block can write past the scratch.
    if (used + plan.blocks() > partials_capacity_) return cudaErrorInvalidValue;
    if (const cudaError_t e = launch_sweep(a, r, plan, partials_ + used, stream); e != cudaSuccess)
      return e;
    used += plan.blocks();
  }
  if (const cudaError_t e = launch_gosa_sum(partials_, int(used), gosa, stream); e != cudaSuccess)
    return e;
  swap();
  return cudaSuccess;
}

cudaError_t DeviceDomain::reset(cudaStream_t stream) {
  const std::size_t field = std::size_t(layout_.elems()) * sizeof(float);
  for (float* b : p_)
    if (const cudaError_t e = cudaMemcpyAsync(b, p_init_, field, cudaMemcpyDeviceToDevice, stream);
        e != cudaSuccess)
      return e;
  current_ = 0;
  return cudaSuccess;
}

cudaError_t DeviceDomain::download_p(std::vector<float>& out) const {
  out.resize(std::size_t(layout_.elems()));
  return cudaMemcpy(out.data(), p(), out.size() * sizeof(float), cudaMemcpyDeviceToHost);
}

}  // namespace gv::himeno
