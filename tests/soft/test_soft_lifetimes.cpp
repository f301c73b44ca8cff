// Object lifetimes and handle order: a Device may go before its children; handles of a QP that
// is not connected, and of a CQ before the queues it retires, are refused with what to do.
#include <string>

#include "soft_fixture.hpp"

namespace gvt {
namespace {

TEST(Lifetimes, ChildrenKeepTheirDeviceAlive) {
  auto dev = gv::Device::open("soft");
  auto pd = dev->alloc_pd();
  auto cq_a = dev->create_cq(16), cq_b = dev->create_cq(16);
  auto qp_a = pd->create_qp(*cq_a, *cq_a), qp_b = pd->create_qp(*cq_b, *cq_b);
  qp_a->connect(qp_b->info());
  qp_b->connect(qp_a->info());
  constexpr std::uint32_t kBytes = 4096;
  auto* src = static_cast<std::uint8_t*>(dev->alloc(kBytes));
  auto* dst = static_cast<std::uint8_t*>(dev->alloc(kBytes));
  fill_random(src, kBytes, 7);
  std::memset(dst, 0xee, kBytes);
  auto src_mr = pd->reg_mr(src, kBytes, gv::kLocalWrite);
  auto dst_mr = pd->reg_mr(dst, kBytes, kAllAccess);
  const gv::ib::QpHandle qh = qp_a->device_handle();
  const gv::ib::CqHandle ch = cq_a->device_handle();

  dev.reset();  // the children, their memory and the engine live on

  const Sge sge{reinterpret_cast<std::uint64_t>(src), kBytes, src_mr->lkey()};
  const SendWr wr = make_wr(WrOpcode::kRdmaWrite, &sge, 1, gv::ib::kWrSignaled, reinterpret_cast<std::uint64_t>(dst),
                            dst_mr->rkey());
  ASSERT_EQ(gv::ib::post_send<Ownership::kExclusive>(qh, wr), Status::kOk);
  Completion c;
  ASSERT_EQ(gv::ib::poll_cq<Ownership::kExclusive>(ch, c, gv::Budget{20'000'000'000ull}), Status::kOk);
  EXPECT_TRUE(c.ok()) << gv::describe(c);
  EXPECT_EQ(std::memcmp(src, dst, kBytes), 0);
  EXPECT_EQ(qp_a->state(), gv::QpState::kRts);
  // Children go in an order no Device allows for: MRs, a CQ before its QP, the PD before QPs.
  src_mr.reset();
  dst_mr.reset();
  cq_a.reset();
  pd.reset();
  qp_a.reset();
  qp_b.reset();
  cq_b.reset();  // the last child: the provider closes here
}

TEST(Lifetimes, QpHandleOfAnUnconnectedQpIsRefused) {
  auto dev = gv::Device::open("soft");
  auto pd = dev->alloc_pd();
  auto cq = dev->create_cq(16), cq2 = dev->create_cq(16);
  auto qp = pd->create_qp(*cq, *cq), peer = pd->create_qp(*cq2, *cq2);
  expect_error([&] { qp->device_handle(); }, "is in RESET, not connected");
  qp->modify_to_init();
  expect_error([&] { qp->device_handle(); }, "is in INIT, not connected: work posted through a handle now would never execute");
  qp->modify_to_rtr(peer->info());
  EXPECT_NO_THROW(qp->device_handle());  // RTR: receives work, sends run once in RTS
  qp->modify_to_rts();
  EXPECT_EQ(qp->device_handle().qpn, qp->qpn());
  qp->modify_to_error();
  EXPECT_NO_THROW(qp->device_handle());  // its work flushes
}

TEST(Lifetimes, CqHandleBeforeItsQueuesIsRefused) {
  auto dev = gv::Device::open("soft");
  auto pd = dev->alloc_pd();
  auto lone = dev->create_cq(16);
  expect_error([&] { lone->device_handle(); }, "no queue completes into CQ");

  // A CQ that completes one QP's receives only: its handle may be taken, but a send queue bound
  // to it afterwards would never see its slots freed by that handle.
  auto sends = dev->create_cq(16), recvs = dev->create_cq(16);
  auto qp = pd->create_qp(*sends, *recvs);
  const gv::ib::CqHandle h = recvs->device_handle();
  EXPECT_EQ(h.send_qp, nullptr);
  EXPECT_NE(h.recv_qp, nullptr);
  auto other = dev->create_cq(16);
  expect_error([&] { pd->create_qp(*recvs, *other); },
               "was taken before any send queue completed into it");
  // The same for a receive queue bound to a CQ whose handle saw only a send queue.
  const gv::ib::CqHandle hs = sends->device_handle();
  EXPECT_NE(hs.send_qp, nullptr);
  expect_error([&] { pd->create_qp(*other, *sends); }, "was taken before any receive queue completed into it");
  // A CQ whose handle nobody took binds as before.
  auto fresh = dev->create_cq(16);
  EXPECT_NO_THROW(pd->create_qp(*fresh, *other));
}

}  // namespace
}  // namespace gvt
