// The device API on the GPU.
//  * Conformance: WQEs that kernels write (one thread, a warp cooperatively, a warp batch,
//    many blocks on one QP) are byte-identical to what the host encoder produces for the same
//    work requests, land exactly once, and are published in order with a correct doorbell.
//  * End to end: kernels post every opcode through the soft provider (queues in pinned host
//    memory, executed by its CPU engine) and poll the completions; tests/nic runs these same
//    tests over a ConnectX HCA (GV_TEST_PROVIDER=mlx5).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include <gpuverbs/host/verbs.hpp>
#include <gpuverbs/ib.hpp>

#include "gpu_test.hpp"
#include "qp_pair.hpp"
#include "test_provider.hpp"
#include "verbs_kernels.cuh"

namespace {

using gv::Status;
using gv::ib::Ownership;
using gv::ib::SendWr;
using gv::ib::Sge;
using gv::ib::WrOpcode;
namespace m5 = gv::ib::mlx5;
using gvt::KernelResult;
using gvt::pingpong_side;
using gvt::poll_kernel;
using gvt::post_and_poll;
using gvt::recv_kernel;

/// Zeroed GPU memory, or null (after a test failure) if the allocation fails.
template <class T>
T* dev_alloc(std::size_t n) {
  T* p = nullptr;
  if (cudaMalloc(&p, n * sizeof(T)) != cudaSuccess) return nullptr;
  GV_CUDA_EXPECT(cudaMemset(p, 0, n * sizeof(T)));
  return p;
}

/// A QP's posting side built by hand in GPU memory: no provider, the test reads the ring back.
struct GpuRing {
  gv::ib::QpHandle h{};
  std::vector<std::byte> ring() const {
    std::vector<std::byte> v(std::size_t{h.sq_bbs} * 64);
    GV_CUDA_EXPECT(cudaMemcpy(v.data(), h.sq, v.size(), cudaMemcpyDeviceToHost));
    return v;
  }
  gv::ib::QpCounters state() const {
    gv::ib::QpCounters s;
    GV_CUDA_EXPECT(cudaMemcpy(&s, h.state, sizeof(s), cudaMemcpyDeviceToHost));
    return s;
  }
  std::uint64_t doorbell() const {
    std::uint64_t d;
    GV_CUDA_EXPECT(cudaMemcpy(&d, h.doorbell, 8, cudaMemcpyDeviceToHost));
    return d;
  }
  std::uint32_t dbrec_snd() const {
    m5::QpDbrec r;
    GV_CUDA_EXPECT(cudaMemcpy(&r, h.dbrec, 8, cudaMemcpyDeviceToHost));
    return r.snd.get();
  }
  ~GpuRing() {
    cudaFree(h.sq);
    cudaFree(h.dbrec);
    cudaFree(h.doorbell);
    cudaFree(h.state);
  }
};

std::unique_ptr<GpuRing> make_ring(std::uint32_t sq_bbs, std::uint32_t max_sge, std::uint32_t max_inline) {
  auto r = std::make_unique<GpuRing>();
  r->h.qpn = 0x1234;
  r->h.sq = reinterpret_cast<std::byte*>(dev_alloc<std::uint8_t>(std::size_t{sq_bbs} * 64));
  r->h.dbrec = dev_alloc<m5::QpDbrec>(1);
  r->h.doorbell = dev_alloc<std::uint64_t>(1);
  r->h.state = dev_alloc<gv::ib::QpCounters>(1);
  r->h.sq_bbs = sq_bbs;
  r->h.max_send_sge = max_sge;
  r->h.max_inline = max_inline;
  return r;
}

/// Random work requests whose SGE lists and inline payloads live in `sge_pool` / `payload`
/// (pointers valid where the caller says: host for the reference, device for the kernel).
struct WrSet {
  std::vector<SendWr> wrs;
  std::vector<Sge> sges;              // kMaxSge per WR
  std::vector<std::uint8_t> payload;  // inline bytes, 256 per WR
  static constexpr std::uint32_t kMaxSge = 4;
};

WrSet random_wrs(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  WrSet s;
  s.wrs.resize(n);
  s.sges.resize(n * WrSet::kMaxSge);
  s.payload.resize(n * 256);
  for (auto& b : s.payload) b = static_cast<std::uint8_t>(rng());
  const WrOpcode ops[] = {WrOpcode::kRdmaWrite, WrOpcode::kRdmaWriteImm, WrOpcode::kRdmaRead, WrOpcode::kSend,
                          WrOpcode::kSendImm, WrOpcode::kAtomicCmpSwp, WrOpcode::kAtomicFetchAdd, WrOpcode::kNop};
  for (std::size_t i = 0; i < n; ++i) {
    SendWr& w = s.wrs[i];
    w.opcode = ops[rng() % 8];
    w.flags = static_cast<std::uint32_t>(rng() & (gv::ib::kWrSignaled | gv::ib::kWrFence | gv::ib::kWrSolicited));
    w.imm = static_cast<std::uint32_t>(rng());
    w.remote_addr = rng();
    w.rkey = static_cast<std::uint32_t>(rng());
    w.compare_add = rng();
    w.swap = rng();
    const bool inl = gv::ib::carries_payload(w.opcode) && rng() % 2;
    if (gv::ib::is_atomic(w.opcode)) {
      w.num_sge = 1;
      s.sges[i * WrSet::kMaxSge] = Sge{rng(), 8, static_cast<std::uint32_t>(rng())};
    } else if (inl) {
      w.flags |= gv::ib::kWrInline;
      w.num_sge = 1;
      s.sges[i * WrSet::kMaxSge] = Sge{0, static_cast<std::uint32_t>(rng() % 257), 0};  // addr set later
    } else if (w.opcode != WrOpcode::kNop) {
      w.num_sge = 1 + static_cast<std::uint32_t>(rng() % WrSet::kMaxSge);
      for (std::uint32_t k = 0; k < w.num_sge; ++k)
        s.sges[i * WrSet::kMaxSge + k] = Sge{rng(), static_cast<std::uint32_t>(rng()), static_cast<std::uint32_t>(rng())};
    }
  }
  return s;
}

/// Point the WRs' SGE lists (and inline SGE addresses) at the given bases.
std::vector<SendWr> bind_wrs(const WrSet& s, const Sge* sge_base, const std::uint8_t* payload_base,
                         std::vector<Sge>& sges_out) {
  std::vector<SendWr> w = s.wrs;
  sges_out = s.sges;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (w[i].flags & gv::ib::kWrInline)
      sges_out[i * WrSet::kMaxSge].addr = reinterpret_cast<std::uint64_t>(payload_base + i * 256);
    w[i].sg_list = sge_base + i * WrSet::kMaxSge;
  }
  return w;
}

