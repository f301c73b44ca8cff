// translate.hpp: rdma-core's queue views -> the device API's handles.
#include "translate.hpp"

#include <cstring>
#include <string>

#include <gpuverbs/endian.hpp>
#include <gpuverbs/ib/encode.hpp>
#include <gpuverbs/ib/ring.hpp>

#include "../provider.hpp"

namespace gv::detail::mlx5 {

namespace m5 = ib::mlx5;

const char* to_string(Placement p) { return p == Placement::kHost ? "host memory" : "GPU memory"; }

CqRings cq_rings_from(const mlx5dv_cq& cq) {
  CqRings r;
  r.cqn = cq.cqn;
  r.buf = cq.buf;
  r.cqe_cnt = cq.cqe_cnt;
  r.cqe_size = cq.cqe_size;
  r.dbrec = reinterpret_cast<std::uint32_t*>(cq.dbrec);
  r.placement = Placement::kHost;
  return r;
}

QpRings qp_rings_from(const mlx5dv_qp& qp, std::uint32_t qpn) {
  QpRings r;
  r.qpn = qpn;
  r.sq_buf = qp.sq.buf;
  r.sq_wqe_cnt = qp.sq.wqe_cnt;
  r.sq_stride = qp.sq.stride;
  r.rq_buf = qp.rq.buf;
  r.rq_wqe_cnt = qp.rq.wqe_cnt;
  r.rq_stride = qp.rq.stride;
  r.dbrec = reinterpret_cast<std::uint32_t*>(qp.dbrec);
  r.bf_reg = qp.bf.reg;
  r.bf_size = qp.bf.size;
  r.placement = Placement::kHost;
  return r;
}

namespace {
[[noreturn]] void refuse(const std::string& what, std::uint32_t n, const std::string& why) {
  throw Error("mlx5: " + what + " " + std::to_string(n) + " cannot be used: " + why);
}
}  // namespace

void check_cq_rings(const CqRings& r) {
  const std::string cq = "CQ " + std::to_string(r.cqn);
  if (r.buf == nullptr || r.dbrec == nullptr) refuse(cq, r.cqn, "its ring or doorbell record is missing");
  if (r.cqe_size != m5::kCqeSize)
    refuse(cq + " CQE size", r.cqe_size,
           "the device API reads 64-byte CQEs (unset MLX5_CQE_SIZE or set it to 64)");
  if (!ib::is_pow2(r.cqe_cnt) || r.cqe_cnt > (1u << m5::kCqCiBits))
    refuse(cq + " CQE count", r.cqe_cnt, "the device API needs a power of two up to 2^24");
}

void check_qp_rings(const QpRings& r) {
  const std::string qp = "QP " + hex(r.qpn);
  if (r.sq_buf == nullptr || r.dbrec == nullptr) refuse(qp, r.qpn, "its send ring or doorbell record is missing");
  if (r.bf_reg == nullptr) refuse(qp, r.qpn, "it has no doorbell register (UAR)");
  if (r.sq_stride != m5::kSendWqeBB)
    refuse(qp + " send stride", r.sq_stride, "the device API writes 64-byte send WQEBBs");
  if (!ib::is_pow2(r.sq_wqe_cnt) || r.sq_wqe_cnt > (1u << m5::kWqeIndexBits))
    refuse(qp + " send WQEBB count", r.sq_wqe_cnt, "the device API needs a power of two up to 65536");
  if (r.rq_wqe_cnt != 0) {
    if (r.rq_buf == nullptr) refuse(qp, r.qpn, "its receive ring is missing");
    if (!ib::is_pow2(r.rq_wqe_cnt) || r.rq_wqe_cnt > (1u << m5::kWqeIndexBits))
      refuse(qp + " receive WQE count", r.rq_wqe_cnt, "the device API needs a power of two up to 65536");
    if (!ib::is_pow2(r.rq_stride) || r.rq_stride < sizeof(m5::DataSeg))
      refuse(qp + " receive stride", r.rq_stride, "the device API needs a power of two of at least 16 bytes");
  }
}

ib::QpHandle qp_handle(const QpRings& r, const QpReach& at, const QpCaps& caps) {
  check_qp_rings(r);
  ib::QpHandle h;
  h.qpn = r.qpn;
  h.sq = static_cast<std::byte*>(at.sq);
  h.rq = static_cast<std::byte*>(at.rq);
  h.dbrec = static_cast<m5::QpDbrec*>(at.dbrec);
  h.doorbell = at.doorbell;
  h.state = at.state;
  h.abort = at.abort;
  h.sq_bbs = r.sq_wqe_cnt;
  h.rq_wqes = r.rq_wqe_cnt;
  h.rq_stride_shift = r.rq_wqe_cnt != 0 ? ib::log2_pow2(r.rq_stride) : 0;
  h.max_recv_sge = r.rq_wqe_cnt != 0 ? r.rq_stride / static_cast<std::uint32_t>(sizeof(m5::DataSeg)) : 0;
  h.max_send_sge = caps.max_send_sge;
  h.max_inline = caps.max_inline;
  h.executor = sync::Scope::kSystem;
  h.rq_executor = sync::Scope::kSystem;
  h.record_polled = 0;
  return h;
}

ib::CqHandle cq_handle(const CqRings& r, const CqReach& at) {
  check_cq_rings(r);
  ib::CqHandle h;
  h.cqn = r.cqn;
  h.ring = static_cast<m5::Cqe*>(at.buf);
  h.dbrec = static_cast<m5::CqDbrec*>(at.dbrec);
  h.state = at.state;
  h.abort = at.abort;
  h.error = at.error;
  h.log_cqes = ib::log2_pow2(r.cqe_cnt);
  h.executor = sync::Scope::kSystem;
  return h;
}

DoorbellWord decode_doorbell(std::uint64_t value) {
  // The word's bytes are the control segment's first 8 (opmod_idx_opcode, qpn_ds), big-endian.
  be32 w[2];
  std::memcpy(w, &value, sizeof(w));
  DoorbellWord d;
  d.wqe_index = m5::ctrl_wqe_index(w[0].get());
  d.qpn = m5::ctrl_qpn(w[1].get());
  d.bbs = ib::wqe_bbs(m5::ctrl_ds(w[1].get()));
  return d;
}

bool proxy_should_ring(std::uint64_t doorbell_value, std::uint16_t record, std::uint16_t last_rung) {
  if (record == last_rung) return false;
  const DoorbellWord d = decode_doorbell(doorbell_value);
  return d.bbs != 0 && static_cast<std::uint16_t>(d.wqe_index + d.bbs) == record;
}

}  // namespace gv::detail::mlx5
