// A World's options as the environment amends them (GV_HEAP_BYTES, NVSHMEM_SYMMETRIC_SIZE,
// GV_WAIT_TIMEOUT, GV_IB_LANES, GV_IB_ENGINE, GV_TRANSPORT), checked: a bad value throws an Error
// naming the variable or field, its value and what it takes.
#pragma once
#include <gpuverbs/host/world.hpp>

namespace gv::detail {

WorldOptions resolve_options(const WorldOptions& given);

}  // namespace gv::detail
