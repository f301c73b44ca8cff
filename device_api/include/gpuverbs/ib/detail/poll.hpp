// The definitions of ../poll.hpp.
// Included at the end of ../poll.hpp, which declares these with their contracts.
#pragma once
#include "../poll.hpp"

namespace gv::ib {

GV_HD GV_INLINE std::uint32_t cqe_tail(const CqHandle& cq, const mlx5::Cqe* cqe) {
  return cqe_owner_before_payload(
      reinterpret_cast<const std::uint32_t*>(reinterpret_cast<const std::byte*>(cqe) + mlx5::kCqeTailOffset),
      cq.executor);
}

GV_HD GV_INLINE bool cqe_ready(std::uint32_t tail, std::uint64_t ci, std::uint32_t log_cqes) {
  const std::uint8_t op_own = mlx5::cqe_tail_op_own(tail);
  return mlx5::cqe_opcode(op_own) != mlx5::kCqeInvalid &&
         mlx5::cqe_owner(op_own) == owner_bit(ci, log_cqes);
}

// CQEs are retired in CQ order (the released counter hands them on), so `completed` is where
// the oldest outstanding WQE starts and every outstanding one lies within one ring of it: the
// CQE's 16-bit index widens from there. (Not from `reserved`, which kShared tickets run ahead.)
GV_HD GV_INLINE void retire(const CqHandle& cq, const Completion& c) {
  if (c.is_send()) {
    if (cq.send_qp == nullptr || c.qpn != cq.send_qpn) return;
    WqCounters* sq = &cq.send_qp->sq;
    const std::uint64_t start = widen(sync::load_acquire(&sq->completed), c.wqe_counter, mlx5::kWqeIndexBits);
    const Octoword ctrl = load_octoword(cq.send_sq + sq_octoword_offset(start, 0, cq.send_sq_bbs));
    sync::fetch_max(&sq->completed, start + wqe_bbs(ctrl_ds_of(ctrl)));
  } else {
    if (cq.recv_qp == nullptr || c.qpn != cq.recv_qpn) return;
    WqCounters* rq = &cq.recv_qp->rq;
    const std::uint64_t idx = widen(sync::load_acquire(&rq->completed), c.wqe_counter, mlx5::kWqeIndexBits);
    sync::fetch_max(&rq->completed, idx + 1);
  }
}

template <Ownership O>
GV_HD GV_INLINE void cq_release(const CqHandle& cq, std::uint64_t next) {
  cqe_read_before_release(&cq.dbrec->set_ci.raw,
                                be32::from(static_cast<std::uint32_t>(next & mlx5::kCqCiMask)).raw,
                                cq.executor);
  if constexpr (O == Ownership::kShared) sync::store_release(&cq.state->released, next);
}

GV_HD GV_INLINE Status empty_or_overrun(const CqHandle& cq) {
  return (cq.error != nullptr && sync::load_host_flag(cq.error) != 0) ? Status::kCqOverrun
                                                                       : Status::kEmpty;
}

namespace detail {

/// The work-queue space a taken CQE frees: *done (a work queue's completed counter) moves to
/// `end`; nothing when done is null (a CQE of a queue this CQ does not retire).
struct Retired {
  std::uint64_t* done = nullptr;
  std::uint64_t end = 0;
};

/// The CQ's only poller takes the ready CQE `cqe` whose tail is `tail`: decoded into `out`,
/// with the space it frees in the work queues the CQ retires (sq, rq: null for none), widened
/// from their completed counters sq_done and rq_done (the oldest WQE not yet completed starts
/// there, and every outstanding one lies within one ring of it). One round of loads: the CQE's
/// body and, for a requester completion, the control segment of the WQE its wqe_counter names.
GV_HD GV_INLINE Retired take_ready_cqe(const CqHandle& cq, WqCounters* sq, WqCounters* rq, const mlx5::Cqe* cqe,
                                       std::uint32_t tail, std::uint64_t sq_done, std::uint64_t rq_done,
                                       Completion& out) {
  const std::uint32_t counter = mlx5::cqe_tail_counter(tail);
  const std::uint8_t op = mlx5::cqe_opcode(mlx5::cqe_tail_op_own(tail));
  const bool req = op == mlx5::kCqeReq || op == mlx5::kCqeReqErr;
  const std::uint64_t start = widen(sq_done, counter, mlx5::kWqeIndexBits);
  Octoword ctrl{};
  if (req && sq != nullptr) ctrl = load_octoword(cq.send_sq + sq_octoword_offset(start, 0, cq.send_sq_bbs));
  mlx5::Cqe copy;
  std::memcpy(&copy, cqe, sizeof(copy));
  out = decode_cqe(copy);
  Retired r;
  if (req) {
    if (sq != nullptr && out.qpn == cq.send_qpn) {
      r.done = &sq->completed;
      r.end = start + wqe_bbs(ctrl_ds_of(ctrl));
    }
  } else if (rq != nullptr && out.qpn == cq.recv_qpn) {
    r.done = &rq->completed;
    r.end = widen(rq_done, counter, mlx5::kWqeIndexBits) + 1;
  }
  return r;
}

/// try_poll_cq for the CQ's only poller (kExclusive), which is also the only one to advance
/// the completed counters of the work queues the CQ retires (CQEs arrive in work-queue order,
/// so a plain store keeps them monotonic). Three rounds of loads and one release: its cursor
/// and those counters; the CQE's last word (acquire); take_ready_cqe. Then cursor, counter and
/// consumer index are stored.
GV_HD GV_INLINE Status try_poll_cq_owned(const CqHandle& cq, Completion& out) {
  const std::uint64_t ci = sync::load_relaxed(&cq.state->claimed);
  WqCounters* const sq = cq.send_qp != nullptr ? &cq.send_qp->sq : nullptr;
  WqCounters* const rq = cq.recv_qp != nullptr ? &cq.recv_qp->rq : nullptr;
  const std::uint64_t sq_done = sq != nullptr ? sync::load_relaxed(&sq->completed) : 0;
  const std::uint64_t rq_done = rq != nullptr ? sync::load_relaxed(&rq->completed) : 0;
  const mlx5::Cqe* cqe = cq.ring + (ci & ((1u << cq.log_cqes) - 1));
  const std::uint32_t tail = cqe_tail(cq, cqe);
  if (!cqe_ready(tail, ci, cq.log_cqes)) return empty_or_overrun(cq);
  const Retired r = take_ready_cqe(cq, sq, rq, cqe, tail, sq_done, rq_done, out);
  sync::store_relaxed(&cq.state->claimed, ci + 1);
  cqe_read_before_release_and_retire(&cq.dbrec->set_ci.raw,
                                           be32::from(static_cast<std::uint32_t>((ci + 1) & mlx5::kCqCiMask)).raw,
                                           cq.executor, r.done, r.end);
  return out.status;
}

}  // namespace detail

template <Ownership O>
GV_HD Status try_poll_cq(const CqHandle& cq, Completion& out) {
  if (!handle_ok(cq)) return Status::kInvalidArgument;
  if constexpr (O == Ownership::kExclusive) {
    return detail::try_poll_cq_owned(cq, out);
  } else {
    const std::uint32_t mask = (1u << cq.log_cqes) - 1;
    std::uint64_t ci;
    mlx5::Cqe copy;
    for (;;) {
      ci = sync::load_acquire(&cq.state->claimed);
      const mlx5::Cqe* cqe = cq.ring + (ci & mask);
      if (!cqe_ready(cqe_tail(cq, cqe), ci, cq.log_cqes)) return empty_or_overrun(cq);
      std::uint64_t expected = ci;
      if (sync::compare_exchange(&cq.state->claimed, expected, ci + 1)) {
        std::memcpy(&copy, cqe, sizeof(copy));
        break;
      }
    }
    // Hand CQEs back in order, so the consumer index never runs ahead of an unread entry.
    const Status st = sync::bounded_wait(
        [&] { return sync::load_acquire(&cq.state->released) == ci; }, Budget{}, cq.abort);
    if (st != Status::kOk) return st;
    out = decode_cqe(copy);
    retire(cq, out);
    cq_release<O>(cq, ci + 1);
    return out.status;
  }
}

template <Ownership O>
GV_HD Status poll_cq(const CqHandle& cq, Completion& out, Budget budget) {
  Status st = Status::kEmpty;
  const Status w = sync::bounded_wait(
      [&] {
        st = try_poll_cq<O>(cq, out);
        return st != Status::kEmpty;
      },
      budget, cq.abort);
  return w == Status::kOk ? st : w;
}

}  // namespace gv::ib
