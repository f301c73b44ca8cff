// Warp-scope posting (GPU only).
//
// post_send_warp:        the 32 lanes of a warp post ONE work request together: lane k
//                        writes octoword k of the WQE (one 16-byte store each), lane 0
//                        reserves and rings the doorbell.
// post_send_warp_batch:  each lane posts ITS OWN work request; the warp reserves all of them
//                        with one atomic, writes them in parallel and rings one doorbell.
// Both must be called by all 32 lanes of a converged warp.
#pragma once
#if defined(__CUDACC__)
#include <cstdint>

#include "post.hpp"

namespace gv::ib {

inline constexpr unsigned kFullWarp = 0xffffffffu;

template <Ownership O>
__device__ Status post_send_warp(const QpHandle& qp, const SendWr& wr, Budget budget = {});

template <Ownership O>
__device__ Status post_send_warp_batch(const QpHandle& qp, const SendWr& my_wr, Budget budget = {});

}  // namespace gv::ib

#include "detail/post_warp.hpp"  // the definitions
#endif  // __CUDACC__
