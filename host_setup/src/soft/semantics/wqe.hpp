// The software HCA's WQE parser: a send WQE as posted by device_api/ib, checked and taken apart
// (its first WQEBB kept in registers).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <gpuverbs/ib/encode.hpp>
#include <gpuverbs/ib/mlx5_format.hpp>

#include "qp_visit.hpp"

namespace gv::soft {

namespace m5 = gv::ib::mlx5;

inline constexpr std::uint32_t kMaxSge = 60;  ///< data segments one WQE can hold (ds <= 63)
/// The longest message: ConnectX reports max_msg_sz 0x40000000 (1 GiB); longer WQEs complete
/// with LOCAL_LENGTH_ERR. (rma splits its transfers at the same size, rma::detail::kMaxWqeBytes.)
inline constexpr std::uint64_t kMaxMessage = std::uint64_t{1} << 30;
/// A pointer data segment's byte_count of 0 means 2^31 bytes to the HCA (its top bit is the
/// inline flag, so 2 GiB has no other encoding); posters skip empty SGEs for that reason.
inline constexpr std::uint64_t kZeroByteCount = std::uint64_t{1} << 31;

struct ParsedWqe {
  std::uint8_t opcode = 0;
  std::uint8_t fm_ce_se = 0;
  std::uint32_t ds = 0;
  std::uint32_t nbb = 1;
  be32 imm{0};
  std::uint64_t raddr = 0;
  std::uint32_t rkey = 0;
  std::uint64_t swap_add = 0, compare = 0;
  std::uint32_t first_payload_oct = 0;  ///< octoword index where SGEs / inline data start
  bool inl = false;
  std::uint32_t inline_len = 0;
  std::uint32_t num_sge = 0;
  std::uint64_t length = 0;             ///< message length (sum of SGEs or inline length)
  /// The first WQEBB, loaded in one round. Read only through first_bb() (constant indices),
  /// so that the GPU engine keeps a WQE in registers, not local memory.
  ib::Octoword head[4];
  std::byte* local0 = nullptr;          ///< the first local SGE's address (execute())
};

/// Octoword k (< 4) of the WQE's first WQEBB.
GV_HD GV_INLINE ib::Octoword first_bb(const ParsedWqe& w, std::uint32_t k) {
  switch (k) {
    case 0: return w.head[0];
    case 1: return w.head[1];
    case 2: return w.head[2];
    default: return w.head[3];
  }
}

/// 4-byte word i (< 16) of the WQE's first WQEBB, as it lies in memory.
GV_HD GV_INLINE std::uint32_t first_bb_word(const ParsedWqe& w, std::uint32_t i) {
  const ib::Octoword o = first_bb(w, i / 4);
  switch (i % 4) {
    case 0: return o.w[0];
    case 1: return o.w[1];
    case 2: return o.w[2];
    default: return o.w[3];
  }
}

/// Bytes [at, at + n) of the first WQEBB (n <= 8, at + n <= 64), little-endian, from registers.
GV_HD GV_INLINE std::uint64_t first_bb_bytes(const ParsedWqe& w, std::uint32_t at, std::uint32_t n) {
  if (at % 4 == 0) {  // an inline payload's start (byte 20 or 36): two word selections, not eight byte ones
    const std::uint64_t lo = first_bb_word(w, at / 4);
    const std::uint64_t hi = n > 4 ? first_bb_word(w, at / 4 + 1) : 0;
    const std::uint64_t v = lo | (hi << 32);
    return n >= 8 ? v : v & ((std::uint64_t{1} << (8 * n)) - 1);
  }
  std::uint64_t v = 0;
  for (std::uint32_t i = 0; i < 8; ++i) {
    if (i >= n) break;
    const std::uint32_t b = at + i;
    v |= std::uint64_t{(first_bb_word(w, b / 4) >> (8 * (b % 4))) & 0xffu} << (8 * i);
  }
  return v;
}

/// Octoword k of the WQE at WQEBB counter `start`.
GV_HD GV_INLINE ib::Octoword sq_oct(const std::byte* sq, std::uint32_t sq_bbs, std::uint64_t start,
                                    std::uint32_t k) {
  return ib::load_octoword(sq + ib::sq_octoword_offset(start, k, sq_bbs));
}

/// Octoword k of the parsed WQE at `start`: from its first WQEBB, already loaded, or the ring.
GV_HD GV_INLINE ib::Octoword wqe_oct(const ParsedWqe& w, const std::byte* sq, std::uint32_t sq_bbs,
                                     std::uint64_t start, std::uint32_t k) {
  return k < 4 ? first_bb(w, k) : sq_oct(sq, sq_bbs, start, k);
}

GV_HD GV_INLINE m5::DataSeg as_data_seg(const ib::Octoword& o) {
  m5::DataSeg d;
  std::memcpy(&d, &o, sizeof(d));
  return d;
}

/// Load the first WQEBB of the WQE at `start` into w.head, in one round of loads: control,
/// remote address, atomic and the first data or inline segment of every opcode lie in it.
GV_HD GV_INLINE void load_first_bb(const QpVisit& q, const std::byte* sq, std::uint64_t start, ParsedWqe& w) {
  for (std::uint32_t k = 0; k < 4; ++k) w.head[k] = sq_oct(sq, q.sq_bbs, start, k);
}

/// Parse and check the WQE at `start`, whose first WQEBB w.head holds (load_first_bb());
/// `avail` WQEBBs from `start` are published (avail >= 1). Returns 0 or the syndrome of a
/// malformed WQE (LOCAL_QP_OP_ERR / LOCAL_LENGTH_ERR).
GV_HD GV_INLINE std::uint8_t parse_wqe(const QpVisit& q, const std::byte* sq, std::uint64_t start,
                                       std::uint64_t avail, ParsedWqe& w) {
  const ib::CtrlFields c = ib::decode_ctrl(w.head[0]);
  w.opcode = c.opcode;
  w.ds = c.ds;
  w.fm_ce_se = c.fm_ce_se;
  w.imm = c.imm;
  w.nbb = ib::wqe_bbs(w.ds == 0 ? 1 : w.ds);
  // A WQE larger than its ring (a record may claim more than was written) would overlap itself.
  if (c.wqe_index != (start & m5::kWqeIndexMask) || c.qpn != q.qpn || w.ds == 0 || w.nbb > avail ||
      w.nbb > q.sq_bbs)
    return m5::kSyndLocalQpOpErr;
  std::uint32_t head;
  switch (w.opcode) {
    case m5::kOpNop: return w.ds == 1 ? 0 : m5::kSyndLocalQpOpErr;
    case m5::kOpSend: case m5::kOpSendImm: head = 1; break;
    case m5::kOpRdmaWrite: case m5::kOpRdmaWriteImm: case m5::kOpRdmaRead: head = 2; break;
    case m5::kOpAtomicCs: case m5::kOpAtomicFa: head = 3; break;
    default: return m5::kSyndLocalQpOpErr;
  }
  if (w.ds < head) return m5::kSyndLocalQpOpErr;
  if (head >= 2) {
    m5::RaddrSeg rs;
    std::memcpy(&rs, &w.head[1], sizeof(rs));
    w.raddr = rs.raddr.get();
    w.rkey = rs.rkey.get();
  }
  if (head == 3) {
    m5::AtomicSeg as;
    std::memcpy(&as, &w.head[2], sizeof(as));
    w.swap_add = as.swap_add.get();
    w.compare = as.compare.get();
  }
  w.first_payload_oct = head;
  const std::uint32_t rest = w.ds - head;
  // An atomic returns its 8 bytes through exactly one data segment (checked below); other
  // opcodes may carry no payload.
  if (rest == 0) return head == 3 ? m5::kSyndLocalLengthErr : 0;
  // The payload's first segment says what the payload is: its byte_count's top bit marks an
  // inline segment, else it and the rest are pointer segments. A segment whose count is just
  // the inline flag (what a 2 GiB SGE turns into) holds no data and is malformed, as is an
  // inline segment after a pointer one; a pointer count of 0 means 2 GiB (kZeroByteCount), so
  // it, and any other message over kMaxMessage, is a local length error.
  const std::uint32_t bc = byteswap(first_bb(w, head).w[0]);
  if (bc & m5::kInlineSeg) {
    if (w.opcode == m5::kOpRdmaRead || head == 3) return m5::kSyndLocalQpOpErr;
    w.inl = true;
    w.inline_len = bc & ~m5::kInlineSeg;
    if (w.inline_len == 0 || sizeof(m5::InlineSeg) + w.inline_len > rest * 16u) return m5::kSyndLocalQpOpErr;
    w.length = w.inline_len;
    return 0;
  }
  w.num_sge = rest;
  if (w.num_sge > kMaxSge) return m5::kSyndLocalQpOpErr;
  for (std::uint32_t i = 0; i < w.num_sge; ++i) {
    const std::uint32_t n = as_data_seg(wqe_oct(w, sq, q.sq_bbs, start, head + i)).byte_count.get();
    if (n & m5::kInlineSeg) return m5::kSyndLocalQpOpErr;
    w.length += n == 0 ? kZeroByteCount : n;
  }
  if (head == 3 && (w.num_sge != 1 || w.length != 8)) return m5::kSyndLocalLengthErr;
  if (w.length > kMaxMessage) return m5::kSyndLocalLengthErr;
  return 0;
}

}  // namespace gv::soft