enum class Mode { kThread, kWarp, kWarpBatch };

__global__ void post_kernel(const __grid_constant__ gv::ib::QpHandle qp, const SendWr* wrs, int n, Mode mode,
                            Status* status) {
  Status st = Status::kOk;
  if (mode == Mode::kThread) {
    if (threadIdx.x == 0)
      for (int i = 0; i < n && st == Status::kOk; ++i) st = gv::ib::post_send<Ownership::kExclusive>(qp, wrs[i]);
  } else if (mode == Mode::kWarp) {
    for (int i = 0; i < n && st == Status::kOk; ++i) st = gv::ib::post_send_warp<Ownership::kExclusive>(qp, wrs[i]);
  } else {
    for (int i = 0; i + 32 <= n && st == Status::kOk; i += 32)
      st = gv::ib::post_send_warp_batch<Ownership::kExclusive>(qp, wrs[i + threadIdx.x]);
  }
  if (threadIdx.x == 0) *status = st;
}

class GpuPostConformance : public ::testing::TestWithParam<Mode> {};

TEST_P(GpuPostConformance, WqesMatchTheHostEncoderByteForByte) {
  GV_REQUIRE_GPUS(1);
  constexpr int kN = 256;  // a multiple of 32
  const WrSet set = random_wrs(kN, 1234 + static_cast<int>(GetParam()));
  auto ring = make_ring(4096, WrSet::kMaxSge, 256);

  Sge* d_sges = dev_alloc<Sge>(set.sges.size());
  std::uint8_t* d_payload = dev_alloc<std::uint8_t>(set.payload.size());
  SendWr* d_wrs = dev_alloc<SendWr>(kN);
  Status* d_status = dev_alloc<Status>(1);
  ASSERT_TRUE(d_sges && d_payload && d_wrs && d_status);
  std::vector<Sge> dev_sges;
  const std::vector<SendWr> dev_wrs = bind_wrs(set, d_sges, d_payload, dev_sges);
  GV_CUDA_CHECK(cudaMemcpy(d_sges, dev_sges.data(), dev_sges.size() * sizeof(Sge), cudaMemcpyHostToDevice));
  GV_CUDA_CHECK(cudaMemcpy(d_payload, set.payload.data(), set.payload.size(), cudaMemcpyHostToDevice));
  GV_CUDA_CHECK(cudaMemcpy(d_wrs, dev_wrs.data(), kN * sizeof(SendWr), cudaMemcpyHostToDevice));

  post_kernel<<<1, 32>>>(ring->h, d_wrs, kN, GetParam(), d_status);
  GV_CUDA_CHECK(cudaGetLastError());
  GV_CUDA_CHECK(cudaDeviceSynchronize());
  Status st;
  GV_CUDA_CHECK(cudaMemcpy(&st, d_status, sizeof(st), cudaMemcpyDeviceToHost));
  ASSERT_EQ(st, Status::kOk) << gv::to_string(st);

  // Reference: the host encoder, on host copies of the same requests.
  std::vector<Sge> host_sges;
  const std::vector<SendWr> host_wrs = bind_wrs(set, nullptr, set.payload.data(), host_sges);
  std::vector<std::byte> want(std::size_t{ring->h.sq_bbs} * 64, std::byte{0});
  std::uint64_t pos = 0, last = 0;
  for (int i = 0; i < kN; ++i) {
    SendWr w = host_wrs[i];
    w.sg_list = host_sges.data() + std::size_t{static_cast<std::size_t>(i)} * WrSet::kMaxSge;
    const std::uint32_t ds = gv::ib::wqe_ds(w);
    for (std::uint32_t k = 0; k < ds; ++k)
      gv::ib::store_octoword(want.data() + gv::ib::sq_octoword_offset(pos, k, ring->h.sq_bbs),
                             gv::ib::wqe_octoword(w, k, static_cast<std::uint16_t>(pos), ring->h.qpn));
    last = pos;
    pos += gv::ib::wqe_bbs(ds);
  }
  const std::vector<std::byte> got = ring->ring();
  for (std::size_t b = 0; b < got.size(); b += 16)
    ASSERT_EQ(std::memcmp(got.data() + b, want.data() + b, 16), 0) << "octoword at byte " << b;
  EXPECT_EQ(ring->dbrec_snd(), pos & m5::kWqeIndexMask);
  std::uint64_t db;
  std::memcpy(&db, want.data() + gv::ib::sq_octoword_offset(last, 0, ring->h.sq_bbs), 8);
  EXPECT_EQ(ring->doorbell(), db) << "the doorbell carries the last WQE's first 8 bytes";
  const gv::ib::QpCounters qs = ring->state();
  EXPECT_EQ(qs.sq.reserved, pos);
  EXPECT_EQ(qs.sq.published, pos);
  cudaFree(d_sges);
  cudaFree(d_payload);
  cudaFree(d_wrs);
  cudaFree(d_status);
}

