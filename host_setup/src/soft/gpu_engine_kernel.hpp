// The software HCA's GPU engine kernel: a persistent kernel that executes the WQEs of one arena in
// GPU memory with the semantics of semantics/hca.hpp. Internal to host_setup; the soft provider
// starts it on its own non-blocking stream and stops it through the EngineBeacon.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "semantics/hca.hpp"

namespace gv::detail {

/// The engine's start and stop, in pinned host memory mapped into the GPU: the host reads and
/// writes it without a CUDA call (a copy could wait behind the engine's own pending launch).
struct EngineBeacon {
  std::uint32_t started;  ///< the engine raises it once resident
  std::uint32_t stop;     ///< the host raises it to end the engine kernel
};

/// Launch the engine kernel for `arena` (in memory of the current GPU) on `stream`: `warps`
/// warps (1..kMaxEngineWarps) in blocks of up to 8. Every lane is an engine: lane l of warp w
/// serves warp w's slot (soft::engine_slot) of table rounds l, l + 32, ...; a WQE whose
/// payload one lane does not move alone waits for the round's end, where the whole warp
/// executes it.
cudaError_t launch_gpu_engine(cudaStream_t stream, soft::Arena arena, std::int32_t pid,
                              std::uint32_t warps, EngineBeacon* beacon);

}  // namespace gv::detail
