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

/// Append a CQE to CQ `cq_slot` of arena `a`, starting from what `h` keeps of the CQ (and
/// keeping it there). Returns false on overrun, after declaring it: the CQ's error flag is
/// raised, an asynchronous event is queued in the CQ's arena and every QP of that arena using
/// the CQ moves to the error state.
///
/// The consumer index is read (acquire) only when the CQE does not fit below the one `h` holds:
/// that read synchronised with the consumer's reads of every slot below it, so a slot within
/// one ring of it is free. A CQE then costs its claim and its stores (for a peer GPU's CQ, one
/// round trip where it was two).
GV_HD GV_INLINE bool push_cqe(Arena a, std::uint32_t cq_slot, m5::Cqe cqe, sync::Scope scope, CqHint& h) {
  CqCtx* cq = a.cqs() + cq_slot;
  if (h.known == 0) {  // fixed for the CQ's life
    h.ring_off = cq->ring_off;
    h.dbrec_off = cq->dbrec_off;
    h.log_cqes = cq->log_cqes;
    h.known = 1;
  }
  // Claiming a slot publishes nothing (the tail store below does): relaxed.
  const std::uint64_t p = sync::fetch_add_relaxed(&cq->produced, std::uint64_t{1});
  const std::uint64_t size = std::uint64_t{1} << h.log_cqes;
  if (p - h.ci >= size) {
    const auto* dbrec = a.at<m5::CqDbrec>(h.dbrec_off);
    const std::uint32_t ci24 = byteswap(sync::load_acquire(&dbrec->set_ci.raw)) & m5::kCqCiMask;
    h.ci = ib::widen_below(p, ci24, m5::kCqCiBits);
    if (p - h.ci >= size) {
      declare_cq_overrun(a, cq_slot, p);
      return false;
    }
  }
  m5::Cqe* slot = a.at<m5::Cqe>(h.ring_off) + (p & (size - 1));
  ib::store_cqe(slot, cqe, ib::owner_bit(p, h.log_cqes), scope);
  return true;
}

/// push_cqe() knowing nothing of the CQ yet (the consumer index read unless the CQE fits in the
/// CQ's first lap).
GV_HD GV_NOINLINE inline bool push_cqe(Arena a, std::uint32_t cq_slot, m5::Cqe cqe, sync::Scope scope) {
  CqHint h{};
  return push_cqe(a, cq_slot, cqe, scope, h);
}

}  // namespace gv::soft
