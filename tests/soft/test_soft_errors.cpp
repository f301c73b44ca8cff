// Every error path of the software HCA: the error CQE with the mlx5 syndrome, the QP moved to
// the error state, later WQEs flushed, and asynchronous errors for what no CQE can carry.
#include <chrono>
#include <cstring>
#include <deque>
#include <thread>

#include "soft/semantics/contexts.hpp"
#include "soft_fixture.hpp"

namespace gvt {
namespace {

class SoftErrors : public ::testing::Test {
 protected:
  void SetUp() override { Build({}); }

  void Build(const gv::ConnectAttr& attr, std::uint32_t cq_depth = 256) {
    b_buf.reset();
    a_buf.reset();
    a.reset();
    b.reset();
    if (!dev) dev = gv::Device::open("soft");
    a = std::make_unique<Endpoint>(*dev, gv::QpCaps{}, cq_depth);
    b = std::make_unique<Endpoint>(*dev, gv::QpCaps{}, cq_depth);
    connect_pair(*a, *b, attr);
    a_buf = std::make_unique<Buffer>(*dev, *a->pd, 1 << 16, kAllAccess, 1);
    b_buf = std::make_unique<Buffer>(*dev, *b->pd, 1 << 16, kAllAccess, 2);
  }

  void TearDown() override {
    b_buf.reset();
    a_buf.reset();
    a.reset();
    b.reset();
  }

  /// Post a write; expect an error CQE with `syndrome`, the QP in ERR, and a following
  /// signaled write flushed.
  void ExpectRequesterError(const SendWr& wr, std::uint8_t syndrome) { ExpectRequesterErrorAt(wr, syndrome, 0); }

  /// A WRITE from a to b succeeds (a's engine now keeps b's QP and MR); `revoke` changes b's
  /// side and returns only after what a peer kept has expired (twice soft::kKeptNs: whether a
  /// later visit of a's would still have used it depends on the machine's timing, the wait
  /// does not); the next WRITE fails with retry-exceeded and leaves b's poisoned bytes alone.
  /// Both forms: 64 bytes from an SGE, and 8 inline bytes (decided by Hca::fast_write once the
  /// responder is kept).
  template <class Revoke>
  void ExpectKeptResponderRevoked(Revoke revoke) {
    for (const bool inl : {false, true}) {
      SCOPED_TRACE(inl ? "inline WRITEs" : "WRITEs from an SGE");
      Build({});
      const std::uint32_t len = inl ? 8 : 64;
      const Sge s = a_buf->sge(0, len);
      const std::uint32_t flags = gv::ib::kWrSignaled | (inl ? gv::ib::kWrInline : 0u);
      post_ok(*a, make_wr(WrOpcode::kRdmaWrite, &s, 1, flags, b_buf->addr(), b_buf->mr->rkey()));
      Completion c = wait_cqe(*a);
      ASSERT_EQ(c.status, Status::kOk) << gv::describe(c);
      const auto t0 = std::chrono::steady_clock::now();
      revoke();
      EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::nanoseconds(2 * gv::soft::kKeptNs));
      std::memset(b_buf->p, 0x5a, len);
      post_ok(*a, make_wr(WrOpcode::kRdmaWrite, &s, 1, flags, b_buf->addr(), b_buf->mr->rkey()));
      c = wait_cqe(*a);
      EXPECT_EQ(c.status, Status::kCompletionError) << gv::describe(c);
      EXPECT_EQ(c.syndrome, m5::kSyndTransportRetryExcErr) << gv::describe(c);
      for (std::uint32_t i = 0; i < len; ++i) ASSERT_EQ(b_buf->p[i], 0x5a) << "byte " << i << " was written";
    }
  }

  /// A signaled inline WRITE of a_buf's first `len` bytes to `raddr` under `rkey`.
  SendWr InlineWrite(std::uint32_t len, std::uint64_t raddr, std::uint32_t rkey) {
    const Sge& s = sges.emplace_back(a_buf->sge(0, len));  // each request its own (a deque's stay put)
    return make_wr(WrOpcode::kRdmaWrite, &s, 1, gv::ib::kWrSignaled | gv::ib::kWrInline, raddr, rkey);
  }

  /// `warm` succeeds (a's engine now holds b's QP and the MR `warm` named, so an inline WRITE
  /// to that MR is decided by Hca::fast_write); `bad`, an inline WRITE into [at, at + n) of b's
  /// memory, fails with `syndrome`, the QP in error, and leaves those bytes alone.
  void ExpectKeptInlineError(const SendWr& warm, const SendWr& bad, std::uint8_t syndrome, std::uint8_t* at,
                             std::size_t n) {
    post_ok(*a, warm);
    Completion c = wait_cqe(*a);
    ASSERT_EQ(c.status, Status::kOk) << gv::describe(c);
    std::memset(at, 0x5a, n);
    ExpectRequesterErrorAt(bad, syndrome, 1);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(at[i], 0x5a) << "byte " << i << " was written";
  }

