// The mlx5 provider's connection and discovery logic without a NIC: QpInfo <-> the attributes of
// each state change <-> ibv_qp_attr + mask (host_setup/src/mlx5/connect.hpp), the choice of
// device, port and GID index (discovery.hpp), and Device::open("mlx5") on this machine.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include <gpuverbs/host/verbs.hpp>

#include "../../host_setup/src/mlx5/connect.hpp"
#include "../../host_setup/src/mlx5/discovery.hpp"
#include "../../host_setup/src/world/ib_provider.hpp"
#include "expect_error.hpp"

namespace {
namespace x = gv::detail::mlx5;

using gvt::expect_error;

x::LocalPort ib_port() {
  x::LocalPort p;
  p.port = 1;
  p.link_layer = IBV_LINK_LAYER_INFINIBAND;
  p.lid = 0x17;
  p.active_mtu = IBV_MTU_4096;
  p.max_rd_atomic = 16;
  p.max_dest_rd_atomic = 16;
  return p;
}

x::LocalPort roce_port(std::uint8_t last) {
  x::LocalPort p;
  p.port = 2;
  p.link_layer = IBV_LINK_LAYER_ETHERNET;
  p.active_mtu = IBV_MTU_1024;
  p.gid_index = 3;
  const std::uint8_t gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, last};
  std::memcpy(p.gid, gid, 16);
  return p;
}

