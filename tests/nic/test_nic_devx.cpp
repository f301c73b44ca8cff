// Hardware test of the mlx5 provider's GPU placement (label nic): two RC QPs of one port with
// rings and records in GPU memory, created and connected through DEVX, connected to each other
// (a loopback pair); one RDMA WRITE posted by the host into the GPU-memory SQ (cudaMemcpy), rung
// on the UAR, and its CQE read back from the GPU-memory CQ. It checks the commands, UMEMs, UAR and
// ring layout on a real NIC without any kernel of ours. Skips with the reason where there is no
// mlx5 device with an active port, no GPU, or DEVX is not allowed.
// Knobs (as the provider's): GV_IB_HCA (device name), GV_IB_PORT (1), GV_IB_GID_INDEX (RoCE, 0).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <infiniband/mlx5dv.h>

#include <gpuverbs/ib/encode.hpp>

#include "mlx5/devx/rdma_seam.hpp"

namespace dm = gv::detail::mlx5;

namespace {

int env_int(const char* name, int def) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : def;
}

struct Nic {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_port_attr port{};
  int port_num = 1;
  std::string why;  ///< non-empty: skip with this reason
  ~Nic() {
    if (pd) (void)ibv_dealloc_pd(pd);
    if (ctx) (void)ibv_close_device(ctx);
  }
};

void open_nic(Nic& n) {
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  const char* want = std::getenv("GV_IB_HCA");
  n.port_num = env_int("GV_IB_PORT", 1);
  for (int i = 0; list && i < count && !n.ctx; ++i) {
    if (want && *want && std::strcmp(ibv_get_device_name(list[i]), want) != 0) continue;
    if (!mlx5dv_is_supported(list[i])) continue;
    ibv_context* c = ibv_open_device(list[i]);
    if (!c) continue;
    if (ibv_query_port(c, static_cast<std::uint8_t>(n.port_num), &n.port) == 0 && n.port.state == IBV_PORT_ACTIVE)
      n.ctx = c;
    else
      (void)ibv_close_device(c);
  }
  if (list) ibv_free_device_list(list);
  if (!n.ctx) {
    n.why = "no mlx5 device with an ACTIVE port " + std::to_string(n.port_num) +
            (want ? std::string(" named ") + want : std::string()) + " (ibv_devinfo lists them)";
    return;
  }
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    (void)cudaGetLastError();
    n.why = "no CUDA GPU: the GPU placement puts queues in GPU memory";
    return;
  }
  n.pd = ibv_alloc_pd(n.ctx);
  if (!n.pd) n.why = "ibv_alloc_pd failed";
}

template <class T>
void to_gpu(void* dst, const T* src, std::size_t bytes) {
  ASSERT_EQ(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), cudaSuccess);
}

