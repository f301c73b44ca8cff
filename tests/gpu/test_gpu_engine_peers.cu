// The software HCA's GPU engine across GPUs and processes: two engines on two GPUs of one
// process connected over peer memory, and two processes connected through CUDA IPC (this binary
// spawns itself as the second: `--ipc-child`).
#include <fcntl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <gpuverbs/host/verbs.hpp>
#include <gpuverbs/ib.hpp>

#include "gpu_engine_support.cuh"
#include "gpu_test.hpp"
#include "verbs_kernels.cuh"

namespace {

using gv::Status;
using gv::ib::Ownership;
using gv::ib::SendWr;
using gv::ib::Sge;
using gv::ib::WrOpcode;
namespace m5 = gv::ib::mlx5;
using gvt::KernelResult;
using gvt::ChildEnd;
using gvt::engine_on;
using gvt::pingpong_side;
using gvt::poll_kernel;
using gvt::post_and_poll;
using gvt::random_bytes;
using gvt::recv_kernel;
using gvt::Stream;
using gvt::wait_child;

/// A QP on each of GPUs 0 and 1, each served by its GPU's engine, connected; on each side a
/// zeroed buffer of `bytes` registered for local and remote writes and a non-blocking stream.
/// The tests check that both GPUs reach each other first (GV_REQUIRE_GPUS, peer access).
struct TwoGpuPair {
  TwoGpuPair(std::size_t bytes, const gv::QpCaps& caps) {
    for (int g = 0; g < 2; ++g) {
      gv_cuda_or_throw(cudaSetDevice(g), "cudaSetDevice");
      gv_cuda_or_throw(cudaStreamCreateWithFlags(&s[g], cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
      dev[g] = gv::Device::open("soft", engine_on(g));
      pd[g] = dev[g]->alloc_pd();
      cq[g] = dev[g]->create_cq(64);
      qp[g] = pd[g]->create_qp(*cq[g], *cq[g], caps);
      buf[g] = static_cast<std::uint8_t*>(dev[g]->alloc(bytes));
      mr[g] = pd[g]->reg_mr(buf[g], bytes, gv::kLocalWrite | gv::kRemoteWrite);
      gv_cuda_or_throw(cudaSetDevice(g), "cudaSetDevice");
      gv_cuda_or_throw(cudaMemsetAsync(buf[g], 0, bytes, s[g]), "cudaMemsetAsync");
      gv_cuda_or_throw(cudaStreamSynchronize(s[g]), "cudaStreamSynchronize");
    }
    qp[0]->connect(qp[1]->info());
    qp[1]->connect(qp[0]->info());
  }
  ~TwoGpuPair() {
    for (int g = 0; g < 2; ++g) {
      mr[g].reset();
      if (buf[g]) dev[g]->free(buf[g]);
    }
    for (int g = 0; g < 2; ++g) {
      qp[g].reset();
      cq[g].reset();
      pd[g].reset();
      dev[g].reset();  // stops the engine
      if (s[g]) {
        EXPECT_EQ(cudaSetDevice(g), cudaSuccess);
        EXPECT_EQ(cudaStreamDestroy(s[g]), cudaSuccess);
      }
    }
    EXPECT_EQ(cudaSetDevice(0), cudaSuccess);
  }
  /// Wait for both GPUs' streams.
  void sync() {
    for (int g = 0; g < 2; ++g) {
      GV_CUDA_CHECK(cudaSetDevice(g));
      GV_CUDA_CHECK(cudaStreamSynchronize(s[g]));
    }
  }

  cudaStream_t s[2] = {};
  std::unique_ptr<gv::Device> dev[2];
  std::unique_ptr<gv::ProtectionDomain> pd[2];
  std::unique_ptr<gv::CompletionQueue> cq[2];
  std::unique_ptr<gv::QueuePair> qp[2];
  std::unique_ptr<gv::MemoryRegion> mr[2];
  std::uint8_t* buf[2] = {};
};

TEST(GpuEngineTwoGpus, PingPongBetweenTwoEnginesOverPeerMemory) {
  GV_REQUIRE_GPUS(2);
  int can = 0;
  GV_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, 0, 1));
  if (!can) GTEST_SKIP() << "GPUs 0 and 1 cannot access each other's memory";
  Status* st = nullptr;
  GV_CUDA_CHECK(cudaMallocHost(&st, 2 * sizeof(Status)));
  st[0] = st[1] = Status::kEmpty;
  {
    constexpr std::uint32_t kBytes = 1000;
    TwoGpuPair p(2 * kBytes, gv::QpCaps{});  // [in | out] a side
    EXPECT_EQ(p.qp[0]->device_handle().rq_executor, gv::sync::Scope::kSystem);  // the peer engine is on GPU 1
    EXPECT_EQ(p.cq[0]->device_handle().executor, gv::sync::Scope::kSystem);
    for (int g = 1; g >= 0; --g) {
      GV_CUDA_CHECK(cudaSetDevice(g));
      pingpong_side<<<1, 1, 0, p.s[g]>>>(p.qp[g]->device_handle(), p.cq[g]->device_handle(), p.buf[g],
                                         p.buf[g] + kBytes, reinterpret_cast<std::uint64_t>(p.buf[1 - g]),
                                         p.mr[g]->lkey(), p.mr[1 - g]->rkey(), kBytes, 300, g == 0, &st[g]);
      GV_CUDA_CHECK(cudaGetLastError());
    }
    p.sync();
  }
  EXPECT_EQ(st[0], Status::kOk) << gv::to_string(st[0]);
  EXPECT_EQ(st[1], Status::kOk) << gv::to_string(st[1]);
  cudaFreeHost(st);
}

/// GPU 0 WRITEs 8 bytes into GPU 1's buffer under `rkey` through its engine and waits for the
/// CQE (a failed CUDA call throws, as in TwoGpuPair).
KernelResult write_across(TwoGpuPair& p, std::uint32_t rkey, KernelResult* res) {
  SendWr wr;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.flags = gv::ib::kWrSignaled;
  wr.num_sge = 1;
  wr.remote_addr = reinterpret_cast<std::uint64_t>(p.buf[1]);
  wr.rkey = rkey;
  gv_cuda_or_throw(cudaSetDevice(0), "cudaSetDevice");
  post_and_poll<<<1, 1, 0, p.s[0]>>>(p.qp[0]->device_handle(), p.cq[0]->device_handle(), wr,
                                     Sge{reinterpret_cast<std::uint64_t>(p.buf[0]), 8, p.mr[0]->lkey()}, res);
  gv_cuda_or_throw(cudaGetLastError(), "cudaGetLastError");
  for (int g = 0; g < 2; ++g) {
    gv_cuda_or_throw(cudaSetDevice(g), "cudaSetDevice");
    gv_cuda_or_throw(cudaStreamSynchronize(p.s[g]), "cudaStreamSynchronize");
  }
  return *res;
}

/// GPU 1's first 8 bytes, after poisoning them with 0x5a (`poison`) or as they are.
std::uint64_t gpu1_word(TwoGpuPair& p, bool poison) {
  gv_cuda_or_throw(cudaSetDevice(1), "cudaSetDevice");
  if (poison) gv_cuda_or_throw(cudaMemsetAsync(p.buf[1], 0x5a, 8, p.s[1]), "cudaMemsetAsync");
  std::uint64_t w = 0;
  gv_cuda_or_throw(cudaMemcpyAsync(&w, p.buf[1], 8, cudaMemcpyDeviceToHost, p.s[1]), "cudaMemcpyAsync");
  gv_cuda_or_throw(cudaStreamSynchronize(p.s[1]), "cudaStreamSynchronize");
  return w;
}

/// The engine keeps the responder's QP and MR across visits for soft::kKeptNs (Hca::reach): a
/// WRITE from GPU 0 succeeds (its engine now keeps GPU 1's side), `revoke(p)` changes GPU 1's
/// side, which returns only once GPU 0's engine no longer uses what it kept, and the next WRITE
/// fails with `syndrome`, GPU 1's poisoned bytes untouched.
template <class Revoke>
void expect_kept_responder_revoked(Revoke revoke, std::uint8_t syndrome) {
  KernelResult* res = nullptr;
  GV_CUDA_CHECK(cudaMallocHost(&res, sizeof(*res)));
  {
    TwoGpuPair p(64, gv::QpCaps{});
    const std::uint32_t rkey = p.mr[1]->rkey();
    KernelResult r = write_across(p, rkey, res);
    EXPECT_EQ(r.poll, Status::kOk) << gv::to_string(r.poll);
    EXPECT_EQ(r.c.status, Status::kOk) << gv::describe(r.c);
    revoke(p);
    EXPECT_EQ(gpu1_word(p, true), 0x5a5a5a5a5a5a5a5aull);
    r = write_across(p, rkey, res);
    EXPECT_EQ(r.poll, Status::kCompletionError) << gv::to_string(r.poll);
    EXPECT_EQ(r.c.status, Status::kCompletionError) << gv::describe(r.c);
    EXPECT_EQ(r.c.syndrome, syndrome) << gv::describe(r.c);
    EXPECT_EQ(gpu1_word(p, false), 0x5a5a5a5a5a5a5a5aull) << "the WRITE reached GPU 1's buffer";
  }
  GV_CUDA_CHECK(cudaFreeHost(res));
}

TEST(GpuEngineTwoGpus, AResponderMovedToErrorRefusesAPeerThatKeptIt) {
  GV_REQUIRE_GPUS(2);
  int can = 0;
  GV_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, 0, 1));
  if (!can) GTEST_SKIP() << "GPUs 0 and 1 cannot access each other's memory";
  expect_kept_responder_revoked([](TwoGpuPair& p) { p.qp[1]->modify_to_error(); }, m5::kSyndTransportRetryExcErr);
}

