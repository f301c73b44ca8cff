// Encoders (ib/encode.hpp) byte for byte against rdma-core: segments against the
// mlx5dv_set_* helpers and structs of <infiniband/mlx5dv.h>, whole WQEs against an
// independent re-statement of rdma-core's mlx5 _mlx5_post_send (providers/mlx5/qp.c) for an RC
// QP, written into a poisoned SQ ring with rdma-core's wrap rules.
#include <gtest/gtest.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include <array>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gpuverbs/ib.hpp>

#include "host_rings.hpp"

namespace {
using namespace gv::ib;
namespace m = gv::ib::mlx5;

std::uint64_t test_seed() { return gvt::test_seed(0x6776'6572'6273'0001ull); }
using gvt::seed_note;

/// Byte comparison that says where the first difference is and shows both 16-byte rows.
::testing::AssertionResult same_bytes(const void* got, const void* want, std::size_t n) {
  const auto* g = static_cast<const std::uint8_t*>(got);
  const auto* w = static_cast<const std::uint8_t*>(want);
  for (std::size_t i = 0; i < n; ++i) {
    if (g[i] == w[i]) continue;
    const std::size_t row = i & ~std::size_t{15};
    std::ostringstream o;
    o << "first difference at byte " << i << " of " << n << "\n  got : ";
    char buf[4];
    for (std::size_t j = row; j < row + 16 && j < n; ++j) {
      std::snprintf(buf, sizeof buf, "%02x ", g[j]);
      o << buf;
    }
    o << "\n  want: ";
    for (std::size_t j = row; j < row + 16 && j < n; ++j) {
      std::snprintf(buf, sizeof buf, "%02x ", w[j]);
      o << buf;
    }
    return ::testing::AssertionFailure() << o.str();
  }
  return ::testing::AssertionSuccess();
}

constexpr int kSegIters = 20000;
constexpr int kWqeIters = 20000;

// ---- Segments -------------------------------------------------------------------------------

TEST(EncodeSegments, CtrlSegMatchesMlx5dvSetCtrlSeg) {
  const std::uint64_t seed = test_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (int it = 0; it < kSegIters; ++it) {
    const auto pi = static_cast<std::uint16_t>(rng());
    const auto opcode = static_cast<std::uint8_t>(rng());
    const auto opmod = static_cast<std::uint8_t>(rng());
    const std::uint32_t qpn = (it & 1) ? static_cast<std::uint32_t>(rng()) & m::kQpnMask
                                       : static_cast<std::uint32_t>(rng());
    const auto fm_ce_se = static_cast<std::uint8_t>(rng());
    const auto ds = static_cast<std::uint8_t>(rng());
    const auto sig = static_cast<std::uint8_t>(rng());
    const auto imm = static_cast<std::uint32_t>(rng());
    mlx5_wqe_ctrl_seg want;
    std::memset(&want, 0, sizeof want);  // rdma-core zeroes bytes 8..11 before filling
    // rdma-core takes imm already in wire order (ibv_send_wr::imm_data is __be32).
    mlx5dv_set_ctrl_seg(&want, pi, opcode, opmod, qpn, fm_ce_se, ds, sig, htobe32(imm));
    const m::CtrlSeg got =
        make_ctrl_seg(pi, opcode, opmod, qpn, fm_ce_se, ds, sig, gv::be32::from(imm));
    ASSERT_TRUE(same_bytes(&got, &want, 16)) << "iteration " << it;
  }
}

TEST(EncodeSegments, DataSegMatchesMlx5dvSetDataSeg) {
  const std::uint64_t seed = test_seed() + 1;
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (int it = 0; it < kSegIters; ++it) {
    const auto len = (it % 7 == 0) ? 0u : static_cast<std::uint32_t>(rng());
    const auto lkey = static_cast<std::uint32_t>(rng());
    const std::uint64_t addr = rng();
    mlx5_wqe_data_seg want;
    std::memset(&want, 0xa5, sizeof want);
    mlx5dv_set_data_seg(&want, len, lkey, static_cast<uintptr_t>(addr));
    const m::DataSeg got = make_data_seg(len, lkey, addr);
    ASSERT_TRUE(same_bytes(&got, &want, 16)) << "iteration " << it;
  }
}

TEST(EncodeSegments, RaddrSegMatchesRdmaCore) {
  const std::uint64_t seed = test_seed() + 2;
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (int it = 0; it < kSegIters; ++it) {
    const std::uint64_t raddr = rng();
    const auto rkey = static_cast<std::uint32_t>(rng());
    mlx5_wqe_raddr_seg want;
    std::memset(&want, 0xa5, sizeof want);
    want.raddr = htobe64(raddr);  // set_raddr_seg() in providers/mlx5/qp.c
    want.rkey = htobe32(rkey);
    want.reserved = 0;
    const m::RaddrSeg got = make_raddr_seg(raddr, rkey);
    ASSERT_TRUE(same_bytes(&got, &want, 16)) << "iteration " << it;
  }
}

TEST(EncodeSegments, AtomicSegMatchesRdmaCore) {
  const std::uint64_t seed = test_seed() + 3;
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (int it = 0; it < kSegIters; ++it) {
    const std::uint64_t swap_add = rng(), compare = rng();
    mlx5_wqe_atomic_seg want;
    std::memset(&want, 0xa5, sizeof want);
    want.swap_add = htobe64(swap_add);  // _set_atomic_seg(), CMP_AND_SWP branch
    want.compare = htobe64(compare);
    const m::AtomicSeg got = make_atomic_seg(swap_add, compare);
    ASSERT_TRUE(same_bytes(&got, &want, 16)) << "iteration " << it;
  }
}

TEST(EncodeSegments, InlineSegMatchesRdmaCore) {
  const std::uint64_t seed = test_seed() + 4;
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (int it = 0; it < kSegIters; ++it) {
    // set_data_inl_seg() writes byte_count = htobe32(inl | MLX5_INLINE_SEG), inl < 2^31.
    const std::uint32_t len = (it < 1024) ? static_cast<std::uint32_t>(it)
                                          : static_cast<std::uint32_t>(rng()) & 0x7fffffffu;
    mlx5_wqe_inl_data_seg want;
    std::memset(&want, 0xa5, sizeof want);
    want.byte_count = htobe32(len | MLX5_INLINE_SEG);
    const m::InlineSeg got = make_inline_seg(len);
    ASSERT_TRUE(same_bytes(&got, &want, sizeof want)) << "iteration " << it;
  }
}

TEST(EncodeSegments, RecvTerminatorMatchesRdmaCore) {
  mlx5_wqe_data_seg want;
  std::memset(&want, 0xa5, sizeof want);
  want.byte_count = 0;  // set_data_ptr_seg_end() / the tail of mlx5_post_recv()
  want.lkey = htobe32(MLX5_INVALID_LKEY);
  want.addr = 0;
  const m::DataSeg got = make_recv_terminator();
  EXPECT_TRUE(same_bytes(&got, &want, 16));
}

TEST(EncodeSegments, OctowordIsTheSegmentsBytes) {
  const m::DataSeg d = make_data_seg(0x01020304u, 0x05060708u, 0x090a0b0c0d0e0f10ull);
  const Octoword o = as_octoword(d);
  EXPECT_TRUE(same_bytes(&o, &d, 16));
  alignas(16) std::uint8_t buf[16];
  store_octoword(buf, o);
  EXPECT_TRUE(same_bytes(buf, &d, 16));
  const Octoword back = load_octoword(buf);
  EXPECT_TRUE(same_bytes(&back, &d, 16));
}

// ---- Whole WQEs: the rdma-core reference -------------------------------------------------

/// A work request in rdma-core's terms. NOP has no ibv_wr_opcode; it is carried by `nop`.
struct RefWr {
  bool nop = false;
  ibv_send_wr wr{};
  std::vector<ibv_sge> sge;
};

ibv_wr_opcode ibv_opcode_of(WrOpcode op) {
  switch (op) {
    case WrOpcode::kRdmaWrite: return IBV_WR_RDMA_WRITE;
    case WrOpcode::kRdmaWriteImm: return IBV_WR_RDMA_WRITE_WITH_IMM;
    case WrOpcode::kRdmaRead: return IBV_WR_RDMA_READ;
    case WrOpcode::kSend: return IBV_WR_SEND;
    case WrOpcode::kSendImm: return IBV_WR_SEND_WITH_IMM;
    case WrOpcode::kAtomicCmpSwp: return IBV_WR_ATOMIC_CMP_AND_SWP;
    case WrOpcode::kAtomicFetchAdd: return IBV_WR_ATOMIC_FETCH_AND_ADD;
    case WrOpcode::kNop: break;
  }
  return IBV_WR_SEND;  // unused for NOP
}

/// rdma-core's mlx5_ib_opcode[] table, for the opcodes an RC QP posts.
std::uint8_t mlx5_opcode_of(const RefWr& r) {
  if (r.nop) return MLX5_OPCODE_NOP;
  switch (r.wr.opcode) {
    case IBV_WR_RDMA_WRITE: return MLX5_OPCODE_RDMA_WRITE;
    case IBV_WR_RDMA_WRITE_WITH_IMM: return MLX5_OPCODE_RDMA_WRITE_IMM;
    case IBV_WR_SEND: return MLX5_OPCODE_SEND;
    case IBV_WR_SEND_WITH_IMM: return MLX5_OPCODE_SEND_IMM;
    case IBV_WR_RDMA_READ: return MLX5_OPCODE_RDMA_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP: return MLX5_OPCODE_ATOMIC_CS;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return MLX5_OPCODE_ATOMIC_FA;
    default: ADD_FAILURE() << "opcode outside the test's domain"; return 0xff;
  }
}

RefWr to_ref(const SendWr& w) {
  RefWr r;
  r.nop = w.opcode == WrOpcode::kNop;
  r.wr.opcode = ibv_opcode_of(w.opcode);
  for (std::uint32_t i = 0; i < w.num_sge; ++i)
    r.sge.push_back(ibv_sge{w.sg_list[i].addr, w.sg_list[i].length, w.sg_list[i].lkey});
  r.wr.sg_list = r.sge.data();
  r.wr.num_sge = static_cast<int>(r.sge.size());
  unsigned f = 0;
  if (w.flags & kWrSignaled) f |= IBV_SEND_SIGNALED;
  if (w.flags & kWrFence) f |= IBV_SEND_FENCE;
  if (w.flags & kWrSolicited) f |= IBV_SEND_SOLICITED;
  // kWrInline means something only for opcodes that carry a payload (work_request.hpp);
  // rdma-core would inline the gather list of a READ or atomic too, which no caller wants.
  if ((w.flags & kWrInline) && carries_payload(w.opcode)) f |= IBV_SEND_INLINE;
  r.wr.send_flags = f;
  r.wr.imm_data = htobe32(w.imm);  // ibv's imm_data is in wire order
  if (is_atomic(w.opcode)) {
    r.wr.wr.atomic.remote_addr = w.remote_addr;
    r.wr.wr.atomic.rkey = w.rkey;
    r.wr.wr.atomic.compare_add = w.compare_add;
    r.wr.wr.atomic.swap = w.swap;
  } else {
    r.wr.wr.rdma.remote_addr = w.remote_addr;
    r.wr.wr.rdma.rkey = w.rkey;
  }
  return r;
}

/// One send WQE as rdma-core's _mlx5_post_send() lays it out for an RC QP without WQE
/// signatures, at producer counter `cur_post` of an SQ of `wqe_cnt` WQEBBs. Returns the ds.
/// Two places where rdma-core leaves stale bytes are pinned to zero (the HCA ignores both):
/// the padding after inline data, and the compare field of a FETCH_ADD atomic segment.
unsigned ref_post_send(std::uint8_t* sq_start, unsigned wqe_cnt, unsigned cur_post,
                       std::uint32_t qpn, const RefWr& r) {
  std::uint8_t* const qend = sq_start + wqe_cnt * MLX5_SEND_WQE_BB;
  const ibv_send_wr* wr = &r.wr;
  const unsigned idx = cur_post & (wqe_cnt - 1);
  std::uint8_t* seg = sq_start + (idx << MLX5_SEND_WQE_SHIFT);
  auto* ctrl = reinterpret_cast<mlx5_wqe_ctrl_seg*>(seg);
  std::memset(seg + 8, 0, 4);
  const std::uint8_t fence = (wr->send_flags & IBV_SEND_FENCE) ? MLX5_WQE_CTRL_FENCE : 0;
  const std::uint8_t fm_ce_se =
      fence | ((wr->send_flags & IBV_SEND_SIGNALED) ? MLX5_WQE_CTRL_CQ_UPDATE : 0) |
      ((wr->send_flags & IBV_SEND_SOLICITED) ? MLX5_WQE_CTRL_SOLICITED : 0);
  std::uint32_t imm = 0;  // send_ieth()
  if (!r.nop && (wr->opcode == IBV_WR_SEND_WITH_IMM || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM))
    imm = wr->imm_data;
  seg += sizeof *ctrl;
  unsigned size = sizeof *ctrl / 16;

  if (!r.nop) {
    switch (wr->opcode) {
      case IBV_WR_RDMA_READ:
      case IBV_WR_RDMA_WRITE:
      case IBV_WR_RDMA_WRITE_WITH_IMM: {
        auto* rs = reinterpret_cast<mlx5_wqe_raddr_seg*>(seg);
        rs->raddr = htobe64(wr->wr.rdma.remote_addr);
        rs->rkey = htobe32(wr->wr.rdma.rkey);
        rs->reserved = 0;
        seg += sizeof(mlx5_wqe_raddr_seg);
        size += sizeof(mlx5_wqe_raddr_seg) / 16;
        break;
      }
      case IBV_WR_ATOMIC_CMP_AND_SWP:
      case IBV_WR_ATOMIC_FETCH_AND_ADD: {
        auto* rs = reinterpret_cast<mlx5_wqe_raddr_seg*>(seg);
        rs->raddr = htobe64(wr->wr.atomic.remote_addr);
        rs->rkey = htobe32(wr->wr.atomic.rkey);
        rs->reserved = 0;
        seg += sizeof(mlx5_wqe_raddr_seg);
        auto* as = reinterpret_cast<mlx5_wqe_atomic_seg*>(seg);
        if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
          as->swap_add = htobe64(wr->wr.atomic.swap);
          as->compare = htobe64(wr->wr.atomic.compare_add);
        } else {
          as->swap_add = htobe64(wr->wr.atomic.compare_add);
          as->compare = 0;  // rdma-core leaves it stale
        }
        seg += sizeof(mlx5_wqe_atomic_seg);
        size += (sizeof(mlx5_wqe_raddr_seg) + sizeof(mlx5_wqe_atomic_seg)) / 16;
        break;
      }
      default:
        break;
    }

    if ((wr->send_flags & IBV_SEND_INLINE) && wr->num_sge) {
      // set_data_inl_seg()
      auto* iseg = reinterpret_cast<mlx5_wqe_inl_data_seg*>(seg);
      std::uint8_t* wqe = seg + sizeof *iseg;
      unsigned inl = 0;
      for (int i = 0; i < wr->num_sge; ++i) {
        const auto* addr = reinterpret_cast<const std::uint8_t*>(wr->sg_list[i].addr);
        unsigned len = wr->sg_list[i].length;
        inl += len;
        if (wqe + len > qend) {
          const unsigned copy = static_cast<unsigned>(qend - wqe);
          std::memcpy(wqe, addr, copy);
          addr += copy;
          len -= copy;
          wqe = sq_start;
        }
        if (len != 0) std::memcpy(wqe, addr, len);  // a zero-length SGE may have a null address
        wqe += len;
      }
      if (inl) {
        iseg->byte_count = htobe32(inl | MLX5_INLINE_SEG);
        const unsigned sz = (inl + sizeof iseg->byte_count + 15) / 16;
        for (unsigned pad = sz * 16 - inl - sizeof iseg->byte_count; pad > 0; --pad) {
          if (wqe == qend) wqe = sq_start;
          *wqe++ = 0;  // rdma-core leaves the padding stale
        }
        size += sz;
      }
    } else {
      auto* dpseg = reinterpret_cast<mlx5_wqe_data_seg*>(seg);
      for (int i = 0; i < wr->num_sge; ++i) {
        if (reinterpret_cast<std::uint8_t*>(dpseg) == qend)
          dpseg = reinterpret_cast<mlx5_wqe_data_seg*>(sq_start);
        if (wr->sg_list[i].length) {
          if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
              wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
            dpseg->byte_count = htobe32(8);  // set_data_ptr_seg_atomic(): MLX5_ATOMIC_SIZE
            dpseg->lkey = htobe32(wr->sg_list[i].lkey);
            dpseg->addr = htobe64(wr->sg_list[i].addr);
          } else {
            mlx5dv_set_data_seg(dpseg, wr->sg_list[i].length, wr->sg_list[i].lkey,
                                static_cast<uintptr_t>(wr->sg_list[i].addr));
          }
          ++dpseg;
          size += sizeof(mlx5_wqe_data_seg) / 16;
        }
      }
    }
  }
  mlx5dv_set_ctrl_seg(ctrl, static_cast<std::uint16_t>(cur_post & 0xffff), mlx5_opcode_of(r), 0,
                      qpn, fm_ce_se, static_cast<std::uint8_t>(size), 0, imm);
  return size;
}

unsigned ref_bbs(unsigned size) {  // DIV_ROUND_UP(size * 16, MLX5_SEND_WQE_BB)
  return (size * 16 + MLX5_SEND_WQE_BB - 1) / MLX5_SEND_WQE_BB;
}

// ---- Whole WQEs: random requests -----------------------------------------------------------

struct WrStore {
  SendWr wr;
  std::vector<Sge> sge;
  std::vector<std::vector<std::uint8_t>> bufs;  // inline payloads (dereferenced)
  void fix() {
    wr.sg_list = sge.empty() ? nullptr : sge.data();
    wr.num_sge = static_cast<std::uint32_t>(sge.size());
  }
};

constexpr WrOpcode kAllOps[] = {WrOpcode::kRdmaWrite,    WrOpcode::kRdmaWriteImm,
                                WrOpcode::kRdmaRead,     WrOpcode::kSend,
                                WrOpcode::kSendImm,      WrOpcode::kAtomicCmpSwp,
                                WrOpcode::kAtomicFetchAdd, WrOpcode::kNop};

/// Largest inline payload that keeps ds <= 63.
std::uint32_t max_inline_for(WrOpcode op) { return (63 - header_octowords(op)) * 16 - 4; }

/// A random request that rdma-core would accept and our validate() passes: non-inline SGEs
/// have nonzero lengths (zero-length SGEs are pinned by their own tests below).
void random_wr(std::mt19937_64& rng, WrStore& s) {
  s = WrStore{};
  SendWr& w = s.wr;
  w.opcode = kAllOps[rng() % 8];
  if (rng() % 2) w.flags |= kWrSignaled;
  if (rng() % 4 == 0) w.flags |= kWrFence;
  if (rng() % 4 == 0) w.flags |= kWrSolicited;
  w.imm = static_cast<std::uint32_t>(rng());
  w.remote_addr = rng();
  w.rkey = static_cast<std::uint32_t>(rng());
  w.compare_add = rng();
  w.swap = rng();
  if (w.opcode == WrOpcode::kNop) {
    // no segments
  } else if (is_atomic(w.opcode)) {
    s.sge.push_back(Sge{rng(), 8, static_cast<std::uint32_t>(rng())});
  } else if (carries_payload(w.opcode) && rng() % 5 < 2) {
    w.flags |= kWrInline;
    const std::uint32_t cap = max_inline_for(w.opcode);
    std::uint32_t total = (rng() % 8 == 0) ? 1 + rng() % cap : 1 + rng() % 128;
    const unsigned parts = 1 + rng() % 4;
    for (unsigned p = 0; p < parts; ++p) {
      std::uint32_t len = (p + 1 == parts) ? total : static_cast<std::uint32_t>(rng() % (total + 1));
      total -= len;
      std::vector<std::uint8_t> b(len);
      for (auto& x : b) x = static_cast<std::uint8_t>(rng());
      s.bufs.push_back(std::move(b));
      s.sge.push_back(Sge{reinterpret_cast<std::uint64_t>(s.bufs.back().data()), len,
                          static_cast<std::uint32_t>(rng())});
    }
  } else {
    const unsigned cap = 63 - header_octowords(w.opcode);
    const unsigned n = (rng() % 8 == 0) ? 1 + rng() % cap : 1 + rng() % 4;
    for (unsigned i = 0; i < n; ++i) {
      std::uint32_t len = static_cast<std::uint32_t>(rng());
      if (len == 0) len = 1;
      s.sge.push_back(Sge{rng(), len, static_cast<std::uint32_t>(rng())});
    }
  }
  s.fix();
}

QpHandle ring_qp(std::uint8_t* ring, std::uint32_t sq_bbs, std::uint32_t qpn) {
  QpHandle qp;
  qp.qpn = qpn;
  qp.sq = reinterpret_cast<std::byte*>(ring);
  qp.sq_bbs = sq_bbs;
  qp.max_send_sge = 64;
  qp.max_inline = 4096;
  return qp;
}

struct WqeCase {
  std::uint32_t sq_bbs;
  std::uint64_t start;
  std::uint32_t qpn;
};

/// Builds `wr` with sq_write_wqe (ours) and ref_post_send (rdma-core's way) into two SQ rings
/// poisoned alike, and compares the whole rings. Returns the reference ds through *ds_out.
::testing::AssertionResult same_wqe(const SendWr& wr, const WqeCase& c, std::uint8_t poison,
                                    unsigned* ds_out = nullptr) {
  std::vector<std::uint8_t> ours(c.sq_bbs * 64u, poison), want(c.sq_bbs * 64u, poison);
  const unsigned ref_ds =
      ref_post_send(want.data(), c.sq_bbs, static_cast<unsigned>(c.start), c.qpn, to_ref(wr));
  if (ds_out) *ds_out = ref_ds;
  if (wqe_ds(wr) != ref_ds)
    return ::testing::AssertionFailure() << "wqe_ds " << wqe_ds(wr) << " != rdma-core ds " << ref_ds;
  if (wqe_bbs(wqe_ds(wr)) != ref_bbs(ref_ds))
    return ::testing::AssertionFailure() << "wqe_bbs " << wqe_bbs(wqe_ds(wr)) << " != " << ref_bbs(ref_ds);
  const QpHandle qp = ring_qp(ours.data(), c.sq_bbs, c.qpn);
  sq_write_wqe(qp, c.start, wr);
  return same_bytes(ours.data(), want.data(), ours.size());
}

TEST(EncodeWqe, RandomWqesMatchRdmaCoreIncludingRingWrap) {
  const std::uint64_t seed = test_seed() + 10;
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  WrStore s;
  int wrapped = 0;
  std::array<int, 8> per_op{};
  int inline_payload_ops = 0, fenced = 0, solicited = 0, signaled = 0, many_sges = 0;
  for (int it = 0; it < kWqeIters; ++it) {
    random_wr(rng, s);
    const std::uint32_t bbs = wqe_bbs(wqe_ds(s.wr));
    std::uint32_t sq_bbs = 1;
    while (sq_bbs < bbs) sq_bbs <<= 1;
    sq_bbs <<= rng() % 4;
    std::uint64_t start = rng() >> (rng() % 64);
    if (bbs > 1 && rng() % 2) {  // start within the last bbs-1 WQEBBs: the WQE wraps
      const std::uint64_t lap = rng() >> 20;
      start = lap * sq_bbs + sq_bbs - 1 - rng() % (bbs - 1);
    }
    if (start % sq_bbs + bbs > sq_bbs) ++wrapped;
    const WqeCase c{sq_bbs, start, static_cast<std::uint32_t>(rng()) & m::kQpnMask};
    ASSERT_TRUE(same_wqe(s.wr, c, static_cast<std::uint8_t>(rng()))) << "iteration " << it
        << " opcode " << int(s.wr.opcode) << " flags " << s.wr.flags << " num_sge "
        << s.wr.num_sge << " sq_bbs " << sq_bbs << " start " << start;
    ++per_op[static_cast<int>(s.wr.opcode)];
    inline_payload_ops += (s.wr.flags & kWrInline) ? 1 : 0;
    fenced += (s.wr.flags & kWrFence) ? 1 : 0;
    solicited += (s.wr.flags & kWrSolicited) ? 1 : 0;
    signaled += (s.wr.flags & kWrSignaled) ? 1 : 0;
    many_sges += (!(s.wr.flags & kWrInline) && s.wr.num_sge > 8) ? 1 : 0;
  }
  // The random mix must actually cover what it claims to.
  for (int op = 0; op < 8; ++op) EXPECT_GT(per_op[op], 1000) << "opcode " << op;
  EXPECT_GT(wrapped, 2000);
  EXPECT_GT(inline_payload_ops, 2000);
  EXPECT_GT(fenced, 2000);
  EXPECT_GT(solicited, 2000);
  EXPECT_GT(signaled, 5000);
  EXPECT_GT(signaled, 0);
  EXPECT_LT(signaled, kWqeIters);
  EXPECT_GT(many_sges, 500);
}

/// Every opcode and every flag combination, 1..N SGEs, at a ring position where it wraps.
TEST(EncodeWqe, EveryOpcodeFlagsAndSgeCount) {
  const std::uint64_t seed = test_seed() + 11;
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (WrOpcode op : kAllOps) {
    for (std::uint32_t flags = 0; flags < 16; ++flags) {
      const bool inl = (flags & kWrInline) && carries_payload(op);
      const unsigned max_n = is_atomic(op) ? 1 : (op == WrOpcode::kNop ? 0 : 63 - header_octowords(op));
      for (unsigned n = (op == WrOpcode::kNop ? 0 : 1); n <= max_n; ++n) {
        WrStore s;
        s.wr.opcode = op;
        s.wr.flags = flags;
        s.wr.imm = static_cast<std::uint32_t>(rng());
        s.wr.remote_addr = rng();
        s.wr.rkey = static_cast<std::uint32_t>(rng());
        s.wr.compare_add = rng();
        s.wr.swap = rng();
        if (inl) {  // inline payloads are read: real buffers, 1..12 bytes each
          for (unsigned i = 0; i < n; ++i) {
            s.bufs.emplace_back(1 + rng() % 12);
            for (auto& b : s.bufs.back()) b = static_cast<std::uint8_t>(rng());
          }
        }
        for (unsigned i = 0; i < n; ++i) {
          const std::uint64_t addr =
              inl ? reinterpret_cast<std::uint64_t>(s.bufs[i].data()) : rng();
          const auto len = is_atomic(op) ? 8u
                           : inl         ? static_cast<std::uint32_t>(s.bufs[i].size())
                                         : static_cast<std::uint32_t>(rng() | 1);
          s.sge.push_back(Sge{addr, len, static_cast<std::uint32_t>(rng())});
        }
        s.fix();
        const std::uint32_t bbs = wqe_bbs(wqe_ds(s.wr));
        for (std::uint32_t sq_bbs : {16u, 32u}) {
          // ending exactly at the ring end, and wrapping by one WQEBB
          for (std::uint64_t start : {std::uint64_t{sq_bbs} * 4099 - bbs,
                                      std::uint64_t{sq_bbs} * 65535 - bbs + 1}) {
            const WqeCase c{sq_bbs, start, 0x00abcdefu};
            ASSERT_TRUE(same_wqe(s.wr, c, 0x5a)) << "opcode " << int(op) << " flags " << flags
                                                 << " n " << n << " start " << start;
          }
        }
      }
    }
  }
}

// ---- Sizes ---------------------------------------------------------------------------------

TEST(EncodeWqe, InlineSizes1To300) {
  std::mt19937_64 rng(test_seed() + 12);
  for (WrOpcode op : {WrOpcode::kRdmaWrite, WrOpcode::kRdmaWriteImm, WrOpcode::kSend,
                      WrOpcode::kSendImm}) {
    for (std::uint32_t len = 1; len <= 300; ++len) {
      WrStore s;
      s.wr.opcode = op;
      s.wr.flags = kWrInline | kWrSignaled;
      s.wr.imm = 0x11223344u;
      s.wr.remote_addr = 0x1000;
      s.wr.rkey = 7;
      // split in up to three SGEs, one of them possibly empty
      const std::uint32_t a = len / 3, b = (len % 5 == 0) ? 0 : len / 4;
      for (std::uint32_t part : {a, b, len - a - b}) {
        s.bufs.emplace_back(part);
        for (auto& x : s.bufs.back()) x = static_cast<std::uint8_t>(rng());
      }
      for (auto& buf : s.bufs)
        s.sge.push_back(Sge{reinterpret_cast<std::uint64_t>(buf.data()),
                            static_cast<std::uint32_t>(buf.size()), 9});
      s.fix();
      const std::uint32_t want_ds = header_octowords(op) + (len + 4 + 15) / 16;  // align(inl+4,16)/16
      EXPECT_EQ(wqe_ds(s.wr), want_ds) << "op " << int(op) << " len " << len;
      EXPECT_EQ(wqe_bbs(want_ds), (want_ds * 16 + 63) / 64);
      unsigned ref_ds = 0;
      ASSERT_TRUE(same_wqe(s.wr, WqeCase{32, 32 * 7 + 31, 0x42}, 0xc3, &ref_ds))
          << "op " << int(op) << " len " << len;
      EXPECT_EQ(ref_ds, want_ds);
    }
  }
}

/// One SGE at every source alignment: rdma-core's bytes, never reading past the payload.
TEST(EncodeWqe, InlineSingleSgeEveryAlignment) {
  std::mt19937_64 rng(test_seed() + 13);
  for (std::uint32_t off = 0; off < 8; ++off) {
    for (std::uint32_t len = 1; len <= 300; len += (len < 40 ? 1 : 7)) {
      WrStore s;
      s.wr.opcode = len % 2 ? WrOpcode::kRdmaWrite : WrOpcode::kSend;
      s.wr.flags = kWrInline;
      s.wr.remote_addr = 0x2000;
      s.wr.rkey = 5;
      s.bufs.emplace_back(off + len);  // exactly off + len bytes: ASan catches an over-read
      for (auto& x : s.bufs.back()) x = static_cast<std::uint8_t>(rng());
      s.sge.push_back(Sge{reinterpret_cast<std::uint64_t>(s.bufs.back().data() + off), len, 9});
      s.fix();
      ASSERT_TRUE(same_wqe(s.wr, WqeCase{32, 32 * 5 + 29, 0x42}, 0xc3, nullptr)) << "off " << off << " len " << len;
    }
  }
}

TEST(EncodeWqe, WqeBbsForEveryDs) {
  for (std::uint32_t ds = 1; ds <= m::kMaxWqeDs; ++ds)
    EXPECT_EQ(wqe_bbs(ds), ref_bbs(ds)) << "ds " << ds;
  EXPECT_EQ(wqe_bbs(1), 1u);
  EXPECT_EQ(wqe_bbs(4), 1u);
  EXPECT_EQ(wqe_bbs(5), 2u);
  EXPECT_EQ(wqe_bbs(63), 16u);
}

TEST(EncodeWqe, Ds63Limit) {
  QpHandle qp;
  qp.max_inline = 100000;
  qp.max_send_sge = 1000;
  for (WrOpcode op : {WrOpcode::kRdmaWrite, WrOpcode::kRdmaWriteImm, WrOpcode::kSend,
                      WrOpcode::kSendImm}) {
    const std::uint32_t head = header_octowords(op);
    // inline: the largest payload that fits ds 63, and one byte more
    std::vector<std::uint8_t> buf(2000, 0x77);
    Sge sge{reinterpret_cast<std::uint64_t>(buf.data()), (63 - head) * 16 - 4, 1};
    SendWr w;
    w.opcode = op;
    w.flags = kWrInline;
    w.sg_list = &sge;
    w.num_sge = 1;
    EXPECT_EQ(wqe_ds(w), 63u) << int(op);
    EXPECT_EQ(validate(qp, w), gv::Status::kOk) << int(op);
    sge.length += 1;
    EXPECT_EQ(wqe_ds(w), 64u) << int(op);
    EXPECT_EQ(validate(qp, w), gv::Status::kInvalidArgument) << int(op);
    // gather list: 63 - head SGEs fit, one more does not
    std::vector<Sge> sges(64 - head, Sge{0x1000, 8, 1});
    w.flags = 0;
    w.sg_list = sges.data();
    w.num_sge = 63 - head;
    EXPECT_EQ(wqe_ds(w), 63u) << int(op);
    EXPECT_EQ(validate(qp, w), gv::Status::kOk) << int(op);
    w.num_sge = 64 - head;
    EXPECT_EQ(wqe_ds(w), 64u) << int(op);
    EXPECT_EQ(validate(qp, w), gv::Status::kInvalidArgument) << int(op);
  }
}

// ---- Zero-length payloads, pinned to rdma-core ----------------------------------------------
// rdma-core's _mlx5_post_send() emits no data segment for a zero-length SGE (the mlx5 data
// segment has no way to say "0 bytes": byte_count 0 is not an empty transfer), and no inline
// segment when the inline payload is empty.

TEST(EncodeWqe, ZeroLengthSgeIsSkippedLikeRdmaCore) {
  for (WrOpcode op : {WrOpcode::kRdmaWrite, WrOpcode::kRdmaRead, WrOpcode::kSend}) {
    Sge sges[3] = {{0x1000, 100, 1}, {0x2000, 0, 2}, {0x3000, 50, 3}};
    SendWr w;
    w.opcode = op;
    w.flags = kWrSignaled;
    w.sg_list = sges;
    w.num_sge = 3;
    w.remote_addr = 0x9000;
    w.rkey = 5;
    EXPECT_TRUE(same_wqe(w, WqeCase{8, 3, 0x77}, 0xee)) << "opcode " << int(op);
  }
}

TEST(EncodeWqe, ZeroByteInlineLikeRdmaCore) {
  std::uint8_t byte = 0;
  Sge empty{reinterpret_cast<std::uint64_t>(&byte), 0, 1};
  for (WrOpcode op : {WrOpcode::kRdmaWrite, WrOpcode::kSend, WrOpcode::kSendImm}) {
    SendWr w;
    w.opcode = op;
    w.flags = kWrSignaled | kWrInline;
    w.sg_list = &empty;
    w.num_sge = 1;
    w.remote_addr = 0x9000;
    w.rkey = 5;
    unsigned ref_ds = 0;
    EXPECT_TRUE(same_wqe(w, WqeCase{8, 5, 0x77}, 0xee, &ref_ds)) << "opcode " << int(op);
    EXPECT_EQ(ref_ds, header_octowords(op));
    w.num_sge = 0;  // no SGE at all
    EXPECT_TRUE(same_wqe(w, WqeCase{8, 5, 0x77}, 0xee)) << "opcode " << int(op) << ", no SGE";
  }
}

// ---- The comparisons can fail -----------------------------------------------------------------

/// Every byte of a WQE matters: corrupting any one of them (in our ring) is detected, and a
/// store outside the WQE is detected too.
TEST(EncodeWqe, ComparisonDetectsEveryCorruptedByte) {
  std::vector<std::uint8_t> payload(37, 0x3c);
  Sge sge{reinterpret_cast<std::uint64_t>(payload.data()), 37, 4};
  SendWr w;
  w.opcode = WrOpcode::kRdmaWriteImm;
  w.flags = kWrInline | kWrSignaled | kWrFence;
  w.sg_list = &sge;
  w.num_sge = 1;
  w.remote_addr = 0x123456789abcull;
  w.rkey = 0x42;
  w.imm = 0xdeadbeef;
  const WqeCase c{4, 4 * 9 + 3, 0x1234};  // 5 octowords, wrapping after the first BB
  std::vector<std::uint8_t> want(c.sq_bbs * 64, 0x99);
  ref_post_send(want.data(), c.sq_bbs, static_cast<unsigned>(c.start), c.qpn, to_ref(w));
  std::vector<std::uint8_t> ours(want.size(), 0x99);
  sq_write_wqe(ring_qp(ours.data(), c.sq_bbs, c.qpn), c.start, w);
  ASSERT_TRUE(same_bytes(ours.data(), want.data(), ours.size()));
  for (std::size_t i = 0; i < ours.size(); ++i) {
    ours[i] ^= 0x01;
    EXPECT_FALSE(same_bytes(ours.data(), want.data(), ours.size())) << "byte " << i;
    ours[i] ^= 0x01;
  }
  // And the segment helpers: a field filled differently is seen.
  mlx5_wqe_raddr_seg r;
  std::memset(&r, 0, sizeof r);
  r.raddr = 0x1122334455667788ull;  // missing htobe64
  r.rkey = htobe32(9);
  const m::RaddrSeg g = make_raddr_seg(0x1122334455667788ull, 9);
  EXPECT_FALSE(same_bytes(&g, &r, 16));
}

}  // namespace
