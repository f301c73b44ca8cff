// Work requests as kernels describe them: flat values, no pointers into provider state.
#pragma once
#include <cstdint>

#include "../config.hpp"

namespace gv::ib {

enum class WrOpcode : std::uint8_t {
  kRdmaWrite,
  kRdmaWriteImm,
  kRdmaRead,
  kSend,
  kSendImm,
  kAtomicCmpSwp,
  kAtomicFetchAdd,
  kNop,
};

enum WrFlags : std::uint32_t {
  kWrSignaled = 1u << 0,   ///< generate a CQE on success (errors always generate one)
  kWrFence = 1u << 1,      ///< wait for earlier READs/atomics of this QP first
  kWrInline = 1u << 2,     ///< copy the payload into the WQE (up to the QP's max_inline)
  kWrSolicited = 1u << 3,  ///< solicited event at the responder
};

/// One scatter/gather element: `length` bytes at `addr`, covered by the MR of `lkey`.
struct Sge {
  std::uint64_t addr = 0;
  std::uint32_t length = 0;
  std::uint32_t lkey = 0;
};

/// A send-queue work request, as in ibv_send_wr. Atomics take exactly one 8-byte SGE that
/// receives the remote value as it was before the operation (in host byte order).
struct SendWr {
  WrOpcode opcode = WrOpcode::kNop;
  std::uint32_t flags = 0;
  const Sge* sg_list = nullptr;
  std::uint32_t num_sge = 0;
  std::uint32_t imm = 0;            ///< host order; sent big-endian like ibv's imm_data
  std::uint64_t remote_addr = 0;
  std::uint32_t rkey = 0;
  std::uint64_t compare_add = 0;    ///< CMP_SWP: compare value; FETCH_ADD: addend
  std::uint64_t swap = 0;           ///< CMP_SWP: swap value
};

GV_HD GV_INLINE constexpr bool has_raddr(WrOpcode op) {
  return op == WrOpcode::kRdmaWrite || op == WrOpcode::kRdmaWriteImm ||
         op == WrOpcode::kRdmaRead || op == WrOpcode::kAtomicCmpSwp ||
         op == WrOpcode::kAtomicFetchAdd;
}
GV_HD GV_INLINE constexpr bool is_atomic(WrOpcode op) {
  return op == WrOpcode::kAtomicCmpSwp || op == WrOpcode::kAtomicFetchAdd;
}
GV_HD GV_INLINE constexpr bool carries_payload(WrOpcode op) {
  return op == WrOpcode::kRdmaWrite || op == WrOpcode::kRdmaWriteImm || op == WrOpcode::kSend ||
         op == WrOpcode::kSendImm;
}

}  // namespace gv::ib
