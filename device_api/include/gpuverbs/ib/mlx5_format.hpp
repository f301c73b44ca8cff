// The mlx5 (ConnectX) work-queue and completion formats, defined once.
//
// Layouts and constants follow the ConnectX programming model as exposed by rdma-core's
// <infiniband/mlx5dv.h>; tests/unit/test_mlx5_layout.cpp checks every offset and every
// encoder byte for byte against that header. All multi-byte fields are big-endian (be16/32/64).
#pragma once
#include <cstddef>
#include <cstdint>

#include "../endian.hpp"

namespace gv::ib::mlx5 {

// ---- Work queue ---------------------------------------------------------------------------
inline constexpr std::uint32_t kSendWqeBB = 64;     ///< send WQE building block
inline constexpr std::uint32_t kSendWqeShift = 6;
inline constexpr std::uint32_t kOctoword = 16;      ///< "ds" unit of the control segment
inline constexpr std::uint32_t kMaxWqeDs = 63;      ///< ds is 6 bits
inline constexpr std::uint32_t kInlineSeg = 0x80000000u;
inline constexpr std::uint32_t kInvalidLkey = 0x100; ///< terminates a short receive SG list
inline constexpr std::uint32_t kQpnMask = 0x00ffffffu;

enum Opcode : std::uint8_t {
  kOpNop = 0x00,
  kOpRdmaWrite = 0x08,
  kOpRdmaWriteImm = 0x09,
  kOpSend = 0x0a,
  kOpSendImm = 0x0b,
  kOpRdmaRead = 0x10,
  kOpAtomicCs = 0x11,
  kOpAtomicFa = 0x12,
};

/// fm_ce_se byte of the control segment.
enum CtrlFlags : std::uint8_t {
  kCtrlSolicited = 1 << 1,
  kCtrlCqUpdate = 2 << 2,  ///< CE=2: always generate a CQE (a signaled WQE)
  kCtrlFence = 4 << 5,     ///< FM=4: wait for earlier reads/atomics before executing
};

struct CtrlSeg {
  be32 opmod_idx_opcode;  ///< opmod[31:24] wqe_index[23:8] opcode[7:0]
  be32 qpn_ds;            ///< qpn[31:8] ds[5:0]: WQE size in 16-byte units
  std::uint8_t signature;
  std::uint8_t rsvd[2];   ///< dci_stream_channel_id (DC only)
  std::uint8_t fm_ce_se;
  be32 imm;               ///< immediate for *_IMM opcodes (already in wire order)
};

struct RaddrSeg {
  be64 raddr;
  be32 rkey;
  std::uint32_t reserved;
};

struct DataSeg {
  be32 byte_count;
  be32 lkey;
  be64 addr;
};

/// Inline data header; the payload follows at byte 4, padded to 16 bytes in the WQE.
struct InlineSeg {
  be32 byte_count;  ///< length | kInlineSeg
};

struct AtomicSeg {
  be64 swap_add;  ///< swap value (CMP_SWP) or addend (FETCH_ADD)
  be64 compare;
};

static_assert(sizeof(CtrlSeg) == 16 && offsetof(CtrlSeg, fm_ce_se) == 11 &&
              offsetof(CtrlSeg, imm) == 12);

// ---- Field widths, positions and masks ---------------------------------------------------
// Every packed field of the formats, named once; the encoders, the decoders and the software
// HCA use these, never the numbers.

/// WQE indices as the hardware carries them (the control segment's wqe_index, the CQE's
/// wqe_counter, both doorbell-record counters): the low 16 bits of a monotonic counter.
inline constexpr std::uint32_t kWqeIndexBits = 16;
inline constexpr std::uint32_t kWqeIndexMask = (1u << kWqeIndexBits) - 1;
/// CtrlSeg::opmod_idx_opcode: opmod[31:24] wqe_index[23:8] opcode[7:0].
inline constexpr std::uint32_t kCtrlOpmodShift = 24;
inline constexpr std::uint32_t kCtrlIndexShift = 8;
inline constexpr std::uint32_t kCtrlOpcodeMask = 0xff;
/// CtrlSeg::qpn_ds: qpn[31:8] ds[5:0].
inline constexpr std::uint32_t kCtrlQpnShift = 8;
inline constexpr std::uint32_t kCtrlDsMask = 0x3f;

GV_HD GV_INLINE constexpr std::uint32_t ctrl_opmod_idx_opcode(std::uint8_t opmod, std::uint16_t wqe_index,
                                                              std::uint8_t opcode) {
  return (std::uint32_t{opmod} << kCtrlOpmodShift) | (std::uint32_t{wqe_index} << kCtrlIndexShift) | opcode;
}
GV_HD GV_INLINE constexpr std::uint8_t ctrl_opcode(std::uint32_t opmod_idx_opcode) {
  return static_cast<std::uint8_t>(opmod_idx_opcode & kCtrlOpcodeMask);
}
GV_HD GV_INLINE constexpr std::uint16_t ctrl_wqe_index(std::uint32_t opmod_idx_opcode) {
  return static_cast<std::uint16_t>((opmod_idx_opcode >> kCtrlIndexShift) & kWqeIndexMask);
}
GV_HD GV_INLINE constexpr std::uint32_t ctrl_qpn_ds(std::uint32_t qpn, std::uint8_t ds) {
  return (qpn << kCtrlQpnShift) | ds;
}
GV_HD GV_INLINE constexpr std::uint32_t ctrl_qpn(std::uint32_t qpn_ds) { return qpn_ds >> kCtrlQpnShift; }
GV_HD GV_INLINE constexpr std::uint32_t ctrl_ds(std::uint32_t qpn_ds) { return qpn_ds & kCtrlDsMask; }

/// A doorbell record's value for a work queue whose producer counter is `counter` (host order;
/// the record holds it big-endian).
GV_HD GV_INLINE constexpr std::uint32_t dbrec_counter(std::uint64_t counter) {
  return static_cast<std::uint32_t>(counter & kWqeIndexMask);
}
static_assert(sizeof(RaddrSeg) == 16 && sizeof(DataSeg) == 16 && sizeof(AtomicSeg) == 16);
static_assert(sizeof(InlineSeg) == 4);

// ---- Doorbell record ---------------------------------------------------------------------
/// QP doorbell record: two big-endian counters, receive first (MLX5_RCV_DBR=0, MLX5_SND_DBR=1).
/// Each holds the producer index in WQEBBs (send) or WQEs (receive), modulo 2^16.
struct QpDbrec {
  be32 rcv;
  be32 snd;
};
/// CQ doorbell record: consumer index (24 bits) and arm word (MLX5_CQ_SET_CI=0, ARM_DB=1).
struct CqDbrec {
  be32 set_ci;
  be32 arm;
};
static_assert(sizeof(QpDbrec) == 8 && sizeof(CqDbrec) == 8);
/// The CQ consumer index the doorbell record carries: the low 24 bits of the counter.
inline constexpr std::uint32_t kCqCiBits = 24;
inline constexpr std::uint32_t kCqCiMask = (1u << kCqCiBits) - 1;

// ---- Completion queue --------------------------------------------------------------------
inline constexpr std::uint32_t kCqeSize = 64;

enum CqeOpcode : std::uint8_t {
  kCqeReq = 0,
  kCqeRespWrImm = 1,
  kCqeRespSend = 2,
  kCqeRespSendImm = 3,
  kCqeReqErr = 13,
  kCqeRespErr = 14,
  kCqeInvalid = 15,
};

/// CQE error syndromes (mlx5 values; they map one to one onto ibv_wc_status).
enum Syndrome : std::uint8_t {
  kSyndLocalLengthErr = 0x01,
  kSyndLocalQpOpErr = 0x02,
  kSyndLocalProtErr = 0x04,
  kSyndWrFlushErr = 0x05,
  kSyndMwBindErr = 0x06,
  kSyndBadRespErr = 0x10,
  kSyndLocalAccessErr = 0x11,
  kSyndRemoteInvalReqErr = 0x12,
  kSyndRemoteAccessErr = 0x13,
  kSyndRemoteOpErr = 0x14,
  kSyndTransportRetryExcErr = 0x15,
  kSyndRnrRetryExcErr = 0x16,
  kSyndRemoteAbortedErr = 0x22,
};

/// The 64-byte CQE. Bytes 0..31 carry offload information we neither produce nor read.
struct Cqe {
  std::uint8_t rsvd0[32];
  be32 srqn_uidx;
  be32 imm_inval_pkey;  ///< immediate of RESP_*_IMM (wire order, as sent)
  std::uint8_t app;
  std::uint8_t app_op;
  be16 app_info;
  be32 byte_cnt;        ///< bytes received (responder) or read/atomic length (requester)
  be64 timestamp;
  be32 sop_drop_qpn;    ///< requester: send opcode[31:24]; qpn[23:0]
  be16 wqe_counter;     ///< send: WQEBB index of the WQE; receive: RQ WQE index
  std::uint8_t signature;
  std::uint8_t op_own;  ///< opcode[7:4] format[3:2] se[1] owner[0]
};

/// The error CQE overlays the same 64 bytes.
struct ErrCqe {
  std::uint8_t rsvd0[32];
  be32 srqn;
  std::uint8_t rsvd1[18];
  std::uint8_t vendor_err_synd;
  std::uint8_t syndrome;
  be32 s_wqe_opcode_qpn;  ///< send opcode[31:24]; qpn[23:0]
  be16 wqe_counter;
  std::uint8_t signature;
  std::uint8_t op_own;
};

static_assert(sizeof(Cqe) == kCqeSize && sizeof(ErrCqe) == kCqeSize);
static_assert(offsetof(Cqe, byte_cnt) == 44 && offsetof(Cqe, sop_drop_qpn) == 56 &&
              offsetof(Cqe, wqe_counter) == 60 && offsetof(Cqe, op_own) == 63);
static_assert(offsetof(ErrCqe, syndrome) == 55 && offsetof(ErrCqe, s_wqe_opcode_qpn) == 56);
static_assert(kMaxWqeDs == kCtrlDsMask);

/// Cqe::sop_drop_qpn and ErrCqe::s_wqe_opcode_qpn: the WQE's opcode[31:24] qpn[23:0].
inline constexpr std::uint32_t kCqeWqeOpcodeShift = 24;
GV_HD GV_INLINE constexpr std::uint32_t cqe_opcode_qpn(std::uint8_t wqe_opcode, std::uint32_t qpn) {
  return (std::uint32_t{wqe_opcode} << kCqeWqeOpcodeShift) | (qpn & kQpnMask);
}
GV_HD GV_INLINE constexpr std::uint8_t cqe_wqe_opcode(std::uint32_t opcode_qpn) {
  return static_cast<std::uint8_t>(opcode_qpn >> kCqeWqeOpcodeShift);
}
GV_HD GV_INLINE constexpr std::uint32_t cqe_qpn(std::uint32_t opcode_qpn) { return opcode_qpn & kQpnMask; }

/// op_own: opcode[7:4] format[3:2] se[1] owner[0].
inline constexpr std::uint32_t kCqeOpcodeShift = 4;
inline constexpr std::uint8_t kCqeSolicited = 1u << 1;
inline constexpr std::uint8_t kCqeOwnerMask = 1u;
GV_HD GV_INLINE constexpr std::uint8_t cqe_op_own(std::uint8_t opcode, bool solicited, std::uint8_t owner) {
  return static_cast<std::uint8_t>((opcode << kCqeOpcodeShift) | (solicited ? kCqeSolicited : 0) |
                                   (owner & kCqeOwnerMask));
}
GV_HD GV_INLINE constexpr std::uint8_t cqe_opcode(std::uint8_t op_own) { return op_own >> kCqeOpcodeShift; }
GV_HD GV_INLINE constexpr std::uint8_t cqe_owner(std::uint8_t op_own) { return op_own & kCqeOwnerMask; }

/// A CQE's last 4 bytes (wqe_counter, signature, op_own) read as one little-endian word: what
/// a poller loads first. Its low two bytes are wqe_counter, big-endian; the top byte op_own.
inline constexpr std::uint32_t kCqeTailOffset = 60;
GV_HD GV_INLINE constexpr std::uint32_t cqe_tail_counter(std::uint32_t tail) {
  return ((tail & 0xffu) << 8) | ((tail >> 8) & 0xffu);
}
GV_HD GV_INLINE constexpr std::uint8_t cqe_tail_op_own(std::uint32_t tail) { return static_cast<std::uint8_t>(tail >> 24); }
static_assert(offsetof(Cqe, wqe_counter) == kCqeTailOffset);

}  // namespace gv::ib::mlx5
