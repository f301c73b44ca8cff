// Posting on host threads against hand-built rings (post_poll_fixture.hpp): the WQEs, doorbell
// record and doorbell a post writes, validation that refuses and posts nothing, handle versions,
// and a full ring.
#include "post_poll_fixture.hpp"

namespace gvt::post_poll {
namespace {

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
  EXPECT_EQ(q.qs->sq.broken, 0u) << "the last ticket taken is handed back, not left as a hole";
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

}  // namespace
}  // namespace gvt::post_poll
