// Polling completions: CQE validity by owner bit, decoding (cqe.hpp), handing the CQE back to
// the producer, and retiring the SQ/RQ space it covers.
#pragma once
#include <cstdint>
#include <cstring>

#include "../status.hpp"
#include "../sync.hpp"
#include "cqe.hpp"
#include "encode.hpp"
#include "handles.hpp"
#include "ordering.hpp"
#include "post.hpp"

namespace gv::ib {

/// The last 4 bytes of a CQE (wqe_counter, signature, op_own), acquired from its producer.
GV_HD GV_INLINE std::uint32_t cqe_tail(const CqHandle& cq, const mlx5::Cqe* cqe);

/// Whether a CQE whose tail is `tail` is the one for consumer counter `ci` (its owner bit is
/// this lap's and its opcode valid), in a CQ of 2^log_cqes entries.
GV_HD GV_INLINE bool cqe_ready(std::uint32_t tail, std::uint64_t ci, std::uint32_t log_cqes);

/// Free the SQ or RQ space a completion covers. Out-of-order retirement by concurrent
/// pollers is safe: counters only move forward (fetch_max).
GV_HD GV_INLINE void retire(const CqHandle& cq, const Completion& c);

/// Hand the CQEs before counter `next` back to the producer (the doorbell record's consumer
/// index, released at the executor's scope); shared pollers also advance `released`.
template <Ownership O>
GV_HD GV_INLINE void cq_release(const CqHandle& cq, std::uint64_t next);

/// What a poll that found nothing reports: kEmpty, or kCqOverrun once the provider declared it.
GV_HD GV_INLINE Status empty_or_overrun(const CqHandle& cq);

/// Take one completion if one is ready: kOk / kCompletionError with `out` filled, kEmpty, or
/// kCqOverrun once the provider declared the CQ overrun (kInvalidArgument for a handle of
/// another version).
template <Ownership O>
GV_HD Status try_poll_cq(const CqHandle& cq, Completion& out);

/// Wait (bounded) for one completion.
template <Ownership O>
GV_HD Status poll_cq(const CqHandle& cq, Completion& out, Budget budget = {});

}  // namespace gv::ib

#include "detail/poll.hpp"  // the definitions
