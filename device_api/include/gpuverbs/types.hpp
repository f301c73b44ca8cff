// Value types the host API and device-side code share: access rights and QP states, defined
// once (the host sets them, the software HCA's engines, on the host or the GPU, check them).
#pragma once
#include <cstdint>

namespace gv {

/// Memory and QP access rights (the ibv_access_flags values).
enum Access : std::uint32_t {
  kLocalWrite = 1,
  kRemoteWrite = 2,
  kRemoteRead = 4,
  kRemoteAtomic = 8,
};
/// Every access right: a region that any operation may use (the World's heaps, tests, benches).
inline constexpr std::uint32_t kAllAccess = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;

/// The RC QP state machine: RESET -> INIT -> RTR -> RTS, and ERR from anywhere.
enum class QpState : std::uint32_t { kReset = 0, kInit, kRtr, kRts, kError };

}  // namespace gv
