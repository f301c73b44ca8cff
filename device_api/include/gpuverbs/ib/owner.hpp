// One thread owning a QP and the CQ that completes its send queue, with the queues' positions
// in registers: the exclusive fast path when the same thread posts and polls (a ping-pong side,
// a streaming loop, a proxy).
//
//   gv::ib::QpOwner own;
//   if (own.take(qp, cq) != gv::Status::kOk) ...;   // reads the positions once
//   own.post_send(wr); ... own.poll(c); ...         // no shared counter is read or written
//   own.give_back();                                // stores them for whoever comes next
//
// Between take() and give_back() the owner is the only thread that posts to the QP and polls
// the CQ, and the queues' counters in memory (QpCounters, CqCounters) are stale (all but the
// receive queue's reserved count when another CQ completes that queue, so that its depth,
// reserved - completed, can be read): handing the QP to another thread or kernel goes through give_back() and whatever orders
// the two (a kernel boundary, a barrier). Posts and polls keep their semantics: the same WQEs,
// doorbells, CQE checks and ordering as post_send<kExclusive> and poll_cq<kExclusive>.
//
// What it saves: a post reads and writes no counter (the free space is known from the
// completions this thread polled), so a post is the WQE's stores, one release and the doorbell
// record and doorbell; a poll reads the CQE's last word and, in the same round, the control
// segment of the oldest WQE not yet completed: when every WQE is signaled the CQE names that
// WQE and nothing more is read for a successful WRITE, SEND or NOP completion, whose consumer
// index then needs no fence (the tail's acquire orders it; cqe_tail_read_before_release);
// else a second round reads the CQE's body and the WQE it names, and the index is released
// after those reads, as poll_cq does.
#pragma once
#include <cstdint>

#include "../status.hpp"
#include "cqe.hpp"
#include "handles.hpp"
#include "poll.hpp"
#include "post.hpp"
#include "work_request.hpp"

namespace gv::ib {

class QpOwner {
 public:
  /// Take `qp` and `cq` (both kExclusive queues; `cq` must complete qp's send queue; it may also
  /// complete its receive queue): copies the handles (their fields then live in registers, not
  /// behind a pointer to the kernel's parameters) and reads the queues' positions.
  /// kInvalidArgument for a handle of another version or a CQ that does not complete qp's send
  /// queue.
  GV_HD Status take(const QpHandle& qp, const CqHandle& cq);

  /// Store the positions back into the queues' counters.
  GV_HD void give_back() const;

  /// Post one send WQE: kQueueFull at once when the ring has no room (only this thread's polls
  /// free it: poll, then post again); kInvalidArgument as post_send.
  GV_HD Status post_send(const SendWr& wr);

  /// Post one receive WQE scattering into sgl[0..n). Its space is freed by this thread's polls
  /// when the CQ completes the receive queue too, else by the receive CQ's poller (read from
  /// the queue's counter when the ring looks full). kQueueFull at once when it has no room.
  GV_HD Status post_recv(const Sge* sgl, std::uint32_t n);

  /// Take one completion if one is ready (as try_poll_cq<kExclusive>).
  GV_HD Status try_poll(Completion& out);

  /// Wait (bounded) for one completion (as poll_cq<kExclusive>).
  GV_HD Status poll(Completion& out, Budget budget = {});

  /// Send WQEBBs posted and not yet completed (what the owner must poll before a full ring
  /// takes another WQE).
  GV_HD std::uint64_t outstanding() const { return sq_next_ - sq_done_; }

 private:
  QpHandle qp_;
  CqHandle cq_;
  std::uint64_t sq_next_ = 0, sq_done_ = 0;  ///< the SQ's next WQEBB and its completed bound
  std::uint64_t rq_next_ = 0, rq_done_ = 0;  ///< the same for the RQ
  std::uint64_t ci_ = 0;                      ///< the CQ's next CQE
  bool rq_here_ = false;                      ///< the CQ completes the receive queue too
};

}  // namespace gv::ib

#include "detail/owner.hpp"  // the definitions