INSTANTIATE_TEST_SUITE_P(Modes, GpuPostConformance,
                         ::testing::Values(Mode::kThread, Mode::kWarp, Mode::kWarpBatch),
                         [](const auto& i) {
                           return i.param == Mode::kThread ? "Thread" : i.param == Mode::kWarp ? "Warp" : "WarpBatch";
                         });

/// Every thread of every block posts `per_thread` WRITEs whose remote address names
/// (thread id, sequence) into one QP with shared ownership.
__global__ void shared_post_kernel(const __grid_constant__ gv::ib::QpHandle qp, int per_thread, int* failures) {
  const std::uint64_t tid = blockIdx.x * blockDim.x + threadIdx.x;
  for (int k = 0; k < per_thread; ++k) {
    SendWr wr;
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.remote_addr = (tid << 32) | static_cast<std::uint64_t>(k);
    if (gv::ib::post_send<Ownership::kShared>(qp, wr) != Status::kOk) atomicAdd(failures, 1);
  }
}

TEST(GpuPostShared, ManyBlocksOneQpNoLossNoDuplicateInOrder) {
  GV_REQUIRE_GPUS(1);
  constexpr int kBlocks = 132, kThreads = 128, kPer = 3;  // 50688 WQEs, one WQEBB each
  const std::uint32_t total = kBlocks * kThreads * kPer;
  auto ring = make_ring(65536, 1, 0);
  int* d_fail = dev_alloc<int>(1);
  shared_post_kernel<<<kBlocks, kThreads>>>(ring->h, kPer, d_fail);
  GV_CUDA_CHECK(cudaGetLastError());
  GV_CUDA_CHECK(cudaDeviceSynchronize());
  int fails = -1;
  GV_CUDA_CHECK(cudaMemcpy(&fails, d_fail, sizeof(int), cudaMemcpyDeviceToHost));
  ASSERT_EQ(fails, 0);
  const std::vector<std::byte> got = ring->ring();
  std::vector<int> next(kBlocks * kThreads, 0);
  for (std::uint32_t i = 0; i < total; ++i) {
    m5::CtrlSeg c;
    m5::RaddrSeg r;
    std::memcpy(&c, got.data() + std::size_t{i} * 64, 16);
    std::memcpy(&r, got.data() + std::size_t{i} * 64 + 16, 16);
    ASSERT_EQ(m5::ctrl_wqe_index(c.opmod_idx_opcode.get()), i & m5::kWqeIndexMask) << "WQE " << i;
    ASSERT_EQ(m5::ctrl_opcode(c.opmod_idx_opcode.get()), m5::kOpRdmaWrite) << "WQE " << i;
    const std::uint64_t ra = r.raddr.get();
    const std::uint64_t tid = ra >> 32, seq = ra & 0xffffffff;
    ASSERT_LT(tid, next.size());
    ASSERT_EQ(seq, static_cast<std::uint64_t>(next[tid])) << "thread " << tid << ": lost, duplicated or reordered";
    ++next[tid];
  }
  for (int n : next) ASSERT_EQ(n, kPer);
  EXPECT_EQ(ring->dbrec_snd(), total & m5::kWqeIndexMask);
  EXPECT_EQ(ring->state().sq.published, total);
  cudaFree(d_fail);
}

