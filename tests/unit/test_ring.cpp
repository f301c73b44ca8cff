// Ring arithmetic (ib/ring.hpp) against a plain 64-bit model, then whole SQ/RQ/CQ rings driven
// over many laps by the device API (post_send, post_recv, try_poll_cq, retire) against a
// single-threaded model HCA, so that every 16- and 24-bit hardware counter wraps.
#include <gtest/gtest.h>
#include <infiniband/mlx5dv.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gpuverbs/ib.hpp>

#include "host_rings.hpp"

namespace {
using namespace gv::ib;
namespace m = gv::ib::mlx5;
using gv::Status;

std::uint64_t test_seed() { return gvt::test_seed(0x6776'6572'6273'0002ull); }
using gvt::seed_note;

// ---- Arithmetic --------------------------------------------------------------------------

TEST(RingArithmetic, Pow2Helpers) {
  EXPECT_FALSE(is_pow2(0));
  for (std::uint32_t l = 0; l < 63; ++l) {
    const std::uint64_t v = std::uint64_t{1} << l;
    EXPECT_TRUE(is_pow2(v)) << l;
    EXPECT_EQ(log2_pow2(v), l);
    EXPECT_EQ(round_up_pow2(v), v);
    if (l >= 2) {
      EXPECT_FALSE(is_pow2(v - 1)) << l;
      EXPECT_EQ(round_up_pow2(v - 1), v) << l;
      EXPECT_EQ(round_up_pow2(v / 2 + 1), v) << l;
    }
  }
  EXPECT_EQ(round_up_pow2(0), 1u);
}

TEST(RingArithmetic, AllPow2DepthsManyLapsAgainst64BitModel) {
  const std::uint64_t seed = test_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  constexpr std::uint64_t kSteps = 70'000;  // > 2^16: every 16-bit field wraps at least once
  for (std::uint32_t log = 0; log <= 12; ++log) {
    const std::uint32_t depth = 1u << log;
    for (std::uint64_t c0 : {std::uint64_t{0}, (std::uint64_t{1} << 24) - 35'000,
                             (std::uint64_t{1} << 32) - 1000, rng() >> 20}) {
      for (std::uint64_t step = 0; step < kSteps; ++step) {
        const std::uint64_t c = c0 + step;
        // the model: division, not masks
        ASSERT_EQ(ring_slot(c, depth), c % depth) << "c " << c << " depth " << depth;
        ASSERT_EQ(owner_bit(c, log), (c / depth) % 2) << "c " << c << " depth " << depth;
        for (std::uint32_t bits : {16u, 24u}) {
          const std::uint64_t span = std::uint64_t{1} << bits;
          const auto v = static_cast<std::uint32_t>(c % span);
          std::uint64_t d = rng() % span;
          if (step % 97 == 0) d = span - 1;  // the extremes of the window
          if (step % 89 == 0) d = 0;
          if (d <= c) {
            ASSERT_EQ(widen(c - d, v, bits), c) << "c " << c << " d " << d << " bits " << bits;
          }
          ASSERT_EQ(widen_below(c + d, v, bits), c) << "c " << c << " d " << d << " bits " << bits;
        }
      }
    }
  }
}

// ---- A model HCA on plain host memory ------------------------------------------------------

struct Rings : gvt::HostRings {
  std::uint32_t sq_bbs, rq_wqes, log_cqes, max_recv_sge;
  Rings(std::uint32_t sq_bbs_, std::uint32_t rq_wqes_, std::uint32_t log_cqes_, std::uint32_t max_recv_sge_)
      : HostRings({sq_bbs_, rq_wqes_, log_cqes_, max_recv_sge_, max_recv_sge_, 200, 0x1234, 7, -1}),
        sq_bbs(sq_bbs_), rq_wqes(rq_wqes_), log_cqes(log_cqes_), max_recv_sge(max_recv_sge_) {}
};

/// Writes CQE number p the way the HCA does (gv::ib::store_cqe: payload first, then the last 4
/// bytes with the owner bit in one release store).
void hca_write_cqe(Rings& r, std::uint64_t p, std::uint8_t opcode, std::uint16_t wqe_counter,
                   std::uint8_t wqe_opcode, std::uint32_t byte_cnt) {
  m::Cqe c = gv::ib::make_req_cqe(r.qp.qpn, wqe_opcode, wqe_counter, byte_cnt);
  c.op_own = m::cqe_op_own(opcode, false, 0);
  gv::ib::store_cqe(&r.cq[p & ((1u << r.log_cqes) - 1)], c, gv::ib::owner_bit(p, r.log_cqes),
                    gv::sync::Scope::kSystem);
}

std::uint32_t be32_load(const gv::be32& f) {
  return be32toh(std::atomic_ref<std::uint32_t>(const_cast<std::uint32_t&>(f.raw))
                     .load(std::memory_order_acquire));
}

struct PostedWqe {
  std::uint64_t start;
  std::uint32_t bbs;
  bool signaled;
  std::uint8_t opcode;
};

/// SQ, RQ and one CQ for both, over many laps. The poster and the poller are the device API
/// (kExclusive); the HCA is a model that reads only what hardware reads (doorbell records, WQE
/// bytes, the CQ consumer index) and writes only CQEs. Every step is checked against a model
/// of the counters.
void run_simulation(std::uint32_t sq_bbs, std::uint32_t rq_wqes, std::uint32_t log_cqes,
                    std::uint64_t seed) {
  SCOPED_TRACE(seed_note(seed));
  SCOPED_TRACE(::testing::Message() << "sq_bbs " << sq_bbs << " rq_wqes " << rq_wqes
                                    << " cqes " << (1u << log_cqes));
  std::mt19937_64 rng(seed);
  Rings r(sq_bbs, rq_wqes, log_cqes, 2);
  const std::uint32_t cq_size = 1u << log_cqes;
  std::vector<std::uint8_t> payload(200);
  for (auto& b : payload) b = static_cast<std::uint8_t>(rng());

  // model state
  std::uint64_t m_sq_res = 0, m_sq_done = 0, m_rq_res = 0, m_rq_done = 0, m_cq_polled = 0;
  std::deque<PostedWqe> hca_sq;           // posted, not yet executed
  std::deque<PostedWqe> in_flight_sig;    // executed, CQE written, not yet polled
  std::deque<std::uint64_t> rq_cqes;      // receive CQEs written, not yet polled (RQ index)
  std::deque<bool> cq_kinds;              // true: send CQE
  std::uint64_t hca_sq_pos = 0, hca_rq_pos = 0, hca_cq_prod = 0, last_signaled_end = 0;

  const std::uint64_t target = 70'000 + 3ull * sq_bbs;
  std::uint64_t steps = 0;
  while (m_sq_done < target || m_rq_done < 70'000) {
    ASSERT_LT(++steps, 5'000'000u) << "simulation does not progress";
    switch (rng() % 4) {
      case 0: {  // post a send WQE of 1..4 WQEBBs
        SendWr w;
        Sge sge{reinterpret_cast<std::uint64_t>(payload.data()), 0, 3};
        const unsigned kind = rng() % 4;
        w.opcode = kind == 0 ? WrOpcode::kNop : (kind == 1 ? WrOpcode::kSend : WrOpcode::kRdmaWrite);
        sge.length = 1 + static_cast<std::uint32_t>(rng() % 200);
        if (w.opcode != WrOpcode::kNop && rng() % 2) w.flags |= kWrInline;
        if (rng() % 3 == 0) w.flags |= kWrSignaled;
        w.sg_list = &sge;
        w.num_sge = w.opcode == WrOpcode::kNop ? 0 : 1;
        const std::uint32_t bbs = wqe_bbs(wqe_ds(w));
        if (bbs > sq_bbs) break;
        // As a user must: signal often enough that unsignaled WQEs never fill the ring.
        if (m_sq_res + bbs - std::max(last_signaled_end, m_sq_done) >= std::max(1u, sq_bbs / 2))
          w.flags |= kWrSignaled;
        const bool fits = m_sq_res + bbs - m_sq_done <= sq_bbs;
        const Status st = post_send<Ownership::kExclusive>(r.qp, w, gv::Budget{1000});
        ASSERT_EQ(st, fits ? Status::kOk : Status::kQueueFull) << "step " << steps;
        if (!fits) {
          ASSERT_EQ(r.qs->sq.reserved, m_sq_res) << "a refused post reserved space";
          break;
        }
        hca_sq.push_back({m_sq_res, bbs, (w.flags & kWrSignaled) != 0, mlx5_opcode(w.opcode)});
        m_sq_res += bbs;
        if (w.flags & kWrSignaled) last_signaled_end = m_sq_res;
        ASSERT_EQ(r.qs->sq.reserved, m_sq_res);
        ASSERT_EQ(be32toh(r.qp_dbrec.snd.raw), m_sq_res & m::kWqeIndexMask);
        std::uint64_t db_want;  // the doorbell: first 8 bytes of this WQE's ctrl segment
        std::memcpy(&db_want, r.qp.sq + sq_octoword_offset(hca_sq.back().start, 0, sq_bbs), 8);
        ASSERT_EQ(r.doorbell, db_want);
        break;
      }
      case 1: {  // post a receive
        Sge sgl[2] = {{0x1000 + m_rq_res, 64, 9}, {0x2000, 32, 9}};
        const std::uint32_t n = 1 + static_cast<std::uint32_t>(rng() % 2);
        const bool fits = m_rq_res + 1 - m_rq_done <= rq_wqes;
        ASSERT_EQ(post_recv<Ownership::kExclusive>(r.qp, sgl, n, gv::Budget{1000}),
                  fits ? Status::kOk : Status::kQueueFull) << "step " << steps;
        if (fits) {
          ++m_rq_res;
          ASSERT_EQ(be32toh(r.qp_dbrec.rcv.raw), m_rq_res & m::kWqeIndexMask);
        }
        break;
      }
      case 2: {  // the HCA executes what the doorbell records publish, while the CQ has room
        const std::uint64_t sq_pub = widen(hca_sq_pos, be32_load(r.qp_dbrec.snd), m::kWqeIndexBits);
        const std::uint64_t rq_pub = widen(hca_rq_pos, be32_load(r.qp_dbrec.rcv), m::kWqeIndexBits);
        ASSERT_EQ(sq_pub, m_sq_res);
        ASSERT_EQ(rq_pub, m_rq_res);
        const std::uint64_t ci = widen_below(hca_cq_prod, be32_load(r.cq_dbrec.set_ci) & m::kCqCiMask, m::kCqCiBits);
        ASSERT_EQ(ci, m_cq_polled) << "CQ consumer index";
        std::uint64_t room = cq_size - (hca_cq_prod - ci);
        const unsigned budget = 1 + rng() % 6;
        for (unsigned i = 0; i < budget && room > 0; ++i) {
          if (rng() % 2 && hca_sq_pos < sq_pub) {
            const PostedWqe w = hca_sq.front();
            ASSERT_EQ(w.start, hca_sq_pos);
            mlx5_wqe_ctrl_seg ctrl;
            std::memcpy(&ctrl, r.qp.sq + sq_octoword_offset(hca_sq_pos, 0, sq_bbs), 16);
            const std::uint32_t oio = be32toh(ctrl.opmod_idx_opcode);
            ASSERT_EQ(m::ctrl_wqe_index(oio), hca_sq_pos & m::kWqeIndexMask);
            ASSERT_EQ(m::ctrl_opcode(oio), w.opcode);
            ASSERT_EQ(be32toh(ctrl.qpn_ds) >> 8, r.qp.qpn);
            ASSERT_EQ(wqe_bbs(m::ctrl_ds(be32toh(ctrl.qpn_ds))), w.bbs);
            ASSERT_EQ((ctrl.fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE) != 0, w.signaled);
            hca_sq.pop_front();
            hca_sq_pos += w.bbs;
            if (w.signaled) {
              hca_write_cqe(r, hca_cq_prod++, MLX5_CQE_REQ, static_cast<std::uint16_t>(w.start),
                            w.opcode, 0);
              in_flight_sig.push_back(w);
              cq_kinds.push_back(true);
              --room;
            }
          } else if (hca_rq_pos < rq_pub) {
            mlx5_wqe_data_seg d;
            std::memcpy(&d, r.qp.rq + (ring_slot(hca_rq_pos, rq_wqes) << r.qp.rq_stride_shift), 16);
            ASSERT_EQ(be64toh(d.addr), 0x1000 + hca_rq_pos) << "receive WQE " << hca_rq_pos;
            hca_write_cqe(r, hca_cq_prod++, MLX5_CQE_RESP_SEND,
                          static_cast<std::uint16_t>(hca_rq_pos), 0, 64);
            rq_cqes.push_back(hca_rq_pos++);
            cq_kinds.push_back(false);
            --room;
          }
        }
        break;
      }
      case 3: {  // poll one completion
        Completion c;
        const Status st = try_poll_cq<Ownership::kExclusive>(r.cqh, c);
        if (cq_kinds.empty()) {
          ASSERT_EQ(st, Status::kEmpty) << "step " << steps;
          break;
        }
        ASSERT_EQ(st, Status::kOk) << "step " << steps;
        ++m_cq_polled;
        ASSERT_EQ(be32toh(r.cq_dbrec.set_ci.raw), m_cq_polled & m::kCqCiMask);
        ASSERT_EQ(c.qpn, r.qp.qpn);
        if (cq_kinds.front()) {
          const PostedWqe w = in_flight_sig.front();
          in_flight_sig.pop_front();
          ASSERT_TRUE(c.is_send());
          ASSERT_EQ(c.wqe_counter, static_cast<std::uint16_t>(w.start));
          ASSERT_EQ(c.wqe_opcode, w.opcode);
          m_sq_done = w.start + w.bbs;  // covers the unsignaled WQEs before it
          ASSERT_EQ(r.qs->sq.completed, m_sq_done) << "retire() freed the wrong amount";
        } else {
          ASSERT_FALSE(c.is_send());
          ASSERT_EQ(c.wqe_counter, static_cast<std::uint16_t>(rq_cqes.front()));
          ASSERT_EQ(c.byte_len, 64u);
          m_rq_done = rq_cqes.front() + 1;
          rq_cqes.pop_front();
          ASSERT_EQ(r.qs->rq.completed, m_rq_done);
        }
        cq_kinds.pop_front();
        break;
      }
    }
  }
  EXPECT_GT(r.qs->sq.completed, 65536u + sq_bbs);
  EXPECT_GT(r.qs->rq.completed, 65536u);
  EXPECT_GT(m_cq_polled, std::uint64_t{20} * cq_size);
}

TEST(RingSimulation, SqRqCqManyLaps) {
  const std::uint64_t seed = test_seed() + 1;
  run_simulation(16, 8, 3, seed);
}

TEST(RingSimulation, TinyRings) {
  const std::uint64_t seed = test_seed() + 2;
  run_simulation(4, 1, 0, seed);  // a one-entry RQ and a one-entry CQ: every step wraps
}

TEST(RingSimulation, LargerRings) {
  const std::uint64_t seed = test_seed() + 3;
  run_simulation(256, 64, 6, seed);
}

}  // namespace
