// Polling on host threads against hand-written CQEs (post_poll_fixture.hpp): decoding, the owner
// bit across laps, overrun, bounded polls, shared pollers; and retirement: what a poll frees.
#include <random>

#include "post_poll_fixture.hpp"

namespace gvt::post_poll {
namespace {

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

}  // namespace
}  // namespace gvt::post_poll
