// Block-wide sums in a fixed order, shared by every Himeno kernel that adds partial Gosas: the
// same partials give the same bits whichever kernel adds them.
#pragma once
#include <gpuverbs/himeno/sweep.hpp>

#include <cub/block/block_reduce.cuh>

namespace gv::himeno::detail {

/// Threads of the blocks that call these (every Himeno kernel): the sweep's block size.
inline constexpr int kBlockThreads = LaunchPlan::kThreads;

/// The sum of one value per thread over a kBlockThreads block (a fixed CUB tree); valid in
/// thread 0. Every thread calls it; a second call in the same kernel must follow a __syncthreads.
__device__ inline double block_total(double mine) {
  using Reduce = cub::BlockReduce<double, kBlockThreads>;
  __shared__ typename Reduce::TempStorage scratch;
  return Reduce(scratch).Sum(mine);
}

/// partials[0, count) summed in a fixed order: thread t adds t, t + kBlockThreads, ... in
/// order, then block_total combines the threads. Plain loads: the partials may come from other
/// blocks of the same kernel (after an acquire). Valid in thread 0.
__device__ inline double sum_partials(const double* partials, int count) {
  double mine = 0.0;
  for (int b = int(threadIdx.x); b < count; b += kBlockThreads) mine += partials[b];
  return block_total(mine);
}

}  // namespace gv::himeno::detail
