// Pure encoders for mlx5 WQE segments and whole send/receive WQEs.
//
// Every function takes values and returns bytes; none touches a queue. Each segment is built
// in registers and leaves with one 16-byte store, so a WQE is a sequence of "octowords" and a
// warp can write one with one store per lane (wqe_octoword(k) is lane k's share).
// Byte-identical to rdma-core's mlx5dv_set_ctrl_seg / mlx5dv_set_data_seg (unit-tested).
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>

#include "mlx5_format.hpp"
#include "ring.hpp"
#include "work_request.hpp"

namespace gv::ib {

/// 16 bytes of a WQE, as they will lie in memory.
struct alignas(16) Octoword {
  std::uint32_t w[4];
};
static_assert(sizeof(Octoword) == 16);

template <class Seg>
GV_HD GV_INLINE Octoword as_octoword(const Seg& s) {
  static_assert(sizeof(Seg) == 16);
  Octoword o;
  std::memcpy(&o, &s, 16);
  return o;
}

// ---- Segments ------------------------------------------------------------------------------

GV_HD GV_INLINE mlx5::CtrlSeg make_ctrl_seg(std::uint16_t wqe_index, std::uint8_t opcode,
                                            std::uint8_t opmod, std::uint32_t qpn,
                                            std::uint8_t fm_ce_se, std::uint8_t ds,
                                            std::uint8_t signature, be32 imm) {
  mlx5::CtrlSeg s{};
  s.opmod_idx_opcode = be32::from(mlx5::ctrl_opmod_idx_opcode(opmod, wqe_index, opcode));
  s.qpn_ds = be32::from(mlx5::ctrl_qpn_ds(qpn, ds));
  s.signature = signature;
  s.fm_ce_se = fm_ce_se;
  s.imm = imm;
  return s;
}

GV_HD GV_INLINE mlx5::RaddrSeg make_raddr_seg(std::uint64_t raddr, std::uint32_t rkey) {
  mlx5::RaddrSeg s{};
  s.raddr = be64::from(raddr);
  s.rkey = be32::from(rkey);
  return s;
}

GV_HD GV_INLINE mlx5::DataSeg make_data_seg(std::uint32_t length, std::uint32_t lkey,
                                            std::uint64_t addr) {
  mlx5::DataSeg s{};
  s.byte_count = be32::from(length);
  s.lkey = be32::from(lkey);
  s.addr = be64::from(addr);
  return s;
}

GV_HD GV_INLINE mlx5::AtomicSeg make_atomic_seg(std::uint64_t swap_add, std::uint64_t compare) {
  mlx5::AtomicSeg s{};
  s.swap_add = be64::from(swap_add);
  s.compare = be64::from(compare);
  return s;
}

GV_HD GV_INLINE mlx5::InlineSeg make_inline_seg(std::uint32_t length) {
  return mlx5::InlineSeg{be32::from(length | mlx5::kInlineSeg)};
}

/// Receive WQE data segment terminating a short SG list (rdma-core does the same).
GV_HD GV_INLINE mlx5::DataSeg make_recv_terminator() {
  return make_data_seg(0, mlx5::kInvalidLkey, 0);
}

// ---- Whole send WQEs ---------------------------------------------------------------------

GV_HD GV_INLINE constexpr std::uint8_t mlx5_opcode(WrOpcode op) {
  switch (op) {
    case WrOpcode::kRdmaWrite: return mlx5::kOpRdmaWrite;
    case WrOpcode::kRdmaWriteImm: return mlx5::kOpRdmaWriteImm;
    case WrOpcode::kRdmaRead: return mlx5::kOpRdmaRead;
    case WrOpcode::kSend: return mlx5::kOpSend;
    case WrOpcode::kSendImm: return mlx5::kOpSendImm;
    case WrOpcode::kAtomicCmpSwp: return mlx5::kOpAtomicCs;
    case WrOpcode::kAtomicFetchAdd: return mlx5::kOpAtomicFa;
    case WrOpcode::kNop: return mlx5::kOpNop;
  }
  return mlx5::kOpNop;
}

GV_HD GV_INLINE constexpr std::uint8_t fm_ce_se_of(std::uint32_t flags) {
  return static_cast<std::uint8_t>(((flags & kWrSignaled) ? mlx5::kCtrlCqUpdate : 0) |
                                   ((flags & kWrFence) ? mlx5::kCtrlFence : 0) |
                                   ((flags & kWrSolicited) ? mlx5::kCtrlSolicited : 0));
}

GV_HD GV_INLINE std::uint64_t payload_bytes(const SendWr& wr) {
  std::uint64_t n = 0;
  for (std::uint32_t i = 0; i < wr.num_sge; ++i) n += wr.sg_list[i].length;
  return n;
}

/// SGEs that take a data segment: zero-length ones take none, since a byte_count of 0 does not
/// mean "nothing" to the HCA (rdma-core skips them too).
GV_HD GV_INLINE std::uint32_t nonempty_sges(const Sge* sgl, std::uint32_t n) {
  std::uint32_t k = 0;
  for (std::uint32_t i = 0; i < n; ++i) k += sgl[i].length != 0 ? 1u : 0u;
  return k;
}

/// The j-th SGE of nonzero length.
GV_HD GV_INLINE const Sge& nth_nonempty_sge(const Sge* sgl, std::uint32_t j) {
  std::uint32_t i = 0;
  for (std::uint32_t seen = 0;; ++i) {
    if (sgl[i].length == 0) continue;
    if (seen++ == j) break;
  }
  return sgl[i];
}

/// Octowords before the payload/SG part: ctrl [+ raddr] [+ atomic].
GV_HD GV_INLINE constexpr std::uint32_t header_octowords(WrOpcode op) {
  return 1u + (has_raddr(op) ? 1u : 0u) + (is_atomic(op) ? 1u : 0u);
}

/// WQE size in octowords (the control segment's ds). Callers validate against kMaxWqeDs.
GV_HD GV_INLINE std::uint32_t wqe_ds(const SendWr& wr) {
  if (wr.opcode == WrOpcode::kNop) return 1;
  const std::uint32_t head = header_octowords(wr.opcode);
  if ((wr.flags & kWrInline) && carries_payload(wr.opcode)) {
    // An empty inline payload takes no inline segment (as rdma-core).
    const std::uint64_t len = payload_bytes(wr);
    return head + (len == 0 ? 0u : static_cast<std::uint32_t>((sizeof(mlx5::InlineSeg) + len + 15) / 16));
  }
  return head + nonempty_sges(wr.sg_list, wr.num_sge);
}

GV_HD GV_INLINE constexpr std::uint32_t wqe_bbs(std::uint32_t ds) {
  return (ds * mlx5::kOctoword + mlx5::kSendWqeBB - 1) / mlx5::kSendWqeBB;
}

/// Byte `off` of the concatenated payload of the SG list.
GV_HD GV_INLINE std::uint8_t payload_byte(const SendWr& wr, std::uint64_t off) {
  for (std::uint32_t i = 0; i < wr.num_sge; ++i) {
    if (off < wr.sg_list[i].length)
      return reinterpret_cast<const std::uint8_t*>(wr.sg_list[i].addr)[off];
    off -= wr.sg_list[i].length;
  }
  return 0;
}

/// Octoword k (0 <= k < wqe_ds(wr)) of the WQE for `wr` at WQE index `wqe_index` of QP `qpn`.
GV_HD GV_INLINE Octoword wqe_octoword(const SendWr& wr, std::uint32_t k, std::uint16_t wqe_index,
                                      std::uint32_t qpn) {
  const std::uint32_t ds = wqe_ds(wr);
  if (k == 0) {
    const bool imm = wr.opcode == WrOpcode::kRdmaWriteImm || wr.opcode == WrOpcode::kSendImm;
    return as_octoword(make_ctrl_seg(wqe_index, mlx5_opcode(wr.opcode), 0, qpn,
                                     fm_ce_se_of(wr.flags), static_cast<std::uint8_t>(ds), 0,
                                     imm ? be32::from(wr.imm) : be32{0}));
  }
  if (has_raddr(wr.opcode) && k == 1) return as_octoword(make_raddr_seg(wr.remote_addr, wr.rkey));
  if (is_atomic(wr.opcode) && k == 2) {
    const bool cas = wr.opcode == WrOpcode::kAtomicCmpSwp;
    return as_octoword(make_atomic_seg(cas ? wr.swap : wr.compare_add, cas ? wr.compare_add : 0));
  }
  const std::uint32_t j = k - header_octowords(wr.opcode);
  if ((wr.flags & kWrInline) && carries_payload(wr.opcode)) {
    // Inline bytes: a 4-byte header, then the payload, zero-padded to the octoword.
    const std::uint64_t len = payload_bytes(wr);
    constexpr std::uint64_t kHead = sizeof(mlx5::InlineSeg);
    Octoword o;
    if (wr.num_sge == 1) {
      // One SGE: sixteen independent byte loads assembled in registers, so they are in flight
      // together (through payload_byte each waits for the one before; any alignment).
      const auto* p = reinterpret_cast<const std::uint8_t*>(wr.sg_list[0].addr);
      for (std::uint32_t q = 0; q < 4; ++q) {
        std::uint32_t v = 0;
        for (std::uint32_t i = 0; i < 4; ++i) {
          const std::uint64_t pos = std::uint64_t{j} * 16 + 4 * q + i;
          const std::uint32_t byte = pos >= kHead && pos - kHead < len ? p[pos - kHead] : 0u;
          v |= byte << (8 * i);  // memory order: the byte at the lowest address is the low byte
        }
        o.w[q] = v;
      }
      static_assert(std::endian::native == std::endian::little, "Octoword words are little-endian");
    } else {
      alignas(16) std::uint8_t b[16];
      for (std::uint32_t i = 0; i < 16; ++i) {
        const std::uint64_t pos = std::uint64_t{j} * 16 + i;
        b[i] = pos >= kHead && pos - kHead < len ? payload_byte(wr, pos - kHead) : 0;
      }
      std::memcpy(&o, b, 16);
    }
    if (j == 0) {
      const mlx5::InlineSeg h = make_inline_seg(static_cast<std::uint32_t>(len));
      std::memcpy(&o.w[0], &h, sizeof(h));
    }
    return o;
  }
  const Sge& s = nth_nonempty_sge(wr.sg_list, j);
  return as_octoword(make_data_seg(s.length, s.lkey, s.addr));
}

/// A control segment's fields, from its octoword as loaded from a ring (host order).
struct CtrlFields {
  std::uint8_t opcode = 0;
  std::uint16_t wqe_index = 0;
  std::uint32_t qpn = 0;
  std::uint32_t ds = 0;
  std::uint8_t fm_ce_se = 0;
  be32 imm{0};  ///< wire order
};
GV_HD GV_INLINE CtrlFields decode_ctrl(const Octoword& o) {
  mlx5::CtrlSeg s;
  std::memcpy(&s, &o, sizeof(s));
  CtrlFields f;
  const std::uint32_t oio = s.opmod_idx_opcode.get(), qd = s.qpn_ds.get();
  f.opcode = mlx5::ctrl_opcode(oio);
  f.wqe_index = mlx5::ctrl_wqe_index(oio);
  f.qpn = mlx5::ctrl_qpn(qd);
  f.ds = mlx5::ctrl_ds(qd);
  f.fm_ce_se = s.fm_ce_se;
  f.imm = s.imm;
  return f;
}
/// The size in octowords of the WQE whose control segment is `ctrl`.
GV_HD GV_INLINE std::uint32_t ctrl_ds_of(const Octoword& ctrl) {
  mlx5::CtrlSeg s;
  std::memcpy(&s, &ctrl, sizeof(s));
  return mlx5::ctrl_ds(s.qpn_ds.get());
}

/// Where octoword k of the WQE starting at WQEBB counter `start` lies in an SQ of `sq_bbs`
/// building blocks: WQEs wrap around the end of the ring one octoword at a time.
GV_HD GV_INLINE std::uint32_t sq_octoword_offset(std::uint64_t start, std::uint32_t k,
                                                 std::uint32_t sq_bbs) {
  const std::uint32_t octs = sq_bbs * (mlx5::kSendWqeBB / mlx5::kOctoword);
  return ((static_cast<std::uint32_t>(start) * 4u + k) & (octs - 1)) * mlx5::kOctoword;
}

GV_HD GV_INLINE void store_octoword(void* dst, const Octoword& o) {
#if GV_DEVICE_PASS
  *reinterpret_cast<uint4*>(dst) = make_uint4(o.w[0], o.w[1], o.w[2], o.w[3]);
#else
  std::memcpy(dst, &o, sizeof(o));
#endif
}

GV_HD GV_INLINE Octoword load_octoword(const void* src) {
#if GV_DEVICE_PASS
  const uint4 v = *reinterpret_cast<const uint4*>(src);
  return Octoword{{v.x, v.y, v.z, v.w}};
#else
  Octoword o;
  std::memcpy(&o, src, sizeof(o));
  return o;
#endif
}

}  // namespace gv::ib
