// GPU memory for DEVX queues (CUDA builds: gpu_memory_cuda.cpp; without CUDA, gpu_memory_none.cpp
// refuses with the reason): 64 KiB aligned, zeroed allocations on a given GPU, host-to-GPU
// copies, and a dma-buf fd of a range for UMEM registration.
#pragma once
#include <cstddef>
#include <string>

namespace gv::mlx5::devx {

/// `bytes` (a multiple of 64 KiB) of zeroed memory of CUDA device `gpu` at a 64 KiB boundary;
/// throws gv::Error.
void* gpu_queue_alloc(std::size_t bytes, int gpu);
void gpu_queue_free(void* p);
void gpu_queue_write(void* dst, const void* src, std::size_t bytes);
/// A dma-buf fd of [p, p + bytes) (page aligned), or -1 with `why`.
int gpu_dmabuf_fd(void* p, std::size_t bytes, std::string* why);

}  // namespace gv::mlx5::devx
