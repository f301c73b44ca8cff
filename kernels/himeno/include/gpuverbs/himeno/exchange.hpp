// Himeno across ranks, the communicating steps: halo planes and the Gosa, over the rma layer.
// __host__ __device__: the GPU kernels of every mode call these, and the CPU tests run the very
// same calls on host-thread ranks (World with Memory::kHost), so the protocol is tested on CI.
//
// Protocol of iteration n on a rank (decomp.hpp says what the sweeps are):
//   wait_halo(lower/upper, n)   the neighbour's boundary plane of sweep n-1 is in this rank's
//                               halo of p[n & 1]: n * chunks pieces arrived since the reset
//   boundary sweeps, then send_halo(side, n, chunk) for every chunk: sweep n's boundary plane
//                               (in p[(n+1) & 1]) to the neighbour's halo of that same buffer
//   interior sweep
//   publish_gosa(n, local)      this rank's Gosa of sweep n to slot [n][rank] of every rank
//   reduce_gosa(n)              once all ranks' parts arrived: their sum in rank order
// Why the buffers are safe to overwrite: a rank sends sweep n's plane into the neighbour's
// p[(n+1) & 1], which the neighbour last read in sweep n-1's boundary; the neighbour sent its
// own sweep n-1 plane after that boundary sweep ended, and this rank waited for that plane
// before computing sweep n. Gosa slots are per iteration, so ranks may publish ahead freely.
#pragma once
#include <gpuverbs/config.hpp>
#include <gpuverbs/himeno/decomp.hpp>
#include <gpuverbs/himeno/sweep.hpp>
#include <gpuverbs/rma.hpp>
#include <gpuverbs/sync.hpp>

#include <cstddef>
#include <cstdint>

