// The software HCA's completion queues: a CQE appended to a CQ of an arena, and the overrun
// declared when it finds no room.
#pragma once
#include <cstdint>

#include <gpuverbs/ib/cqe.hpp>
#include <gpuverbs/ib/ring.hpp>
#include <gpuverbs/sync.hpp>

#include "arena.hpp"

namespace gv::soft {

namespace m5 = gv::ib::mlx5;

/// Declare CQ `cq_slot` of arena `a` overrun by the CQE of producer count p (once): its error
/// flag, an asynchronous event, and every QP of the arena using it in error.
GV_HD GV_NOINLINE inline void declare_cq_overrun(Arena a, std::uint32_t cq_slot, std::uint64_t p) {
  CqCtx* cq = a.cqs() + cq_slot;
  std::uint32_t expected = 0;
  if (!sync::compare_exchange(&cq->error, expected, std::uint32_t{1})) return;
  raise_async(a, AsyncEventType::kCqOverrun, cq->cqn, p);
  for (std::uint32_t i = 0; i < kMaxQps; ++i) {
    QpCtx& q = a.qps()[i];
    if (sync::load_acquire(&q.qpn) != 0 && (q.send_cq == cq_slot || q.recv_cq == cq_slot))
      set_qp_error(q);
  }
}

/// Append a CQE to CQ `cq_slot` of arena `a`. Returns false on overrun, after declaring it:
/// the CQ's error flag is raised, an asynchronous event is queued in the CQ's arena and every
/// QP of that arena using the CQ moves to the error state.
GV_HD GV_NOINLINE inline bool push_cqe(Arena a, std::uint32_t cq_slot, m5::Cqe cqe, sync::Scope scope) {
  CqCtx* cq = a.cqs() + cq_slot;
  // Claiming a slot publishes nothing (the tail store below does): relaxed.
  const std::uint64_t p = sync::fetch_add_relaxed(&cq->produced, std::uint64_t{1});
  const auto* dbrec = a.at<m5::CqDbrec>(cq->dbrec_off);
  const std::uint32_t ci24 = byteswap(sync::load_acquire(&dbrec->set_ci.raw)) & m5::kCqCiMask;
  const std::uint64_t ci = ib::widen_below(p, ci24, m5::kCqCiBits);
  if (p - ci >= (std::uint64_t{1} << cq->log_cqes)) {
    declare_cq_overrun(a, cq_slot, p);
    return false;
  }
  m5::Cqe* slot = a.at<m5::Cqe>(cq->ring_off) + (p & ((std::uint64_t{1} << cq->log_cqes) - 1));
  ib::store_cqe(slot, cqe, ib::owner_bit(p, cq->log_cqes), scope);
  return true;
}

}  // namespace gv::soft
