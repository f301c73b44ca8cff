// The software HCA's GPU engine: a persistent kernel that executes the WQEs of one arena in
// GPU memory with the semantics of soft/hca.hpp. Internal to host_setup; the soft provider
// starts it on its own non-blocking stream and stops it through ArenaHeader::engine_stop.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "../soft/hca.hpp"

namespace gv::detail {

/// Launch the engine kernel for `arena` (in memory of the current GPU) on `stream`: one block
/// of `warps` warps (1..kMaxEngineWarps); warp w serves QP slots w, w + warps, ...
cudaError_t launch_gpu_engine(cudaStream_t stream, soft::Arena arena, std::int32_t pid,
                              std::uint32_t warps);

}  // namespace gv::detail
