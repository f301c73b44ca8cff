// Distributed Himeno on host-thread ranks (World with Memory::kHost): each rank runs the
// protocol of exchange.hpp at thread scope — the same calls the GPU kernels make — with its
// sweeps run through emulate_block, so CI checks the decomposition, the halo exchange and the
// Gosa reduction order end to end without a GPU.
#pragma once
#include <gpuverbs/himeno/exchange.hpp>
#include <gpuverbs/himeno/fields.hpp>
#include <gpuverbs/himeno/reference.hpp>

#include <algorithm>
#include <cstdint>

namespace gv::himeno::test {

/// Copies a rank's slab fields into its heap block: p into both buffers, the coefficients.
inline void fill_block(const DistArgs& a, const HostFields& f) {
  const std::int64_t n = f.layout.elems();
  std::copy_n(f.p.data(), n, a.p[0]);
  std::copy_n(f.p.data(), n, a.p[1]);
  for (int c = 0; c < kCoefCount; ++c) std::copy_n(f.field(Coef(c)), n, const_cast<float*>(a.coef) + c * n);
}

/// The virtual blocks [first, last) of iteration n, partials into their slots.
inline void sweep_vblocks(const DistArgs& a, std::uint64_t n, int first, int last) {
  const SweepArgs s = sweep_args(a, n);
  for (int vb = first; vb < last; ++vb) {
    const VBlock b = a.plan.vblock(vb);
    const VRange& r = a.plan.range[b.range];
    a.partials[n & 1][vb] = emulate_block(s, r.planes, r.plan, b.bx, b.by, b.bz);
  }
}

/// Iterations [n0, n0 + count) of one rank, in the order the GPU modes keep: halo waits,
/// boundary sweeps, halo puts, interior sweep, Gosa publish; the reduction of iteration n-1
/// after the publish of n, the last one at the end. Returns the first failure.
inline Status run_rank(const DistArgs& a, std::uint64_t n0, std::uint64_t count) {
  const RankPlan& p = a.plan;
  for (std::uint64_t n = n0; n < n0 + count; ++n) {
    for (Side s : {kLower, kUpper})
      if (const Status st = wait_halo<rma::Thread>(a, s, n); st != Status::kOk) return st;
    sweep_vblocks(a, n, 0, p.boundary_vblocks);
    for (Side s : {kLower, kUpper})
      for (int c = 0; c < a.halo.chunks; ++c)
        if (const Status st = send_halo<rma::Thread>(a, s, n, c); st != Status::kOk) return st;
    sweep_vblocks(a, n, p.boundary_vblocks, p.vblocks);
    double local = 0.0;
    for (int vb = 0; vb < p.vblocks; ++vb) local += a.partials[n & 1][vb];
    if (const Status st = publish_gosa(a, n, local); st != Status::kOk) return st;
    if (n > n0)
      if (const Status st = reduce_gosa(a, n - 1); st != Status::kOk) return st;
  }
  return count == 0 ? Status::kOk : reduce_gosa(a, n0 + count - 1);
}

}  // namespace gv::himeno::test
