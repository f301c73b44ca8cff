// mlx5 PRM layouts of the DEVX commands the GPU-ring queues are built with: our own field
// tables (name, bit offset, width) and set/get helpers over big-endian command buffers.
//
// Bit offsets count from the most significant bit of byte 0, as the PRM and the kernel's
// mlx5_ifc.h do: a field [bit, bit + width) lies in the big-endian dword bit / 32. Every table
// below is checked in tests two ways: against the kernel's include/linux/mlx5/mlx5_ifc.h
// (read at test time) for the fields it defines, and against rdma-core's DEVX test layouts
// (tests/mlx5_prm_structs.py) for the DEVX fields the kernel header lacks (`kDevxOnly`).
// Offsets in a context table (cqc, qpc, ads, cmd_hca_cap, atomic_caps) are relative to that
// context; `at(context_field, field)` places one inside its command.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

namespace gv::mlx5::devx::prm {

struct Field {
  std::uint32_t bit = 0;
  std::uint32_t width = 0;
};

/// `f` inside the context that starts at `ctx` (a field of the command).
constexpr Field at(Field ctx, Field f) { return Field{ctx.bit + f.bit, f.width}; }

/// A field our helpers can write: within one big-endian dword, or whole aligned dwords.
constexpr bool well_formed(Field f) {
  if (f.width == 0) return false;
  if (f.width <= 32) return f.bit % 32 + f.width <= 32;
  return f.bit % 32 == 0 && f.width % 32 == 0;
}

/// Where the kernel's mlx5_ifc.h stands on a field of ours.
enum class Kernel : std::uint8_t {
  kSame,      ///< defined there under the same name: offset and width must agree
  kDevxOnly,  ///< absent there (reserved bits); checked against rdma-core's layouts instead
  kInside,    ///< the low bits of a wider field there (named in the table)
};

struct Entry {
  const char* layout;       ///< kernel struct name without mlx5_ifc_ / _bits
  const char* name;         ///< our name (and the kernel's member path where kSame)
  Field field;
  Kernel kernel = Kernel::kSame;
  const char* kernel_name = nullptr;  ///< kInside: the wider kernel field
};

// X(name, bit, width, kernel-relation, kernel-name) per layout. Hex offsets as the PRM writes them.
#define GV_PRM_CQC(X)                                   \
  X(dbr_umem_valid, 0x06, 1, kSame, nullptr)            \
  X(cqe_sz, 0x08, 3, kSame, nullptr)                    \
  X(cc, 0x0b, 1, kSame, nullptr)                        \
  X(oi, 0x0e, 1, kSame, nullptr)                        \
  X(dbr_umem_id, 0x20, 32, kDevxOnly, nullptr)          \
  X(log_cq_size, 0x63, 5, kSame, nullptr)               \
  X(uar_page, 0x68, 24, kSame, nullptr)                 \
  X(c_eqn, 0xb8, 8, kInside, "c_eqn_or_apu_element")    \
  X(log_page_size, 0xc3, 5, kSame, nullptr)             \
  X(dbr_addr, 0x1c0, 64, kSame, nullptr)

#define GV_PRM_ADS(X)                        \
  X(pkey_index, 0x10, 16, kSame, nullptr)    \
  X(grh, 0x28, 1, kSame, nullptr)            \
  X(rlid, 0x30, 16, kSame, nullptr)          \
  X(ack_timeout, 0x40, 5, kSame, nullptr)    \
  X(src_addr_index, 0x48, 8, kSame, nullptr) \
  X(hop_limit, 0x58, 8, kSame, nullptr)      \
  X(tclass, 0x64, 8, kSame, nullptr)         \
  X(rgid_rip, 0x80, 128, kSame, nullptr)     \
  X(dscp, 0x10a, 6, kSame, nullptr)          \
  X(udp_sport, 0x110, 16, kSame, nullptr)    \
  X(eth_prio, 0x121, 3, kSame, nullptr)      \
  X(sl, 0x124, 4, kSame, nullptr)            \
  X(vhca_port_num, 0x128, 8, kSame, nullptr) \
  X(rmac_47_32, 0x130, 16, kSame, nullptr)   \
  X(rmac_31_0, 0x140, 32, kSame, nullptr)

#define GV_PRM_QPC(X)                                  \
  X(state, 0x00, 4, kSame, nullptr)                    \
  X(st, 0x08, 8, kSame, nullptr)                       \
  X(pm_state, 0x13, 2, kSame, nullptr)                 \
  X(pd, 0x28, 24, kSame, nullptr)                      \
  X(mtu, 0x40, 3, kSame, nullptr)                      \
  X(log_msg_max, 0x43, 5, kSame, nullptr)              \
  X(log_rq_size, 0x49, 4, kSame, nullptr)              \
  X(log_rq_stride, 0x4d, 3, kSame, nullptr)            \
  X(no_sq, 0x50, 1, kSame, nullptr)                    \
  X(log_sq_size, 0x51, 4, kSame, nullptr)              \
  X(ts_format, 0x58, 2, kSame, nullptr)                \
  X(uar_page, 0x68, 24, kSame, nullptr)                \
  X(user_index, 0x88, 24, kSame, nullptr)              \
  X(log_page_size, 0xa3, 5, kSame, nullptr)            \
  X(remote_qpn, 0xa8, 24, kSame, nullptr)              \
  X(primary_address_path, 0xc0, 0x160, kSame, nullptr) \
  X(log_sra_max, 0x388, 3, kSame, nullptr)             \
  X(retry_count, 0x38d, 3, kSame, nullptr)             \
  X(rnr_retry, 0x390, 3, kSame, nullptr)               \
  X(next_send_psn, 0x3c8, 24, kSame, nullptr)          \
  X(cqn_snd, 0x3e8, 24, kSame, nullptr)                \
  X(log_rra_max, 0x488, 3, kSame, nullptr)             \
  X(atomic_mode, 0x48c, 4, kSame, nullptr)             \
  X(rre, 0x490, 1, kSame, nullptr)                     \
  X(rwe, 0x491, 1, kSame, nullptr)                     \
  X(rae, 0x492, 1, kSame, nullptr)                     \
  X(page_offset, 0x494, 6, kSame, nullptr)             \
  X(min_rnr_nak, 0x4a3, 5, kSame, nullptr)             \
  X(next_rcv_psn, 0x4a8, 24, kSame, nullptr)           \
  X(cqn_rcv, 0x4e8, 24, kSame, nullptr)                \
  X(dbr_addr, 0x500, 64, kSame, nullptr)               \
  X(rq_type, 0x565, 3, kSame, nullptr)                 \
  X(dbr_umem_valid, 0x683, 1, kSame, nullptr)          \
  X(dbr_umem_id, 0x720, 32, kDevxOnly, nullptr)

/// Every command's first dword pair, and every output's status and syndrome.
#define GV_PRM_CMD_HDR(X)               \
  X(opcode, 0x00, 16, kSame, nullptr)   \
  X(uid, 0x10, 16, kSame, nullptr)      \
  X(op_mod, 0x30, 16, kSame, nullptr)
#define GV_PRM_CMD_OUT(X)               \
  X(status, 0x00, 8, kSame, nullptr)    \
  X(syndrome, 0x20, 32, kSame, nullptr)

#define GV_PRM_CREATE_CQ_IN(X)                         \
  GV_PRM_CMD_HDR(X)                                    \
  X(cq_context, 0x80, 0x200, kSame, nullptr)           \
  X(cq_umem_offset, 0x280, 64, kDevxOnly, nullptr)     \
  X(cq_umem_id, 0x2c0, 32, kDevxOnly, nullptr)         \
  X(cq_umem_valid, 0x2e0, 1, kSame, nullptr)
#define GV_PRM_CREATE_CQ_OUT(X) GV_PRM_CMD_OUT(X) X(cqn, 0x48, 24, kSame, nullptr)

/// The QP commands share their header and context placement: opt_param_mask, ece, qpc.
#define GV_PRM_QP_CMD(X)                        \
  GV_PRM_CMD_HDR(X)                             \
  X(opt_param_mask, 0x80, 32, kSame, nullptr)   \
  X(ece, 0xa0, 32, kSame, nullptr)              \
  X(qpc, 0xc0, 0x740, kSame, nullptr)
#define GV_PRM_CREATE_QP_IN(X)                     \
  GV_PRM_QP_CMD(X)                                 \
  X(input_qpn, 0x48, 24, kSame, nullptr)           \
  X(wq_umem_offset, 0x800, 64, kDevxOnly, nullptr) \
  X(wq_umem_id, 0x840, 32, kDevxOnly, nullptr)     \
  X(wq_umem_valid, 0x860, 1, kSame, nullptr)
#define GV_PRM_CREATE_QP_OUT(X) GV_PRM_CMD_OUT(X) X(qpn, 0x48, 24, kSame, nullptr)
#define GV_PRM_MODIFY_QP_IN(X) GV_PRM_QP_CMD(X) X(qpn, 0x48, 24, kSame, nullptr)
#define GV_PRM_QP_2ERR_IN(X) GV_PRM_CMD_HDR(X) X(qpn, 0x48, 24, kSame, nullptr)
/// QUERY_QP's input has no uid; its output carries the qpc where the modify commands do.
#define GV_PRM_QUERY_QP_IN(X) \
  X(opcode, 0x00, 16, kSame, nullptr) X(op_mod, 0x30, 16, kSame, nullptr) X(qpn, 0x48, 24, kSame, nullptr)
#define GV_PRM_QUERY_QP_OUT(X) GV_PRM_CMD_OUT(X) X(qpc, 0xc0, 0x740, kSame, nullptr)

/// QUERY_HCA_CAP has no uid (those bits are reserved).
#define GV_PRM_QUERY_HCA_CAP_IN(X) X(opcode, 0x00, 16, kSame, nullptr) X(op_mod, 0x30, 16, kSame, nullptr)
#define GV_PRM_QUERY_HCA_CAP_OUT(X) GV_PRM_CMD_OUT(X) X(capability, 0x80, 0x8000, kSame, nullptr)

#define GV_PRM_CMD_HCA_CAP(X)                       \
  X(log_max_qp_sz, 0x88, 8, kSame, nullptr)         \
  X(log_max_cq_sz, 0xc8, 8, kSame, nullptr)         \
  X(log_max_ra_req_qp, 0x14a, 6, kSame, nullptr)    \
  X(log_max_ra_res_qp, 0x15a, 6, kSame, nullptr)    \
  X(port_type, 0x1b6, 2, kSame, nullptr)            \
  X(log_max_msg, 0x1c3, 5, kSame, nullptr)          \
  X(cqe_version, 0x1fc, 4, kSame, nullptr)          \
  X(atomic, 0x21e, 1, kSame, nullptr)               \
  X(cq_oi, 0x220, 1, kSame, nullptr)                \
  X(log_bf_reg_size, 0x26b, 5, kSame, nullptr)     \
  X(sq_ts_format, 0x440, 2, kSame, nullptr)

#define GV_PRM_ATOMIC_CAPS(X)                                \
  X(atomic_req_8B_endianness_mode, 0x40, 2, kSame, nullptr)  \
  X(atomic_operations, 0x90, 16, kSame, nullptr)             \
  X(atomic_size_qp, 0xb0, 16, kSame, nullptr)

#define GV_PRM_DEFINE(name, bit, width, rel, kname) inline constexpr Field name{bit, width};
// clang-format off
namespace cqc { GV_PRM_CQC(GV_PRM_DEFINE) }
namespace ads { GV_PRM_ADS(GV_PRM_DEFINE) }
namespace qpc { GV_PRM_QPC(GV_PRM_DEFINE) }
namespace create_cq_in { GV_PRM_CREATE_CQ_IN(GV_PRM_DEFINE) inline constexpr std::size_t kBytes = 0x880 / 8; }
namespace create_cq_out { GV_PRM_CREATE_CQ_OUT(GV_PRM_DEFINE) inline constexpr std::size_t kBytes = 0x80 / 8; }
namespace create_qp_in { GV_PRM_CREATE_QP_IN(GV_PRM_DEFINE) inline constexpr std::size_t kBytes = 0x880 / 8; }
namespace create_qp_out { GV_PRM_CREATE_QP_OUT(GV_PRM_DEFINE) inline constexpr std::size_t kBytes = 0x80 / 8; }
/// RST2INIT_QP, INIT2RTR_QP and RTR2RTS_QP share one layout.
namespace modify_qp_in { GV_PRM_MODIFY_QP_IN(GV_PRM_DEFINE) inline constexpr std::size_t kBytes = 0x880 / 8; }
namespace modify_qp_out { GV_PRM_CMD_OUT(GV_PRM_DEFINE) inline constexpr std::size_t kBytes = 0x80 / 8; }
namespace qp_2err_in { GV_PRM_QP_2ERR_IN(GV_PRM_DEFINE) inline constexpr std::size_t kBytes = 0x80 / 8; }
namespace query_qp_in { GV_PRM_QUERY_QP_IN(GV_PRM_DEFINE) inline constexpr std::size_t kBytes = 0x80 / 8; }
namespace query_qp_out { GV_PRM_QUERY_QP_OUT(GV_PRM_DEFINE) inline constexpr std::size_t kBytes = 0x880 / 8; }
namespace query_hca_cap_in { GV_PRM_QUERY_HCA_CAP_IN(GV_PRM_DEFINE) inline constexpr std::size_t kBytes = 0x80 / 8; }
namespace query_hca_cap_out { GV_PRM_QUERY_HCA_CAP_OUT(GV_PRM_DEFINE) inline constexpr std::size_t kBytes = (0x80 + 0x8000) / 8; }
namespace cmd_hca_cap { GV_PRM_CMD_HCA_CAP(GV_PRM_DEFINE) }
namespace atomic_caps { GV_PRM_ATOMIC_CAPS(GV_PRM_DEFINE) }
// clang-format on
#undef GV_PRM_DEFINE

/// Every field of every layout above, for the tests that check them against other sources.
#define GV_PRM_ENTRY(name, bit, width, rel, kname) Entry{kLayout, #name, Field{bit, width}, Kernel::rel, kname},
inline constexpr Entry kTable[] = {
#define kLayout "cqc"
    GV_PRM_CQC(GV_PRM_ENTRY)
#undef kLayout
#define kLayout "ads"
    GV_PRM_ADS(GV_PRM_ENTRY)
#undef kLayout
#define kLayout "qpc"
    GV_PRM_QPC(GV_PRM_ENTRY)
#undef kLayout
#define kLayout "create_cq_in"
    GV_PRM_CREATE_CQ_IN(GV_PRM_ENTRY)
#undef kLayout
#define kLayout "create_cq_out"
    GV_PRM_CREATE_CQ_OUT(GV_PRM_ENTRY)
#undef kLayout
#define kLayout "create_qp_in"
    GV_PRM_CREATE_QP_IN(GV_PRM_ENTRY)
#undef kLayout
#define kLayout "create_qp_out"
    GV_PRM_CREATE_QP_OUT(GV_PRM_ENTRY)
#undef kLayout
#define kLayout "rst2init_qp_in"
    GV_PRM_MODIFY_QP_IN(GV_PRM_ENTRY)
#undef kLayout
#define kLayout "init2rtr_qp_in"
    GV_PRM_MODIFY_QP_IN(GV_PRM_ENTRY)
#undef kLayout
#define kLayout "rtr2rts_qp_in"
    GV_PRM_MODIFY_QP_IN(GV_PRM_ENTRY)
#undef kLayout
#define kLayout "rst2init_qp_out"
    GV_PRM_CMD_OUT(GV_PRM_ENTRY)
#undef kLayout
#define kLayout "qp_2err_in"
    GV_PRM_QP_2ERR_IN(GV_PRM_ENTRY)
#undef kLayout
#define kLayout "query_qp_in"
    GV_PRM_QUERY_QP_IN(GV_PRM_ENTRY)
#undef kLayout
#define kLayout "query_qp_out"
    GV_PRM_QUERY_QP_OUT(GV_PRM_ENTRY)
#undef kLayout
#define kLayout "query_hca_cap_in"
    GV_PRM_QUERY_HCA_CAP_IN(GV_PRM_ENTRY)
#undef kLayout
#define kLayout "query_hca_cap_out"
    GV_PRM_QUERY_HCA_CAP_OUT(GV_PRM_ENTRY)
#undef kLayout
#define kLayout "cmd_hca_cap"
    GV_PRM_CMD_HCA_CAP(GV_PRM_ENTRY)
#undef kLayout
#define kLayout "atomic_caps"
    GV_PRM_ATOMIC_CAPS(GV_PRM_ENTRY)
#undef kLayout
};
#undef GV_PRM_ENTRY

constexpr bool table_well_formed() {
  for (const Entry& e : kTable)
    if (!well_formed(e.field)) return false;
  return true;
}
static_assert(table_well_formed(), "a PRM field straddles a dword or is misaligned");

// ---- Opcodes and values (PRM; the kernel's mlx5_ifc.h names them MLX5_CMD_OP_* etc.) ----
inline constexpr std::uint16_t kOpQueryHcaCap = 0x100;
inline constexpr std::uint16_t kOpCreateCq = 0x400;
inline constexpr std::uint16_t kOpCreateQp = 0x500;
inline constexpr std::uint16_t kOpRst2InitQp = 0x502;
inline constexpr std::uint16_t kOpInit2RtrQp = 0x503;
inline constexpr std::uint16_t kOpRtr2RtsQp = 0x504;
inline constexpr std::uint16_t kOp2ErrQp = 0x507;
inline constexpr std::uint16_t kOpQueryQp = 0x50b;

/// QUERY_HCA_CAP op_mod: capability type << 1 | current (1) or maximum (0).
inline constexpr std::uint16_t kCapGeneral = 0x0, kCapAtomic = 0x3;
constexpr std::uint16_t hca_cap_op_mod(std::uint16_t type) { return static_cast<std::uint16_t>(type << 1 | 1); }

/// qpc.state as QUERY_QP reports it.
inline constexpr std::uint32_t kQpcRst = 0x0, kQpcInit = 0x1, kQpcRtr = 0x2, kQpcRts = 0x3, kQpcSqd = 0x7;
inline constexpr std::uint32_t kCqeSz64 = 0;        ///< cqc.cqe_sz: 64-byte CQEs
inline constexpr std::uint32_t kQpStRc = 0x0;       ///< qpc.st
inline constexpr std::uint32_t kPmMigrated = 0x3;   ///< qpc.pm_state
inline constexpr std::uint32_t kRqRegular = 0x0;    ///< qpc.rq_type: a receive queue of its own
inline constexpr std::uint32_t kAtomicMode8B = 0x3; ///< qpc.atomic_mode: up to 8-byte atomics
inline constexpr std::uint32_t kAtomicOpsCas = 1u << 0, kAtomicOpsFetchAdd = 1u << 1;
inline constexpr std::uint32_t kAtomicSize8 = 1u << 3;  ///< atomic_size_qp: 8 bytes
inline constexpr std::uint32_t kPortTypeIb = 0x0, kPortTypeEth = 0x1;
/// qpc.ts_format: the device's default where it knows real-time stamps, else free-running (as
/// the kernel's mlx5_get_qp_default_ts chooses; a device without free-running refuses 0).
inline constexpr std::uint32_t kTsFreeRunning = 0x0, kTsDefault = 0x1;
/// qpc.log_page_size and cqc.log_page_size count from 4 KiB pages.
inline constexpr std::uint32_t kPageShiftBase = 12;

// ---- Set / get over big-endian buffers ---------------------------------------------------

constexpr std::uint32_t load_be32(const std::uint8_t* p) {
  return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | p[3];
}
constexpr void store_be32(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 24);
  p[1] = static_cast<std::uint8_t>(v >> 16);
  p[2] = static_cast<std::uint8_t>(v >> 8);
  p[3] = static_cast<std::uint8_t>(v);
}

