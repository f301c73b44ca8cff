// CPU executors of the Himeno sweep: the references the tests check against, and a host
// emulation of the GPU kernel's threads.
#pragma once
#include <gpuverbs/himeno/fields.hpp>
#include <gpuverbs/himeno/sweep.hpp>

#include <vector>

namespace gv::himeno {

/// The benchmark's jacobi() in precision T over every interior plane of a layout (a whole
/// grid, or a slab whose halos are kept current by the caller).
///   Reference<double>: the check. Inputs are the float fields widened exactly, arithmetic,
///     the stored p and the Gosa sum are double.
///   Reference<float>: the RIKEN source's own float arithmetic, term order and Gosa
///     accumulation (one float add per point; it stops growing at sizes L and XL, where its
///     Gosa is no check).
template <class T>
class Reference {
 public:
  explicit Reference(const HostFields& init);

  /// One Jacobi iteration; returns its Gosa.
  T iterate();

  const Layout& layout() const { return layout_; }
  /// p after the iterations so far, in layout order.
  const std::vector<T>& p() const { return p_; }
  std::vector<T>& p() { return p_; }

 private:
  Layout layout_;
  std::vector<T> p_, next_, coef_;
};

extern template class Reference<float>;
extern template class Reference<double>;

/// Runs the threads of block (bx, by, bz) of one GPU sweep on the host, through the same
/// sweep_column the kernel runs; returns the block's partial Gosa, the sum of its threads'
/// shares in thread order.
double emulate_block(const SweepArgs& a, PlaneRange r, const LaunchPlan& plan, int bx, int by, int bz);

/// Runs every block of one GPU sweep (plan_sweep(a.layout, r, ...)) on the host, block after
/// block; writes one partial Gosa per block at the kernel's index.
void emulate_sweep(const SweepArgs& a, PlaneRange r, const LaunchPlan& plan, double* partials);

}  // namespace gv::himeno
