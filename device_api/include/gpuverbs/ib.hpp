// gpuverbs device API, verbs level: one include for kernels and host threads.
//
//   gv::ib::post_send<Ownership>(qp, wr)         one WQE, one doorbell
//   gv::ib::post_send_batch<Ownership>(qp, wrs, n) n WQEs, one doorbell
//   gv::ib::post_recv<Ownership>(qp, sgl, n)      one receive WQE
//   gv::ib::post_send_warp<Ownership>(qp, wr)    a warp writes one WQE, a lane per octoword (GPU)
//   gv::ib::post_send_warp_batch<Ownership>(qp, wr) a WQE per lane, one doorbell (GPU)
//   gv::ib::poll_cq<Ownership>(cq, completion)    wait (bounded) for one completion
//   gv::ib::try_poll_cq<Ownership>(cq, completion) take one if ready
//   gv::ib::poll_cq_warp(cq, completion, taken)   a warp takes up to 32 ready ones at once (GPU)
//   gv::ib::QpOwner                               one thread posting and polling a QP and its CQ
//                                                 with their positions in registers (ib/owner.hpp)
//
// Ownership: kShared is safe for any number of threads and blocks; kExclusive is for a queue
// one thread (or warp) owns. A queue (SQ, RQ, CQ) keeps one ownership mode for its life.
//
// Formats: ib/mlx5_format.hpp. Encoders: ib/encode.hpp. CQEs: ib/cqe.hpp. Handles: ib/handles.hpp.
// Ordering points: ib/ordering.hpp.
#pragma once
#include "ib/cqe.hpp"
#include "ib/encode.hpp"
#include "ib/handles.hpp"
#include "ib/mlx5_format.hpp"
#include "ib/owner.hpp"
#include "ib/poll.hpp"
#include "ib/poll_warp.hpp"
#include "ib/post.hpp"
#include "ib/post_warp.hpp"
#include "ib/ring.hpp"
#include "ib/work_request.hpp"
#include "status.hpp"
#include "types.hpp"
