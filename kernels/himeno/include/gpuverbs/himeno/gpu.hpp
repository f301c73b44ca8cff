// Himeno on a GPU: the sweep and Gosa launches, and a device copy of one grid or slab.
// Needs the CUDA runtime (target gpuverbs::himeno built with nvcc).
//
// One iteration is one sweep launch per plane range (a whole slab, or its top and bottom
// halves launched separately so a halo can be sent while the rest computes), then one Gosa
// launch over every partial the sweeps wrote. The Gosa sum is deterministic: the same
// ranges give the same bits on every run.
#pragma once
#include <gpuverbs/himeno/fields.hpp>
#include <gpuverbs/himeno/sweep.hpp>

#include <cuda_runtime.h>

#include <span>
#include <vector>

namespace gv::himeno {

/// Launches one sweep over planes `r` with `plan` (= plan_sweep(a.layout, r, ...)); block b
/// writes its partial Gosa to partials[b] (plan.blocks() values). An empty range launches
/// nothing. Returns the launch's error.
[[nodiscard]] cudaError_t launch_sweep(const SweepArgs& a, PlaneRange r, const LaunchPlan& plan,
                                       double* partials, cudaStream_t stream);

/// Sums partials[0, count) in a fixed order (CUB block reduction over fixed strides, one
/// block) and writes the total to *gosa.
[[nodiscard]] cudaError_t launch_gosa_sum(const double* partials, int count, double* gosa,
                                          cudaStream_t stream);

/// p (two buffers, swapped after each iteration), the coefficients and the partial-Gosa
/// scratch of one grid or slab on the current device. Both p buffers start as the initial p,
/// so boundaries and halos hold the same values in each.
class DeviceDomain {
 public:
  /// Copies `init` to the current device. Throws std::runtime_error naming the failed CUDA
  /// call. planes_per_block <= 0 picks kDefaultPlanesPerBlock.
  explicit DeviceDomain(const HostFields& init, int planes_per_block = 0,
                        Arithmetic arithmetic = Arithmetic::kDouble);
  ~DeviceDomain();
  DeviceDomain(const DeviceDomain&) = delete;
  DeviceDomain& operator=(const DeviceDomain&) = delete;

  const Layout& layout() const { return layout_; }
  int planes_per_block() const { return planes_per_block_; }
  Arithmetic arithmetic() const { return arithmetic_; }

  /// The handle of the next sweep: reads the current p, writes the other buffer.
  SweepArgs args() const;
  /// The current p (what the next sweep reads; after iterate(), the newest values).
  float* p() const { return p_[current_]; }
  /// Makes the buffer the last sweep wrote current.
  void swap() { current_ ^= 1; }

  /// One Jacobi iteration: a sweep per range (disjoint, inside the interior planes; usually
  /// together the owned planes), Gosa into *gosa (device memory), then swap(). Returns the
  /// first error; cudaErrorInvalidValue for a range outside the interior.
  [[nodiscard]] cudaError_t iterate(std::span<const PlaneRange> ranges, double* gosa,
                                    cudaStream_t stream);

  /// Restores the initial p in both buffers (stream-ordered) and makes buffer 0 current.
  [[nodiscard]] cudaError_t reset(cudaStream_t stream);

  /// Copies the current p to the host. Synchronous on the legacy default stream: synchronise
  /// a non-blocking stream that iterated first.
  [[nodiscard]] cudaError_t download_p(std::vector<float>& out) const;

 private:
  void release() noexcept;

  Layout layout_;
  int planes_per_block_;
  Arithmetic arithmetic_;
  float* p_[2] = {nullptr, nullptr};
  float* p_init_ = nullptr;
  float* coef_ = nullptr;
  double* partials_ = nullptr;
  std::int64_t partials_capacity_ = 0;
  int current_ = 0;
};

}  // namespace gv::himeno
