// The device API on host threads against hand-built rings: plain heap memory, QpHandle and
// CqHandle filled by hand, no provider. A model HCA thread reads what hardware reads (doorbell
// records, the doorbell word, WQE bytes, the CQ consumer index) and writes CQEs the way
// hardware does (payload, then the owner byte with release).
#include <gtest/gtest.h>
#include <infiniband/mlx5dv.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <gpuverbs/ib.hpp>

#include "host_rings.hpp"

namespace {
using namespace gv::ib;
namespace m = gv::ib::mlx5;
using gv::Status;
using Clock = std::chrono::steady_clock;

std::uint64_t test_seed() { return gvt::test_seed(0x6776'6572'6273'0003ull); }
using gvt::seed_note;

template <class T>
T load_acq(const T& v) {
  return std::atomic_ref<T>(const_cast<T&>(v)).load(std::memory_order_acquire);
}
template <class T>
void store_rel(T& v, T x) {
  std::atomic_ref<T>(v).store(x, std::memory_order_release);
}

/// One QP and one CQ on heap memory, SQ and RQ poisoned. The CQ completes both queues.
struct HostQp : gvt::HostRings {
  std::uint32_t sq_bbs, rq_wqes, log_cqes;
  HostQp(std::uint32_t sq_bbs_, std::uint32_t rq_wqes_, std::uint32_t log_cqes_,
         std::uint32_t max_recv_sge = 4, std::uint8_t poison = 0xcd)
      : HostRings({sq_bbs_, rq_wqes_, log_cqes_, max_recv_sge,
                   static_cast<std::uint32_t>(round_up_pow2(max_recv_sge + 1)), 128, 0x00abcd, 3, poison}),
        sq_bbs(sq_bbs_), rq_wqes(rq_wqes_), log_cqes(log_cqes_) {}
};

struct CqeSpec {
  std::uint8_t opcode = MLX5_CQE_REQ;
  std::uint32_t qpn = 0;
  std::uint16_t wqe_counter = 0;
  std::uint8_t wqe_opcode = 0;
  std::uint32_t byte_cnt = 0;
  std::uint32_t imm_wire = 0;  ///< as the HCA writes it (network order)
  std::uint64_t timestamp = 0;
  std::uint8_t syndrome = 0, vendor_syndrome = 0;
};

/// CQE number p, as the HCA writes it (gv::ib::store_cqe: payload first, then the last 4
/// bytes with the owner bit in one release store). Built with the CQE builders, which
/// test_mlx5_layout checks against rdma-core's structs.
void write_cqe(HostQp& q, std::uint64_t p, const CqeSpec& s, bool owner_flip = false) {
  m::Cqe c;
  if (s.opcode == MLX5_CQE_REQ_ERR || s.opcode == MLX5_CQE_RESP_ERR) {
    c = gv::ib::make_err_cqe(s.opcode == MLX5_CQE_REQ_ERR, s.qpn, s.wqe_opcode, s.wqe_counter, s.syndrome,
                             s.vendor_syndrome);
  } else {
    c = s.opcode == MLX5_CQE_REQ
            ? gv::ib::make_req_cqe(s.qpn, s.wqe_opcode, s.wqe_counter, s.byte_cnt)
            : gv::ib::make_resp_cqe(s.opcode, s.qpn, s.wqe_counter, s.byte_cnt, gv::be32{s.imm_wire}, false);
    c.timestamp = gv::be64::from(s.timestamp);  // (an error CQE's syndrome lies there)
  }
  const auto owner = static_cast<std::uint8_t>(((p >> q.log_cqes) & 1) ^ (owner_flip ? 1 : 0));
  gv::ib::store_cqe(&q.cq[p & q.cq_mask()], c, owner, gv::sync::Scope::kSystem);
}

/// What the HCA does to a CQE slot once the consumer index has passed it: the bytes are no
/// longer the poller's. Poisoned so that a poller reading a released CQE sees garbage.
void poison_cqe(HostQp& q, std::uint64_t p) {
  auto* slot = reinterpret_cast<std::uint8_t*>(&q.cq[p & q.cq_mask()]);
  std::memset(slot, 0xee, 60);
  const std::uint32_t tail = 0xf0eeeeeeu | (std::uint32_t((p >> q.log_cqes) & 1) << 24);
  // bytes 60..63 little-endian: ee ee ee (0xf0 | owner): opcode INVALID, never "ready"
  store_rel(*reinterpret_cast<std::uint32_t*>(slot + 60), tail);
}

std::uint64_t first8(const void* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// ---- Posting: single thread -------------------------------------------------------------------

TEST(PostSend, BatchWritesWqesDbrecAndDoorbellOfLastWqe) {
  HostQp q(16, 4, 4);
  gv::ib::wq_start_at(&q.qs->sq, 65534);  // wqe index wraps
  std::vector<std::uint8_t> payload(70, 0x5a);
  Sge inl{reinterpret_cast<std::uint64_t>(payload.data()), 70, 1};
  Sge two[2] = {{0x1000, 10, 2}, {0x2000, 20, 3}};
  SendWr w[3];
  w[0].opcode = WrOpcode::kRdmaWrite;
  w[0].sg_list = two;
  w[0].num_sge = 2;
  w[0].remote_addr = 0xabc;
  w[1].opcode = WrOpcode::kSendImm;  // 1 + 5 octowords: 2 WQEBBs
  w[1].flags = kWrInline;
  w[1].sg_list = &inl;
  w[1].num_sge = 1;
  w[1].imm = 77;
  w[2].opcode = WrOpcode::kNop;
  w[2].flags = kWrSignaled;
  ASSERT_EQ(post_send_batch<Ownership::kExclusive>(q.qp, w, 3), Status::kOk);
  const std::uint64_t starts[3] = {65534, 65535, 65537};
  EXPECT_EQ(q.qs->sq.reserved, 65538u);
  EXPECT_EQ(q.qs->sq.published, 65538u);
  EXPECT_EQ(be32toh(q.qp_dbrec.snd.raw), 65538u & m::kWqeIndexMask);
  for (int i = 0; i < 3; ++i) {
    for (std::uint32_t k = 0; k < wqe_ds(w[i]); ++k) {
      const Octoword want = wqe_octoword(w[i], k, static_cast<std::uint16_t>(starts[i]), q.qp.qpn);
      EXPECT_EQ(0, std::memcmp(q.sq_bytes(starts[i], k), &want, 16)) << "WQE " << i << " oct " << k;
    }
  }
  EXPECT_EQ(q.doorbell, first8(q.sq_bytes(starts[2])));
  EXPECT_NE(q.doorbell, first8(q.sq_bytes(starts[1])));
  // the untouched rest of the ring still holds the poison
  for (std::uint64_t bb = 65538; bb < 65534 + 16; ++bb)
    EXPECT_EQ(*q.sq_bytes(bb), 0xcd) << "WQEBB " << bb;

  // kShared posts the same bytes
  HostQp s(16, 4, 4);
  s.qs->sq = q.qs->sq;
  gv::ib::wq_start_at(&s.qs->sq, 65534);
  ASSERT_EQ(post_send_batch<Ownership::kShared>(s.qp, w, 3), Status::kOk);
  EXPECT_EQ(0, std::memcmp(s.sq.data(), q.sq.data(), q.sq.size() * 16));
  EXPECT_EQ(s.doorbell, q.doorbell);
  EXPECT_EQ(s.qp_dbrec.snd, q.qp_dbrec.snd);
}

TEST(PostRecv, TerminatorOnlyWhenFewerSgesThanMax) {
  for (auto own : {0, 1}) {
    HostQp q(4, 8, 3, /*max_recv_sge=*/4, 0xcd);  // stride: 8 octowords
    Sge sgl[5] = {{0x100, 1, 11}, {0x200, 2, 12}, {0x300, 3, 13}, {0x400, 4, 14}, {0x500, 5, 15}};
    for (std::uint32_t n = 0; n <= 4; ++n) {
      const Status st = own ? post_recv<Ownership::kShared>(q.qp, sgl, n)
                            : post_recv<Ownership::kExclusive>(q.qp, sgl, n);
      ASSERT_EQ(st, Status::kOk);
      const auto* wqe = reinterpret_cast<const std::uint8_t*>(q.qp.rq) + (n << q.qp.rq_stride_shift);
      for (std::uint32_t i = 0; i < n; ++i) {  // as mlx5_post_recv's set_data_ptr_seg
        mlx5_wqe_data_seg want;
        mlx5dv_set_data_seg(&want, sgl[i].length, sgl[i].lkey, sgl[i].addr);
        EXPECT_EQ(0, std::memcmp(wqe + 16 * i, &want, 16)) << "n " << n << " seg " << i;
      }
      if (n < 4) {
        mlx5_wqe_data_seg term{};
        term.lkey = htobe32(MLX5_INVALID_LKEY);
        EXPECT_EQ(0, std::memcmp(wqe + 16 * n, &term, 16)) << "terminator, n " << n;
      }
      for (std::uint32_t b = 16 * std::min(n + 1, 4u); b < (1u << q.qp.rq_stride_shift); ++b)
        EXPECT_EQ(wqe[b], 0xcd) << "n " << n << " byte " << b << " written past the WQE";
      EXPECT_EQ(be32toh(q.qp_dbrec.rcv.raw), n + 1);
      EXPECT_EQ(q.qs->rq.published, n + 1);
    }
    // more SGEs than the QP allows: refused, nothing reserved
    const Status st = own ? post_recv<Ownership::kShared>(q.qp, sgl, 5)
                          : post_recv<Ownership::kExclusive>(q.qp, sgl, 5);
    EXPECT_EQ(st, Status::kInvalidArgument);
    EXPECT_EQ(q.qs->rq.reserved, 5u);
    EXPECT_EQ(be32toh(q.qp_dbrec.rcv.raw), 5u);
  }
}

TEST(PostSend, ValidationRejectsAndPostsNothing) {
  HostQp q(16, 4, 4);
  std::vector<std::uint8_t> big(200, 1);
  Sge inl{reinterpret_cast<std::uint64_t>(big.data()), 129, 1};  // max_inline is 128
  Sge five[5] = {{1, 1, 1}, {2, 1, 1}, {3, 1, 1}, {4, 1, 1}, {5, 1, 1}};
  Sge atom8{0x10, 8, 1}, atom4{0x10, 4, 1};
  Sge atom2[2] = {{0x10, 8, 1}, {0x18, 8, 1}};
  std::vector<SendWr> bad;
  SendWr w;
  w.opcode = WrOpcode::kSend;
  w.flags = kWrInline;
  w.sg_list = &inl;
  w.num_sge = 1;
  bad.push_back(w);  // inline longer than max_inline
  w.flags = 0;
  w.sg_list = five;
  w.num_sge = 5;
  bad.push_back(w);  // more SGEs than max_send_sge
  w.opcode = WrOpcode::kAtomicFetchAdd;
  w.sg_list = &atom4;
  w.num_sge = 1;
  bad.push_back(w);  // atomic with a 4-byte SGE
  w.sg_list = atom2;
  w.num_sge = 2;
  bad.push_back(w);  // atomic with two SGEs
  w.opcode = WrOpcode::kAtomicCmpSwp;
  w.sg_list = nullptr;
  w.num_sge = 0;
  bad.push_back(w);  // atomic without an SGE
  for (std::size_t i = 0; i < bad.size(); ++i) {
    EXPECT_EQ(post_send<Ownership::kExclusive>(q.qp, bad[i]), Status::kInvalidArgument) << i;
    EXPECT_EQ(post_send<Ownership::kShared>(q.qp, bad[i]), Status::kInvalidArgument) << i;
    SendWr batch[3] = {SendWr{}, bad[i], SendWr{}};  // a bad WR anywhere refuses the batch
    EXPECT_EQ(post_send_batch<Ownership::kShared>(q.qp, batch, 3), Status::kInvalidArgument) << i;
  }
  EXPECT_EQ(q.qs->sq.reserved, 0u);
  EXPECT_EQ(q.qs->sq.published, 0u);
  EXPECT_EQ(q.doorbell, 0u);
  EXPECT_EQ(q.qp_dbrec.snd.raw, 0u);
  // the same requests made valid are accepted
  inl.length = 128;
  w.opcode = WrOpcode::kSend;
  w.flags = kWrInline;
  w.sg_list = &inl;
  w.num_sge = 1;
  EXPECT_EQ(post_send<Ownership::kExclusive>(q.qp, w), Status::kOk);
  w.opcode = WrOpcode::kAtomicCmpSwp;
  w.flags = 0;
  w.sg_list = &atom8;
  EXPECT_EQ(post_send<Ownership::kExclusive>(q.qp, w), Status::kOk);
}

// A handle of another layout version is refused by every call that takes one, before it is read.
TEST(Handles, AnotherVersionIsRefusedEverywhere) {
  HostQp q(16, 4, 4);
  Sge sge{0x1000, 8, 1};
  SendWr w;
  w.opcode = WrOpcode::kRdmaWrite;
  w.sg_list = &sge;
  w.num_sge = 1;
  q.qp.version = kHandleVersion + 1;
  EXPECT_EQ(post_send<Ownership::kExclusive>(q.qp, w), Status::kInvalidArgument);
  EXPECT_EQ(post_send<Ownership::kShared>(q.qp, w), Status::kInvalidArgument);
  EXPECT_EQ(post_recv<Ownership::kExclusive>(q.qp, &sge, 1), Status::kInvalidArgument);
  EXPECT_EQ(q.qs->sq.reserved, 0u);
  EXPECT_EQ(q.qs->rq.reserved, 0u);
  EXPECT_EQ(q.qp_dbrec.snd.raw, 0u);
  q.qp.version = kHandleVersion;
  ASSERT_EQ(post_send<Ownership::kExclusive>(q.qp, w), Status::kOk);
  write_cqe(q, 0, CqeSpec{});  // ready: only the version stands in the way
  Completion c;
  q.cqh.version = 0;
  EXPECT_EQ(try_poll_cq<Ownership::kExclusive>(q.cqh, c), Status::kInvalidArgument);
  EXPECT_EQ(try_poll_cq<Ownership::kShared>(q.cqh, c), Status::kInvalidArgument);
  EXPECT_EQ(poll_cq<Ownership::kExclusive>(q.cqh, c), Status::kInvalidArgument);
  EXPECT_EQ(q.cs->claimed, 0u);
  q.cqh.version = kHandleVersion;
  EXPECT_EQ(try_poll_cq<Ownership::kExclusive>(q.cqh, c), Status::kOk);
}

template <Ownership O>
void full_ring_behaviour() {
  HostQp q(8, 2, 4);
  SendWr nop;
  nop.opcode = WrOpcode::kNop;
  for (int i = 0; i < 8; ++i) ASSERT_EQ(post_send<O>(q.qp, nop), Status::kOk);
  // Full: the 9th waits its budget out and reports kQueueFull, reserving nothing.
  auto t0 = Clock::now();
  EXPECT_EQ(post_send<O>(q.qp, nop, gv::Budget{20'000'000}), Status::kQueueFull);
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(20));
  EXPECT_EQ(q.qs->sq.reserved, 8u);
  // A 2-WQEBB WQE does not fit into 1 free WQEBB.
  q.qs->sq.completed = 1;
  std::vector<std::uint8_t> payload(60, 1);
  Sge inl{reinterpret_cast<std::uint64_t>(payload.data()), 60, 1};
  SendWr two;
  two.opcode = WrOpcode::kSend;
  two.flags = kWrInline;
  two.sg_list = &inl;
  two.num_sge = 1;
  ASSERT_EQ(wqe_bbs(wqe_ds(two)), 2u);
  EXPECT_EQ(post_send<O>(q.qp, two, gv::Budget{5'000'000}), Status::kQueueFull);
  EXPECT_EQ(q.qs->sq.reserved, 8u);
  // A completion arriving while the poster waits lets it through.
  std::thread completer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    store_rel(q.qs->sq.completed, std::uint64_t{2});
  });
  EXPECT_EQ(post_send<O>(q.qp, two, gv::Budget{10'000'000'000}), Status::kOk);
  completer.join();
  EXPECT_EQ(q.qs->sq.reserved, 10u);
  // The abort flag ends the wait with kAborted, long before the budget.
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    store_rel(q.abort, 1u);
  });
  t0 = Clock::now();
  EXPECT_EQ(post_send<O>(q.qp, nop, gv::Budget{10'000'000'000}), Status::kAborted);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
  aborter.join();
  EXPECT_EQ(q.qs->sq.reserved, 10u);
  store_rel(q.abort, 0u);
  // The receive queue too.
  Sge sge{0x10, 4, 1};
  ASSERT_EQ(post_recv<O>(q.qp, &sge, 1), Status::kOk);
  ASSERT_EQ(post_recv<O>(q.qp, &sge, 1), Status::kOk);
  EXPECT_EQ(post_recv<O>(q.qp, &sge, 1, gv::Budget{5'000'000}), Status::kQueueFull);
  EXPECT_EQ(q.qs->rq.reserved, 2u);
  store_rel(q.abort, 1u);
  EXPECT_EQ(post_recv<O>(q.qp, &sge, 1, gv::Budget{10'000'000'000}), Status::kAborted);
}

TEST(PostSend, FullRingExclusive) { full_ring_behaviour<Ownership::kExclusive>(); }
TEST(PostSend, FullRingShared) { full_ring_behaviour<Ownership::kShared>(); }

// ---- Polling: hand-written CQEs ---------------------------------------------------------------

TEST(PollCq, DecodesGoodAndErrorCqes) {
  for (auto own : {0, 1}) {
    HostQp q(16, 16, 3);
    q.cqh.send_qp = q.cqh.recv_qp = nullptr;  // decoding only
    auto poll = [&](Completion& c) {
      return own ? try_poll_cq<Ownership::kShared>(q.cqh, c) : try_poll_cq<Ownership::kExclusive>(q.cqh, c);
    };
    Completion c;
    EXPECT_EQ(poll(c), Status::kEmpty);  // fresh CQ: opcode INVALID everywhere
    CqeSpec req;
    req.opcode = MLX5_CQE_REQ;
    req.qpn = 0x00abcd;
    req.wqe_counter = 0xfffe;
    req.wqe_opcode = MLX5_OPCODE_RDMA_READ;
    req.byte_cnt = 4096;
    write_cqe(q, 0, req);
    CqeSpec resp;
    resp.opcode = MLX5_CQE_RESP_SEND_IMM;
    resp.qpn = 0x00abcd;
    resp.wqe_counter = 17;
    resp.byte_cnt = 33;
    resp.imm_wire = htobe32(0xcafef00du);
    write_cqe(q, 1, resp);
    CqeSpec err;
    err.opcode = MLX5_CQE_REQ_ERR;
    err.qpn = 0x00abcd;
    err.wqe_counter = 5;
    err.wqe_opcode = MLX5_OPCODE_RDMA_WRITE;
    err.syndrome = MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR;
    err.vendor_syndrome = 0x88;
    write_cqe(q, 2, err);

    ASSERT_EQ(poll(c), Status::kOk);
    EXPECT_TRUE(c.ok());
    EXPECT_TRUE(c.is_send());
    EXPECT_EQ(c.cqe_opcode, MLX5_CQE_REQ);
    EXPECT_EQ(c.wqe_opcode, MLX5_OPCODE_RDMA_READ);
    EXPECT_EQ(c.qpn, 0x00abcdu);
    EXPECT_EQ(c.wqe_counter, 0xfffe);
    EXPECT_EQ(c.byte_len, 4096u);
    EXPECT_EQ(c.syndrome, 0);
    EXPECT_EQ(be32toh(q.cq_dbrec.set_ci.raw), 1u);

    ASSERT_EQ(poll(c), Status::kOk);
    EXPECT_FALSE(c.is_send());
    EXPECT_EQ(c.cqe_opcode, MLX5_CQE_RESP_SEND_IMM);
    EXPECT_EQ(c.imm, 0xcafef00du);  // host order
    EXPECT_EQ(c.byte_len, 33u);
    EXPECT_EQ(c.wqe_counter, 17);

    ASSERT_EQ(poll(c), Status::kCompletionError);
    EXPECT_FALSE(c.ok());
    EXPECT_TRUE(c.is_send());
    EXPECT_EQ(c.status, Status::kCompletionError);
    EXPECT_EQ(c.syndrome, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
    EXPECT_EQ(c.vendor_syndrome, 0x88);
    EXPECT_EQ(c.wqe_opcode, MLX5_OPCODE_RDMA_WRITE);
    EXPECT_EQ(c.qpn, 0x00abcdu);
    EXPECT_EQ(c.wqe_counter, 5);
    EXPECT_EQ(be32toh(q.cq_dbrec.set_ci.raw), 3u);
    EXPECT_EQ(poll(c), Status::kEmpty);
  }
}

TEST(PollCq, OwnerBitAcrossLapsAndCiWrap) {
  const std::uint64_t seed = test_seed() + 1;
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  HostQp q(16, 16, 2);  // 4 CQEs
  q.cqh.send_qp = q.cqh.recv_qp = nullptr;
  // start just below the 24-bit wrap of the consumer index
  const std::uint64_t c0 = (std::uint64_t{1} << 24) - 10;
  q.cs->claimed = q.cs->released = c0;
  for (std::uint64_t p = c0; p < c0 + 40; ++p) {
    Completion c;
    // The slot still holds the CQE of the previous lap: owner bit differs, not ready.
    CqeSpec stale;
    stale.qpn = 1;
    stale.wqe_counter = static_cast<std::uint16_t>(p - 4);
    write_cqe(q, p - 4, stale);
    ASSERT_EQ(try_poll_cq<Ownership::kExclusive>(q.cqh, c), Status::kEmpty) << p;
    // Right slot, wrong owner bit (a CQE two laps old looks the same): not ready.
    write_cqe(q, p, stale, /*owner_flip=*/true);
    ASSERT_EQ(try_poll_cq<Ownership::kExclusive>(q.cqh, c), Status::kEmpty) << p;
    CqeSpec good;
    good.qpn = static_cast<std::uint32_t>(rng()) & m::kQpnMask;
    good.wqe_counter = static_cast<std::uint16_t>(p);
    write_cqe(q, p, good);
    ASSERT_EQ(try_poll_cq<Ownership::kExclusive>(q.cqh, c), Status::kOk) << p;
    EXPECT_EQ(c.qpn, good.qpn);
    EXPECT_EQ(c.wqe_counter, static_cast<std::uint16_t>(p));
    EXPECT_EQ(be32toh(q.cq_dbrec.set_ci.raw), (p + 1) & m::kCqCiMask) << p;
    EXPECT_EQ(q.cs->claimed, p + 1);
  }
}

TEST(PollCq, OverrunReportedOnlyWhenNoCqeIsReady) {
  for (auto own : {0, 1}) {
    HostQp q(16, 16, 2);
    q.cqh.send_qp = q.cqh.recv_qp = nullptr;
    auto poll = [&](Completion& c) {
      return own ? try_poll_cq<Ownership::kShared>(q.cqh, c) : try_poll_cq<Ownership::kExclusive>(q.cqh, c);
    };
    Completion c;
    store_rel(q.cq_error, 1u);
    EXPECT_EQ(poll(c), Status::kCqOverrun);
    CqeSpec good;
    good.qpn = 9;
    write_cqe(q, 0, good);
    EXPECT_EQ(poll(c), Status::kOk);  // what is there is still delivered
    EXPECT_EQ(poll(c), Status::kCqOverrun);
    store_rel(q.cq_error, 0u);
    EXPECT_EQ(poll(c), Status::kEmpty);
    q.cqh.error = nullptr;  // a CQ without an error word
    EXPECT_EQ(poll(c), Status::kEmpty);
  }
}

TEST(PollCq, BoundedPollTimesOutAndAborts) {
  HostQp q(16, 16, 2);
  Completion c;
  auto t0 = Clock::now();
  EXPECT_EQ(poll_cq<Ownership::kExclusive>(q.cqh, c, gv::Budget{10'000'000}), Status::kTimeout);
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(10));
  store_rel(q.abort, 1u);
  EXPECT_EQ(poll_cq<Ownership::kShared>(q.cqh, c, gv::Budget{10'000'000'000}), Status::kAborted);
}

/// Two kShared pollers, made deterministic: poller A has claimed CQE ci and not yet copied it;
/// poller B (the API under test) takes ci+1. B must not hand ci+1 back (dbrec consumer index)
/// before A has handed back ci: the HCA would overwrite A's unread CQE.
TEST(PollCq, SharedPollerNeverReleasesPastAnUnreadCqe) {
  HostQp q(16, 16, 2);
  q.cqh.send_qp = q.cqh.recv_qp = nullptr;
  const std::uint64_t ci = 6;
  q.cs->claimed = ci + 1;  // A's claim
  q.cs->released = ci;
  q.cq_dbrec.set_ci.raw = htobe32(static_cast<std::uint32_t>(ci));
  CqeSpec a, b;
  a.qpn = 1;
  b.qpn = 2;
  write_cqe(q, ci, a);
  write_cqe(q, ci + 1, b);
  std::atomic<std::uint32_t> seen_ci{0xffffffffu};
  std::thread poller_a([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    seen_ci = be32toh(load_acq(q.cq_dbrec.set_ci.raw));
    // A is done with ci and hands it back as try_poll_cq does: consumer index, then turn
    store_rel(q.cq_dbrec.set_ci.raw, htobe32(static_cast<std::uint32_t>(ci + 1)));
    store_rel(q.cs->released, ci + 1);
  });
  Completion c;
  EXPECT_EQ(try_poll_cq<Ownership::kShared>(q.cqh, c), Status::kOk);
  poller_a.join();
  EXPECT_EQ(c.qpn, 2u);
  EXPECT_EQ(seen_ci.load(), ci) << "B handed its CQE back while A's was still unread";
  EXPECT_EQ(be32toh(q.cq_dbrec.set_ci.raw), ci + 2);
  EXPECT_EQ(q.cs->released, ci + 2);
}

// ---- Retirement ---------------------------------------------------------------------------------

/// One poll mode per CQ (a CQ is polled either by one exclusive owner or by shared pollers).
template <Ownership O>
void retire_case() {
  HostQp q(32, 16, 4);
  const std::uint64_t base = 65536 - 3;  // WQE indices wrap through 0xffff
  gv::ib::wq_start_at(&q.qs->sq, base);
  std::vector<std::uint8_t> payload(120, 7);
  Sge big{reinterpret_cast<std::uint64_t>(payload.data()), 120, 1};  // 1+8 octowords: 3 BBs
  Sge mid{reinterpret_cast<std::uint64_t>(payload.data()), 60, 1};   // 2 BBs as SEND
  SendWr a, b, cc, d;
  a.opcode = WrOpcode::kNop;  // 1 BB, unsignaled
  b.opcode = WrOpcode::kRdmaWrite;
  b.flags = kWrInline | kWrSignaled;
  b.sg_list = &big;
  b.num_sge = 1;
  cc.opcode = WrOpcode::kSend;
  cc.flags = kWrInline;  // unsignaled, 2 BBs
  cc.sg_list = &mid;
  cc.num_sge = 1;
  d.opcode = WrOpcode::kNop;
  d.flags = kWrSignaled;
  ASSERT_EQ(wqe_bbs(wqe_ds(b)), 3u);
  ASSERT_EQ(wqe_bbs(wqe_ds(cc)), 2u);
  for (const SendWr* w : {&a, &b, &cc, &d}) ASSERT_EQ(post_send<Ownership::kExclusive>(q.qp, *w), Status::kOk);
  // a@base(1) b@base+1(3) c@base+4(2) d@base+6(1)
  EXPECT_EQ(q.qs->sq.reserved, base + 7);
  Completion c;
  CqeSpec s;
  s.qpn = q.qp.qpn;
  s.wqe_opcode = MLX5_OPCODE_RDMA_WRITE;
  s.wqe_counter = static_cast<std::uint16_t>(base + 1);
  write_cqe(q, 0, s);
  ASSERT_EQ(try_poll_cq<O>(q.cqh, c), Status::kOk);
  EXPECT_EQ(q.qs->sq.completed, base + 4) << "the signaled 3-BB inline WQE and the NOP before it";
  s.wqe_opcode = MLX5_OPCODE_NOP;
  s.wqe_counter = static_cast<std::uint16_t>(base + 6);
  write_cqe(q, 1, s);
  ASSERT_EQ(try_poll_cq<O>(q.cqh, c), Status::kOk);
  EXPECT_EQ(q.qs->sq.completed, base + 7) << "the unsignaled run up to the signaled NOP";
  // An error CQE retires its WQE as well (the QP is flushed afterwards).
  ASSERT_EQ(post_send<Ownership::kExclusive>(q.qp, b), Status::kOk);
  CqeSpec e;
  e.opcode = MLX5_CQE_REQ_ERR;
  e.qpn = q.qp.qpn;
  e.wqe_counter = static_cast<std::uint16_t>(base + 7);
  e.syndrome = MLX5_CQE_SYNDROME_LOCAL_PROT_ERR;
  write_cqe(q, 2, e);
  ASSERT_EQ(try_poll_cq<O>(q.cqh, c), Status::kCompletionError);
  EXPECT_EQ(q.qs->sq.completed, base + 10);
  // A CQE of another QP retires nothing here; a receive CQE retires the RQ.
  ASSERT_EQ(post_send<Ownership::kExclusive>(q.qp, d), Status::kOk);
  s.qpn = q.qp.qpn + 1;
  s.wqe_counter = static_cast<std::uint16_t>(base + 10);
  write_cqe(q, 3, s);
  ASSERT_EQ(try_poll_cq<O>(q.cqh, c), Status::kOk);
  EXPECT_EQ(q.qs->sq.completed, base + 10);
  Sge r{0x10, 4, 1};
  for (int i = 0; i < 3; ++i) ASSERT_EQ(post_recv<Ownership::kExclusive>(q.qp, &r, 1), Status::kOk);
  CqeSpec rc;
  rc.opcode = MLX5_CQE_RESP_SEND;
  rc.qpn = q.qp.qpn;
  rc.wqe_counter = 1;
  write_cqe(q, 4, rc);
  ASSERT_EQ(try_poll_cq<O>(q.cqh, c), Status::kOk);
  EXPECT_EQ(q.qs->rq.completed, 2u);
  EXPECT_EQ(q.qs->sq.completed, base + 10);
}

TEST(Retire, FreesExactlyTheCompletedWqebbsExclusivePoller) { retire_case<Ownership::kExclusive>(); }
TEST(Retire, FreesExactlyTheCompletedWqebbsSharedPollers) { retire_case<Ownership::kShared>(); }

// ---- Concurrency --------------------------------------------------------------------------------

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// The request poster `tid` makes as its `seq`-th post: a pure function, so the HCA can
/// rebuild it from the identity the WQE carries (remote address, or immediate for SEND).
struct StressWr {
  SendWr wr;
  Sge sge[2];
  void make(std::uint64_t seed, std::uint32_t tid, std::uint32_t seq, const std::uint8_t* pool) {
    const std::uint64_t h = splitmix(seed ^ (std::uint64_t{tid} << 40) ^ seq);
    static constexpr WrOpcode ops[4] = {WrOpcode::kRdmaWrite, WrOpcode::kRdmaWriteImm,
                                        WrOpcode::kSendImm, WrOpcode::kRdmaRead};
    wr = SendWr{};
    wr.opcode = ops[h & 3];
    wr.flags = ((h >> 2) & 1) ? std::uint32_t{kWrSignaled} : 0u;
    wr.remote_addr = (std::uint64_t{tid} << 32) | seq;
    wr.rkey = static_cast<std::uint32_t>(h >> 32);
    wr.imm = (tid << 24) | seq;
    const bool inl = carries_payload(wr.opcode) && ((h >> 3) % 3 == 0);
    if (inl) wr.flags |= kWrInline;
    wr.num_sge = 1 + ((h >> 5) & 1);
    for (std::uint32_t i = 0; i < wr.num_sge; ++i) {
      const std::uint32_t len = inl ? static_cast<std::uint32_t>((h >> (8 + 6 * i)) % 60) + 1
                                    : static_cast<std::uint32_t>(h >> (8 + 6 * i)) | 1;
      sge[i] = Sge{inl ? reinterpret_cast<std::uint64_t>(pool + ((h >> 20) % 64)) : h + i, len, tid};
    }
    wr.sg_list = sge;
  }
};

struct StressResult {
  std::vector<std::uint32_t> next_seq;
  std::uint64_t wqes = 0, cqes = 0;
};

/// `posters` threads post `per_thread` WQEs each with Ownership P; one HCA thread executes and
/// checks them; `pollers` threads poll with Ownership C and retire.
template <Ownership P, Ownership C>
void stress(unsigned posters, std::uint32_t per_thread, unsigned pollers, std::uint64_t seed) {
  SCOPED_TRACE(seed_note(seed));
  HostQp q(128, 4, 4);  // 16 CQEs: the CQ wraps constantly and back-pressures the HCA
  std::vector<std::uint8_t> pool(128);
  for (std::size_t i = 0; i < pool.size(); ++i) pool[i] = static_cast<std::uint8_t>(splitmix(seed + i));
  const std::uint32_t cq_size = 1u << q.log_cqes;

  std::atomic<bool> posters_done{false}, stop{false}, failed{false};
  std::atomic<std::uint64_t> cqes_produced{0};
  std::vector<std::string> errors;
  std::mutex err_mu;
  auto fail = [&](const std::string& what) {
    std::lock_guard<std::mutex> g(err_mu);
    if (errors.size() < 10) errors.push_back(what);
    failed = true;
    stop = true;
    store_rel(q.abort, 1u);
  };

  // ---- the HCA
  std::vector<std::uint64_t> cqe_start;  // CQE number -> WQE start (HCA's record)
  std::uint64_t final_pos = 0;
  std::vector<std::uint32_t> next_seq(posters, 0);
  std::thread hca([&] {
    std::uint64_t pos = 0, prod = 0, released = 0;
    std::deque<std::uint64_t> pending;  // signaled WQE starts awaiting a CQE
    std::unordered_map<std::uint64_t, std::uint64_t> ctrl8;  // WQE start -> first 8 ctrl bytes
    StressWr want;
    while (!stop.load()) {
      const std::uint64_t db = load_acq(q.doorbell);
      const std::uint64_t pub = widen(pos, be32toh(load_acq(q.qp_dbrec.snd.raw)), m::kWqeIndexBits);
      // never over-committed: reserved - completed <= ring size
      const std::uint64_t res = std::atomic_ref<std::uint64_t>(q.qs->sq.reserved).load(std::memory_order_relaxed);
      const std::uint64_t done = load_acq(q.qs->sq.completed);
      if (static_cast<std::int64_t>(res - done) > static_cast<std::int64_t>(q.sq_bbs))
        return fail("SQ over-committed: reserved " + std::to_string(res) + " completed " + std::to_string(done));
      bool progress = false;
      while (pos < pub) {
        progress = true;
        mlx5_wqe_ctrl_seg ctrl;
        std::memcpy(&ctrl, q.sq_bytes(pos), 16);
        const std::uint32_t oio = be32toh(ctrl.opmod_idx_opcode);
        const std::uint32_t ds = m::ctrl_ds(be32toh(ctrl.qpn_ds));
        if (m::ctrl_wqe_index(oio) != (pos & m::kWqeIndexMask) || m::ctrl_qpn(be32toh(ctrl.qpn_ds)) != q.qp.qpn || ds == 0)
          return fail("malformed ctrl at WQEBB " + std::to_string(pos));
        const std::uint8_t op = m::ctrl_opcode(oio);
        if (op == MLX5_OPCODE_NOP) {  // the closing NOP
          final_pos = pos;
        } else {
          std::uint32_t tid, seq;
          if (op == MLX5_OPCODE_SEND_IMM) {
            tid = be32toh(ctrl.imm) >> 24;
            seq = be32toh(ctrl.imm) & 0xffffff;
          } else {
            mlx5_wqe_raddr_seg rs;
            std::memcpy(&rs, q.sq_bytes(pos, 1), 16);
            tid = static_cast<std::uint32_t>(be64toh(rs.raddr) >> 32);
            seq = static_cast<std::uint32_t>(be64toh(rs.raddr));
          }
          if (tid >= posters || seq != next_seq[tid])
            return fail("WQE at " + std::to_string(pos) + " is poster " + std::to_string(tid) +
                        " #" + std::to_string(seq) + ", out of order, lost or duplicated");
          ++next_seq[tid];
          want.make(seed, tid, seq, pool.data());
          if (wqe_ds(want.wr) != ds) return fail("ds mismatch at " + std::to_string(pos));
          for (std::uint32_t k = 0; k < ds; ++k) {
            const Octoword o = wqe_octoword(want.wr, k, static_cast<std::uint16_t>(pos), q.qp.qpn);
            if (std::memcmp(&o, q.sq_bytes(pos, k), 16) != 0)
              return fail("torn or overwritten WQE at " + std::to_string(pos) + " octoword " + std::to_string(k));
          }
        }
        ctrl8[pos] = first8(&ctrl);
        if (ctrl.fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE) pending.push_back(pos);
        pos += wqe_bbs(ds);
      }
      if (db != 0) {  // the doorbell names a published WQE's ctrl
        const std::uint64_t s = widen_below(pub - 1, m::ctrl_wqe_index(be32toh(static_cast<std::uint32_t>(db))), m::kWqeIndexBits);
        auto it = ctrl8.find(s);
        if (it == ctrl8.end() || it->second != db)
          return fail("doorbell does not match the ctrl segment of WQE " + std::to_string(s));
      }
      // CQ: consumer index (never ahead of what was produced), poison what was released
      const std::uint64_t ci = widen_below(prod, be32toh(load_acq(q.cq_dbrec.set_ci.raw)) & m::kCqCiMask, m::kCqCiBits);
      // CQEs are handed back in order: the consumer index never moves backwards
      if (ci < released) return fail("CQ consumer index went backwards: " + std::to_string(ci) +
                                     " after " + std::to_string(released));
      for (; released < ci; ++released) poison_cqe(q, released);
      while (!pending.empty() && prod - ci < cq_size) {
        CqeSpec s;
        s.opcode = MLX5_CQE_REQ;
        s.qpn = q.qp.qpn;
        s.wqe_counter = static_cast<std::uint16_t>(pending.front());
        s.byte_cnt = static_cast<std::uint32_t>(prod);
        s.timestamp = pending.front();
        cqe_start.push_back(pending.front());
        write_cqe(q, prod++, s);
        cqes_produced.store(prod);
        pending.pop_front();
        progress = true;
      }
      if (!progress) std::this_thread::yield();
    }
  });

  // ---- pollers
  std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> seen(pollers);
  std::vector<std::thread> poll_threads;
  for (unsigned t = 0; t < pollers; ++t) {
    poll_threads.emplace_back([&, t] {
      Completion c;
      while (!stop.load()) {
        const Status st = try_poll_cq<C>(q.cqh, c);
        if (st == Status::kEmpty) {
          std::this_thread::yield();
          continue;
        }
        if (st != Status::kOk) return fail(std::string("poll: ") + gv::to_string(st));
        seen[t].emplace_back(c.byte_len, c.wqe_counter);
      }
    });
  }

  // ---- posters
  std::vector<std::thread> post_threads;
  for (unsigned t = 0; t < posters; ++t) {
    post_threads.emplace_back([&, t] {
      StressWr w;
      for (std::uint32_t i = 0; i < per_thread && !failed.load(); ++i) {
        w.make(seed, t, i, pool.data());
        const Status st = post_send<P>(q.qp, w.wr, gv::Budget{20'000'000'000});
        if (st != Status::kOk) return fail(std::string("post: ") + gv::to_string(st));
      }
    });
  }
  for (auto& t : post_threads) t.join();
  if (!failed) {  // close with a signaled NOP so that every WQEBB gets retired
    SendWr nop;
    nop.opcode = WrOpcode::kNop;
    nop.flags = kWrSignaled;
    if (post_send<P>(q.qp, nop, gv::Budget{20'000'000'000}) != Status::kOk) fail("closing NOP");
  }
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!failed && load_acq(q.qs->sq.completed) != load_acq(q.qs->sq.reserved)) {
    if (Clock::now() > deadline) fail("completions never caught up");
    std::this_thread::yield();
  }
  stop = true;
  hca.join();
  for (auto& t : poll_threads) t.join();
  for (const auto& e : errors) ADD_FAILURE() << e;
  ASSERT_FALSE(failed);

  for (unsigned t = 0; t < posters; ++t) EXPECT_EQ(next_seq[t], per_thread) << "poster " << t;
  // every CQE taken exactly once, with the payload the HCA wrote (not a released slot)
  std::vector<int> taken(cqe_start.size(), 0);
  for (const auto& v : seen)
    for (const auto& [p, ctr] : v) {
      ASSERT_LT(p, cqe_start.size()) << "a poller read a released (poisoned) CQE";
      ++taken[p];
      EXPECT_EQ(ctr, static_cast<std::uint16_t>(cqe_start[p])) << "CQE " << p;
    }
  for (std::size_t p = 0; p < taken.size(); ++p) ASSERT_EQ(taken[p], 1) << "CQE " << p;
  if constexpr (C == Ownership::kShared) {
    EXPECT_EQ(q.cs->released, cqe_start.size());
  }
  EXPECT_EQ(q.cs->claimed, cqe_start.size());
  EXPECT_EQ(be32toh(q.cq_dbrec.set_ci.raw), cqe_start.size() & m::kCqCiMask);
  EXPECT_EQ(q.qs->sq.published, q.qs->sq.reserved);
  EXPECT_EQ(be32toh(q.qp_dbrec.snd.raw), q.qs->sq.reserved & m::kWqeIndexMask);
  EXPECT_EQ(q.doorbell, first8(q.sq_bytes(final_pos))) << "doorbell is not the last WQE's ctrl";
  EXPECT_GT(q.qs->sq.reserved, 65536u) << "the 16-bit WQE index should have wrapped";
}

TEST(Concurrency, SharedPostersSharedPollers) {
  stress<Ownership::kShared, Ownership::kShared>(8, 20000, 3, test_seed() + 10);
}

TEST(Concurrency, ExclusivePosterExclusivePoller) {
  stress<Ownership::kExclusive, Ownership::kExclusive>(1, 60000, 1, test_seed() + 11);
}

}  // namespace

// ---- QpOwner: the same WQEs, completions and counters as the plain exclusive path -------------

namespace owner_tests {

/// The send WQEs of a mixed run: inline and gathered WRITEs, READs, SENDs with immediates,
/// NOPs and atomics, one in `signal_every` signaled. The SGEs point into `data`.
std::vector<SendWr> mixed_wrs(std::uint64_t seed, std::size_t n, std::uint32_t signal_every, std::vector<Sge>& sges,
                              std::vector<std::uint8_t>& data) {
  std::mt19937_64 rng(seed);
  data.resize(4096);
  for (auto& b : data) b = static_cast<std::uint8_t>(rng());
  sges.resize(2 * n);
  std::vector<SendWr> wrs(n);
  const WrOpcode ops[] = {WrOpcode::kRdmaWrite, WrOpcode::kRdmaWriteImm, WrOpcode::kRdmaRead, WrOpcode::kSend,
                          WrOpcode::kNop, WrOpcode::kAtomicFetchAdd};
  for (std::size_t i = 0; i < n; ++i) {
    SendWr& w = wrs[i];
    w.opcode = ops[rng() % std::size(ops)];
    const bool atomic = w.opcode == WrOpcode::kAtomicFetchAdd;
    const std::uint32_t len = atomic ? 8 : 1 + static_cast<std::uint32_t>(rng() % 100);
    sges[2 * i] = Sge{reinterpret_cast<std::uint64_t>(data.data()) + rng() % 1000, len, 0x11};
    sges[2 * i + 1] = Sge{reinterpret_cast<std::uint64_t>(data.data()) + rng() % 1000, 1 + static_cast<std::uint32_t>(rng() % 50), 0x11};
    w.sg_list = &sges[2 * i];
    w.num_sge = atomic || rng() % 2 ? 1 : 2;
    w.flags = (i % signal_every == signal_every - 1 ? kWrSignaled : 0u) |
              (!atomic && w.opcode != WrOpcode::kRdmaRead && rng() % 2 ? kWrInline : 0u);
    w.imm = static_cast<std::uint32_t>(rng());
    w.remote_addr = rng();
    w.rkey = static_cast<std::uint32_t>(rng());
    w.compare_add = rng();
  }
  return wrs;
}

/// The HCA's side: for every signaled WQE in [from, to) of q's SQ, the CQE it would write, at
/// the next producer index.
void complete_sq(HostQp& q, std::uint64_t from, std::uint64_t to, std::uint64_t& prod) {
  for (std::uint64_t pos = from; pos < to;) {
    Octoword ctrl;
    std::memcpy(&ctrl, q.sq_bytes(pos), 16);
    const CtrlFields f = decode_ctrl(ctrl);
    if (f.fm_ce_se & m::kCtrlCqUpdate) {
      const bool len = f.opcode == m::kOpRdmaRead || f.opcode == m::kOpAtomicFa;
      gv::ib::store_cqe(&q.cq[prod & q.cq_mask()],
                        gv::ib::make_req_cqe(f.qpn, f.opcode, f.wqe_index, len ? 77 : 0),
                        owner_bit(prod, q.log_cqes), gv::sync::Scope::kSystem);
      ++prod;
    }
    pos += wqe_bbs(f.ds);
  }
}

// Every WQE signaled (the owner's poll takes most CQEs without reading their body) and one in
// four (it reads them, as poll_cq does).
class QpOwnerTwin : public ::testing::TestWithParam<std::uint32_t> {};
INSTANTIATE_TEST_SUITE_P(SignalEvery, QpOwnerTwin, ::testing::Values(1u, 4u));

TEST_P(QpOwnerTwin, PostsTheSameWqesAndPollsTheSameCompletionsAsTheExclusivePath) {
  const std::uint64_t seed = test_seed() + 11;
  SCOPED_TRACE(seed_note(seed));
  std::vector<Sge> sges;
  std::vector<std::uint8_t> data;
  const auto wrs = mixed_wrs(seed, 600, GetParam(), sges, data);  // several laps of a 64-WQEBB ring
  HostQp plain(64, 16, 6), owned(64, 16, 6);
  QpOwner own;
  ASSERT_EQ(own.take(owned.qp, owned.cqh), Status::kOk);
  std::uint64_t prod_plain = 0, prod_owned = 0;
  for (std::size_t i = 0; i < wrs.size();) {
    // Post until either ring is full; then the HCA completes what was posted and both poll.
    const std::uint64_t from = plain.qs->sq.reserved;  // the owner's WQEs lie at the same positions
    std::size_t posted = 0;
    for (; i < wrs.size(); ++i, ++posted) {
      const Status so = own.post_send(wrs[i]);
      if (so == Status::kQueueFull) break;
      const Status sp = post_send<Ownership::kExclusive>(plain.qp, wrs[i], gv::Budget{0});
      ASSERT_EQ(so, sp) << i;  // both refuse a request the QP cannot carry (inline too long)
      ASSERT_TRUE(sp == Status::kOk || sp == Status::kInvalidArgument) << i << ": " << gv::to_string(sp);
    }
    ASSERT_GT(posted, 0u) << "a full ring after polling everything";
    ASSERT_EQ(plain.qp_dbrec.snd.raw, owned.qp_dbrec.snd.raw);
    ASSERT_EQ(plain.doorbell, owned.doorbell);
    ASSERT_EQ(0, std::memcmp(plain.sq.data(), owned.sq.data(), plain.sq.size() * 16)) << "after WR " << i;
    // The owner keeps the shared counters as they were at take(): the HCA reads the record.
    EXPECT_EQ(owned.qs->sq.reserved, 0u);
    complete_sq(plain, from, plain.qs->sq.reserved, prod_plain);
    complete_sq(owned, from, plain.qs->sq.reserved, prod_owned);
    for (;;) {
      Completion a, b;
      const Status sa = try_poll_cq<Ownership::kExclusive>(plain.cqh, a);
      const Status sb = own.try_poll(b);
      ASSERT_EQ(sa, sb);
      if (sa == Status::kEmpty) break;
      EXPECT_EQ(a.status, b.status);
      EXPECT_EQ(a.cqe_opcode, b.cqe_opcode);
      EXPECT_EQ(a.wqe_opcode, b.wqe_opcode);
      EXPECT_EQ(a.qpn, b.qpn);
      EXPECT_EQ(a.wqe_counter, b.wqe_counter);
      EXPECT_EQ(a.byte_len, b.byte_len);
      EXPECT_EQ(plain.cq_dbrec.set_ci.raw, owned.cq_dbrec.set_ci.raw);
    }
    EXPECT_EQ(own.outstanding(), plain.qs->sq.reserved - plain.qs->sq.completed);
  }
  own.give_back();
  EXPECT_EQ(owned.qs->sq.reserved, plain.qs->sq.reserved);
  EXPECT_EQ(owned.qs->sq.published, plain.qs->sq.published);
  EXPECT_EQ(owned.qs->sq.completed, plain.qs->sq.completed);
  EXPECT_EQ(owned.qs->sq.owner_next, plain.qs->sq.owner_next);
  EXPECT_EQ(owned.cs->claimed, plain.cs->claimed);
  // After give_back() the plain exclusive path carries on from where the owner left.
  ASSERT_EQ(post_send<Ownership::kExclusive>(owned.qp, wrs[0], gv::Budget{0}), Status::kOk);
  ASSERT_EQ(post_send<Ownership::kExclusive>(plain.qp, wrs[0], gv::Budget{0}), Status::kOk);
  EXPECT_EQ(plain.qp_dbrec.snd.raw, owned.qp_dbrec.snd.raw);
  EXPECT_EQ(0, std::memcmp(plain.sq.data(), owned.sq.data(), plain.sq.size() * 16));
}

TEST(QpOwner, ErrorsAndReceiveCompletionsTakeTheFullPath) {
  HostQp q(16, 8, 4);
  QpOwner own;
  ASSERT_EQ(own.take(q.qp, q.cqh), Status::kOk);
  Sge sge{0x1000, 8, 1};
  SendWr w;
  w.opcode = WrOpcode::kRdmaWrite;
  w.flags = kWrSignaled;
  w.sg_list = &sge;
  w.num_sge = 1;
  ASSERT_EQ(own.post_send(w), Status::kOk);
  ASSERT_EQ(own.post_recv(&sge, 1), Status::kOk);
  EXPECT_EQ(be32toh(q.qp_dbrec.rcv.raw), 1u);
  // A receive completion, then the WRITE failing.
  gv::ib::store_cqe(&q.cq[0], gv::ib::make_resp_cqe(m::kCqeRespSendImm, q.qp.qpn, 0, 5, gv::be32::from(0xabcdu), false),
                    0, gv::sync::Scope::kSystem);
  gv::ib::store_cqe(&q.cq[1], gv::ib::make_err_cqe(true, q.qp.qpn, m::kOpRdmaWrite, 0, m::kSyndRemoteAccessErr), 0,
                    gv::sync::Scope::kSystem);
  Completion c;
  ASSERT_EQ(own.try_poll(c), Status::kOk);
  EXPECT_FALSE(c.is_send());
  EXPECT_EQ(c.imm, 0xabcdu);
  EXPECT_EQ(c.byte_len, 5u);
  ASSERT_EQ(own.poll(c), Status::kCompletionError);
  EXPECT_EQ(c.syndrome, m::kSyndRemoteAccessErr);
  EXPECT_EQ(c.wqe_opcode, m::kOpRdmaWrite);
  EXPECT_EQ(own.outstanding(), 0u);
  EXPECT_EQ(own.try_poll(c), Status::kEmpty);
  own.give_back();
  EXPECT_EQ(q.qs->rq.completed, 1u);
  EXPECT_EQ(q.qs->sq.completed, 1u);
  EXPECT_EQ(q.cs->claimed, 2u);
  EXPECT_EQ(be32toh(q.cq_dbrec.set_ci.raw), 2u);
}

TEST(QpOwner, AFullRingIsQueueFullAtOnceUntilPolled) {
  HostQp q(8, 2, 4);  // 8 WQEBBs, 2 receives
  QpOwner own;
  ASSERT_EQ(own.take(q.qp, q.cqh), Status::kOk);
  Sge sge{0x1000, 8, 1};
  SendWr w;
  w.opcode = WrOpcode::kNop;
  w.flags = kWrSignaled;
  for (int i = 0; i < 8; ++i) ASSERT_EQ(own.post_send(w), Status::kOk) << i;
  EXPECT_EQ(own.post_send(w), Status::kQueueFull);
  EXPECT_EQ(own.post_recv(&sge, 1), Status::kOk);
  EXPECT_EQ(own.post_recv(&sge, 1), Status::kOk);
  EXPECT_EQ(own.post_recv(&sge, 1), Status::kQueueFull);
  gv::ib::store_cqe(&q.cq[0], gv::ib::make_req_cqe(q.qp.qpn, m::kOpNop, 0, 0), 0, gv::sync::Scope::kSystem);
  Completion c;
  ASSERT_EQ(own.poll(c, gv::Budget{0}), Status::kOk);
  EXPECT_EQ(own.post_send(w), Status::kOk);  // the NOP's WQEBB is free again
  EXPECT_EQ(own.post_send(w), Status::kQueueFull);
}

// The owner's CQ completes only the send queue; another CQ, polled by shared pollers, completes
// the receive queue. Those pollers place a receive CQE by the queue's reserved count, so the
// owner keeps that count in memory as it posts receives.
TEST(QpOwner, ReceivesCompletedOnAnotherCqReachTheirPollers) {
  HostQp q(16, 4, 4), r(16, 4, 4);
  q.cqh.recv_qp = nullptr;  // q's CQ: the send queue only
  gv::ib::CqHandle rcq = r.cqh;  // r's ring: q's receive queue only
  rcq.send_qp = nullptr;
  rcq.send_sq = nullptr;
  rcq.recv_qp = q.qs.get();
  rcq.recv_qpn = q.qp.qpn;
  QpOwner own;
  ASSERT_EQ(own.take(q.qp, q.cqh), Status::kOk);
  Sge sge{0x1000, 8, 1};
  for (std::uint64_t lap = 0; lap < 3; ++lap) {
    for (int i = 0; i < 4; ++i) ASSERT_EQ(own.post_recv(&sge, 1), Status::kOk) << lap << " " << i;
    ASSERT_EQ(own.post_recv(&sge, 1), Status::kQueueFull);
    for (std::uint64_t i = 0; i < 4; ++i) {
      const std::uint64_t n = 4 * lap + i;
      gv::ib::store_cqe(&r.cq[n & r.cq_mask()],
                        gv::ib::make_resp_cqe(m::kCqeRespSend, q.qp.qpn, static_cast<std::uint16_t>(n), 8, {}, false),
                        owner_bit(n, r.log_cqes), gv::sync::Scope::kSystem);
      Completion c;
      ASSERT_EQ(poll_cq<Ownership::kShared>(rcq, c, gv::Budget{0}), Status::kOk);
      EXPECT_EQ(q.qs->rq.completed, n + 1);
    }
  }
}

TEST(QpOwner, TakeRefusesAForeignCqAndHandlesOfAnotherVersion) {
  HostQp a(16, 4, 4), b(16, 4, 4);
  QpOwner own;
  EXPECT_EQ(own.take(a.qp, b.cqh), Status::kInvalidArgument);  // b's CQ completes b's queues
  a.qp.version = 0;
  EXPECT_EQ(own.take(a.qp, a.cqh), Status::kInvalidArgument);
  a.qp.version = kHandleVersion;
  a.cqh.version = 7;
  EXPECT_EQ(own.take(a.qp, a.cqh), Status::kInvalidArgument);
  a.cqh.version = kHandleVersion;
  EXPECT_EQ(own.take(a.qp, a.cqh), Status::kOk);
}

}  // namespace owner_tests
