// QpOwner on host threads against hand-built rings (post_poll_fixture.hpp): the same WQEs,
// completions and counters as the plain exclusive path.
#include <random>

#include "post_poll_fixture.hpp"

namespace gvt::post_poll {
namespace {

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

/// A signaled request of `op` gathering `sge` (none if null).
SendWr signaled(WrOpcode op, const Sge* sge = nullptr) {
  SendWr w;
  w.opcode = op;
  w.flags = kWrSignaled;
  w.sg_list = sge;
  w.num_sge = sge ? 1 : 0;
  return w;
}

TEST(QpOwner, ErrorsAndReceiveCompletionsTakeTheFullPath) {
  HostQp q(16, 8, 4);
  QpOwner own;
  ASSERT_EQ(own.take(q.qp, q.cqh), Status::kOk);
  Sge sge{0x1000, 8, 1};
  ASSERT_EQ(own.post_send(signaled(WrOpcode::kRdmaWrite, &sge)), Status::kOk);
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
  const SendWr w = signaled(WrOpcode::kNop);
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
// the receive queue. Those pollers widen a receive CQE's index from the queue's completed count
// and free its space there; the owner keeps its reserved count in memory as it posts receives,
// so the queue's depth (reserved - completed) stays readable.
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
      EXPECT_EQ(q.qs->rq.reserved - q.qs->rq.completed, 3 - i) << "the queue's depth, read from memory";
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

}  // namespace
}  // namespace gvt::post_poll
