// The mlx5 provider's pure translations (host_setup/src/mlx5/translate.hpp) against rdma-core's
// own structs and inline helpers: mlx5dv_qp / mlx5dv_cq -> QpHandle / CqHandle, the checks of
// what the device API assumes, the doorbell value and record for a producer index
// (mlx5dv_set_ctrl_seg, libmlx5's htobe32(cur_post & 0xffff) at MLX5_SND_DBR), and the proxy
// thread ringing a stand-in register for posts made through a handle built from an mlx5dv_qp.
#include <gtest/gtest.h>
#include <infiniband/mlx5dv.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include <gpuverbs/host/verbs.hpp>
#include <gpuverbs/ib.hpp>

#include "../../host_setup/src/mlx5/doorbell_proxy.hpp"
#include "../../host_setup/src/mlx5/translate.hpp"
#include "expect_error.hpp"
#include "host_rings.hpp"

namespace {
namespace x = gv::detail::mlx5;
namespace m = gv::ib::mlx5;
using gv::Status;

/// What mlx5dv_init_obj reports for a QP: rings in one buffer (RQ first, as libmlx5 lays them
/// out), a record, and a BlueFlame register; here plain memory standing in for each.
struct FakeDvQp {
  std::vector<gv::ib::Octoword> buf;
  alignas(64) __be32 dbrec[2] = {0, 0};
  alignas(64) std::uint64_t bf[64] = {};
  mlx5dv_qp dv{};
  FakeDvQp(std::uint32_t sq_bbs, std::uint32_t rq_wqes, std::uint32_t rq_stride) {
    buf.resize((std::size_t{sq_bbs} * 64 + std::size_t{rq_wqes} * rq_stride) / 16);
    std::memset(buf.data(), 0xcd, buf.size() * 16);
    dv.dbrec = dbrec;
    dv.rq.buf = buf.data();
    dv.rq.wqe_cnt = rq_wqes;
    dv.rq.stride = rq_stride;
    dv.sq.buf = reinterpret_cast<char*>(buf.data()) + std::size_t{rq_wqes} * rq_stride;
    dv.sq.wqe_cnt = sq_bbs;
    dv.sq.stride = 64;
    dv.bf.reg = bf + 32;  // libmlx5's bf.reg lies inside the UAR page (offset 0x800 or 0x900)
    dv.bf.size = 256;
  }
};

TEST(Mlx5Translate, QpHandleFromMlx5dvQp) {
  FakeDvQp f(256, 64, 64);
  const x::QpRings r = x::qp_rings_from(f.dv, 0x1234);
  EXPECT_EQ(r.sq_buf, f.dv.sq.buf);
  EXPECT_EQ(r.rq_buf, f.dv.rq.buf);
  EXPECT_EQ(static_cast<void*>(r.dbrec), static_cast<void*>(f.dbrec));
  EXPECT_EQ(r.bf_reg, f.dv.bf.reg);
  EXPECT_EQ(r.placement, x::Placement::kHost);

  gv::ib::QpCounters st;
  std::uint32_t abort = 0;
  std::uint64_t word = 0;
  gv::QpCaps caps;
  caps.max_send_sge = 3;
  caps.max_inline = 100;
  const gv::ib::QpHandle h =
      x::qp_handle(r, x::QpReach{r.sq_buf, r.rq_buf, r.dbrec, &word, &st, &abort}, caps);
  EXPECT_EQ(h.version, gv::ib::kHandleVersion);
  EXPECT_EQ(h.qpn, 0x1234u);
  EXPECT_EQ(h.sq, static_cast<std::byte*>(f.dv.sq.buf));
  EXPECT_EQ(h.rq, static_cast<std::byte*>(f.dv.rq.buf));
  EXPECT_EQ(static_cast<void*>(h.dbrec), static_cast<void*>(f.dbrec));
  EXPECT_EQ(h.doorbell, &word);
  EXPECT_EQ(h.state, &st);
  EXPECT_EQ(h.abort, &abort);
  EXPECT_EQ(h.sq_bbs, 256u);
  EXPECT_EQ(h.rq_wqes, 64u);
  EXPECT_EQ(h.rq_stride_shift, 6u);
  EXPECT_EQ(h.max_recv_sge, 4u);  // a 64-byte receive WQE holds four scatter entries
  EXPECT_EQ(h.max_send_sge, 3u);
  EXPECT_EQ(h.max_inline, 100u);
  EXPECT_EQ(h.executor, gv::sync::Scope::kSystem);
  EXPECT_EQ(h.rq_executor, gv::sync::Scope::kSystem);
  EXPECT_EQ(h.record_polled, 0u);  // a NIC: record released before the doorbell
  // The record's words are rdma-core's MLX5_RCV_DBR and MLX5_SND_DBR.
  EXPECT_EQ(reinterpret_cast<std::byte*>(&h.dbrec->rcv), reinterpret_cast<std::byte*>(&f.dbrec[MLX5_RCV_DBR]));
  EXPECT_EQ(reinterpret_cast<std::byte*>(&h.dbrec->snd), reinterpret_cast<std::byte*>(&f.dbrec[MLX5_SND_DBR]));
}

TEST(Mlx5Translate, CqHandleFromMlx5dvCq) {
  std::vector<m::Cqe> ring(512);
  alignas(64) __be32 rec[2] = {0, 0};
  mlx5dv_cq dv{};
  dv.buf = ring.data();
  dv.dbrec = rec;
  dv.cqe_cnt = 512;
  dv.cqe_size = 64;
  dv.cqn = 77;
  const x::CqRings r = x::cq_rings_from(dv);
  gv::ib::CqCounters st;
  std::uint32_t abort = 0, err = 0;
  const gv::ib::CqHandle h = x::cq_handle(r, x::CqReach{r.buf, r.dbrec, &st, &abort, &err});
  EXPECT_EQ(h.cqn, 77u);
  EXPECT_EQ(h.ring, ring.data());
  EXPECT_EQ(static_cast<void*>(h.dbrec), static_cast<void*>(rec));
  EXPECT_EQ(h.log_cqes, 9u);
  EXPECT_EQ(h.state, &st);
  EXPECT_EQ(h.error, &err);
  EXPECT_EQ(h.executor, gv::sync::Scope::kSystem);
  EXPECT_EQ(h.send_qp, nullptr);  // verbs.cpp binds the queues the CQ retires
}

TEST(Mlx5Translate, RefusesWhatTheDeviceApiCannotUse) {
  std::vector<m::Cqe> ring(256);
  __be32 rec[2] = {};
  mlx5dv_cq cq{};
  cq.buf = ring.data();
  cq.dbrec = rec;
  cq.cqe_cnt = 128;
  cq.cqe_size = 128;
  gvt::expect_error([&] { x::check_cq_rings(x::cq_rings_from(cq)); }, "64-byte CQEs");
  cq.cqe_size = 64;
  cq.cqe_cnt = 96;
  gvt::expect_error([&] { x::check_cq_rings(x::cq_rings_from(cq)); }, "power of two");
  cq.cqe_cnt = 128;
  EXPECT_NO_THROW(x::check_cq_rings(x::cq_rings_from(cq)));

  FakeDvQp f(64, 16, 32);
  EXPECT_NO_THROW(x::check_qp_rings(x::qp_rings_from(f.dv, 1)));
  auto with = [&](auto change, const char* what) {
    FakeDvQp g(64, 16, 32);
    change(g.dv);
    gvt::expect_error([&] { x::check_qp_rings(x::qp_rings_from(g.dv, 1)); }, what);
  };
  with([](mlx5dv_qp& d) { d.sq.stride = 128; }, "64-byte send WQEBBs");
  with([](mlx5dv_qp& d) { d.sq.wqe_cnt = 48; }, "power of two");
  with([](mlx5dv_qp& d) { d.rq.wqe_cnt = 12; }, "power of two");
  with([](mlx5dv_qp& d) { d.rq.stride = 8; }, "at least 16 bytes");
  with([](mlx5dv_qp& d) { d.bf.reg = nullptr; }, "doorbell register");
  with([](mlx5dv_qp& d) { d.dbrec = nullptr; }, "doorbell record");
}

// The doorbell for a WQE at producer index pi is the first 8 bytes of its control segment, as
// rdma-core's mlx5dv_set_ctrl_seg writes it; the record after it is htobe32((pi + bbs) & 0xffff).
TEST(Mlx5Translate, DoorbellValueAndRecordForAProducerIndex) {
  std::mt19937_64 rng(gvt::test_seed(0x6d6c'7835'6462ull));
  for (int i = 0; i < 2000; ++i) {
    const auto pi = static_cast<std::uint16_t>(rng());
    const std::uint32_t qpn = rng() & 0xffffff;
    const auto ds = static_cast<std::uint8_t>(1 + rng() % 63);
    const std::uint8_t opcode = MLX5_OPCODE_RDMA_WRITE;
    mlx5_wqe_ctrl_seg want;
    mlx5dv_set_ctrl_seg(&want, pi, opcode, 0, qpn, MLX5_WQE_CTRL_CQ_UPDATE, ds, 0, 0);
    std::uint64_t theirs;
    std::memcpy(&theirs, &want, sizeof(theirs));
    const gv::ib::Octoword ours = gv::ib::as_octoword(
        gv::ib::make_ctrl_seg(pi, opcode, 0, qpn, m::kCtrlCqUpdate, ds, 0, gv::be32::from(0)));
    ASSERT_EQ(gv::ib::doorbell_value(ours), theirs) << "pi " << pi << " qpn " << qpn << " ds " << int(ds);
    const x::DoorbellWord d = x::decode_doorbell(theirs);
    EXPECT_EQ(d.wqe_index, pi);
    EXPECT_EQ(d.qpn, qpn);
    EXPECT_EQ(d.bbs, (ds * 16u + 63) / 64);
    const std::uint64_t end = std::uint64_t{pi} + d.bbs + (rng() & ~std::uint64_t{0xffff});  // any lap
    EXPECT_EQ(gv::be32::from(m::dbrec_counter(end)).raw, htobe32(static_cast<std::uint32_t>(end & 0xffff)));
    EXPECT_TRUE(x::proxy_should_ring(theirs, static_cast<std::uint16_t>(pi + d.bbs), static_cast<std::uint16_t>(pi)));
    // A record that ran ahead of the word (the poster's next WQE), or one already rung: wait.
    EXPECT_FALSE(x::proxy_should_ring(theirs, static_cast<std::uint16_t>(pi + d.bbs + 1), static_cast<std::uint16_t>(pi)));
    EXPECT_FALSE(x::proxy_should_ring(theirs, static_cast<std::uint16_t>(pi + d.bbs), static_cast<std::uint16_t>(pi + d.bbs)));
  }
  EXPECT_FALSE(x::proxy_should_ring(0, 1, 0));  // no word yet
}

// Host threads post through a handle built from an mlx5dv_qp; the proxy thread must copy each
// post's doorbell value into the register stand-in, and the record must count the WQEBBs.
TEST(Mlx5Translate, ProxyRingsForPostsThroughTheHandle) {
  FakeDvQp f(64, 16, 64);
  const x::QpRings r = x::qp_rings_from(f.dv, 0x99);
  gv::ib::QpCounters st;
  std::uint32_t abort = 0;
  std::uint64_t word = 0;
  gv::QpCaps caps;
  caps.max_inline = 64;
  const gv::ib::QpHandle h = x::qp_handle(r, x::QpReach{r.sq_buf, r.rq_buf, r.dbrec, &word, &st, &abort}, caps);
  x::DoorbellProxy proxy;
  proxy.add(0x99, &word, reinterpret_cast<std::uint32_t*>(&f.dbrec[MLX5_SND_DBR]), f.dv.bf.reg);
  auto* reg = static_cast<std::uint64_t*>(f.dv.bf.reg);
  std::uint64_t pi = 0;
  for (int i = 0; i < 200; ++i) {
    std::uint64_t payload = 0x1111'0000ull + i;
    gv::ib::Sge sge{reinterpret_cast<std::uint64_t>(&payload), 8, 0};
    gv::ib::SendWr wr;
    wr.opcode = gv::ib::WrOpcode::kRdmaWrite;
    wr.flags = gv::ib::kWrInline | gv::ib::kWrSignaled;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.remote_addr = 0x1000;
    wr.rkey = 5;
    ASSERT_EQ(gv::ib::post_send<gv::ib::Ownership::kExclusive>(h, wr), Status::kOk);
    std::uint64_t ctrl8;
    std::memcpy(&ctrl8, static_cast<char*>(f.dv.sq.buf) + (pi % 64) * 64, sizeof(ctrl8));
    pi += gv::ib::wqe_bbs(gv::ib::wqe_ds(wr));
    EXPECT_EQ(be32toh(f.dbrec[MLX5_SND_DBR]), pi & 0xffff);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::atomic_ref<std::uint64_t>(*reg).load(std::memory_order_acquire) != ctrl8 &&
           std::chrono::steady_clock::now() < deadline) {
    }
    ASSERT_EQ(std::atomic_ref<std::uint64_t>(*reg).load(std::memory_order_acquire), ctrl8) << "post " << i;
    // The ring space comes back as a NIC's completions would free it.
    std::atomic_ref<std::uint64_t>(st.sq.completed).store(pi, std::memory_order_release);
  }
  proxy.remove(0x99);
}

}  // namespace
