// gv_gpu_verbs: the device API measured on the GPU.
//
//   postpoll   cost on the GPU of post_send (one thread exclusive/shared, a warp writing one
//              WQE, a warp posting 32 WQEs with one doorbell) and of poll_cq on a ready CQE,
//              with the rings in GPU memory or in pinned host memory (the dissertation's
//              Table 5.2 experiment). No executor: the kernel retires its own WQEs.
//   pingpong   GPU-controlled RDMA WRITE ping-pong through the soft provider (queues and
//              buffers in pinned host memory, executed by its CPU engine): two blocks, one per
//              QP, each polling the last byte of its buffer. Half round trip, perftest columns.
//   atomics    GPU-controlled FETCH_ADD and CMP_SWP latency through the soft provider.
//   msgrate    GPU-controlled message rate, 8 B inline WRITEs, 1..32 QPs with a block each,
//              through the soft provider (its CPU engine is the executor: it bounds the rate).
//   anchors    what the hardware gives without any verbs: a flag ping-pong between two blocks
//              through GPU memory and through pinned host memory, and between two GPUs by peer
//              stores when two are present; cudaMemcpyPeerAsync latency.
// All device time is read in-kernel with %globaltimer; --json prints one object per row.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <gpuverbs/host/verbs.hpp>
#include <gpuverbs/ib.hpp>

#include "../common/stats.hpp"