  /// An inline WRITE of 8 bytes to b_buf, written at a's next WQEBB but not published: a test
  /// corrupts it, then publish() rings it with the doorbell of its uncorrupted control segment.
  struct Unpublished {
    std::uint64_t start;
    std::byte* wqe;
    std::uint64_t doorbell;
  };
  Unpublished WriteUnpublishedInline() {
    const Sge s = a_buf->sge(0, 8);
    const SendWr wr = make_wr(WrOpcode::kRdmaWrite, &s, 1, gv::ib::kWrSignaled | gv::ib::kWrInline, b_buf->addr(),
                              b_buf->mr->rkey());
    Unpublished u{};
    EXPECT_EQ(gv::ib::wq_reserve<Ownership::kExclusive>(&a->h.state->sq, a->h.sq_bbs, 1, u.start, {}, nullptr),
              Status::kOk);
    gv::ib::sq_write_wqe(a->h, u.start, wr);
    u.wqe = a->h.sq + gv::ib::sq_octoword_offset(u.start, 0, a->h.sq_bbs);
    u.doorbell = gv::ib::doorbell_value(gv::ib::load_octoword(u.wqe));
    return u;
  }
  void publish(const Unpublished& u) {
    gv::ib::sq_ring_doorbell(a->h, u.start + 1, u.doorbell);
    gv::ib::wq_pass_turn<Ownership::kExclusive>(&a->h.state->sq, u.start + 1);
  }

  /// ExpectRequesterError for the WQE at WQEBB `counter`.
  void ExpectRequesterErrorAt(const SendWr& wr, std::uint8_t syndrome, std::uint16_t counter) {
    post_ok(*a, wr);
    ExpectRequesterCqe(syndrome, counter);
  }
  void ExpectRequesterCqe(std::uint8_t syndrome, std::uint16_t counter) {
    const Completion c = wait_cqe(*a);
    EXPECT_EQ(c.status, Status::kCompletionError) << gv::describe(c);
    EXPECT_EQ(c.syndrome, syndrome) << gv::describe(c);
    EXPECT_EQ(c.qpn, a->qp->qpn());
    EXPECT_EQ(c.wqe_counter, counter);
    EXPECT_TRUE(c.is_send());
    EXPECT_EQ(a->qp->state(), gv::QpState::kError);
    ExpectFlushed();
  }

  void ExpectFlushed() {
    const Sge s = a_buf->sge(0, 8);
    // Unsignaled, and aimed nowhere: a flushed WQE is never executed or checked.
    post_ok(*a, make_wr(WrOpcode::kRdmaWrite, &s, 1, 0, 0, 0));
    const Completion f = wait_cqe(*a);
    EXPECT_EQ(f.status, Status::kCompletionError);
    EXPECT_EQ(f.syndrome, m5::kSyndWrFlushErr) << gv::describe(f);
  }

  /// Reserve a's next WQEBB and write a signaled 8-byte WRITE there, without publishing it:
  /// the tests then break one publishing step on purpose.
  std::uint64_t WriteUnpublishedWqe() {
    const Sge s = a_buf->sge(0, 8);
    const SendWr wr = make_wr(WrOpcode::kRdmaWrite, &s, 1, gv::ib::kWrSignaled, b_buf->addr(), b_buf->mr->rkey());
    std::uint64_t start = 0;
    EXPECT_EQ(gv::ib::wq_reserve<Ownership::kExclusive>(&a->h.state->sq, a->h.sq_bbs, 1, start, {}, nullptr),
              Status::kOk);
    gv::ib::sq_write_wqe(a->h, start, wr);
    return start;
  }

