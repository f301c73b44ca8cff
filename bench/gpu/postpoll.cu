// gv_gpu_verbs postpoll: the cost on the GPU of post_send (one thread exclusive/shared, an owner
// keeping the positions in registers (QpOwner), a warp writing one WQE, a warp posting 32 WQEs
// with one doorbell) and of poll_cq on a ready CQE (one thread, an owner, or a warp taking up to
// 32 with poll_cq_warp): on synthetic rings in GPU or pinned host memory with no executor (the
// dissertation's Table 5.2), and, for gpu-qgpu, on a real QP whose WQEs the GPU engine executes
// (exclusive, owner, warp and warp-batch posting: a queue keeps one ownership mode for life).
// Each placement's floors (synthetic.hpp) are measured in the same run, and every row gives its
// median over the floor of its kind. --no-engine leaves the real QP out, e.g. under ncu, which
// serialises kernel launches and so would stall behind the resident engine.
#include <cstdio>

#include "synthetic.hpp"

namespace gv::bench {
namespace {

enum class PostMode : int { kThreadExclusive, kThreadShared, kThreadOwner, kWarp, kWarpBatch };
const char* name(PostMode m) {
  switch (m) {
    case PostMode::kThreadExclusive: return "thread-exclusive";
    case PostMode::kThreadShared: return "thread-shared";
    case PostMode::kThreadOwner: return "thread-owner";
    case PostMode::kWarp: return "warp-cooperative";
    case PostMode::kWarpBatch: return "warp-batch32";
  }
  return "?";
}
GV_HD bool warp_wide(PostMode m) { return m == PostMode::kWarp || m == PostMode::kWarpBatch; }

/// One post of `wr` in mode `m` (the owner's through `own`).
__device__ Status post_one(PostMode m, const gv::ib::QpHandle& qp, gv::ib::QpOwner& own, const SendWr& wr) {
  switch (m) {
    case PostMode::kThreadExclusive: return gv::ib::post_send<Ownership::kExclusive>(qp, wr);
    case PostMode::kThreadShared: return gv::ib::post_send<Ownership::kShared>(qp, wr);
    case PostMode::kThreadOwner: return own.post_send(wr);
    case PostMode::kWarp: return gv::ib::post_send_warp<Ownership::kExclusive>(qp, wr);
    case PostMode::kWarpBatch: return gv::ib::post_send_warp_batch<Ownership::kExclusive>(qp, wr);
  }
  return Status::kInvalidArgument;
}

/// Synthetic rings: posts `n` calls of one-WQEBB WQEs. With no executor, the kernel retires its
/// own WQEs every quarter ring: the count lives in a register, so the harness adds one compare
/// per call and one load and store per quarter ring to what is measured (the owner gives its
/// positions back before and takes them again after: a dozen stores and loads per quarter ring).
__global__ void post_cost_kernel(const __grid_constant__ gv::ib::QpHandle qp, const __grid_constant__ gv::ib::CqHandle cq,
                                 int n, PostMode mode, std::uint64_t* ns, Status* status) {
  std::uint8_t payload[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const Sge sge{reinterpret_cast<std::uint64_t>(payload), 8, 0};
  const SendWr wr = write_wr(&sge, kSyntheticRaddr, kSyntheticRkey, gv::ib::kWrInline);
  const bool warp = warp_wide(mode);
  const bool owner = mode == PostMode::kThreadOwner;
  if (!warp && threadIdx.x != 0) return;
  gv::ib::QpOwner own;
  Status st = owner ? own.take(qp, cq) : Status::kOk;
  const int per_call = mode == PostMode::kWarpBatch ? 32 : 1;  // WQEBBs per call
  const int retire_every = static_cast<int>(qp.sq_bbs / 4) / per_call;
  __syncwarp(warp ? 0xffffffffu : 1u);
  const std::uint64_t t0 = gv::sync::now_ns();
  for (int i = 1; i <= n && st == Status::kOk; ++i) {
    st = post_one(mode, qp, own, wr);
    if (i % retire_every == 0) {
      if (owner) own.give_back();
      if (threadIdx.x == 0) gv::sync::store_release(&qp.state->sq.completed, gv::sync::load_relaxed(&qp.state->sq.reserved));
      if (warp) __syncwarp();
      if (owner && st == Status::kOk) st = own.take(qp, cq);
    }
  }
  const std::uint64_t t1 = gv::sync::now_ns();
  if (threadIdx.x == 0) {
    *ns = t1 - t0;
    *status = st;
  }
}

enum class PollMode : int { kThread, kOwner, kWarp };

/// The poll rows: each mode with its operation's name.
constexpr struct {
  PollMode mode;
  const char* op;
} kPolls[] = {{PollMode::kThread, "poll_cq(ready)"}, {PollMode::kOwner, "owner poll(ready)"},
              {PollMode::kWarp, "poll_cq_warp(ready)"}};

/// Takes n CQEs that were all ready beforehand (an empty poll is an error): one thread with
/// try_poll_cq<kExclusive>, the QP's owner `own` (taken), or a warp with poll_cq_warp, up to
/// 32 a call.
__device__ Status take_ready(PollMode m, const gv::ib::CqHandle& cq, gv::ib::QpOwner& own, int n) {
  gv::ib::Completion c;
  Status st = Status::kOk;
  switch (m) {
    case PollMode::kThread:
      for (int i = 0; i < n && st == Status::kOk; ++i) st = gv::ib::try_poll_cq<Ownership::kExclusive>(cq, c);
      return st;
    case PollMode::kOwner:
      for (int i = 0; i < n && st == Status::kOk; ++i) st = own.try_poll(c);
      return st;
    case PollMode::kWarp:
      for (int got = 0; got < n && st == Status::kOk;) {
        int k = 0;
        st = gv::ib::poll_cq_warp(cq, c, k);
        if (k == 0 && st == Status::kEmpty) st = Status::kTimeout;
        got += k;
      }
      return st;
  }
  return Status::kInvalidArgument;
}

/// Synthetic rings: takes `n` ready CQEs (each retiring one NOP WQE) in mode `m` (the warp's
/// launched with 32 lanes; the owner taken and given back untimed).
__global__ void poll_cost_kernel(const __grid_constant__ gv::ib::QpHandle qp, const __grid_constant__ gv::ib::CqHandle cq,
                                 int n, PollMode m, std::uint64_t* ns, Status* status) {
  gv::ib::QpOwner own;
  Status st = m == PollMode::kOwner ? own.take(qp, cq) : Status::kOk;
  const std::uint64_t t0 = gv::sync::now_ns();
  if (st == Status::kOk) st = take_ready(m, cq, own, n);
  const std::uint64_t t1 = gv::sync::now_ns();
  if (m == PollMode::kOwner) own.give_back();
  if (threadIdx.x == 0) {
    *ns = t1 - t0;
    *status = st;
  }
}

/// WQEs posted between two waits for completion on the gpu-qgpu QP.
constexpr int kChunkWqes = 1024;

/// gpu-qgpu: posts `chunks` x kChunkWqes 8-byte inline WRITEs to the peer, timing only the
/// posting. The chunk's last WQE is signaled; after the chunk lane 0 waits (untimed) for its
/// completion, which frees the ring again. The GPU engine executes WQEs while they are being
/// posted, as it would in use. Exclusive ownership only (the owner's too: it takes the QP
/// and gives it back untimed): a queue keeps one mode for life.
__global__ void engine_post_cost_kernel(const __grid_constant__ Endpoint ep, PostMode mode, int chunks,
                                        std::uint64_t* ns, Status* status) {
  const bool warp = warp_wide(mode);
  const bool owner = mode == PostMode::kThreadOwner;
  if (!warp && threadIdx.x != 0) return;
  const unsigned lane = threadIdx.x % 32;
  const std::uint64_t payload = 0x0807060504030201ull + lane;
  const Sge sge{reinterpret_cast<std::uint64_t>(&payload), 8, 0};
  SendWr wr = write_wr(&sge, reinterpret_cast<std::uint64_t>(ep.peer_in), ep.peer_rkey, 0);
  const int calls = mode == PostMode::kWarpBatch ? kChunkWqes / 32 : kChunkWqes;
  gv::ib::QpOwner own;
  Status st = owner ? own.take(ep.qp, ep.scq) : Status::kOk;
  std::uint64_t total = 0;
  for (int c = 0; c < chunks && st == Status::kOk; ++c) {
    if (warp) __syncwarp();
    const std::uint64_t t0 = gv::sync::now_ns();
    for (int i = 0; i < calls && st == Status::kOk; ++i) {
      const bool last = i + 1 == calls && (mode != PostMode::kWarpBatch || lane == 31);
      wr.flags = gv::ib::kWrInline | (last ? gv::ib::kWrSignaled : 0u);
      st = post_one(mode, ep.qp, own, wr);
    }
    total += gv::sync::now_ns() - t0;
    if (lane == 0 && st == Status::kOk) {
      gv::ib::Completion done;
      st = owner ? own.poll(done) : gv::ib::poll_cq<Ownership::kExclusive>(ep.scq, done);
    }
    if (warp) st = static_cast<Status>(__shfl_sync(0xffffffffu, static_cast<std::uint32_t>(st), 0));
  }
  if (owner) own.give_back();
  if (lane == 0) {
    *ns = total;
    *status = st;
  }
}

/// gpu-qgpu: posts n signaled 8-byte inline WRITEs (untimed), waits until the GPU engine has
/// written the last one's CQE (CQEs are written in order, so all n are ready), then times n
/// poll_cq calls by one thread, n polls by the QP's owner, or (32 lanes) poll_cq_warp calls
/// until n are taken.
__global__ void engine_poll_cost_kernel(const __grid_constant__ Endpoint ep, int n, PollMode mode, std::uint64_t* ns,
                                        Status* status) {
  const bool warp = mode == PollMode::kWarp;
  const bool owner = mode == PollMode::kOwner;
  if (!warp && threadIdx.x != 0) return;
  const std::uint64_t payload = 0x0807060504030201ull;
  const Sge sge{reinterpret_cast<std::uint64_t>(&payload), 8, 0};
  const SendWr wr = write_wr(&sge, reinterpret_cast<std::uint64_t>(ep.peer_in), ep.peer_rkey,
                             gv::ib::kWrInline | gv::ib::kWrSignaled);
  const gv::ib::CqHandle& cq = ep.scq;
  gv::ib::QpOwner own;
  Status st = Status::kOk;
  if (threadIdx.x == 0) {
    if (owner) st = own.take(ep.qp, cq);
    const std::uint64_t last = gv::sync::load_relaxed(&cq.state->claimed) + static_cast<std::uint64_t>(n) - 1;
    for (int i = 0; i < n && st == Status::kOk; ++i)
      st = owner ? own.post_send(wr) : gv::ib::post_send<Ownership::kExclusive>(ep.qp, wr);
    const m5::Cqe* cqe = cq.ring + (last & ((std::uint64_t{1} << cq.log_cqes) - 1));
    if (st == Status::kOk)
      st = gv::sync::bounded_wait([&] { return gv::ib::cqe_ready(gv::ib::cqe_tail(cq, cqe), last, cq.log_cqes); },
                                  gv::Budget{}, cq.abort);
  }
  if (warp) st = static_cast<Status>(__shfl_sync(0xffffffffu, static_cast<std::uint32_t>(st), 0));
  const std::uint64_t t0 = gv::sync::now_ns();
  if (st == Status::kOk) st = take_ready(mode, cq, own, n);
  const std::uint64_t t1 = gv::sync::now_ns();
  if (owner) own.give_back();
  if (threadIdx.x == 0) {
    *ns = t1 - t0;
    *status = st;
  }
}

/// The dissertation's Table 5.2 experiment: rings in GPU memory (gpu-qgpu) or in pinned host
/// memory (gpu-qhost), no executor (the kernel retires its own WQEs), after the placement's
/// floors, which it returns. Posts compare with the NIC-order post floor (the rings publish in
/// that order), polls with the poll floor.
Floors postpoll_synthetic(Harness& h, int reps, bool gpu) {
  constexpr int kCalls = 100000;
  const char* mode = gpu ? "gpu-qgpu" : "gpu-qhost";
  SyntheticQueues q(gpu, h.streams[0]);
  const Floors f = measure_floors(h, reps, q);
  report_floors("postpoll", mode, f);
  const double post_floor = median(f.post_nic);
  const double poll_floor = median(f.poll);
  for (const PostMode m : {PostMode::kThreadExclusive, PostMode::kThreadShared, PostMode::kThreadOwner, PostMode::kWarp,
                           PostMode::kWarpBatch}) {
    const int calls = m == PostMode::kWarpBatch ? kCalls / 32 : kCalls;
    const double wqes = m == PostMode::kWarpBatch ? calls * 32.0 : calls;
    // Each launch starts from a fresh ring: a queue keeps one ownership mode for life.
    report_cost("postpoll", mode, "none", name(m), static_cast<std::uint64_t>(wqes),
                per_call_ns(h, reps, wqes, std::string(mode) + " " + name(m),
                            [&](cudaStream_t s) {
                              q.fresh(s);
                              post_cost_kernel<<<1, warp_wide(m) ? 32 : 1, 0, s>>>(q.qp, q.cq, calls, m, h.samples,
                                                                                    h.status);
                            }),
                post_floor);
  }

  // poll: kBbs NOP WQEs in the ring, one ready CQE for each.
  constexpr int kCqes = static_cast<int>(SyntheticQueues::kBbs);
  for (const auto& p : kPolls)
    report_cost("postpoll", mode, "none", p.op, kCqes,
                per_call_ns(h, reps, kCqes, std::string(mode) + " " + p.op,
                            [&](cudaStream_t s) {
                              q.ready(s);
                              poll_cost_kernel<<<1, p.mode == PollMode::kWarp ? 32 : 1, 0, s>>>(q.qp, q.cq, kCqes, p.mode,
                                                                                               h.samples, h.status);
                            }),
                poll_floor);
  return f;
}

/// The same costs on a real gpu-qgpu QP (queues allocated by the soft provider, the GPU engine
/// executing): post_send by one thread and by an owner, a warp cooperating on one WQE, a warp
/// posting 32; the polls. `gpu_floors`: the floors in GPU memory; posts compare with the
/// one-fence post floor (the engine polls the doorbell record: QpHandle::record_polled).
void postpoll_engine(Harness& h, int reps, const Floors& gpu_floors) {
  constexpr int kChunks = 100;
  constexpr int kPollCqes = 1024;
  Shape shape;
  shape.sq_depth = 2048;  // 4096 WQEBBs: a chunk of one-WQEBB WQEs fits four times
  shape.cq_depth = 2048;
  Testbed tb(Mode::kGpuQGpu, 1, shape, h);
  const Endpoint& ep = tb.ep(0);
  if (ep.qp.executor != gv::sync::Scope::kGpu || ep.scq.executor != gv::sync::Scope::kGpu || !ep.qp.record_polled)
    throw gv::Error("postpoll: the gpu-qgpu QP's handles do not name the GPU engine as executor");
  const double post_floor = median(gpu_floors.post_record);
  const double poll_floor = median(gpu_floors.poll);
  for (const PostMode m : {PostMode::kThreadExclusive, PostMode::kThreadOwner, PostMode::kWarp, PostMode::kWarpBatch}) {
    const double wqes = double{kChunks} * kChunkWqes;
    report_cost("postpoll", "gpu-qgpu", "gpu-engine", name(m), static_cast<std::uint64_t>(wqes),
                per_call_ns(h, reps, wqes, std::string("gpu-qgpu engine ") + name(m),
                            [&](cudaStream_t s) {
                              engine_post_cost_kernel<<<1, warp_wide(m) ? 32 : 1, 0, s>>>(ep, m, kChunks, h.samples,
                                                                                          h.status);
                            }),
                post_floor);
  }
  for (const auto& p : kPolls)
    report_cost("postpoll", "gpu-qgpu", "gpu-engine", p.op, kPollCqes,
                per_call_ns(h, reps, kPollCqes, std::string("gpu-qgpu engine ") + p.op,
                            [&](cudaStream_t s) {
                              engine_poll_cost_kernel<<<1, p.mode == PollMode::kWarp ? 32 : 1, 0, s>>>(
                                  ep, kPollCqes, p.mode, h.samples, h.status);
                            }),
                poll_floor);
}

}  // namespace

void bench_postpoll(const Options& o, Harness& h) {
  const int reps = static_cast<int>(std::max<std::uint64_t>(o.iters / 100, 5));
  std::printf("# post_send / poll_cq cost on the GPU [ns per WQE or CQE], min/median/max of %d launches\n"
              "# executor none: synthetic rings the kernel retires itself; gpu-engine: a gpu-qgpu QP\n"
              "# x floor: the median over its placement's floor measured here (posts: the post floor of\n"
              "# the queue's publish order; polls: the poll floor)\n",
              reps);
  print_cost_header();
  // The synthetic rings first: they allocate and free CUDA memory, which must not happen while
  // a GPU engine is resident.
  Floors gpu_floors;
  if (o.has(Mode::kGpuQGpu)) gpu_floors = postpoll_synthetic(h, reps, true);
  if (o.has(Mode::kGpuQHost)) postpoll_synthetic(h, reps, false);
  if (o.has(Mode::kGpuQGpu) && o.engine) postpoll_engine(h, reps, gpu_floors);
}

}  // namespace gv::bench
