// Golden DEVX command buffers: each builder with known values against bytes worked out by hand
// from the PRM bit positions (offset / 32 = big-endian dword, bit counted from its MSB).
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include <gpuverbs/host/verbs.hpp>

#include "mlx5/devx/commands.hpp"

namespace devx = gv::mlx5::devx;

namespace {

/// The expected buffer: zeros except these {byte offset, bytes} runs.
template <std::size_t N>
std::array<std::uint8_t, N> golden(std::initializer_list<std::pair<std::size_t, std::vector<std::uint8_t>>> runs) {
  std::array<std::uint8_t, N> g{};
  for (const auto& [off, bytes] : runs)
    for (std::size_t i = 0; i < bytes.size(); ++i) g[off + i] = bytes[i];
  return g;
}

template <std::size_t N>
void expect_bytes(const std::array<std::uint8_t, N>& got, const std::array<std::uint8_t, N>& want) {
  for (std::size_t i = 0; i < N; ++i)
    EXPECT_EQ(got[i], want[i]) << "byte " << i << " (0x" << std::hex << i << ")";
}

TEST(DevxCommands, QueryHcaCapAtomicCurrent) {
  const auto c = devx::build_query_hca_cap(gv::mlx5::devx::prm::kCapAtomic);
  expect_bytes(c, golden<16>({{0, {0x01, 0x00}}, {6, {0x00, 0x07}}}));
}

TEST(DevxCommands, CreateCq) {
  devx::CqParams p;
  p.log_cq_size = 8;
  p.uar_page = 0x123;
  p.eqn = 7;
  p.log_page_size = 4;
  p.cq_umem_id = 0x11;
  p.dbr_umem_id = 0x12;
  p.dbr_offset = 0x4000;
  p.cq_umem_offset = 0x1000;
  p.overrun_ignore = true;
  const auto c = devx::build_create_cq(p);
  expect_bytes(c, golden<272>({
                      {0, {0x04, 0x00}},               // CREATE_CQ
                      {16, {0x02, 0x02, 0x00, 0x00}},  // cqc: dbr_umem_valid, cqe_sz 64 B (0), oi
                      {20, {0x00, 0x00, 0x00, 0x12}},  // dbr_umem_id
                      {28, {0x08, 0x00, 0x01, 0x23}},  // log_cq_size 8, uar_page
                      {39, {0x07}},                    // c_eqn
                      {40, {0x04}},                    // log_page_size
                      {78, {0x40, 0x00}},              // dbr_addr
                      {86, {0x10, 0x00}},              // cq_umem_offset
                      {88, {0x00, 0x00, 0x00, 0x11}},  // cq_umem_id
                      {92, {0x80}},                    // cq_umem_valid
                  }));
}

TEST(DevxCommands, CreateQpRc) {
  devx::QpParams p;
  p.pdn = 0x1234;
  p.uar_page = 0x55;
  p.cqn_snd = 0x400;
  p.cqn_rcv = 0x401;
  p.log_sq_size = 7;
  p.log_rq_size = 6;
  p.log_rq_stride = 1;
  p.log_page_size = 4;
  p.ts_format = 1;
  p.wq_umem_id = 0x21;
  p.dbr_umem_id = 0x22;
  p.dbr_offset = 0x2000;
  const auto c = devx::build_create_qp(p);
  expect_bytes(c, golden<272>({
                      {0, {0x05, 0x00}},               // CREATE_QP
                      {24, {0x00, 0x00, 0x18, 0x00}},  // qpc: st RC (0), pm_state migrated
                      {28, {0x00, 0x00, 0x12, 0x34}},  // pd
                      {32, {0x00, 0x31, 0x38, 0x40}},  // log_rq_size 6, log_rq_stride 1, log_sq_size 7, ts_format 1
                      {36, {0x00, 0x00, 0x00, 0x55}},  // uar_page
                      {44, {0x04}},                    // log_page_size
                      {148, {0x00, 0x00, 0x04, 0x00}}, // cqn_snd
                      {180, {0x00, 0x00, 0x04, 0x01}}, // cqn_rcv
                      {190, {0x20, 0x00}},             // dbr_addr
                      {232, {0x10}},                   // dbr_umem_valid
                      {252, {0x00, 0x00, 0x00, 0x22}}, // dbr_umem_id
                      {264, {0x00, 0x00, 0x00, 0x21}}, // wq_umem_id
                      {268, {0x80}},                   // wq_umem_valid
                  }));
}

TEST(DevxCommands, Rst2Init) {
  devx::Rst2InitParams p;
  p.qpn = 0x11;
  p.port = 1;
  p.pkey_index = 0x3;
  p.remote_read = p.remote_write = p.remote_atomic = true;
  const auto c = devx::build_rst2init(p);
  expect_bytes(c, golden<272>({
                      {0, {0x05, 0x02}},
                      {8, {0x00, 0x00, 0x00, 0x11}},   // qpn
                      {24, {0x00, 0x00, 0x18, 0x00}},  // pm_state migrated
                      {50, {0x00, 0x03}},              // primary path pkey_index
                      {85, {0x01}},                    // vhca_port_num
                      {168, {0x00, 0x03, 0xe0, 0x00}}, // atomic_mode 8 B, rre, rwe, rae
                  }));
}

TEST(DevxCommands, Init2RtrRoce) {
  devx::Init2RtrParams p;
  p.qpn = 0x11;
  p.remote_qpn = 0x22;
  p.mtu = 5;
  p.log_msg_max = 30;
  p.next_rcv_psn = 0x654321;
  p.min_rnr_nak = 12;
  p.log_rra_max = 4;
  p.path.roce = true;
  p.path.port = 1;
  for (std::uint8_t i = 0; i < 16; ++i) p.path.rgid[i] = static_cast<std::uint8_t>(0xf0 + i);
  p.path.src_addr_index = 3;
  p.path.hop_limit = 64;
  p.path.traffic_class = 0x28;
  p.path.sl = 3;
  p.path.udp_sport = 0xc123;
  p.path.rmac = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
  const auto c = devx::build_init2rtr(p);
  std::vector<std::uint8_t> gid;
  for (std::uint8_t i = 0; i < 16; ++i) gid.push_back(static_cast<std::uint8_t>(0xf0 + i));
  expect_bytes(c, golden<272>({
                      {0, {0x05, 0x03}},
                      {8, {0x00, 0x00, 0x00, 0x11}},
                      {32, {0xbe}},                    // mtu 4096 (5), log_msg_max 30
                      {44, {0x00, 0x00, 0x00, 0x22}},  // remote_qpn
                      {53, {0x80}},                    // grh
                      {57, {0x03, 0x00, 0x40}},        // src_addr_index, stat_rate 0, hop_limit
                      {60, {0x02, 0x80}},              // tclass 0x28 (bits 4..11)
                      {64, gid},                       // rgid_rip
                      {81, {0x0a, 0xc1, 0x23}},        // dscp 0x28 >> 2, udp_sport
                      {84, {0x30, 0x01, 0x02, 0x11}},  // eth_prio 3, vhca_port_num, rmac_47_32
                      {88, {0x22, 0x33, 0x44, 0x55}},  // rmac_31_0
                      {169, {0x80}},                   // log_rra_max 4
                      {172, {0x0c, 0x65, 0x43, 0x21}}, // min_rnr_nak, next_rcv_psn
                  }));
}

TEST(DevxCommands, Init2RtrInfiniBand) {
  devx::Init2RtrParams p;
  p.qpn = 0x11;
  p.remote_qpn = 0x22;
  p.mtu = 3;
  p.path.port = 2;
  p.path.rlid = 0x1234;
  p.path.sl = 5;
  p.min_rnr_nak = 0;
  const auto c = devx::build_init2rtr(p);
  expect_bytes(c, golden<272>({
                      {0, {0x05, 0x03}},
                      {8, {0x00, 0x00, 0x00, 0x11}},
                      {32, {0x60}},                    // mtu 1024 (3)
                      {44, {0x00, 0x00, 0x00, 0x22}},
                      {54, {0x12, 0x34}},              // rlid
                      {84, {0x05, 0x02}},              // sl, vhca_port_num
                  }));
}

TEST(DevxCommands, Rtr2Rts) {
  devx::Rtr2RtsParams p;
  p.qpn = 0xabcde;
  p.next_send_psn = 0x123456;
  p.retry_count = 7;
  p.rnr_retry = 6;
  p.ack_timeout = 14;
  p.log_sra_max = 3;
  const auto c = devx::build_rtr2rts(p);
  expect_bytes(c, golden<272>({
                      {0, {0x05, 0x04}},
                      {8, {0x00, 0x0a, 0xbc, 0xde}},
                      {56, {0x70}},                    // ack_timeout 14
                      {136, {0x00, 0x67, 0xc0, 0x00}}, // log_sra_max, retry_count, rnr_retry
                      {144, {0x00, 0x12, 0x34, 0x56}}, // next_send_psn
                  }));
}

TEST(DevxCommands, ToError) {
  expect_bytes(devx::build_2err(0x77), golden<16>({{0, {0x05, 0x07}}, {8, {0x00, 0x00, 0x00, 0x77}}}));
}

TEST(DevxCommands, QueryQpAndItsState) {
  expect_bytes(devx::build_query_qp(0x123456), golden<16>({{0, {0x05, 0x0b}}, {8, {0x00, 0x12, 0x34, 0x56}}}));
  devx::QueryQpOut out{};
  const auto state_at = [&](std::uint8_t nibble) {
    out[24] = static_cast<std::uint8_t>(nibble << 4 | 0x0f);  // qpc.state: the top 4 bits of the qpc
    return devx::read_qp_state(out);
  };
  EXPECT_EQ(state_at(0), gv::QpState::kReset);
  EXPECT_EQ(state_at(1), gv::QpState::kInit);
  EXPECT_EQ(state_at(2), gv::QpState::kRtr);
  EXPECT_EQ(state_at(3), gv::QpState::kRts);
  EXPECT_EQ(state_at(7), gv::QpState::kRts);    // SQ drained
  EXPECT_EQ(state_at(4), gv::QpState::kError);  // SQ error
  EXPECT_EQ(state_at(6), gv::QpState::kError);
}

TEST(DevxCommands, RefusesValuesThatWouldBeTruncated) {
  devx::CqParams p;
  p.eqn = 256;  // c_eqn is 8 bits wide
  EXPECT_THROW((void)devx::build_create_cq(p), gv::Error);
  devx::Rtr2RtsParams r;
  r.retry_count = 8;
  EXPECT_THROW((void)devx::build_rtr2rts(r), gv::Error);
  EXPECT_THROW((void)devx::build_2err(1u << 24), gv::Error);
}

TEST(DevxCommands, FailureNamesStatusAndSyndrome) {
  devx::ShortOut out{};
  out[0] = 0x03;
  out[4] = 0x12, out[5] = 0x34, out[6] = 0xab, out[7] = 0xcd;
  const std::string m = devx::describe_failure("CREATE_QP", out, 22);
  EXPECT_NE(m.find("bad parameter"), std::string::npos) << m;
  EXPECT_NE(m.find("0x1234abcd"), std::string::npos) << m;
  EXPECT_NE(m.find("errno 22"), std::string::npos) << m;
}

}  // namespace
