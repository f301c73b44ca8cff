// The soft provider's CPU engine serving GPU memory: MRs over cudaMalloc memory, whose bytes
// the engine (a host thread) moves with CUDA copies on its own non-blocking stream, and whose
// atomics it performs as read-modify-writes under a process-wide lock. Queues in pinned host
// memory mapped for the GPU ("gpu-qhost"): kernels post and poll every work request here.
//
// Every wait is bounded: kernels poll with the device API's budget (a timeout is a status the
// test reports), and the one kernel that polls data waits with a budget too.
#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gpuverbs/host/verbs.hpp>
#include <gpuverbs/ib.hpp>

#include "gpu_test.hpp"
#include "host_rings.hpp"
#include "qp_pair.hpp"
#include "verbs_kernels.cuh"

namespace {

using gv::Status;
using gv::ib::Ownership;
using gv::ib::SendWr;
using gv::ib::Sge;
using gv::ib::WrOpcode;
namespace m5 = gv::ib::mlx5;
using gvt::KernelResult;
using gvt::Sges;

using gv::kAllAccess;
constexpr std::uint8_t kPoison = 0x5a;

/// The CPU engine (the default) with its queues pinned and mapped for the GPUs.
gv::DeviceOptions qhost() {
  gv::DeviceOptions o;
  o.map_to_gpus = true;
  return o;
}

/// Waits (bounded) until the last byte of [dst, dst + n) reads `last`, then counts the bytes
/// of the message that differ from `want`: with the last byte published last, none may.
__global__ void await_last_byte(const std::uint8_t* dst, const std::uint8_t* want, std::uint64_t n,
                                std::uint8_t last, const std::uint32_t* abort, Status* st,
                                unsigned long long* mismatches) {
  __shared__ Status s;
  if (threadIdx.x == 0) {
    s = gv::sync::bounded_wait(
        [&] { return gv::sync::load_acquire(&dst[n - 1], gv::sync::Scope::kSystem) == last; },
        gv::Budget{10'000'000'000ull}, abort);
    *st = s;
  }
  __syncthreads();
  if (s != Status::kOk) return;
  const volatile std::uint8_t* d = dst;
  unsigned long long bad = 0;
  for (std::uint64_t i = threadIdx.x; i < n; i += blockDim.x) bad += d[i] != want[i];
  if (bad) atomicAdd(mismatches, bad);
}

/// `count` atomics through one QP, one at a time, results to results[0..count). FETCH_ADD adds
/// `add`; CMP_SWP increments the target by one per success (retrying with the value found),
/// so concurrent posters must lose no increment.
__global__ void atomic_loop(const __grid_constant__ gv::ib::QpHandle qp, const __grid_constant__ gv::ib::CqHandle cq,
                            bool cas, std::uint64_t target, std::uint32_t rkey, std::uint64_t* results,
                            std::uint32_t lkey, std::uint32_t count, std::uint64_t add, std::uint64_t guess,
                            Status* st, std::uint32_t* attempts) {
  SendWr wr;
  wr.opcode = cas ? WrOpcode::kAtomicCmpSwp : WrOpcode::kAtomicFetchAdd;
  wr.flags = gv::ib::kWrSignaled;
  wr.num_sge = 1;
  wr.remote_addr = target;
  wr.rkey = rkey;
  Status s = Status::kOk;
  std::uint32_t tries = 0;
  for (std::uint32_t i = 0; i < count && s == Status::kOk;) {
    Sge sge{reinterpret_cast<std::uint64_t>(results + i), 8, lkey};
    wr.sg_list = &sge;
    wr.compare_add = cas ? guess : add;
    wr.swap = guess + 1;
    s = gv::ib::post_send<Ownership::kExclusive>(qp, wr);
    gv::ib::Completion c;
    if (s == Status::kOk) s = gv::ib::poll_cq<Ownership::kExclusive>(cq, c);
    if (s != Status::kOk) break;
    ++tries;
    if (!cas) {
      ++i;
      continue;
    }
    // The engine's copy of the result completed before it wrote the CQE; a retry reads the
    // same slot again, so the load must not be served from a stale cache line.
    const std::uint64_t found = gv::sync::load_acquire(results + i, gv::sync::Scope::kSystem);
    if (found == guess) ++i;  // ours: the next one starts from the value we stored
    guess = found == guess ? guess + 1 : found;
  }
  *st = s;
  *attempts = tries;
}

/// Two connected QPs on one CPU-engine device; per side a cudaMalloc buffer and a
/// Device::alloc (host) buffer, each registered, filled with seeded random bytes that the
/// host keeps as reference.
class CpuEngineGpuMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    GV_REQUIRE_GPUS(1);
    GV_CUDA_CHECK(cudaSetDevice(0));
    GV_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    GV_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    GV_CUDA_CHECK(cudaMallocHost(&res, sizeof(KernelResult)));
    for (auto*& g : gbuf) GV_CUDA_CHECK(cudaMalloc(&g, kBytes));
    dev = gv::Device::open("soft", qhost());
    pd = dev->alloc_pd();
    gv::QpCaps caps;
    caps.max_send_sge = 4;
    caps.max_recv_sge = 4;
    caps.max_inline = 128;
    gvt::connect_loopback(*dev, *pd, 256, caps, cq, qp);
    for (int i = 0; i < 2; ++i) {
      qh[i] = qp[i]->device_handle();
      ch[i] = cq[i]->device_handle();
      hbuf[i] = static_cast<std::uint8_t*>(dev->alloc(kBytes));
      hmr[i] = pd->reg_mr(hbuf[i], kBytes, kAllAccess);
      gmr[i] = pd->reg_mr(gbuf[i], kBytes, kAllAccess);
      gref[i] = random_bytes(kBytes, seed + 2 * i);
      href[i] = random_bytes(kBytes, seed + 2 * i + 1);
      ASSERT_NO_FATAL_FAILURE(put(gbuf[i], gref[i].data(), kBytes));
      std::memcpy(hbuf[i], href[i].data(), kBytes);
    }
  }

  void TearDown() override {
    for (int i = 0; i < 2; ++i) {
      gmr[i].reset();
      hmr[i].reset();
      if (dev && hbuf[i]) dev->free(hbuf[i]);
      qp[i].reset();
      cq[i].reset();
    }
    pd.reset();
    dev.reset();
    for (auto* g : gbuf)
      if (g) EXPECT_EQ(cudaFree(g), cudaSuccess);
    if (res) EXPECT_EQ(cudaFreeHost(res), cudaSuccess);
    if (stream) EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
    if (side) EXPECT_EQ(cudaStreamDestroy(side), cudaSuccess);
  }

  static std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint64_t s) {
    std::mt19937_64 rng(s);
    std::vector<std::uint8_t> v(n);
    for (auto& b : v) b = static_cast<std::uint8_t>(rng());
    return v;
  }