TEST(GpuEngineTwoGpus, ADeregisteredRegionRefusesAPeerThatKeptIt) {
  GV_REQUIRE_GPUS(2);
  int can = 0;
  GV_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, 0, 1));
  if (!can) GTEST_SKIP() << "GPUs 0 and 1 cannot access each other's memory";
  expect_kept_responder_revoked([](TwoGpuPair& p) { p.mr[1].reset(); }, m5::kSyndRemoteAccessErr);
}

/// RC order between a WRITE of several bytes and the one after it. Pair k: 64 inline bytes of
/// tag k into big + 64k, then 8 inline bytes of tag k into small + 8k; every 16th WRITE is
/// signaled, its CQE polled once 32 are in flight.
__global__ void ordered_pairs(const __grid_constant__ gv::ib::QpHandle qp, const __grid_constant__ gv::ib::CqHandle cq,
                              std::uint8_t* scratch, std::uint32_t lkey, std::uint64_t big, std::uint64_t small,
                              std::uint32_t rkey, int pairs, Status* status) {
  Status st = Status::kOk;
  int in_flight = 0;
  for (int k = 0; k < pairs && st == Status::kOk; ++k) {
    const auto tag = static_cast<std::uint8_t>(1 + k % 250);
    std::uint8_t* msg = scratch + 64 * (k % 2);  // the inline bytes are copied at the post
    for (int i = 0; i < 64; ++i) msg[i] = tag;
    for (int w = 0; w < 2 && st == Status::kOk; ++w) {
      Sge sge{reinterpret_cast<std::uint64_t>(msg), w == 0 ? 64u : 8u, lkey};
      SendWr wr;
      wr.opcode = WrOpcode::kRdmaWrite;
      wr.flags = gv::ib::kWrInline | ((2 * k + w) % 16 == 15 ? gv::ib::kWrSignaled : 0u);
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.remote_addr = w == 0 ? big + 64 * static_cast<std::uint64_t>(k) : small + 8 * static_cast<std::uint64_t>(k);
      wr.rkey = rkey;
      st = gv::ib::post_send<Ownership::kExclusive>(qp, wr);
      if (st == Status::kOk && ++in_flight == 32) {
        gv::ib::Completion c;
        st = gv::ib::poll_cq<Ownership::kExclusive>(cq, c);
        in_flight -= 16;
      }
    }
  }
  for (; st == Status::kOk && in_flight >= 16; in_flight -= 16) {
    gv::ib::Completion c;
    st = gv::ib::poll_cq<Ownership::kExclusive>(cq, c);
  }
  *status = st;
}

