// Flag-in-data messages (put_ll / wait_ll) with host threads as ranks, over p2p (shared memory)
// and ib (the software HCA's CPU engine, where they travel as put_signal): every size at every
// alignment of source and destination, senders running ahead of their receivers, the bounds.
#include <chrono>
#include <random>

#include "rma_fixture.hpp"

namespace gvt {
namespace rma = gv::rma;

namespace {

class RmaLlHost : public RmaHost {};

std::uint64_t seed_of(int sender, std::uint32_t round) { return (std::uint64_t(sender) << 32) ^ (round * 0x9e37u); }

}  // namespace

// A ring: every rank sends round k to the next rank and receives round k from the one before, in
// one buffer, for every size 0..kMax with source and destination each at every offset 0..7.
// Through put_ll/wait_ll; then through an LlChannel per rank (sending to the next, receiving from
// the one before) between rounds of put_ll/wait_ll on the same buffer: the channel carries on from
// their sent and credit words, and they carry on after it.
TEST_P(RmaLlHost, EverySizeAtEveryAlignmentAroundARing) {
  constexpr std::size_t kMax = 41;
  for (const bool channel : {false, true}) {
    auto box = alloc<std::byte>(rma::ll_bytes(kMax));
    auto src = alloc<std::byte>(kMax + 16), out = alloc<std::byte>(kMax + 16);
    on_ranks([&](int r) {
      const auto R = static_cast<std::size_t>(r);
      const int to = (r + 1) % n(), from = (r + n() - 1) % n();
      std::uint32_t round = 0;
      rma::LlChannel<> ch;
      auto one = [&](std::size_t bytes, unsigned align, bool through_channel) {
        ++round;
        const std::size_t so = align, oo = (align * 5 + bytes) % 8;
        fill(src[R] + so, bytes, seed_of(r, round));
        std::memset(out[R], kPoison, kMax + 16);
        const Status put = through_channel ? ch.put(src[R] + so, bytes, round) : rma::put_ll(ep(r), box[R], src[R] + so, bytes, round, to);
        ASSERT_EQ(put, Status::kOk) << bytes << " B round " << round;
        const Status got = through_channel ? ch.wait(out[R] + oo, bytes, round) : rma::wait_ll(ep(r), box[R], bytes, round, out[R] + oo);
        ASSERT_EQ(got, Status::kOk) << bytes << " B round " << round;
        ASSERT_EQ(first_wrong(out[R] + oo, bytes, seed_of(from, round)), bytes)
            << bytes << " bytes, source offset " << so << ", destination offset " << oo << ", rank " << r;
        ASSERT_EQ(first_not(out[R], oo, kPoison), oo) << "bytes before the destination changed";
        ASSERT_EQ(first_not(out[R] + oo + bytes, kMax + 16 - oo - bytes, kPoison), kMax + 16 - oo - bytes)
            << "bytes after the destination changed";
      };
      if (channel) {
        for (unsigned align = 0; align < 8; ++align) one(5, align, false);
        ASSERT_EQ(ch.open(ep(r), box[R], kMax, to, from), Status::kOk);
      }
      for (std::size_t bytes = 0; bytes <= kMax; ++bytes)
        for (unsigned align = 0; align < 8; ++align) one(bytes, align, channel);
      if (channel)
        for (unsigned align = 0; align < 8; ++align) one(kMax, align, false);
    });
  }
}

// Rank 0 sends as fast as it can; rank 1 reads slowly at times. The sender waits for every round
// to be taken: each round arrives whole and in order. Through put_ll/wait_ll, then through an
// LlChannel on each side (whose puts never see a credit in a wait: this rank only sends).
TEST_P(RmaLlHost, SenderRunningAheadWaitsAndNothingIsLost) {
  constexpr std::size_t kMax = 300;
  constexpr std::uint32_t kRounds = 300;
  auto size_of = [](std::uint32_t k) { return static_cast<std::size_t>((k * 37u) % (kMax + 1)); };
  for (const bool channel : {false, true}) {
    auto box = alloc<std::byte>(rma::ll_bytes(kMax));
    auto src = alloc<std::byte>(kMax), out = alloc<std::byte>(kMax);
    on_ranks([&](int r) {
      const auto R = static_cast<std::size_t>(r);
      if (r > 1) return;
      rma::LlChannel<> ch;
      if (channel) {
        ASSERT_EQ(ch.open(ep(r), box[R], kMax, 1 - r, 1 - r), Status::kOk);
      }
      std::mt19937 rng(2611);
      for (std::uint32_t k = 1; k <= kRounds; ++k) {
        if (r == 0) {
          fill(src[R], size_of(k), seed_of(0, k));
          const Status s = channel ? ch.put(src[R], size_of(k), k) : rma::put_ll(ep(r), box[R], src[R], size_of(k), k, 1);
          ASSERT_EQ(s, Status::kOk) << "round " << k << (channel ? " (channel)" : "");
        } else {
          if (rng() % 16 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
          std::memset(out[R], kPoison, kMax);
          const Status s = channel ? ch.wait(out[R], size_of(k), k) : rma::wait_ll(ep(r), box[R], size_of(k), k, out[R]);
          ASSERT_EQ(s, Status::kOk) << "round " << k << (channel ? " (channel)" : "");
          ASSERT_EQ(first_wrong(out[R], size_of(k), seed_of(0, k)), size_of(k)) << "round " << k;
        }
      }
    });
  }
}

// A round sent before the last was taken is refused within the budget (kTimeout) and overwrites
// nothing; a repeated seq is refused; a wait for a round that never comes ends (timeout, abort).
TEST_P(RmaLlHost, RoundsAheadOfTheReaderAreRefusedNotCorrupting) {
  WorldOptions o = options();
  o.budget = gv::Budget{30'000'000};  // 30 ms
  make(o);
  constexpr std::size_t kBytes = 40;
  auto box = alloc<std::byte>(rma::ll_bytes(kBytes));
  auto src = alloc<std::byte>(kBytes), out = alloc<std::byte>(kBytes);
  fill(src[0], kBytes, seed_of(0, 1));
  ASSERT_EQ(rma::put_ll(ep(0), box[0], src[0], kBytes, 1, 1), Status::kOk);
  fill(src[0], kBytes, seed_of(0, 2));
  EXPECT_EQ(rma::put_ll(ep(0), box[0], src[0], kBytes, 2, 1), Status::kTimeout);
  ASSERT_EQ(rma::wait_ll(ep(1), box[1], kBytes, 1, out[1]), Status::kOk);
  EXPECT_EQ(first_wrong(out[1], kBytes, seed_of(0, 1)), kBytes) << "round 1 was overwritten by the refused round 2";
  EXPECT_EQ(rma::wait_ll(ep(1), box[1], kBytes, 2, out[1]), Status::kTimeout) << "the refused round arrived";
  ASSERT_EQ(rma::put_ll(ep(0), box[0], src[0], kBytes, 2, 1), Status::kOk);
  ASSERT_EQ(rma::wait_ll(ep(1), box[1], kBytes, 2, out[1]), Status::kOk);
  EXPECT_EQ(first_wrong(out[1], kBytes, seed_of(0, 2)), kBytes);
  EXPECT_EQ(rma::put_ll(ep(0), box[0], src[0], kBytes, 2, 1), Status::kInvalidArgument) << "seq of the last round again";
  o.budget = gv::Budget{30'000'000'000ull};  // 30 s: only the abort can end it soon
  make(o);
  box = alloc<std::byte>(rma::ll_bytes(kBytes));
  out = alloc<std::byte>(kBytes);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    world(1).abort();
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(rma::wait_ll(ep(1), box[1], kBytes, 1, out[1]), Status::kAborted);
  aborter.join();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
}

TEST_P(RmaLlHost, BadInputIsRefusedAndSendsNothing) {
  constexpr std::size_t kBytes = 32;
  auto box = alloc<std::byte>(rma::ll_bytes(kBytes) + 16);
  auto src = alloc<std::byte>(kBytes), out = alloc<std::byte>(kBytes);
  fill(src[0], kBytes, 7);
  std::byte outside[64];
  EXPECT_EQ(rma::put_ll(ep(0), box[0], src[0], kBytes, 0, 1), Status::kInvalidArgument) << "seq 0";
  EXPECT_EQ(rma::put_ll(ep(0), box[0] + 8, src[0], kBytes, 1, 1), Status::kInvalidArgument) << "misaligned buffer";
  EXPECT_EQ(rma::put_ll(ep(0), box[0], nullptr, kBytes, 1, 1), Status::kInvalidArgument) << "null source";
  EXPECT_EQ(rma::put_ll(ep(0), box[0], src[0], rma::kLlMaxBytes + 1, 1, 1), Status::kInvalidArgument);
  EXPECT_EQ(rma::put_ll(ep(0), box[0], src[0], kBytes, 1, n()), Status::kInvalidPe);
  EXPECT_EQ(rma::put_ll(ep(0), box[0], src[0], kBytes, 1, -1), Status::kInvalidPe);
  EXPECT_EQ(rma::put_ll(ep(0), outside, src[0], kBytes, 1, 1), Status::kOutOfBounds);
  EXPECT_EQ(rma::put_ll(ep(0), ep(0).heap + ep(0).heap_bytes - 16, src[0], kBytes, 1, 1), Status::kOutOfBounds);
  EXPECT_EQ(rma::wait_ll(ep(1), box[1], kBytes, 0, out[1]), Status::kInvalidArgument);
  EXPECT_EQ(rma::wait_ll(ep(1), box[1], kBytes, 1, nullptr), Status::kInvalidArgument);
  EXPECT_EQ(rma::wait_ll(ep(1), box[1] + 8, kBytes, 1, out[1]), Status::kInvalidArgument);
  EXPECT_EQ(rma::wait_ll(ep(1), outside, kBytes, 1, out[1]), Status::kOutOfBounds);
  for (int r = 0; r < n(); ++r) {
    const std::byte* b = box[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < rma::ll_bytes(kBytes) + 16; ++i) ASSERT_EQ(b[i], std::byte{0}) << "rank " << r << " byte " << i;
  }
}

// The channel refuses what put_ll/wait_ll refuse, plus messages over its size, a round from
// another PE than `from`, and use before a successful open; nothing is sent when it refuses.
TEST_P(RmaLlHost, ChannelRefusesBadInputAndRoundsAheadOfTheReader) {
  WorldOptions o = options();
  o.budget = gv::Budget{30'000'000};  // 30 ms
  make(o);
  constexpr std::size_t kBytes = 40;
  auto box = alloc<std::byte>(rma::ll_bytes(kBytes) + 16);
  auto src = alloc<std::byte>(kBytes + 8), out = alloc<std::byte>(kBytes);
  std::byte outside[64];
  rma::LlChannel<> closed;
  EXPECT_EQ(closed.put(src[0], kBytes, 1), Status::kInvalidArgument) << "never opened";
  EXPECT_EQ(closed.wait(out[0], kBytes, 1), Status::kInvalidArgument) << "never opened";
  EXPECT_EQ(closed.open(ep(0), box[0] + 8, kBytes, 1, 1), Status::kInvalidArgument) << "misaligned buffer";
  EXPECT_EQ(closed.put(src[0], kBytes, 1), Status::kInvalidArgument) << "a failed open leaves it closed";
  EXPECT_EQ(closed.open(ep(0), box[0], rma::kLlMaxBytes + 1, 1, 1), Status::kInvalidArgument);
  EXPECT_EQ(closed.open(ep(0), box[0], kBytes, n(), 1), Status::kInvalidPe);
  EXPECT_EQ(closed.open(ep(0), box[0], kBytes, 1, -1), Status::kInvalidPe);
  EXPECT_EQ(closed.open(ep(0), outside, kBytes, 1, 1), Status::kOutOfBounds);
  EXPECT_EQ(closed.open(ep(0), ep(0).heap + ep(0).heap_bytes - 16, kBytes, 1, 1), Status::kOutOfBounds);
  for (int r = 0; r < n(); ++r) {
    const std::byte* b = box[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < rma::ll_bytes(kBytes) + 16; ++i) ASSERT_EQ(b[i], std::byte{0}) << "rank " << r << " byte " << i;
  }
  rma::LlChannel<> a, b;
  ASSERT_EQ(a.open(ep(0), box[0], kBytes, 1, 1), Status::kOk);
  ASSERT_EQ(b.open(ep(1), box[1], kBytes, 0, 0), Status::kOk);
  EXPECT_EQ(a.put(src[0], kBytes + 1, 1), Status::kInvalidArgument) << "over the channel's size";
  EXPECT_EQ(a.put(src[0], kBytes, 0), Status::kInvalidArgument) << "seq 0";
  EXPECT_EQ(a.put(nullptr, kBytes, 1), Status::kInvalidArgument) << "null source";
  EXPECT_EQ(b.wait(out[1], kBytes + 1, 1), Status::kInvalidArgument) << "over the channel's size";
  EXPECT_EQ(b.wait(nullptr, kBytes, 1), Status::kInvalidArgument) << "null destination";
  fill(src[0], kBytes, seed_of(0, 1));
  ASSERT_EQ(a.put(src[0], kBytes, 1), Status::kOk);
  fill(src[0], kBytes, seed_of(0, 2));
  EXPECT_EQ(a.put(src[0], kBytes, 2), Status::kTimeout) << "round 1 not taken yet";
  ASSERT_EQ(b.wait(out[1], kBytes, 1), Status::kOk);
  EXPECT_EQ(first_wrong(out[1], kBytes, seed_of(0, 1)), kBytes) << "round 1 was overwritten by the refused round 2";
  EXPECT_EQ(b.wait(out[1], kBytes, 2), Status::kTimeout) << "the refused round arrived";
  EXPECT_EQ(a.put(src[0], kBytes, 1), Status::kInvalidArgument) << "seq of the last round again";
  ASSERT_EQ(a.put(src[0], kBytes, 2), Status::kOk);
  ASSERT_EQ(b.wait(out[1], kBytes, 2), Status::kOk);
  EXPECT_EQ(first_wrong(out[1], kBytes, seed_of(0, 2)), kBytes);
  if (n() > 2 && GetParam().transport == Transport::kIb) {
    // Rank 2 sends into rank 1's copy while rank 1's channel expects rounds from rank 0. Over ib
    // the channel's wait is wait_ll's, which reads the sender in the header. (Over p2p a thread's
    // or block's channel watches only the words: one sender per copy is the caller's contract.)
    ASSERT_EQ(rma::put_ll(ep(2), box[2], src[2], kBytes, 3, 1), Status::kOk);
    EXPECT_EQ(b.wait(out[1], kBytes, 3), Status::kInvalidPe) << "a round from a PE the channel does not receive from";
  }
  world(0).abort();
  EXPECT_EQ(a.put(src[0], kBytes, 3), Status::kAborted);
  rma::LlChannel<> c;
  EXPECT_EQ(c.open(ep(0), box[0], kBytes, 1, 1), Status::kAborted);
}

// wait_put around a ring: every rank puts round 1, then each call waits for round k from the one
// before and puts round k + 1 to the next, sizes and offsets changing every round; then a relay,
// each rank forwarding what it received (src is out), so round j holds what rank r - j first sent.
TEST_P(RmaLlHost, ChannelWaitPutAnswersEveryRoundAndRelays) {
  constexpr std::size_t kMax = 70;
  constexpr std::uint32_t kRounds = 2 * (kMax + 1), kRelay = 7;
  auto size_of = [](std::uint32_t k) { return static_cast<std::size_t>((k * 29u) % (kMax + 1)); };
  auto box = alloc<std::byte>(rma::ll_bytes(kMax));
  auto src = alloc<std::byte>(kMax + 8), out = alloc<std::byte>(kMax + 16);
  on_ranks([&](int r) {
    const auto R = static_cast<std::size_t>(r);
    const int to = (r + 1) % n(), from = (r + n() - 1) % n();
    rma::LlChannel<> ch;
    ASSERT_EQ(ch.open(ep(r), box[R], kMax, to, from), Status::kOk);
    fill(src[R] + 1 % 8, size_of(1), seed_of(r, 1));
    ASSERT_EQ(ch.put(src[R] + 1 % 8, size_of(1), 1), Status::kOk);
    for (std::uint32_t k = 1; k <= kRounds; ++k) {
      const std::size_t bytes = size_of(k), oo = (k * 3 + bytes) % 8, so = (k + 1) % 8;
      fill(src[R] + so, size_of(k + 1), seed_of(r, k + 1));
      std::memset(out[R], kPoison, kMax + 16);
      const Status s = k < kRounds ? ch.wait_put(out[R] + oo, bytes, k, src[R] + so, size_of(k + 1), k + 1)
                                   : ch.wait(out[R] + oo, bytes, k);
      ASSERT_EQ(s, Status::kOk) << "round " << k << ", rank " << r;
      ASSERT_EQ(first_wrong(out[R] + oo, bytes, seed_of(from, k)), bytes) << "round " << k << ", rank " << r;
      ASSERT_EQ(first_not(out[R], oo, kPoison), oo) << "bytes before the destination changed, round " << k;
    }
    constexpr std::size_t kBytes = 24;
    fill(out[R], kBytes, seed_of(r, 0));
    ASSERT_EQ(ch.put(out[R], kBytes, kRounds + 1), Status::kOk);
    for (std::uint32_t j = 1; j <= kRelay; ++j) {
      const std::uint32_t k = kRounds + j;
      const Status s = j < kRelay ? ch.wait_put(out[R], kBytes, k, out[R], kBytes, k + 1) : ch.wait(out[R], kBytes, k);
      ASSERT_EQ(s, Status::kOk) << "relay round " << j << ", rank " << r;
      const int origin = ((r - static_cast<int>(j)) % n() + n()) % n();
      ASSERT_EQ(first_wrong(out[R], kBytes, seed_of(origin, 0)), kBytes) << "relay round " << j << ", rank " << r;
    }
  });
}

// A wait_put whose wait fails returns the wait's status and puts nothing: the peer's wait for the
// reply times out, and the channel's next put is still the round after the last one sent.
TEST_P(RmaLlHost, ChannelWaitPutWhoseWaitFailsSendsNothing) {
  WorldOptions o = options();
  o.budget = gv::Budget{30'000'000};  // 30 ms
  make(o);
  constexpr std::size_t kBytes = 16;
  auto box = alloc<std::byte>(rma::ll_bytes(kBytes));
  auto src = alloc<std::byte>(kBytes), out = alloc<std::byte>(kBytes);
  rma::LlChannel<> a, b;
  ASSERT_EQ(a.open(ep(0), box[0], kBytes, 1, 1), Status::kOk);
  ASSERT_EQ(b.open(ep(1), box[1], kBytes, 0, 0), Status::kOk);
  fill(src[1], kBytes, seed_of(1, 1));
  EXPECT_EQ(b.wait_put(out[1], kBytes, 1, src[1], kBytes, 1), Status::kTimeout) << "rank 0 sent nothing";
  EXPECT_EQ(a.wait(out[0], kBytes, 1), Status::kTimeout) << "a reply left after a failed wait";
  EXPECT_EQ(b.wait_put(out[1], kBytes + 1, 1, src[1], kBytes, 1), Status::kInvalidArgument) << "over the channel's size";
  EXPECT_EQ(a.wait(out[0], kBytes, 1), Status::kTimeout) << "a reply left after a refused wait";
  fill(src[0], kBytes, seed_of(0, 1));
  ASSERT_EQ(a.put(src[0], kBytes, 1), Status::kOk);
  ASSERT_EQ(b.wait_put(out[1], kBytes, 1, src[1], kBytes, 1), Status::kOk);
  EXPECT_EQ(first_wrong(out[1], kBytes, seed_of(0, 1)), kBytes);
  ASSERT_EQ(a.wait(out[0], kBytes, 1), Status::kOk);
  EXPECT_EQ(first_wrong(out[0], kBytes, seed_of(1, 1)), kBytes);
}

INSTANTIATE_TEST_SUITE_P(Transports, RmaLlHost,
                         ::testing::Values(RmaParam{Transport::kP2p, 2}, RmaParam{Transport::kP2p, 3},
                                           RmaParam{Transport::kIb, 2}, RmaParam{Transport::kIb, 3}),
                         rma_param_name);

}  // namespace gvt
