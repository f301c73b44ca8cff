// The GPU engine's lanes: 32 QPs served by one engine warp, one QP per lane, each executing its
// own stream of mixed work requests at once (WRITE, WRITE_WITH_IMM, READ, FETCH_ADD, CMP_SWP,
// inline and gathered, payloads a lane moves alone and larger ones, which the lane parks for
// its converged warp), some QPs failing midway (bad rkey, remote bounds, bad lkey) so that
// error and flush completions occur beside successes; and streams of overlapping WRITEs and
// READs on both sides of the lane's size, whose bytes show any WQE executed out of order.
// Every completion, every byte of both sides and the receive completions are checked against a
// host reference of RC semantics.
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include <gpuverbs/host/verbs.hpp>
#include <gpuverbs/ib.hpp>

#include "gpu_engine_support.cuh"
#include "gpu_test.hpp"

namespace {

using gv::Status;
using gv::ib::Completion;
using gv::ib::Ownership;
using gv::ib::SendWr;
using gv::ib::Sge;
using gv::ib::WrOpcode;
namespace m5 = gv::ib::mlx5;
using gvt::engine_on;
using gv::kAllAccess;
using gvt::random_bytes;
using gvt::Stream;

constexpr int kQps = 32;                             ///< requesters, one per lane of the warp
constexpr int kOps = 14;                             ///< work requests per QP
constexpr std::size_t kSlot = 4096;                  ///< bytes per work request in each region
constexpr std::size_t kRegion = 64 * 1024;           ///< bytes per QP on each side
constexpr std::size_t kCounter = kOps * kSlot;       ///< the QP's atomic target in its remote region
constexpr std::size_t kBytes = kQps * kRegion;

/// One work request as the posting kernel takes it: the SGE by value.
struct Op {
  SendWr wr;
  Sge sge;
};

/// What one lane's QP expects: its completions in order, the receive completions its peer sees.
struct Expect {
  std::uint8_t wqe_opcode[kOps];
  std::uint8_t syndrome[kOps];  ///< 0: success
  std::uint32_t byte_len[kOps];
  int recvs = 0;                ///< WRITE_WITH_IMMs executed
  std::uint32_t imm[kOps], imm_len[kOps];
};

/// Thread i posts QP i's work requests back to back (a backlog for the engine), then polls
/// every completion: each is signaled, and after an error the rest complete flushed.
__global__ void stream_kernel(const gv::ib::QpHandle* qps, const gv::ib::CqHandle* cqs, Op* ops, Completion* out,
                              Status* status) {
  const int i = threadIdx.x;
  Status st = Status::kOk;
  for (int j = 0; j < kOps && st == Status::kOk; ++j) {
    Op& op = ops[i * kOps + j];
    op.wr.sg_list = &op.sge;
    st = gv::ib::post_send<Ownership::kExclusive>(qps[i], op.wr);
  }
  for (int j = 0; j < kOps && st == Status::kOk; ++j) {
    const Status p = gv::ib::poll_cq<Ownership::kExclusive>(cqs[i], out[i * kOps + j]);
    if (p != Status::kOk && p != Status::kCompletionError) st = p;
  }
  status[i] = st;
}

__global__ void post_recvs(const gv::ib::QpHandle* qps, const int* counts, Status* status) {
  const int i = threadIdx.x;
  Sge none{0, 0, 0};
  Status st = Status::kOk;
  for (int j = 0; j < counts[i] && st == Status::kOk; ++j) st = gv::ib::post_recv<Ownership::kExclusive>(qps[i], &none, 1);
  status[i] = st;
}

__global__ void poll_recvs(const gv::ib::CqHandle* cqs, const int* counts, Completion* out, Status* status) {
  const int i = threadIdx.x;
  Status st = Status::kOk;
  for (int j = 0; j < counts[i] && st == Status::kOk; ++j)
    st = gv::ib::poll_cq<Ownership::kExclusive>(cqs[i], out[i * kOps + j]);
  status[i] = st;
}

std::uint64_t load64(const std::vector<std::uint8_t>& v, std::size_t at) {
  std::uint64_t x;
  std::memcpy(&x, v.data() + at, 8);
  return x;
}

class GpuEngineLanes : public ::testing::Test {
 protected:
  void SetUp() override {
    GV_REQUIRE_GPUS(1);
    GV_CUDA_CHECK(cudaSetDevice(0));
    GV_CUDA_CHECK(cudaMalloc(&dq, sizeof(gv::ib::QpHandle) * 2 * kQps));
    GV_CUDA_CHECK(cudaMalloc(&dc, sizeof(gv::ib::CqHandle) * 2 * kQps));
    GV_CUDA_CHECK(cudaMalloc(&dops, sizeof(Op) * kQps * kOps));
    GV_CUDA_CHECK(cudaMalloc(&dout, sizeof(Completion) * 2 * kQps * kOps));
    GV_CUDA_CHECK(cudaMalloc(&dst, sizeof(Status) * kQps));
    GV_CUDA_CHECK(cudaMalloc(&dcounts, sizeof(int) * kQps));
    stream = std::make_unique<Stream>();
    gv::DeviceOptions o = engine_on(0);
    o.engine_warps = 1;
    dev = gv::Device::open("soft", o);
    pd = dev->alloc_pd();
    gv::QpCaps caps;
    caps.max_inline = 64;
    // Requesters first: they take table slots 0..31, one per lane of the engine's only warp.
    for (int s = 0; s < 2; ++s)
      for (int i = 0; i < kQps; ++i) {
        cq[s][i] = dev->create_cq(64);
        qp[s][i] = pd->create_qp(*cq[s][i], *cq[s][i], caps);
      }
    for (int i = 0; i < kQps; ++i) {
      qp[0][i]->connect(qp[1][i]->info());
      qp[1][i]->connect(qp[0][i]->info());
    }
    for (int s = 0; s < 2; ++s) {
      buf[s] = static_cast<std::uint8_t*>(dev->alloc(kBytes));
      mr[s] = pd->reg_mr(buf[s], kBytes, kAllAccess);
      host[s] = random_bytes(kBytes, 7100 + s);  // seeded; every byte not written must stay so
      stream->put(buf[s], host[s].data(), kBytes);
    }
  }

