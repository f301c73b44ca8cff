// PTX pin: the doorbell sequence of an exclusive-QP post_send, as the compiler emits it.
// check_ptx_doorbell.cmake reads the PTX of this kernel; see the rules there.
#include <gpuverbs/ib.hpp>

extern "C" __global__ void gv_pin_post_send_exclusive(const __grid_constant__ gv::ib::QpHandle qp,
                                                      gv::ib::SendWr wr, gv::Status* out) {
  *out = gv::ib::post_send<gv::ib::Ownership::kExclusive>(qp, wr);
}
