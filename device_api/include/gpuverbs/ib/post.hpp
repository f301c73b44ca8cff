// Posting work requests, in named steps:
//   reserve slots -> write segments -> mark ready (wait for our turn) -> doorbell record ->
//   doorbell.
// `Ownership::kShared` is safe with any number of threads and blocks on one QP: each poster
// takes a ticket (one fetch_add on the queue's `reserved` counter), waits until completions free
// the ring for its slots, writes its WQEs, and publishes them in ticket order. Reserving never
// waits on another poster's reservation (a CAS loop can lose forever; a ticket cannot), so a
// poster waits only for the work ahead of it: the completions its slots need and the posters
// ahead publishing. `Ownership::kExclusive` is the fast path for a QP owned by one thread: no
// atomics, no turn-taking.
//
// A ticket that is given up (its wait for space ran out of budget, was aborted, or its wait for
// its turn failed) leaves slots that posters behind it would wait to see published. When it is
// the last ticket taken it is handed back and nothing is left behind. Otherwise the queue is
// *broken* at its first slot X (WqCounters::broken): published stays at or below X, every WQE
// before X that its poster publishes still executes, and every poster whose ticket starts at or
// after X returns kQueueBroken without posting: from wq_reserve if it is waiting for space,
// else from wq_wait_turn at its first poll (it may have written its WQEs: beyond the doorbell
// record, into slots completions had freed, where they do no harm). The host restores service
// with wq_reopen() once no poster is inside the queue.
#pragma once
#include <cstdint>

#include "../status.hpp"
#include "../sync.hpp"
#include "encode.hpp"
#include "handles.hpp"
#include "ordering.hpp"