  void TearDown() override {
    for (auto& m : mr) m.reset();
    if (dev)
      for (auto* b : buf)
        if (b) dev->free(b);
    for (auto& side : qp)
      for (auto& q : side) q.reset();
    for (auto& side : cq)
      for (auto& c : side) c.reset();
    pd.reset();
    dev.reset();  // stops the engine: cudaFree is safe again
    stream.reset();
    for (void* p : {static_cast<void*>(dq), static_cast<void*>(dc), static_cast<void*>(dops),
                    static_cast<void*>(dout), static_cast<void*>(dst), static_cast<void*>(dcounts)})
      if (p) cudaFree(p);
  }

  std::uint64_t laddr(int i, std::size_t off) const { return reinterpret_cast<std::uint64_t>(buf[0] + i * kRegion + off); }
  std::uint64_t raddr(int i, std::size_t off) const { return reinterpret_cast<std::uint64_t>(buf[1] + i * kRegion + off); }

  /// QP i's work requests, and the host's RC reference of what they do to `want` (both
  /// sides' bytes) and which completions they give.
  std::vector<Op> make_mixed_ops(int i, std::mt19937_64& rng, std::vector<std::uint8_t> (&want)[2], Expect& e) const {
    // Where this QP fails: none, a bad rkey, a remote address past the MR, or a bad lkey.
    const int fail_kind = i % 4;
    const int fail_at = fail_kind == 0 ? kOps : 3 + static_cast<int>(rng() % (kOps - 4));
    const std::uint32_t sizes[] = {1, 8, 13, 64, 200, 511, 513, 1500, 4000};
    const std::uint32_t inline_sizes[] = {1, 4, 8, 12, 33, 64};
    std::vector<Op> ops(kOps);
    bool failed = false;
    for (int j = 0; j < kOps; ++j) {
      Op& op = ops[j];
      SendWr& wr = op.wr;
      wr.flags = gv::ib::kWrSignaled;
      wr.num_sge = 1;
      wr.rkey = mr[1]->rkey();
      const std::size_t slot = j * kSlot;
      const int kind = static_cast<int>(rng() % 6);
      std::uint32_t len = sizes[rng() % 9];
      std::size_t loff = slot + rng() % 64, roff = slot + rng() % 64;
      if (kind <= 2) {  // WRITE, inline WRITE, WRITE_WITH_IMM (inline or not)
        wr.opcode = kind == 2 ? WrOpcode::kRdmaWriteImm : WrOpcode::kRdmaWrite;
        if (kind == 1 || (kind == 2 && rng() % 2 == 0)) {
          wr.flags |= gv::ib::kWrInline;
          len = inline_sizes[rng() % 6];
        }
        if (kind == 2) wr.imm = static_cast<std::uint32_t>(rng());
      } else if (kind == 3) {
        wr.opcode = WrOpcode::kRdmaRead;
      } else {
        wr.opcode = kind == 4 ? WrOpcode::kAtomicFetchAdd : WrOpcode::kAtomicCmpSwp;
        len = 8;
        loff = slot;
        roff = kCounter;
        const std::uint64_t now = load64(want[1], i * kRegion + kCounter);
        wr.compare_add = kind == 4 ? rng() : (rng() % 2 ? now : now ^ 1);  // CMP_SWP that swaps or not
        wr.swap = rng();
      }
      op.sge = Sge{laddr(i, loff), len, mr[0]->lkey()};
      wr.remote_addr = raddr(i, roff);
      const std::uint8_t m5op = wr.opcode == WrOpcode::kRdmaWrite      ? m5::kOpRdmaWrite
                                : wr.opcode == WrOpcode::kRdmaWriteImm ? m5::kOpRdmaWriteImm
                                : wr.opcode == WrOpcode::kRdmaRead     ? m5::kOpRdmaRead
                                : wr.opcode == WrOpcode::kAtomicFetchAdd ? m5::kOpAtomicFa
                                                                         : m5::kOpAtomicCs;
      e.wqe_opcode[j] = m5op;
      const bool reports_len = wr.opcode == WrOpcode::kRdmaRead || gv::ib::is_atomic(wr.opcode);
      e.byte_len[j] = reports_len ? len : 0;
      if (failed) {
        e.syndrome[j] = m5::kSyndWrFlushErr;
        continue;
      }
      if (j == fail_at) {
        failed = true;
        if (fail_kind == 3) {  // a bad lkey fails before the wire (gathered, so the key is read)
          wr.opcode = WrOpcode::kRdmaWrite;
          wr.flags = gv::ib::kWrSignaled;
          e.wqe_opcode[j] = m5::kOpRdmaWrite;
          e.byte_len[j] = 0;
          op.sge.lkey ^= 0x00ff0000u;
          e.syndrome[j] = m5::kSyndLocalProtErr;
        } else {
          if (fail_kind == 1) wr.rkey ^= 0x00ff0000u;
          else wr.remote_addr = reinterpret_cast<std::uint64_t>(buf[1]) + kBytes + 64;  // past the MR's end
          e.syndrome[j] = m5::kSyndRemoteAccessErr;
        }
        continue;
      }
      e.syndrome[j] = 0;
      std::uint8_t* l = want[0].data() + i * kRegion + loff;
      std::uint8_t* r = want[1].data() + i * kRegion + roff;
      switch (wr.opcode) {
        case WrOpcode::kRdmaWriteImm:
          e.imm[e.recvs] = wr.imm;
          e.imm_len[e.recvs++] = len;
          [[fallthrough]];
        case WrOpcode::kRdmaWrite: std::memmove(r, l, len); break;
        case WrOpcode::kRdmaRead: std::memmove(l, r, len); break;
        default: {
          std::uint64_t old;
          std::memcpy(&old, r, 8);
          std::memcpy(l, &old, 8);  // the original value, in host byte order
          const std::uint64_t now = wr.opcode == WrOpcode::kAtomicFetchAdd ? old + wr.compare_add
                                    : old == wr.compare_add                ? wr.swap
                                                                           : old;
          std::memcpy(r, &now, 8);
        }
      }
    }
    return ops;
  }