/// Posters on a ring far smaller than their work, so nearly every reservation waits for space
/// behind the others' tickets. Block 0's thread 0 plays HCA and poller at once: it takes each
/// published WQE in order, checks that it is its poster's next, and frees its slot. Every wait
/// is bounded: a poster gives up after its budget, the retirer after kRetireNs or a failure.
constexpr std::uint64_t kRetireNs = 20'000'000'000ull;
__global__ void small_ring_kernel(const __grid_constant__ gv::ib::QpHandle qp, int per_thread, int* failures,
                                  int* next, unsigned long long* worst_ns) {
  const std::uint64_t posters = std::uint64_t{gridDim.x - 1} * blockDim.x;
  if (blockIdx.x == 0) {
    if (threadIdx.x != 0) return;
    gv::ib::WqCounters* sq = &qp.state->sq;
    const std::uint64_t total = posters * per_thread, t0 = gv::sync::now_ns();
    for (std::uint64_t c = 0; c < total;) {
      const std::uint64_t pub = gv::sync::load_acquire(&sq->published);
      if (pub == c) {
        if (gv::sync::load_relaxed(failures) != 0) return;
        if (gv::sync::now_ns() - t0 > kRetireNs) return (void)atomicAdd(failures, 1);
        continue;
      }
      for (; c < pub; ++c) {
        m5::RaddrSeg r;
        std::memcpy(&r, qp.sq + std::uint64_t{gv::ib::ring_slot(c, qp.sq_bbs)} * 64 + 16, sizeof(r));
        const std::uint64_t ra = r.raddr.get(), tid = ra >> 32;
        if (tid >= posters || static_cast<int>(ra & 0xffffffff) != next[tid]) return (void)atomicAdd(failures, 1);
        ++next[tid];
        gv::sync::store_release(&sq->completed, c + 1);
      }
    }
    return;
  }
  const std::uint64_t tid = std::uint64_t{blockIdx.x - 1} * blockDim.x + threadIdx.x;
  unsigned long long worst = 0;
  for (int k = 0; k < per_thread; ++k) {
    SendWr wr;
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.remote_addr = (tid << 32) | static_cast<std::uint64_t>(k);
    const std::uint64_t t0 = gv::sync::now_ns();
    if (gv::ib::post_send<Ownership::kShared>(qp, wr, gv::Budget{10'000'000'000ull}) != Status::kOk) {
      atomicAdd(failures, 1);
      return;
    }
    worst = max(worst, static_cast<unsigned long long>(gv::sync::now_ns() - t0));
  }
  atomicMax(worst_ns, worst);
}

// The ticket reservation under a ring that is always full: no poster runs out of its budget
// (a CAS reservation could lose every retry), every WQE is taken once and in each poster's
// order, and the longest single post is reported.
TEST(GpuPostShared, SmallRingEveryPosterServedInTicketOrder) {
  GV_REQUIRE_GPUS(1);
  constexpr int kBlocks = 64, kThreads = 128, kPer = 4;  // 32768 WQEs through 64 WQEBBs
  constexpr std::uint64_t kPosters = std::uint64_t{kBlocks} * kThreads, kTotal = kPosters * kPer;
  auto ring = make_ring(64, 1, 0);
  int* d_fail = dev_alloc<int>(1);
  int* d_next = dev_alloc<int>(kPosters);
  auto* d_worst = dev_alloc<unsigned long long>(1);
  ASSERT_TRUE(d_fail && d_next && d_worst);
  small_ring_kernel<<<kBlocks + 1, kThreads>>>(ring->h, kPer, d_fail, d_next, d_worst);
  GV_CUDA_CHECK(cudaGetLastError());
  GV_CUDA_CHECK(cudaDeviceSynchronize());
  int fails = -1;
  unsigned long long worst = 0;
  std::vector<int> next(kPosters, -1);
  GV_CUDA_CHECK(cudaMemcpy(&fails, d_fail, sizeof(int), cudaMemcpyDeviceToHost));
  GV_CUDA_CHECK(cudaMemcpy(&worst, d_worst, sizeof(worst), cudaMemcpyDeviceToHost));
  GV_CUDA_CHECK(cudaMemcpy(next.data(), d_next, kPosters * sizeof(int), cudaMemcpyDeviceToHost));
  ASSERT_EQ(fails, 0);
  for (std::uint64_t t = 0; t < kPosters; ++t) ASSERT_EQ(next[t], kPer) << "poster " << t;
  const gv::ib::QpCounters qs = ring->state();
  EXPECT_EQ(qs.sq.reserved, kTotal);
  EXPECT_EQ(qs.sq.published, kTotal);
  EXPECT_EQ(qs.sq.completed, kTotal);
  EXPECT_EQ(qs.sq.broken, 0u);
  EXPECT_EQ(ring->dbrec_snd(), kTotal & m5::kWqeIndexMask);
  RecordProperty("longest_post_us", static_cast<int>(worst / 1000));
  std::printf("longest single post: %.1f us (%llu posters, ring of 64)\n", worst / 1e3,
              static_cast<unsigned long long>(kPosters));
  cudaFree(d_fail);
  cudaFree(d_next);
  cudaFree(d_worst);
}

// ---- End to end through the soft provider -----------------------------------------------

class GpuSoftEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    GV_REQUIRE_GPUS(1);
    gv::DeviceOptions o;
    o.map_to_gpus = true;
    std::string why;
    dev = gvt::open_test_device(o, why);  // soft, or GV_TEST_PROVIDER=mlx5 (tests/nic)
    if (!dev) GTEST_SKIP() << why;
    pd = dev->alloc_pd();
    gv::QpCaps caps;
    caps.max_inline = 128;
    gvt::connect_loopback(*dev, *pd, 64, caps, cq, qp);
    for (int i = 0; i < 2; ++i) {
      qh[i] = qp[i]->device_handle();
      ch[i] = cq[i]->device_handle();
      buf[i] = static_cast<std::uint8_t*>(dev->alloc(kBytes));
      mr[i] = pd->reg_mr(buf[i], kBytes, gv::kAllAccess);
      std::mt19937_64 rng(100 + i);
      for (std::size_t k = 0; k < kBytes; ++k) buf[i][k] = static_cast<std::uint8_t>(rng());
    }
    GV_CUDA_CHECK(cudaMallocHost(&res, sizeof(KernelResult)));
  }
  void TearDown() override {
    if (!dev) return;
    cudaFreeHost(res);
    for (int i = 0; i < 2; ++i) {
      mr[i].reset();
      dev->free(buf[i]);
    }
  }

  KernelResult run(const SendWr& wr, const Sge& sge, int side = 0) {
    std::memset(res, 0xcd, sizeof(*res));  // poison
    post_and_poll<<<1, 1>>>(qh[side], ch[side], wr, sge, res);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return *res;
  }

  static constexpr std::size_t kBytes = 1 << 16;
  std::unique_ptr<gv::Device> dev;
  std::unique_ptr<gv::ProtectionDomain> pd;
  std::unique_ptr<gv::CompletionQueue> cq[2];
  std::unique_ptr<gv::QueuePair> qp[2];
  gv::ib::QpHandle qh[2];
  gv::ib::CqHandle ch[2];
  std::uint8_t* buf[2] = {};
  std::unique_ptr<gv::MemoryRegion> mr[2];
  KernelResult* res = nullptr;
};