  std::unique_ptr<gv::Device> dev;
  std::unique_ptr<Endpoint> a, b;
  std::unique_ptr<Buffer> a_buf, b_buf;
  std::deque<Sge> sges;
};

TEST_F(SoftErrors, BadLkeyIsLocalProtectionError) {
  const Sge s{a_buf->addr(), 64, a_buf->mr->lkey() ^ 0x100};
  ExpectRequesterError(make_wr(WrOpcode::kRdmaWrite, &s, 1, gv::ib::kWrSignaled, b_buf->addr(), b_buf->mr->rkey()),
                       m5::kSyndLocalProtErr);
}

TEST_F(SoftErrors, LocalOutOfBoundsIsLocalProtectionError) {
  const Sge s = a_buf->sge((1 << 16) - 8, 16);
  ExpectRequesterError(make_wr(WrOpcode::kRdmaWrite, &s, 1, gv::ib::kWrSignaled, b_buf->addr(), b_buf->mr->rkey()),
                       m5::kSyndLocalProtErr);
}

TEST_F(SoftErrors, ReadIntoReadOnlyMemoryIsLocalProtectionError) {
  auto* mem = dev->alloc(4096);
  auto ro = a->pd->reg_mr(mem, 4096, gv::kRemoteRead);
  const Sge s{reinterpret_cast<std::uint64_t>(mem), 64, ro->lkey()};
  ExpectRequesterError(make_wr(WrOpcode::kRdmaRead, &s, 1, gv::ib::kWrSignaled, b_buf->addr(), b_buf->mr->rkey()),
                       m5::kSyndLocalProtErr);
  ro.reset();
  dev->free(mem);
}

TEST_F(SoftErrors, LkeyOfAnotherProtectionDomainIsRejected) {
  // b_buf is registered in b's PD; a may not use it as a local buffer.
  const Sge s = b_buf->sge(0, 64);
  ExpectRequesterError(make_wr(WrOpcode::kRdmaWrite, &s, 1, gv::ib::kWrSignaled, b_buf->addr(), b_buf->mr->rkey()),
                       m5::kSyndLocalProtErr);
}

TEST_F(SoftErrors, BadRkeyIsRemoteAccessError) {
  const Sge s = a_buf->sge(0, 64);
  ExpectRequesterError(make_wr(WrOpcode::kRdmaWrite, &s, 1, gv::ib::kWrSignaled, b_buf->addr(), b_buf->mr->rkey() + 1),
                       m5::kSyndRemoteAccessErr);
}

TEST_F(SoftErrors, RemoteOutOfBoundsIsRemoteAccessError) {
  const Sge s = a_buf->sge(0, 64);
  ExpectRequesterError(
      make_wr(WrOpcode::kRdmaWrite, &s, 1, gv::ib::kWrSignaled, b_buf->addr((1 << 16) - 32), b_buf->mr->rkey()),
      m5::kSyndRemoteAccessErr);
}

TEST_F(SoftErrors, WriteWithoutRemoteWriteRightIsRemoteAccessError) {
  auto* mem = dev->alloc(4096);
  auto ro = b->pd->reg_mr(mem, 4096, gv::kRemoteRead);
  const Sge s = a_buf->sge(0, 64);
  ExpectRequesterError(
      make_wr(WrOpcode::kRdmaWrite, &s, 1, gv::ib::kWrSignaled, reinterpret_cast<std::uint64_t>(mem), ro->rkey()),
      m5::kSyndRemoteAccessErr);
  ro.reset();
  dev->free(mem);
}

TEST_F(SoftErrors, QpAccessFlagsAreEnforcedAtTheResponder) {
  gv::ConnectAttr attr;
  attr.access = gv::kRemoteRead;  // the responder QP grants no remote write
  Build(attr);
  const Sge s = a_buf->sge(0, 64);
  ExpectRequesterError(make_wr(WrOpcode::kRdmaWrite, &s, 1, gv::ib::kWrSignaled, b_buf->addr(), b_buf->mr->rkey()),
                       m5::kSyndRemoteAccessErr);
}

TEST_F(SoftErrors, DeregisteredMemoryFails) {
  const std::uint32_t rkey = b_buf->mr->rkey();
  b_buf->mr.reset();
  const Sge s = a_buf->sge(0, 64);
  ExpectRequesterError(make_wr(WrOpcode::kRdmaWrite, &s, 1, gv::ib::kWrSignaled, b_buf->addr(), rkey),
                       m5::kSyndRemoteAccessErr);
  b_buf->mr = b->pd->reg_mr(b_buf->p, b_buf->n, kAllAccess);
  EXPECT_NE(b_buf->mr->rkey(), rkey) << "a re-registration must not revive the old key";
}

// A requester keeps the responder's QP and the MR of the key it named last across visits
// (Hca::reach); a WQE naming another key looks that one up, and a deregistration revokes what
// the peer kept before dereg_mr returns.
TEST_F(SoftErrors, AKeptRemoteKeyIsRevokedByItsDeregistration) {
  for (const bool inl : {false, true}) {  // 64 bytes from an SGE; 8 inline (Hca::fast_write)
    SCOPED_TRACE(inl ? "inline WRITEs" : "WRITEs from an SGE");
    Build({});
    Buffer other(*dev, *b->pd, 4096, kAllAccess, 3);
    const std::uint32_t rkey = b_buf->mr->rkey(), len = inl ? 8 : 64;
    const std::uint32_t flags = gv::ib::kWrSignaled | (inl ? gv::ib::kWrInline : 0u);
    const Sge s = a_buf->sge(0, len);
    post_ok(*a, make_wr(WrOpcode::kRdmaWrite, &s, 1, flags, b_buf->addr(), rkey));
    Completion c = wait_cqe(*a);
    ASSERT_EQ(c.status, Status::kOk) << gv::describe(c);
    // Another key: the guess is wrong, and the WQE's own key is looked up.
    post_ok(*a, make_wr(WrOpcode::kRdmaWrite, &s, 1, flags, other.addr(), other.mr->rkey()));
    c = wait_cqe(*a);
    ASSERT_EQ(c.status, Status::kOk) << gv::describe(c);
    EXPECT_EQ(std::memcmp(other.p, a_buf->p, len), 0);
    // The first key again, deregistered since it was used: the guess must not revive it.
    post_ok(*a, make_wr(WrOpcode::kRdmaWrite, &s, 1, flags, b_buf->addr(), rkey));
    c = wait_cqe(*a);
    ASSERT_EQ(c.status, Status::kOk) << gv::describe(c);
    const auto t0 = std::chrono::steady_clock::now();
    b_buf->mr.reset();  // returns once no peer uses the MR it kept (twice soft::kKeptNs)
    EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::nanoseconds(2 * gv::soft::kKeptNs));
    std::memset(b_buf->p, 0x5a, len);
    post_ok(*a, make_wr(WrOpcode::kRdmaWrite, &s, 1, flags, b_buf->addr(), rkey));
    c = wait_cqe(*a);
    EXPECT_EQ(c.status, Status::kCompletionError) << gv::describe(c);
    EXPECT_EQ(c.syndrome, m5::kSyndRemoteAccessErr) << gv::describe(c);
    EXPECT_EQ(c.wqe_counter, 3);
    for (std::uint32_t i = 0; i < len; ++i) ASSERT_EQ(b_buf->p[i], 0x5a) << "byte " << i << " was written";
    b_buf->mr = b->pd->reg_mr(b_buf->p, b_buf->n, kAllAccess);  // Build() deregisters it
  }
}

