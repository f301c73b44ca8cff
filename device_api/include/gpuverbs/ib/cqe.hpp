// Completion queue entries, built and decoded in one place: the software HCA, the tests and the
// benchmarks build CQEs with the make_*_cqe functions and write them with store_cqe(); pollers
// decode them with decode_cqe(). Checked against rdma-core's mlx5_cqe64 in test_mlx5_layout.
#pragma once
#include <cstdint>
#include <cstring>

#include "../status.hpp"
#include "../sync.hpp"
#include "mlx5_format.hpp"

namespace gv::ib {

// ---- Building ---------------------------------------------------------------------------------
// Owner bit 0 (store_cqe sets the lap's); every field not named is 0.

/// A requester completion of the WQE at `wqe_counter` (its first WQEBB); `byte_len` is the
/// length a READ or an atomic returned (0 for the others).
GV_HD GV_INLINE mlx5::Cqe make_req_cqe(std::uint32_t qpn, std::uint8_t wqe_opcode, std::uint16_t wqe_counter,
                                       std::uint32_t byte_len) {
  mlx5::Cqe c{};
  c.byte_cnt = be32::from(byte_len);
  c.sop_drop_qpn = be32::from(mlx5::cqe_opcode_qpn(wqe_opcode, qpn));
  c.wqe_counter = be16::from(wqe_counter);
  c.op_own = mlx5::cqe_op_own(mlx5::kCqeReq, false, 0);
  return c;
}

/// A responder completion (kCqeRespSend, kCqeRespSendImm, kCqeRespWrImm) of receive WQE
/// `wqe_counter`, with the immediate as it came over the wire.
GV_HD GV_INLINE mlx5::Cqe make_resp_cqe(std::uint8_t cqe_opcode, std::uint32_t qpn, std::uint16_t wqe_counter,
                                        std::uint32_t byte_len, be32 imm, bool solicited) {
  mlx5::Cqe c{};
  c.byte_cnt = be32::from(byte_len);
  c.imm_inval_pkey = imm;
  c.sop_drop_qpn = be32::from(mlx5::cqe_qpn(qpn));
  c.wqe_counter = be16::from(wqe_counter);
  c.op_own = mlx5::cqe_op_own(cqe_opcode, solicited, 0);
  return c;
}

/// An error completion (requester: of the WQE at `wqe_counter`, opcode `wqe_opcode`; responder:
/// of receive WQE `wqe_counter`) with the mlx5 syndrome.
GV_HD GV_INLINE mlx5::Cqe make_err_cqe(bool requester, std::uint32_t qpn, std::uint8_t wqe_opcode,
                                       std::uint16_t wqe_counter, std::uint8_t syndrome,
                                       std::uint8_t vendor_syndrome = 0) {
  mlx5::ErrCqe e{};
  e.syndrome = syndrome;
  e.vendor_err_synd = vendor_syndrome;
  e.s_wqe_opcode_qpn = be32::from(mlx5::cqe_opcode_qpn(wqe_opcode, qpn));
  e.wqe_counter = be16::from(wqe_counter);
  e.op_own = mlx5::cqe_op_own(requester ? mlx5::kCqeReqErr : mlx5::kCqeRespErr, false, 0);
  mlx5::Cqe c;
  std::memcpy(&c, &e, sizeof(c));
  return c;
}

/// What a CQ slot holds before the producer's first lap: opcode INVALID, never ready.
GV_HD GV_INLINE mlx5::Cqe make_invalid_cqe() {
  mlx5::Cqe c{};
  c.op_own = mlx5::cqe_op_own(mlx5::kCqeInvalid, false, 0);
  return c;
}

/// The producer's write of `cqe` into `slot` with owner bit `owner`: the first 60 bytes, then
/// the last 4 (wqe_counter, signature, op_own) with release at `scope`, so a poller that sees
/// the owner bit sees the whole CQE.
GV_HD GV_INLINE void store_cqe(mlx5::Cqe* slot, mlx5::Cqe cqe, std::uint8_t owner, sync::Scope scope) {
  cqe.op_own = static_cast<std::uint8_t>((cqe.op_own & ~mlx5::kCqeOwnerMask) | (owner & mlx5::kCqeOwnerMask));
  std::memcpy(slot, &cqe, mlx5::kCqeTailOffset);
  std::uint32_t tail;
  std::memcpy(&tail, reinterpret_cast<const std::byte*>(&cqe) + mlx5::kCqeTailOffset, 4);
  sync::store_release(reinterpret_cast<std::uint32_t*>(reinterpret_cast<std::byte*>(slot) + mlx5::kCqeTailOffset),
                      tail, scope);
}

// ---- Decoding ---------------------------------------------------------------------------------

/// A decoded CQE.
struct Completion {
  Status status = Status::kEmpty;  ///< kOk, or kCompletionError with `syndrome` set
  std::uint8_t cqe_opcode = mlx5::kCqeInvalid;
  std::uint8_t wqe_opcode = 0;     ///< requester side: the mlx5 opcode of the completed WQE
  std::uint8_t syndrome = 0;       ///< mlx5 syndrome (0 on success)
  std::uint8_t vendor_syndrome = 0;
  std::uint32_t qpn = 0;
  std::uint16_t wqe_counter = 0;   ///< send: first WQEBB of the WQE; receive: RQ WQE index
  std::uint32_t byte_len = 0;
  std::uint32_t imm = 0;           ///< host order

  GV_HD bool ok() const { return status == Status::kOk; }
  /// Requester (send queue) completion, as opposed to a responder (receive) one.
  GV_HD bool is_send() const {
    return cqe_opcode == mlx5::kCqeReq || cqe_opcode == mlx5::kCqeReqErr;
  }
};

GV_HD GV_INLINE Completion decode_cqe(const mlx5::Cqe& c) {
  Completion out;
  out.cqe_opcode = mlx5::cqe_opcode(c.op_own);
  out.wqe_counter = c.wqe_counter.get();
  if (out.cqe_opcode == mlx5::kCqeReqErr || out.cqe_opcode == mlx5::kCqeRespErr) {
    mlx5::ErrCqe e;
    std::memcpy(&e, &c, sizeof(e));
    out.status = Status::kCompletionError;
    out.syndrome = e.syndrome;
    out.vendor_syndrome = e.vendor_err_synd;
    const std::uint32_t w = e.s_wqe_opcode_qpn.get();
    out.wqe_opcode = mlx5::cqe_wqe_opcode(w);
    out.qpn = mlx5::cqe_qpn(w);
    return out;
  }
  out.status = Status::kOk;
  const std::uint32_t w = c.sop_drop_qpn.get();
  out.qpn = mlx5::cqe_qpn(w);
  if (out.cqe_opcode == mlx5::kCqeReq) out.wqe_opcode = mlx5::cqe_wqe_opcode(w);
  out.byte_len = c.byte_cnt.get();
  out.imm = c.imm_inval_pkey.get();
  return out;
}

}  // namespace gv::ib
