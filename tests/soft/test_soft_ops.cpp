// Every opcode through the soft HCA's CPU engine, with seeded random payloads, between QPs on
// one device and on two devices of one process. tests/nic runs them over a ConnectX HCA
// (GV_TEST_PROVIDER=mlx5: a loopback pair of one port).
#include <algorithm>

#include "soft_fixture.hpp"
#include "test_provider.hpp"

namespace gvt {
namespace {

class SoftOps : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    std::string why;
    da = open_test_device({}, why);
    if (!da) GTEST_SKIP() << why;
    db = GetParam() ? open_test_device({}, why) : nullptr;
    gv::QpCaps caps;
    caps.max_send_sge = 4;
    caps.max_recv_sge = 4;
    caps.max_inline = 256;
    a = std::make_unique<Endpoint>(*da, caps);
    b = std::make_unique<Endpoint>(db ? *db : *da, caps);
    connect_pair(*a, *b);
    la = std::make_unique<Buffer>(*da, *a->pd, kBytes, kAllAccess, 11);
    rb = std::make_unique<Buffer>(db ? *db : *da, *b->pd, kBytes, kAllAccess, 22);
  }
  void TearDown() override {
    la.reset();
    rb.reset();
    a.reset();
    b.reset();
  }

  static constexpr std::size_t kBytes = 1 << 20;
  std::unique_ptr<gv::Device> da, db;
  std::unique_ptr<Endpoint> a, b;
  std::unique_ptr<Buffer> la, rb;
};

TEST_P(SoftOps, WriteRandomSizesAndOffsets) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 200; ++i) {
    const std::uint32_t len = 1 + static_cast<std::uint32_t>(rng() % 65536);
    const std::size_t so = rng() % (kBytes - len), dof = rng() % (kBytes - len);
    la->fill(rng(), so, len);
    const Sge s = la->sge(so, len);
    post_ok(*a, make_wr(WrOpcode::kRdmaWrite, &s, 1, gv::ib::kWrSignaled, rb->addr(dof), rb->mr->rkey()));
    const Completion c = wait_cqe(*a);
    ASSERT_TRUE(c.ok()) << gv::describe(c);
    EXPECT_EQ(c.wqe_opcode, m5::kOpRdmaWrite);
    ASSERT_EQ(std::memcmp(rb->p + dof, la->p + so, len), 0) << "iteration " << i;
  }
}

TEST_P(SoftOps, WriteGathersSeveralSges) {
  const Sge s[3] = {la->sge(100, 17), la->sge(5000, 300), la->sge(70000, 4096)};
  post_ok(*a, make_wr(WrOpcode::kRdmaWrite, s, 3, gv::ib::kWrSignaled, rb->addr(8), rb->mr->rkey()));
  ASSERT_TRUE(wait_cqe(*a).ok());
  std::vector<std::uint8_t> want;
  for (const Sge& g : s) want.insert(want.end(), la->p + (g.addr - la->addr()), la->p + (g.addr - la->addr()) + g.length);
  EXPECT_EQ(std::memcmp(rb->p + 8, want.data(), want.size()), 0);
}

TEST_P(SoftOps, InlineWriteEverySizeUpToMax) {
  std::mt19937_64 rng(2);
  for (std::uint32_t len = 0; len <= 256; ++len) {
    std::vector<std::uint8_t> msg(len);
    for (auto& x : msg) x = static_cast<std::uint8_t>(rng());
    // Inline data is copied into the WQE at post time: the source needs no MR.
    const Sge s{reinterpret_cast<std::uint64_t>(msg.data()), len, 0};
    post_ok(*a, make_wr(WrOpcode::kRdmaWrite, &s, 1, gv::ib::kWrSignaled | gv::ib::kWrInline,
                        rb->addr(len * 64), rb->mr->rkey()));
    const std::vector<std::uint8_t> want = msg;
    msg.assign(len, 0xee);  // reuse at once: the WQE holds the bytes
    const Completion c = wait_cqe(*a);
    ASSERT_TRUE(c.ok()) << gv::describe(c);
    if (len != 0) {
      ASSERT_EQ(std::memcmp(rb->p + len * 64, want.data(), len), 0) << "len " << len;
    }
  }
}

