// PTX pin: the ordering of QpOwner::take and QpOwner::try_poll, as the compiler emits it.
// check_ptx_order.cmake compares the PTX of this kernel with ptx_owner_try_poll.expected.
#include <gpuverbs/ib/owner.hpp>

extern "C" __global__ void gv_pin_owner_try_poll(const __grid_constant__ gv::ib::QpHandle qp,
                                                 const __grid_constant__ gv::ib::CqHandle cq,
                                                 gv::ib::Completion* c, gv::Status* out) {
  gv::ib::QpOwner own;
  if (own.take(qp, cq) == gv::Status::kOk) *out = own.try_poll(*c);
}