TEST_F(GpuSoftEndToEnd, WriteReadAtomicsFromAKernel) {
  SendWr wr;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.flags = gv::ib::kWrSignaled;
  wr.num_sge = 1;
  wr.remote_addr = reinterpret_cast<std::uint64_t>(buf[1] + 1000);
  wr.rkey = mr[1]->rkey();
  KernelResult r = run(wr, Sge{reinterpret_cast<std::uint64_t>(buf[0] + 64), 5000, mr[0]->lkey()});
  ASSERT_EQ(r.post, Status::kOk);
  ASSERT_EQ(r.poll, Status::kOk) << gv::describe(r.c);
  EXPECT_EQ(r.c.wqe_opcode, m5::kOpRdmaWrite);
  EXPECT_EQ(std::memcmp(buf[1] + 1000, buf[0] + 64, 5000), 0);

  wr.opcode = WrOpcode::kRdmaRead;
  wr.remote_addr = reinterpret_cast<std::uint64_t>(buf[1] + 30000);
  r = run(wr, Sge{reinterpret_cast<std::uint64_t>(buf[0] + 20000), 3000, mr[0]->lkey()});
  ASSERT_EQ(r.poll, Status::kOk) << gv::describe(r.c);
  EXPECT_EQ(std::memcmp(buf[0] + 20000, buf[1] + 30000, 3000), 0);

  std::uint64_t before;
  std::memcpy(&before, buf[1] + 512, 8);
  wr.opcode = WrOpcode::kAtomicFetchAdd;
  wr.remote_addr = reinterpret_cast<std::uint64_t>(buf[1] + 512);
  wr.compare_add = 77;
  r = run(wr, Sge{reinterpret_cast<std::uint64_t>(buf[0] + 8), 8, mr[0]->lkey()});
  ASSERT_EQ(r.poll, Status::kOk) << gv::describe(r.c);
  std::uint64_t got, now;
  std::memcpy(&got, buf[0] + 8, 8);
  std::memcpy(&now, buf[1] + 512, 8);
  EXPECT_EQ(got, before);
  EXPECT_EQ(now, before + 77);

  wr.opcode = WrOpcode::kAtomicCmpSwp;
  wr.compare_add = before + 77;
  wr.swap = 0xfeedfacecafebeefull;
  r = run(wr, Sge{reinterpret_cast<std::uint64_t>(buf[0] + 16), 8, mr[0]->lkey()});
  ASSERT_EQ(r.poll, Status::kOk) << gv::describe(r.c);
  std::memcpy(&now, buf[1] + 512, 8);
  EXPECT_EQ(now, 0xfeedfacecafebeefull);
}