namespace gv::ib {

enum class Ownership { kShared, kExclusive };

// ---- Step 1: reserve ----------------------------------------------------------------------

/// Take n units of a ring of `size` units at `start`, waiting (bounded) until polled completions
/// free them. kExclusive: nothing is taken unless kOk. kShared: a ticket is taken at once and
/// never lost to other posters; the wait is for ring space only. On kOk the caller must write
/// and publish [start, start + n) (wq_wait_turn, wq_pass_turn). Otherwise nothing is left
/// to publish and:
///   kQueueFull     the ring had no room for these slots for the whole budget (the completions
///                  ahead of them did not come);
///   kAborted       the host raised *abort;
///   kQueueBroken   (kShared) an earlier ticket was abandoned while this one waited for space:
///                  it can never be published;
///   kInvalidArgument  n == 0 or n > size, nothing taken.
/// On kQueueFull or kAborted a kShared ticket is handed back if no later one was taken, else the
/// queue breaks at it (see the top of this file): later posters get kQueueBroken until
/// wq_reopen().
template <Ownership O>
GV_HD GV_INLINE Status wq_reserve(WqCounters* wq, std::uint32_t size, std::uint32_t n,
                                  std::uint64_t& start, Budget budget,
                                  const std::uint32_t* abort);

/// wq_reserve that calls `progress()` (-> Status) while the ring has no room, e.g. to drain the
/// CQ that frees it, so that a poster needs no progress thread. A status other than kOk ends
/// the wait and is returned, the ticket given up as on a timeout.
template <Ownership O, class Progress>
GV_HD GV_INLINE Status wq_reserve(WqCounters* wq, std::uint32_t size, std::uint32_t n,
                                  std::uint64_t& start, Budget budget,
                                  const std::uint32_t* abort, Progress&& progress);

/// Place an idle work queue's counters at `at`: a queue starting mid-stream, or a test that
/// starts near a wrap. The exclusive owner learns the free space on its first reservation.
GV_HD GV_INLINE void wq_start_at(WqCounters* wq, std::uint64_t at);

/// Reopen a broken kShared queue at its published position: the abandoned tickets and every
/// ticket behind them are dropped (their posters returned without publishing; what they wrote
/// lies beyond the doorbell record and is overwritten), the broken mark is cleared, `completed`
/// and the WQEs in flight are kept. Call it when no poster is inside the queue (the kernels that
/// post to it have ended, or the host threads have returned), where the counters live: from the
/// host for host memory, from a one-thread kernel for GPU memory.
GV_HD GV_INLINE void wq_reopen(WqCounters* wq);

// ---- Step 2: write -------------------------------------------------------------------------

/// Checks a request against the QP's limits (and the handle's version): the small always-on
/// set of device checks.
GV_HD GV_INLINE Status validate(const QpHandle& qp, const SendWr& wr);

/// Write the WQE of `wr` at WQEBB counter `start` (reserved by this thread); returns its control
/// segment, whose first 8 bytes are the doorbell (doorbell_value()).
GV_HD GV_INLINE Octoword sq_write_wqe(const QpHandle& qp, std::uint64_t start, const SendWr& wr);

/// Write the receive WQE scattering into `sgl[0..n)` (n <= max_recv_sge) at RQ counter `start`:
/// one data segment per SGE of nonzero length, then a terminator if room is left.
GV_HD GV_INLINE void rq_write_wqe(const QpHandle& qp, std::uint64_t start, const Sge* sgl, std::uint32_t n);

// ---- Step 3: mark ready --------------------------------------------------------------------

/// Wait until every earlier reservation is published; then the caller may publish [start, end).
/// This wait has its own bound (the default Budget), not the caller's: a ticket whose poster got
/// its ring space holds only posters that also got theirs and only have to write their WQEs,
/// so the wait is short unless one of them died or stalls. kQueueBroken (nothing to undo) when
/// the queue broke at or before `start`. On a timeout (kTimeout) or abort (kAborted) this ticket
/// is abandoned: the queue breaks at `start` and the caller must not publish.
template <Ownership O>
GV_HD GV_INLINE Status wq_wait_turn(WqCounters* wq, std::uint64_t start, const std::uint32_t* abort);

/// Let the next reservation publish. Exclusive owners only record progress.
template <Ownership O>
GV_HD GV_INLINE void wq_pass_turn(WqCounters* wq, std::uint64_t end);

// ---- Steps 4 and 5: doorbell record and doorbell -------------------------------------------

/// The doorbell value of a WQE: the first 8 bytes of its control segment (as mlx5
/// BlueFlame/UAR doorbells carry them).
GV_HD GV_INLINE std::uint64_t doorbell_value(const Octoword& ctrl);

/// Publish SQ WQEBBs up to `end`; `db` is the doorbell value of the last WQE.
GV_HD GV_INLINE void sq_ring_doorbell(const QpHandle& qp, std::uint64_t end, std::uint64_t db);

/// Publish receive WQEs up to `end`: receive queues have no doorbell, the record alone tells
/// the executor how many exist.
GV_HD GV_INLINE void rq_ring_record(const QpHandle& qp, std::uint64_t end);

// ---- Whole posts ---------------------------------------------------------------------------

/// Post n send WQEs with one doorbell. `budget` bounds the wait for ring space (kQueueFull
/// when it runs out). Nothing is posted unless kOk: on kInvalidArgument nothing is reserved; on
/// kQueueFull, kAborted, kTimeout (the wait for our turn: an earlier poster died or stalls) and
/// kQueueBroken the queue may be broken for later posters, as wq_reserve and wq_wait_turn say.
/// With kShared, a short budget is no try-post: a ticket that runs out of it with posters behind
/// it breaks the queue. A poster that also polls drains the CQ in `progress` (the overload below).
template <Ownership O>
GV_HD Status post_send_batch(const QpHandle& qp, const SendWr* wrs, std::uint32_t n,
                             Budget budget = {});

/// post_send_batch that calls `progress()` (-> Status) while the ring has no room, as
/// wq_reserve's overload does: a status other than kOk ends the wait and is returned.
template <Ownership O, class Progress>
GV_HD Status post_send_batch(const QpHandle& qp, const SendWr* wrs, std::uint32_t n, Budget budget,
                             Progress&& progress);

/// post_send_batch of one work request.
template <Ownership O>
GV_HD GV_INLINE Status post_send(const QpHandle& qp, const SendWr& wr, Budget budget = {});
template <Ownership O, class Progress>
GV_HD GV_INLINE Status post_send(const QpHandle& qp, const SendWr& wr, Budget budget, Progress&& progress);

/// Post one receive WQE scattering into `sgl[0..n)`. Receive queues have no doorbell: the
/// doorbell record alone tells the HCA how many receives exist.
template <Ownership O>
GV_HD Status post_recv(const QpHandle& qp, const Sge* sgl, std::uint32_t n, Budget budget = {});

}  // namespace gv::ib

#include "detail/post.hpp"  // the definitions
