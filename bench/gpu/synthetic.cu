#include "synthetic.hpp"

#include <algorithm>
#include <cstdio>

namespace gv::bench {

void* Placed::alloc_bytes(std::size_t bytes) {
  void* p = nullptr;
  if (gpu) {
    GV_BENCH_CUDA(cudaMalloc(&p, bytes));
    ptrs.push_back(p);
    GV_BENCH_CUDA(cudaMemsetAsync(p, 0, bytes, s));
  } else {
    GV_BENCH_CUDA(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
    ptrs.push_back(p);
    std::memset(p, 0, bytes);
  }
  return p;
}

Placed::~Placed() {
  for (void* p : ptrs) gpu ? (void)cudaFree(p) : (void)cudaFreeHost(p);
}

SyntheticQueues::SyntheticQueues(bool gpu, cudaStream_t s) : mem_{gpu, s, {}}, gpu_mem_{true, s, {}} {
  GV_BENCH_CUDA(cudaSetDevice(0));
  qp.qpn = 0x99;
  qp.sq = mem_.alloc<std::byte>(kBbs * 64);
  qp.dbrec = mem_.alloc<m5::QpDbrec>(64);
  qp.doorbell = mem_.alloc<std::uint64_t>(64);
  qp.state = gpu_mem_.alloc<gv::ib::QpCounters>(sizeof(gv::ib::QpCounters));
  qp.executor = gpu ? gv::sync::Scope::kGpu : gv::sync::Scope::kSystem;
  qp.sq_bbs = kBbs;
  qp.max_send_sge = 1;
  qp.max_inline = 64;
  cq.cqn = 1;
  cq.ring = mem_.alloc<m5::Cqe>(kBbs * sizeof(m5::Cqe));
  cq.dbrec = mem_.alloc<m5::CqDbrec>(64);
  cq.state = gpu_mem_.alloc<gv::ib::CqCounters>(sizeof(gv::ib::CqCounters));
  cq.executor = qp.executor;
  cq.log_cqes = gv::ib::log2_pow2(kBbs);
  cq.send_qp = qp.state;
  cq.send_sq = qp.sq;
  cq.send_sq_bbs = kBbs;
  cq.send_qpn = qp.qpn;

  nops_.resize(kBbs * 64);
  cqes_.resize(kBbs);
  for (std::uint32_t i = 0; i < kBbs; ++i) {
    const auto c = gv::ib::make_ctrl_seg(static_cast<std::uint16_t>(i), m5::kOpNop, 0, qp.qpn, m5::kCtrlCqUpdate, 1, 0, {});
    std::memcpy(nops_.data() + i * 64, &c, 16);
    cqes_[i] = gv::ib::make_req_cqe(qp.qpn, m5::kOpNop, static_cast<std::uint16_t>(i), 0);  // owner 0: first lap
  }
  gv::ib::wq_start_at(&posted_.sq, 0);
  posted_.sq.reserved = posted_.sq.published = kBbs;  // kBbs NOPs posted, none completed
}

void SyntheticQueues::fresh(cudaStream_t s) {
  GV_BENCH_CUDA(cudaMemsetAsync(qp.state, 0, sizeof(gv::ib::QpCounters), s));
  GV_BENCH_CUDA(cudaMemsetAsync(cq.state, 0, sizeof(gv::ib::CqCounters), s));
}

void SyntheticQueues::ready(cudaStream_t s) {
  // The sources outlive the kernel that follows on `s`.
  static const gv::ib::CqCounters untaken{};
  mem_.s = gpu_mem_.s = s;
  mem_.upload(qp.sq, nops_.data(), nops_.size());
  mem_.upload(cq.ring, cqes_.data(), cqes_.size() * sizeof(m5::Cqe));
  gpu_mem_.upload(qp.state, &posted_, sizeof(posted_));
  gpu_mem_.upload(cq.state, &untaken, sizeof(untaken));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

namespace {

/// A 16-byte volatile load (what a poller minimally issues to see a CQE's last octoword).
__device__ uint4 load_volatile_16(const void* p) {
  uint4 v;
  asm volatile("ld.volatile.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

/// The post floor (see measure_floors): `n` posts at ring positions 0 .. n - 1. kInvalidArgument
/// unless the WQE is the three octowords the cost kernels' WRITE takes.
__global__ void post_floor_kernel(const __grid_constant__ gv::ib::QpHandle qp, int n, std::uint64_t* ns,
                                  Status* status) {
  constexpr std::uint32_t kDs = 3;
  const std::uint64_t payload = 0x0807060504030201ull;
  const Sge sge{reinterpret_cast<std::uint64_t>(&payload), 8, 0};
  const SendWr wr = write_wr(&sge, kSyntheticRaddr, kSyntheticRkey, gv::ib::kWrInline);
  if (gv::ib::wqe_ds(wr) != kDs) {
    *status = Status::kInvalidArgument;
    return;
  }
  gv::ib::Octoword wqe[kDs];
#pragma unroll
  for (std::uint32_t k = 0; k < kDs; ++k) wqe[k] = gv::ib::wqe_octoword(wr, k, 0, qp.qpn);
  const std::uint8_t opcode = gv::ib::mlx5_opcode(wr.opcode);
  const std::uint64_t t0 = gv::sync::now_ns();
  for (std::uint64_t i = 0; i < static_cast<std::uint64_t>(n); ++i) {
    wqe[0].w[0] = be32::from(m5::ctrl_opmod_idx_opcode(0, static_cast<std::uint16_t>(i), opcode)).raw;
#pragma unroll
    for (std::uint32_t k = 0; k < kDs; ++k)
      gv::ib::store_octoword(qp.sq + gv::ib::sq_octoword_offset(i, k, qp.sq_bbs), wqe[k]);
    gv::ib::sq_ring_doorbell(qp, i + 1, gv::ib::doorbell_value(wqe[0]));
  }
  *ns = gv::sync::now_ns() - t0;
  *status = Status::kOk;
}

/// The poll floor (see measure_floors): `n` ready CQEs, first lap; kEmpty if one is not.
__global__ void poll_floor_kernel(const __grid_constant__ gv::ib::CqHandle cq, int n, std::uint64_t* ns,
                                  Status* status) {
  const std::uint32_t mask = (1u << cq.log_cqes) - 1;
  Status st = Status::kOk;
  const std::uint64_t t0 = gv::sync::now_ns();
  for (std::uint64_t ci = 0; ci < static_cast<std::uint64_t>(n) && st == Status::kOk; ++ci) {
    const uint4 last = load_volatile_16(reinterpret_cast<const std::byte*>(cq.ring + (ci & mask)) + 48);
    if (!gv::ib::cqe_ready(last.w, ci, cq.log_cqes)) st = Status::kEmpty;
    gv::sync::store_relaxed(&cq.dbrec->set_ci.raw, be32::from(static_cast<std::uint32_t>((ci + 1) & m5::kCqCiMask)).raw,
                            cq.executor);
  }
  *ns = gv::sync::now_ns() - t0;
  *status = st;
}

}  // namespace

Floors measure_floors(Harness& h, int reps, SyntheticQueues& q) {
  constexpr int kPosts = 100000;
  constexpr int kPolls = static_cast<int>(SyntheticQueues::kBbs);
  const char* where = q.gpu() ? "GPU memory" : "pinned host memory";
  Floors f;
  f.posts = kPosts;
  f.polls = kPolls;
  gv::ib::QpHandle qp = q.qp;
  for (const std::uint32_t polled : {0u, 1u}) {
    qp.record_polled = polled;
    (polled ? f.post_record : f.post_nic) =
        per_call_ns(h, reps, kPosts, std::string("post floor in ") + where, [&](cudaStream_t s) {
          post_floor_kernel<<<1, 1, 0, s>>>(qp, kPosts, h.samples, h.status);
        });
  }
  f.poll = per_call_ns(h, reps, kPolls, std::string("poll floor in ") + where, [&](cudaStream_t s) {
    q.ready(s);
    poll_floor_kernel<<<1, 1, 0, s>>>(q.cq, kPolls, h.samples, h.status);
  });
  return f;
}

void print_cost_header() {
  std::printf(" %-13s %-11s %-22s %-10s %-10s %-10s %s\n", "mode", "executor", "operation", "min", "median", "max",
              "x floor");
}

void report_cost(const char* bench, const char* mode, const char* executor, const char* op, std::uint64_t iters,
                 std::vector<double> v, double floor) {
  std::sort(v.begin(), v.end());
  const double med = v[v.size() / 2];
  char ratio[32] = "-";
  if (floor > 0) std::snprintf(ratio, sizeof(ratio), "%.2f", med / floor);
  std::printf(" %-13s %-11s %-22s %-10.2f %-10.2f %-10.2f %s\n", mode, executor, op, v.front(), med, v.back(), ratio);
  char b[400];
  const int n = std::snprintf(b, sizeof(b),
                              "{\"bench\":\"%s\",\"mode\":\"%s\",\"variant\":\"%s\",\"executor\":\"%s\",\"bytes\":8,"
                              "\"iters\":%llu,\"ns_min\":%.2f,\"ns_median\":%.2f,\"ns_max\":%.2f",
                              bench, mode, op, executor, static_cast<unsigned long long>(iters), v.front(), med, v.back());
  if (floor > 0)
    std::snprintf(b + n, sizeof(b) - static_cast<std::size_t>(n), ",\"floor_ns\":%.2f,\"x_floor\":%.3f}", floor,
                  med / floor);
  else
    std::snprintf(b + n, sizeof(b) - static_cast<std::size_t>(n), "}");
  g_json.row(b);
}

void report_floors(const char* bench, const char* mode, const Floors& f) {
  report_cost(bench, mode, "none", "post floor (NIC order)", f.posts, f.post_nic);
  report_cost(bench, mode, "none", "post floor (one fence)", f.posts, f.post_record);
  report_cost(bench, mode, "none", "poll floor", f.polls, f.poll);
}

}  // namespace gv::bench
