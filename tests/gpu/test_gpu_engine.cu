// The software HCA's GPU engine on one GPU: queues, tables and buffers in GPU memory, WQEs
// executed by a persistent kernel, posted and polled by kernels. Every opcode and error path end
// to end. (Two GPUs and two processes: test_gpu_engine_peers; hazards: test_gpu_engine_hazards.)
#include <chrono>
#include <thread>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gpuverbs/host/verbs.hpp>
#include <gpuverbs/ib.hpp>

#include "gpu_engine_support.cuh"
#include "gpu_test.hpp"
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
using gvt::engine_on;
using gv::kAllAccess;
using gvt::post_and_poll;
using gvt::random_bytes;
using gvt::recv_kernel;
using gvt::Stream;

/// Two connected QPs on one GPU engine, a GPU buffer per side (Device::alloc), plus a
/// cudaMalloc buffer and mapped pinned host memory outside the arena.
class GpuEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    GV_REQUIRE_GPUS(1);
    GV_CUDA_CHECK(cudaSetDevice(0));
    GV_CUDA_CHECK(cudaMallocHost(&res, sizeof(KernelResult)));
    GV_CUDA_CHECK(cudaMalloc(&outside, kBytes));
    GV_CUDA_CHECK(cudaHostAlloc(&mapped, kBytes, cudaHostAllocMapped));
    stream = std::make_unique<Stream>();
    dev = gv::Device::open("soft", engine_on(0));
    pd = dev->alloc_pd();
    gv::QpCaps caps;
    caps.max_inline = 128;
    gvt::connect_loopback(*dev, *pd, 64, caps, cq, qp);
    for (int i = 0; i < 2; ++i) {
      qh[i] = qp[i]->device_handle();
      ch[i] = cq[i]->device_handle();
      buf[i] = static_cast<std::uint8_t*>(dev->alloc(kBytes));
      mr[i] = pd->reg_mr(buf[i], kBytes, kAllAccess);
      host[i] = random_bytes(kBytes, 100 + i);
      stream->put(buf[i], host[i].data(), kBytes);
    }
  }

  void TearDown() override {
    for (auto& m : mr) m.reset();
    if (dev)
      for (auto* b : buf)
        if (b) dev->free(b);
    for (auto& q : qp) q.reset();
    for (auto& c : cq) c.reset();
    pd.reset();
    dev.reset();  // stops the engine: device-wide calls are safe again
    stream.reset();
    if (res) cudaFreeHost(res);
    if (outside) cudaFree(outside);
    if (mapped) cudaFreeHost(mapped);
  }

  KernelResult run(const SendWr& wr, const Sge& sge, int side = 0) {
    std::memset(res, 0xcd, sizeof(*res));  // poison
    post_and_poll<<<1, 1, 0, stream->s>>>(qh[side], ch[side], wr, sge, res);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    stream->sync();
    return *res;
  }

  Sge sge(int side, std::size_t off, std::uint32_t len) const {
    return Sge{reinterpret_cast<std::uint64_t>(buf[side] + off), len, mr[side]->lkey()};
  }

  static SendWr write_to(std::uint64_t addr, std::uint32_t rkey) {
    SendWr wr;
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.flags = gv::ib::kWrSignaled;
    wr.num_sge = 1;
    wr.remote_addr = addr;
    wr.rkey = rkey;
    return wr;
  }

  static constexpr std::size_t kBytes = std::size_t{2} << 20;
  std::unique_ptr<Stream> stream;
  std::unique_ptr<gv::Device> dev;
  std::unique_ptr<gv::ProtectionDomain> pd;
  std::unique_ptr<gv::CompletionQueue> cq[2];
  std::unique_ptr<gv::QueuePair> qp[2];
  gv::ib::QpHandle qh[2];
  gv::ib::CqHandle ch[2];
  std::uint8_t* buf[2] = {};
  std::vector<std::uint8_t> host[2];
  std::unique_ptr<gv::MemoryRegion> mr[2];
  KernelResult* res = nullptr;
  void* outside = nullptr;
  void* mapped = nullptr;
};