/// The mask of a field of up to 32 bits, in host order.
constexpr std::uint32_t mask(Field f) { return f.width >= 32 ? 0xffffffffu : (1u << f.width) - 1; }
/// True when `v` fits the field: builders refuse values that would be truncated.
constexpr bool fits(Field f, std::uint64_t v) { return f.width >= 64 || (v >> f.width) == 0; }

/// Write `v` into field `f` (up to 64 bits) of `buf`; the other bits of the dword(s) stay.
constexpr void set(std::span<std::uint8_t> buf, Field f, std::uint64_t v) {
  if (f.width > 32) {  // whole aligned dwords (dbr_addr, umem offsets): high dword first
    std::uint8_t* p = buf.data() + f.bit / 8;
    store_be32(p, static_cast<std::uint32_t>(v >> 32));
    store_be32(p + 4, static_cast<std::uint32_t>(v));
    return;
  }
  std::uint8_t* p = buf.data() + f.bit / 32 * 4;
  const std::uint32_t shift = 32 - (f.bit % 32 + f.width);
  const std::uint32_t m = mask(f) << shift;
  store_be32(p, (load_be32(p) & ~m) | ((static_cast<std::uint32_t>(v) << shift) & m));
}

constexpr std::uint64_t get(std::span<const std::uint8_t> buf, Field f) {
  if (f.width > 32) {
    const std::uint8_t* p = buf.data() + f.bit / 8;
    return std::uint64_t{load_be32(p)} << 32 | load_be32(p + 4);
  }
  const std::uint32_t shift = 32 - (f.bit % 32 + f.width);
  return (load_be32(buf.data() + f.bit / 32 * 4) >> shift) & mask(f);
}

/// Copy bytes already in wire order (a GID) into a byte-aligned field.
constexpr void set_bytes(std::span<std::uint8_t> buf, Field f, std::span<const std::uint8_t> bytes) {
  for (std::size_t i = 0; i < f.width / 8 && i < bytes.size(); ++i) buf[f.bit / 8 + i] = bytes[i];
}

}  // namespace gv::mlx5::devx::prm