// What a requester kept of its responder's QP (its state RTS) holds only until the responder's
// side says otherwise: modify_to_error and destroy_qp return once no peer uses it.
TEST_F(SoftErrors, AResponderMovedToErrorRefusesAPeerThatKeptIt) {
  ExpectKeptResponderRevoked([&] { b->qp->modify_to_error(); });
}

TEST_F(SoftErrors, ADestroyedResponderRefusesAPeerThatKeptIt) {
  ExpectKeptResponderRevoked([&] { b->qp.reset(); });
}

// The slot of a destroyed QP is taken by the next one, with the same QP number: connected to
// another peer, it refuses the QP that kept the old one.
TEST_F(SoftErrors, AResponderRecreatedForAnotherPeerRefusesTheOldOne) {
  std::unique_ptr<Endpoint> c;
  std::unique_ptr<gv::QueuePair> b2;
  ExpectKeptResponderRevoked([&] {
    const std::uint32_t qpn = b->qp->qpn();
    b->qp.reset();
    b2 = b->pd->create_qp(*b->cq, *b->cq, gv::QpCaps{});
    ASSERT_EQ(b2->qpn(), qpn) << "the slot was not reused: the test needs the same QP number";
    c = std::make_unique<Endpoint>(*dev);
    b2->connect(c->qp->info());
    c->qp->connect(b2->info());
  });
  b2.reset();
  c.reset();
}

