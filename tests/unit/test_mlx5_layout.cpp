// ib/mlx5_format.hpp against rdma-core's <infiniband/mlx5dv.h>: every struct has the same size
// and alignment, every field the same offset and size, every constant the same value.
#include <gtest/gtest.h>
#include <infiniband/mlx5dv.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

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
