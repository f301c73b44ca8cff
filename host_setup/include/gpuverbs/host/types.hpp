// Value types shared by the public host API and the providers' internal (and device-side)
// state: access rights and QP states, defined once.
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

/// The RC QP state machine: RESET -> INIT -> RTR -> RTS, and ERR from anywhere.
enum class QpState : std::uint32_t { kReset = 0, kInit, kRtr, kRts, kError };

}  // namespace gv
