// What only a ConnectX HCA can show, on a loopback pair of one port driven by host threads
// (doorbells rung by the provider's proxy thread): the device describes the mode it runs in, an
// error completion moves the QP to ERR in the HCA itself, and the rings wrap several laps. Every
// opcode is covered by tests/soft's SoftOps, which tests/nic reruns over the NIC. Skipped, with
// the reason, without an mlx5 device with an ACTIVE port.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>

#include "soft_fixture.hpp"

namespace gvt {
namespace {

class NicLoopback : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gv::Device::list().size() == 1)
      GTEST_SKIP() << "no mlx5 device with an ACTIVE port on this machine (gv_devices lists what there is)";
    dev = gv::Device::open("mlx5");  // a present device must open: a failure here fails the test
    a = std::make_unique<Endpoint>(*dev);
    b = std::make_unique<Endpoint>(*dev);
    connect_pair(*a, *b);
    la = std::make_unique<Buffer>(*dev, *a->pd, kBytes, kAllAccess, 31);
    rb = std::make_unique<Buffer>(*dev, *b->pd, kBytes, kAllAccess, 32);
  }
  void TearDown() override {
    la.reset();
    rb.reset();
    a.reset();
    b.reset();
  }

  static constexpr std::size_t kBytes = 1 << 16;
  std::unique_ptr<gv::Device> dev;
  std::unique_ptr<Endpoint> a, b;
  std::unique_ptr<Buffer> la, rb;
};

TEST_F(NicLoopback, DescribesTheModeItRunsIn) {
  const std::string d = dev->describe();
  std::printf("%s\n", d.c_str());
  EXPECT_NE(d.find("mlx5 "), std::string::npos) << d;
  EXPECT_NE(d.find("queues in host memory"), std::string::npos) << d;
  EXPECT_NE(d.find("for host threads, rung by a host thread"), std::string::npos) << d;
  EXPECT_EQ(a->qp->state(), gv::QpState::kRts);
  EXPECT_FALSE(dev->poll_async_event().has_value());
}

// Three laps of the send ring and of the CQ: indices, owner bits, records and doorbells wrap.
TEST_F(NicLoopback, SignaledWritesWrapTheRings) {
  const std::uint32_t n = 3 * std::max(a->h.sq_bbs, 1u << a->ch.log_cqes);
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::size_t off = 8 * (i % 4096);
    la->fill(i, 60000, 8);
    const Sge s = la->sge(60000, 8);
    post_ok(*a, make_wr(WrOpcode::kRdmaWrite, &s, 1, gv::ib::kWrSignaled, rb->addr(off), rb->mr->rkey()));
    const Completion c = wait_cqe(*a);
    ASSERT_EQ(c.status, Status::kOk) << "write " << i << ": " << gv::describe(c);
    ASSERT_EQ(std::memcmp(rb->p + off, la->p + 60000, 8), 0) << "write " << i;
  }
}

TEST_F(NicLoopback, ErrorCompletionMovesTheQpToError) {
  const Sge s = la->sge(0, 64);
  post_ok(*a, make_wr(WrOpcode::kRdmaWrite, &s, 1, gv::ib::kWrSignaled, rb->addr(0), rb->mr->rkey() + 1));  // not a key
  const Completion c = wait_cqe(*a);
  EXPECT_EQ(c.status, Status::kCompletionError);
  EXPECT_EQ(c.syndrome, m5::kSyndRemoteAccessErr) << gv::describe(c);
  EXPECT_EQ(a->qp->state(), gv::QpState::kError);  // read back from the HCA
}

}  // namespace
}  // namespace gvt