TEST_F(GpuEngine, HandlesNameTheGpuEngineAsExecutor) {
  EXPECT_EQ(qh[0].executor, gv::sync::Scope::kGpu);
  EXPECT_EQ(qh[0].rq_executor, gv::sync::Scope::kGpu);  // the peer QP is served by the same engine
  EXPECT_EQ(ch[0].executor, gv::sync::Scope::kGpu);
  cudaPointerAttributes at{};
  GV_CUDA_CHECK(cudaPointerGetAttributes(&at, qh[0].sq));
  EXPECT_EQ(at.type, cudaMemoryTypeDevice);
  GV_CUDA_CHECK(cudaPointerGetAttributes(&at, buf[0]));
  EXPECT_EQ(at.type, cudaMemoryTypeDevice);
}

TEST_F(GpuEngine, WriteReadAtomicsOfEverySizeAndAlignment) {
  // Sizes straddle the engine's thresholds (one store; a lane alone, up to 512 bytes; the warp,
  // 32 lanes converged, above) and every word width the movers use.
  const std::uint32_t sizes[] = {1, 7, 8, 127, 128, 129, 130, 512, 513, 514, 1537, 4095, 5000, 65536 + 3, 1 << 20};
  std::size_t roff = 1, loff = 3;
  for (const std::uint32_t n : sizes) {
    KernelResult r = run(write_to(reinterpret_cast<std::uint64_t>(buf[1] + roff), mr[1]->rkey()), sge(0, loff, n));
    ASSERT_EQ(r.poll, Status::kOk) << n << ": " << gv::describe(r.c);
    EXPECT_EQ(r.c.wqe_opcode, m5::kOpRdmaWrite);
    const auto got = stream->get(buf[1] + roff, n);
    ASSERT_EQ(std::memcmp(got.data(), host[0].data() + loff, n), 0) << "WRITE of " << n << " bytes";
    std::memcpy(host[1].data() + roff, host[0].data() + loff, n);
    roff = (roff + 17) % 64;
    loff = (loff * 3 + 16) % 64;  // aligned and unaligned pairs
  }
  SendWr rd = write_to(reinterpret_cast<std::uint64_t>(buf[1] + 300000), mr[1]->rkey());
  rd.opcode = WrOpcode::kRdmaRead;
  KernelResult r = run(rd, sge(0, 1500000, 70000));
  ASSERT_EQ(r.poll, Status::kOk) << gv::describe(r.c);
  EXPECT_EQ(r.c.byte_len, 70000u);
  EXPECT_EQ(stream->get(buf[0] + 1500000, 70000),
            std::vector<std::uint8_t>(host[1].begin() + 300000, host[1].begin() + 370000));

  std::uint64_t before;
  std::memcpy(&before, host[1].data() + 512, 8);
  SendWr fa = write_to(reinterpret_cast<std::uint64_t>(buf[1] + 512), mr[1]->rkey());
  fa.opcode = WrOpcode::kAtomicFetchAdd;
  fa.compare_add = 77;
  r = run(fa, sge(0, 8, 8));
  ASSERT_EQ(r.poll, Status::kOk) << gv::describe(r.c);
  std::uint64_t got, now;
  std::memcpy(&got, stream->get(buf[0] + 8, 8).data(), 8);
  std::memcpy(&now, stream->get(buf[1] + 512, 8).data(), 8);
  EXPECT_EQ(got, before);
  EXPECT_EQ(now, before + 77);

  SendWr cs = fa;
  cs.opcode = WrOpcode::kAtomicCmpSwp;
  cs.compare_add = before;  // stale: no swap, the current value comes back
  cs.swap = 1;
  r = run(cs, sge(0, 16, 8));
  ASSERT_EQ(r.poll, Status::kOk) << gv::describe(r.c);
  std::memcpy(&got, stream->get(buf[0] + 16, 8).data(), 8);
  EXPECT_EQ(got, before + 77);
  cs.compare_add = before + 77;
  cs.swap = 0xfeedfacecafebeefull;
  r = run(cs, sge(0, 16, 8));
  ASSERT_EQ(r.poll, Status::kOk) << gv::describe(r.c);
  std::memcpy(&now, stream->get(buf[1] + 512, 8).data(), 8);
  EXPECT_EQ(now, 0xfeedfacecafebeefull);
}

