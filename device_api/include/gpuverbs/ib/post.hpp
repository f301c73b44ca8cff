// Posting work requests, in named steps:
//   reserve slots -> write segments -> mark ready (wait for our turn) -> doorbell record ->
//   doorbell.
// `Ownership::kShared` is safe with any number of threads and blocks on one QP: slots are
// reserved with a CAS that never over-commits the ring, and WQEs are published strictly in
// reservation order. `Ownership::kExclusive` is the fast path for a QP owned by one thread:
// no atomics, no turn-taking.
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

/// Take n units of a ring of `size` units, waiting (bounded) until polled completions free them.
template <Ownership O>
GV_HD GV_INLINE Status wq_reserve(WqCounters* wq, std::uint32_t size, std::uint32_t n,
                                  std::uint64_t& start, Budget budget,
                                  const std::uint32_t* abort);

/// Place an idle work queue's counters at `at`: a queue starting mid-stream, or a test that
/// starts near a wrap. The exclusive owner learns the free space on its first reservation.
GV_HD GV_INLINE void wq_start_at(WqCounters* wq, std::uint64_t at);

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
/// This wait has its own bound (the default Budget), not the caller's: a poster that holds a
/// reservation must publish it, since abandoning it leaves a hole that wedges the queue for
/// every later poster. Earlier posters only have to write their WQEs, so the wait is short
/// unless one of them died; then kTimeout is returned and the QP must be destroyed.
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
/// when it runs out; nothing is reserved then, nor when validation fails). If the wait for
/// our turn times out, an earlier poster died holding a reservation: kTimeout, and the QP
/// must be destroyed.
template <Ownership O>
GV_HD Status post_send_batch(const QpHandle& qp, const SendWr* wrs, std::uint32_t n,
                             Budget budget = {});

/// post_send_batch of one work request.
template <Ownership O>
GV_HD GV_INLINE Status post_send(const QpHandle& qp, const SendWr& wr, Budget budget = {});

/// Post one receive WQE scattering into `sgl[0..n)`. Receive queues have no doorbell: the
/// doorbell record alone tells the HCA how many receives exist.
template <Ownership O>
GV_HD Status post_recv(const QpHandle& qp, const Sge* sgl, std::uint32_t n, Budget budget = {});

}  // namespace gv::ib

#include "detail/post.hpp"  // the definitions