TEST_P(SoftOps, WriteWithImmConsumesReceiveAndDeliversImm) {
  const Sge r = rb->sge(0, 16);
  post_recv_ok(*b, &r, 1);
  const Sge s = la->sge(64, 1000);
  SendWr wr = make_wr(WrOpcode::kRdmaWriteImm, &s, 1, gv::ib::kWrSignaled, rb->addr(4096), rb->mr->rkey());
  wr.imm = 0xdeadbeef;
  post_ok(*a, wr);
  ASSERT_TRUE(wait_cqe(*a).ok());
  const Completion rc = wait_cqe(*b);
  ASSERT_TRUE(rc.ok()) << gv::describe(rc);
  EXPECT_EQ(rc.cqe_opcode, m5::kCqeRespWrImm);
  EXPECT_EQ(rc.imm, 0xdeadbeefu);
  EXPECT_EQ(rc.byte_len, 1000u);
  EXPECT_EQ(rc.qpn, b->qp->qpn());
  EXPECT_EQ(std::memcmp(rb->p + 4096, la->p + 64, 1000), 0);
  // Inline now, into the region the requester holds since (Hca::fast_write): the same result.
  post_recv_ok(*b, &r, 1);
  const Sge t = la->sge(2048, 8);
  wr = make_wr(WrOpcode::kRdmaWriteImm, &t, 1, gv::ib::kWrSignaled | gv::ib::kWrInline, rb->addr(8192), rb->mr->rkey());
  wr.imm = 0x0badf00d;
  post_ok(*a, wr);
  const Completion sc = wait_cqe(*a);
  ASSERT_TRUE(sc.ok()) << gv::describe(sc);
  EXPECT_EQ(sc.wqe_counter, 1);
  const Completion rc2 = wait_cqe(*b);
  ASSERT_TRUE(rc2.ok()) << gv::describe(rc2);
  EXPECT_EQ(rc2.cqe_opcode, m5::kCqeRespWrImm);
  EXPECT_EQ(rc2.imm, 0x0badf00du);
  EXPECT_EQ(rc2.byte_len, 8u);
  EXPECT_EQ(rc2.wqe_counter, 1) << "the second receive";
  EXPECT_EQ(std::memcmp(rb->p + 8192, la->p + 2048, 8), 0);
}

TEST_P(SoftOps, ReadRandom) {
  std::mt19937_64 rng(3);
  for (int i = 0; i < 100; ++i) {
    const std::uint32_t len = 1 + static_cast<std::uint32_t>(rng() % 100000);
    const std::size_t lo = rng() % (kBytes - len), ro = rng() % (kBytes - len);
    rb->fill(rng(), ro, len);
    const Sge s = la->sge(lo, len);
    post_ok(*a, make_wr(WrOpcode::kRdmaRead, &s, 1, gv::ib::kWrSignaled, rb->addr(ro), rb->mr->rkey()));
    const Completion c = wait_cqe(*a);
    ASSERT_TRUE(c.ok()) << gv::describe(c);
    EXPECT_EQ(c.byte_len, len);
    ASSERT_EQ(std::memcmp(la->p + lo, rb->p + ro, len), 0) << "iteration " << i;
  }
}

TEST_P(SoftOps, SendScattersIntoReceiveSges) {
  std::mt19937_64 rng(4);
  for (int i = 0; i < 100; ++i) {
    const std::uint32_t c0 = 1 + rng() % 500, c1 = 1 + rng() % 500, c2 = 1 + rng() % 500;
    const std::uint32_t len = static_cast<std::uint32_t>(rng() % (c0 + c1 + c2 + 1));
    std::memset(rb->p, 0x5a, 4096);  // poison
    const Sge r[3] = {rb->sge(0, c0), rb->sge(1024, c1), rb->sge(2048, c2)};
    post_recv_ok(*b, r, 3);
    la->fill(rng(), 0, len);
    const Sge s = la->sge(0, len);
    SendWr wr = make_wr(i % 2 ? WrOpcode::kSendImm : WrOpcode::kSend, &s, 1, gv::ib::kWrSignaled);
    wr.imm = static_cast<std::uint32_t>(i);
    post_ok(*a, wr);
    ASSERT_TRUE(wait_cqe(*a).ok());
    const Completion rc = wait_cqe(*b);
    ASSERT_TRUE(rc.ok()) << gv::describe(rc);
    EXPECT_EQ(rc.byte_len, len);
    EXPECT_EQ(rc.cqe_opcode, i % 2 ? m5::kCqeRespSendImm : m5::kCqeRespSend);
    if (i % 2) {
      EXPECT_EQ(rc.imm, static_cast<std::uint32_t>(i));
    }
    std::uint32_t off = 0;
    const std::uint32_t caps[3] = {c0, c1, c2};
    for (int k = 0; k < 3; ++k) {
      const std::uint32_t take = std::min(caps[k], len - off);
      ASSERT_EQ(std::memcmp(rb->p + 1024 * k, la->p + off, take), 0) << "i " << i << " sge " << k;
      if (take < caps[k]) {
        ASSERT_EQ(rb->p[1024 * k + take], 0x5a) << "wrote past the message";
      }
      off += take;
    }
  }
}