TEST_F(GpuEngine, ShortWritesOfEveryLengthAndAlignmentLeaveTheirNeighboursAlone) {
  // A lane moves a short payload in words as wide as both pointers allow, in groups of loads
  // before their stores, and the rest bytewise: every length from the first beyond one store
  // (8 bytes) to a few full groups, from SGEs and destinations aligned to 16, 8, 4, 2 and 1
  // bytes, and as inline data (read from its WQE, 4-byte aligned there). The 16 bytes on each
  // side of every destination must keep what they held.
  std::size_t window = 8192;
  for (const bool inl : {false, true}) {
    for (std::uint32_t n = 9; n <= 66; ++n) {
      for (const std::size_t align : {16, 8, 4, 2, 1}) {
        const std::size_t loff = window + align, roff = window + 64 + align;
        window += 256;
        SendWr wr = write_to(reinterpret_cast<std::uint64_t>(buf[1] + roff), mr[1]->rkey());
        if (inl) wr.flags |= gv::ib::kWrInline;
        const KernelResult r = run(wr, sge(0, loff, n));
        ASSERT_EQ(r.poll, Status::kOk) << n << " bytes: " << gv::describe(r.c);
        std::memcpy(host[1].data() + roff, host[0].data() + loff, n);
        const auto got = stream->get(buf[1] + roff - 16, n + 32);
        ASSERT_EQ(std::memcmp(got.data(), host[1].data() + roff - 16, n + 32), 0)
            << (inl ? "inline " : "") << "WRITE of " << n << " bytes, pointers aligned to " << align;
      }
    }
  }
}

TEST_F(GpuEngine, SendImmInlineAndWriteImmCompleteAtTheReceiver) {
  recv_kernel<<<1, 1, 0, stream->s>>>(qh[1], sge(1, 40000, 200), &res->post);
  stream->sync();
  ASSERT_EQ(res->post, Status::kOk);
  SendWr wr;
  wr.opcode = WrOpcode::kSendImm;
  wr.flags = gv::ib::kWrSignaled | gv::ib::kWrInline;
  wr.num_sge = 1;
  wr.imm = 0xabcdef01;
  KernelResult r = run(wr, Sge{reinterpret_cast<std::uint64_t>(buf[0] + 7), 100, 0});
  ASSERT_EQ(r.poll, Status::kOk) << gv::describe(r.c);
  poll_kernel<<<1, 1, 0, stream->s>>>(ch[1], res);
  stream->sync();
  ASSERT_EQ(res->poll, Status::kOk) << gv::describe(res->c);
  EXPECT_EQ(res->c.cqe_opcode, m5::kCqeRespSendImm);
  EXPECT_EQ(res->c.imm, 0xabcdef01u);
  EXPECT_EQ(res->c.byte_len, 100u);
  EXPECT_EQ(stream->get(buf[1] + 40000, 100), std::vector<std::uint8_t>(host[0].begin() + 7, host[0].begin() + 107));

  recv_kernel<<<1, 1, 0, stream->s>>>(qh[1], Sge{0, 0, 0}, &res->post);
  stream->sync();
  ASSERT_EQ(res->post, Status::kOk);
  SendWr wi = write_to(reinterpret_cast<std::uint64_t>(buf[1] + 9000), mr[1]->rkey());
  wi.opcode = WrOpcode::kRdmaWriteImm;
  wi.imm = 0x12345678;
  r = run(wi, sge(0, 100, 3000));
  ASSERT_EQ(r.poll, Status::kOk) << gv::describe(r.c);
  poll_kernel<<<1, 1, 0, stream->s>>>(ch[1], res);
  stream->sync();
  ASSERT_EQ(res->poll, Status::kOk) << gv::describe(res->c);
  EXPECT_EQ(res->c.cqe_opcode, m5::kCqeRespWrImm);
  EXPECT_EQ(res->c.imm, 0x12345678u);
  EXPECT_EQ(res->c.byte_len, 3000u);
  EXPECT_EQ(stream->get(buf[1] + 9000, 3000), std::vector<std::uint8_t>(host[0].begin() + 100, host[0].begin() + 3100));
}

