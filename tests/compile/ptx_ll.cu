// PTX pin: a flag-in-data message needs no fence. Over p2p, put_ll's words and header are
// relaxed stores and wait_ll polls with relaxed loads; the one acquire of a receive body is the
// ib fallback's (the data packed, its header written after it; a thread's receive has two
// bodies, one line and a batch). check_ptx_no_fence.cmake counts them.
#include <gpuverbs/rma.hpp>

extern "C" __global__ void gv_pin_ll_send(std::uint64_t* buf, const unsigned char* src, std::size_t n, std::uint32_t seq) {
  gv::rma::detail::ll_send_lines<gv::rma::Thread>(buf + gv::rma::detail::kLlFirstWord, src, n, seq);
  gv::rma::detail::store_word(buf + 2, gv::rma::detail::ll_word(0, seq));
}

extern "C" __global__ void gv_pin_ll_receive(__grid_constant__ const gv::rma::Endpoint ep, const std::uint64_t* buf,
                                             std::size_t n, std::uint32_t seq, unsigned char* out, std::uint64_t* header) {
  std::uint64_t h = 0, credit = 0;
  if (gv::rma::detail::ll_receive<gv::rma::Thread, true>(ep.budget, ep.abort, buf, n, seq, out, h, credit) == gv::Status::kOk)
    *header = h ^ credit;
}
