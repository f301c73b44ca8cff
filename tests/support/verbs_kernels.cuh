// Kernels shared by the GPU test programs: one work request (one SGE or several) posted and its
// completion polled, a receive posted, a completion polled, and one side of a WRITE ping-pong
// that checks every message. Each test program includes this once (kernels are defined here).
#pragma once
#include <gpuverbs/ib.hpp>

namespace gvt {

using gv::Status;
using gv::ib::Ownership;
using gv::ib::SendWr;
using gv::ib::Sge;
using gv::ib::WrOpcode;

struct KernelResult {
  Status post, poll;
  gv::ib::Completion c;
};

__global__ void post_and_poll(const __grid_constant__ gv::ib::QpHandle qp, const __grid_constant__ gv::ib::CqHandle cq,
                              SendWr wr, Sge sge, KernelResult* out) {
  wr.sg_list = &sge;
  out->post = gv::ib::post_send<Ownership::kExclusive>(qp, wr);
  out->poll = out->post == Status::kOk ? gv::ib::poll_cq<Ownership::kExclusive>(cq, out->c) : Status::kEmpty;
}

/// Up to four SGEs by value, for work requests that gather from (or scatter to) several.
struct Sges {
  Sge s[4];
  std::uint32_t n = 0;
};

__global__ void post_sges_and_poll(const __grid_constant__ gv::ib::QpHandle qp,
                                   const __grid_constant__ gv::ib::CqHandle cq, SendWr wr, Sges sges,
                                   KernelResult* out) {
  wr.sg_list = sges.s;
  wr.num_sge = sges.n;
  out->post = gv::ib::post_send<Ownership::kExclusive>(qp, wr);
  out->poll = out->post == Status::kOk ? gv::ib::poll_cq<Ownership::kExclusive>(cq, out->c) : Status::kEmpty;
}

__global__ void recv_kernel(const __grid_constant__ gv::ib::QpHandle qp, Sge sge, Status* st) {
  *st = gv::ib::post_recv<Ownership::kExclusive>(qp, &sge, 1);
}

__global__ void poll_kernel(const __grid_constant__ gv::ib::CqHandle cq, KernelResult* out) {
  out->poll = gv::ib::poll_cq<Ownership::kExclusive>(cq, out->c);
}

/// One side of a ping-pong: wait for the peer's i-th message (last byte = i), check it, write ours.
__global__ void pingpong_side(const __grid_constant__ gv::ib::QpHandle qp, const __grid_constant__ gv::ib::CqHandle cq,
                              std::uint8_t* in, std::uint8_t* out, std::uint64_t peer_in, std::uint32_t lkey,
                              std::uint32_t rkey, std::uint32_t bytes, int iters, bool starts, Status* status) {
  Sge sge{reinterpret_cast<std::uint64_t>(out), bytes, lkey};
  SendWr wr;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.flags = gv::ib::kWrSignaled;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.remote_addr = peer_in;
  wr.rkey = rkey;
  Status st = Status::kOk;
  for (int i = 1; i <= iters && st == Status::kOk; ++i) {
    if (!starts || i > 1) {
      const auto want = static_cast<std::uint8_t>(starts ? i - 1 : i);
      st = gv::sync::bounded_wait(
          [&] { return gv::sync::load_acquire(&in[bytes - 1], gv::sync::Scope::kSystem) == want; }, gv::Budget{},
          qp.abort);
      for (std::uint32_t k = 0; k + 1 < bytes && st == Status::kOk; ++k)
        if (in[k] != static_cast<std::uint8_t>(want + k)) st = Status::kInvalidArgument;
    }
    if (st != Status::kOk) break;
    for (std::uint32_t k = 0; k + 1 < bytes; ++k) out[k] = static_cast<std::uint8_t>(i + k);
    out[bytes - 1] = static_cast<std::uint8_t>(i);
    st = gv::ib::post_send<Ownership::kExclusive>(qp, wr);
    gv::ib::Completion c;
    if (st == Status::kOk) st = gv::ib::poll_cq<Ownership::kExclusive>(cq, c);
  }
  *status = st;
}

}  // namespace gvt
