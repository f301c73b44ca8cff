// The GPU-placement setup sequence (mlx5/devx/queues.cpp) run against the Recorder: the order of
// device calls, every command buffer checked against our layouts, the rings the factory reports,
// and the refusals. A test of our commands on host memory standing in for GPU memory — not a
// hardware result.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <gpuverbs/ib/cqe.hpp>

#include "devx_recorder.hpp"
#include "mlx5/devx/queues.hpp"
#include "provider.hpp"

namespace devx = gv::mlx5::devx;
namespace dm = gv::detail::mlx5;
using devx::test::Recorder;

namespace {

std::vector<std::string> from(const std::vector<std::string>& calls, std::size_t first) {
  return {calls.begin() + static_cast<std::ptrdiff_t>(first), calls.end()};
}

TEST(DevxSetup, WholeSequenceOnRoce) {
  Recorder r;
  devx::GpuQueueFactory f(r, {});
  EXPECT_EQ(r.calls, (std::vector<std::string>{"general_cmd query_hca_cap_in", "general_cmd query_hca_cap_in", "query_eqn"}));
  EXPECT_EQ(f.placement(), dm::Placement::kGpu);

  std::size_t mark = r.calls.size();
  auto cq = f.create_cq(100);  // rounded up to 128
  EXPECT_EQ(from(r.calls, mark), (std::vector<std::string>{"alloc_queue_memory", "umem_reg_dmabuf", "write_queue_memory",
                                                           "alloc_uar nc_dedicated", "obj_create create_cq_in"}));
  const dm::CqRings& cr = cq->rings();
  EXPECT_EQ(cr.cqe_cnt, 128u);
  EXPECT_EQ(cr.cqe_size, 64u);
  EXPECT_EQ(cr.placement, dm::Placement::kGpu);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(cr.buf) % (64 << 10), 0u);
  const auto* cqes = static_cast<const gv::ib::mlx5::Cqe*>(cr.buf);
  for (std::uint32_t i = 0; i < cr.cqe_cnt; ++i)
    ASSERT_EQ(gv::ib::mlx5::cqe_opcode(cqes[i].op_own), gv::ib::mlx5::kCqeInvalid) << "CQE " << i;
  EXPECT_EQ(reinterpret_cast<std::byte*>(cr.dbrec) - static_cast<std::byte*>(cr.buf), 128 * 64);
  const auto& ccq = r.last_in.at(devx::prm::kOpCreateCq);
  const auto cq_f = [&](devx::prm::Field fl) { return devx::prm::get(ccq, devx::prm::at(devx::prm::create_cq_in::cq_context, fl)); };
  EXPECT_EQ(cq_f(devx::prm::cqc::log_cq_size), 7u);
  EXPECT_EQ(cq_f(devx::prm::cqc::c_eqn), 9u);
  EXPECT_EQ(cq_f(devx::prm::cqc::dbr_addr), 128u * 64);
  EXPECT_EQ(cq_f(devx::prm::cqc::cqe_sz), devx::prm::kCqeSz64);
  EXPECT_EQ(cq_f(devx::prm::cqc::dbr_umem_id), devx::prm::get(ccq, devx::prm::create_cq_in::cq_umem_id));

  auto rcq = f.create_cq(64);
  mark = r.calls.size();
  dm::QpRequest req;
  req.caps.sq_depth = 64;
  req.caps.rq_depth = 32;
  req.caps.max_recv_sge = 2;
  auto qp = f.create_qp(req, *cq, *rcq);
  EXPECT_EQ(from(r.calls, mark), (std::vector<std::string>{"pdn", "alloc_queue_memory", "umem_reg_dmabuf",
                                                           "alloc_uar nc_dedicated", "obj_create create_qp_in"}));
  const dm::QpRings& q = qp->rings();
  EXPECT_EQ(q.rq_buf, static_cast<void*>(static_cast<std::byte*>(q.rq_buf)));
  EXPECT_EQ(q.rq_wqe_cnt, 32u);
  EXPECT_EQ(q.rq_stride, 32u);
  EXPECT_EQ(static_cast<std::byte*>(q.sq_buf) - static_cast<std::byte*>(q.rq_buf), 32 * 32);
  EXPECT_EQ(q.sq_wqe_cnt, gv::detail::sq_wqebbs(req.caps));
  EXPECT_EQ(q.sq_stride, 64u);
  EXPECT_EQ(q.bf_size, 0u);  // a non-cached UAR: doorbell only
  const auto& cqp = r.last_in.at(devx::prm::kOpCreateQp);
  const auto qp_f = [&](devx::prm::Field fl) { return devx::prm::get(cqp, devx::prm::at(devx::prm::create_qp_in::qpc, fl)); };
  EXPECT_EQ(qp_f(devx::prm::qpc::pd), 0x77u);
  EXPECT_EQ(qp_f(devx::prm::qpc::cqn_snd), cq->rings().cqn);
  EXPECT_EQ(qp_f(devx::prm::qpc::cqn_rcv), rcq->rings().cqn);
  EXPECT_EQ(qp_f(devx::prm::qpc::log_rq_stride), 1u);
  EXPECT_EQ(qp_f(devx::prm::qpc::rq_type), devx::prm::kRqRegular);
  EXPECT_EQ(qp_f(devx::prm::qpc::ts_format), devx::prm::kTsDefault);
  EXPECT_EQ(qp_f(devx::prm::qpc::dbr_addr),
            static_cast<std::uint64_t>(reinterpret_cast<std::byte*>(q.dbrec) - static_cast<std::byte*>(q.rq_buf)));