// An inline WRITE into the MR the requester already holds is decided in one step
// (Hca::fast_write): every check of the general path must still refuse what that path refuses.
TEST_F(SoftErrors, AnInlineWriteIntoAKeptRegionIsCheckedAsAnyOther) {
  {
    SCOPED_TRACE("below the region's start");
    auto sub = b->pd->reg_mr(b_buf->p + 64, 256, kAllAccess);  // the bytes below it are b_buf's
    ExpectKeptInlineError(InlineWrite(8, b_buf->addr(64), sub->rkey()), InlineWrite(8, b_buf->addr(56), sub->rkey()),
                          m5::kSyndRemoteAccessErr, b_buf->p + 56, 8);
  }
  {
    SCOPED_TRACE("past the region's end");
    Build({});
    const std::uint32_t rkey = b_buf->mr->rkey();
    ExpectKeptInlineError(InlineWrite(8, b_buf->addr(), rkey), InlineWrite(8, b_buf->addr((1 << 16) - 4), rkey),
                          m5::kSyndRemoteAccessErr, b_buf->p + (1 << 16) - 4, 4);
  }
  {
    SCOPED_TRACE("longer than the region");
    Build({});
    auto tiny = b->pd->reg_mr(b_buf->p + 64, 4, kAllAccess);
    ExpectKeptInlineError(InlineWrite(4, b_buf->addr(64), tiny->rkey()), InlineWrite(8, b_buf->addr(64), tiny->rkey()),
                          m5::kSyndRemoteAccessErr, b_buf->p + 64, 8);
  }
  {
    SCOPED_TRACE("a region without remote write, kept from a READ");
    Build({});
    auto ro = b->pd->reg_mr(b_buf->p, 4096, gv::kRemoteRead);
    const Sge s = a_buf->sge(0, 8);
    ExpectKeptInlineError(make_wr(WrOpcode::kRdmaRead, &s, 1, gv::ib::kWrSignaled, b_buf->addr(), ro->rkey()),
                          InlineWrite(8, b_buf->addr(), ro->rkey()), m5::kSyndRemoteAccessErr, b_buf->p, 8);
  }
  {
    SCOPED_TRACE("a responder QP without remote write, kept from a READ");
    gv::ConnectAttr attr;
    attr.access = gv::kRemoteRead;
    Build(attr);
    const Sge s = a_buf->sge(0, 8);
    ExpectKeptInlineError(make_wr(WrOpcode::kRdmaRead, &s, 1, gv::ib::kWrSignaled, b_buf->addr(), b_buf->mr->rkey()),
                          InlineWrite(8, b_buf->addr(), b_buf->mr->rkey()), m5::kSyndRemoteAccessErr, b_buf->p, 8);
  }
  {
    SCOPED_TRACE("a WRITE_WITH_IMM finding no receive: RNR retries, then fails");
    gv::ConnectAttr attr;
    attr.rnr_retry = 2;
    attr.min_rnr_timer = 1;  // 10 us
    Build(attr);
    SendWr bad = InlineWrite(8, b_buf->addr(), b_buf->mr->rkey());
    bad.opcode = WrOpcode::kRdmaWriteImm;
    const std::uint64_t t0 = gv::sync::now_ns();
    ExpectKeptInlineError(InlineWrite(8, b_buf->addr(), b_buf->mr->rkey()), bad, m5::kSyndRnrRetryExcErr, b_buf->p,
                          8);
    EXPECT_GE(gv::sync::now_ns() - t0, 2 * 10'000u) << "two RNR back-offs of 10 us each";
  }
  {
    // What a 2 GiB SGE encodes to (the inline flag alone); posters emit no empty inline segment.
    SCOPED_TRACE("an inline segment of no bytes: malformed, nothing written");
    Build({});
    post_ok(*a, InlineWrite(8, b_buf->addr(), b_buf->mr->rkey()));
    ASSERT_TRUE(wait_cqe(*a).ok());
    const Unpublished u = WriteUnpublishedInline();
    u.wqe[35] = std::byte{0};  // the inline segment's length (its low byte; 8 before)
    std::memset(b_buf->p, 0x5a, 8);
    publish(u);
    ExpectRequesterCqe(m5::kSyndLocalQpOpErr, 1);
    for (int i = 0; i < 8; ++i) ASSERT_EQ(b_buf->p[i], 0x5a) << "byte " << i << " was written";
  }
}

// A malformed inline WRITE after a good one (the MR and responder held): LOCAL_QP_OP_ERR, as
// ConnectX refuses it, whichever field is wrong.
TEST_F(SoftErrors, AMalformedInlineWriteIntoAKeptRegionIsLocalQpOperationError) {
  struct Case {
    const char* what;
    std::size_t byte;    ///< of the WQE
    std::uint8_t value;  ///< stored there (the QP number's byte: flipped by it)
  };
  const Case cases[] = {
      {"an unknown opcode", 3, 0x77},
      {"another WQE index", 2, 0x05},
      {"another QP number", 6, 0x01},  // its doorbell still names ours
      {"inline data longer than its segments", 35, 13},
      {"two WQEBBs, the record publishing one", 7, 5},
      {"one octoword, too short for a WRITE", 7, 1},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    Build({});
    post_ok(*a, InlineWrite(8, b_buf->addr(), b_buf->mr->rkey()));
    ASSERT_TRUE(wait_cqe(*a).ok());
    const Unpublished u = WriteUnpublishedInline();
    ASSERT_EQ(u.start, 1u);
    const std::uint8_t old = static_cast<std::uint8_t>(u.wqe[k.byte]);
    u.wqe[k.byte] = std::byte{k.byte == 6 ? static_cast<std::uint8_t>(old ^ k.value) : k.value};
    ASSERT_NE(static_cast<std::uint8_t>(u.wqe[k.byte]), old) << "the corruption changes nothing";
    std::memset(b_buf->p, 0x5a, 8);
    publish(u);
    ExpectRequesterCqe(m5::kSyndLocalQpOpErr, 1);
    for (int i = 0; i < 8; ++i) ASSERT_EQ(b_buf->p[i], 0x5a) << "byte " << i << " was written";
  }
}

TEST_F(SoftErrors, MisalignedAtomicIsRemoteInvalidRequest) {
  const Sge s = a_buf->sge(0, 8);
  SendWr wr = make_wr(WrOpcode::kAtomicFetchAdd, &s, 1, gv::ib::kWrSignaled, b_buf->addr(4), b_buf->mr->rkey());
  ExpectRequesterError(wr, m5::kSyndRemoteInvalReqErr);
}

// An atomic without its data segment (post_send refuses an empty SGE; a kernel writing WQEs
// itself need not) has nowhere to return the original value: a local length error (found by
// tests/fuzz/fuzz_wqe: the engine stored it through a null address).
TEST_F(SoftErrors, AnAtomicWithoutItsDataSegmentIsALocalLengthError) {
  for (const WrOpcode op : {WrOpcode::kAtomicCmpSwp, WrOpcode::kAtomicFetchAdd}) {
    Build({});
    const std::uint64_t before = *reinterpret_cast<const std::uint64_t*>(b_buf->p);
    const Sge s = a_buf->sge(0, 0);
    const SendWr wr = make_wr(op, &s, 1, gv::ib::kWrSignaled, b_buf->addr(), b_buf->mr->rkey());
    ASSERT_EQ(gv::ib::wqe_ds(wr), 3u) << "control, remote address and atomic segments only";
    std::uint64_t start = 0;
    ASSERT_EQ(gv::ib::wq_reserve<Ownership::kExclusive>(&a->h.state->sq, a->h.sq_bbs, 1, start, {}, nullptr),
              Status::kOk);
    const gv::ib::Octoword ctrl = gv::ib::sq_write_wqe(a->h, start, wr);
    gv::ib::sq_ring_doorbell(a->h, start + 1, gv::ib::doorbell_value(ctrl));
    gv::ib::wq_pass_turn<Ownership::kExclusive>(&a->h.state->sq, start + 1);
    ExpectRequesterCqe(m5::kSyndLocalLengthErr, 0);
    EXPECT_EQ(*reinterpret_cast<const std::uint64_t*>(b_buf->p), before) << "the target changed";
  }
}

TEST_F(SoftErrors, MalformedWqeIsLocalQpOperationError) {
  // Corrupt the opcode of a WQE after writing it, before the doorbell: the engine must refuse
  // it as ConnectX does.
  const std::uint64_t start = WriteUnpublishedWqe();
  a->h.sq[3] = std::byte{0x77};  // opcode byte of the control segment (big-endian word 0)
  gv::ib::sq_ring_doorbell(a->h, start + 1,
                           gv::ib::doorbell_value(gv::ib::load_octoword(a->h.sq + gv::ib::sq_octoword_offset(start, 0, a->h.sq_bbs))));
  gv::ib::wq_pass_turn<Ownership::kExclusive>(&a->h.state->sq, start + 1);
  const Completion c = wait_cqe(*a);
  EXPECT_EQ(c.syndrome, m5::kSyndLocalQpOpErr) << gv::describe(c);
  EXPECT_EQ(a->qp->state(), gv::QpState::kError);
}

// An SGE length as ConnectX reads a send WQE's data segment: a length up to max_msg_sz (1 GiB),
// a local length error above it; the top bit is the inline flag, so 0x80000000 (a 2 GiB SGE)
// is an inline segment that holds nothing and 0x80000040 one longer than its WQE: malformed.
// None moves a byte.
TEST_F(SoftErrors, SgeLengthsAroundTheMessageLimitFailAsConnectXFailsThem) {
  struct Case {
    std::uint32_t len;
    std::uint8_t syndrome;
  };
  const Case cases[] = {{0x40000000u, m5::kSyndLocalProtErr},  // a legal length, past the 64 KiB MR
                        {0x40000001u, m5::kSyndLocalLengthErr},
                        {0x7fffffffu, m5::kSyndLocalLengthErr},
                        {0x80000000u, m5::kSyndLocalQpOpErr},
                        {0x80000040u, m5::kSyndLocalQpOpErr}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.len);
    Build({});
    std::memset(b_buf->p, 0x5a, b_buf->n);
    const Sge s{a_buf->addr(), c.len, a_buf->mr->lkey()};
    ExpectRequesterError(make_wr(WrOpcode::kRdmaWrite, &s, 1, gv::ib::kWrSignaled, b_buf->addr(), b_buf->mr->rkey()),
                         c.syndrome);
    for (std::size_t i = 0; i < b_buf->n; ++i) ASSERT_EQ(b_buf->p[i], 0x5a) << "byte " << i << " was written";
  }
}

