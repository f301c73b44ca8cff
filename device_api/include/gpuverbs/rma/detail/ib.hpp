// The ib transport: rma operations as verbs work requests on a peer's lanes (queue pairs).
//
// Every WQE is signaled, so a lane's CQ says exactly which WQEs are done. Posters reserve
// send-queue space with the shared (ticket) path of device_api/ib; while the ring is full they
// drain the CQ themselves, so no progress thread is needed. A ticket given up (no room for the
// endpoint's budget, an abort, a lane error) breaks the lane's queue unless it was the last one
// taken: the operations queued behind it return kQueueBroken, as does every later one on the
// lane (World::describe says where it broke). Draining is a try-lock: one thread at a
// time polls, records the first error with the SQ position it hit, and only then advances
// LaneState::done, so a waiter that sees its WQE below `done` also sees whether it failed.
// A block's operations to one peer all use one lane, whose QP executes them in order: that
// orders a put before its signal, and makes fence free.
#pragma once
#include <cstdint>

#include "../../ib/poll.hpp"
#include "../../ib/post.hpp"
#include "../../sync.hpp"
#include "../endpoint.hpp"

namespace gv::rma::detail {

using ib::Ownership;

GV_HD GV_INLINE const IbLane& lane_for(const Peer& peer, std::uint32_t hint) {
  return peer.ib[hint & (peer.lanes - 1)];
}

/// Drain the lane's CQ if no other thread is draining it. Returns the lane's error status
/// (kOk while healthy).
GV_HD inline Status ib_progress(const IbLane& L) {
  LaneState* ls = L.state;
  std::uint32_t idle = 0;
  if (sync::load_relaxed(&ls->polling) == 0 && sync::compare_exchange(&ls->polling, idle, 1u)) {
    ib::WqCounters* sq = &L.qp.state->sq;
    for (int i = 0; i < 64; ++i) {
      ib::Completion c;
      // The failed WQE starts at its wqe_counter widened from the completed counter before the
      // poll (the oldest WQE still outstanding, within one ring of every other), as the poll does.
      const std::uint64_t oldest = sync::load_relaxed(&sq->completed);
      const Status st = ib::try_poll_cq<Ownership::kExclusive>(L.cq, c);
      if (st == Status::kEmpty) break;
      if (st != Status::kOk && sync::load_relaxed(&ls->first_bad) == 0) {
        const std::uint64_t pos =
            st == Status::kCompletionError ? ib::widen(oldest, c.wqe_counter, ib::mlx5::kWqeIndexBits) : 0;
        ls->syndrome = c.syndrome;
        ls->status = static_cast<std::uint32_t>(st);
        sync::store_release(&ls->first_bad, pos + 1);
      }
      if (st == Status::kCqOverrun) break;
    }
    sync::store_release(&ls->done, sync::load_relaxed(&sq->completed));
    sync::store_release(&ls->polling, 0u);
  }
  return sync::load_acquire(&ls->first_bad) != 0 ? static_cast<Status>(ls->status) : Status::kOk;
}

/// Status of the WQEs in [start, end) once `done` covers them: kOk unless the lane failed at
/// or before them.
GV_HD GV_INLINE Status ib_outcome(const IbLane& L, std::uint64_t end) {
  const std::uint64_t bad = sync::load_acquire(&L.state->first_bad);
  return (bad != 0 && bad - 1 < end) ? static_cast<Status>(L.state->status) : Status::kOk;
}

/// Wait (bounded) until every WQE of the lane below `end` has completed.
GV_HD inline Status ib_wait(const Endpoint& ep, const IbLane& L, std::uint64_t end) {
  const Status w = sync::bounded_wait(
      [&] {
        if (sync::load_acquire(&L.state->done) >= end) return true;
        (void)ib_progress(L);  // its error shows in ib_outcome below
        return sync::load_acquire(&L.state->done) >= end;
      },
      ep.budget, ep.abort);
  return w == Status::kOk ? ib_outcome(L, end) : w;
}

/// A WQE posted: its first WQEBB and the position after it.
struct Posted {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
};

/// Post `wr` on lane L, draining the CQ while the ring is full (bounded by the endpoint's
/// budget). `result`: the WR's SGE is pointed at the lane's result slot for the WQE's position
/// (atomics and `g`), otherwise the WR's own SGE list is used.
GV_HD inline Status ib_post(const Endpoint& ep, const IbLane& L, ib::SendWr wr, bool result, Posted& out) {
  const ib::QpHandle& qp = L.qp;
  if (const Status v = ib::validate(qp, wr); v != Status::kOk) return v;
  if (const Status e = ib_outcome(L, ~std::uint64_t{0}); e != Status::kOk) return e;
  const std::uint32_t bbs = ib::wqe_bbs(ib::wqe_ds(wr));
  std::uint64_t start = 0;
  // While the ring is full the poster drains the CQ itself; a lane error ends the wait.
  if (const Status st = ib::wq_reserve<Ownership::kShared>(&qp.state->sq, qp.sq_bbs, bbs, start, ep.budget, ep.abort,
                                                          [&] { return ib_progress(L); });
      st != Status::kOk)
    return st;
  ib::Sge slot;
  if (result) {
    slot = ib::Sge{reinterpret_cast<std::uint64_t>(L.results + ib::ring_slot(start, qp.sq_bbs)), wr.sg_list[0].length, L.results_lkey};
    wr.sg_list = &slot;
    wr.num_sge = 1;
  }
  const std::uint64_t db = ib::doorbell_value(ib::sq_write_wqe(qp, start, wr));
  // A reservation must be published: the wait for our turn has its own bound (see post.hpp).
  if (const Status t = ib::wq_wait_turn<Ownership::kShared>(&qp.state->sq, start, qp.abort); t != Status::kOk) return t;
  ib::sq_ring_doorbell(qp, start + bbs, db);
  ib::wq_pass_turn<Ownership::kShared>(&qp.state->sq, start + bbs);
  out = Posted{start, start + bbs};
  return Status::kOk;
}

/// The result slot of a posted WQE (valid once it completed).
GV_HD GV_INLINE std::uint64_t ib_result(const IbLane& L, const Posted& p) {
  return sync::load_acquire(L.results + ib::ring_slot(p.start, L.qp.sq_bbs));
}

GV_HD GV_INLINE ib::SendWr make_write(std::uint64_t raddr, std::uint32_t rkey, const ib::Sge* sge, bool inl) {
  ib::SendWr wr;
  wr.opcode = ib::WrOpcode::kRdmaWrite;
  wr.flags = ib::kWrSignaled | (inl ? ib::kWrInline : 0u);
  wr.sg_list = sge;
  wr.num_sge = 1;
  wr.remote_addr = raddr;
  wr.rkey = rkey;
  return wr;
}

/// Every WQE posted on every lane of `peer` so far has completed.
GV_HD inline Status ib_quiet_peer(const Endpoint& ep, const Peer& peer) {
  for (std::uint32_t l = 0; l < peer.lanes; ++l) {
    const IbLane& L = peer.ib[l];
    const Status st = ib_wait(ep, L, sync::load_acquire(&L.qp.state->sq.published));
    if (st != Status::kOk) return st;
  }
  return Status::kOk;
}

}  // namespace gv::rma::detail
