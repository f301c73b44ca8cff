// Register pin: a ping-pong kernel as users of the NVSHMEM face write them (perftest's shape:
// p, a thread's put_signal or a block's, chosen at run time, then the leader's wait_until) keeps
// within 96 registers a thread (88 at the time of writing). A copy whose last words were left
// undefined took this kernel to 128, the most a block of 512 threads can have, and the face's
// own ping-pong in shmem_perf from 106 to 207: "too many resources requested for launch".
// check_registers.cmake reads ptxas' report for sm_90.
#include <gpuverbs/rma.hpp>

namespace rma = gv::rma;

extern "C" __global__ void gv_pin_pingpong(__grid_constant__ const rma::Endpoint ep, int op, std::byte* buf,
                                           const std::byte* src, std::size_t n, std::uint64_t* flag, int rounds,
                                           gv::Status* st) {
  const int peer = 1 - static_cast<int>(ep.rank);
  const bool leader = threadIdx.x == 0;
  gv::Status s = gv::Status::kOk;
  for (int i = 1; i <= rounds && s == gv::Status::kOk; ++i) {
    const auto v = static_cast<std::uint64_t>(i);
    if (op == 0) {
      if (leader) s = rma::p(ep, flag, v, peer);
    } else if (op == 1) {
      if (leader) s = rma::put_signal(ep, buf, src, n, flag, v, rma::SignalOp::kSet, peer);
    } else {
      s = rma::put_signal<rma::Block>(ep, buf, src, n, flag, v, rma::SignalOp::kSet, peer);
    }
    if (leader && s == gv::Status::kOk) s = rma::wait_until(ep, static_cast<const std::uint64_t*>(flag), rma::Cmp::kGe, v);
    __syncthreads();
  }
  if (s != gv::Status::kOk) *st = s;
}