TEST_F(GpuEngine, GpuMemoryOutsideTheArenaAndMappedHostMemoryAreReachable) {
  auto mo = pd->reg_mr(outside, kBytes, kAllAccess);
  void* mapped_dev = nullptr;
  GV_CUDA_CHECK(cudaHostGetDevicePointer(&mapped_dev, mapped, 0));
  ASSERT_EQ(mapped_dev, mapped);  // UVA
  auto mh = pd->reg_mr(mapped, kBytes, kAllAccess);
  std::memset(mapped, 0, kBytes);
  KernelResult r = run(write_to(reinterpret_cast<std::uint64_t>(outside) + 64, mo->rkey()), sge(0, 0, 10000));
  ASSERT_EQ(r.poll, Status::kOk) << gv::describe(r.c);
  EXPECT_EQ(stream->get(static_cast<std::uint8_t*>(outside) + 64, 10000),
            std::vector<std::uint8_t>(host[0].begin(), host[0].begin() + 10000));
  r = run(write_to(reinterpret_cast<std::uint64_t>(mapped) + 8, mh->rkey()), sge(0, 20000, 5000));
  ASSERT_EQ(r.poll, Status::kOk) << gv::describe(r.c);
  EXPECT_EQ(std::memcmp(static_cast<std::uint8_t*>(mapped) + 8, host[0].data() + 20000, 5000), 0);

  std::vector<std::uint8_t> pageable(4096);
  try {
    pd->reg_mr(pageable.data(), pageable.size(), gv::kLocalWrite);
    ADD_FAILURE() << "reg_mr of pageable host memory succeeded on the GPU engine";
  } catch (const gv::Error& e) {
    EXPECT_NE(std::string(e.what()).find("pageable"), std::string::npos) << e.what();
  }
}

TEST_F(GpuEngine, RemoteAccessErrorMovesTheQpToErrorAndFlushesTheRest) {
  SendWr bad = write_to(reinterpret_cast<std::uint64_t>(buf[1]), mr[1]->rkey() + 1);  // not a key
  KernelResult r = run(bad, sge(0, 0, 64));
  EXPECT_EQ(r.poll, Status::kCompletionError);
  EXPECT_EQ(r.c.syndrome, m5::kSyndRemoteAccessErr) << gv::describe(r.c);
  EXPECT_EQ(qp[0]->state(), gv::QpState::kError);
  r = run(write_to(reinterpret_cast<std::uint64_t>(buf[1]), mr[1]->rkey()), sge(0, 0, 64));
  EXPECT_EQ(r.poll, Status::kCompletionError);
  EXPECT_EQ(r.c.syndrome, m5::kSyndWrFlushErr) << gv::describe(r.c);
  EXPECT_EQ(stream->get(buf[1], 64), std::vector<std::uint8_t>(host[1].begin(), host[1].begin() + 64));
}