// A small send queue wraps often, and inline WQEs of several WQEBBs straddle its end: the
// engine copies their payload up to the ring end and the rest from its start.
TEST_P(SoftOps, InlineWritesAcrossTheRingEnd) {
  gv::QpCaps caps;
  caps.sq_depth = 2;
  caps.max_inline = 256;
  Endpoint s(*da, caps), r(db ? *db : *da, caps);
  connect_pair(s, r);
  Buffer dst(db ? *db : *da, *r.pd, 1 << 16, kAllAccess, 33);
  std::mt19937_64 rng(3);
  std::uint64_t straddled = 0, bbs = 0;
  for (int i = 0; i < 300; ++i) {
    const std::uint32_t len = 1 + static_cast<std::uint32_t>(rng() % 256);
    std::vector<std::uint8_t> msg(len);
    for (auto& x : msg) x = static_cast<std::uint8_t>(rng());
    const Sge g{reinterpret_cast<std::uint64_t>(msg.data()), len, 0};
    const SendWr wr = make_wr(WrOpcode::kRdmaWrite, &g, 1, gv::ib::kWrSignaled | gv::ib::kWrInline,
                              dst.addr(static_cast<std::size_t>(i) * 200), dst.mr->rkey());
    const std::uint32_t n = gv::ib::wqe_bbs(gv::ib::wqe_ds(wr));
    straddled += (bbs % s.h.sq_bbs) + n > s.h.sq_bbs;
    bbs += n;
    post_ok(s, wr);
    const Completion c = wait_cqe(s);
    ASSERT_TRUE(c.ok()) << gv::describe(c);
    ASSERT_EQ(std::memcmp(dst.p + static_cast<std::size_t>(i) * 200, msg.data(), len), 0) << "message " << i << ", " << len << " B";
  }
  EXPECT_GT(straddled, 10u) << "the ring of " << s.h.sq_bbs << " WQEBBs was not straddled";
}

// An inline payload scattered into small receive SGEs: the engine takes each piece from the
// WQE's first WQEBB at word-aligned and unaligned offsets.
TEST_P(SoftOps, InlineSendScatteredIntoSmallReceives) {
  std::mt19937_64 rng(4);
  const std::uint32_t piece[4] = {1, 3, 4, 4};
  for (std::uint32_t len = 1; len <= 12; ++len) {
    Sge r[4];
    for (int i = 0; i < 4; ++i) r[i] = rb->sge(4096 * len + 64 * static_cast<std::size_t>(i), piece[i]);
    post_recv_ok(*b, r, 4);
    std::uint8_t msg[12];
    for (auto& x : msg) x = static_cast<std::uint8_t>(rng());
    const Sge s{reinterpret_cast<std::uint64_t>(msg), len, 0};
    post_ok(*a, make_wr(WrOpcode::kSend, &s, 1, gv::ib::kWrSignaled | gv::ib::kWrInline));
    ASSERT_TRUE(wait_cqe(*a).ok());
    const Completion c = wait_cqe(*b);
    ASSERT_TRUE(c.ok()) << gv::describe(c);
    ASSERT_EQ(c.byte_len, len);
    std::uint32_t at = 0;
    for (int i = 0; i < 4 && at < len; ++i) {
      const std::uint32_t n = std::min(piece[i], len - at);
      ASSERT_EQ(std::memcmp(rb->p + 4096 * len + 64 * static_cast<std::size_t>(i), msg + at, n), 0)
          << len << " B, piece " << i;
      at += n;
    }
  }
}