  EXPECT_EQ(qp->query_state(), gv::QpState::kReset);
  mark = r.calls.size();
  qp->to_init({1, 0, gv::kRemoteWrite | gv::kRemoteRead | gv::kRemoteAtomic});
  dm::RtrAttr rtr;
  rtr.remote_qpn = 0x123;
  rtr.rq_psn = 0x42;
  rtr.path_mtu = 4;
  rtr.max_dest_rd_atomic = 16;
  rtr.path.global = true;
  rtr.path.sgid_index = 3;
  rtr.path.dgid[0] = 0xfe;
  qp->to_rtr(rtr);
  dm::RtsAttr rts;
  rts.sq_psn = 0x99;
  rts.max_rd_atomic = 8;
  qp->to_rts(rts);
  EXPECT_EQ(from(r.calls, mark), (std::vector<std::string>{"obj_modify rst2init_qp_in", "resolve_rmac",
                                                           "obj_modify init2rtr_qp_in", "obj_modify rtr2rts_qp_in"}));
  EXPECT_EQ(qp->query_state(), gv::QpState::kRts);
  EXPECT_EQ(r.calls.back(), "obj_query query_qp_in");
  const auto& m = r.last_in.at(devx::prm::kOpInit2RtrQp);
  const auto path = [&](devx::prm::Field fl) {
    return devx::prm::get(m, devx::prm::at(devx::prm::modify_qp_in::qpc, devx::prm::at(devx::prm::qpc::primary_address_path, fl)));
  };
  EXPECT_EQ(devx::prm::get(m, devx::prm::at(devx::prm::modify_qp_in::qpc, devx::prm::qpc::remote_qpn)), 0x123u);
  EXPECT_EQ(devx::prm::get(m, devx::prm::at(devx::prm::modify_qp_in::qpc, devx::prm::qpc::log_rra_max)), 4u);
  EXPECT_EQ(path(devx::prm::ads::grh), 1u);
  EXPECT_EQ(path(devx::prm::ads::src_addr_index), 3u);
  EXPECT_EQ(path(devx::prm::ads::rmac_31_0), 3u);  // the recorder's MAC ends in the GID index
  EXPECT_GE(path(devx::prm::ads::udp_sport), 0xc000u);
  const auto& s = r.last_in.at(devx::prm::kOpRtr2RtsQp);
  EXPECT_EQ(devx::prm::get(s, devx::prm::at(devx::prm::modify_qp_in::qpc, devx::prm::qpc::log_sra_max)), 3u);

  qp->to_error();
  EXPECT_EQ(qp->query_state(), gv::QpState::kError);
  mark = r.calls.size();
  qp.reset();
  rcq.reset();
  cq.reset();
  EXPECT_EQ(from(r.calls, mark).front(), "obj_destroy");
  EXPECT_EQ(r.objs, 0);
  EXPECT_EQ(r.uars, 0);
  EXPECT_EQ(r.umems, 0);
  EXPECT_TRUE(r.memory.empty());
}

TEST(DevxSetup, InfiniBandPathUsesLidAndNoAddressHandle) {
  Recorder r;
  r.caps.port_type = devx::prm::kPortTypeIb;
  devx::GpuQueueFactory f(r, {});
  auto cq = f.create_cq(16);
  auto qp = f.create_qp({}, *cq, *cq);
  qp->to_init({1, 0, gv::kRemoteWrite});
  dm::RtrAttr rtr;
  rtr.path.dlid = 0x1234;
  rtr.path.sl = 2;
  qp->to_rtr(rtr);
  EXPECT_EQ(std::count(r.calls.begin(), r.calls.end(), "resolve_rmac"), 0);
  const auto& m = r.last_in.at(devx::prm::kOpInit2RtrQp);
  const auto ads = devx::prm::at(devx::prm::modify_qp_in::qpc, devx::prm::qpc::primary_address_path);
  EXPECT_EQ(devx::prm::get(m, devx::prm::at(ads, devx::prm::ads::rlid)), 0x1234u);
  EXPECT_EQ(devx::prm::get(m, devx::prm::at(ads, devx::prm::ads::sl)), 2u);
  EXPECT_EQ(devx::prm::get(m, devx::prm::at(ads, devx::prm::ads::grh)), 0u);
}

