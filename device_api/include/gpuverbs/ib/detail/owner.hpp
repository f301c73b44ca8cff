// The definitions of ../owner.hpp.
// Included at the end of ../owner.hpp, which declares these with their contracts.
#pragma once
#include "../owner.hpp"

namespace gv::ib {

GV_HD GV_INLINE Status QpOwner::take(const QpHandle& qp, const CqHandle& cq) {
  if (!handle_ok(qp) || !handle_ok(cq) || cq.send_qp != qp.state) return Status::kInvalidArgument;
  qp_ = qp;
  cq_ = cq;
  sq_next_ = sync::load_relaxed(&qp.state->sq.reserved);
  sq_done_ = sync::load_acquire(&qp.state->sq.completed);
  rq_next_ = sync::load_relaxed(&qp.state->rq.reserved);
  rq_done_ = sync::load_acquire(&qp.state->rq.completed);
  ci_ = sync::load_relaxed(&cq.state->claimed);
  rq_here_ = cq.recv_qp == qp.state;
  return Status::kOk;
}

GV_HD GV_INLINE void QpOwner::give_back() const {
  WqCounters* const sq = &qp_.state->sq;
  WqCounters* const rq = &qp_.state->rq;
  // The owner's private copies first (plain fields, as post_send<kExclusive> keeps them).
  sq->owner_next = sq_next_;
  sq->owner_free_to = sq_done_ + qp_.sq_bbs;
  rq->owner_next = rq_next_;
  rq->owner_free_to = rq_done_ + qp_.rq_wqes;
  sync::store_relaxed(&sq->reserved, sq_next_);
  sync::store_relaxed(&sq->published, sq_next_);
  sync::store_relaxed(&rq->reserved, rq_next_);
  sync::store_relaxed(&rq->published, rq_next_);
  if (rq_here_) sync::store_relaxed(&rq->completed, rq_done_);
  sync::store_relaxed(&cq_.state->claimed, ci_);
  sync::store_relaxed(&cq_.state->released, ci_);
  // Last, with release: a reader that sees the send queue's progress sees the rest.
  sync::store_release(&sq->completed, sq_done_);
}

GV_HD GV_INLINE Status QpOwner::post_send(const SendWr& wr) {
  const QpHandle& qp = qp_;
  if (const Status v = validate(qp, wr); v != Status::kOk) return v;
  const std::uint32_t nbb = wqe_bbs(wqe_ds(wr));
  if (nbb > qp.sq_bbs) return Status::kInvalidArgument;
  if (sq_next_ + nbb - sq_done_ > qp.sq_bbs) return Status::kQueueFull;
  const std::uint64_t db = doorbell_value(sq_write_wqe(qp, sq_next_, wr));
  sq_next_ += nbb;
  sq_ring_doorbell(qp, sq_next_, db);
  return Status::kOk;
}

GV_HD GV_INLINE Status QpOwner::post_recv(const Sge* sgl, std::uint32_t n) {
  const QpHandle& qp = qp_;
  if (n > qp.max_recv_sge) return Status::kInvalidArgument;
  if (rq_next_ + 1 - rq_done_ > qp.rq_wqes) {
    if (!rq_here_) rq_done_ = sync::load_acquire(&qp.state->rq.completed);  // another CQ's poller frees it
    if (rq_next_ + 1 - rq_done_ > qp.rq_wqes) return Status::kQueueFull;
  }
  rq_write_wqe(qp, rq_next_, sgl, n);
  rq_next_ += 1;
  // When another CQ's pollers free this queue, its depth (reserved - completed) is read from
  // memory: the reserved count is kept there, before the record that lets the executor take the WQE.
  if (!rq_here_) sync::store_relaxed(&qp.state->rq.reserved, rq_next_);
  rq_ring_record(qp, rq_next_);
  return Status::kOk;
}

GV_HD GV_INLINE Status QpOwner::try_poll(Completion& out) {
  const CqHandle& cq = cq_;
  const QpHandle& qp = qp_;
  const mlx5::Cqe* cqe = cq.ring + (ci_ & ((1u << cq.log_cqes) - 1));
  // The guess: the control segment of the oldest WQE not yet completed, which this thread
  // wrote. Loaded before the CQE's tail, so that the two loads are in flight together.
  const bool outstanding = sq_next_ != sq_done_;
  const Octoword guess = outstanding ? load_octoword(qp.sq + sq_octoword_offset(sq_done_, 0, qp.sq_bbs)) : Octoword{};
  const std::uint32_t tail = cqe_tail(cq, cqe);
  if (!cqe_ready(tail, ci_, cq.log_cqes)) return empty_or_overrun(cq);
  const std::uint32_t counter = mlx5::cqe_tail_counter(tail);
  const CtrlFields g = decode_ctrl(guess);
  const bool reports_len = g.opcode == mlx5::kOpRdmaRead || g.opcode == mlx5::kOpAtomicCs ||
                           g.opcode == mlx5::kOpAtomicFa;
  const bool named = mlx5::cqe_opcode(mlx5::cqe_tail_op_own(tail)) == mlx5::kCqeReq && outstanding &&
                     g.wqe_index == counter && !reports_len;
  if (named) {
    // The CQE names the guessed WQE (its index, at the completed bound: every outstanding WQE
    // lies within one ring of it), a success of an opcode that reports no length: everything
    // the completion says is known without reading its body. This CQ completes only this QP's
    // send queue, so the CQE's qpn is ours. Only the CQE's last word was read, and the space
    // it frees is this thread's to know: the consumer index needs no fence.
    out = Completion{};
    out.status = Status::kOk;
    out.cqe_opcode = mlx5::kCqeReq;
    out.wqe_opcode = g.opcode;
    out.qpn = qp.qpn;
    out.wqe_counter = static_cast<std::uint16_t>(counter);
    sq_done_ += wqe_bbs(g.ds);
    ++ci_;
    cqe_tail_read_before_release(&cq.dbrec->set_ci.raw,
                                       be32::from(static_cast<std::uint32_t>(ci_ & mlx5::kCqCiMask)).raw, cq.executor);
    return Status::kOk;
  }
  WqCounters* const rq = cq.recv_qp != nullptr ? &cq.recv_qp->rq : nullptr;
  const std::uint64_t rq_done = rq == nullptr ? 0 : rq_here_ ? rq_done_ : sync::load_relaxed(&rq->completed);
  const detail::Retired r = detail::take_ready_cqe(cq, &qp.state->sq, rq, cqe, tail, sq_done_, rq_done, out);
  std::uint64_t* other_done = nullptr;  // a work queue of another QP this CQ retires
  if (r.done == &qp.state->sq.completed) sq_done_ = r.end;
  else if (rq_here_ && r.done != nullptr) rq_done_ = r.end;
  else other_done = r.done;
  ++ci_;
  cqe_read_before_release_and_retire(&cq.dbrec->set_ci.raw,
                                           be32::from(static_cast<std::uint32_t>(ci_ & mlx5::kCqCiMask)).raw,
                                           cq.executor, other_done, r.end);
  return out.status;
}

GV_HD GV_INLINE Status QpOwner::poll(Completion& out, Budget budget) {
  Status st = Status::kEmpty;
  const Status w = sync::bounded_wait(
      [&] {
        st = try_poll(out);
        return st != Status::kEmpty;
      },
      budget, cq_.abort);
  return w == Status::kOk ? st : w;
}

}  // namespace gv::ib
