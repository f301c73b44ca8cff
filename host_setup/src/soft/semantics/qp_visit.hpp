// The software HCA's view of its own QP during one visit.
#pragma once
#include <cstdint>

#include "contexts.hpp"

namespace gv::soft {

/// What one visit of the engine to its own QP works on: the owner's fields, copied in one
/// round after the visit's acquire (they do not change while the QP can execute), and the
/// requester's progress (this engine's alone), kept in registers for the visit and stored
/// back at its end. Read in place, every field was a global load, and the fence before each
/// WQE's data (which also drops the SM's L1) sent them to L2 again for every WQE.
struct QpVisit {
  QpCtx* ctx;  ///< the QP itself: its state (error transitions) and receive counter stay there
  std::uint32_t qpn, pdn, send_cq, recv_cq, sq_bbs, rnr_retry, peer_qpn;
  std::int32_t peer_pid;
  std::uint64_t sq_off, dbrec_off, peer_base;
  std::uint64_t sq_head, sq_rung, last_doorbell, rnr_resume_ns;
  std::uint32_t rnr_left, rnr_active, last_rkey;
};

/// Start a visit of q (after the acquire that made its fields current).
GV_HD GV_INLINE QpVisit begin_visit(QpCtx& q) {
  QpVisit v;
  v.ctx = &q;
  v.qpn = q.qpn;
  v.pdn = q.pdn;
  v.send_cq = q.send_cq;
  v.recv_cq = q.recv_cq;
  v.sq_bbs = q.sq_bbs;
  v.rnr_retry = q.rnr_retry;
  v.peer_qpn = q.peer_qpn;
  v.peer_pid = q.peer_pid;
  v.sq_off = q.sq_off;
  v.dbrec_off = q.dbrec_off;
  v.peer_base = q.peer_base;
  v.sq_head = q.sq_head;
  v.sq_rung = q.sq_rung;
  v.last_doorbell = q.last_doorbell;
  v.rnr_resume_ns = q.rnr_resume_ns;
  v.rnr_left = q.rnr_left;
  v.rnr_active = q.rnr_active;
  v.last_rkey = q.last_rkey;
  return v;
}

/// End a visit: the requester's progress back into the QP.
GV_HD GV_INLINE void end_visit(const QpVisit& v) {
  QpCtx& q = *v.ctx;
  q.sq_head = v.sq_head;
  q.sq_rung = v.sq_rung;
  q.last_doorbell = v.last_doorbell;
  q.rnr_resume_ns = v.rnr_resume_ns;
  q.rnr_left = v.rnr_left;
  q.rnr_active = v.rnr_active;
  q.last_rkey = v.last_rkey;
}

/// A QP's visit, its kept responder and that responder's receive hints, held by the engine
/// between visits (the GPU engine: a lane's first slot, in shared memory), so that a visit
/// starts from on-chip copies instead of a round of loads of the QP's fields after its acquire.
/// Valid while its QP may execute: the owner's fields do not change while the QP is in RTS (an
/// RC QP connects once), and the progress fields are this engine's own; a visit from the QP's
/// memory (no kept copy, another state, a slot created afresh, a QP parked for its warp) drops
/// it, and every visit still stores its progress back into the QP, which stays the truth for
/// the others. The hints are checked where they are used, so the QP's own may lag the copy's.
struct KeptVisit {
  QpVisit v;
  KeptResponder resp;
  RecvHints recv;
  std::uint64_t doorbell_off;  ///< the QP's (the polled round's only field not in QpVisit)
  std::uint32_t valid;         ///< 0: nothing kept
};

}  // namespace gv::soft