TEST_F(GpuSoftEndToEnd, SendWithImmAndInlineFromAKernel) {
  // With a GPU-mapped device the queue counters live in GPU memory: kernels post and poll.
  const Sge rs{reinterpret_cast<std::uint64_t>(buf[1] + 40000), 200, mr[1]->lkey()};
  recv_kernel<<<1, 1>>>(qh[1], rs, &res->post);
  GV_CUDA_CHECK(cudaGetLastError());
  GV_CUDA_CHECK(cudaDeviceSynchronize());
  ASSERT_EQ(res->post, Status::kOk);
  SendWr wr;
  wr.opcode = WrOpcode::kSendImm;
  wr.flags = gv::ib::kWrSignaled | gv::ib::kWrInline;
  wr.num_sge = 1;
  wr.imm = 0xabcdef01;
  const KernelResult r = run(wr, Sge{reinterpret_cast<std::uint64_t>(buf[0] + 7), 100, 0});
  ASSERT_EQ(r.poll, Status::kOk) << gv::describe(r.c);
  poll_kernel<<<1, 1>>>(ch[1], res);
  GV_CUDA_CHECK(cudaGetLastError());
  GV_CUDA_CHECK(cudaDeviceSynchronize());
  ASSERT_EQ(res->poll, Status::kOk) << gv::describe(res->c);
  const gv::ib::Completion rc = res->c;
  EXPECT_EQ(rc.cqe_opcode, m5::kCqeRespSendImm);
  EXPECT_EQ(rc.imm, 0xabcdef01u);
  EXPECT_EQ(rc.byte_len, 100u);
  EXPECT_EQ(std::memcmp(buf[1] + 40000, buf[0] + 7, 100), 0);
}