// A pointer segment's byte_count of 0 means 2 GiB to ConnectX (posters skip empty SGEs): over
// max_msg_sz, a local length error, never a WRITE of nothing.
TEST_F(SoftErrors, ADataSegmentOfByteCountZeroIsTwoGibAndALengthError) {
  const std::uint64_t start = WriteUnpublishedWqe();
  std::byte* data = a->h.sq + gv::ib::sq_octoword_offset(start, 2, a->h.sq_bbs);
  std::memset(data, 0, 4);  // byte_count of the data segment
  gv::ib::sq_ring_doorbell(a->h, start + 1,
                           gv::ib::doorbell_value(gv::ib::load_octoword(a->h.sq + gv::ib::sq_octoword_offset(start, 0, a->h.sq_bbs))));
  gv::ib::wq_pass_turn<Ownership::kExclusive>(&a->h.state->sq, start + 1);
  ExpectRequesterCqe(m5::kSyndLocalLengthErr, 0);
}

// A software-HCA poster publishes record and doorbell behind one fence, in no order
// (QpHandle::record_polled): a doorbell seen before its record executes nothing, and the WQE
// runs once the record shows it, without another doorbell.
TEST_F(SoftErrors, DoorbellSeenBeforeItsRecordWaitsForTheRecord) {
  ASSERT_NE(a->h.record_polled, 0u);
  const std::uint64_t start = WriteUnpublishedWqe();
  gv::sync::store_release(a->h.doorbell, gv::ib::doorbell_value(gv::ib::load_octoword(
                                             a->h.sq + gv::ib::sq_octoword_offset(start, 0, a->h.sq_bbs))));
  expect_no_cqe(*a);
  EXPECT_NE(std::memcmp(b_buf->p, a_buf->p, 8), 0) << "executed before the record published it";
  gv::sync::store_release(&a->h.dbrec->snd.raw, gv::be32::from(static_cast<std::uint32_t>(start + 1)).raw);
  gv::ib::wq_pass_turn<Ownership::kExclusive>(&a->h.state->sq, start + 1);
  const Completion c = wait_cqe(*a);
  EXPECT_EQ(c.status, Status::kOk) << gv::describe(c);
  EXPECT_EQ(std::memcmp(b_buf->p, a_buf->p, 8), 0);
  EXPECT_EQ(a->qp->state(), gv::QpState::kRts);
}

TEST_F(SoftErrors, DoorbellNamingAnotherQpIsAnAsyncFatalError) {
  WriteUnpublishedWqe();  // at WQEBB 0, published by the record only after the bad doorbell
  std::uint64_t db;
  const gv::ib::mlx5::CtrlSeg bogus = gv::ib::make_ctrl_seg(0, m5::kOpRdmaWrite, 0, b->qp->qpn(), 0, 3, 0, {});
  std::memcpy(&db, &bogus, 8);
  gv::sync::store_release(a->h.doorbell, db);
  std::optional<gv::AsyncEvent> ev;
  ASSERT_EQ(gv::sync::bounded_wait([&] { return (ev = dev->poll_async_event()).has_value(); }, gv::Budget{}, nullptr),
            Status::kOk);
  EXPECT_EQ(ev->type, gv::AsyncEvent::Type::kQpFatal);
  EXPECT_EQ(ev->number, a->qp->qpn());
  EXPECT_NE(ev->message.find("doorbell"), std::string::npos) << ev->message;
  EXPECT_EQ(a->qp->state(), gv::QpState::kError);
  // The engine executes what the record covers (it polls the record): a WQE the record
  // publishes after the fatal doorbell is flushed.
  gv::sync::store_release(&a->h.dbrec->snd.raw, gv::be32::from(1).raw);
  const Completion c = wait_cqe(*a);
  EXPECT_EQ(c.syndrome, m5::kSyndWrFlushErr) << gv::describe(c);
}

