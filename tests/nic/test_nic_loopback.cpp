// The mlx5 provider on a ConnectX HCA, driven by host threads: a loopback pair (two QPs of one
// port connected to each other) posts every opcode through the device API and polls the real CQ
// rings; doorbells go through the provider's proxy thread (host-thread handles). Skipped, with
// the reason, on machines without an mlx5 device with an ACTIVE port.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gpuverbs/host/verbs.hpp>
#include <gpuverbs/ib.hpp>

#include "host_rings.hpp"
#include "qp_pair.hpp"

namespace {
using gv::Status;
using gv::ib::Ownership;
using gv::ib::SendWr;
using gv::ib::Sge;
using gv::ib::WrOpcode;
namespace m5 = gv::ib::mlx5;

class NicLoopback : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gv::Device::list().size() == 1)
      GTEST_SKIP() << "no mlx5 device with an ACTIVE port on this machine (gv_devices lists what there is)";
    dev = gv::Device::open("mlx5");  // a present device must open: a failure here fails the test
    pd = dev->alloc_pd();
    gv::QpCaps caps;
    caps.max_inline = 128;
    gvt::connect_loopback(*dev, *pd, 256, caps, cq, qp);
    std::mt19937_64 rng(gvt::test_seed(0x6e69'635f'6c62ull));
    for (int i = 0; i < 2; ++i) {
      qh[i] = qp[i]->device_handle();
      ch[i] = cq[i]->device_handle();
      buf[i] = static_cast<std::uint8_t*>(dev->alloc(kBytes));
      for (std::size_t k = 0; k < kBytes; ++k) buf[i][k] = static_cast<std::uint8_t>(rng());
      mr[i] = pd->reg_mr(buf[i], kBytes, gv::kLocalWrite | gv::kRemoteWrite | gv::kRemoteRead | gv::kRemoteAtomic);
    }
  }
  void TearDown() override {
    for (int i = 0; i < 2; ++i) {
      mr[i].reset();
      if (buf[i] != nullptr) dev->free(buf[i]);
    }
  }

  /// Post on side 0 and wait (bounded) for its completion.
  gv::ib::Completion run(SendWr wr, Sge sge, Status want = Status::kOk) {
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.flags |= gv::ib::kWrSignaled;
    EXPECT_EQ(gv::ib::post_send<Ownership::kExclusive>(qh[0], wr), Status::kOk);
    gv::ib::Completion c{};
    EXPECT_EQ(gv::ib::poll_cq<Ownership::kExclusive>(ch[0], c), want) << gv::describe(c) << "; " << dev->describe();
    return c;
  }
  std::uint64_t addr(int side, std::size_t off) const { return reinterpret_cast<std::uint64_t>(buf[side] + off); }

  static constexpr std::size_t kBytes = 1 << 16;
  std::unique_ptr<gv::Device> dev;
  std::unique_ptr<gv::ProtectionDomain> pd;
  std::unique_ptr<gv::CompletionQueue> cq[2];
  std::unique_ptr<gv::QueuePair> qp[2];
  gv::ib::QpHandle qh[2];
  gv::ib::CqHandle ch[2];
  std::uint8_t* buf[2] = {};
  std::unique_ptr<gv::MemoryRegion> mr[2];
};

TEST_F(NicLoopback, DescribesItself) {
  const std::string d = dev->describe();
  EXPECT_NE(d.find("mlx5 "), std::string::npos) << d;
  EXPECT_NE(d.find("host threads"), std::string::npos) << d;
  std::printf("%s\n", d.c_str());
  EXPECT_EQ(qp[0]->state(), gv::QpState::kRts);
}