  /// QP i's work requests for the order check: WRITEs (inline or gathered) and READs of sizes
  /// on both sides of what a lane moves alone (512 bytes), anywhere in the QP's remote region,
  /// so that they overlap: a large WQE parked for the warp and executed after the small ones
  /// behind it would leave other bytes. WRITEs read the local region's first half and READs
  /// land in its second (an inline WRITE's data is taken when it is posted, which may come
  /// before an earlier READ executes). All succeed.
  std::vector<Op> make_overlapping_ops(int i, std::mt19937_64& rng, std::vector<std::uint8_t> (&want)[2],
                                       Expect& e) const {
    constexpr std::size_t kHalf = kRegion / 2;
    const std::uint32_t sizes[] = {1, 8, 64, 512, 513, 4096, 20000, kHalf};
    const std::uint32_t inline_sizes[] = {1, 8, 33, 64};
    std::vector<Op> ops(kOps);
    for (int j = 0; j < kOps; ++j) {
      Op& op = ops[j];
      SendWr& wr = op.wr;
      wr.flags = gv::ib::kWrSignaled;
      wr.num_sge = 1;
      wr.rkey = mr[1]->rkey();
      const int kind = static_cast<int>(rng() % 3);
      wr.opcode = kind == 2 ? WrOpcode::kRdmaRead : WrOpcode::kRdmaWrite;
      std::uint32_t len = sizes[rng() % 8];
      if (kind == 1) {
        wr.flags |= gv::ib::kWrInline;
        len = inline_sizes[rng() % 4];
      }
      const std::size_t loff = (kind == 2 ? kHalf : 0) + rng() % (kHalf - len + 1);
      const std::size_t roff = rng() % (kRegion - len + 1);
      op.sge = Sge{laddr(i, loff), len, mr[0]->lkey()};
      wr.remote_addr = raddr(i, roff);
      e.wqe_opcode[j] = kind == 2 ? m5::kOpRdmaRead : m5::kOpRdmaWrite;
      e.syndrome[j] = 0;
      e.byte_len[j] = kind == 2 ? len : 0;
      std::uint8_t* l = want[0].data() + i * kRegion + loff;
      std::uint8_t* r = want[1].data() + i * kRegion + roff;
      if (kind == 2) std::memcpy(l, r, len);
      else std::memcpy(r, l, len);
    }
    return ops;
  }