TEST_F(GpuSoftEndToEnd, ErrorCompletionReachesTheKernel) {
  SendWr wr;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.flags = gv::ib::kWrSignaled;
  wr.num_sge = 1;
  wr.remote_addr = reinterpret_cast<std::uint64_t>(buf[1]);
  wr.rkey = mr[1]->rkey() + 1;  // not a key
  const KernelResult r = run(wr, Sge{reinterpret_cast<std::uint64_t>(buf[0]), 64, mr[0]->lkey()});
  EXPECT_EQ(r.poll, Status::kCompletionError);
  EXPECT_EQ(r.c.syndrome, m5::kSyndRemoteAccessErr) << gv::describe(r.c);
  EXPECT_EQ(qp[0]->state(), gv::QpState::kError);
}

TEST_F(GpuSoftEndToEnd, GpuMemoryIsRegisteredWithTheCpuEngine) {
  // The CPU engine moves GPU memory with CUDA copies (test_gpu_cpu_engine.cu covers the verbs).
  void* d = nullptr;
  GV_CUDA_CHECK(cudaMalloc(&d, 4096));
  try {
    auto m = pd->reg_mr(d, 4096, gv::kLocalWrite | gv::kRemoteWrite);
    EXPECT_EQ(m->addr(), d);
  } catch (const gv::Error& e) {
    ADD_FAILURE() << "reg_mr of GPU memory failed: " << e.what();
  }
  GV_CUDA_CHECK(cudaFree(d));
}

