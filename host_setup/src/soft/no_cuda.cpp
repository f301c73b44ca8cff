// Builds without CUDA: no GPU memory exists for the soft provider. Nothing is GPU memory,
// nothing is registered as such, the CPU engine makes no GPU mover, and the options that need a
// GPU are refused with what is missing.
#include "arena_store.hpp"
#include "cuda_reach.hpp"

namespace gv::detail {

int gpu_holding(const void*) { return -1; }

GpuRanges* gpu_ranges() { return nullptr; }

std::unique_ptr<GpuMover> make_gpu_mover(GpuMover::Report) { return nullptr; }

std::unique_ptr<GpuMapping> map_to_gpus(void*, std::size_t) {
  throw Error("Device::open(soft): map_to_gpus needs gpuverbs built with CUDA (nvcc was not found)");
}

std::unique_ptr<ArenaStore> open_gpu_arena(const DeviceOptions&) {
  throw Error("Device::open(soft): the GPU engine needs gpuverbs built with CUDA (nvcc was not found)");
}

}  // namespace gv::detail
