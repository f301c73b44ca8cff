// Kernels of distributed Himeno: the pieces the stream, graph and hybrid modes enqueue, the
// in-kernel iteration (also the body of device-launch), the persistent kernel, and the run's
// start and end. multi_kernels.hpp says which Control word each reads and advances.
#include "multi_kernels.hpp"

#include "block_sum.cuh"

namespace gv::himeno::detail {
namespace {

using rma::Block;

constexpr Where wait_where(Side s) { return s == kLower ? Where::kHaloWaitLower : Where::kHaloWaitUpper; }
constexpr Where send_where(Side s) { return s == kLower ? Where::kHaloSendLower : Where::kHaloSendUpper; }

/// failed(a) as thread 0 reads it, in every thread of the block: a block-uniform decision (the
/// word may change while the threads read it).
__device__ bool block_failed(const DistArgs& a) {
  __shared__ bool f;
  __syncthreads();  // earlier readers of f are done
  if (threadIdx.x == 0) f = failed(a);
  __syncthreads();
  return f;
}

/// Virtual block vb of iteration n: its threads' sweep, the block's partial Gosa into its slot.
template <class T, bool kCoherent>
__device__ void sweep_vblock(const DistArgs& a, const SweepArgs& s, std::uint64_t n, int vb) {
  const VBlock b = a.plan.vblock(vb);
  const VRange& r = a.plan.range[b.range];
  const ThreadWork w = thread_work(r.plan, s.layout, r.planes, b.bx, b.by, b.bz, int(threadIdx.x));
  const double mine = w.active ? sweep_column<T, kCoherent>(s, w.j, w.k0, w.i_begin, w.i_end) : 0.0;
  const double total = block_total(mine);
  if (threadIdx.x == 0) a.partials[n & 1][vb] = total;
  __syncthreads();  // block_total's scratch is reused by the next call
}

/// Every thread of a block calls it once the block's results are stored; returns true, in every
/// thread, in the block that arrives last of `total`. That block sees every block's results
/// (acquire) and clears the counter for the next iteration (all have arrived).
__device__ bool last_to_arrive(std::uint32_t* counter, std::uint32_t total) {
  __shared__ bool last;
  __syncthreads();  // the block's stores happen before thread 0's release below
  if (threadIdx.x == 0) {
    last = sync::fetch_add(counter, 1u) + 1 == total;  // acq_rel, device scope
    if (last) sync::store_relaxed(counter, 0u);
  }
  __syncthreads();
  return last;
}

/// The halos range r reads, before its sweep of iteration n (bounded waits).
__device__ void wait_range(const DistArgs& a, const VRange& r, std::uint64_t n) {
  for (Side s : {kLower, kUpper}) {
    if (!r.reads_halo[s]) continue;
    const Status st = wait_halo<Block>(a, s, n);
    if (threadIdx.x == 0) record_error(a, st, wait_where(s), n);
  }
}

/// Every piece of the plane boundary range `range` computed in iteration n, to each side it
/// goes to. The whole block sends.
__device__ void send_plane(const DistArgs& a, int range, std::uint64_t n) {
  for (Side s : {kLower, kUpper}) {
    if (a.plan.send_range[s] != range) continue;
    for (int c = 0; c < a.halo.chunks; ++c) {
      const Status st = send_halo<Block>(a, s, n, c);
      if (threadIdx.x == 0) record_error(a, st, send_where(s), n);
    }
  }
}

/// Virtual block vb of iteration n in a kernel that also waits and sends: a boundary block waits
/// for its halos and sweeps with coherent loads (a peer may have put the halo while the kernel
/// ran); then, kSendHere, the last block of its plane puts the plane to the neighbour, or else
/// it only counts itself done and the persistent kernel's communication block sends. An interior
/// block only sweeps (kCoherentInterior: when p_in was written during this kernel, persistent).
template <class T, bool kSendHere, bool kCoherentInterior>
__device__ void boundary_or_interior(const DistArgs& a, const SweepArgs& s, std::uint64_t n, int vb) {
  const RankPlan& p = a.plan;
  if (vb >= p.boundary_vblocks) {
    sweep_vblock<T, kCoherentInterior>(a, s, n, vb);
    return;
  }
  const int range = p.vblock(vb).range;
  wait_range(a, p.range[range], n);
  sweep_vblock<T, true>(a, s, n, vb);
  if constexpr (kSendHere) {
    if (last_to_arrive(&a.control->plane_done[range], std::uint32_t(p.range[range].plan.blocks())))
      send_plane(a, range, n);
  } else {
    __syncthreads();  // the block's stores happen before thread 0's release
    if (threadIdx.x == 0) sync::fetch_add(&a.control->plane_done[range], 1u);  // acq_rel, device scope
  }
}

/// The rank's Gosa of iteration m (from its partials) to every rank, then the reduction of
/// iteration m - 1 unless m is the run's first. Every thread calls it.
__device__ void publish_and_reduce(const DistArgs& a, std::uint64_t m, std::uint64_t start) {
  const double local = sum_partials(a.partials[m & 1], a.plan.vblocks);
  if (threadIdx.x == 0) {
    record_error(a, publish_gosa(a, m, local), Where::kGosaPublish, m);
    if (m > start && !failed(a)) record_error(a, reduce_gosa(a, m - 1), Where::kGosaReduce, m - 1);
  }
  __syncthreads();
}

/// The persistent kernel's communication block in iteration n: the Gosa of iteration n-1 (its
/// puts and the wait for the other ranks' parts), then each boundary plane, once every block of
/// its range has counted itself done, to its neighbour. It sweeps nothing, so neither the puts
/// nor their fences hold up a sweeping block (one block moves a plane at ~45 GB/s: 2.9 us at M).
__device__ void comm_iteration(const DistArgs& a, std::uint64_t n, std::uint64_t n0) {
  const RankPlan& p = a.plan;
  if (n > n0) publish_and_reduce(a, n - 1, n0);
  for (int range = 0; range < p.boundary_ranges; ++range) {
    if (p.send_range[kLower] != range && p.send_range[kUpper] != range) continue;
    if (threadIdx.x == 0) {
      const std::uint32_t blocks = std::uint32_t(p.range[range].plan.blocks());
      std::uint32_t* done = &a.control->plane_done[range];
      const Status st = sync::bounded_wait([&] { return sync::load_polled(done) >= blocks || failed(a); },
                                           a.ep.budget, a.ep.abort);
      sync::acquire_fence();  // the range's sweep stores before this block's loads of the plane
      sync::store_relaxed(done, 0u);  // every block of the range has arrived this iteration
      record_error(a, st, Where::kPlaneDone, n);
    }
    if (block_failed(a)) return;
    send_plane(a, range, n);
  }
}

/// The persistent kernel's barrier between sweeps: `target` arrivals since the launch. Bounded;
/// it also ends when the rank has failed (the blocks then stop together). It does not read the
/// host's abort flag: the blocks it waits for wait only in bounded waits that do, and record the
/// abort as the rank's failure, which ends this wait; and every block of the grid reading that
/// flag (PCIe) at once delays them all (at XL, with waits over 100 us, by milliseconds).
__device__ Status grid_barrier(const DistArgs& a, std::uint64_t target) {
  __shared__ Status st;
  __syncthreads();  // the block's sweep stores happen before thread 0's release
  if (threadIdx.x == 0) {
    sync::fetch_add(&a.control->barrier, std::uint64_t{1});  // acq_rel, device scope
    st = sync::bounded_wait(
        [&] { return sync::load_polled(&a.control->barrier) >= target || failed(a); }, a.ep.budget, nullptr);
    sync::acquire_fence();  // the other blocks' sweeps before this block's next loads
    if (st == Status::kOk && failed(a)) st = Status::kAborted;
  }
  __syncthreads();
  return st;
}

// ---- kernels ---------------------------------------------------------------------------------

__global__ void prepare_kernel(const __grid_constant__ DistArgs a, std::uint64_t n0, std::uint64_t end) {
  Control& c = *a.control;
  c.plane_done[0] = c.plane_done[1] = c.all_done = 0;
  c.iter = c.wait_iter = c.start = n0;
  c.end = end;
  c.barrier = 0;
}

template <class T>
__global__ void __launch_bounds__(kBlockThreads, 2) vblocks_kernel(const __grid_constant__ DistArgs a, int first) {
  const std::uint64_t n = a.control->iter;
  sweep_vblock<T, false>(a, sweep_args(a, n), n, first + int(blockIdx.x));
}

__global__ void halo_wait_kernel(const __grid_constant__ DistArgs a) {
  const std::uint64_t n = a.control->wait_iter;
  for (Side s : {kLower, kUpper})
    if (a.plan.has(s) && !failed(a)) record_error(a, wait_halo<rma::Thread>(a, s, n), wait_where(s), n);
  a.control->wait_iter = n + 1;
}

// Grid (chunks, 2): block (c, s) sends piece c of the plane for side s.
__global__ void __launch_bounds__(kBlockThreads) halo_send_kernel(const __grid_constant__ DistArgs a) {
  const Side s = Side(blockIdx.y);
  if (!a.plan.has(s) || block_failed(a)) return;
  const std::uint64_t n = a.control->wait_iter - 1;  // the halo-wait kernel before this one advanced it
  const Status st = send_halo<Block>(a, s, n, int(blockIdx.x));
  if (threadIdx.x == 0) record_error(a, st, send_where(s), n);
}

__global__ void __launch_bounds__(kBlockThreads) gosa_kernel(const __grid_constant__ DistArgs a) {
  const std::uint64_t n = a.control->iter;
  if (!block_failed(a)) publish_and_reduce(a, n, a.control->start);
  if (threadIdx.x == 0) a.control->iter = n + 1;
}

__global__ void __launch_bounds__(kBlockThreads) gosa_to_host_kernel(const __grid_constant__ DistArgs a,
                                                                     double* host_gosa) {
  const std::uint64_t n = a.control->iter;
  const double local = sum_partials(a.partials[n & 1], a.plan.vblocks);
  if (threadIdx.x == 0) {
    host_gosa[n] = local;
    a.control->iter = n + 1;
  }
}

// One iteration: boundary blocks (the first ones, scheduled first) wait for their halos and the
// last block of each boundary plane puts it to the neighbour while interior blocks still
// compute (boundary_or_interior); the last block of all publishes the Gosa and advances iter.
template <class T>
__global__ void __launch_bounds__(kBlockThreads, 2) iteration_kernel(const __grid_constant__ DistArgs a) {
  __shared__ std::uint64_t n_shared;
  if (threadIdx.x == 0) n_shared = a.control->iter;
  if (block_failed(a)) return;  // (its barriers also publish n_shared)
  const std::uint64_t n = n_shared;
  boundary_or_interior<T, true, false>(a, sweep_args(a, n), n, int(blockIdx.x));
  if (!last_to_arrive(&a.control->all_done, std::uint32_t(a.plan.vblocks))) return;
  publish_and_reduce(a, n, a.control->start);
  if (threadIdx.x == 0) a.control->iter = n + 1;  // every block has read n; the kernel's end publishes it
}

// Iterations [start, end): every block but the last takes virtual blocks blockIdx.x,
// + (gridDim.x - 1), ... (the boundary ones first); the last block communicates
// (comm_iteration); a grid barrier ends each sweep. p is loaded coherently: other blocks wrote
// it in the previous iteration, peers put the halos while the kernel runs.
template <class T>
__global__ void __launch_bounds__(kBlockThreads, 2) persistent_kernel(const __grid_constant__ DistArgs a) {
  const std::uint64_t n0 = a.control->start, end = a.control->end;
  const RankPlan& p = a.plan;
  const int sweepers = int(gridDim.x) - 1;
  const bool comm_block = int(blockIdx.x) == sweepers;
  std::uint64_t arrivals = 0;
  for (std::uint64_t n = n0; n < end; ++n) {
    if (block_failed(a)) return;
    if (comm_block) {
      comm_iteration(a, n, n0);
    } else {
      const SweepArgs s = sweep_args(a, n);
      for (int vb = int(blockIdx.x); vb < p.vblocks; vb += sweepers) boundary_or_interior<T, false, true>(a, s, n, vb);
    }
    arrivals += gridDim.x;
    const Status st = grid_barrier(a, arrivals);
    if (st != Status::kOk) {
      if (threadIdx.x == 0) record_error(a, st, Where::kGridBarrier, n);
      return;
    }
  }
  if (comm_block && end > n0 && !block_failed(a)) publish_and_reduce(a, end - 1, n0);
  if (comm_block && threadIdx.x == 0) a.control->iter = end;
}

__global__ void __launch_bounds__(kBlockThreads) finish_kernel(const __grid_constant__ DistArgs a, bool wait_chain) {
  __shared__ bool stop;
  if (threadIdx.x == 0) {
    stop = failed(a);
    if (!stop && wait_chain) {
      const Status st = sync::bounded_wait(
          [&] { return sync::load_polled(&a.control->iter) >= a.control->end || failed(a); }, a.ep.budget, a.ep.abort);
      sync::acquire_fence();
      record_error(a, st, Where::kChainEnd, a.control->end);
      stop = failed(a);
    }
  }
  __syncthreads();
  if (stop) return;
  if (a.comm) {
    // Every rank's puts (quiet) are complete before any rank resets its buffers.
    const Status st = rma::barrier<Block>(a.ep);
    if (threadIdx.x == 0) record_error(a, st, Where::kFinishBarrier, a.control->end);
  }
  if (threadIdx.x == 0 && !failed(a) && a.control->end > a.control->start)
    record_error(a, reduce_gosa(a, a.control->end - 1), Where::kGosaReduce, a.control->end - 1);
}

__global__ void poison_kernel(const __grid_constant__ DistArgs a) {
  const Layout& l = a.plan.slab.local;
  const int P = a.plan.slab.planes;
  float* out = a.p[1];
  const float nan = __int_as_float(0x7fc00000);
  for (std::int64_t at = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; at < l.elems();
       at += std::int64_t(gridDim.x) * blockDim.x) {
    const int i = int(at / l.plane_elems());
    const int j = int(at % l.plane_elems() / l.pitch), k = int(at % l.pitch);
    const bool owned = i >= 1 && i <= P && j >= 1 && j <= l.nj - 2 && k >= 1 && k <= l.nk - 2;
    const bool filled_halo = (i == 0 && a.plan.has(kLower)) || (i == P + 1 && a.plan.has(kUpper));
    if (owned || filled_halo) out[at] = nan;
  }
}

template <class K>
cudaError_t launch_typed(const DistArgs& a, K&& launch) {
  return a.plan.range[0].plan.arithmetic == Arithmetic::kDouble ? launch(double{}) : launch(float{});
}

}  // namespace

cudaError_t launch_prepare(const DistArgs& a, std::uint64_t n0, std::uint64_t end, cudaStream_t s) {
  prepare_kernel<<<1, 1, 0, s>>>(a, n0, end);
  return cudaGetLastError();
}

cudaError_t launch_vblocks(const DistArgs& a, int first, int count, cudaStream_t s) {
  if (count <= 0) return cudaSuccess;
  return launch_typed(a, [&](auto t) {
    vblocks_kernel<decltype(t)><<<count, kBlockThreads, 0, s>>>(a, first);
    return cudaGetLastError();
  });
}

cudaError_t launch_halo_wait(const DistArgs& a, cudaStream_t s) {
  halo_wait_kernel<<<1, 1, 0, s>>>(a);
  return cudaGetLastError();
}

cudaError_t launch_halo_send(const DistArgs& a, cudaStream_t s) {
  halo_send_kernel<<<dim3(unsigned(a.halo.chunks), 2), kBlockThreads, 0, s>>>(a);
  return cudaGetLastError();
}

cudaError_t launch_gosa(const DistArgs& a, cudaStream_t s) {
  gosa_kernel<<<1, kBlockThreads, 0, s>>>(a);
  return cudaGetLastError();
}

cudaError_t launch_gosa_to_host(const DistArgs& a, double* host_gosa, cudaStream_t s) {
  gosa_to_host_kernel<<<1, kBlockThreads, 0, s>>>(a, host_gosa);
  return cudaGetLastError();
}

cudaError_t launch_iteration(const DistArgs& a, cudaStream_t s) {
  return launch_typed(a, [&](auto t) {
    iteration_kernel<decltype(t)><<<a.plan.vblocks, kBlockThreads, 0, s>>>(a);
    return cudaGetLastError();
  });
}

cudaError_t launch_persistent(const DistArgs& a, int grid, cudaStream_t s) {
  return launch_typed(a, [&](auto t) {
    void* params[] = {const_cast<DistArgs*>(&a)};
    return cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(&persistent_kernel<decltype(t)>), dim3(unsigned(grid)),
                                       dim3(kBlockThreads), params, 0, s);
  });
}

cudaError_t launch_finish(const DistArgs& a, bool wait_chain, cudaStream_t s) {
  finish_kernel<<<1, kBlockThreads, 0, s>>>(a, wait_chain);
  return cudaGetLastError();
}

cudaError_t launch_poison(const DistArgs& a, cudaStream_t s) {
  poison_kernel<<<256, kBlockThreads, 0, s>>>(a);
  return cudaGetLastError();
}

cudaError_t iteration_blocks_per_sm(Arithmetic arith, int& blocks) {
  return arith == Arithmetic::kDouble
             ? cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, iteration_kernel<double>, kBlockThreads, 0)
             : cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, iteration_kernel<float>, kBlockThreads, 0);
}

cudaError_t persistent_blocks_per_sm(Arithmetic arith, int& blocks) {
  return arith == Arithmetic::kDouble
             ? cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, persistent_kernel<double>, kBlockThreads, 0)
             : cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, persistent_kernel<float>, kBlockThreads, 0);
}

}  // namespace gv::himeno::detail