TEST_P(SoftOps, InlineSend) {
  std::uint8_t msg[100];
  for (int i = 0; i < 100; ++i) msg[i] = static_cast<std::uint8_t>(i * 7 + 3);
  const Sge r = rb->sge(512, 128);
  post_recv_ok(*b, &r, 1);
  const Sge s{reinterpret_cast<std::uint64_t>(msg), 100, 0};
  post_ok(*a, make_wr(WrOpcode::kSend, &s, 1, gv::ib::kWrSignaled | gv::ib::kWrInline));
  ASSERT_TRUE(wait_cqe(*a).ok());
  ASSERT_TRUE(wait_cqe(*b).ok());
  EXPECT_EQ(std::memcmp(rb->p + 512, msg, 100), 0);
}

TEST_P(SoftOps, AtomicsReturnOldValueInHostOrder) {
  std::mt19937_64 rng(5);
  auto* target = reinterpret_cast<std::uint64_t*>(rb->p + 64);
  auto* result = reinterpret_cast<std::uint64_t*>(la->p + 128);
  std::uint64_t model = rng();
  *target = model;
  for (int i = 0; i < 500; ++i) {
    const Sge s = la->sge(128, 8);
    SendWr wr = make_wr(WrOpcode::kAtomicFetchAdd, &s, 1, gv::ib::kWrSignaled, rb->addr(64), rb->mr->rkey());
    const bool cas = i % 3 == 0;
    if (cas) {
      wr.opcode = WrOpcode::kAtomicCmpSwp;
      wr.compare_add = (i % 2) ? model : model + 1;  // half the swaps must fail
      wr.swap = rng();
    } else {
      wr.compare_add = rng();
    }
    *result = 0xabababababababab;
    post_ok(*a, wr);
    const Completion c = wait_cqe(*a);
    ASSERT_TRUE(c.ok()) << gv::describe(c);
    EXPECT_EQ(c.byte_len, 8u);
    ASSERT_EQ(*result, model) << "iteration " << i;
    if (cas) {
      if (wr.compare_add == model) model = wr.swap;
    } else {
      model += wr.compare_add;
    }
    ASSERT_EQ(*target, model) << "iteration " << i;
  }
}

TEST_P(SoftOps, UnsignaledWorkCompletesSilentlyAndInOrder) {
  // 50 unsignaled writes to one word, then a signaled NOP: one CQE, and the last value wins.
  for (std::uint32_t i = 0; i < 50; ++i) {
    la->p[i] = static_cast<std::uint8_t>(i + 1);
    const Sge s = la->sge(i, 1);
    post_ok(*a, make_wr(WrOpcode::kRdmaWrite, &s, 1, i % 7 == 0 ? gv::ib::kWrFence : 0u,
                        rb->addr(3), rb->mr->rkey()));
  }
  post_ok(*a, make_wr(WrOpcode::kNop, nullptr, 0, gv::ib::kWrSignaled));
  const Completion c = wait_cqe(*a);
  ASSERT_TRUE(c.ok()) << gv::describe(c);
  EXPECT_EQ(c.wqe_opcode, m5::kOpNop);
  EXPECT_EQ(rb->p[3], 50);
  expect_no_cqe(*a);
  // All 51 WQEs are retired: the whole ring is free again.
  EXPECT_EQ(a->h.state->sq.completed, a->h.state->sq.reserved);
}

TEST_P(SoftOps, BatchedPostingOneDoorbell) {
  std::vector<Sge> s(32);
  std::vector<SendWr> wrs(32);
  for (std::uint32_t i = 0; i < 32; ++i) {
    s[i] = la->sge(i * 1000, 1000);
    wrs[i] = make_wr(WrOpcode::kRdmaWrite, &s[i], 1, i == 31 ? gv::ib::kWrSignaled : 0u,
                     rb->addr(200000 + i * 1000), rb->mr->rkey());
  }
  ASSERT_EQ(gv::ib::post_send_batch<Ownership::kExclusive>(a->h, wrs.data(), 32), Status::kOk);
  ASSERT_TRUE(wait_cqe(*a).ok());
  EXPECT_EQ(std::memcmp(rb->p + 200000, la->p, 32000), 0);
}

