// The definitions of ../post_warp.hpp (GPU only).
// Included at the end of ../post_warp.hpp, which declares these with their contracts.
#pragma once
#if defined(__CUDACC__)
#include "../post_warp.hpp"

namespace gv::ib {

template <Ownership O>
__device__ Status post_send_warp(const QpHandle& qp, const SendWr& wr, Budget budget) {
  const unsigned lane = threadIdx.x & 31u;
  const std::uint32_t ds = wqe_ds(wr);
  std::uint32_t st = static_cast<std::uint32_t>(Status::kOk);
  std::uint64_t start = 0;
  if (lane == 0) {
    Status s = validate(qp, wr);
    if (s == Status::kOk) s = wq_reserve<O>(&qp.state->sq, qp.sq_bbs, wqe_bbs(ds), start, budget, qp.abort);
    st = static_cast<std::uint32_t>(s);
  }
  st = __shfl_sync(kFullWarp, st, 0);
  if (st != static_cast<std::uint32_t>(Status::kOk)) return static_cast<Status>(st);
  start = __shfl_sync(kFullWarp, start, 0);
  const auto idx = static_cast<std::uint16_t>(start);
  std::uint64_t db = 0;  // lane 0 writes the control segment and keeps its doorbell value
  for (std::uint32_t k = lane; k < ds; k += 32) {
    const Octoword o = wqe_octoword(wr, k, idx, qp.qpn);
    if (k == 0) db = doorbell_value(o);
    store_octoword(qp.sq + sq_octoword_offset(start, k, qp.sq_bbs), o);
  }
  // Every lane's segment is written before lane 0 publishes: bar.warp.sync orders the warp's
  // stores before lane 0's release in sq_ring_doorbell, which is cumulative.
  __syncwarp(kFullWarp);
  if (lane == 0) {
    Status s = wq_wait_turn<O>(&qp.state->sq, start, qp.abort);
    if (s == Status::kOk) {
      sq_ring_doorbell(qp, start + wqe_bbs(ds), db);
      wq_pass_turn<O>(&qp.state->sq, start + wqe_bbs(ds));
    }
    st = static_cast<std::uint32_t>(s);
  }
  return static_cast<Status>(__shfl_sync(kFullWarp, st, 0));
}

template <Ownership O>
__device__ Status post_send_warp_batch(const QpHandle& qp, const SendWr& my_wr, Budget budget) {
  const unsigned lane = threadIdx.x & 31u;
  if (__any_sync(kFullWarp, validate(qp, my_wr) != Status::kOk)) return Status::kInvalidArgument;
  const std::uint32_t nbb = wqe_bbs(wqe_ds(my_wr));
  // Inclusive scan of the lanes' WQE sizes: lane i's WQE starts at start + (scan - nbb).
  std::uint32_t scan = nbb;
  for (unsigned d = 1; d < 32; d <<= 1) {
    const std::uint32_t v = __shfl_up_sync(kFullWarp, scan, d);
    if (lane >= d) scan += v;
  }
  const std::uint32_t total = __shfl_sync(kFullWarp, scan, 31);
  std::uint32_t st = static_cast<std::uint32_t>(Status::kOk);
  std::uint64_t start = 0;
  if (lane == 0) st = static_cast<std::uint32_t>(wq_reserve<O>(&qp.state->sq, qp.sq_bbs, total, start, budget, qp.abort));
  st = __shfl_sync(kFullWarp, st, 0);
  if (st != static_cast<std::uint32_t>(Status::kOk)) return static_cast<Status>(st);
  start = __shfl_sync(kFullWarp, start, 0);
  const std::uint64_t mine = start + (scan - nbb);
  // Lane 31 holds the last WQE: its control segment's first 8 bytes are the doorbell.
  const std::uint64_t db = __shfl_sync(kFullWarp, doorbell_value(sq_write_wqe(qp, mine, my_wr)), 31);
  __syncwarp(kFullWarp);  // all 32 WQEs written before lane 0 publishes (see post_send_warp)
  if (lane == 0) {
    Status s = wq_wait_turn<O>(&qp.state->sq, start, qp.abort);
    if (s == Status::kOk) {
      sq_ring_doorbell(qp, start + total, db);
      wq_pass_turn<O>(&qp.state->sq, start + total);
    }
    st = static_cast<std::uint32_t>(s);
  }
  return static_cast<Status>(__shfl_sync(kFullWarp, st, 0));
}

}  // namespace gv::ib
#endif  // __CUDACC__