TEST_F(GpuEngine, LocalProtectionBoundsAndRnrErrors) {
  KernelResult r = run(write_to(reinterpret_cast<std::uint64_t>(buf[1]), mr[1]->rkey()),
                       Sge{reinterpret_cast<std::uint64_t>(buf[0]), 64, mr[0]->lkey() ^ 0x100});
  EXPECT_EQ(r.c.syndrome, m5::kSyndLocalProtErr) << gv::describe(r.c);

  // A fresh pair: bounds (one byte past the region) and RNR (SEND with no receive posted).
  auto c2 = dev->create_cq(16), c3 = dev->create_cq(16);
  auto a = pd->create_qp(*c2, *c2), b = pd->create_qp(*c3, *c3);
  gv::ConnectAttr attr;
  attr.rnr_retry = 1;
  attr.min_rnr_timer = 1;  // 10 us
  a->connect(b->info(), attr);
  b->connect(a->info(), attr);
  qh[0] = a->device_handle();
  ch[0] = c2->device_handle();
  r = run(write_to(reinterpret_cast<std::uint64_t>(buf[1]) + kBytes - 10, mr[1]->rkey()), sge(0, 0, 11));
  EXPECT_EQ(r.c.syndrome, m5::kSyndRemoteAccessErr) << gv::describe(r.c);
  auto c4 = dev->create_cq(16), c5 = dev->create_cq(16);
  auto e = pd->create_qp(*c4, *c4), f = pd->create_qp(*c5, *c5);
  e->connect(f->info(), attr);
  f->connect(e->info(), attr);
  qh[0] = e->device_handle();
  ch[0] = c4->device_handle();
  SendWr send;
  send.opcode = WrOpcode::kSend;
  send.flags = gv::ib::kWrSignaled;
  send.num_sge = 1;
  r = run(send, sge(0, 0, 32));
  EXPECT_EQ(r.c.syndrome, m5::kSyndRnrRetryExcErr) << gv::describe(r.c);
}

TEST_F(GpuEngine, QuiesceLetsTheDeviceSynchronizeAndResumeContinues) {
  dev->quiesce();
  GV_CUDA_CHECK(cudaDeviceSynchronize());
  void* p = nullptr;
  GV_CUDA_CHECK(cudaMalloc(&p, 1 << 20));
  GV_CUDA_CHECK(cudaFree(p));
  EXPECT_THROW(dev->quiesce(), gv::Error);
  dev->resume();
  EXPECT_THROW(dev->resume(), gv::Error);
  const KernelResult r = run(write_to(reinterpret_cast<std::uint64_t>(buf[1]), mr[1]->rkey()), sge(0, 0, 4096));
  ASSERT_EQ(r.poll, Status::kOk) << gv::describe(r.c);
  EXPECT_EQ(stream->get(buf[1], 4096), std::vector<std::uint8_t>(host[0].begin(), host[0].begin() + 4096));
}

TEST_F(GpuEngine, QpsComeAndGoWhileTheEngineRuns) {
  for (int round = 0; round < 20; ++round) {
    auto c1 = dev->create_cq(8), c2 = dev->create_cq(8);
    auto a = pd->create_qp(*c1, *c1), b = pd->create_qp(*c2, *c2);
    a->connect(b->info());
    b->connect(a->info());
    qh[0] = a->device_handle();
    ch[0] = c1->device_handle();
    const std::size_t off = 4096 * round;
    const KernelResult r = run(write_to(reinterpret_cast<std::uint64_t>(buf[1] + off), mr[1]->rkey()), sge(0, off, 256));
    std::string events;  // what the device reported besides the CQE (a doorbell fault, an overrun)
    if (r.poll != Status::kOk)
      while (const auto e = dev->poll_async_event()) events += " [" + e->message + "]";
    ASSERT_EQ(r.poll, Status::kOk) << round << ": " << gv::describe(r.c) << events;
    ASSERT_EQ(stream->get(buf[1] + off, 256), std::vector<std::uint8_t>(host[0].begin() + off, host[0].begin() + off + 256));
  }
}

/// Block b owns QP b: `n` signaled inline WRITEs of 16 bytes into its own slots of the target.
__global__ void many_qps(const gv::ib::QpHandle* qps, const gv::ib::CqHandle* cqs, std::uint64_t remote,
                         std::uint32_t rkey, int n, Status* status) {
  if (threadIdx.x != 0) return;
  const int b = blockIdx.x;
  Status st = Status::kOk;
  for (int i = 0; i < n && st == Status::kOk; ++i) {
    std::uint32_t payload[4] = {static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(i), 0xa5a5a5a5u,
                                static_cast<std::uint32_t>(b * 1000003 + i)};
    const Sge s{reinterpret_cast<std::uint64_t>(payload), 16, 0};
    SendWr wr;
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.flags = gv::ib::kWrSignaled | gv::ib::kWrInline;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.remote_addr = remote + (static_cast<std::uint64_t>(b) * n + i) * 16;
    wr.rkey = rkey;
    st = gv::ib::post_send<Ownership::kExclusive>(qps[b], wr);
    gv::ib::Completion c;
    if (st == Status::kOk) st = gv::ib::poll_cq<Ownership::kExclusive>(cqs[b], c);
  }
  status[b] = st;
}

