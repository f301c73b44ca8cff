// The definitions of ../post.hpp.
// Included at the end of ../post.hpp, which declares these with their contracts.
#pragma once
#include "../post.hpp"

namespace gv::ib {

namespace detail {

/// The progress callable of wq_reserve without one: nothing to drive while waiting.
struct NoProgress {
  GV_HD GV_INLINE constexpr Status operator()() const { return Status::kOk; }
};

/// Whether the ticket starting at `start` lies at or behind an abandoned one (WqCounters::broken).
GV_HD GV_INLINE bool behind_break(const WqCounters* wq, std::uint64_t start) {
  const std::uint64_t b = sync::load_relaxed(&wq->broken);
  return b != 0 && start >= ~b;
}

/// Record that the ticket at `start` will never be published; the earliest such ticket wins.
GV_HD GV_INLINE void mark_broken(WqCounters* wq, std::uint64_t start) { (void)sync::fetch_max(&wq->broken, ~start); }

/// Give up the ticket [start, start + n) before anything was written to its slots: handed back
/// when it is the last one taken (reserved moves back, no hole), else the queue breaks at it.
GV_HD GV_INLINE void abandon_ticket(WqCounters* wq, std::uint64_t start, std::uint32_t n) {
  std::uint64_t last = start + n;
  if (!sync::compare_exchange(&wq->reserved, last, start)) mark_broken(wq, start);
}

}  // namespace detail

template <Ownership O, class Progress>
GV_HD GV_INLINE Status wq_reserve(WqCounters* wq, std::uint32_t size, std::uint32_t n,
                                  std::uint64_t& start, Budget budget,
                                  const std::uint32_t* abort, Progress&& progress) {
  if (n == 0 || n > size) return Status::kInvalidArgument;
  Status driven = Status::kOk;  // the last progress() result that ended the wait, if one did
  if constexpr (O == Ownership::kExclusive) {
    const std::uint64_t r = wq->owner_next;
    if (r + n > wq->owner_free_to) {
      std::uint64_t done = 0;
      const Status st = sync::bounded_wait(
          [&] {
            if (r + n - (done = sync::load_acquire(&wq->completed)) <= size) return true;
            driven = progress();
            return driven != Status::kOk;
          },
          budget, abort);
      if (st != Status::kOk) return st == Status::kTimeout ? Status::kQueueFull : st;
      if (driven != Status::kOk) return driven;
      wq->owner_free_to = done + size;
    }
    wq->owner_next = r + n;
    sync::store_relaxed(&wq->reserved, r + n);
    start = r;
    return Status::kOk;
  } else {
    // The ticket: one atomic, never retried, so no poster waits on another's reservation. It
    // orders nothing (the space is acquired from `completed`, the turn from `published`).
    const std::uint64_t r = sync::fetch_add_relaxed(&wq->reserved, std::uint64_t{n});
    bool behind = false;
    const Status st = sync::bounded_wait(
        [&] {
          if (r + n - sync::load_acquire(&wq->completed) <= size) return true;
          if (detail::behind_break(wq, r)) return behind = true;
          driven = progress();
          return driven != Status::kOk;
        },
        budget, abort, sync::kHostSpinsOnPeers);
    if (behind) return Status::kQueueBroken;  // broken before us: nothing of ours to undo
    if (st == Status::kOk && driven == Status::kOk) {
      start = r;
      return Status::kOk;
    }
    detail::abandon_ticket(wq, r, n);
    if (st != Status::kOk) return st == Status::kTimeout ? Status::kQueueFull : st;
    return driven;
  }
}

template <Ownership O>
GV_HD GV_INLINE Status wq_reserve(WqCounters* wq, std::uint32_t size, std::uint32_t n,
                                  std::uint64_t& start, Budget budget,
                                  const std::uint32_t* abort) {
  return wq_reserve<O>(wq, size, n, start, budget, abort, detail::NoProgress{});
}

GV_HD GV_INLINE void wq_start_at(WqCounters* wq, std::uint64_t at) {
  wq->reserved = wq->published = wq->completed = wq->owner_next = wq->owner_free_to = at;
  wq->broken = 0;
}

GV_HD GV_INLINE void wq_reopen(WqCounters* wq) {
  sync::store_relaxed(&wq->reserved, sync::load_relaxed(&wq->published));
  sync::store_release(&wq->broken, std::uint64_t{0});
}

template <Ownership O>
GV_HD GV_INLINE Status wq_wait_turn(WqCounters* wq, std::uint64_t start, const std::uint32_t* abort) {
  if constexpr (O == Ownership::kExclusive) {
    return Status::kOk;
  } else {
    bool behind = false;
    const Status st = sync::bounded_wait(
        [&] {
          if (sync::load_acquire(&wq->published) == start) return true;
          return behind = detail::behind_break(wq, start);
        },
        Budget{}, abort, sync::kHostSpinsOnPeers);
    if (behind) return Status::kQueueBroken;
    if (st != Status::kOk) detail::mark_broken(wq, start);  // our slots will never be published
    return st;
  }
}

template <Ownership O>
GV_HD GV_INLINE void wq_pass_turn(WqCounters* wq, std::uint64_t end) {
  if constexpr (O == Ownership::kExclusive) {
    sync::store_relaxed(&wq->published, end);
  } else {
    sync::store_release(&wq->published, end);
  }
}

GV_HD GV_INLINE Status validate(const QpHandle& qp, const SendWr& wr) {
  if (!handle_ok(qp)) return Status::kInvalidArgument;
  const bool inl = (wr.flags & kWrInline) && carries_payload(wr.opcode);
  if (inl && payload_bytes(wr) > qp.max_inline) return Status::kInvalidArgument;
  if (!inl && wr.num_sge > qp.max_send_sge) return Status::kInvalidArgument;
  if (is_atomic(wr.opcode) && (wr.num_sge != 1 || wr.sg_list[0].length != 8))
    return Status::kInvalidArgument;
  if (wqe_ds(wr) > mlx5::kMaxWqeDs) return Status::kInvalidArgument;
  return Status::kOk;
}

GV_HD GV_INLINE Octoword sq_write_wqe(const QpHandle& qp, std::uint64_t start, const SendWr& wr) {
  const std::uint32_t ds = wqe_ds(wr);
  const auto idx = static_cast<std::uint16_t>(start);
  if (ds <= 4) {
    // One WQEBB (an inline payload of up to 44 bytes, one SGE, an atomic): every octoword is
    // encoded before the first is stored, so the loads it takes (the SG list, an inline
    // payload) are not ordered behind stores to the ring that might alias them. A case of its
    // own, with constant octoword indices: one loop taking a WQEBB at a time for every size made
    // the ping-pong 0.05-0.46 us slower (notes/verbs-gpu.md,
    // "2026-11-24: the responder kept across visits").
    Octoword o[4];
    for (std::uint32_t k = 0; k < 4; ++k)
      if (k < ds) o[k] = wqe_octoword(wr, k, idx, qp.qpn);
    for (std::uint32_t k = 0; k < 4; ++k)
      if (k < ds) store_octoword(qp.sq + sq_octoword_offset(start, k, qp.sq_bbs), o[k]);
    return o[0];
  }
  const Octoword ctrl = wqe_octoword(wr, 0, idx, qp.qpn);
  store_octoword(qp.sq + sq_octoword_offset(start, 0, qp.sq_bbs), ctrl);
  for (std::uint32_t k = 1; k < ds; ++k)
    store_octoword(qp.sq + sq_octoword_offset(start, k, qp.sq_bbs), wqe_octoword(wr, k, idx, qp.qpn));
  return ctrl;
}

GV_HD GV_INLINE void rq_write_wqe(const QpHandle& qp, std::uint64_t start, const Sge* sgl, std::uint32_t n) {
  std::byte* wqe = qp.rq + (std::uint64_t{ring_slot(start, qp.rq_wqes)} << qp.rq_stride_shift);
  const std::uint32_t segs = nonempty_sges(sgl, n);  // zero-length SGEs take no segment
  for (std::uint32_t i = 0; i < segs; ++i) {
    const Sge& s = nth_nonempty_sge(sgl, i);
    store_octoword(wqe + 16 * i, as_octoword(make_data_seg(s.length, s.lkey, s.addr)));
  }
  if (segs < qp.max_recv_sge) store_octoword(wqe + 16 * segs, as_octoword(make_recv_terminator()));
}

GV_HD GV_INLINE void rq_ring_record(const QpHandle& qp, std::uint64_t end) {
  wqe_visible_before_dbrec(&qp.dbrec->rcv.raw, be32::from(mlx5::dbrec_counter(end)).raw, qp.rq_executor);
}

GV_HD GV_INLINE std::uint64_t doorbell_value(const Octoword& ctrl) {
  return (std::uint64_t{ctrl.w[1]} << 32) | ctrl.w[0];
}

GV_HD GV_INLINE void sq_ring_doorbell(const QpHandle& qp, std::uint64_t end, std::uint64_t db) {
  const std::uint32_t rec = be32::from(mlx5::dbrec_counter(end)).raw;
  if (qp.record_polled) {
    wqe_visible_before_dbrec_and_doorbell(&qp.dbrec->snd.raw, rec, qp.doorbell, db, qp.executor);
    return;
  }
  wqe_visible_before_dbrec(&qp.dbrec->snd.raw, rec, qp.executor);
  dbrec_before_doorbell(qp.doorbell, db, qp.executor);
}

template <Ownership O, class Progress>
GV_HD Status post_send_batch(const QpHandle& qp, const SendWr* wrs, std::uint32_t n, Budget budget,
                             Progress&& progress) {
  if (n == 0) return Status::kInvalidArgument;
  std::uint32_t total = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    const Status v = validate(qp, wrs[i]);
    if (v != Status::kOk) return v;
    total += wqe_bbs(wqe_ds(wrs[i]));
  }
  std::uint64_t start = 0;
  Status st = wq_reserve<O>(&qp.state->sq, qp.sq_bbs, total, start, budget, qp.abort, progress);
  if (st != Status::kOk) return st;
  std::uint64_t pos = start;
  Octoword ctrl{};
  for (std::uint32_t i = 0; i < n; ++i) {
    ctrl = sq_write_wqe(qp, pos, wrs[i]);
    pos += wqe_bbs(wqe_ds(wrs[i]));
  }
  const std::uint64_t db = doorbell_value(ctrl);  // the last WQE's
  st = wq_wait_turn<O>(&qp.state->sq, start, qp.abort);
  if (st != Status::kOk) return st;
  sq_ring_doorbell(qp, pos, db);
  wq_pass_turn<O>(&qp.state->sq, pos);
  return Status::kOk;
}

