// Pure functions between rdma-core's view of a queue and the device API's handles: what
// mlx5dv_init_obj reports becomes QpRings / CqRings, which are checked against what the device
// API assumes and turned into QpHandle / CqHandle. No device, no library calls: unit-tested
// (tests/unit/test_mlx5_translate.cpp) against rdma-core's own structs and inline helpers.
#pragma once
#include <cstdint>

#include <infiniband/mlx5dv.h>

#include <gpuverbs/ib/handles.hpp>

#include "queues.hpp"

namespace gv::detail::mlx5 {

CqRings cq_rings_from(const mlx5dv_cq& cq);
QpRings qp_rings_from(const mlx5dv_qp& qp, std::uint32_t qpn);

/// Throw gv::Error naming the field and what the device API needs: a power-of-two number of
/// 64-byte CQEs, and a record.
void check_cq_rings(const CqRings& r);
/// A power-of-two number of 64-byte send WQEBBs, a power-of-two receive ring of power-of-two
/// strides of at least one 16-byte scatter entry, a record and a doorbell register.
void check_qp_rings(const QpRings& r);

/// Where the handle's users reach a queue's memory (device addresses for kernels, host addresses
/// for host threads), and the counters they share. Filled by the provider.
struct QpReach {
  void* sq = nullptr;
  void* rq = nullptr;
  void* dbrec = nullptr;
  std::uint64_t* doorbell = nullptr;  ///< the doorbell register, or the proxy's word for it
  ib::QpCounters* state = nullptr;
  const std::uint32_t* abort = nullptr;
};
struct CqReach {
  void* buf = nullptr;
  void* dbrec = nullptr;
  ib::CqCounters* state = nullptr;
  const std::uint32_t* abort = nullptr;
  const std::uint32_t* error = nullptr;
};

/// A NIC executes the WQEs: system-scope releases, the record released before the doorbell.
/// max_recv_sge is what the receive stride holds (the terminator rule of post_recv needs the
/// ring's real stride); max_send_sge and max_inline what the QP was created with.
ib::QpHandle qp_handle(const QpRings& r, const QpReach& at, const QpCaps& caps);
/// The CQ part of the handle (verbs.cpp adds the QPs it retires).
ib::CqHandle cq_handle(const CqRings& r, const CqReach& at);

/// The first 8 bytes of a WQE's control segment as the doorbell register takes them, decoded:
/// the WQE's index (16 bits), and its size in 64-byte WQEBBs.
struct DoorbellWord {
  std::uint16_t wqe_index = 0;
  std::uint32_t qpn = 0;
  std::uint32_t bbs = 0;
};
DoorbellWord decode_doorbell(std::uint64_t value);
/// A proxy rings for the GPU when the doorbell word it reads names the WQE that ends where the
/// send record now stands (so record and word belong to the same post) and the record moved
/// since the last ring. `record` is the send counter of the record in host order (16 bits).
bool proxy_should_ring(std::uint64_t doorbell_value, std::uint16_t record, std::uint16_t last_rung);

}  // namespace gv::detail::mlx5