TEST_F(GpuEngine, SixteenBlocksOnSixteenQpsEveryMessageLandsOnce) {
  constexpr int kQps = 16, kN = 300;
  std::unique_ptr<gv::CompletionQueue> cqs[kQps];
  std::unique_ptr<gv::QueuePair> src[kQps], dst[kQps];
  std::vector<gv::ib::QpHandle> qhs(kQps);
  std::vector<gv::ib::CqHandle> chs(kQps);
  std::vector<std::unique_ptr<gv::CompletionQueue>> sinks;
  for (int i = 0; i < kQps; ++i) {
    cqs[i] = dev->create_cq(32);
    sinks.push_back(dev->create_cq(4));
    src[i] = pd->create_qp(*cqs[i], *cqs[i]);
    dst[i] = pd->create_qp(*sinks.back(), *sinks.back());
    src[i]->connect(dst[i]->info());
    dst[i]->connect(src[i]->info());
    qhs[i] = src[i]->device_handle();
    chs[i] = cqs[i]->device_handle();
  }
  auto* handles = static_cast<std::uint8_t*>(dev->alloc(kQps * (sizeof(gv::ib::QpHandle) + sizeof(gv::ib::CqHandle))));
  auto* dq = reinterpret_cast<gv::ib::QpHandle*>(handles);
  auto* dc = reinterpret_cast<gv::ib::CqHandle*>(handles + kQps * sizeof(gv::ib::QpHandle));
  stream->put(dq, qhs.data(), kQps * sizeof(gv::ib::QpHandle));
  stream->put(dc, chs.data(), kQps * sizeof(gv::ib::CqHandle));
  std::vector<Status> status(kQps, Status::kEmpty);
  auto* dst_status = static_cast<Status*>(dev->alloc(kQps * sizeof(Status)));
  stream->put(dst_status, status.data(), kQps * sizeof(Status));  // poison
  stream->put(buf[1], std::vector<std::uint8_t>(kQps * kN * 16, 0).data(), kQps * kN * 16);
  many_qps<<<kQps, 32, 0, stream->s>>>(dq, dc, reinterpret_cast<std::uint64_t>(buf[1]), mr[1]->rkey(), kN, dst_status);
  GV_CUDA_CHECK(cudaGetLastError());
  stream->sync();
  const auto sv = stream->get(dst_status, kQps * sizeof(Status));
  std::memcpy(status.data(), sv.data(), sv.size());
  for (int b = 0; b < kQps; ++b) EXPECT_EQ(status[b], Status::kOk) << "block " << b;
  const auto got = stream->get(buf[1], kQps * kN * 16);
  for (int b = 0; b < kQps; ++b)
    for (int i = 0; i < kN; ++i) {
      std::uint32_t w[4];
      std::memcpy(w, got.data() + (static_cast<std::size_t>(b) * kN + i) * 16, 16);
      ASSERT_TRUE(w[0] == static_cast<std::uint32_t>(b) && w[1] == static_cast<std::uint32_t>(i) &&
                  w[2] == 0xa5a5a5a5u && w[3] == static_cast<std::uint32_t>(b * 1000003 + i))
          << "block " << b << " message " << i;
    }
  dev->free(dst_status);
  dev->free(handles);
}

