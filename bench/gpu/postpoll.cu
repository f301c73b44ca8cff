// gv_gpu_verbs postpoll: the cost on the GPU of post_send (one thread exclusive/shared, a warp
// writing one WQE, a warp posting 32 WQEs with one doorbell) and of poll_cq on a ready CQE (one
// thread, or a warp taking up to 32 with poll_cq_warp): on synthetic rings in GPU or pinned host
// memory with no executor (the dissertation's Table 5.2), and, for gpu-qgpu, on a real QP whose
// WQEs the GPU engine executes (exclusive, warp and warp-batch posting: a queue keeps one
// ownership mode for life). --no-engine leaves the real QP out, e.g. under ncu, which
// serialises kernel launches and so would stall behind the resident engine.
#include <cstdio>

#include "harness.hpp"

namespace gv::bench {
namespace {

enum class PostMode : int { kThreadExclusive, kThreadShared, kWarp, kWarpBatch };
const char* name(PostMode m) {
  switch (m) {
    case PostMode::kThreadExclusive: return "thread-exclusive";
    case PostMode::kThreadShared: return "thread-shared";
    case PostMode::kWarp: return "warp-cooperative";
    case PostMode::kWarpBatch: return "warp-batch32";
  }
  return "?";
}
GV_HD bool warp_wide(PostMode m) { return m == PostMode::kWarp || m == PostMode::kWarpBatch; }

/// Synthetic rings: posts `n` calls of one-WQEBB WQEs. With no executor, the kernel retires its
/// own WQEs every quarter ring: the count lives in a register, so the harness adds one compare
/// per call and one load and store per quarter ring to what is measured.
__global__ void post_cost_kernel(const __grid_constant__ gv::ib::QpHandle qp, int n, PostMode mode,
                                 std::uint64_t* ns, Status* status) {
  std::uint8_t payload[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const Sge sge{reinterpret_cast<std::uint64_t>(payload), 8, 0};
  SendWr wr;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.flags = gv::ib::kWrInline;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.remote_addr = 0x1000;
  wr.rkey = 0x55;
  Status st = Status::kOk;
  const bool warp = warp_wide(mode);
  if (!warp && threadIdx.x != 0) return;
  const int per_call = mode == PostMode::kWarpBatch ? 32 : 1;  // WQEBBs per call
  const int retire_every = static_cast<int>(qp.sq_bbs / 4) / per_call;
  __syncwarp(warp ? 0xffffffffu : 1u);
  const std::uint64_t t0 = gv::sync::now_ns();
  for (int i = 1; i <= n && st == Status::kOk; ++i) {
    switch (mode) {
      case PostMode::kThreadExclusive: st = gv::ib::post_send<Ownership::kExclusive>(qp, wr); break;
      case PostMode::kThreadShared: st = gv::ib::post_send<Ownership::kShared>(qp, wr); break;
      case PostMode::kWarp: st = gv::ib::post_send_warp<Ownership::kExclusive>(qp, wr); break;
      case PostMode::kWarpBatch: st = gv::ib::post_send_warp_batch<Ownership::kExclusive>(qp, wr); break;
    }
    if (i % retire_every == 0) {
      if (threadIdx.x == 0) gv::sync::store_release(&qp.state->sq.completed, gv::sync::load_relaxed(&qp.state->sq.reserved));
      if (warp) __syncwarp();
    }
  }
  const std::uint64_t t1 = gv::sync::now_ns();
  if (threadIdx.x == 0) {
    *ns = t1 - t0;
    *status = st;
  }
}

/// Synthetic rings: polls `n` ready CQEs (each retiring one NOP WQE) with one thread.
__global__ void poll_cost_kernel(const __grid_constant__ gv::ib::CqHandle cq, int n, std::uint64_t* ns,
                                 Status* status) {
  gv::ib::Completion c;
  Status st = Status::kOk;
  const std::uint64_t t0 = gv::sync::now_ns();
  for (int i = 0; i < n && st == Status::kOk; ++i) st = gv::ib::try_poll_cq<Ownership::kExclusive>(cq, c);
  const std::uint64_t t1 = gv::sync::now_ns();
  *ns = t1 - t0;
  *status = st;
}

/// A warp takes n CQEs that were all ready beforehand with poll_cq_warp (an empty poll is an error).
__device__ Status take_ready_warp(const gv::ib::CqHandle& cq, int n) {
  gv::ib::Completion c;
  Status st = Status::kOk;
  for (int got = 0; got < n && st == Status::kOk;) {
    const int k = gv::ib::poll_cq_warp(cq, c, &st);
    if (k == 0 && st == Status::kEmpty) st = Status::kTimeout;
    got += k;
  }
  return st;
}

/// The same with a warp taking up to 32 ready CQEs per poll_cq_warp call (launched with 32 lanes).
__global__ void poll_warp_cost_kernel(const __grid_constant__ gv::ib::CqHandle cq, int n, std::uint64_t* ns,
                                      Status* status) {
  const std::uint64_t t0 = gv::sync::now_ns();
  const Status st = take_ready_warp(cq, n);
  const std::uint64_t t1 = gv::sync::now_ns();
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
/// posted, as it would in use. Exclusive ownership only: a queue keeps one mode for life.
__global__ void engine_post_cost_kernel(const __grid_constant__ Endpoint ep, PostMode mode, int chunks,
                                        std::uint64_t* ns, Status* status) {
  const bool warp = warp_wide(mode);
  if (!warp && threadIdx.x != 0) return;
  const unsigned lane = threadIdx.x % 32;
  const std::uint64_t payload = 0x0807060504030201ull + lane;
  const Sge sge{reinterpret_cast<std::uint64_t>(&payload), 8, 0};
  SendWr wr;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.remote_addr = reinterpret_cast<std::uint64_t>(ep.peer_in);
  wr.rkey = ep.peer_rkey;
  const int calls = mode == PostMode::kWarpBatch ? kChunkWqes / 32 : kChunkWqes;
  std::uint64_t total = 0;
  Status st = Status::kOk;
  for (int c = 0; c < chunks && st == Status::kOk; ++c) {
    if (warp) __syncwarp();
    const std::uint64_t t0 = gv::sync::now_ns();
    for (int i = 0; i < calls && st == Status::kOk; ++i) {
      const bool last = i + 1 == calls && (mode != PostMode::kWarpBatch || lane == 31);
      wr.flags = gv::ib::kWrInline | (last ? gv::ib::kWrSignaled : 0u);
      if (mode == PostMode::kWarp) st = gv::ib::post_send_warp<Ownership::kExclusive>(ep.qp, wr);
      else if (mode == PostMode::kWarpBatch) st = gv::ib::post_send_warp_batch<Ownership::kExclusive>(ep.qp, wr);
      else st = gv::ib::post_send<Ownership::kExclusive>(ep.qp, wr);
    }
    total += gv::sync::now_ns() - t0;
    if (lane == 0 && st == Status::kOk) {
      gv::ib::Completion done;
      st = gv::ib::poll_cq<Ownership::kExclusive>(ep.scq, done);
    }
    if (warp) st = static_cast<Status>(__shfl_sync(0xffffffffu, static_cast<std::uint32_t>(st), 0));
  }
  if (lane == 0) {
    *ns = total;
    *status = st;
  }
}

/// gpu-qgpu: posts n signaled 8-byte inline WRITEs (untimed), waits until the GPU engine has
/// written the last one's CQE (CQEs are written in order, so all n are ready), then times n
/// poll_cq calls by one thread, or (`warp`, 32 lanes) poll_cq_warp calls until n are taken.
__global__ void engine_poll_cost_kernel(const __grid_constant__ Endpoint ep, int n, bool warp, std::uint64_t* ns,
                                        Status* status) {
  if (!warp && threadIdx.x != 0) return;
  const std::uint64_t payload = 0x0807060504030201ull;
  const Sge sge{reinterpret_cast<std::uint64_t>(&payload), 8, 0};
  SendWr wr;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.flags = gv::ib::kWrInline | gv::ib::kWrSignaled;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.remote_addr = reinterpret_cast<std::uint64_t>(ep.peer_in);
  wr.rkey = ep.peer_rkey;
  Status st = Status::kOk;
  const gv::ib::CqHandle& cq = ep.scq;
  if (threadIdx.x == 0) {
    for (int i = 0; i < n && st == Status::kOk; ++i) st = gv::ib::post_send<Ownership::kExclusive>(ep.qp, wr);
    const std::uint64_t last = gv::sync::load_relaxed(&cq.state->claimed) + static_cast<std::uint64_t>(n) - 1;
    const m5::Cqe* cqe = cq.ring + (last & ((std::uint64_t{1} << cq.log_cqes) - 1));
    if (st == Status::kOk)
      st = gv::sync::bounded_wait([&] { return gv::ib::cqe_ready(gv::ib::cqe_tail(cq, cqe), last, cq.log_cqes); },
                                  gv::Budget{}, cq.abort);
  }
  if (warp) st = static_cast<Status>(__shfl_sync(0xffffffffu, static_cast<std::uint32_t>(st), 0));
  const std::uint64_t t0 = gv::sync::now_ns();
  if (warp) {
    if (st == Status::kOk) st = take_ready_warp(cq, n);
  } else {
    gv::ib::Completion c;
    for (int i = 0; i < n && st == Status::kOk; ++i) st = gv::ib::try_poll_cq<Ownership::kExclusive>(cq, c);
  }
  if (threadIdx.x == 0) {
    *ns = gv::sync::now_ns() - t0;
    *status = st;
  }
}

/// Launches a cost kernel `reps` + 1 times on the harness's GPU 0 stream (the first launch
/// warms up) and returns the times it reported divided by `per_launch`: ns per WQE or CQE.
template <class Launch>
std::vector<double> per_call_ns(Harness& h, int reps, double per_launch, const std::string& what, Launch&& launch) {
  CK(cudaSetDevice(0));
  std::vector<double> v;
  for (int r = 0; r <= reps; ++r) {
    h.status[0] = kNotReported;
    launch(h.streams[0]);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(h.streams[0]));
    if (h.status[0] != Status::kOk)
      throw gv::Error("postpoll " + what + ": " +
                      (h.status[0] == kNotReported ? std::string("the kernel did not report") : gv::to_string(h.status[0])));
    if (r > 0) v.push_back(static_cast<double>(h.samples[0]) / per_launch);
  }
  return v;
}

void report_cost(const char* mode, const char* executor, const char* op, std::uint64_t iters, std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const double med = v[v.size() / 2];
  std::printf(" %-13s %-11s %-18s %-10.2f %-10.2f %.2f\n", mode, executor, op, v.front(), med, v.back());
  char b[320];
  std::snprintf(b, sizeof(b),
                "{\"bench\":\"postpoll\",\"mode\":\"%s\",\"variant\":\"%s\",\"executor\":\"%s\",\"bytes\":8,\"iters\":%llu,"
                "\"ns_min\":%.2f,\"ns_median\":%.2f,\"ns_max\":%.2f}",
                mode, op, executor, static_cast<unsigned long long>(iters), v.front(), med, v.back());
  g_json.row(b);
}

/// Synthetic queue memory on the GPU or in pinned, mapped host memory; filled on `s` (the cost
/// kernels run there). No GPU engine is open while it exists.
struct Placed {
  bool gpu;
  cudaStream_t s;
  std::vector<void*> ptrs;
  template <class T>
  T* alloc(std::size_t bytes) {
    void* p = nullptr;
    if (gpu) {
      CK(cudaMalloc(&p, bytes));
      ptrs.push_back(p);
      CK(cudaMemsetAsync(p, 0, bytes, s));
    } else {
      CK(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
      ptrs.push_back(p);
      std::memset(p, 0, bytes);
    }
    return static_cast<T*>(p);
  }
  void upload(void* dst, const void* src, std::size_t n) { CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s)); }
  ~Placed() {
    for (void* p : ptrs) gpu ? (void)cudaFree(p) : (void)cudaFreeHost(p);
  }
};

/// The dissertation's Table 5.2 experiment: rings in GPU memory (gpu-qgpu) or in pinned host
/// memory (gpu-qhost), no executor (the kernel retires its own WQEs).
void postpoll_synthetic(Harness& h, int reps, bool gpu) {
  constexpr std::uint32_t kBbs = 4096;
  constexpr int kCalls = 100000;
  const char* mode = gpu ? "gpu-qgpu" : "gpu-qhost";
  CK(cudaSetDevice(0));
  Placed mem{gpu, h.streams[0], {}};      // rings, doorbell records, doorbell: where the executor reads
  Placed gpu_mem{true, h.streams[0], {}};  // counters: always where their users (this GPU's threads) are
  gv::ib::QpHandle qp;
  qp.qpn = 0x99;
  qp.sq = mem.alloc<std::byte>(kBbs * 64);
  qp.dbrec = mem.alloc<m5::QpDbrec>(64);
  qp.doorbell = mem.alloc<std::uint64_t>(64);
  qp.state = gpu_mem.alloc<gv::ib::QpState>(sizeof(gv::ib::QpState));  // posters' counters
  qp.executor = gpu ? gv::sync::Scope::kGpu : gv::sync::Scope::kSystem;
  qp.sq_bbs = kBbs;
  qp.max_send_sge = 1;
  qp.max_inline = 64;
  for (const PostMode m : {PostMode::kThreadExclusive, PostMode::kThreadShared, PostMode::kWarp, PostMode::kWarpBatch}) {
    const int calls = m == PostMode::kWarpBatch ? kCalls / 32 : kCalls;
    const double wqes = m == PostMode::kWarpBatch ? calls * 32.0 : calls;
    // Each launch starts from a fresh ring: a queue keeps one ownership mode for life.
    report_cost(mode, "none", name(m), static_cast<std::uint64_t>(wqes),
                per_call_ns(h, reps, wqes, std::string(mode) + " " + name(m), [&](cudaStream_t s) {
                  CK(cudaMemsetAsync(qp.state, 0, sizeof(gv::ib::QpState), s));
                  post_cost_kernel<<<1, warp_wide(m) ? 32 : 1, 0, s>>>(qp, calls, m, h.samples, h.status);
                }));
  }

  // poll: kBbs NOP WQEs in the ring, one ready CQE for each.
  constexpr std::uint32_t kCqes = kBbs;
  gv::ib::CqHandle cq;
  cq.cqn = 1;
  cq.ring = mem.alloc<m5::Cqe>(kCqes * 64);
  cq.dbrec = mem.alloc<m5::CqDbrec>(64);
  cq.state = gpu_mem.alloc<gv::ib::CqState>(sizeof(gv::ib::CqState));
  cq.executor = qp.executor;
  cq.log_cqes = gv::ib::log2_pow2(kCqes);
  cq.send_qp = qp.state;
  cq.send_sq = qp.sq;
  cq.send_sq_bbs = kBbs;
  cq.send_qpn = qp.qpn;
  std::vector<std::byte> sq(kBbs * 64);
  std::vector<m5::Cqe> cqes(kCqes);
  for (std::uint32_t i = 0; i < kBbs; ++i) {
    const auto c = gv::ib::make_ctrl_seg(static_cast<std::uint16_t>(i), m5::kOpNop, 0, qp.qpn, m5::kCtrlCqUpdate, 1, 0, {});
    std::memcpy(sq.data() + i * 64, &c, 16);
    cqes[i] = gv::ib::make_req_cqe(qp.qpn, m5::kOpNop, static_cast<std::uint16_t>(i), 0);  // owner 0: first lap
  }
  gv::ib::QpState qs{};
  gv::ib::wq_start_at(&qs.sq, 0);
  qs.sq.reserved = qs.sq.published = kBbs;  // kBbs NOPs posted, none completed
  const gv::ib::CqState cs{};
  report_cost(mode, "none", "poll_cq(ready)", kCqes,
              per_call_ns(h, reps, kCqes, std::string(mode) + " poll_cq", [&](cudaStream_t s) {
                // The uploads are ordered before the kernel on its stream (their sources outlive it).
                mem.upload(qp.sq, sq.data(), sq.size());
                mem.upload(cq.ring, cqes.data(), kCqes * 64);
                mem.upload(qp.state, &qs, sizeof(qs));
                mem.upload(cq.state, &cs, sizeof(cs));
                poll_cost_kernel<<<1, 1, 0, s>>>(cq, kCqes, h.samples, h.status);
              }));
  report_cost(mode, "none", "poll_cq_warp(ready)", kCqes,
              per_call_ns(h, reps, kCqes, std::string(mode) + " poll_cq_warp", [&](cudaStream_t s) {
                mem.upload(qp.sq, sq.data(), sq.size());
                mem.upload(cq.ring, cqes.data(), kCqes * 64);
                mem.upload(qp.state, &qs, sizeof(qs));
                mem.upload(cq.state, &cs, sizeof(cs));
                poll_warp_cost_kernel<<<1, 32, 0, s>>>(cq, kCqes, h.samples, h.status);
              }));
}

/// The same costs on a real gpu-qgpu QP (queues allocated by the soft provider, the GPU engine
/// executing): post_send by one thread, a warp cooperating on one WQE, a warp posting 32.
void postpoll_engine(Harness& h, int reps) {
  constexpr int kChunks = 100;
  constexpr int kPollCqes = 1024;
  Shape shape;
  shape.sq_depth = 2048;  // 4096 WQEBBs: a chunk of one-WQEBB WQEs fits four times
  shape.cq_depth = 2048;
  Testbed tb(Mode::kGpuQGpu, 1, shape, h);
  const Endpoint& ep = tb.ep(0);
  if (ep.qp.executor != gv::sync::Scope::kGpu || ep.scq.executor != gv::sync::Scope::kGpu)
    throw gv::Error("postpoll: the gpu-qgpu QP's handles do not name the GPU as executor");
  for (const PostMode m : {PostMode::kThreadExclusive, PostMode::kWarp, PostMode::kWarpBatch}) {
    const double wqes = double{kChunks} * kChunkWqes;
    report_cost("gpu-qgpu", "gpu-engine", name(m), static_cast<std::uint64_t>(wqes),
                per_call_ns(h, reps, wqes, std::string("gpu-qgpu engine ") + name(m), [&](cudaStream_t s) {
                  engine_post_cost_kernel<<<1, warp_wide(m) ? 32 : 1, 0, s>>>(ep, m, kChunks, h.samples, h.status);
                }));
  }
  report_cost("gpu-qgpu", "gpu-engine", "poll_cq(ready)", kPollCqes,
              per_call_ns(h, reps, kPollCqes, "gpu-qgpu engine poll_cq", [&](cudaStream_t s) {
                engine_poll_cost_kernel<<<1, 1, 0, s>>>(ep, kPollCqes, false, h.samples, h.status);
              }));
  report_cost("gpu-qgpu", "gpu-engine", "poll_cq_warp(ready)", kPollCqes,
              per_call_ns(h, reps, kPollCqes, "gpu-qgpu engine poll_cq_warp", [&](cudaStream_t s) {
                engine_poll_cost_kernel<<<1, 32, 0, s>>>(ep, kPollCqes, true, h.samples, h.status);
              }));
}

}  // namespace

void bench_postpoll(const Options& o, Harness& h) {
  const int reps = static_cast<int>(std::max<std::uint64_t>(o.iters / 100, 5));
  std::printf("# post_send / poll_cq cost on the GPU [ns per WQE or CQE], min/median/max of %d launches\n"
              "# executor none: synthetic rings the kernel retires itself; gpu-engine: a gpu-qgpu QP\n"
              " %-13s %-11s %-18s %-10s %-10s %s\n",
              reps, "mode", "executor", "operation", "min", "median", "max");
  // The synthetic rings first: they allocate and free CUDA memory, which must not happen while
  // a GPU engine is resident.
  if (o.has(Mode::kGpuQGpu)) postpoll_synthetic(h, reps, true);
  if (o.has(Mode::kGpuQHost)) postpoll_synthetic(h, reps, false);
  if (o.has(Mode::kGpuQGpu) && o.engine) postpoll_engine(h, reps);
}

}  // namespace gv::bench
