// device-launch mode: the scheduler node of the per-rank device graph (in-kernel iteration ->
// scheduler). Built with relocatable device code and linked with the device runtime
// (cudadevrt), which device-side graph launches need; nothing else of Himeno is, so the
// sweep kernels keep their whole-program optimisation.
#include "multi_kernels.hpp"

namespace gv::himeno::detail {
namespace {

// While the chain has iterations left, the graph this node belongs to is tail-launched again:
// it runs after this graph instance ends, with no device-side synchronise (CUDA 12+). A graph
// may have one self tail launch pending, which this is.
__global__ void scheduler_kernel(const __grid_constant__ DistArgs a) {
  if (failed(a)) return;
  const std::uint64_t next = a.control->iter;  // the iteration kernel before this node advanced it
  if (next >= a.control->end) return;
  const cudaError_t e = cudaGraphLaunch(cudaGetCurrentGraphExec(), cudaStreamGraphTailLaunch);
  if (e != cudaSuccess) record_error(a, static_cast<Status>(e), Where::kDeviceLaunch, next);
}

}  // namespace

cudaError_t launch_scheduler(const DistArgs& a, cudaStream_t s) {
  scheduler_kernel<<<1, 1, 0, s>>>(a);
  return cudaGetLastError();
}

}  // namespace gv::himeno::detail