/// Lane 0 posts `n` signaled 8 B inline WRITEs (one WQEBB each) to slots of `remote`; the warp
/// then takes their completions with poll_cq_warp, checking order and status. Twice: the second
/// round only fits in the send queue if the first round's completions retired its space.
__global__ void warp_poll_rounds(const __grid_constant__ gv::ib::QpHandle qp, const __grid_constant__ gv::ib::CqHandle cq,
                                 std::uint64_t remote, std::uint32_t rkey, int n, int* batches, Status* status) {
  const unsigned lane = threadIdx.x % 32;
  Status st = Status::kOk;
  int polls = 0;
  for (int round = 0; round < 2 && st == Status::kOk; ++round) {
    if (lane == 0) {
      for (int i = 0; i < n && st == Status::kOk; ++i) {
        const std::uint64_t v = static_cast<std::uint64_t>(round) * n + i;
        const Sge s{reinterpret_cast<std::uint64_t>(&v), 8, 0};
        SendWr wr;
        wr.opcode = WrOpcode::kRdmaWrite;
        wr.flags = gv::ib::kWrSignaled | gv::ib::kWrInline;
        wr.sg_list = &s;
        wr.num_sge = 1;
        wr.remote_addr = remote + 8 * v;
        wr.rkey = rkey;
        st = gv::ib::post_send<Ownership::kExclusive>(qp, wr);
      }
    }
    st = static_cast<Status>(__shfl_sync(0xffffffffu, static_cast<std::uint32_t>(st), 0));
    const std::uint64_t start = gv::sync::now_ns();
    for (int got = 0; got < n && st == Status::kOk;) {
      gv::ib::Completion c;
      int k = 0;
      const Status ps = gv::ib::poll_cq_warp(cq, c, k);
      if (k == 0) {
        if (ps != Status::kEmpty) st = ps;
        else if (gv::sync::now_ns() - start > 2'000'000'000ull) st = Status::kTimeout;
        continue;
      }
      ++polls;
      const std::uint16_t want = static_cast<std::uint16_t>(round * n + got + static_cast<int>(lane));
      const bool bad = static_cast<int>(lane) < k && (ps != Status::kOk || c.wqe_counter != want || !c.is_send());
      if (__any_sync(0xffffffffu, bad)) st = Status::kInvalidArgument;
      got += k;
    }
  }
  if (lane == 0) {
    *batches = polls;
    *status = st;
  }
}

TEST_F(GpuEngine, WarpPollTakesReadyCompletionsInOrderAndFreesTheQueue) {
  // A CQ deep enough for a round of 400 (the warp polls only after posting it), and a send
  // queue of 512 WQEBBs (128 WQEs of up to 3): the second round needs the first's retirement.
  auto deep = dev->create_cq(512), sink = dev->create_cq(4);
  gv::QpCaps caps;
  caps.max_inline = 128;
  auto a = pd->create_qp(*deep, *deep, caps), b = pd->create_qp(*sink, *sink, caps);
  a->connect(b->info());
  b->connect(a->info());
  qh[0] = a->device_handle();
  ch[0] = deep->device_handle();
  ASSERT_EQ(qh[0].sq_bbs, 512u);
  auto* out = static_cast<int*>(dev->alloc(64));
  auto* st = reinterpret_cast<Status*>(out + 1);
  const std::vector<std::uint8_t> poison(64, 0xee);
  stream->put(out, poison.data(), 64);
  warp_poll_rounds<<<1, 32, 0, stream->s>>>(qh[0], ch[0], reinterpret_cast<std::uint64_t>(buf[1]), mr[1]->rkey(), 400,
                                            out, st);
  GV_CUDA_CHECK(cudaGetLastError());
  stream->sync();
  int batches;
  Status status;
  std::memcpy(&batches, stream->get(out, 4).data(), 4);
  std::memcpy(&status, stream->get(st, sizeof(Status)).data(), sizeof(Status));
  EXPECT_EQ(status, Status::kOk) << gv::to_string(status);
  EXPECT_GE(batches, 2 * 400 / 32);  // at most 32 per call
  EXPECT_LE(batches, 2 * 400);
  const auto got = stream->get(buf[1], 8 * 800);
  for (std::uint64_t v = 0; v < 800; ++v) {
    std::uint64_t w;
    std::memcpy(&w, got.data() + 8 * v, 8);
    ASSERT_EQ(w, v) << "slot " << v;
  }
  dev->free(out);
}

}  // namespace