/// The receiver of ordered_pairs: once pair k's 8-byte WRITE is seen, its 64-byte one must be
/// whole (its last byte was stored last). early[0]: pairs whose 64-byte WRITE was not yet seen.
__global__ void check_pairs(const std::uint8_t* big, const std::uint64_t* small, int pairs, const std::uint32_t* abort,
                            Status* status, std::uint32_t* early) {
  Status st = Status::kOk;
  for (int k = 0; k < pairs && st == Status::kOk; ++k) {
    const auto tag = static_cast<std::uint8_t>(1 + k % 250);
    const std::uint64_t want = 0x0101010101010101ull * tag;
    st = gv::sync::bounded_wait([&] { return gv::sync::load_acquire(&small[k], gv::sync::Scope::kSystem) == want; },
                                gv::Budget{}, abort);
    if (st == Status::kOk && gv::sync::load_relaxed(&big[64 * k + 63]) != tag) ++*early;
  }
  *status = st;
}

TEST(GpuEngineTwoGpus, AWriteIsNeverSeenBeforeTheWriteBeforeIt) {
  GV_REQUIRE_GPUS(2);
  int can = 0;
  GV_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, 0, 1));
  if (!can) GTEST_SKIP() << "GPUs 0 and 1 cannot access each other's memory";
  constexpr int kPairs = 4000;
  constexpr std::size_t kBig = 64 * kPairs, kSmall = 8 * kPairs;
  Status* st = nullptr;
  std::uint32_t* early = nullptr;
  GV_CUDA_CHECK(cudaMallocHost(&st, 2 * sizeof(Status)));
  GV_CUDA_CHECK(cudaMallocHost(&early, sizeof(std::uint32_t)));
  st[0] = st[1] = Status::kEmpty;
  *early = 0;
  {
    gv::QpCaps caps;
    caps.max_inline = 64;
    TwoGpuPair p(kBig + kSmall, caps);  // GPU 1: [big | small]; GPU 0: the messages' scratch
    GV_CUDA_CHECK(cudaSetDevice(1));
    check_pairs<<<1, 1, 0, p.s[1]>>>(p.buf[1], reinterpret_cast<const std::uint64_t*>(p.buf[1] + kBig), kPairs,
                                     p.qp[1]->device_handle().abort, &st[1], early);
    GV_CUDA_CHECK(cudaGetLastError());
    GV_CUDA_CHECK(cudaSetDevice(0));
    ordered_pairs<<<1, 1, 0, p.s[0]>>>(p.qp[0]->device_handle(), p.cq[0]->device_handle(), p.buf[0], p.mr[0]->lkey(),
                                       reinterpret_cast<std::uint64_t>(p.buf[1]),
                                       reinterpret_cast<std::uint64_t>(p.buf[1] + kBig), p.mr[1]->rkey(), kPairs, &st[0]);
    GV_CUDA_CHECK(cudaGetLastError());
    p.sync();
  }
  EXPECT_EQ(st[0], Status::kOk) << gv::to_string(st[0]);
  EXPECT_EQ(st[1], Status::kOk) << gv::to_string(st[1]);
  EXPECT_EQ(*early, 0u) << "pairs whose 8-byte WRITE was seen before the last byte of the 64-byte WRITE before it";
  cudaFreeHost(st);
  cudaFreeHost(early);
}