TEST_F(SoftErrors, SendLongerThanReceiveBufferFailsBothSides) {
  const Sge r = b_buf->sge(0, 16);
  post_recv_ok(*b, &r, 1);
  const Sge s = a_buf->sge(0, 17);
  ExpectRequesterError(make_wr(WrOpcode::kSend, &s, 1, gv::ib::kWrSignaled), m5::kSyndRemoteInvalReqErr);
  const Completion rc = wait_cqe(*b);
  EXPECT_EQ(rc.status, Status::kCompletionError);
  EXPECT_EQ(rc.syndrome, m5::kSyndLocalLengthErr) << gv::describe(rc);
  EXPECT_FALSE(rc.is_send());
  EXPECT_EQ(b->qp->state(), gv::QpState::kError);
}

TEST_F(SoftErrors, ReceiveIntoBadLkeyIsRemoteOperationError) {
  const Sge r{b_buf->addr(), 64, 0xbad00};
  post_recv_ok(*b, &r, 1);
  const Sge s = a_buf->sge(0, 8);
  ExpectRequesterError(make_wr(WrOpcode::kSend, &s, 1, gv::ib::kWrSignaled), m5::kSyndRemoteOpErr);
  const Completion rc = wait_cqe(*b);
  EXPECT_EQ(rc.syndrome, m5::kSyndLocalProtErr) << gv::describe(rc);
}

// A receive segment's byte_count of 0 means 2 GiB, as a send segment's: past the 64 KiB region,
// a protection error at the responder, never a scatter of nothing to a null address (found by
// tests/fuzz/fuzz_wqe).
TEST_F(SoftErrors, AReceiveSegmentOfByteCountZeroIsTwoGibAndAProtectionError) {
  const Sge r = b_buf->sge(0, 64);
  post_recv_ok(*b, &r, 1);
  std::memset(b->h.rq, 0, 4);  // the receive WQE's byte_count, before any SEND takes it
  std::memset(b_buf->p, 0x5a, 64);
  const Sge s = a_buf->sge(0, 8);
  SendWr wr = make_wr(WrOpcode::kSend, &s, 1, gv::ib::kWrSignaled | gv::ib::kWrInline);
  ExpectRequesterError(wr, m5::kSyndRemoteOpErr);
  const Completion rc = wait_cqe(*b);
  EXPECT_EQ(rc.syndrome, m5::kSyndLocalProtErr) << gv::describe(rc);
  for (int i = 0; i < 64; ++i) ASSERT_EQ(b_buf->p[i], 0x5a) << "byte " << i << " was written";
}