  /// Every QP's work requests (`ops`, kOps a QP), posted back to back by one thread a QP, its
  /// completions polled, and the receive completions its WRITE_WITH_IMMs give; the completions
  /// and both sides' bytes compared with the reference (`expect`, `want`).
  /// Every QP's work from `make` (seeded), run in one warp and checked against the reference.
  template <class Make>
  void run_every_qp(std::uint64_t seed, Make make) {
    std::vector<std::uint8_t> want[2] = {host[0], host[1]};
    std::vector<Expect> expect(kQps);
    std::vector<Op> ops;
    std::mt19937_64 rng(seed);
    for (int i = 0; i < kQps; ++i) {
      const auto q = make(i, rng, want, expect[i]);
      ops.insert(ops.end(), q.begin(), q.end());
    }
    run_and_check(ops, expect, want);
  }

  void run_and_check(const std::vector<Op>& ops, const std::vector<Expect>& expect,
                     const std::vector<std::uint8_t> (&want)[2]) {
    std::vector<gv::ib::QpHandle> qh(2 * kQps);
    std::vector<gv::ib::CqHandle> ch(2 * kQps);
    for (int s = 0; s < 2; ++s)
      for (int i = 0; i < kQps; ++i) {
        qh[s * kQps + i] = qp[s][i]->device_handle();
        ch[s * kQps + i] = cq[s][i]->device_handle();
      }
    std::vector<int> counts(kQps);
    for (int i = 0; i < kQps; ++i) counts[i] = expect[i].recvs;
    stream->put(dq, qh.data(), sizeof(gv::ib::QpHandle) * qh.size());
    stream->put(dc, ch.data(), sizeof(gv::ib::CqHandle) * ch.size());
    stream->put(dops, ops.data(), sizeof(Op) * ops.size());
    stream->put(dcounts, counts.data(), sizeof(int) * kQps);
    const std::vector<std::uint8_t> poison(sizeof(Completion) * 2 * kQps * kOps, 0xcd);
    stream->put(dout, poison.data(), poison.size());

    post_recvs<<<1, kQps, 0, stream->s>>>(dq + kQps, dcounts, dst);
    GV_CUDA_CHECK(cudaGetLastError());
    stream->sync();
    std::vector<Status> st(kQps);
    std::memcpy(st.data(), stream->get(dst, sizeof(Status) * kQps).data(), sizeof(Status) * kQps);
    for (int i = 0; i < kQps; ++i) ASSERT_EQ(st[i], Status::kOk) << "receives of QP " << i << ": " << gv::to_string(st[i]);

    stream_kernel<<<1, kQps, 0, stream->s>>>(dq, dc, dops, dout, dst);
    GV_CUDA_CHECK(cudaGetLastError());
    stream->sync();
    poll_recvs<<<1, kQps, 0, stream->s>>>(dc + kQps, dcounts, dout + kQps * kOps, dst);
    GV_CUDA_CHECK(cudaGetLastError());
    stream->sync();

    std::vector<Completion> got(2 * kQps * kOps);
    std::memcpy(got.data(), stream->get(dout, sizeof(Completion) * got.size()).data(), sizeof(Completion) * got.size());
    std::memcpy(st.data(), stream->get(dst, sizeof(Status) * kQps).data(), sizeof(Status) * kQps);
    for (int i = 0; i < kQps; ++i) {
      ASSERT_EQ(st[i], Status::kOk) << "QP " << i << ": " << gv::to_string(st[i]);
      const Expect& e = expect[i];
      for (int j = 0; j < kOps; ++j) {
        const Completion& c = got[i * kOps + j];
        EXPECT_EQ(c.syndrome, e.syndrome[j]) << "QP " << i << " WR " << j << ": " << gv::describe(c);
        EXPECT_EQ(c.ok(), e.syndrome[j] == 0) << "QP " << i << " WR " << j;
        EXPECT_EQ(c.qpn, qp[0][i]->qpn()) << "QP " << i << " WR " << j;
        if (e.syndrome[j] == 0) {
          EXPECT_EQ(c.wqe_opcode, e.wqe_opcode[j]) << "QP " << i << " WR " << j;
          EXPECT_EQ(c.byte_len, e.byte_len[j]) << "QP " << i << " WR " << j;
        }
      }
      for (int k = 0; k < e.recvs; ++k) {
        const Completion& c = got[(kQps + i) * kOps + k];
        EXPECT_TRUE(c.ok()) << "receive " << k << " of QP " << i << ": " << gv::describe(c);
        EXPECT_EQ(c.cqe_opcode, m5::kCqeRespWrImm) << "receive " << k << " of QP " << i;
        EXPECT_EQ(c.imm, e.imm[k]) << "receive " << k << " of QP " << i;
        EXPECT_EQ(c.byte_len, e.imm_len[k]) << "receive " << k << " of QP " << i;
      }
    }
    for (int s = 0; s < 2; ++s) {
      const auto now = stream->get(buf[s], kBytes);
      for (std::size_t b = 0; b < kBytes; ++b)
        ASSERT_EQ(now[b], want[s][b]) << (s == 0 ? "requester" : "responder") << " byte " << b << " (QP "
                                      << b / kRegion << ", offset " << b % kRegion << ")";
    }
  }

  std::unique_ptr<Stream> stream;
  std::unique_ptr<gv::Device> dev;
  std::unique_ptr<gv::ProtectionDomain> pd;
  std::unique_ptr<gv::CompletionQueue> cq[2][kQps];
  std::unique_ptr<gv::QueuePair> qp[2][kQps];
  std::uint8_t* buf[2] = {};
  std::unique_ptr<gv::MemoryRegion> mr[2];
  std::vector<std::uint8_t> host[2];
  gv::ib::QpHandle* dq = nullptr;
  gv::ib::CqHandle* dc = nullptr;
  Op* dops = nullptr;
  Completion* dout = nullptr;
  Status* dst = nullptr;
  int* dcounts = nullptr;
};

TEST_F(GpuEngineLanes, ThirtyTwoQpsOfMixedWorkInOneWarpMatchTheReference) {
  run_every_qp(2026, [this](auto&&... a) { return make_mixed_ops(a...); });
}

TEST_F(GpuEngineLanes, LargeAndSmallPayloadsOnEveryLaneKeepRcOrder) {
  run_every_qp(2027, [this](auto&&... a) { return make_overlapping_ops(a...); });
}

}  // namespace