namespace {

using gv::Status;
using gv::ib::Ownership;
using gv::ib::SendWr;
using gv::ib::Sge;
using gv::ib::WrOpcode;
namespace m5 = gv::ib::mlx5;

#define CK(expr)                                                                                 \
  do {                                                                                           \
    const cudaError_t e_ = (expr);                                                               \
    if (e_ != cudaSuccess) throw std::runtime_error(std::string(#expr) + ": " + cudaGetErrorString(e_)); \
  } while (0)

bool g_json = false;

__device__ __forceinline__ std::uint64_t gtime() { return gv::sync::now_ns(); }

// ---- postpoll --------------------------------------------------------------------------------

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

/// Posts `n` calls of one-WQEBB WQEs. With no executor, the kernel retires its own WQEs every
/// quarter ring: the count lives in a register, so the harness adds one compare per call and
/// one load and store per quarter ring to what is measured.
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
  const bool warp = mode == PostMode::kWarp || mode == PostMode::kWarpBatch;
  if (!warp && threadIdx.x != 0) return;
  const int per_call = mode == PostMode::kWarpBatch ? 32 : 1;  // WQEBBs per call
  const int retire_every = static_cast<int>(qp.sq_bbs / 4) / per_call;
  __syncwarp(warp ? 0xffffffffu : 1u);
  const std::uint64_t t0 = gtime();
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
  const std::uint64_t t1 = gtime();
  if (threadIdx.x == 0) {
    *ns = t1 - t0;
    *status = st;
  }
}

/// Polls `n` ready CQEs (each retiring one NOP WQE) with one thread.
__global__ void poll_cost_kernel(const __grid_constant__ gv::ib::CqHandle cq, int n, std::uint64_t* ns,
                                 Status* status) {
  gv::ib::Completion c;
  Status st = Status::kOk;
  const std::uint64_t t0 = gtime();
  for (int i = 0; i < n && st == Status::kOk; ++i) st = gv::ib::try_poll_cq<Ownership::kExclusive>(cq, c);
  const std::uint64_t t1 = gtime();
  *ns = t1 - t0;
  *status = st;
}

/// Queue memory placed on the GPU or in pinned, mapped host memory.
struct Placed {
  bool gpu;
  std::vector<void*> ptrs;
  template <class T>
  T* alloc(std::size_t bytes) {
    void* p = nullptr;
    if (gpu) {
      CK(cudaMalloc(&p, bytes));
      CK(cudaMemset(p, 0, bytes));
    } else {
      CK(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
      std::memset(p, 0, bytes);
    }
    ptrs.push_back(p);
    return static_cast<T*>(p);
  }
  void upload(void* dst, const void* src, std::size_t n) { CK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice)); }
  ~Placed() {
    for (void* p : ptrs) gpu ? (void)cudaFree(p) : (void)cudaFreeHost(p);
  }
};

void run_postpoll(int reps) {
  constexpr std::uint32_t kBbs = 4096;
  constexpr int kCalls = 100000;
  if (!g_json) std::printf("# post_send / poll_cq cost on the GPU [ns per WQE or CQE], median of %d launches\n"
                           " %-9s %-18s %-10s %-10s %-10s\n", reps, "queues", "operation", "min", "median", "max");
  std::uint64_t* d_ns;
  Status* d_st;
  CK(cudaMallocHost(&d_ns, sizeof(std::uint64_t)));
  CK(cudaMallocHost(&d_st, sizeof(Status)));
  for (const bool gpu : {true, false}) {
    Placed mem{gpu, {}};      // rings, doorbell records, doorbell: where the executor reads
    Placed gpu_mem{true, {}};  // counters: always where their users (this GPU's threads) are
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
    auto report = [&](const char* op, std::vector<double> v) {
      std::sort(v.begin(), v.end());
      const double med = v[v.size() / 2];
      if (g_json)
        std::printf("{\"bench\":\"postpoll\",\"queues\":\"%s\",\"op\":\"%s\",\"ns_min\":%.2f,\"ns_median\":%.2f,\"ns_max\":%.2f}\n",
                    gpu ? "gpu" : "host", op, v.front(), med, v.back());
      else
        std::printf(" %-9s %-18s %-10.2f %-10.2f %-10.2f\n", gpu ? "gpu" : "host", op, v.front(), med, v.back());
    };
    for (PostMode m : {PostMode::kThreadExclusive, PostMode::kThreadShared, PostMode::kWarp, PostMode::kWarpBatch}) {
      std::vector<double> per;
      const bool warp = m == PostMode::kWarp || m == PostMode::kWarpBatch;
      const int calls = m == PostMode::kWarpBatch ? kCalls / 32 : kCalls;
      for (int r = 0; r < reps + 1; ++r) {
        post_cost_kernel<<<1, warp ? 32 : 1>>>(qp, calls, m, d_ns, d_st);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        if (*d_st != Status::kOk) throw std::runtime_error(std::string("post_send failed: ") + gv::to_string(*d_st));
        const double wqes = m == PostMode::kWarpBatch ? calls * 32.0 : calls;
        if (r > 0) per.push_back(static_cast<double>(*d_ns) / wqes);  // launch 0 warms up
      }
      report(name(m), per);
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
      cqes[i] = {};
      cqes[i].sop_drop_qpn = gv::be32::from((std::uint32_t{m5::kOpNop} << 24) | qp.qpn);
      cqes[i].wqe_counter = gv::be16::from(static_cast<std::uint16_t>(i));
      cqes[i].op_own = static_cast<std::uint8_t>(m5::kCqeReq << 4);  // owner 0: first lap
    }
    std::vector<double> per;
    for (int r = 0; r < reps + 1; ++r) {
      gv::ib::QpState qs{};
      gv::ib::wq_start_at(&qs.sq, 0);
      qs.sq.reserved = qs.sq.published = kBbs;  // kBbs NOPs posted, none completed
      gv::ib::CqState cs{};
      mem.upload(qp.sq, sq.data(), sq.size());
      mem.upload(cq.ring, cqes.data(), kCqes * 64);
      mem.upload(qp.state, &qs, sizeof(qs));
      mem.upload(cq.state, &cs, sizeof(cs));
      poll_cost_kernel<<<1, 1>>>(cq, kCqes, d_ns, d_st);
      CK(cudaGetLastError());
      CK(cudaDeviceSynchronize());
      if (*d_st != Status::kOk) throw std::runtime_error(std::string("poll_cq failed: ") + gv::to_string(*d_st));
      if (r > 0) per.push_back(static_cast<double>(*d_ns) / kCqes);
    }
    report("poll_cq(ready)", per);
  }
  cudaFreeHost(d_ns);
  cudaFreeHost(d_st);
}

// ---- GPU-controlled ping-pong through the soft provider ------------------------------------

struct PingSide {
  gv::ib::QpHandle qp;
  gv::ib::CqHandle cq;
  std::uint8_t* in;    // the peer writes here; we poll in[bytes-1]
  std::uint8_t* out;   // our outgoing message (registered)
  std::uint8_t* peer_in;
  std::uint32_t lkey, peer_rkey;
};

/// Block b plays side b. Block 0 times each round trip.
__global__ void gpu_pingpong_kernel(PingSide a, PingSide b, std::uint32_t bytes, int iters, bool inl,
                                    std::uint64_t* rtt_ns, Status* status) {
  const PingSide& me = blockIdx.x == 0 ? a : b;
  const bool starts = blockIdx.x == 0;
  if (threadIdx.x != 0) return;
  Sge sge{reinterpret_cast<std::uint64_t>(me.out), bytes, me.lkey};
  SendWr wr;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.remote_addr = reinterpret_cast<std::uint64_t>(me.peer_in);
  wr.rkey = me.peer_rkey;
  Status st = Status::kOk;
  auto send = [&](int i) {
    me.out[bytes - 1] = static_cast<std::uint8_t>(i + 1);
    wr.flags = (i % 32 == 31 ? gv::ib::kWrSignaled : 0u) | (inl ? gv::ib::kWrInline : 0u);
    st = gv::ib::post_send<Ownership::kExclusive>(me.qp, wr);
    if (st == Status::kOk && (wr.flags & gv::ib::kWrSignaled)) {
      gv::ib::Completion c;
      st = gv::ib::poll_cq<Ownership::kExclusive>(me.cq, c);
    }
  };
  auto receive = [&](int i) {
    const auto want = static_cast<std::uint8_t>(i + 1);
    // The CPU engine writes the message: acquire at system scope.
    st = gv::sync::bounded_wait(
        [&] { return gv::sync::load_acquire(&me.in[bytes - 1], gv::sync::Scope::kSystem) == want; }, gv::Budget{},
        me.qp.abort);
  };
  for (int i = 0; i < iters && st == Status::kOk; ++i) {
    const std::uint64_t t0 = gtime();
    if (starts) {
      send(i);
      if (st == Status::kOk) receive(i);
      rtt_ns[i] = gtime() - t0;
    } else {
      receive(i);
      if (st == Status::kOk) send(i);
    }
  }
  status[blockIdx.x] = st;
}

void run_pingpong(const std::vector<std::uint64_t>& sizes, int iters, int warmup) {
  gv::DeviceOptions o;
  o.map_to_gpus = true;
  const std::uint64_t max_bytes = *std::max_element(sizes.begin(), sizes.end());
  o.arena_bytes = std::max<std::size_t>(std::size_t{64} << 20, 4 * max_bytes + (std::size_t{16} << 20));
  auto dev = gv::Device::open("soft", o);
  auto pd = dev->alloc_pd();
  gv::QpCaps caps;
  caps.max_inline = 64;
  std::unique_ptr<gv::CompletionQueue> cq[2];
  std::unique_ptr<gv::QueuePair> qp[2];
  std::unique_ptr<gv::MemoryRegion> mr[2];
  std::uint8_t* buf[2];
  for (int i = 0; i < 2; ++i) {
    cq[i] = dev->create_cq(256);
    qp[i] = pd->create_qp(*cq[i], *cq[i], caps);
    buf[i] = static_cast<std::uint8_t*>(dev->alloc(2 * max_bytes));
    mr[i] = pd->reg_mr(buf[i], 2 * max_bytes, gv::kLocalWrite | gv::kRemoteWrite);
  }
  qp[0]->connect(qp[1]->info());
  qp[1]->connect(qp[0]->info());
  PingSide s[2];
  for (int i = 0; i < 2; ++i) {
    s[i].qp = qp[i]->device_handle();
    s[i].cq = cq[i]->device_handle();
    s[i].in = buf[i];
    s[i].out = buf[i] + max_bytes;
    s[i].peer_in = buf[1 - i];
    s[i].lkey = mr[i]->lkey();
    s[i].peer_rkey = mr[1 - i]->rkey();
  }
  std::uint64_t* rtt;
  Status* st;
  CK(cudaMallocHost(&rtt, sizeof(std::uint64_t) * (iters + warmup)));
  CK(cudaMallocHost(&st, 2 * sizeof(Status)));
  if (!g_json) {
    std::printf("# GPU-controlled RDMA WRITE ping-pong, soft provider (CPU engine), queues+buffers in pinned host memory\n");
    gv::bench::print_latency_header(stdout);
  }
  for (const std::uint64_t bytes : sizes) {
    std::memset(buf[0], 0, 2 * max_bytes);
    std::memset(buf[1], 0, 2 * max_bytes);
    const int n = (bytes > 65536 ? std::min(iters, 100) : iters) + warmup;
    gpu_pingpong_kernel<<<2, 32>>>(s[0], s[1], static_cast<std::uint32_t>(bytes), n, bytes <= caps.max_inline, rtt, st);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    if (st[0] != Status::kOk || st[1] != Status::kOk)
      throw std::runtime_error(std::string("GPU ping-pong failed: ") + gv::to_string(st[0]) + " / " + gv::to_string(st[1]));
    std::vector<double> half;
    for (int i = warmup; i < n; ++i) half.push_back(static_cast<double>(rtt[i]) / 2000.0);
    const auto stats = gv::bench::summarize(half);
    if (g_json)
      std::printf("%s\n", gv::bench::latency_json("pingpong", "\"provider\":\"soft-cpu-engine\",\"mode\":\"gpu-controlled\",\"queues\":\"host\",\"poll\":\"last_byte\",", bytes, half.size(), stats).c_str());
    else
      gv::bench::print_latency_row(stdout, bytes, half.size(), stats);
  }
  cudaFreeHost(rtt);
  cudaFreeHost(st);
  for (int i = 0; i < 2; ++i) {
    mr[i].reset();
    dev->free(buf[i]);
  }
}

// ---- atomics and message rate through the soft provider ------------------------------------

/// A soft device mapped into the GPU with `n` connected QP pairs: requesters [0, n), their
/// responders [n, 2n), and a registered buffer.
struct SoftPairs {
  std::unique_ptr<gv::Device> dev;
  std::unique_ptr<gv::ProtectionDomain> pd;
  std::vector<std::unique_ptr<gv::CompletionQueue>> cq;
  std::vector<std::unique_ptr<gv::QueuePair>> qp;
  std::uint8_t* buf = nullptr;
  std::unique_ptr<gv::MemoryRegion> mr;
  SoftPairs(int n, std::size_t bytes) {
    gv::DeviceOptions o;
    o.map_to_gpus = true;
    dev = gv::Device::open("soft", o);
    pd = dev->alloc_pd();
    gv::QpCaps caps;
    caps.sq_depth = 256;
    for (int i = 0; i < 2 * n; ++i) {
      cq.push_back(dev->create_cq(1024));
      qp.push_back(pd->create_qp(*cq.back(), *cq.back(), caps));
    }
    for (int i = 0; i < n; ++i) {
      qp[i]->connect(qp[n + i]->info());
      qp[n + i]->connect(qp[i]->info());
    }
    buf = static_cast<std::uint8_t*>(dev->alloc(bytes));
    std::memset(buf, 0, bytes);
    mr = pd->reg_mr(buf, bytes, gv::kLocalWrite | gv::kRemoteWrite | gv::kRemoteRead | gv::kRemoteAtomic);
  }
  ~SoftPairs() {
    mr.reset();
    dev->free(buf);
  }
};

/// One thread: n atomics on one remote word, each waited for; per-operation latency.
__global__ void atomic_latency_kernel(const __grid_constant__ gv::ib::QpHandle qp,
                                      const __grid_constant__ gv::ib::CqHandle cq, bool cas, std::uint64_t* target,
                                      std::uint64_t* result, std::uint32_t lkey, std::uint32_t rkey, int n,
                                      std::uint64_t* ns, Status* status) {
  Sge sge{reinterpret_cast<std::uint64_t>(result), 8, lkey};
  SendWr wr;
  wr.opcode = cas ? WrOpcode::kAtomicCmpSwp : WrOpcode::kAtomicFetchAdd;
  wr.flags = gv::ib::kWrSignaled;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.remote_addr = reinterpret_cast<std::uint64_t>(target);
  wr.rkey = rkey;
  Status st = Status::kOk;
  for (int i = 0; i < n && st == Status::kOk; ++i) {
    wr.compare_add = cas ? static_cast<std::uint64_t>(i) : 1;  // CAS i -> i+1 succeeds every time
    wr.swap = static_cast<std::uint64_t>(i) + 1;
    const std::uint64_t t0 = gtime();
    st = gv::ib::post_send<Ownership::kExclusive>(qp, wr);
    gv::ib::Completion c;
    if (st == Status::kOk) st = gv::ib::poll_cq<Ownership::kExclusive>(cq, c);
    ns[i] = gtime() - t0;
    // The value before the operation comes back: i for both (the counter starts at 0).
    if (st == Status::kOk && gv::sync::load_acquire(result, gv::sync::Scope::kSystem) != static_cast<std::uint64_t>(i))
      st = Status::kInvalidArgument;
  }
  *status = st;
}

void run_atomics(int iters) {
  SoftPairs p(1, 4096);
  std::uint64_t* ns;
  Status* st;
  CK(cudaMallocHost(&ns, sizeof(std::uint64_t) * iters));
  CK(cudaMallocHost(&st, sizeof(Status)));
  if (!g_json) {
    std::printf("# GPU-controlled atomic latency, soft provider (CPU engine), queues in pinned host memory [us]\n");
    gv::bench::print_latency_header(stdout);
  }
  for (const bool cas : {false, true}) {
    auto* target = reinterpret_cast<std::uint64_t*>(p.buf);
    *target = 0;
    atomic_latency_kernel<<<1, 1>>>(p.qp[0]->device_handle(), p.cq[0]->device_handle(), cas, target,
                                    reinterpret_cast<std::uint64_t*>(p.buf + 64), p.mr->lkey(), p.mr->rkey(), iters, ns, st);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    if (*st != Status::kOk) throw std::runtime_error(std::string("atomics failed: ") + gv::to_string(*st));
    if (*target != static_cast<std::uint64_t>(iters)) throw std::runtime_error("atomics: the remote counter is wrong");
    std::vector<double> us;
    for (int i = iters / 10; i < iters; ++i) us.push_back(static_cast<double>(ns[i]) / 1000.0);
    const auto s = gv::bench::summarize(us);
    if (g_json)
      std::printf("%s\n", gv::bench::latency_json("atomic", std::string("\"op\":\"") + (cas ? "cmp_swp" : "fetch_add") +
                                                      "\",\"mode\":\"gpu-controlled\",\"provider\":\"soft-cpu-engine\",",
                                                  8, us.size(), s).c_str());
    else {
      std::printf(" %s\n", cas ? "CMP_SWP" : "FETCH_ADD");
      gv::bench::print_latency_row(stdout, 8, us.size(), s);
    }
  }
  cudaFreeHost(ns);
  cudaFreeHost(st);
}

/// Block b drives requester QP b: `n` 8-byte inline WRITEs, one CQE per 32.
__global__ void msgrate_kernel(const gv::ib::QpHandle* qps, const gv::ib::CqHandle* cqs, std::uint64_t remote,
                               std::uint32_t rkey, int n, std::uint64_t* ns, Status* status) {
  if (threadIdx.x != 0) return;
  const gv::ib::QpHandle qp = qps[blockIdx.x];
  const gv::ib::CqHandle cq = cqs[blockIdx.x];
  std::uint64_t payload = blockIdx.x;
  Sge sge{reinterpret_cast<std::uint64_t>(&payload), 8, 0};
  SendWr wr;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.remote_addr = remote + 8 * blockIdx.x;
  wr.rkey = rkey;
  Status st = Status::kOk;
  const std::uint64_t t0 = gtime();
  for (int i = 0; i < n && st == Status::kOk; ++i) {
    wr.flags = gv::ib::kWrInline | (i % 32 == 31 || i + 1 == n ? gv::ib::kWrSignaled : 0u);
    st = gv::ib::post_send<Ownership::kExclusive>(qp, wr);
    if (st == Status::kOk && (wr.flags & gv::ib::kWrSignaled)) {
      gv::ib::Completion c;
      // Keep up to 4 signaled batches in flight: wait only when the ring is 3/4 full.
      if (i + 1 == n) {
        while (st == Status::kOk && qp.state->sq.completed != qp.state->sq.reserved) st = gv::ib::poll_cq<Ownership::kExclusive>(cq, c);
      } else if (qp.state->sq.reserved - qp.state->sq.completed > 3 * qp.sq_bbs / 4) {
        st = gv::ib::poll_cq<Ownership::kExclusive>(cq, c);
      }
    }
  }
  ns[blockIdx.x] = gtime() - t0;
  status[blockIdx.x] = st;
}

void run_msgrate(int per_qp) {
  if (!g_json)
    std::printf("# GPU-controlled message rate, 8 B inline WRITEs, one block per QP, soft provider (CPU engine)\n"
                " %-6s %-12s %-16s\n", "#QPs", "#messages", "MsgRate[Mmsg/s]");
  for (const int nqp : {1, 2, 4, 8, 16, 32}) {
    SoftPairs p(nqp, 4096);
    std::vector<gv::ib::QpHandle> hq;
    std::vector<gv::ib::CqHandle> hc;
    for (int i = 0; i < nqp; ++i) {
      hq.push_back(p.qp[i]->device_handle());
      hc.push_back(p.cq[i]->device_handle());
    }
    gv::ib::QpHandle* dq;
    gv::ib::CqHandle* dc;
    std::uint64_t* ns;
    Status* st;
    CK(cudaMalloc(&dq, sizeof(gv::ib::QpHandle) * nqp));
    CK(cudaMalloc(&dc, sizeof(gv::ib::CqHandle) * nqp));
    CK(cudaMemcpy(dq, hq.data(), sizeof(gv::ib::QpHandle) * nqp, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dc, hc.data(), sizeof(gv::ib::CqHandle) * nqp, cudaMemcpyHostToDevice));
    CK(cudaMallocHost(&ns, sizeof(std::uint64_t) * nqp));
    CK(cudaMallocHost(&st, sizeof(Status) * nqp));
    msgrate_kernel<<<nqp, 32>>>(dq, dc, reinterpret_cast<std::uint64_t>(p.buf), p.mr->rkey(), per_qp, ns, st);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::uint64_t longest = 0;
    for (int i = 0; i < nqp; ++i) {
      if (st[i] != Status::kOk) throw std::runtime_error(std::string("msgrate failed: ") + gv::to_string(st[i]));
      longest = std::max(longest, ns[i]);
    }
    const double total = static_cast<double>(per_qp) * nqp;
    const double rate = total / (static_cast<double>(longest) / 1e9) / 1e6;
    if (g_json)
      std::printf("{\"bench\":\"msgrate\",\"mode\":\"gpu-controlled\",\"provider\":\"soft-cpu-engine\",\"qps\":%d,\"bytes\":8,\"messages\":%.0f,\"mmsg_per_s\":%.3f}\n",
                  nqp, total, rate);
    else
      std::printf(" %-6d %-12.0f %-16.3f\n", nqp, total, rate);
    cudaFree(dq);
    cudaFree(dc);
    cudaFreeHost(ns);
    cudaFreeHost(st);
  }
}

// ---- anchors ----------------------------------------------------------------------------------

/// Two parties bounce a counter through two flag words; party 0 times each round trip.
__global__ void flag_pingpong(std::uint32_t* mine, std::uint32_t* theirs, int iters, bool starts,
                              std::uint64_t* rtt_ns, std::uint32_t* timeouts) {
  constexpr auto kSys = gv::sync::Scope::kSystem;  // the two parties are different GPUs
  if (threadIdx.x != 0) return;
  for (int i = 1; i <= iters; ++i) {
    const std::uint64_t t0 = gtime();
    if (starts) {
      gv::sync::store_release(theirs, static_cast<std::uint32_t>(i), kSys);
      if (gv::sync::bounded_wait([&] { return gv::sync::load_acquire(mine, kSys) == static_cast<std::uint32_t>(i); },
                                 gv::Budget{1'000'000'000}, nullptr) != Status::kOk) {
        ++*timeouts;
        return;
      }
      rtt_ns[i - 1] = gtime() - t0;
    } else {
      if (gv::sync::bounded_wait([&] { return gv::sync::load_acquire(mine, kSys) == static_cast<std::uint32_t>(i); },
                                 gv::Budget{1'000'000'000}, nullptr) != Status::kOk) {
        ++*timeouts;
        return;
      }
      gv::sync::store_release(theirs, static_cast<std::uint32_t>(i), kSys);
    }
  }
}

__global__ void flag_pingpong_2blocks(std::uint32_t* f0, std::uint32_t* f1, int iters, std::uint64_t* rtt,
                                      std::uint32_t* timeouts) {
  // block 0 owns f0 and writes f1; block 1 the reverse.
  if (blockIdx.x == 0) {
    if (threadIdx.x == 0) {
      for (int i = 1; i <= iters; ++i) {
        const std::uint64_t t0 = gtime();
        gv::sync::store_release(f1, static_cast<std::uint32_t>(i));
        if (gv::sync::bounded_wait([&] { return gv::sync::load_acquire(f0) == static_cast<std::uint32_t>(i); },
                                   gv::Budget{1'000'000'000}, nullptr) != Status::kOk) {
          ++*timeouts;
          return;
        }
        rtt[i - 1] = gtime() - t0;
      }
    }
  } else if (threadIdx.x == 0) {
    for (int i = 1; i <= iters; ++i) {
      if (gv::sync::bounded_wait([&] { return gv::sync::load_acquire(f1) == static_cast<std::uint32_t>(i); },
                                 gv::Budget{1'000'000'000}, nullptr) != Status::kOk) {
        ++*timeouts;
        return;
      }
      gv::sync::store_release(f0, static_cast<std::uint32_t>(i));
    }
  }
}

void report_anchor(const char* what, std::vector<double> half_us) {
  const auto s = gv::bench::summarize(std::move(half_us));
  if (g_json)
    std::printf("%s\n", gv::bench::latency_json("anchor", std::string("\"what\":\"") + what + "\",", 8, 0, s).c_str());
  else
    std::printf(" %-44s t_typical %.3f us  t_min %.3f  t_avg %.3f  99%% %.3f\n", what, s.typical, s.min, s.avg, s.p99);
}

void run_anchors(int iters) {
  if (!g_json) std::printf("# anchors: half round trip of a flag ping-pong [us]\n");
  std::uint64_t* rtt;
  std::uint32_t* timeouts;
  CK(cudaMallocHost(&rtt, sizeof(std::uint64_t) * iters));
  CK(cudaMallocHost(&timeouts, sizeof(std::uint32_t)));
  auto collect = [&](const char* what) {
    if (*timeouts) throw std::runtime_error(std::string(what) + ": a flag wait timed out");
    std::vector<double> v;
    for (int i = iters / 10; i < iters; ++i) v.push_back(static_cast<double>(rtt[i]) / 2000.0);
    report_anchor(what, v);
  };
  for (const bool gpu : {true, false}) {
    std::uint32_t* f;
    if (gpu) {
      CK(cudaMalloc(&f, 256));
      CK(cudaMemset(f, 0, 256));
    } else {
      CK(cudaHostAlloc(&f, 256, cudaHostAllocMapped));
      std::memset(f, 0, 256);
    }
    *timeouts = 0;
    flag_pingpong_2blocks<<<2, 32>>>(f, f + 32, iters, rtt, timeouts);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    collect(gpu ? "two blocks, flags in GPU memory" : "two blocks, flags in pinned host memory");
    gpu ? (void)cudaFree(f) : (void)cudaFreeHost(f);
  }
  int n = 0;
  CK(cudaGetDeviceCount(&n));
  if (n >= 2) {
    int can = 0;
    CK(cudaDeviceCanAccessPeer(&can, 0, 1));
    if (can) {
      std::uint32_t *f0, *f1;
      cudaStream_t s0, s1;
      CK(cudaSetDevice(0));
      (void)cudaDeviceEnablePeerAccess(1, 0);
      (void)cudaGetLastError();
      CK(cudaMalloc(&f0, 256));
      CK(cudaMemset(f0, 0, 256));
      CK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
      CK(cudaSetDevice(1));
      (void)cudaDeviceEnablePeerAccess(0, 0);
      (void)cudaGetLastError();
      CK(cudaMalloc(&f1, 256));
      CK(cudaMemset(f1, 0, 256));
      CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
      CK(cudaDeviceSynchronize());
      *timeouts = 0;
      // GPU0 polls its own f0 and stores into GPU1's f1; GPU1 the reverse (peer stores).
      flag_pingpong<<<1, 32, 0, s1>>>(f1, f0, iters, false, rtt, timeouts);
      CK(cudaSetDevice(0));
      flag_pingpong<<<1, 32, 0, s0>>>(f0, f1, iters, true, rtt, timeouts);
      CK(cudaStreamSynchronize(s0));
      CK(cudaSetDevice(1));
      CK(cudaStreamSynchronize(s1));
      collect("two GPUs, peer stores (NVLink/PCIe)");

      // cudaMemcpyPeerAsync of 8 bytes, timed with events.
      CK(cudaSetDevice(0));
      cudaEvent_t e0, e1;
      CK(cudaEventCreate(&e0));
      CK(cudaEventCreate(&e1));
      std::vector<double> v;
      for (int i = 0; i < 1000; ++i) {
        CK(cudaEventRecord(e0, s0));
        CK(cudaMemcpyPeerAsync(f1, 1, f0, 0, 8, s0));
        CK(cudaEventRecord(e1, s0));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (i >= 100) v.push_back(ms * 1000.0);
      }
      report_anchor("cudaMemcpyPeerAsync 8 B, one way (events)", v);
      CK(cudaEventDestroy(e0));
      CK(cudaEventDestroy(e1));
      CK(cudaStreamDestroy(s0));
      CK(cudaFree(f0));
      CK(cudaSetDevice(1));
      CK(cudaStreamDestroy(s1));
      CK(cudaFree(f1));
      CK(cudaSetDevice(0));
    } else if (!g_json) {
      std::printf(" two GPUs present but without peer access: no peer anchor\n");
    }
  } else if (!g_json) {
    std::printf(" one GPU: no two-GPU anchors\n");
  }
  cudaFreeHost(rtt);
  cudaFreeHost(timeouts);
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s postpoll|pingpong|anchors|atomics|msgrate [-a] [-n ITERS] [--json]\n", argv[0]);
    return 2;
  }
  const std::string cmd = argv[1];
  std::vector<std::uint64_t> sizes{8};
  int iters = 1000;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") g_json = true;
    else if (a == "-a") sizes = gv::bench::pow2_sizes(3, 22);
    else if (a == "-n" && i + 1 < argc) iters = std::stoi(argv[++i]);
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::fprintf(stderr, "gv_gpu_verbs: no usable GPU (%s)\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  cudaDeviceProp p{};
  CK(cudaGetDeviceProperties(&p, 0));
  if (!g_json) std::printf("# device: %s x%d\n", p.name, n);
  if (cmd == "postpoll") run_postpoll(std::max(iters / 100, 5));
  else if (cmd == "pingpong") run_pingpong(sizes, iters, 100);
  else if (cmd == "anchors") run_anchors(iters);
  else if (cmd == "atomics") run_atomics(iters);
  else if (cmd == "msgrate") run_msgrate(iters);
  else {
    std::fprintf(stderr, "unknown command %s\n", cmd.c_str());
    return 2;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "gv_gpu_verbs: %s\n", e.what());
  return 1;
}