TEST(DevxSetup, PathMustMatchTheLinkLayer) {
  Recorder roce;  // Ethernet port: the peer is named by its GID
  devx::GpuQueueFactory f(roce, {});
  auto cq = f.create_cq(16);
  auto qp = f.create_qp({}, *cq, *cq);
  qp->to_init({1, 0, 0});
  EXPECT_THROW(qp->to_rtr({}), gv::Error);  // no global path
  EXPECT_EQ(roce.last_in.count(devx::prm::kOpInit2RtrQp), 0u);

  Recorder ib;
  ib.caps.port_type = devx::prm::kPortTypeIb;
  devx::GpuQueueFactory g(ib, {});
  auto cq2 = g.create_cq(16);
  auto qp2 = g.create_qp({}, *cq2, *cq2);
  qp2->to_init({1, 0, 0});
  dm::RtrAttr grh;
  grh.path.global = true;
  EXPECT_THROW(qp2->to_rtr(grh), gv::Error);
  EXPECT_EQ(ib.last_in.count(devx::prm::kOpInit2RtrQp), 0u);
}

TEST(DevxSetup, FallsBackToPeerMemThenNamesBoth) {
  Recorder r;
  r.fail_dmabuf = EOPNOTSUPP;
  devx::GpuQueueFactory f(r, {});
  auto cq = f.create_cq(16);
  EXPECT_NE(std::find(r.calls.begin(), r.calls.end(), "umem_reg"), r.calls.end());
  EXPECT_NE(f.describe().find("nvidia_peermem"), std::string::npos) << f.describe();
  r.fail_umem = EFAULT;
  try {
    auto cq2 = f.create_cq(16);
    FAIL() << "expected a refusal";
  } catch (const gv::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("dma-buf"), std::string::npos) << m;
    EXPECT_NE(m.find("nvidia_peermem"), std::string::npos) << m;
  }
  EXPECT_EQ(r.memory.size(), 1u);  // only the first CQ's
}

TEST(DevxSetup, UarFallsBackInOrder) {
  Recorder r;
  r.refuse_uar = {devx::UarType::kNcDedicated, devx::UarType::kNc};
  devx::GpuQueueFactory f(r, {});
  auto cq = f.create_cq(16);
  auto qp = f.create_qp({}, *cq, *cq);
  EXPECT_NE(f.describe().find("UAR bf"), std::string::npos) << f.describe();
  EXPECT_EQ(qp->rings().bf_size, 512u);
  r.refuse_uar.insert(devx::UarType::kBf);
  EXPECT_THROW((void)f.create_cq(16), gv::Error);
}

TEST(DevxSetup, RefusesMissingCapabilitiesBeforeAllocating) {
  Recorder r;
  r.caps.cqe_version = 0;
  try {
    devx::GpuQueueFactory f(r, {});
    FAIL() << "expected a refusal";
  } catch (const gv::Error& e) {
    EXPECT_NE(std::string(e.what()).find("CQE version 0"), std::string::npos) << e.what();
  }
  Recorder a;
  a.caps.atomic_size_qp = 0x4;  // 4-byte atomics only
  EXPECT_THROW(devx::GpuQueueFactory(a, {}), gv::Error);
  Recorder o;
  devx::GpuQueueOptions opt;
  opt.cq_overrun_ignore = true;  // cq_oi is 0 in the recorder's caps
  EXPECT_THROW(devx::GpuQueueFactory(o, opt), gv::Error);
  EXPECT_TRUE(r.memory.empty() && a.memory.empty() && o.memory.empty());
}

TEST(DevxSetup, FailedCommandPrintsSyndromeAndReleasesEverything) {
  Recorder r;
  devx::GpuQueueFactory f(r, {});
  auto cq = f.create_cq(16);
  r.fail_opcode = devx::prm::kOpCreateQp;
  r.fail_syndrome = 0x5a5a1234;
  try {
    auto qp = f.create_qp({}, *cq, *cq);
    FAIL() << "expected CREATE_QP to fail";
  } catch (const gv::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("CREATE_QP"), std::string::npos) << m;
    EXPECT_NE(m.find("0x5a5a1234"), std::string::npos) << m;
  }
  EXPECT_EQ(r.uars, 1);   // the CQ's
  EXPECT_EQ(r.umems, 1);
  EXPECT_EQ(r.memory.size(), 1u);
  r.fail_opcode = devx::prm::kOpInit2RtrQp;
  auto qp = f.create_qp({}, *cq, *cq);
  qp->to_init({1, 0, 0});
  EXPECT_THROW(qp->to_rtr({}), gv::Error);
}

}  // namespace
