// Bad host arguments are rejected with an error that names the problem.
#include <cstdio>

#include "soft_fixture.hpp"

namespace gvt {
namespace {

class HostArgs : public ::testing::Test {
 protected:
  std::unique_ptr<gv::Device> dev = gv::Device::open("soft");
  std::unique_ptr<gv::ProtectionDomain> pd = dev->alloc_pd();
};

TEST_F(HostArgs, UnknownProvider) {
  // Any other name is an RDMA device: none by that name here (or none at all), and the message
  // says how to list them.
  expect_error([] { gv::Device::open("mlx5_9"); }, "gv_devices");
  EXPECT_EQ(gv::Device::list().front(), "soft");
}

TEST_F(HostArgs, ArenaTooSmall) {
  gv::DeviceOptions o;
  o.arena_bytes = 4096;
  expect_error([&] { gv::Device::open("soft", o); }, "arena_bytes 4096 is too small");
}

TEST_F(HostArgs, CqDepths) {
  expect_error([&] { dev->create_cq(0); }, "depth 0 is invalid");
  expect_error([&] { dev->create_cq((1u << 22) + 1); }, "depth 4194305 is invalid");
  EXPECT_EQ(dev->create_cq(5)->entries(), 8u);
}

TEST_F(HostArgs, QpCaps) {
  auto cq = dev->create_cq(16);
  auto bad = [&](gv::QpCaps c, const char* what) { expect_error([&] { pd->create_qp(*cq, *cq, c); }, what); };
  gv::QpCaps c;
  c.sq_depth = 0;
  bad(c, "sq_depth 0 is invalid");
  c = {};
  c.sq_depth = 4097;
  bad(c, "sq_depth 4097 is invalid: must be 1..4096");
  c = {};
  c.rq_depth = 0;
  bad(c, "rq_depth 0 is invalid");
  c = {};
  c.max_send_sge = 17;
  bad(c, "max_send_sge 17 is invalid");
  c = {};
  c.max_recv_sge = 0;
  bad(c, "max_recv_sge 0 is invalid");
  c = {};
  c.max_inline = 513;
  bad(c, "max_inline 513 is invalid");
}

TEST_F(HostArgs, CqServesOneSendQueue) {
  auto cq = dev->create_cq(16);
  auto other = dev->create_cq(16);
  auto qp = pd->create_qp(*cq, *cq);
  expect_error([&] { pd->create_qp(*cq, *other); }, "already completes the send queue");
  expect_error([&] { pd->create_qp(*other, *cq); }, "already completes the receive queue");
  qp.reset();  // the binding goes with the QP
  EXPECT_NO_THROW(pd->create_qp(*cq, *cq));
}

TEST_F(HostArgs, RegMr) {
  void* p = dev->alloc(4096);
  expect_error([&] { pd->reg_mr(nullptr, 8, gv::kLocalWrite); }, "address is null");
  expect_error([&] { pd->reg_mr(p, 0, gv::kLocalWrite); }, "length is 0");
  expect_error([&] { pd->reg_mr(p, 8, 0x100); }, "unknown access bits");
  expect_error([&] { pd->reg_mr(p, 8, gv::kRemoteWrite); }, "needs kLocalWrite");
  expect_error([&] { pd->reg_mr(p, 8192, gv::kLocalWrite); }, "not inside one live Device::alloc");
  auto mr = pd->reg_mr(p, 4096, gv::kLocalWrite);
  expect_error([&] { dev->free(p); }, "is still registered");
  mr.reset();
  dev->free(p);
  expect_error([&] { pd->reg_mr(p, 64, gv::kLocalWrite); }, "not inside one live Device::alloc");
  expect_error([&] { dev->free(p); }, "was not returned by Device::alloc (or was freed already)");
  int local = 0;
  expect_error([&] { dev->free(&local); }, "was not returned by Device::alloc");
  expect_error([&] { dev->alloc(0); }, "0 bytes");
  expect_error([&] { dev->alloc(std::size_t{1} << 40); }, "do not fit");
}

TEST_F(HostArgs, StateTransitionsInOrderOnly) {
  auto cq = dev->create_cq(16);
  auto cq2 = dev->create_cq(16);
  auto qp = pd->create_qp(*cq, *cq);
  auto peer = pd->create_qp(*cq2, *cq2);
  EXPECT_EQ(qp->state(), gv::QpState::kReset);
  expect_error([&] { qp->modify_to_rtr(peer->info()); }, "is in RESET; RTR needs INIT");
  expect_error([&] { qp->modify_to_rts(); }, "is in RESET; RTS needs RTR");
  qp->modify_to_init();
  expect_error([&] { qp->modify_to_init(); }, "is in INIT; INIT needs RESET");
  expect_error([&] { qp->modify_to_rts(); }, "is in INIT; RTS needs RTR");
  expect_error([&] { qp->modify_to_rtr(gv::QpInfo{}); }, "remote QpInfo is empty");
  expect_error([&] { qp->modify_to_rtr(peer->info(), 32); }, "min_rnr_timer 32 is invalid");
  qp->modify_to_rtr(peer->info());
  expect_error([&] { qp->modify_to_rts(8); }, "rnr_retry 8 is invalid");
  qp->modify_to_rts();
  EXPECT_EQ(qp->state(), gv::QpState::kRts);
}

TEST_F(HostArgs, ConnectTwice) {
  auto cq = dev->create_cq(16);
  auto cq2 = dev->create_cq(16);
  auto qp = pd->create_qp(*cq, *cq);
  auto peer = pd->create_qp(*cq2, *cq2);
  qp->connect(peer->info());
  expect_error([&] { qp->connect(peer->info()); }, "connects once");
}

TEST_F(HostArgs, GpuEngineOptions) {
  gv::DeviceOptions o;
  o.engine = gv::DeviceOptions::Engine::kGpu;
  o.engine_warps = 33;
  expect_error([&] { gv::Device::open("soft", o); }, "engine_warps 33 is invalid: must be 1..32");
  o.engine_warps = 0;
  expect_error([&] { gv::Device::open("soft", o); }, "engine_warps 0 is invalid");
  o.engine_warps = 4;
  try {
    gv::Device::open("soft", o);
    GTEST_SKIP() << "a GPU engine opened here: the GPU tests (test_gpu_engine) cover it";
  } catch (const gv::Error& e) {
    // Without a GPU, or without nvcc at build time: either way the message says what is missing.
    EXPECT_NE(std::string(e.what()).find("the GPU engine needs"), std::string::npos) << e.what();
  }
}

TEST_F(HostArgs, AMachineWithoutAGpuIsNamedAsSuch) {
  gv::DeviceOptions mapped;
  mapped.map_to_gpus = true;
  gv::DeviceOptions engine;
  engine.engine = gv::DeviceOptions::Engine::kGpu;
  for (const gv::DeviceOptions& o : {mapped, engine}) {
    try {
      gv::Device::open("soft", o);
      GTEST_SKIP() << "a GPU is present: the GPU tests cover these options";
    } catch (const gv::Error& e) {
      // Without nvcc at build time the message says so; with it, the runtime's "driver version
      // is insufficient" on a machine without a GPU must read as what it is.
      const std::string m = e.what();
      EXPECT_TRUE(m.find("needs gpuverbs built with CUDA") != std::string::npos ||
                  m.find("needs a GPU: no NVIDIA GPU or driver found") != std::string::npos)
          << m;
      EXPECT_EQ(m.find("insufficient"), std::string::npos) << m;
    }
  }
}

TEST_F(HostArgs, CpuEngineQpDoesNotConnectToAGpuEngineQp) {
  auto cq = dev->create_cq(16);
  auto qp = pd->create_qp(*cq, *cq);
  gv::QpInfo remote;
  remote.qpn = 0x40;
  remote.pid = 1;
  std::snprintf(remote.arena, sizeof(remote.arena), "gpu:1:0:0x7f0000000000");
  expect_error([&] { qp->connect(remote); }, "connect QPs of devices opened with the same DeviceOptions::engine");
}

TEST_F(HostArgs, DescribeNamesTheFailure) {
  gv::ib::Completion c;
  c.status = gv::Status::kCompletionError;
  c.cqe_opcode = m5::kCqeReqErr;
  c.syndrome = m5::kSyndRemoteAccessErr;
  c.qpn = 0x41;
  c.wqe_counter = 12;
  EXPECT_EQ(gv::describe(c),
            "QP 0x41 send WQE 12: remote access error (bad rkey, bounds or rights) (syndrome 0x13, vendor 0x00)");
}

}  // namespace
}  // namespace gvt