// Two processes: this test spawns the binary again as `--ipc-child <rfd> <wfd> <gpu>`. The
// child opens its own GPU engine, connects to the parent's QP through CUDA IPC, WRITEs a seeded
// pattern into the parent's buffer with immediate data, then lets the parent READ its buffer.
struct IpcHello {
  gv::QpInfo qp;
  std::uint64_t addr;
  std::uint32_t rkey;
};
constexpr std::size_t kIpcBytes = 1 << 16;

bool write_all(int fd, const void* p, std::size_t n) {
  return ::write(fd, p, n) == static_cast<ssize_t>(n);
}
bool read_all(int fd, void* p, std::size_t n) {
  auto* b = static_cast<std::uint8_t*>(p);
  while (n > 0) {
    const ssize_t r = ::read(fd, b, n);
    if (r <= 0) return false;
    b += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

/// The child side; returns the process exit code (0 = the parent's checks decide).
int ipc_child(int rfd, int wfd, int gpu) {
  try {
    cudaStream_t s;
    if (cudaSetDevice(gpu) != cudaSuccess || cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return 10;
    KernelResult* res = nullptr;
    if (cudaMallocHost(&res, sizeof(*res)) != cudaSuccess) return 11;
    auto dev = gv::Device::open("soft", engine_on(gpu));
    auto pd = dev->alloc_pd();
    auto cq = dev->create_cq(16);
    auto qp = pd->create_qp(*cq, *cq);
    auto* buf = static_cast<std::uint8_t*>(dev->alloc(kIpcBytes));
    auto mr = pd->reg_mr(buf, kIpcBytes, gv::kLocalWrite | gv::kRemoteRead);
    const auto pattern = random_bytes(kIpcBytes, 4242);
    if (cudaMemcpyAsync(buf, pattern.data(), kIpcBytes, cudaMemcpyHostToDevice, s) != cudaSuccess ||
        cudaStreamSynchronize(s) != cudaSuccess)
      return 12;
    IpcHello parent{};
    if (!read_all(rfd, &parent, sizeof(parent))) return 13;
    const IpcHello mine{qp->info(), reinterpret_cast<std::uint64_t>(buf), mr->rkey()};
    if (!write_all(wfd, &mine, sizeof(mine))) return 14;
    qp->connect(parent.qp);
    char go;
    if (!read_all(rfd, &go, 1)) return 15;  // the parent connected and posted its receive
    SendWr wr;
    wr.opcode = WrOpcode::kRdmaWriteImm;
    wr.flags = gv::ib::kWrSignaled;
    wr.num_sge = 1;
    wr.imm = 0x600dcafe;
    wr.remote_addr = parent.addr;
    wr.rkey = parent.rkey;
    post_and_poll<<<1, 1, 0, s>>>(qp->device_handle(), cq->device_handle(), wr,
                                  Sge{reinterpret_cast<std::uint64_t>(buf), kIpcBytes, mr->lkey()}, res);
    if (cudaStreamSynchronize(s) != cudaSuccess) return 16;
    if (res->poll != Status::kOk) return 17;
    if (!read_all(rfd, &go, 1)) return 18;  // the parent has READ our buffer: we may close
    mr.reset();
    dev->free(buf);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ipc child: %s\n", e.what());
    return 20;
  }
}

TEST(GpuEngineTwoProcesses, WriteImmAndReadThroughCudaIpc) {
  GV_REQUIRE_GPUS(1);
  int n = 0;
  GV_CUDA_CHECK(cudaGetDeviceCount(&n));
  const int child_gpu = n > 1 ? 1 : 0;
  int to_child[2], from_child[2];
  ASSERT_EQ(pipe2(to_child, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(from_child, O_CLOEXEC), 0);
  const pid_t pid = gvt::spawn_self("test_gpu_engine_peers", {"--ipc-child", "3", "4", std::to_string(child_gpu)}, {to_child[0], from_child[1]});
  ASSERT_GT(pid, 0) << "posix_spawn of the child failed";
  ::close(to_child[0]);
  ::close(from_child[1]);
  const int wfd = to_child[1], rfd = from_child[0];

  KernelResult* res = nullptr;
  GV_CUDA_CHECK(cudaSetDevice(0));
  GV_CUDA_CHECK(cudaMallocHost(&res, sizeof(*res)));
  {
    Stream stream;
    auto dev = gv::Device::open("soft", engine_on(0));
    auto pd = dev->alloc_pd();
    auto cq = dev->create_cq(16);
    auto qp = pd->create_qp(*cq, *cq);
    auto* buf = static_cast<std::uint8_t*>(dev->alloc(2 * kIpcBytes));  // [written by the child | read back]
    auto mr = pd->reg_mr(buf, 2 * kIpcBytes, gv::kLocalWrite | gv::kRemoteWrite);
    GV_CUDA_CHECK(cudaMemsetAsync(buf, 0x5a, 2 * kIpcBytes, stream.s));  // poison
    stream.sync();
    const IpcHello mine{qp->info(), reinterpret_cast<std::uint64_t>(buf), mr->rkey()};
    ASSERT_TRUE(write_all(wfd, &mine, sizeof(mine)));
    IpcHello child{};
    ASSERT_TRUE(read_all(rfd, &child, sizeof(child))) << "the child process ended early";
    qp->connect(child.qp);
    recv_kernel<<<1, 1, 0, stream.s>>>(qp->device_handle(), Sge{0, 0, 0}, &res->post);
    stream.sync();
    ASSERT_EQ(res->post, Status::kOk);
    ASSERT_TRUE(write_all(wfd, "g", 1));
    poll_kernel<<<1, 1, 0, stream.s>>>(cq->device_handle(), res);
    stream.sync();
    ASSERT_EQ(res->poll, Status::kOk) << gv::describe(res->c);
    EXPECT_EQ(res->c.cqe_opcode, m5::kCqeRespWrImm);
    EXPECT_EQ(res->c.imm, 0x600dcafeu);
    const auto pattern = random_bytes(kIpcBytes, 4242);
    EXPECT_EQ(stream.get(buf, kIpcBytes), pattern);

    SendWr rd;
    rd.opcode = WrOpcode::kRdmaRead;
    rd.flags = gv::ib::kWrSignaled;
    rd.num_sge = 1;
    rd.remote_addr = child.addr;
    rd.rkey = child.rkey;
    post_and_poll<<<1, 1, 0, stream.s>>>(qp->device_handle(), cq->device_handle(), rd,
                                         Sge{reinterpret_cast<std::uint64_t>(buf + kIpcBytes), kIpcBytes, mr->lkey()}, res);
    stream.sync();
    ASSERT_EQ(res->poll, Status::kOk) << gv::describe(res->c);
    EXPECT_EQ(stream.get(buf + kIpcBytes, kIpcBytes), pattern);
    ASSERT_TRUE(write_all(wfd, "d", 1));
    const ChildEnd end = wait_child(pid, std::chrono::seconds(60));
    EXPECT_TRUE(end.ok()) << "the IPC child " << end.text();
    mr.reset();
    dev->free(buf);
  }
  ::close(wfd);
  ::close(rfd);
  cudaFreeHost(res);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::strcmp(argv[1], "--ipc-child") == 0)
    return ipc_child(std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]));
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
