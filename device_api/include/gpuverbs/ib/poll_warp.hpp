// Warp-scope polling (GPU only).
//
// poll_cq_warp: the 32 lanes of a warp that owns a CQ (kExclusive) take up to 32 ready
//               completions at once. Lane i looks at the CQE after i earlier ones; the ready
//               prefix is taken, each lane decodes its own, the queue space they cover is
//               retired with one atomic per work queue, and the CQEs are handed back to the
//               producer with one release. The counterpart of post_send_warp_batch: the L2
//               round trips of a poll are paid once for up to 32 completions.
// Must be called by all 32 lanes of a converged warp.
#pragma once
#if defined(__CUDACC__)
#include <cstdint>

#include "poll.hpp"
#include "post_warp.hpp"

namespace gv::ib {

/// Take the ready completions at the head of `cq` (at most 32, at most the CQ's depth).
/// `taken` gets how many, the same in every lane; lane i < taken receives the i-th in `out`.
/// Returns, the same in every lane: kOk when every completion taken succeeded,
/// kCompletionError when one of them is an error CQE (its lane's `out` has the syndrome),
/// kEmpty (or kCqOverrun) with taken = 0 when none is ready, kInvalidArgument (taken = 0) for a
/// handle of another version.
[[nodiscard]] __device__ inline Status poll_cq_warp(const CqHandle& cq, Completion& out, int& taken);

}  // namespace gv::ib

#include "detail/poll_warp.hpp"  // the definitions
#endif  // __CUDACC__
