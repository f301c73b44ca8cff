// The definitions of ../poll_warp.hpp (GPU only).
// Included at the end of ../poll_warp.hpp, which declares these with their contracts.
#pragma once
#if defined(__CUDACC__)
#include "../poll_warp.hpp"

namespace gv::ib {

namespace detail {
__device__ inline std::uint64_t warp_max(std::uint64_t v) {
  for (int d = 16; d > 0; d /= 2) {
    const std::uint64_t o = __shfl_xor_sync(kFullWarp, v, d);
    v = o > v ? o : v;
  }
  return v;
}
}  // namespace detail

__device__ inline Status poll_cq_warp(const CqHandle& cq, Completion& out, int& taken) {
  taken = 0;
  if (!handle_ok(cq)) return Status::kInvalidArgument;
  const unsigned lane = threadIdx.x & 31u;
  const std::uint32_t depth = 1u << cq.log_cqes;
  const std::uint64_t ci0 = sync::load_relaxed(&cq.state->claimed);
  const std::uint64_t ci = ci0 + lane;
  const mlx5::Cqe* cqe = cq.ring + (ci & (depth - 1));
  const bool ready = lane < depth && cqe_ready(cqe_tail(cq, cqe), ci, cq.log_cqes);
  const unsigned ballot = __ballot_sync(kFullWarp, ready);
  const int n = ballot == kFullWarp ? 32 : __ffs(~ballot) - 1;  // the ready prefix
  if (n == 0) return empty_or_overrun(cq);
  std::uint64_t sq_end = 0, rq_end = 0;
  if (static_cast<int>(lane) < n) {
    mlx5::Cqe copy;
    std::memcpy(&copy, cqe, sizeof(copy));
    out = decode_cqe(copy);
    // What retire() frees, gathered so that one lane moves each counter once.
    if (out.is_send()) {
      if (cq.send_qp != nullptr && out.qpn == cq.send_qpn) {
        const std::uint64_t start =
            widen(sync::load_acquire(&cq.send_qp->sq.completed), out.wqe_counter, mlx5::kWqeIndexBits);
        const Octoword ctrl = load_octoword(cq.send_sq + sq_octoword_offset(start, 0, cq.send_sq_bbs));
        sq_end = start + wqe_bbs(ctrl_ds_of(ctrl));
      }
    } else if (cq.recv_qp != nullptr && out.qpn == cq.recv_qpn) {
      rq_end = widen(sync::load_acquire(&cq.recv_qp->rq.completed), out.wqe_counter, mlx5::kWqeIndexBits) + 1;
    }
  }
  sq_end = detail::warp_max(sq_end);
  rq_end = detail::warp_max(rq_end);
  const std::uint32_t errors = __ballot_sync(kFullWarp, static_cast<int>(lane) < n && !out.ok());
  __syncwarp();  // every lane's CQE reads happen before lane 0 hands the slots back
  if (lane == 0) {
    if (sq_end != 0) sync::fetch_max(&cq.send_qp->sq.completed, sq_end);
    if (rq_end != 0) sync::fetch_max(&cq.recv_qp->rq.completed, rq_end);
    sync::store_relaxed(&cq.state->claimed, ci0 + n);
    cq_release<Ownership::kExclusive>(cq, ci0 + n);
  }
  __syncwarp();
  taken = n;
  return errors ? Status::kCompletionError : Status::kOk;
}

}  // namespace gv::ib
#endif  // __CUDACC__