TEST_F(SoftErrors, EmptyReceiveQueueRetriesThenFails) {
  gv::ConnectAttr attr;
  attr.rnr_retry = 3;
  attr.min_rnr_timer = 1;  // 10 us
  Build(attr);
  const Sge s = a_buf->sge(0, 8);
  const std::uint64_t t0 = gv::sync::now_ns();
  ExpectRequesterError(make_wr(WrOpcode::kSend, &s, 1, gv::ib::kWrSignaled), m5::kSyndRnrRetryExcErr);
  EXPECT_GE(gv::sync::now_ns() - t0, 3 * 10'000u) << "three RNR back-offs of 10 us each";
}

TEST_F(SoftErrors, ReceivePostedDuringRnrBackoffIsUsed) {
  gv::ConnectAttr attr;
  attr.rnr_retry = 7;        // retry forever
  attr.min_rnr_timer = 12;   // 0.64 ms
  Build(attr);
  const Sge s = a_buf->sge(0, 8);
  post_ok(*a, make_wr(WrOpcode::kSend, &s, 1, gv::ib::kWrSignaled));
  expect_no_cqe(*a, 5'000'000);
  const Sge r = b_buf->sge(100, 8);
  post_recv_ok(*b, &r, 1);
  const Completion c = wait_cqe(*a);
  EXPECT_TRUE(c.ok()) << gv::describe(c);
  EXPECT_TRUE(wait_cqe(*b).ok());
  EXPECT_EQ(std::memcmp(b_buf->p + 100, a_buf->p, 8), 0);
}

TEST_F(SoftErrors, PeerNotReadyIsTransportRetryExceeded) {
  // c is in INIT: it never accepts traffic, so the requester's retries run out.
  auto c = std::make_unique<Endpoint>(*dev);
  c->qp->modify_to_init();
  auto d = std::make_unique<Endpoint>(*dev);
  d->qp->connect(c->qp->info());
  d->take_handles();
  const std::uint64_t word = 42;
  const Sge s{reinterpret_cast<std::uint64_t>(&word), 8, 0};
  post_ok(*d, make_wr(WrOpcode::kRdmaWrite, &s, 1, gv::ib::kWrSignaled | gv::ib::kWrInline, b_buf->addr(),
                      b_buf->mr->rkey()));
  const Completion e = wait_cqe(*d);
  EXPECT_EQ(e.syndrome, m5::kSyndTransportRetryExcErr) << gv::describe(e);
}

TEST_F(SoftErrors, ModifyToErrorFlushesPostedReceivesAndSends) {
  const Sge r = b_buf->sge(0, 8);
  post_recv_ok(*b, &r, 1);
  post_recv_ok(*b, &r, 1);
  b->qp->modify_to_error();
  for (int i = 0; i < 2; ++i) {
    const Completion c = wait_cqe(*b);
    EXPECT_EQ(c.syndrome, m5::kSyndWrFlushErr) << gv::describe(c);
    EXPECT_FALSE(c.is_send());
    EXPECT_EQ(c.wqe_counter, i);
  }
  a->qp->modify_to_error();
  ExpectFlushed();
}

TEST_F(SoftErrors, CqOverrunIsAnAsynchronousError) {
  Build({}, 4);
  const Sge s = a_buf->sge(0, 8);
  for (int i = 0; i < 5; ++i)
    post_ok(*a, make_wr(WrOpcode::kRdmaWrite, &s, 1, gv::ib::kWrSignaled, b_buf->addr(), b_buf->mr->rkey()));
  std::optional<gv::AsyncEvent> ev;
  ASSERT_EQ(gv::sync::bounded_wait([&] { return (ev = dev->poll_async_event()).has_value(); }, gv::Budget{}, nullptr),
            Status::kOk);
  EXPECT_EQ(ev->type, gv::AsyncEvent::Type::kCqOverrun);
  EXPECT_EQ(ev->number, a->cq->cqn());
  EXPECT_NE(ev->message.find("overran"), std::string::npos) << ev->message;
  EXPECT_EQ(a->qp->state(), gv::QpState::kError);
  // The four CQEs that fitted are there; then the poller learns of the overrun.
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(wait_cqe(*a).ok());
  Completion c;
  EXPECT_EQ(gv::ib::try_poll_cq<Ownership::kExclusive>(a->ch, c), Status::kCqOverrun);
}

// The requester keeps a consumer index of the responder's receive CQ and reads the CQ's doorbell
// record again only when a CQE does not fit below it: three laps through a CQ of four, polled in
// between, never overrun it; five CQEs into it unpolled do.
TEST_F(SoftErrors, AReceiveCqFilledByThePeerOverrunsOnlyWhenFull) {
  Build({}, 4);
  const Sge s = a_buf->sge(0, 8);
  const Sge r = b_buf->sge(0, 8);
  std::uint32_t imm = 0;
  const auto write_imm = [&] {
    SendWr wr = make_wr(WrOpcode::kRdmaWriteImm, &s, 1, 0, b_buf->addr(), b_buf->mr->rkey());
    wr.imm = imm++;
    post_ok(*a, wr);
  };
  for (int lap = 0; lap < 3; ++lap) {
    for (int i = 0; i < 4; ++i) post_recv_ok(*b, &r, 1);
    for (int i = 0; i < 4; ++i) write_imm();
    for (int i = 0; i < 4; ++i) {
      const Completion c = wait_cqe(*b);
      ASSERT_TRUE(c.ok()) << "lap " << lap << ": " << gv::describe(c);
      EXPECT_EQ(c.imm, static_cast<std::uint32_t>(4 * lap + i));
    }
  }
  EXPECT_FALSE(dev->poll_async_event().has_value());
  for (int i = 0; i < 5; ++i) post_recv_ok(*b, &r, 1);
  for (int i = 0; i < 5; ++i) write_imm();
  std::optional<gv::AsyncEvent> ev;
  ASSERT_EQ(gv::sync::bounded_wait([&] { return (ev = dev->poll_async_event()).has_value(); }, gv::Budget{}, nullptr),
            Status::kOk);
  EXPECT_EQ(ev->type, gv::AsyncEvent::Type::kCqOverrun);
  EXPECT_EQ(ev->number, b->cq->cqn());
  EXPECT_EQ(b->qp->state(), gv::QpState::kError);
}

TEST_F(SoftErrors, AbortEndsEveryWait) {
  std::thread raiser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    dev->abort();
  });
  Completion c;
  const std::uint64_t t0 = gv::sync::now_ns();
  EXPECT_EQ(gv::ib::poll_cq<Ownership::kExclusive>(a->ch, c, gv::Budget{10'000'000'000ull}), Status::kAborted);
  EXPECT_LT(gv::sync::now_ns() - t0, 5'000'000'000ull);
  raiser.join();
}

TEST_F(SoftErrors, PollTimesOutWithoutWork) {
  Completion c;
  EXPECT_EQ(gv::ib::poll_cq<Ownership::kExclusive>(a->ch, c, gv::Budget{1'000'000}), Status::kTimeout);
}

TEST_F(SoftErrors, DeviceRejectsOversizedInlineAndSgeLists) {
  std::uint8_t big[65] = {};
  const Sge s{reinterpret_cast<std::uint64_t>(big), 65, 0};  // default max_inline is 64
  EXPECT_EQ(gv::ib::post_send<Ownership::kExclusive>(
                a->h, make_wr(WrOpcode::kRdmaWrite, &s, 1, gv::ib::kWrInline, b_buf->addr(), b_buf->mr->rkey())),
            Status::kInvalidArgument);
  const Sge two[2] = {a_buf->sge(0, 8), a_buf->sge(8, 8)};  // default max_send_sge is 1
  EXPECT_EQ(gv::ib::post_send<Ownership::kExclusive>(
                a->h, make_wr(WrOpcode::kRdmaWrite, two, 2, 0, b_buf->addr(), b_buf->mr->rkey())),
            Status::kInvalidArgument);
  const Sge r[2] = {b_buf->sge(0, 8), b_buf->sge(8, 8)};
  EXPECT_EQ(gv::ib::post_recv<Ownership::kExclusive>(b->h, r, 2), Status::kInvalidArgument);
  EXPECT_EQ(a->h.state->sq.reserved, 0u) << "a rejected request reserves nothing";
}

}  // namespace
}  // namespace gvt