TEST_F(NicLoopback, WriteReadAtomics) {
  SendWr wr;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.remote_addr = addr(1, 1000);
  wr.rkey = mr[1]->rkey();
  gv::ib::Completion c = run(wr, Sge{addr(0, 64), 5000, mr[0]->lkey()});
  EXPECT_EQ(c.wqe_opcode, m5::kOpRdmaWrite);
  EXPECT_EQ(std::memcmp(buf[1] + 1000, buf[0] + 64, 5000), 0);

  wr.opcode = WrOpcode::kRdmaRead;
  wr.remote_addr = addr(1, 30000);
  c = run(wr, Sge{addr(0, 20000), 3000, mr[0]->lkey()});
  EXPECT_EQ(std::memcmp(buf[0] + 20000, buf[1] + 30000, 3000), 0);

  std::uint64_t before, got, now;
  std::memcpy(&before, buf[1] + 512, 8);
  wr.opcode = WrOpcode::kAtomicFetchAdd;
  wr.remote_addr = addr(1, 512);
  wr.compare_add = 77;
  run(wr, Sge{addr(0, 8), 8, mr[0]->lkey()});
  std::memcpy(&got, buf[0] + 8, 8);
  std::memcpy(&now, buf[1] + 512, 8);
  EXPECT_EQ(got, before);
  EXPECT_EQ(now, before + 77);

  wr.opcode = WrOpcode::kAtomicCmpSwp;
  wr.compare_add = before + 77;
  wr.swap = 0xfeedfacecafebeefull;
  run(wr, Sge{addr(0, 16), 8, mr[0]->lkey()});
  std::memcpy(&now, buf[1] + 512, 8);
  EXPECT_EQ(now, 0xfeedfacecafebeefull);
}

TEST_F(NicLoopback, SendWithImmInline) {
  const Sge rs{addr(1, 40000), 200, mr[1]->lkey()};
  ASSERT_EQ(gv::ib::post_recv<Ownership::kExclusive>(qh[1], &rs, 1), Status::kOk);
  SendWr wr;
  wr.opcode = WrOpcode::kSendImm;
  wr.flags = gv::ib::kWrInline;
  wr.imm = 0xabcdef01;
  run(wr, Sge{addr(0, 7), 100, 0});
  gv::ib::Completion rc{};
  ASSERT_EQ(gv::ib::poll_cq<Ownership::kExclusive>(ch[1], rc), Status::kOk) << gv::describe(rc);
  EXPECT_EQ(rc.cqe_opcode, m5::kCqeRespSendImm);
  EXPECT_EQ(rc.imm, 0xabcdef01u);
  EXPECT_EQ(rc.byte_len, 100u);
  EXPECT_EQ(std::memcmp(buf[1] + 40000, buf[0] + 7, 100), 0);
}

// Three laps of the send ring and of the CQ: indices, owner bits, records and doorbells wrap.
TEST_F(NicLoopback, ManyWritesWrapTheRings) {
  const std::uint32_t n = 3 * qh[0].sq_bbs;
  for (std::uint32_t i = 0; i < n; ++i) {
    SendWr wr;
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.remote_addr = addr(1, 8 * (i % 4096));
    wr.rkey = mr[1]->rkey();
    std::uint64_t v = 0x5a5a'0000'0000ull + i;
    std::memcpy(buf[0] + 60000, &v, 8);
    run(wr, Sge{addr(0, 60000), 8, mr[0]->lkey()});
    std::uint64_t got;
    std::memcpy(&got, buf[1] + 8 * (i % 4096), 8);
    ASSERT_EQ(got, v) << "write " << i;
  }
}

TEST_F(NicLoopback, ErrorCompletionMovesTheQpToError) {
  SendWr wr;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.remote_addr = addr(1, 0);
  wr.rkey = mr[1]->rkey() + 1;  // not a key
  const gv::ib::Completion c = run(wr, Sge{addr(0, 0), 64, mr[0]->lkey()}, Status::kCompletionError);
  EXPECT_EQ(c.syndrome, m5::kSyndRemoteAccessErr) << gv::describe(c);
  EXPECT_EQ(qp[0]->state(), gv::QpState::kError);
}

}  // namespace
