// Family 4's device-side launches (device_launch.cu): kernels that launch kernels through the
// device runtime (CUDA dynamic parallelism, tail launch and fire-and-forget) and kernels that
// launch device graphs (cudaGraphInstantiateFlagDeviceLaunch). The device runtime needs
// relocatable device code and cudadevrt; only device_launch.cu is built so, in its own library,
// so the rest of gv_scope keeps whole-program compilation. Each function enqueues one launch
// from the host and returns its error; what the device launches it counts in a DeviceTally.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace gv::scope {

/// In device memory: how many launched grids ran, and the first device runtime error (a
/// cudaError_t; 0 while none). The host reads it back to check every launch happened.
struct DeviceTally {
  unsigned long long ran = 0;
  unsigned int error = 0;
  unsigned int pad = 0;
};
static_assert(sizeof(DeviceTally) == 16);

/// A chain of n grids, each counting itself and tail-launching the next (n - 1 device-side
/// launches after the host's one): the chain runs one grid after another, no synchronisation.
cudaError_t launch_kernel_tail_chain(DeviceTally* t, std::uint32_t n, cudaStream_t s);

/// One thread launches n child grids into cudaStreamFireAndForget, one after another; each
/// child counts itself. The parent grid completes once its children have.
cudaError_t launch_kernel_fire_and_forget(DeviceTally* t, std::uint32_t n, cudaStream_t s);

/// The one node of a self-relaunching device graph: counts itself and, unless the count is a
/// multiple of n, tail-launches its own graph (cudaGetCurrentGraphExec), so each host launch
/// of the graph runs the node exactly n times. Captured into the graph by the caller.
cudaError_t launch_graph_chain_node(DeviceTally* t, std::uint32_t n, cudaStream_t s);

/// The one node of a child device graph: counts itself.
cudaError_t launch_graph_child_node(DeviceTally* t, cudaStream_t s);

/// The one node of a scheduler graph (a host graph: device graphs are launched from the device
/// only from within a graph): launches children[0..k) (k device graph executables in device
/// memory) into cudaStreamGraphFireAndForget. A graph may fire and forget at most 120 graphs per
/// launch, and a device graph cannot be launched from the device while it runs, hence k of them.
cudaError_t launch_graph_scheduler_node(DeviceTally* t, const cudaGraphExec_t* children, std::uint32_t k,
                                        cudaStream_t s);

}  // namespace gv::scope