namespace gv::himeno {

inline constexpr std::uint32_t kDistArgsVersion = 1;

/// One rank's handle for its kernels (by value, __grid_constant__). Every pointer is into this
/// rank's block of the symmetric heap (HeapLayout); the World and the block must outlive every
/// kernel using the handle.
struct DistArgs {
  std::uint32_t version = kDistArgsVersion;
  std::uint32_t comm = 1;  ///< 0 (--no-comm): no halo puts, no waits, the Gosa of this rank alone
  rma::Endpoint ep;
  RankPlan plan;
  HaloPlan halo;
  float* p[2] = {nullptr, nullptr};
  const float* coef = nullptr;
  double* partials[2] = {nullptr, nullptr};  ///< per parity of the iteration
  std::uint64_t* halo_sig = nullptr;         ///< [kLower], [kUpper]
  std::uint64_t* gosa_sig = nullptr;         ///< [capacity]
  double* gosa_mine = nullptr;               ///< [capacity]
  double* gosa_parts = nullptr;              ///< [capacity][ranks]
  double* gosa_total = nullptr;              ///< [capacity]
  std::int64_t capacity = 0;
  Control* control = nullptr;
};

/// The handle of `plan`'s rank whose heap block (plan_heap's layout) starts at `block`.
inline DistArgs make_dist_args(const rma::Endpoint& ep, std::byte* block, const HeapLayout& h, const RankPlan& plan,
                               bool comm) {
  DistArgs a;
  a.comm = comm ? 1 : 0;
  a.ep = ep;
  a.plan = plan;
  a.halo = plan_halo(plan.slab.local);
  for (int k = 0; k < 2; ++k) {
    a.p[k] = reinterpret_cast<float*>(block + h.p[k]);
    a.partials[k] = reinterpret_cast<double*>(block + h.partials[k]);
  }
  a.coef = reinterpret_cast<const float*>(block + h.coef);
  a.halo_sig = reinterpret_cast<std::uint64_t*>(block + h.halo_sig);
  a.gosa_sig = reinterpret_cast<std::uint64_t*>(block + h.gosa_sig);
  a.gosa_mine = reinterpret_cast<double*>(block + h.gosa_mine);
  a.gosa_parts = reinterpret_cast<double*>(block + h.gosa_parts);
  a.gosa_total = reinterpret_cast<double*>(block + h.gosa_total);
  a.capacity = h.capacity;
  a.control = reinterpret_cast<Control*>(block + h.control);
  return a;
}

/// The sweep of iteration n: reads p[n & 1], writes p[(n+1) & 1].
GV_HD inline SweepArgs sweep_args(const DistArgs& a, std::uint64_t n) {
  SweepArgs s;
  s.layout = a.plan.slab.local;
  s.p_in = a.p[n & 1];
  s.p_out = a.p[(n + 1) & 1];
  s.coef = a.coef;
  return s;
}

/// Keeps the first error of the rank; later ones are dropped.
GV_HD inline void record_error(const DistArgs& a, Status s, Where w, std::uint64_t n) {
  if (s == Status::kOk) return;
  std::uint32_t expected = 0;
  if (sync::compare_exchange(&a.control->error.status, expected, static_cast<std::uint32_t>(s))) {
    a.control->error.where = static_cast<std::uint32_t>(w);
    a.control->error.iteration = n;
  }
}

/// Whether the rank has hit an error: its kernels then skip their work and waits, so a failed
/// run ends within one wait budget.
GV_HD inline bool failed(const DistArgs& a) { return sync::load_relaxed(&a.control->error.status) != 0; }

template <class G>
GV_HD inline Status wait_halo(const DistArgs& a, Side s, std::uint64_t n) {
  if (!a.comm || !a.plan.has(s)) return Status::kOk;
  return rma::wait_until<G>(a.ep, a.halo_sig + s, rma::Cmp::kGe, n * std::uint64_t(a.halo.chunks));
}

/// Piece `chunk` of sweep n's boundary plane towards side s. It lands in the neighbour's halo on
/// the opposite side, so it counts on the neighbour's signal of that side.
template <class G>
GV_HD inline Status send_halo(const DistArgs& a, Side s, std::uint64_t n, int chunk) {
  if (!a.comm || !a.plan.has(s)) return Status::kOk;
  float* out = a.p[(n + 1) & 1];
  const std::int64_t at = a.halo.chunk_begin(chunk);
  return rma::put_signal<G>(a.ep, out + a.plan.dest_offset[s] + at, out + a.plan.send_offset[s] + at,
                            std::size_t(a.halo.chunk_size(chunk)) * sizeof(float), a.halo_sig + (1 - s), 1,
                            rma::SignalOp::kAdd, a.plan.neighbour[s]);
}

/// This rank's Gosa of iteration n to slot [n][rank] of every rank (this one included). One
/// thread calls it.
GV_HD inline Status publish_gosa(const DistArgs& a, std::uint64_t n, double local) {
  a.gosa_mine[n] = local;
  const int me = a.plan.rank;
  for (int q = 0; q < a.plan.ranks; ++q) {
    if (!a.comm && q != me) continue;
    const Status s = rma::put_signal<rma::Thread>(a.ep, a.gosa_parts + n * std::uint64_t(a.plan.ranks) + me,
                                                  a.gosa_mine + n, sizeof(double), a.gosa_sig + n, 1,
                                                  rma::SignalOp::kAdd, q);
    if (s != Status::kOk) return s;
  }
  return Status::kOk;
}

/// Waits for every rank's Gosa of iteration n and stores their sum, in rank order, in
/// gosa_total[n]. One thread calls it.
GV_HD inline Status reduce_gosa(const DistArgs& a, std::uint64_t n) {
  const std::uint64_t parts = a.comm ? std::uint64_t(a.plan.ranks) : 1;
  const Status s = rma::wait_until<rma::Thread>(a.ep, a.gosa_sig + n, rma::Cmp::kGe, parts);
  if (s != Status::kOk) return s;
  const double* slot = a.gosa_parts + n * std::uint64_t(a.plan.ranks);
  double total = 0.0;
  for (int q = 0; q < a.plan.ranks; ++q)
    if (a.comm || q == a.plan.rank) total += slot[q];
  a.gosa_total[n] = total;
  return Status::kOk;
}

}  // namespace gv::himeno