TEST(NicDevx, LoopbackPairInGpuMemoryWritesAndCompletes) {
  Nic n;
  open_nic(n);
  if (!n.why.empty()) GTEST_SKIP() << n.why;
  std::unique_ptr<dm::QueueFactory> f;
  try {
    f = gv::mlx5::devx::make_gpu_queue_factory(n.ctx);
  } catch (const gv::Error& e) {
    if (std::string(e.what()).find("DEVX is not usable") != std::string::npos) GTEST_SKIP() << e.what();
    FAIL() << e.what();
  }
  ASSERT_EQ(f->placement(), dm::Placement::kGpu);
  auto cq_a = f->create_cq(16), cq_b = f->create_cq(16);
  dm::QpRequest req;
  req.pd = n.pd;
  req.caps.sq_depth = 16;
  req.caps.rq_depth = 16;
  auto qp_a = f->create_qp(req, *cq_a, *cq_a);
  auto qp_b = f->create_qp(req, *cq_b, *cq_b);

  const bool roce = n.port.link_layer == IBV_LINK_LAYER_ETHERNET;
  const int gid_index = env_int("GV_IB_GID_INDEX", 0);
  ibv_gid gid{};
  if (roce) {
    ASSERT_EQ(ibv_query_gid(n.ctx, static_cast<std::uint8_t>(n.port_num), gid_index, &gid), 0);
  }
  const auto connect = [&](dm::QpQueue& q, const dm::QpQueue& peer, std::uint32_t my_psn, std::uint32_t peer_psn) {
    q.to_init({static_cast<std::uint8_t>(n.port_num), 0, gv::kRemoteWrite | gv::kRemoteRead | gv::kRemoteAtomic});
    dm::RtrAttr rtr;
    rtr.remote_qpn = peer.rings().qpn;
    rtr.rq_psn = peer_psn;
    rtr.path_mtu = static_cast<std::uint8_t>(n.port.active_mtu);
    rtr.max_dest_rd_atomic = 1;
    rtr.path.port = static_cast<std::uint8_t>(n.port_num);
    rtr.path.dlid = n.port.lid;
    rtr.path.global = roce;
    std::memcpy(rtr.path.dgid, gid.raw, 16);
    rtr.path.sgid_index = static_cast<std::uint8_t>(gid_index);
    q.to_rtr(rtr);
    dm::RtsAttr rts;
    rts.sq_psn = my_psn;
    rts.max_rd_atomic = 1;
    q.to_rts(rts);
  };
  connect(*qp_a, *qp_b, 0x100, 0x200);
  connect(*qp_b, *qp_a, 0x200, 0x100);
  EXPECT_EQ(qp_a->query_state(), gv::QpState::kRts);  // QUERY_QP: what the HCA holds
  EXPECT_EQ(qp_b->query_state(), gv::QpState::kRts);

  // Data in host memory: this test is about where the queues live.
  constexpr std::size_t kBytes = 4096;
  std::vector<std::uint8_t> src(kBytes), dst(kBytes, 0xee);
  std::mt19937 rng(20261126);
  for (auto& b : src) b = static_cast<std::uint8_t>(rng());
  ibv_mr* smr = ibv_reg_mr(n.pd, src.data(), kBytes, IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* dmr = ibv_reg_mr(n.pd, dst.data(), kBytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_TRUE(smr && dmr);

  gv::ib::Sge sge{reinterpret_cast<std::uint64_t>(src.data()), kBytes, smr->lkey};
  gv::ib::SendWr wr;
  wr.opcode = gv::ib::WrOpcode::kRdmaWrite;
  wr.flags = gv::ib::kWrSignaled;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.remote_addr = reinterpret_cast<std::uint64_t>(dst.data());
  wr.rkey = dmr->rkey;
  const dm::QpRings& a = qp_a->rings();
  std::uint8_t wqe[64] = {};
  for (std::uint32_t k = 0; k < gv::ib::wqe_ds(wr); ++k) {
    const gv::ib::Octoword o = gv::ib::wqe_octoword(wr, k, 0, a.qpn);
    std::memcpy(wqe + 16 * k, &o, 16);
  }
  to_gpu(a.sq_buf, wqe, sizeof wqe);
  const gv::be32 counter = gv::be32::from(gv::ib::mlx5::dbrec_counter(1));
  to_gpu(a.dbrec + 1, &counter, sizeof counter);  // {receive, send}: the send counter
  std::uint64_t ring;
  std::memcpy(&ring, wqe, 8);  // the control segment's first 8 bytes, in wire order
  std::atomic_thread_fence(std::memory_order_seq_cst);
  *static_cast<volatile std::uint64_t*>(a.bf_reg) = ring;

  gv::ib::mlx5::Cqe cqe{};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  do {
    ASSERT_EQ(cudaMemcpy(&cqe, cq_a->rings().buf, sizeof cqe, cudaMemcpyDeviceToHost), cudaSuccess);
  } while (gv::ib::mlx5::cqe_opcode(cqe.op_own) == gv::ib::mlx5::kCqeInvalid &&
           std::chrono::steady_clock::now() < deadline);
  ASSERT_NE(gv::ib::mlx5::cqe_opcode(cqe.op_own), gv::ib::mlx5::kCqeInvalid) << "no CQE within 2 s";
  EXPECT_EQ(gv::ib::mlx5::cqe_opcode(cqe.op_own), gv::ib::mlx5::kCqeReq) << "op_own " << int(cqe.op_own);
  EXPECT_EQ(gv::ib::mlx5::cqe_owner(cqe.op_own), 0);
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), kBytes), 0);

  (void)ibv_dereg_mr(smr);
  (void)ibv_dereg_mr(dmr);
  qp_a.reset();
  qp_b.reset();
  cq_a.reset();
  cq_b.reset();
}

}  // namespace
