// Hand-built queues on plain host memory for tests that play the HCA themselves: one QP (SQ +
// RQ) and one CQ completing both queues, wired into device handles. Also the tests' seed.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gpuverbs/ib.hpp>

namespace gvt {

/// The seed of a randomized test: GV_TEST_SEED if set (to replay a failure), else `fallback`.
inline std::uint64_t test_seed(std::uint64_t fallback) {
  if (const char* s = std::getenv("GV_TEST_SEED")) return std::strtoull(s, nullptr, 0);
  return fallback;
}
inline std::string seed_note(std::uint64_t seed) {
  std::ostringstream o;
  o << "seed " << seed << " (rerun with GV_TEST_SEED=" << seed << ")";
  return o.str();
}

struct RingShape {
  std::uint32_t sq_bbs, rq_wqes, log_cqes;
  std::uint32_t max_recv_sge = 4;
  std::uint32_t rq_octowords = 4;  ///< per receive WQE, a power of two >= max_recv_sge
  std::uint32_t max_inline = 128;
  std::uint32_t qpn = 0xabcd, cqn = 3;
  int poison = -1;  ///< byte to fill the SQ and RQ with, or -1 for zeros
};

struct HostRings {
  RingShape shape;
  std::vector<gv::ib::Octoword> sq, rq;
  std::vector<gv::ib::mlx5::Cqe> cq;
  std::unique_ptr<gv::ib::QpCounters> qs = std::make_unique<gv::ib::QpCounters>();
  std::unique_ptr<gv::ib::CqCounters> cs = std::make_unique<gv::ib::CqCounters>();
  gv::ib::mlx5::QpDbrec qp_dbrec{};
  gv::ib::mlx5::CqDbrec cq_dbrec{};
  std::uint64_t doorbell = 0;
  std::uint32_t abort = 0, cq_error = 0;
  gv::ib::QpHandle qp;
  gv::ib::CqHandle cqh;

  explicit HostRings(const RingShape& s)
      : shape(s), sq(std::size_t{s.sq_bbs} * 4), rq(std::size_t{s.rq_wqes} * s.rq_octowords),
        cq(std::size_t{1} << s.log_cqes) {
    std::memset(sq.data(), s.poison < 0 ? 0 : s.poison, sq.size() * 16);
    std::memset(rq.data(), s.poison < 0 ? 0 : s.poison, rq.size() * 16);
    for (auto& c : cq) c = gv::ib::make_invalid_cqe();
    qp.qpn = s.qpn;
    qp.sq = reinterpret_cast<std::byte*>(sq.data());
    qp.rq = reinterpret_cast<std::byte*>(rq.data());
    qp.dbrec = &qp_dbrec;
    qp.doorbell = &doorbell;
    qp.state = qs.get();
    qp.abort = &abort;
    qp.sq_bbs = s.sq_bbs;
    qp.rq_wqes = s.rq_wqes;
    qp.rq_stride_shift = gv::ib::log2_pow2(std::uint64_t{s.rq_octowords} * 16);
    qp.max_recv_sge = s.max_recv_sge;
    qp.max_send_sge = 4;
    qp.max_inline = s.max_inline;
    cqh.cqn = s.cqn;
    cqh.ring = cq.data();
    cqh.dbrec = &cq_dbrec;
    cqh.state = cs.get();
    cqh.abort = &abort;
    cqh.error = &cq_error;
    cqh.send_qp = qs.get();
    cqh.send_sq = qp.sq;
    cqh.recv_qp = qs.get();
    cqh.log_cqes = s.log_cqes;
    cqh.send_sq_bbs = s.sq_bbs;
    cqh.send_qpn = qp.qpn;
    cqh.recv_qpn = qp.qpn;
  }
  std::uint32_t cq_mask() const { return (1u << shape.log_cqes) - 1; }
  const std::uint8_t* sq_bytes(std::uint64_t start, std::uint32_t k = 0) const {
    return reinterpret_cast<const std::uint8_t*>(qp.sq) + gv::ib::sq_octoword_offset(start, k, shape.sq_bbs);
  }
};

}  // namespace gvt
