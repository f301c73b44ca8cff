// Shared by the host tests of posting and polling (test_post_host, test_poll_host,
// test_post_poll_concurrency, test_qp_owner_host): the device API on host threads against
// hand-built rings: plain heap memory, QpHandle and CqHandle filled by hand, no provider. A
// model HCA reads what hardware reads (doorbell records, the doorbell word, WQE bytes, the CQ
// consumer index) and writes CQEs the way hardware does (payload, then the owner byte with
// release).
#pragma once
#include <gtest/gtest.h>
#include <infiniband/mlx5dv.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gpuverbs/ib.hpp>

#include "host_rings.hpp"

namespace gvt::post_poll {
using namespace gv::ib;
namespace m = gv::ib::mlx5;
using gv::Status;
using Clock = std::chrono::steady_clock;

inline std::uint64_t test_seed() { return gvt::test_seed(0x6776'6572'6273'0003ull); }
using gvt::seed_note;

template <class T>
inline T load_acq(const T& v) {
  return std::atomic_ref<T>(const_cast<T&>(v)).load(std::memory_order_acquire);
}
template <class T>
inline void store_rel(T& v, T x) {
  std::atomic_ref<T>(v).store(x, std::memory_order_release);
}

/// One QP and one CQ on heap memory, SQ and RQ poisoned. The CQ completes both queues.
struct HostQp : gvt::HostRings {
  std::uint32_t sq_bbs, rq_wqes, log_cqes;
  HostQp(std::uint32_t sq_bbs_, std::uint32_t rq_wqes_, std::uint32_t log_cqes_,
         std::uint32_t max_recv_sge = 4, std::uint8_t poison = 0xcd)
      : HostRings({sq_bbs_, rq_wqes_, log_cqes_, max_recv_sge,
                   static_cast<std::uint32_t>(round_up_pow2(max_recv_sge + 1)), 128, 0x00abcd, 3, poison}),
        sq_bbs(sq_bbs_), rq_wqes(rq_wqes_), log_cqes(log_cqes_) {}
};

struct CqeSpec {
  std::uint8_t opcode = MLX5_CQE_REQ;
  std::uint32_t qpn = 0;
  std::uint16_t wqe_counter = 0;
  std::uint8_t wqe_opcode = 0;
  std::uint32_t byte_cnt = 0;
  std::uint32_t imm_wire = 0;  ///< as the HCA writes it (network order)
  std::uint64_t timestamp = 0;
  std::uint8_t syndrome = 0, vendor_syndrome = 0;
};

/// CQE number p, as the HCA writes it (gv::ib::store_cqe: payload first, then the last 4
/// bytes with the owner bit in one release store). Built with the CQE builders, which
/// test_mlx5_layout checks against rdma-core's structs.
inline void write_cqe(HostQp& q, std::uint64_t p, const CqeSpec& s, bool owner_flip = false) {
  m::Cqe c;
  if (s.opcode == MLX5_CQE_REQ_ERR || s.opcode == MLX5_CQE_RESP_ERR) {
    c = gv::ib::make_err_cqe(s.opcode == MLX5_CQE_REQ_ERR, s.qpn, s.wqe_opcode, s.wqe_counter, s.syndrome,
                             s.vendor_syndrome);
  } else {
    c = s.opcode == MLX5_CQE_REQ
            ? gv::ib::make_req_cqe(s.qpn, s.wqe_opcode, s.wqe_counter, s.byte_cnt)
            : gv::ib::make_resp_cqe(s.opcode, s.qpn, s.wqe_counter, s.byte_cnt, gv::be32{s.imm_wire}, false);
    c.timestamp = gv::be64::from(s.timestamp);  // (an error CQE's syndrome lies there)
  }
  const auto owner = static_cast<std::uint8_t>(((p >> q.log_cqes) & 1) ^ (owner_flip ? 1 : 0));
  gv::ib::store_cqe(&q.cq[p & q.cq_mask()], c, owner, gv::sync::Scope::kSystem);
}

/// What the HCA does to a CQE slot once the consumer index has passed it: the bytes are no
/// longer the poller's. Poisoned so that a poller reading a released CQE sees garbage.
inline void poison_cqe(HostQp& q, std::uint64_t p) {
  auto* slot = reinterpret_cast<std::uint8_t*>(&q.cq[p & q.cq_mask()]);
  std::memset(slot, 0xee, 60);
  const std::uint32_t tail = 0xf0eeeeeeu | (std::uint32_t((p >> q.log_cqes) & 1) << 24);
  // bytes 60..63 little-endian: ee ee ee (0xf0 | owner): opcode INVALID, never "ready"
  store_rel(*reinterpret_cast<std::uint32_t*>(slot + 60), tail);
}

inline std::uint64_t first8(const void* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace gvt::post_poll