template <Ownership O>
GV_HD Status post_send_batch(const QpHandle& qp, const SendWr* wrs, std::uint32_t n, Budget budget) {
  return post_send_batch<O>(qp, wrs, n, budget, detail::NoProgress{});
}

template <Ownership O>
GV_HD GV_INLINE Status post_send(const QpHandle& qp, const SendWr& wr, Budget budget) {
  return post_send_batch<O>(qp, &wr, 1, budget, detail::NoProgress{});
}

template <Ownership O, class Progress>
GV_HD GV_INLINE Status post_send(const QpHandle& qp, const SendWr& wr, Budget budget, Progress&& progress) {
  return post_send_batch<O>(qp, &wr, 1, budget, progress);
}

template <Ownership O>
GV_HD Status post_recv(const QpHandle& qp, const Sge* sgl, std::uint32_t n, Budget budget) {
  if (!handle_ok(qp) || n > qp.max_recv_sge) return Status::kInvalidArgument;
  std::uint64_t start = 0;
  Status st = wq_reserve<O>(&qp.state->rq, qp.rq_wqes, 1, start, budget, qp.abort);
  if (st != Status::kOk) return st;
  rq_write_wqe(qp, start, sgl, n);
  st = wq_wait_turn<O>(&qp.state->rq, start, qp.abort);
  if (st != Status::kOk) return st;
  rq_ring_record(qp, start + 1);
  wq_pass_turn<O>(&qp.state->rq, start + 1);
  return Status::kOk;
}

}  // namespace gv::ib