TEST(GpuSoftTwoGpus, PingPongWithEachSideOnItsOwnGpu) {
  GV_REQUIRE_GPUS(2);
  gv::DeviceOptions o;
  o.map_to_gpus = true;
  auto dev = gv::Device::open("soft", o);
  auto pd = dev->alloc_pd();
  std::unique_ptr<gv::CompletionQueue> cq[2];
  std::unique_ptr<gv::QueuePair> qp[2];
  for (int g = 0; g < 2; ++g) {
    GV_CUDA_CHECK(cudaSetDevice(g));  // counters are allocated on the current GPU: its side's
    cq[g] = dev->create_cq(64);
    qp[g] = pd->create_qp(*cq[g], *cq[g]);
  }
  qp[0]->connect(qp[1]->info());
  qp[1]->connect(qp[0]->info());
  constexpr std::uint32_t kBytes = 256;
  auto* buf = static_cast<std::uint8_t*>(dev->alloc(4 * kBytes));
  std::memset(buf, 0, 4 * kBytes);
  auto mr = pd->reg_mr(buf, 4 * kBytes, gv::kLocalWrite | gv::kRemoteWrite);
  Status* st;
  GV_CUDA_CHECK(cudaMallocHost(&st, 2 * sizeof(Status)));
  st[0] = st[1] = Status::kEmpty;
  cudaStream_t s[2];
  for (int g = 0; g < 2; ++g) {
    GV_CUDA_CHECK(cudaSetDevice(g));
    GV_CUDA_CHECK(cudaStreamCreateWithFlags(&s[g], cudaStreamNonBlocking));
  }
  // side g: receives into buf + g*kBytes, sends from buf + (2+g)*kBytes into the other's input.
  for (int g = 1; g >= 0; --g) {
    GV_CUDA_CHECK(cudaSetDevice(g));
    pingpong_side<<<1, 1, 0, s[g]>>>(qp[g]->device_handle(), cq[g]->device_handle(), buf + g * kBytes,
                                     buf + (2 + g) * kBytes, reinterpret_cast<std::uint64_t>(buf + (1 - g) * kBytes),
                                     mr->lkey(), mr->rkey(), kBytes, 200, g == 0, &st[g]);
    GV_CUDA_CHECK(cudaGetLastError());
  }
  for (int g = 0; g < 2; ++g) {
    GV_CUDA_CHECK(cudaSetDevice(g));
    GV_CUDA_CHECK(cudaStreamSynchronize(s[g]));
    GV_CUDA_CHECK(cudaStreamDestroy(s[g]));
  }
  GV_CUDA_CHECK(cudaSetDevice(0));
  EXPECT_EQ(st[0], Status::kOk) << gv::to_string(st[0]);
  EXPECT_EQ(st[1], Status::kOk) << gv::to_string(st[1]);
  cudaFreeHost(st);
  mr.reset();
  dev->free(buf);
}

}  // namespace