  void put(void* dst, const void* src, std::size_t n) {
    GV_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, stream));
    GV_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  void fill(void* dst, std::uint8_t v, std::size_t n) {
    GV_CUDA_CHECK(cudaMemsetAsync(dst, v, n, stream));
    GV_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  std::vector<std::uint8_t> get(const void* src, std::size_t n) {
    std::vector<std::uint8_t> v(n);
    EXPECT_EQ(cudaMemcpyAsync(v.data(), src, n, cudaMemcpyDefault, stream), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    return v;
  }

  /// Posts `wr` with `sges` from a kernel on QP `side_qp` and polls its completion.
  KernelResult run(SendWr wr, const Sges& sges, int side_qp = 0) {
    std::memset(res, 0xcd, sizeof(*res));  // poison
    gvt::post_sges_and_poll<<<1, 1, 0, stream>>>(qh[side_qp], ch[side_qp], wr, sges, res);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    return *res;
  }
  KernelResult run(SendWr wr, const Sge& one, int side_qp = 0) {
    Sges s;
    s.s[0] = one;
    s.n = 1;
    return run(wr, s, side_qp);
  }

  static SendWr wr_to(WrOpcode op, const void* raddr, std::uint32_t rkey) {
    SendWr wr;
    wr.opcode = op;
    wr.flags = gv::ib::kWrSignaled;
    wr.remote_addr = reinterpret_cast<std::uint64_t>(raddr);
    wr.rkey = rkey;
    return wr;
  }
  Sge gsge(int i, std::size_t off, std::uint32_t len) const {
    return Sge{reinterpret_cast<std::uint64_t>(gbuf[i] + off), len, gmr[i]->lkey()};
  }
  Sge hsge(int i, std::size_t off, std::uint32_t len) const {
    return Sge{reinterpret_cast<std::uint64_t>(hbuf[i] + off), len, hmr[i]->lkey()};
  }

  static constexpr std::size_t kBytes = std::size_t{4} << 20;
  const std::uint64_t seed = gvt::test_seed(0x5eed'c0de);
  cudaStream_t stream = nullptr, side = nullptr;
  std::unique_ptr<gv::Device> dev;
  std::unique_ptr<gv::ProtectionDomain> pd;
  std::unique_ptr<gv::CompletionQueue> cq[2];
  std::unique_ptr<gv::QueuePair> qp[2];
  gv::ib::QpHandle qh[2];
  gv::ib::CqHandle ch[2];
  std::uint8_t* gbuf[2] = {};
  std::uint8_t* hbuf[2] = {};
  std::vector<std::uint8_t> gref[2], href[2];
  std::unique_ptr<gv::MemoryRegion> gmr[2], hmr[2];
  KernelResult* res = nullptr;
};

TEST_F(CpuEngineGpuMemory, MultiSgeWritesOfEverySizeBetweenGpuAndHostMemory) {
  SCOPED_TRACE(gvt::seed_note(seed));
  std::mt19937_64 rng(seed);
  enum Layout { kGpuToGpu, kMixedToGpu, kGpuToHost, kHostToGpu };
  const char* names[] = {"GPU->GPU", "host+GPU->GPU", "GPU->host", "host->GPU"};
  const std::uint32_t sizes[] = {1, 2, 3, 17, 64, 4095, 4097, 65536 + 5, 1 << 20};
  for (const std::uint32_t n : sizes) {
    for (const Layout l : {kGpuToGpu, kMixedToGpu, kGpuToHost, kHostToGpu}) {
      SCOPED_TRACE(std::string(names[l]) + ", " + std::to_string(n) + " bytes");
      // Cut the message into up to three SGEs at random points; SGE j gathers from its own
      // region of the source buffers (host memory for even j in the mixed layout).
      const std::uint32_t parts = std::min<std::uint32_t>(3, n);
      std::vector<std::uint32_t> cut{0, n};
      while (cut.size() < parts + 1) {
        const auto c = static_cast<std::uint32_t>(1 + rng() % (n - 1));
        if (std::find(cut.begin(), cut.end(), c) == cut.end()) cut.push_back(c);
      }
      std::sort(cut.begin(), cut.end());
      Sges sg;
      std::vector<std::uint8_t> want;
      for (std::uint32_t j = 0; j < parts; ++j) {
        const std::uint32_t len = cut[j + 1] - cut[j];
        const std::size_t off = j * (std::size_t{5} << 18) + rng() % 256;
        const bool host_src = l == kHostToGpu || (l == kMixedToGpu && j % 2 == 0);
        sg.s[j] = host_src ? hsge(0, off, len) : gsge(0, off, len);
        const auto& ref = host_src ? href[0] : gref[0];
        want.insert(want.end(), ref.begin() + off, ref.begin() + off + len);
      }
      sg.n = parts;
      const bool host_dst = l == kGpuToHost;
      const std::size_t doff = rng() % 64;
      std::uint8_t* dst = (host_dst ? hbuf[1] : gbuf[1]) + doff;
      if (host_dst) std::memset(dst, kPoison, n + 64);
      else ASSERT_NO_FATAL_FAILURE(fill(dst, kPoison, n + 64));
      const KernelResult r = run(wr_to(WrOpcode::kRdmaWrite, dst, (host_dst ? hmr[1] : gmr[1])->rkey()), sg);
      ASSERT_EQ(r.post, Status::kOk);
      ASSERT_EQ(r.poll, Status::kOk) << gv::describe(r.c);
      EXPECT_EQ(r.c.wqe_opcode, m5::kOpRdmaWrite);
      const auto got = get(dst, n + 64);
      ASSERT_EQ(std::memcmp(got.data(), want.data(), n), 0) << "payload differs from the host reference";
      ASSERT_EQ(std::count(got.begin() + n, got.end(), kPoison), 64) << "bytes past the message changed";
    }
  }
  EXPECT_FALSE(dev->poll_async_event().has_value());
}

TEST_F(CpuEngineGpuMemory, TheLastByteOfAWriteIntoGpuMemoryLandsLast) {
  // A kernel polls the last byte of the destination while the engine writes; once it sees it,
  // the whole message must be there (the engine copies n - 1 bytes, waits, then the last one).
  SCOPED_TRACE(gvt::seed_note(seed));
  Status* st = nullptr;
  unsigned long long* bad = nullptr;
  GV_CUDA_CHECK(cudaMallocHost(&st, sizeof(Status)));
  GV_CUDA_CHECK(cudaMallocHost(&bad, sizeof(*bad)));
  const std::uint32_t sizes[] = {2, 4096, 65536 + 1, 1 << 20, (1 << 20) - 3};
  for (int round = 0; round < 10; ++round) {
    const std::uint32_t n = sizes[round % 5];
    SCOPED_TRACE("round " + std::to_string(round) + ", " + std::to_string(n) + " bytes");
    const std::size_t soff = 64 * round, doff = 128 + round;
    const std::uint8_t last = static_cast<std::uint8_t>(kPoison ^ (0x80 | round));  // never the poison
    ASSERT_NO_FATAL_FAILURE(put(gbuf[0] + soff + n - 1, &last, 1));
    ASSERT_NO_FATAL_FAILURE(fill(gbuf[1] + doff, kPoison, n));
    *st = Status::kEmpty;
    *bad = 0;
    await_last_byte<<<1, 256, 0, side>>>(gbuf[1] + doff, gbuf[0] + soff, n, last, qh[0].abort, st, bad);
    GV_CUDA_CHECK(cudaGetLastError());
    const KernelResult r = run(wr_to(WrOpcode::kRdmaWrite, gbuf[1] + doff, gmr[1]->rkey()), gsge(0, soff, n));
    GV_CUDA_CHECK(cudaStreamSynchronize(side));
    ASSERT_EQ(r.poll, Status::kOk) << gv::describe(r.c);
    ASSERT_EQ(*st, Status::kOk) << "the poller never saw the last byte: " << gv::to_string(*st);
    EXPECT_EQ(*bad, 0ull) << "bytes of the message were missing when its last byte was visible";
  }
  GV_CUDA_CHECK(cudaFreeHost(st));
  GV_CUDA_CHECK(cudaFreeHost(bad));
}

TEST_F(CpuEngineGpuMemory, ReadsScatterIntoGpuMemoryFromGpuAndHostMemory) {
  struct Case {
    bool remote_gpu;
    std::size_t roff;
    std::uint32_t len;
  };
  for (const Case& c : {Case{false, 12345, 70000}, Case{true, 777, 1 << 20}, Case{true, 3, 1}}) {
    SCOPED_TRACE(std::string(c.remote_gpu ? "from GPU" : "from host") + " memory, " + std::to_string(c.len) + " bytes");
    const std::uint8_t* src = (c.remote_gpu ? gbuf[1] : hbuf[1]) + c.roff;
    const auto& ref = c.remote_gpu ? gref[1] : href[1];
    // Two SGEs into GPU memory (the second at a distance), one when the READ is one byte.
    const std::uint32_t first = c.len > 1 ? c.len / 3 : 1;
    Sges sg;
    sg.s[0] = gsge(0, 100, first);
    sg.n = 1;
    if (c.len > first) sg.s[sg.n++] = gsge(0, (std::size_t{2} << 20) + 5, c.len - first);
    ASSERT_NO_FATAL_FAILURE(fill(gbuf[0], kPoison, kBytes));
    const KernelResult r = run(wr_to(WrOpcode::kRdmaRead, src, (c.remote_gpu ? gmr[1] : hmr[1])->rkey()), sg);
    ASSERT_EQ(r.poll, Status::kOk) << gv::describe(r.c);
    EXPECT_EQ(r.c.byte_len, c.len);
    const auto a = get(gbuf[0] + 100, first + 1);
    ASSERT_EQ(std::memcmp(a.data(), ref.data() + c.roff, first), 0);
    EXPECT_EQ(a[first], kPoison);
    if (c.len > first) {
      const auto b = get(gbuf[0] + (std::size_t{2} << 20) + 5, c.len - first + 1);
      ASSERT_EQ(std::memcmp(b.data(), ref.data() + c.roff + first, c.len - first), 0);
      EXPECT_EQ(b[c.len - first], kPoison);
    }
  }
  // And a READ of GPU memory into host memory.
  const KernelResult r = run(wr_to(WrOpcode::kRdmaRead, gbuf[1] + 4096, gmr[1]->rkey()), hsge(0, 64, 5000));
  ASSERT_EQ(r.poll, Status::kOk) << gv::describe(r.c);
  EXPECT_EQ(std::memcmp(hbuf[0] + 64, gref[1].data() + 4096, 5000), 0);
}

TEST_F(CpuEngineGpuMemory, SendsLandInReceiveBuffersInGpuMemory) {
  Status* st = nullptr;
  GV_CUDA_CHECK(cudaMallocHost(&st, sizeof(Status)));
  struct Case {
    std::uint32_t len;
    bool inl;
  };
  std::size_t roff = 0;
  for (const Case& c : {Case{100, true}, Case{1, false}, Case{9000, false}, Case{(1 << 20) + 7, false}}) {
    SCOPED_TRACE(std::to_string(c.len) + (c.inl ? " bytes inline" : " bytes"));
    ASSERT_NO_FATAL_FAILURE(fill(gbuf[1] + roff, kPoison, c.len + 64));
    *st = Status::kEmpty;
    gvt::recv_kernel<<<1, 1, 0, stream>>>(qh[1], gsge(1, roff, c.len + 32), st);
    GV_CUDA_CHECK(cudaGetLastError());
    GV_CUDA_CHECK(cudaStreamSynchronize(stream));
    ASSERT_EQ(*st, Status::kOk);
    // The payload gathers from host and GPU memory (inline: from host memory into the SQ).
    Sges sg;
    std::vector<std::uint8_t> want;
    SendWr wr = wr_to(WrOpcode::kSendImm, nullptr, 0);
    wr.imm = 0x1234'5678u + c.len;
    if (c.inl) {
      wr.flags |= gv::ib::kWrInline;
      sg.s[sg.n++] = Sge{reinterpret_cast<std::uint64_t>(hbuf[0] + 9), c.len, 0};  // mapped: the kernel reads it
      want.assign(href[0].begin() + 9, href[0].begin() + 9 + c.len);
    } else {
      const std::uint32_t h = c.len / 2;
      if (h) sg.s[sg.n++] = hsge(0, 33, h);
      sg.s[sg.n++] = gsge(0, 1000, c.len - h);
      want.assign(href[0].begin() + 33, href[0].begin() + 33 + h);
      want.insert(want.end(), gref[0].begin() + 1000, gref[0].begin() + 1000 + (c.len - h));
    }
    const KernelResult r = run(wr, sg);
    ASSERT_EQ(r.poll, Status::kOk) << gv::describe(r.c);
    gvt::poll_kernel<<<1, 1, 0, stream>>>(ch[1], res);
    GV_CUDA_CHECK(cudaGetLastError());
    GV_CUDA_CHECK(cudaStreamSynchronize(stream));
    ASSERT_EQ(res->poll, Status::kOk) << gv::describe(res->c);
    EXPECT_EQ(res->c.cqe_opcode, m5::kCqeRespSendImm);
    EXPECT_EQ(res->c.byte_len, c.len);
    EXPECT_EQ(res->c.imm, wr.imm);
    const auto got = get(gbuf[1] + roff, c.len + 64);
    ASSERT_EQ(std::memcmp(got.data(), want.data(), c.len), 0);
    EXPECT_EQ(std::count(got.begin() + c.len, got.end(), kPoison), 64);
    roff += c.len + 64 + 17;
  }
  GV_CUDA_CHECK(cudaFreeHost(st));
}

TEST_F(CpuEngineGpuMemory, AtomicsOnGpuMemoryFromTwoEnginesLoseNothing) {
  // Two CPU engines (two devices of this process) run FETCH_ADD, then CMP_SWP increments, on
  // one target in GPU memory at the same time; results land in GPU memory.
  SCOPED_TRACE(gvt::seed_note(seed));
  auto dev_b = gv::Device::open("soft", qhost());
  auto pd_b = dev_b->alloc_pd();
  auto cq_b = dev_b->create_cq(64);
  auto qp_b = pd_b->create_qp(*cq_b, *cq_b);
  auto cq_a = dev->create_cq(64);
  auto qp_a = pd->create_qp(*cq_a, *cq_a);  // the responder of qp_b, in the target's PD
  qp_b->connect(qp_a->info());
  qp_a->connect(qp_b->info());
  constexpr std::uint32_t kOps = 400;
  std::uint64_t* res_b = nullptr;
  GV_CUDA_CHECK(cudaMalloc(&res_b, 2 * kOps * 8));
  auto mr_b = pd_b->reg_mr(res_b, 2 * kOps * 8, gv::kLocalWrite);
  auto* res_a = reinterpret_cast<std::uint64_t*>(gbuf[0] + 8192);
  std::uint8_t* target = gbuf[1] + 512;
  std::uint64_t init = std::mt19937_64(seed)() >> 8;
  ASSERT_NO_FATAL_FAILURE(put(target, &init, 8));

  Status* st = nullptr;
  std::uint32_t* tries = nullptr;
  GV_CUDA_CHECK(cudaMallocHost(&st, 2 * sizeof(Status)));
  GV_CUDA_CHECK(cudaMallocHost(&tries, 2 * sizeof(std::uint32_t)));
  const auto launch = [&](bool cas, std::uint64_t add, std::uint64_t guess, std::size_t at) {
    st[0] = st[1] = Status::kEmpty;
    atomic_loop<<<1, 1, 0, stream>>>(qh[0], ch[0], cas, reinterpret_cast<std::uint64_t>(target), gmr[1]->rkey(),
                                     res_a + at, gmr[0]->lkey(), kOps, add, guess, &st[0], &tries[0]);
    atomic_loop<<<1, 1, 0, side>>>(qp_b->device_handle(), cq_b->device_handle(), cas,
                                   reinterpret_cast<std::uint64_t>(target), gmr[1]->rkey(), res_b + at,
                                   mr_b->lkey(), kOps, add, guess, &st[1], &tries[1]);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(side), cudaSuccess);
    EXPECT_EQ(st[0], Status::kOk) << gv::to_string(st[0]);
    EXPECT_EQ(st[1], Status::kOk) << gv::to_string(st[1]);
  };
  const auto results = [&](std::size_t at) {
    std::vector<std::uint64_t> v(2 * kOps);
    const auto a = get(res_a + at, kOps * 8), b = get(res_b + at, kOps * 8);
    std::memcpy(v.data(), a.data(), a.size());
    std::memcpy(v.data() + kOps, b.data(), b.size());
    std::sort(v.begin(), v.end());
    return v;
  };
  const auto value = [&] {
    std::uint64_t v = 0;
    const auto b = get(target, 8);
    std::memcpy(&v, b.data(), 8);
    return v;
  };

  constexpr std::uint64_t kAdd = 3;
  ASSERT_NO_FATAL_FAILURE(launch(false, kAdd, 0, 0));
  EXPECT_EQ(value(), init + 2 * kOps * kAdd);
  const auto fa = results(0);
  for (std::uint32_t k = 0; k < 2 * kOps; ++k)  // sorted: distinct and exactly the sequence
    ASSERT_EQ(fa[k], init + k * kAdd) << "fetch-add result " << k << " of " << 2 * kOps;

  const std::uint64_t mid = init + 2 * kOps * kAdd;
  ASSERT_NO_FATAL_FAILURE(launch(true, 0, init, kOps));  // a stale guess: the first CAS fails
  EXPECT_EQ(value(), mid + 2 * kOps) << "CMP_SWP increments were lost";
  EXPECT_GT(tries[0] + tries[1], 2 * kOps);  // at least the first attempt of each missed
  const auto cs = results(kOps);
  for (std::uint32_t k = 0; k < 2 * kOps; ++k) ASSERT_EQ(cs[k], mid + k) << "successful CMP_SWP " << k;

  // One CMP_SWP that fails leaves the target alone and returns what it found.
  SendWr miss = wr_to(WrOpcode::kAtomicCmpSwp, target, gmr[1]->rkey());
  miss.compare_add = 1;
  miss.swap = 0xfeed;
  const KernelResult r = run(miss, gsge(0, 64, 8));
  ASSERT_EQ(r.poll, Status::kOk) << gv::describe(r.c);
  std::uint64_t found = 0;
  std::memcpy(&found, get(gbuf[0] + 64, 8).data(), 8);
  EXPECT_EQ(found, mid + 2 * kOps);
  EXPECT_EQ(value(), mid + 2 * kOps);

  mr_b.reset();
  qp_b.reset();
  qp_a.reset();
  cq_a.reset();
  cq_b.reset();
  pd_b.reset();
  dev_b.reset();
  GV_CUDA_CHECK(cudaFree(res_b));
  GV_CUDA_CHECK(cudaFreeHost(st));
  GV_CUDA_CHECK(cudaFreeHost(tries));
}

// Each error case on fresh QPs: after the first error the requester's QP is in error, and a
// responder in error answers nothing (transport retry exceeded), as an HCA's would.
TEST_F(CpuEngineGpuMemory, BadKeyOnGpuMemoryIsRemoteAccessError) {
  ASSERT_NO_FATAL_FAILURE(fill(gbuf[1], kPoison, 4096));
  const KernelResult r = run(wr_to(WrOpcode::kRdmaWrite, gbuf[1], gmr[1]->rkey() + 1), gsge(0, 0, 64));
  EXPECT_EQ(r.poll, Status::kCompletionError);
  EXPECT_EQ(r.c.syndrome, m5::kSyndRemoteAccessErr) << gv::describe(r.c);
  EXPECT_EQ(qp[0]->state(), gv::QpState::kError);
  const auto after = get(gbuf[1], 4096);
  EXPECT_EQ(std::count(after.begin(), after.end(), kPoison), 4096);
}

TEST_F(CpuEngineGpuMemory, WritePastAGpuMrIsRemoteAccessError) {
  const KernelResult r = run(wr_to(WrOpcode::kRdmaWrite, gbuf[0] + kBytes - 10, gmr[0]->rkey()), gsge(1, 0, 64), 1);
  EXPECT_EQ(r.poll, Status::kCompletionError);
  EXPECT_EQ(r.c.syndrome, m5::kSyndRemoteAccessErr) << gv::describe(r.c);
  EXPECT_EQ(qp[1]->state(), gv::QpState::kError);
  EXPECT_EQ(get(gbuf[0] + kBytes - 10, 10), std::vector<std::uint8_t>(gref[0].end() - 10, gref[0].end()));
}

TEST_F(CpuEngineGpuMemory, DeregisteringAGpuMrMakesLaterWritesFail) {
  // A second MR over part of gbuf[1]: deregistering it removes its range only, so the bigger
  // MR over the same memory keeps working; its own key then fails.
  std::uint8_t* part = gbuf[1] + (std::size_t{1} << 20);
  auto extra = pd->reg_mr(part, 65536, gv::kLocalWrite | gv::kRemoteWrite);
  const std::uint32_t stale = extra->rkey();
  KernelResult r = run(wr_to(WrOpcode::kRdmaWrite, part, stale), gsge(0, 0, 4000));
  ASSERT_EQ(r.poll, Status::kOk) << gv::describe(r.c);
  EXPECT_EQ(get(part, 4000), std::vector<std::uint8_t>(gref[0].begin(), gref[0].begin() + 4000));
  extra.reset();
  r = run(wr_to(WrOpcode::kRdmaWrite, part, gmr[1]->rkey()), gsge(0, 5000, 4000));
  ASSERT_EQ(r.poll, Status::kOk) << gv::describe(r.c);
  EXPECT_EQ(get(part, 4000), std::vector<std::uint8_t>(gref[0].begin() + 5000, gref[0].begin() + 9000));

  ASSERT_NO_FATAL_FAILURE(fill(part, kPoison, 4000));
  r = run(wr_to(WrOpcode::kRdmaWrite, part, stale), gsge(0, 0, 4000));
  EXPECT_EQ(r.poll, Status::kCompletionError);
  EXPECT_EQ(r.c.syndrome, m5::kSyndRemoteAccessErr) << gv::describe(r.c);
  const auto after = get(part, 4000);
  EXPECT_EQ(std::count(after.begin(), after.end(), kPoison), 4000);
  EXPECT_EQ(qp[0]->state(), gv::QpState::kError);
  EXPECT_FALSE(dev->poll_async_event().has_value());
}

}  // namespace