TEST(Mlx5Connect, InfiniBandPairFromEachOthersQpInfo) {
  x::LocalPort a = ib_port(), b = ib_port();
  b.lid = 0x2a;
  b.active_mtu = IBV_MTU_2048;
  const gv::QpInfo ia = x::local_qp_info(0x101, 0x123456, a), ib = x::local_qp_info(0x202, 0xabcdef, b);
  EXPECT_EQ(ia.port, 1);
  EXPECT_EQ(ia.lid, 0x17);
  EXPECT_EQ(ia.link_layer, IBV_LINK_LAYER_INFINIBAND);

  const auto [init, init_mask] = x::to_ibv(x::init_attr(a, gv::kRemoteWrite | gv::kRemoteRead | gv::kLocalWrite));
  EXPECT_EQ(init.qp_state, IBV_QPS_INIT);
  EXPECT_EQ(init.port_num, 1);
  EXPECT_EQ(init.pkey_index, 0);
  EXPECT_EQ(init.qp_access_flags, unsigned{IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ});
  EXPECT_EQ(init_mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);

  // a connects to b: b's QPN, PSN, LID; the smaller MTU of the two.
  const auto [rtr, rtr_mask] = x::to_ibv(x::rtr_attr(ib, a, 12));
  EXPECT_EQ(rtr.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(rtr.dest_qp_num, 0x202u);
  EXPECT_EQ(rtr.rq_psn, 0xabcdefu);
  EXPECT_EQ(rtr.path_mtu, IBV_MTU_2048);
  EXPECT_EQ(rtr.min_rnr_timer, 12);
  EXPECT_EQ(rtr.max_dest_rd_atomic, 16);
  EXPECT_EQ(rtr.ah_attr.dlid, 0x2a);
  EXPECT_EQ(rtr.ah_attr.is_global, 0);
  EXPECT_EQ(rtr.ah_attr.port_num, 1);
  EXPECT_EQ(rtr_mask, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);

  // a sends from the PSN b was told (ia.psn).
  const auto [rts, rts_mask] = x::to_ibv(x::rts_attr(ia.psn, a, 6));
  EXPECT_EQ(rts.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(rts.sq_psn, 0x123456u);
  EXPECT_EQ(rts.rnr_retry, 6);
  EXPECT_EQ(rts.retry_cnt, 7);
  EXPECT_EQ(rts.timeout, 14);
  EXPECT_EQ(rts.max_rd_atomic, 16);
  EXPECT_EQ(rts_mask, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_MAX_QP_RD_ATOMIC);
}

TEST(Mlx5Connect, RoceUsesTheGlobalRoute) {
  const x::LocalPort a = roce_port(1), b = roce_port(2);
  const gv::QpInfo ib = x::local_qp_info(0x77, 0x1000001, b);  // PSNs are 24 bits
  EXPECT_EQ(ib.psn, 0x000001u);
  const auto [rtr, mask] = x::to_ibv(x::rtr_attr(ib, a, 3));
  EXPECT_EQ(rtr.ah_attr.is_global, 1);
  EXPECT_EQ(std::memcmp(rtr.ah_attr.grh.dgid.raw, b.gid, 16), 0);
  EXPECT_EQ(rtr.ah_attr.grh.sgid_index, 3);  // ours, not the peer's
  EXPECT_EQ(rtr.ah_attr.grh.hop_limit, 64);
  EXPECT_EQ(rtr.ah_attr.dlid, 0);
  EXPECT_EQ(rtr.ah_attr.port_num, 2);
  EXPECT_EQ(rtr.path_mtu, IBV_MTU_1024);
  EXPECT_TRUE(mask & IBV_QP_AV);
}

TEST(Mlx5Connect, RefusesPeersItCannotReach) {
  const x::LocalPort ibp = ib_port(), roce = roce_port(1);
  gv::QpInfo soft;
  soft.qpn = 5;
  expect_error([&] { (void)x::rtr_attr(soft, ibp, 12); }, "soft provider");
  expect_error([&] { (void)x::rtr_attr(x::local_qp_info(9, 1, roce), ibp, 12); }, "same fabric");
  gv::QpInfo no_gid = x::local_qp_info(9, 1, roce);
  std::memset(no_gid.gid, 0, 16);
  expect_error([&] { (void)x::rtr_attr(no_gid, roce, 12); }, "GV_IB_GID_INDEX");
  x::LocalPort nolid = ib_port();
  nolid.lid = 0;
  expect_error([&] { (void)x::rtr_attr(x::local_qp_info(9, 1, nolid), ibp, 12); }, "subnet manager");
  gv::QpInfo bad_mtu = x::local_qp_info(9, 1, ibp);
  bad_mtu.mtu = 9;
  expect_error([&] { (void)x::rtr_attr(bad_mtu, ibp, 12); }, "MTU");
  EXPECT_EQ(x::mtu_bytes(IBV_MTU_256), 256u);
  EXPECT_EQ(x::mtu_bytes(IBV_MTU_4096), 4096u);
  EXPECT_EQ(x::mtu_bytes(0), 0u);
}

TEST(Mlx5Connect, QpStatesFromTheHca) {
  EXPECT_EQ(x::from_ibv(IBV_QPS_RESET), gv::QpState::kReset);
  EXPECT_EQ(x::from_ibv(IBV_QPS_INIT), gv::QpState::kInit);
  EXPECT_EQ(x::from_ibv(IBV_QPS_RTR), gv::QpState::kRtr);
  EXPECT_EQ(x::from_ibv(IBV_QPS_RTS), gv::QpState::kRts);
  EXPECT_EQ(x::from_ibv(IBV_QPS_SQD), gv::QpState::kRts);
  EXPECT_EQ(x::from_ibv(IBV_QPS_SQE), gv::QpState::kError);
  EXPECT_EQ(x::from_ibv(IBV_QPS_ERR), gv::QpState::kError);
}

// The World's ib transport opens what GV_PROVIDER names.
TEST(Mlx5World, ProviderFromTheEnvironment) {
  gv::DeviceOptions soft;
  soft.arena_bytes = 123 << 20;
  soft.engine = gv::DeviceOptions::Engine::kGpu;
  ::unsetenv("GV_PROVIDER");
  gv::detail::IbProvider p = gv::detail::world_ib_provider(soft, true);
  EXPECT_EQ(p.name, "soft");
  EXPECT_EQ(p.options.arena_bytes, soft.arena_bytes);
  EXPECT_EQ(p.options.engine, gv::DeviceOptions::Engine::kGpu);
  EXPECT_FALSE(p.gpu_heap);  // the soft GPU engine's arena is GPU memory already
  ::setenv("GV_PROVIDER", "mlx5", 1);
  p = gv::detail::world_ib_provider(soft, true);
  EXPECT_EQ(p.name, "mlx5");
  EXPECT_TRUE(p.options.map_to_gpus);
  EXPECT_TRUE(p.gpu_heap);
  p = gv::detail::world_ib_provider(soft, false);
  EXPECT_FALSE(p.options.map_to_gpus);
  EXPECT_FALSE(p.gpu_heap);
  ::setenv("GV_PROVIDER", "mlx5_2", 1);
  EXPECT_EQ(gv::detail::world_ib_provider(soft, false).name, "mlx5_2");
  ::setenv("GV_PROVIDER", "verbs", 1);
  expect_error([&] { (void)gv::detail::world_ib_provider(soft, false); }, "GV_PROVIDER='verbs' must be soft or mlx5");
  ::unsetenv("GV_PROVIDER");
}

x::HcaInfo hca(const char* name, bool mlx5, std::vector<x::PortInfo> ports) {
  x::HcaInfo h;
  h.name = name;
  h.mlx5 = mlx5;
  h.ports = std::move(ports);
  return h;
}
x::PortInfo port(std::uint8_t n, ibv_port_state s) {
  x::PortInfo p;
  p.port = n;
  p.state = s;
  return p;
}

TEST(Mlx5Discovery, PicksTheFirstActiveMlx5Port) {
  const std::vector<x::HcaInfo> hcas = {hca("rxe0", false, {port(1, IBV_PORT_ACTIVE)}),
                                        hca("mlx5_0", true, {port(1, IBV_PORT_DOWN), port(2, IBV_PORT_ACTIVE)}),
                                        hca("mlx5_1", true, {port(1, IBV_PORT_ACTIVE)})};
  x::Choice c = x::pick_port(hcas, x::Selection{"", 0, -1});
  EXPECT_EQ(hcas[c.hca].name, "mlx5_0");
  EXPECT_EQ(hcas[c.hca].ports[c.port].port, 2);
  c = x::pick_port(hcas, x::Selection{"mlx5_1", 0, -1});
  EXPECT_EQ(hcas[c.hca].name, "mlx5_1");
  expect_error([&] { (void)x::pick_port(hcas, x::Selection{"mlx5_0", 1, -1}); }, "mlx5_0 port 1 is down, not ACTIVE");
  expect_error([&] { (void)x::pick_port(hcas, x::Selection{"rxe0", 0, -1}); }, "only mlx5 is supported");
  expect_error([&] { (void)x::pick_port(hcas, x::Selection{"mlx5_7", 0, -1}); }, "no RDMA device named 'mlx5_7'");
  expect_error([&] { (void)x::pick_port(hcas, x::Selection{"mlx5_1", 3, -1}); }, "has no port 3");
  expect_error([&] { (void)x::pick_port({}, x::Selection{}); }, "no RDMA device found");
  expect_error([&] { (void)x::pick_port({}, x::Selection{}); }, "gv_devices");
}

TEST(Mlx5Discovery, EnvironmentOverridesTheOptions) {
  ::setenv("GV_IB_HCA", "mlx5_3", 1);
  ::setenv("GV_IB_PORT", "2", 1);
  ::setenv("GV_IB_GID_INDEX", "5", 1);
  x::Selection s = x::selection_from("mlx5", 1, -1);
  EXPECT_EQ(s.device, "mlx5_3");
  EXPECT_EQ(s.port, 2);
  EXPECT_EQ(s.gid_index, 5);
  s = x::selection_from("mlx5_0", 1, -1);  // a name given to open() wins over GV_IB_HCA
  EXPECT_EQ(s.device, "mlx5_0");
  ::setenv("GV_IB_PORT", "two", 1);
  expect_error([] { (void)x::selection_from("mlx5", 0, -1); }, "GV_IB_PORT='two'");
  ::unsetenv("GV_IB_HCA");
  ::unsetenv("GV_IB_PORT");
  ::unsetenv("GV_IB_GID_INDEX");
  s = x::selection_from("mlx5", 1, 4);
  EXPECT_EQ(s.device, "");
  EXPECT_EQ(s.port, 1);
  EXPECT_EQ(s.gid_index, 4);
}

TEST(Mlx5Discovery, GidIndexOnRoce) {
  x::PortInfo p = port(1, IBV_PORT_ACTIVE);
  p.link_layer = IBV_LINK_LAYER_ETHERNET;
  expect_error([&] { (void)x::pick_gid(p, -1); }, "has no GID");
  auto gid = [](std::uint32_t index, std::uint32_t type, bool v4) {
    x::GidInfo g;
    g.index = index;
    g.type = type;
    g.gid[0] = v4 ? 0 : 0xfe;
    if (v4) g.gid[10] = g.gid[11] = 0xff;
    g.gid[15] = static_cast<std::uint8_t>(index);
    return g;
  };
  p.gids = {gid(0, IBV_GID_TYPE_ROCE_V1, false), gid(1, IBV_GID_TYPE_ROCE_V2, false),
            gid(2, IBV_GID_TYPE_ROCE_V1, true), gid(3, IBV_GID_TYPE_ROCE_V2, true)};
  EXPECT_EQ(x::pick_gid(p, -1), 3u);  // RoCE v2 with an IPv4 address first
  p.gids.pop_back();
  EXPECT_EQ(x::pick_gid(p, -1), 1u);  // else the first RoCE v2
  EXPECT_EQ(x::pick_gid(p, 2), 2u);   // what the user asked for
  expect_error([&] { (void)x::pick_gid(p, 7); }, "GID index 7 is not valid");
  p.link_layer = IBV_LINK_LAYER_INFINIBAND;
  EXPECT_EQ(x::pick_gid(p, -1), 0u);
  std::uint8_t g[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x02, 0xc9, 0x03, 0, 0x01, 0x23, 0x45};
  EXPECT_EQ(x::gid_text(reinterpret_cast<const std::uint8_t(&)[16]>(g)), "fe80:0000:0000:0000:0002:c903:0001:2345");
}

// On this machine: with no RDMA device, open() fails at once and says how to list devices; with
// one, it opens and describes itself (tests/nic exercises it).
TEST(Mlx5Discovery, OpenOnThisMachine) {
  if (x::list_hcas().empty()) {
    expect_error([] { (void)gv::Device::open("mlx5"); }, "no RDMA device found");
    expect_error([] { (void)gv::Device::open("mlx5"); }, "gv_devices");
    EXPECT_EQ(gv::Device::list(), std::vector<std::string>{"soft"});
    return;
  }
  try {
    auto dev = gv::Device::open("mlx5");
    EXPECT_NE(dev->describe().find("mlx5 "), std::string::npos) << dev->describe();
  } catch (const gv::Error& e) {
    // Devices without an ACTIVE mlx5 port are refused with the reason.
    EXPECT_NE(std::string(e.what()).find("gv_devices"), std::string::npos) << e.what();
  }
}

}  // namespace
