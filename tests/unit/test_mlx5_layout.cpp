// ib/mlx5_format.hpp against rdma-core's <infiniband/mlx5dv.h>: every struct has the same size
// and alignment, every field the same offset and size, every constant the same value; the
// field accessors read what mlx5dv_set_ctrl_seg writes, and the CQE builders and decoder
// (ib/cqe.hpp) agree with rdma-core's CQE structs and accessors.
#include <gtest/gtest.h>
#include <infiniband/mlx5dv.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>

#include <gpuverbs/ib/cqe.hpp>
#include <gpuverbs/ib/encode.hpp>
#include <gpuverbs/ib/mlx5_format.hpp>

namespace {
namespace m = gv::ib::mlx5;

// The CQ doorbell record indices live in rdma-core's provider-private header
// (providers/mlx5/mlx5.h: enum { MLX5_CQ_SET_CI = 0, MLX5_CQ_ARM_DB = 1 }), which is not
// installed and not ABI; they are the PRM's layout of the CQ doorbell record, copied here.
constexpr int kRdmaCoreCqSetCi = 0;
constexpr int kRdmaCoreCqArmDb = 1;

#define GV_EXPECT_STRUCT(ours, theirs)                                          \
  do {                                                                         \
    EXPECT_EQ(sizeof(ours), sizeof(theirs)) << #ours " vs " #theirs;           \
    EXPECT_EQ(alignof(ours), alignof(theirs)) << #ours " vs " #theirs;         \
  } while (0)

#define GV_EXPECT_FIELD(ours, of, theirs, tf)                                                \
  do {                                                                                      \
    EXPECT_EQ(offsetof(ours, of), offsetof(theirs, tf)) << #ours "::" #of " vs " #theirs "::" #tf; \
    EXPECT_EQ(sizeof(ours::of), sizeof(theirs::tf)) << #ours "::" #of " vs " #theirs "::" #tf;    \
  } while (0)

TEST(Mlx5Layout, CtrlSeg) {
  GV_EXPECT_STRUCT(m::CtrlSeg, mlx5_wqe_ctrl_seg);
  GV_EXPECT_FIELD(m::CtrlSeg, opmod_idx_opcode, mlx5_wqe_ctrl_seg, opmod_idx_opcode);
  GV_EXPECT_FIELD(m::CtrlSeg, qpn_ds, mlx5_wqe_ctrl_seg, qpn_ds);
  GV_EXPECT_FIELD(m::CtrlSeg, signature, mlx5_wqe_ctrl_seg, signature);
  GV_EXPECT_FIELD(m::CtrlSeg, rsvd, mlx5_wqe_ctrl_seg, dci_stream_channel_id);
  GV_EXPECT_FIELD(m::CtrlSeg, fm_ce_se, mlx5_wqe_ctrl_seg, fm_ce_se);
  GV_EXPECT_FIELD(m::CtrlSeg, imm, mlx5_wqe_ctrl_seg, imm);
}

TEST(Mlx5Layout, RaddrSeg) {
  GV_EXPECT_STRUCT(m::RaddrSeg, mlx5_wqe_raddr_seg);
  GV_EXPECT_FIELD(m::RaddrSeg, raddr, mlx5_wqe_raddr_seg, raddr);
  GV_EXPECT_FIELD(m::RaddrSeg, rkey, mlx5_wqe_raddr_seg, rkey);
  GV_EXPECT_FIELD(m::RaddrSeg, reserved, mlx5_wqe_raddr_seg, reserved);
}

TEST(Mlx5Layout, DataSeg) {
  GV_EXPECT_STRUCT(m::DataSeg, mlx5_wqe_data_seg);
  GV_EXPECT_FIELD(m::DataSeg, byte_count, mlx5_wqe_data_seg, byte_count);
  GV_EXPECT_FIELD(m::DataSeg, lkey, mlx5_wqe_data_seg, lkey);
  GV_EXPECT_FIELD(m::DataSeg, addr, mlx5_wqe_data_seg, addr);
}

TEST(Mlx5Layout, InlineSeg) {
  GV_EXPECT_STRUCT(m::InlineSeg, mlx5_wqe_inl_data_seg);
  GV_EXPECT_FIELD(m::InlineSeg, byte_count, mlx5_wqe_inl_data_seg, byte_count);
}

TEST(Mlx5Layout, AtomicSeg) {
  GV_EXPECT_STRUCT(m::AtomicSeg, mlx5_wqe_atomic_seg);
  GV_EXPECT_FIELD(m::AtomicSeg, swap_add, mlx5_wqe_atomic_seg, swap_add);
  GV_EXPECT_FIELD(m::AtomicSeg, compare, mlx5_wqe_atomic_seg, compare);
}

TEST(Mlx5Layout, Cqe64) {
  GV_EXPECT_STRUCT(m::Cqe, mlx5_cqe64);
  EXPECT_EQ(m::kCqeSize, sizeof(mlx5_cqe64));
  GV_EXPECT_FIELD(m::Cqe, srqn_uidx, mlx5_cqe64, srqn_uidx);
  GV_EXPECT_FIELD(m::Cqe, imm_inval_pkey, mlx5_cqe64, imm_inval_pkey);
  GV_EXPECT_FIELD(m::Cqe, app, mlx5_cqe64, app);
  GV_EXPECT_FIELD(m::Cqe, app_op, mlx5_cqe64, app_op);
  GV_EXPECT_FIELD(m::Cqe, app_info, mlx5_cqe64, app_info);
  GV_EXPECT_FIELD(m::Cqe, byte_cnt, mlx5_cqe64, byte_cnt);
  GV_EXPECT_FIELD(m::Cqe, timestamp, mlx5_cqe64, timestamp);
  GV_EXPECT_FIELD(m::Cqe, sop_drop_qpn, mlx5_cqe64, sop_drop_qpn);
  GV_EXPECT_FIELD(m::Cqe, wqe_counter, mlx5_cqe64, wqe_counter);
  GV_EXPECT_FIELD(m::Cqe, signature, mlx5_cqe64, signature);
  GV_EXPECT_FIELD(m::Cqe, op_own, mlx5_cqe64, op_own);
  // Our rsvd0 covers exactly rdma-core's leading union (offload fields we never read).
  EXPECT_EQ(sizeof(m::Cqe::rsvd0), offsetof(mlx5_cqe64, srqn_uidx));
}

TEST(Mlx5Layout, ErrCqe) {
  GV_EXPECT_STRUCT(m::ErrCqe, mlx5_err_cqe);
  GV_EXPECT_FIELD(m::ErrCqe, rsvd0, mlx5_err_cqe, rsvd0);
  GV_EXPECT_FIELD(m::ErrCqe, srqn, mlx5_err_cqe, srqn);
  GV_EXPECT_FIELD(m::ErrCqe, rsvd1, mlx5_err_cqe, rsvd1);
  GV_EXPECT_FIELD(m::ErrCqe, vendor_err_synd, mlx5_err_cqe, vendor_err_synd);
  GV_EXPECT_FIELD(m::ErrCqe, syndrome, mlx5_err_cqe, syndrome);
  GV_EXPECT_FIELD(m::ErrCqe, s_wqe_opcode_qpn, mlx5_err_cqe, s_wqe_opcode_qpn);
  GV_EXPECT_FIELD(m::ErrCqe, wqe_counter, mlx5_err_cqe, wqe_counter);
  GV_EXPECT_FIELD(m::ErrCqe, signature, mlx5_err_cqe, signature);
  GV_EXPECT_FIELD(m::ErrCqe, op_own, mlx5_err_cqe, op_own);
  // The error CQE overlays the normal one: the shared tail agrees between the two views.
  EXPECT_EQ(offsetof(mlx5_err_cqe, wqe_counter), offsetof(mlx5_cqe64, wqe_counter));
  EXPECT_EQ(offsetof(mlx5_err_cqe, op_own), offsetof(mlx5_cqe64, op_own));
}

TEST(Mlx5Layout, DoorbellRecords) {
  // rdma-core's QP dbrec is __be32 db[2] indexed by MLX5_RCV_DBR / MLX5_SND_DBR.
  EXPECT_EQ(sizeof(m::QpDbrec), 2 * sizeof(__be32));
  EXPECT_EQ(offsetof(m::QpDbrec, rcv), MLX5_RCV_DBR * sizeof(__be32));
  EXPECT_EQ(offsetof(m::QpDbrec, snd), MLX5_SND_DBR * sizeof(__be32));
  EXPECT_EQ(sizeof(m::QpDbrec::rcv), sizeof(__be32));
  EXPECT_EQ(sizeof(m::QpDbrec::snd), sizeof(__be32));
  // mlx5dv_cq::dbrec is __be32* indexed by MLX5_CQ_SET_CI / MLX5_CQ_ARM_DB.
  EXPECT_EQ(sizeof(m::CqDbrec), 2 * sizeof(__be32));
  EXPECT_EQ(offsetof(m::CqDbrec, set_ci), kRdmaCoreCqSetCi * sizeof(__be32));
  EXPECT_EQ(offsetof(m::CqDbrec, arm), kRdmaCoreCqArmDb * sizeof(__be32));
  EXPECT_EQ(sizeof(m::CqDbrec::set_ci), sizeof(__be32));
  EXPECT_EQ(sizeof(m::CqDbrec::arm), sizeof(__be32));
}

TEST(Mlx5Layout, WqeConstants) {
  EXPECT_EQ(m::kSendWqeBB, static_cast<std::uint32_t>(MLX5_SEND_WQE_BB));
  EXPECT_EQ(m::kSendWqeShift, static_cast<std::uint32_t>(MLX5_SEND_WQE_SHIFT));
  EXPECT_EQ(1u << m::kSendWqeShift, m::kSendWqeBB);
  EXPECT_EQ(m::kInlineSeg, static_cast<std::uint32_t>(MLX5_INLINE_SEG));
  EXPECT_EQ(m::kInvalidLkey, static_cast<std::uint32_t>(MLX5_INVALID_LKEY));
  EXPECT_EQ(m::kOctoword, sizeof(mlx5_wqe_data_seg));
  // ds is the low 6 bits of qpn_ds (rdma-core's wq_sig reads it with "& 0x3f").
  EXPECT_EQ(m::kMaxWqeDs, 0x3fu);
}

TEST(Mlx5Layout, Opcodes) {
  EXPECT_EQ(m::kOpNop, MLX5_OPCODE_NOP);
  EXPECT_EQ(m::kOpRdmaWrite, MLX5_OPCODE_RDMA_WRITE);
  EXPECT_EQ(m::kOpRdmaWriteImm, MLX5_OPCODE_RDMA_WRITE_IMM);
  EXPECT_EQ(m::kOpSend, MLX5_OPCODE_SEND);
  EXPECT_EQ(m::kOpSendImm, MLX5_OPCODE_SEND_IMM);
  EXPECT_EQ(m::kOpRdmaRead, MLX5_OPCODE_RDMA_READ);
  EXPECT_EQ(m::kOpAtomicCs, MLX5_OPCODE_ATOMIC_CS);
  EXPECT_EQ(m::kOpAtomicFa, MLX5_OPCODE_ATOMIC_FA);
}

TEST(Mlx5Layout, CtrlFlags) {
  EXPECT_EQ(m::kCtrlSolicited, MLX5_WQE_CTRL_SOLICITED);
  EXPECT_EQ(m::kCtrlCqUpdate, MLX5_WQE_CTRL_CQ_UPDATE);
  EXPECT_EQ(m::kCtrlFence, MLX5_WQE_CTRL_FENCE);
}

TEST(Mlx5Layout, CqeOpcodes) {
  EXPECT_EQ(m::kCqeReq, MLX5_CQE_REQ);
  EXPECT_EQ(m::kCqeRespWrImm, MLX5_CQE_RESP_WR_IMM);
  EXPECT_EQ(m::kCqeRespSend, MLX5_CQE_RESP_SEND);
  EXPECT_EQ(m::kCqeRespSendImm, MLX5_CQE_RESP_SEND_IMM);
  EXPECT_EQ(m::kCqeReqErr, MLX5_CQE_REQ_ERR);
  EXPECT_EQ(m::kCqeRespErr, MLX5_CQE_RESP_ERR);
  EXPECT_EQ(m::kCqeInvalid, MLX5_CQE_INVALID);
}

TEST(Mlx5Layout, Syndromes) {
  EXPECT_EQ(m::kSyndLocalLengthErr, MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR);
  EXPECT_EQ(m::kSyndLocalQpOpErr, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
  EXPECT_EQ(m::kSyndLocalProtErr, MLX5_CQE_SYNDROME_LOCAL_PROT_ERR);
  EXPECT_EQ(m::kSyndWrFlushErr, MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
  EXPECT_EQ(m::kSyndMwBindErr, MLX5_CQE_SYNDROME_MW_BIND_ERR);
  EXPECT_EQ(m::kSyndBadRespErr, MLX5_CQE_SYNDROME_BAD_RESP_ERR);
  EXPECT_EQ(m::kSyndLocalAccessErr, MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR);
  EXPECT_EQ(m::kSyndRemoteInvalReqErr, MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR);
  EXPECT_EQ(m::kSyndRemoteAccessErr, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
  EXPECT_EQ(m::kSyndRemoteOpErr, MLX5_CQE_SYNDROME_REMOTE_OP_ERR);
  EXPECT_EQ(m::kSyndTransportRetryExcErr, MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR);
  EXPECT_EQ(m::kSyndRnrRetryExcErr, MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR);
  EXPECT_EQ(m::kSyndRemoteAbortedErr, MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR);
}

// The op_own accessors agree with rdma-core's on every byte value.
TEST(Mlx5Layout, CqeOpOwnAccessors) {
  for (int v = 0; v < 256; ++v) {
    mlx5_cqe64 c;
    std::memset(&c, 0, sizeof(c));
    c.op_own = static_cast<std::uint8_t>(v);
    EXPECT_EQ(m::cqe_opcode(c.op_own), mlx5dv_get_cqe_opcode(&c)) << "op_own " << v;
    EXPECT_EQ(m::cqe_owner(c.op_own), mlx5dv_get_cqe_owner(&c)) << "op_own " << v;
    EXPECT_EQ(m::cqe_owner(c.op_own), c.op_own & MLX5_CQE_OWNER_MASK) << "op_own " << v;
  }
}

// The control segment's packed fields: what mlx5dv_set_ctrl_seg writes, our encoder writes, and
// our accessors and decode_ctrl() read back.
TEST(Mlx5Layout, CtrlFieldsRoundTripThroughRdmaCore) {
  std::mt19937_64 rng(0x5eed);
  for (int it = 0; it < 2000; ++it) {
    const auto pi = static_cast<std::uint16_t>(rng());
    const auto opcode = static_cast<std::uint8_t>(rng());
    const auto opmod = static_cast<std::uint8_t>(rng());
    const auto qpn = static_cast<std::uint32_t>(rng()) & m::kQpnMask;
    const auto fm_ce_se = static_cast<std::uint8_t>(rng());
    const auto ds = static_cast<std::uint8_t>(rng() & m::kCtrlDsMask);
    const auto imm = static_cast<std::uint32_t>(rng());
    mlx5_wqe_ctrl_seg seg;
    mlx5dv_set_ctrl_seg(&seg, pi, opcode, opmod, qpn, fm_ce_se, ds, 0, imm);
    EXPECT_EQ(m::ctrl_opmod_idx_opcode(opmod, pi, opcode), be32toh(seg.opmod_idx_opcode));
    EXPECT_EQ(m::ctrl_qpn_ds(qpn, ds), be32toh(seg.qpn_ds));
    EXPECT_EQ(m::ctrl_opcode(be32toh(seg.opmod_idx_opcode)), opcode);
    EXPECT_EQ(m::ctrl_wqe_index(be32toh(seg.opmod_idx_opcode)), pi);
    EXPECT_EQ(m::ctrl_qpn(be32toh(seg.qpn_ds)), qpn);
    EXPECT_EQ(m::ctrl_ds(be32toh(seg.qpn_ds)), ds);
    gv::ib::Octoword o;
    std::memcpy(&o, &seg, sizeof(o));
    const gv::ib::CtrlFields f = gv::ib::decode_ctrl(o);
    EXPECT_EQ(f.opcode, opcode);
    EXPECT_EQ(f.wqe_index, pi);
    EXPECT_EQ(f.qpn, qpn);
    EXPECT_EQ(f.ds, ds);
    EXPECT_EQ(f.fm_ce_se, fm_ce_se);
    EXPECT_EQ(f.imm.raw, imm);
    EXPECT_EQ(gv::ib::ctrl_ds_of(o), ds);
  }
  EXPECT_EQ(m::kWqeIndexMask, 0xffffu);  // the doorbell record's and wqe_counter's width
  EXPECT_EQ(m::kCqCiMask, 0xffffffu);    // 24-bit CQ consumer index
  EXPECT_EQ(m::dbrec_counter(0x12345), 0x2345u);
}

// Every CQE our builders make reads, through rdma-core's structs and accessors, as the fields
// it was built from; store_cqe sets exactly the owner bit; the tail word's accessors read the
// CQE's last 4 bytes.
TEST(Mlx5Layout, CqeBuildersMatchRdmaCore) {
  std::mt19937_64 rng(0xc0e);
  for (int it = 0; it < 2000; ++it) {
    const auto qpn = static_cast<std::uint32_t>(rng()) & m::kQpnMask;
    const auto counter = static_cast<std::uint16_t>(rng());
    const auto wqe_opcode = static_cast<std::uint8_t>(rng());
    const auto len = static_cast<std::uint32_t>(rng());
    const auto imm = gv::be32{static_cast<std::uint32_t>(rng())};
    const bool se = rng() & 1;
    const auto synd = static_cast<std::uint8_t>(rng()), vendor = static_cast<std::uint8_t>(rng());

    m::Cqe ours = gv::ib::make_req_cqe(qpn, wqe_opcode, counter, len);
    mlx5_cqe64 c;
    std::memcpy(&c, &ours, sizeof(c));
    EXPECT_EQ(mlx5dv_get_cqe_opcode(&c), MLX5_CQE_REQ);
    EXPECT_EQ(mlx5dv_get_cqe_owner(&c), 0);
    EXPECT_EQ(be32toh(c.sop_drop_qpn), (std::uint32_t{wqe_opcode} << 24) | qpn);
    EXPECT_EQ(be16toh(c.wqe_counter), counter);
    EXPECT_EQ(be32toh(c.byte_cnt), len);

    ours = gv::ib::make_resp_cqe(MLX5_CQE_RESP_SEND_IMM, qpn, counter, len, imm, se);
    std::memcpy(&c, &ours, sizeof(c));
    EXPECT_EQ(mlx5dv_get_cqe_opcode(&c), MLX5_CQE_RESP_SEND_IMM);
    EXPECT_EQ(mlx5dv_get_cqe_se(&c), se ? 1 : 0);
    EXPECT_EQ(be32toh(c.sop_drop_qpn) & 0xffffff, qpn);
    EXPECT_EQ(c.imm_inval_pkey, imm.raw);
    EXPECT_EQ(be16toh(c.wqe_counter), counter);
    EXPECT_EQ(be32toh(c.byte_cnt), len);

    const bool req = rng() & 1;
    ours = gv::ib::make_err_cqe(req, qpn, wqe_opcode, counter, synd, vendor);
    mlx5_err_cqe e;
    std::memcpy(&e, &ours, sizeof(e));
    std::memcpy(&c, &ours, sizeof(c));
    EXPECT_EQ(mlx5dv_get_cqe_opcode(&c), req ? MLX5_CQE_REQ_ERR : MLX5_CQE_RESP_ERR);
    EXPECT_EQ(e.syndrome, synd);
    EXPECT_EQ(e.vendor_err_synd, vendor);
    EXPECT_EQ(be32toh(e.s_wqe_opcode_qpn), (std::uint32_t{wqe_opcode} << 24) | qpn);
    EXPECT_EQ(be16toh(e.wqe_counter), counter);

    alignas(64) m::Cqe slot[1];
    for (const std::uint8_t owner : {0, 1}) {
      gv::ib::store_cqe(slot, ours, owner, gv::sync::Scope::kSystem);
      std::memcpy(&c, slot, sizeof(c));
      EXPECT_EQ(mlx5dv_get_cqe_owner(&c), owner);
      EXPECT_EQ(c.op_own & ~MLX5_CQE_OWNER_MASK, ours.op_own & ~MLX5_CQE_OWNER_MASK);
      EXPECT_EQ(std::memcmp(slot, &ours, offsetof(mlx5_cqe64, op_own)), 0);
      std::uint32_t tail;
      std::memcpy(&tail, reinterpret_cast<const std::uint8_t*>(slot) + m::kCqeTailOffset, 4);
      EXPECT_EQ(m::cqe_tail_counter(tail), be16toh(c.wqe_counter));
      EXPECT_EQ(m::cqe_tail_op_own(tail), c.op_own);
    }
  }
  const m::Cqe inv = gv::ib::make_invalid_cqe();
  mlx5_cqe64 c;
  std::memcpy(&c, &inv, sizeof(c));
  EXPECT_EQ(mlx5dv_get_cqe_opcode(&c), MLX5_CQE_INVALID);
  EXPECT_EQ(m::kCqeOwnerMask, MLX5_CQE_OWNER_MASK);
}

// decode_cqe reads CQEs made with rdma-core's structs (as a ConnectX writes them).
TEST(Mlx5Layout, DecodeReadsRdmaCoreCqes) {
  mlx5_cqe64 c;
  std::memset(&c, 0xa5, sizeof(c));  // fields the decoder must ignore hold garbage
  c.byte_cnt = htobe32(4096);
  c.sop_drop_qpn = htobe32((std::uint32_t{MLX5_OPCODE_RDMA_READ} << 24) | 0x00abcd);
  c.wqe_counter = htobe16(0xfffe);
  c.op_own = static_cast<std::uint8_t>(MLX5_CQE_REQ << 4);
  m::Cqe raw;
  std::memcpy(&raw, &c, sizeof(raw));
  gv::ib::Completion d = gv::ib::decode_cqe(raw);
  EXPECT_EQ(d.status, gv::Status::kOk);
  EXPECT_TRUE(d.is_send());
  EXPECT_EQ(d.wqe_opcode, MLX5_OPCODE_RDMA_READ);
  EXPECT_EQ(d.qpn, 0x00abcdu);
  EXPECT_EQ(d.wqe_counter, 0xfffe);
  EXPECT_EQ(d.byte_len, 4096u);

  c.op_own = static_cast<std::uint8_t>(MLX5_CQE_RESP_SEND_IMM << 4);
  c.imm_inval_pkey = htobe32(0xcafef00du);
  c.sop_drop_qpn = htobe32(0x00abcd);
  std::memcpy(&raw, &c, sizeof(raw));
  d = gv::ib::decode_cqe(raw);
  EXPECT_FALSE(d.is_send());
  EXPECT_EQ(d.imm, 0xcafef00du);  // host order
  EXPECT_EQ(d.qpn, 0x00abcdu);

  mlx5_err_cqe e;
  std::memset(&e, 0x5a, sizeof(e));
  e.syndrome = MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR;
  e.vendor_err_synd = 0x88;
  e.s_wqe_opcode_qpn = htobe32((std::uint32_t{MLX5_OPCODE_RDMA_WRITE} << 24) | 0x00abcd);
  e.wqe_counter = htobe16(5);
  e.op_own = static_cast<std::uint8_t>(MLX5_CQE_REQ_ERR << 4);
  std::memcpy(&raw, &e, sizeof(raw));
  d = gv::ib::decode_cqe(raw);
  EXPECT_EQ(d.status, gv::Status::kCompletionError);
  EXPECT_EQ(d.syndrome, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
  EXPECT_EQ(d.vendor_syndrome, 0x88);
  EXPECT_EQ(d.wqe_opcode, MLX5_OPCODE_RDMA_WRITE);
  EXPECT_EQ(d.qpn, 0x00abcdu);
  EXPECT_EQ(d.wqe_counter, 5);
}

// be16/be32/be64 put the same bytes in memory as htobe16/32/64.
TEST(Mlx5Layout, BigEndianMatchesHtobe) {
  const std::uint64_t v = 0x0123456789abcdefull;
  const auto b64 = gv::be64::from(v);
  const std::uint64_t r64 = htobe64(v);
  EXPECT_EQ(0, std::memcmp(&b64, &r64, 8));
  const auto b32 = gv::be32::from(static_cast<std::uint32_t>(v));
  const std::uint32_t r32 = htobe32(static_cast<std::uint32_t>(v));
  EXPECT_EQ(0, std::memcmp(&b32, &r32, 4));
  const auto b16 = gv::be16::from(static_cast<std::uint16_t>(v));
  const std::uint16_t r16 = htobe16(static_cast<std::uint16_t>(v));
  EXPECT_EQ(0, std::memcmp(&b16, &r16, 2));
  EXPECT_EQ(b64.get(), v);
  EXPECT_EQ(b32.get(), static_cast<std::uint32_t>(v));
  EXPECT_EQ(b16.get(), static_cast<std::uint16_t>(v));
}

}  // namespace
