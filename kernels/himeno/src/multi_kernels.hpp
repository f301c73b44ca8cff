// The kernels of distributed Himeno (multi_kernels.cu, device_launch.cu), as the host driver
// (multi.cpp) launches them. Each returns the launch's error. Every kernel takes the rank's
// DistArgs by value and finds the iteration it works on in the rank's Control words:
//   iter       the compute side: sweeps, the Gosa kernel, the in-kernel chain, persistent
//   wait_iter  the communication stream: the halo-wait kernel advances it, the send kernel of
//              the same iteration (after it in that stream) reads it
// so the stream mode's iteration is the same kernels with the same arguments every time, and a
// CUDA graph (or a device graph) of it can be replayed.
#pragma once
#include <gpuverbs/himeno/exchange.hpp>

#include <cuda_runtime.h>

namespace gv::himeno::detail {

/// Control words for a run of iterations [n0, end): counters cleared, the chain's bounds set.
cudaError_t launch_prepare(const DistArgs& a, std::uint64_t n0, std::uint64_t end, cudaStream_t s);

/// Virtual blocks [first, first + count) of iteration `iter` (read-only loads of p: the halos
/// they read arrived before the launch).
cudaError_t launch_vblocks(const DistArgs& a, int first, int count, cudaStream_t s);

/// One thread waits for both halos of iteration wait_iter, then advances wait_iter.
cudaError_t launch_halo_wait(const DistArgs& a, cudaStream_t s);

/// Every piece of both boundary planes of iteration wait_iter - 1, a block per piece and side.
cudaError_t launch_halo_send(const DistArgs& a, cudaStream_t s);

/// The rank's Gosa of iteration `iter` (sum of its partials) published to every rank, the
/// reduction of iteration iter - 1 (unless it is the run's first), then iter advanced.
cudaError_t launch_gosa(const DistArgs& a, cudaStream_t s);

/// hybrid: the rank's Gosa of iteration `iter` into host_gosa[iter] (mapped pinned memory),
/// then iter advanced.
cudaError_t launch_gosa_to_host(const DistArgs& a, double* host_gosa, cudaStream_t s);

/// in-kernel: one iteration as one kernel (see modes.hpp); its last block advances iter.
cudaError_t launch_iteration(const DistArgs& a, cudaStream_t s);

/// persistent: iterations [iter, end) in one cooperative launch of `grid` blocks.
cudaError_t launch_persistent(const DistArgs& a, int grid, cudaStream_t s);

/// The end of a run: (wait_chain: until the device-launched chain reached `end`), a barrier
/// over all ranks after a quiet (unless comm is off), then the reduction of the last iteration.
cudaError_t launch_finish(const DistArgs& a, bool wait_chain, cudaStream_t s);

/// NaN into what the first sweep must write: the owned interior of p[1] and the halo planes of
/// p[1] that neighbours fill.
cudaError_t launch_poison(const DistArgs& a, cudaStream_t s);

/// Resident blocks per SM of the in-kernel iteration kernel and of the persistent kernel.
cudaError_t iteration_blocks_per_sm(Arithmetic arith, int& blocks);
cudaError_t persistent_blocks_per_sm(Arithmetic arith, int& blocks);

/// device-launch (device_launch.cu, relocatable device code): the graph's last node, which
/// tail-launches the graph again while iter < end.
cudaError_t launch_scheduler(const DistArgs& a, cudaStream_t s);

}  // namespace gv::himeno::detail
