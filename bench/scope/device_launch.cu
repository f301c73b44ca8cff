#include "device_launch.hpp"

namespace gv::scope {
namespace {

/// Keeps the first device runtime error; later ones would only repeat it.
__device__ void record(DeviceTally* t, cudaError_t e) {
  if (e != cudaSuccess) atomicCAS(&t->error, 0u, static_cast<unsigned>(e));
}

__global__ void tail_chain_kernel(DeviceTally* t, std::uint32_t left) {
  atomicAdd(&t->ran, 1ull);
  if (left <= 1) return;
  // Runs once this grid has ended: a chain of launches, each paying the device runtime's
  // launch path and nothing else.
  tail_chain_kernel<<<1, 1, 0, cudaStreamTailLaunch>>>(t, left - 1);
  record(t, cudaGetLastError());
}

__global__ void child_kernel(DeviceTally* t) { atomicAdd(&t->ran, 1ull); }

__global__ void fire_and_forget_kernel(DeviceTally* t, std::uint32_t n) {
  for (std::uint32_t i = 0; i < n; ++i) {
    child_kernel<<<1, 1, 0, cudaStreamFireAndForget>>>(t);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return record(t, e);
  }
}

__global__ void graph_chain_node(DeviceTally* t, std::uint32_t n) {
  const unsigned long long c = atomicAdd(&t->ran, 1ull) + 1;
  if (c % n == 0) return;
  // A graph may have one self tail launch pending, which this is.
  record(t, cudaGraphLaunch(cudaGetCurrentGraphExec(), cudaStreamGraphTailLaunch));
}

__global__ void graph_scheduler_node(DeviceTally* t, const cudaGraphExec_t* children, std::uint32_t k) {
  for (std::uint32_t i = 0; i < k; ++i) {
    const cudaError_t e = cudaGraphLaunch(children[i], cudaStreamGraphFireAndForget);
    if (e != cudaSuccess) return record(t, e);
  }
}

}  // namespace

cudaError_t launch_kernel_tail_chain(DeviceTally* t, std::uint32_t n, cudaStream_t s) {
  tail_chain_kernel<<<1, 1, 0, s>>>(t, n);
  return cudaGetLastError();
}

cudaError_t launch_kernel_fire_and_forget(DeviceTally* t, std::uint32_t n, cudaStream_t s) {
  fire_and_forget_kernel<<<1, 1, 0, s>>>(t, n);
  return cudaGetLastError();
}

cudaError_t launch_graph_chain_node(DeviceTally* t, std::uint32_t n, cudaStream_t s) {
  graph_chain_node<<<1, 1, 0, s>>>(t, n);
  return cudaGetLastError();
}

cudaError_t launch_graph_child_node(DeviceTally* t, cudaStream_t s) {
  child_kernel<<<1, 1, 0, s>>>(t);
  return cudaGetLastError();
}

cudaError_t launch_graph_scheduler_node(DeviceTally* t, const cudaGraphExec_t* children, std::uint32_t k,
                                        cudaStream_t s) {
  graph_scheduler_node<<<1, 1, 0, s>>>(t, children, k);
  return cudaGetLastError();
}

}  // namespace gv::scope