TEST_P(SoftOps, ReceiverPollingTheLastByteSeesTheWholeMessage) {
  // The perftest/dissertation latency idiom: no completion on the receiver, it watches the
  // last byte of the message.
  for (std::uint32_t len : {8u, 64u, 4096u, 1u << 18}) {
    for (int rep = 0; rep < 20; ++rep) {
      const auto mark = static_cast<std::uint8_t>(rep + 1);
      std::memset(rb->p, 0, len);
      la->fill(len * 100 + rep, 0, len);
      la->p[len - 1] = mark;
      const Sge s = la->sge(0, len);
      post_ok(*a, make_wr(WrOpcode::kRdmaWrite, &s, 1, gv::ib::kWrSignaled, rb->addr(0), rb->mr->rkey()));
      const gv::Status st = gv::sync::bounded_wait(
          [&] { return gv::sync::load_acquire(&rb->p[len - 1]) == mark; }, gv::Budget{}, nullptr);
      ASSERT_EQ(st, Status::kOk);
      ASSERT_EQ(std::memcmp(rb->p, la->p, len), 0) << "len " << len;
      ASSERT_TRUE(wait_cqe(*a).ok());
    }
  }
}

TEST_P(SoftOps, AnOwnerStreamsWritesThroughItsRegistersAndHandsTheQpBack) {
  // 2000 WRITEs of 1..300 bytes (inline up to 64) into consecutive slots, one in 8 signaled,
  // posted and polled by one QpOwner: a full ring sends it to poll.
  gv::ib::QpOwner own;
  ASSERT_EQ(own.take(a->h, a->ch), Status::kOk);
  std::mt19937_64 rng(3);
  la->fill(33);
  std::memset(rb->p, 0, kBytes);
  constexpr int kN = 2000;
  std::uint64_t at = 0, cqes = 0;
  std::vector<std::pair<std::uint64_t, std::uint32_t>> sent;
  for (int i = 0; i < kN; ++i) {
    const std::uint32_t len = 1 + static_cast<std::uint32_t>(rng() % 300);
    const Sge s = la->sge(at, len);
    const SendWr wr = make_wr(WrOpcode::kRdmaWrite, &s, 1,
                              (i % 8 == 7 || i + 1 == kN ? gv::ib::kWrSignaled : 0u) | (len <= 64 ? gv::ib::kWrInline : 0u),
                              rb->addr(at), rb->mr->rkey());
    Status st;
    while ((st = own.post_send(wr)) == Status::kQueueFull) {
      Completion c;
      ASSERT_EQ(own.poll(c, gv::Budget{20'000'000'000ull}), Status::kOk);
      ASSERT_TRUE(c.ok()) << gv::describe(c);
      ++cqes;
    }
    ASSERT_EQ(st, Status::kOk) << i;
    sent.emplace_back(at, len);
    at += len;
  }
  while (own.outstanding() > 0) {
    Completion c;
    ASSERT_EQ(own.poll(c, gv::Budget{20'000'000'000ull}), Status::kOk);
    ASSERT_TRUE(c.ok()) << gv::describe(c);
    ++cqes;
  }
  EXPECT_EQ(cqes, kN / 8u);
  EXPECT_EQ(std::memcmp(rb->p, la->p, at), 0);
  own.give_back();
  // The plain exclusive path goes on from where the owner stopped.
  EXPECT_EQ(a->h.state->sq.completed, a->h.state->sq.reserved);
  const Sge s = la->sge(0, 8);
  post_ok(*a, make_wr(WrOpcode::kRdmaWrite, &s, 1, gv::ib::kWrSignaled, rb->addr(kBytes - 8), rb->mr->rkey()));
  ASSERT_TRUE(wait_cqe(*a).ok());
  EXPECT_EQ(std::memcmp(rb->p + kBytes - 8, la->p, 8), 0);
}

INSTANTIATE_TEST_SUITE_P(Devices, SoftOps, ::testing::Values(false, true),
                         [](const auto& i) { return i.param ? "TwoDevices" : "OneDevice"; });

}  // namespace
}  // namespace gvt
