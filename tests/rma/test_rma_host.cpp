// rma semantics with host threads as ranks (one process, World::create_local), over the p2p
// transport (shared memory) and the ib transport (the software HCA's CPU engine): every
// operation against a host reference, with seeded payloads and poisoned destinations.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <set>

#include "../../host_setup/src/world/placement.hpp"
#include "rma_fixture.hpp"

namespace gvt {
namespace rma = gv::rma;

namespace {

constexpr std::size_t kSizes[] = {0, 1, 3, 8, 15, 16, 17, 63, 64, 65, 255, 4096, 65537, std::size_t{1} << 20};
constexpr std::size_t kSlot = (std::size_t{1} << 20) + 64;  // one size of kSizes, at an odd offset


}  // namespace

TEST_P(RmaHost, PutDeliversEverySizeAndOffset) {
  auto src = alloc<std::byte>(kSlot), dst = alloc<std::byte>(kSlot + 64);
  for (std::size_t si = 0; si < std::size(kSizes); ++si) {
    const std::size_t bytes = kSizes[si];
    const std::size_t off = si % 3;  // unaligned destinations too
    on_ranks([&](int r) {
      std::memset(dst[static_cast<std::size_t>(r)], kPoison, kSlot + 64);
      fill(src[static_cast<std::size_t>(r)], bytes, 1000 * si + static_cast<std::uint64_t>(r));
    });
    on_ranks([&](int r) {
      ASSERT_EQ(rma::barrier(ep(r)), Status::kOk);
      const int to = (r + 1) % n();
      EXPECT_EQ(rma::put(ep(r), dst[static_cast<std::size_t>(r)] + off, src[static_cast<std::size_t>(r)], bytes, to), Status::kOk);
      ASSERT_EQ(rma::barrier(ep(r)), Status::kOk);
      const int from = (r + n() - 1) % n();
      const std::byte* d = dst[static_cast<std::size_t>(r)];
      EXPECT_EQ(first_not(d, off, kPoison), off) << "bytes before the destination changed, size " << bytes;
      EXPECT_EQ(first_wrong(d + off, bytes, 1000 * si + static_cast<std::uint64_t>(from)), bytes)
          << "size " << bytes << " rank " << r;
      EXPECT_EQ(first_not(d + off + bytes, 64 - off, kPoison), 64 - off) << "bytes after the destination changed, size " << bytes;
    });
  }
}

TEST_P(RmaHost, GetAndNbiFormsMoveTheSameBytes) {
  auto src = alloc<std::byte>(kSlot), dst = alloc<std::byte>(kSlot);
  for (std::size_t si = 0; si < std::size(kSizes); ++si) {
    const std::size_t bytes = kSizes[si];
    on_ranks([&](int r) {
      fill(src[static_cast<std::size_t>(r)], bytes, 77 + si * 31 + static_cast<std::uint64_t>(r));
      std::memset(dst[static_cast<std::size_t>(r)], kPoison, kSlot);
      ASSERT_EQ(rma::barrier(ep(r)), Status::kOk);
      const int from = (r + 1) % n();
      const bool nbi = (si & 1) != 0;
      std::byte* d = dst[static_cast<std::size_t>(r)];
      const std::byte* s = src[static_cast<std::size_t>(r)];  // the symmetric name of the peer's copy
      const Status st = nbi ? rma::get_nbi(ep(r), d, s, bytes, from) : rma::get(ep(r), d, s, bytes, from);
      EXPECT_EQ(st, Status::kOk);
      if (nbi) {
        EXPECT_EQ(rma::quiet(ep(r)), Status::kOk);
      }
      EXPECT_EQ(first_wrong(d, bytes, 77 + si * 31 + static_cast<std::uint64_t>(from)), bytes) << "get of " << bytes;
      EXPECT_EQ(first_not(d + bytes, 16, kPoison), 16u);
      // put_nbi back into the peer's dst, completed by quiet, seen after the barrier.
      ASSERT_EQ(rma::barrier(ep(r)), Status::kOk);
      std::memset(d, kPoison, kSlot);
      ASSERT_EQ(rma::barrier(ep(r)), Status::kOk);
      EXPECT_EQ(rma::put_nbi(ep(r), d, s, bytes, from), Status::kOk);
      EXPECT_EQ(rma::quiet(ep(r)), Status::kOk);
      ASSERT_EQ(rma::barrier(ep(r)), Status::kOk);
      const int sender = (r + n() - 1) % n();
      EXPECT_EQ(first_wrong(d, bytes, 77 + si * 31 + static_cast<std::uint64_t>(sender)), bytes)
          << "put_nbi of " << bytes << " from rank " << sender;
    });
  }
}

// Host ranks' heaps are host memory: no endpoint says its direct peers share its GPU (whose
// signals would be released at device scope only).
TEST_P(RmaHost, EndpointSaysNoPeerSharesAGpu) {
  for (int r = 0; r < n(); ++r) EXPECT_EQ(ep(r).direct_same_gpu, 0u) << "rank " << r;
}

TEST_P(RmaHost, PAndGMoveOneValueOfEverySize) {
  auto b8 = alloc<std::uint8_t>(64);
  auto b16 = alloc<std::int16_t>(64);
  auto b32 = alloc<std::int32_t>(64);
  auto b64 = alloc<std::uint64_t>(64);
  auto bf = alloc<float>(64);
  auto bd = alloc<double>(64);
  on_ranks([&](int r) {
    const auto R = static_cast<std::size_t>(r);
    const int to = (r + 1) % n();
    EXPECT_EQ(rma::p(ep(r), b8[R] + r, static_cast<std::uint8_t>(0xC0 + r), to), Status::kOk);
    EXPECT_EQ(rma::p(ep(r), b16[R] + r, static_cast<std::int16_t>(-1000 - r), to), Status::kOk);
    EXPECT_EQ(rma::p(ep(r), b32[R] + r, static_cast<std::int32_t>(-70000 - r), to), Status::kOk);
    EXPECT_EQ(rma::p(ep(r), b64[R] + r, std::uint64_t{0x0123456789abcdefull} + static_cast<std::uint64_t>(r), to), Status::kOk);
    EXPECT_EQ(rma::p(ep(r), bf[R] + r, 1.5f + static_cast<float>(r), to), Status::kOk);
    EXPECT_EQ(rma::p(ep(r), bd[R] + r, -2.25 - r, to), Status::kOk);
    ASSERT_EQ(rma::barrier(ep(r)), Status::kOk);
    const int from = (r + n() - 1) % n();
    EXPECT_EQ(b8[R][from], static_cast<std::uint8_t>(0xC0 + from));
    EXPECT_EQ(b16[R][from], static_cast<std::int16_t>(-1000 - from));
    EXPECT_EQ(b32[R][from], static_cast<std::int32_t>(-70000 - from));
    EXPECT_EQ(b64[R][from], 0x0123456789abcdefull + static_cast<std::uint64_t>(from));
    EXPECT_EQ(bf[R][from], 1.5f + static_cast<float>(from));
    EXPECT_EQ(bd[R][from], -2.25 - from);
    // g reads what the peer holds: its own slot, written by its predecessor.
    std::uint8_t v8 = 0;
    std::int16_t v16 = 0;
    std::int32_t v32 = 0;
    std::uint64_t v64 = 0;
    float vf = 0;
    double vd = 0;
    EXPECT_EQ(rma::g(ep(r), b8[R] + r, to, v8), Status::kOk);
    EXPECT_EQ(rma::g(ep(r), b16[R] + r, to, v16), Status::kOk);
    EXPECT_EQ(rma::g(ep(r), b32[R] + r, to, v32), Status::kOk);
    EXPECT_EQ(rma::g(ep(r), b64[R] + r, to, v64), Status::kOk);
    EXPECT_EQ(rma::g(ep(r), bf[R] + r, to, vf), Status::kOk);
    EXPECT_EQ(rma::g(ep(r), bd[R] + r, to, vd), Status::kOk);
    EXPECT_EQ(v8, static_cast<std::uint8_t>(0xC0 + r));
    EXPECT_EQ(v16, static_cast<std::int16_t>(-1000 - r));
    EXPECT_EQ(v32, static_cast<std::int32_t>(-70000 - r));
    EXPECT_EQ(v64, 0x0123456789abcdefull + static_cast<std::uint64_t>(r));
    EXPECT_EQ(vf, 1.5f + static_cast<float>(r));
    EXPECT_EQ(vd, -2.25 - r);
  });
}

// Rank 0 and 1 bounce a message; each round's payload differs, and the receiver checks it as
// soon as the signal says it is there: data is visible before its signal.
TEST_P(RmaHost, PutSignalDataBeforeSignal) {
  for (const std::size_t bytes : {std::size_t{8}, std::size_t{64}, std::size_t{4096}, std::size_t{100000}}) {
    for (const SignalOp op : {SignalOp::kAdd, SignalOp::kSet}) {
      auto buf = alloc<std::byte>(bytes), src = alloc<std::byte>(bytes);
      auto sig = alloc<std::uint64_t>(1);
      constexpr int kRounds = 100;
      on_ranks([&](int r) {
        if (r > 1) return;
        const auto R = static_cast<std::size_t>(r);
        const int peer = 1 - r;
        for (int k = 1; k <= kRounds; ++k) {
          if ((k & 1) == (r == 0 ? 1 : 0)) {  // my turn to send
            fill(src[R], bytes, static_cast<std::uint64_t>(k) * 7 + bytes);
            ASSERT_EQ(rma::put_signal(ep(r), buf[R], src[R], bytes, sig[R], op == SignalOp::kAdd ? 1 : k, op, peer), Status::kOk);
          } else {
            // add: this rank's j-th arrival (j = (k + 1) / 2) makes the word j; set: the round.
            const auto want = static_cast<std::uint64_t>(op == SignalOp::kAdd ? (k + 1) / 2 : k);
            ASSERT_EQ(rma::wait_until(ep(r), sig[R], op == SignalOp::kAdd ? Cmp::kGe : Cmp::kEq, want), Status::kOk);
            ASSERT_EQ(first_wrong(buf[R], bytes, static_cast<std::uint64_t>(k) * 7 + bytes), bytes) << "round " << k;
          }
        }
      });
      on_ranks([&](int r) { EXPECT_EQ(rma::barrier(ep(r)), Status::kOk); });
      for (int r = n() - 1; r >= 0; --r) {
        world(r).free(sig[static_cast<std::size_t>(r)]);
        world(r).free(src[static_cast<std::size_t>(r)]);
        world(r).free(buf[static_cast<std::size_t>(r)]);
      }
    }
  }
}

TEST_P(RmaHost, SignalSetAddAndWaitComparisons) {
  auto sig = alloc<std::uint64_t>(4);
  auto w32 = alloc<std::int32_t>(4);
  on_ranks([&](int r) {
    const auto R = static_cast<std::size_t>(r);
    const int to = (r + 1) % n();
    EXPECT_EQ(rma::signal(ep(r), sig[R] + 0, 41, SignalOp::kSet, to), Status::kOk);
    EXPECT_EQ(rma::signal(ep(r), sig[R] + 0, 1, SignalOp::kAdd, to), Status::kOk);
    EXPECT_EQ(rma::signal(ep(r), sig[R] + 1, 5, SignalOp::kAdd, to), Status::kOk);
    EXPECT_EQ(rma::signal(ep(r), sig[R] + 1, 6, SignalOp::kAdd, to), Status::kOk);
    std::uint64_t seen = 0;
    EXPECT_EQ(rma::wait_until(ep(r), sig[R] + 0, Cmp::kEq, std::uint64_t{42}, &seen), Status::kOk);
    EXPECT_EQ(seen, 42u);
    EXPECT_EQ(rma::wait_until(ep(r), sig[R] + 1, Cmp::kGe, std::uint64_t{11}), Status::kOk);
    EXPECT_EQ(rma::signal_fetch(sig[R] + 1), 11u);
    EXPECT_EQ(rma::wait_until(ep(r), sig[R] + 1, Cmp::kNe, std::uint64_t{0}), Status::kOk);
    EXPECT_EQ(rma::wait_until(ep(r), sig[R] + 1, Cmp::kGt, std::uint64_t{10}), Status::kOk);
    EXPECT_EQ(rma::wait_until(ep(r), sig[R] + 1, Cmp::kLe, std::uint64_t{11}), Status::kOk);
    EXPECT_EQ(rma::wait_until(ep(r), sig[R] + 1, Cmp::kLt, std::uint64_t{12}), Status::kOk);
    EXPECT_TRUE(rma::test(ep(r), sig[R] + 0, Cmp::kEq, std::uint64_t{42}));
    EXPECT_FALSE(rma::test(ep(r), sig[R] + 0, Cmp::kGt, std::uint64_t{42}));
    EXPECT_FALSE(rma::test(ep(r), sig[R] + 0, Cmp::kLt, std::uint64_t{42}));
    EXPECT_TRUE(rma::test(ep(r), sig[R] + 0, Cmp::kLe, std::uint64_t{42}));
    EXPECT_FALSE(rma::test(ep(r), sig[R] + 0, Cmp::kNe, std::uint64_t{42}));
    // 32-bit words, signed comparisons.
    EXPECT_EQ(rma::p(ep(r), w32[R], std::int32_t{-5}, to), Status::kOk);
    EXPECT_EQ(rma::wait_until(ep(r), w32[R], Cmp::kLt, std::int32_t{0}), Status::kOk);
    EXPECT_TRUE(rma::test(ep(r), w32[R], Cmp::kEq, std::int32_t{-5}));
  });
}

TEST_P(RmaHost, WaitBudgetExpiresWithTimeoutAndAbortEndsIt) {
  WorldOptions o = options();
  o.budget = gv::Budget{50'000'000};  // 50 ms
  make(o);
  auto sig = alloc<std::uint64_t>(1);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(rma::wait_until(ep(0), sig[0], Cmp::kEq, std::uint64_t{1}), Status::kTimeout);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(s, 0.04);
  EXPECT_LT(s, 5.0);
  o.budget = gv::Budget{30'000'000'000ull};  // 30 s: only the abort can end it soon
  make(o);
  sig = alloc<std::uint64_t>(1);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    world(0).abort();
  });
  const auto t1 = std::chrono::steady_clock::now();
  EXPECT_EQ(rma::wait_until(ep(0), sig[0], Cmp::kEq, std::uint64_t{1}), Status::kAborted);
  aborter.join();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count(), 5.0);
}

// Every rank adds to rank 0's counters concurrently: each old value is returned exactly once.
TEST_P(RmaHost, AtomicsAreExactlyOnce) {
  auto c64 = alloc<std::uint64_t>(2);
  auto c32 = alloc<std::uint32_t>(4);  // c32[1] shares an 8-byte word with c32[0]
  constexpr int kPer = 200;
  std::vector<std::vector<std::uint64_t>> olds64(static_cast<std::size_t>(n())), olds32(static_cast<std::size_t>(n()));
  on_ranks([&](int r) {
    const auto R = static_cast<std::size_t>(r);
    for (int i = 0; i < kPer; ++i) {
      std::uint64_t o64 = 0;
      std::uint32_t o32 = 0;
      ASSERT_EQ(rma::fetch_add(ep(r), c64[R], std::uint64_t{1}, 0, o64), Status::kOk);
      ASSERT_EQ(rma::fetch_add(ep(r), c32[R] + 1, std::uint32_t{1}, 0, o32), Status::kOk);
      ASSERT_EQ(rma::add(ep(r), c32[R], std::uint32_t{3}, 0), Status::kOk);
      olds64[R].push_back(o64);
      olds32[R].push_back(o32);
    }
  });
  on_ranks([&](int r) { EXPECT_EQ(rma::barrier(ep(r)), Status::kOk); });
  const std::uint64_t total = static_cast<std::uint64_t>(kPer) * static_cast<std::uint64_t>(n());
  EXPECT_EQ(c64[0][0], total);
  EXPECT_EQ(c32[0][1], total);
  EXPECT_EQ(c32[0][0], 3 * total);
  for (auto* olds : {&olds64, &olds32}) {
    std::vector<std::uint64_t> all;
    for (auto& v : *olds) all.insert(all.end(), v.begin(), v.end());
    std::sort(all.begin(), all.end());
    for (std::uint64_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], i) << "an old value seen twice or never";
  }
  // compare_swap: exactly one rank wins; swap and fetch see each other.
  std::atomic<int> winners{0};
  on_ranks([&](int r) {
    const auto R = static_cast<std::size_t>(r);
    std::uint64_t old = 99;
    ASSERT_EQ(rma::compare_swap(ep(r), c64[R] + 1, std::uint64_t{0}, static_cast<std::uint64_t>(r + 1), 0, old), Status::kOk);
    if (old == 0) ++winners;
    else EXPECT_GE(old, 1u);
    std::int32_t o32 = 0;
    ASSERT_EQ(rma::compare_swap(ep(r), reinterpret_cast<std::int32_t*>(c32[R] + 2), std::int32_t{0}, std::int32_t{-1 - r}, 0, o32), Status::kOk);
    if (o32 == 0) ++winners;
  });
  EXPECT_EQ(winners.load(), 2);
  on_ranks([&](int r) { EXPECT_EQ(rma::barrier(ep(r)), Status::kOk); });
  on_ranks([&](int r) {
    if (r != n() - 1) return;
    const auto R = static_cast<std::size_t>(r);
    std::uint64_t before = 0, now = 0;
    ASSERT_EQ(rma::fetch(ep(r), c64[R] + 1, 0, before), Status::kOk);
    EXPECT_GE(before, 1u);
    ASSERT_EQ(rma::swap(ep(r), c64[R] + 1, std::uint64_t{777}, 0, now), Status::kOk);
    EXPECT_EQ(now, before);
    float fold = 0;
    ASSERT_EQ(rma::swap(ep(r), reinterpret_cast<float*>(c32[R] + 3), 2.5f, 0, fold), Status::kOk);
    EXPECT_EQ(fold, 0.0f);
    ASSERT_EQ(rma::fetch(ep(r), c64[R] + 1, 0, now), Status::kOk);
    EXPECT_EQ(now, 777u);
  });
  EXPECT_EQ(reinterpret_cast<float*>(c32[0] + 3)[0], 2.5f);
}

TEST_P(RmaHost, BarrierSeparatesRounds) {
  auto slots = alloc<std::uint64_t>(64);
  on_ranks([&](int r) {
    const auto R = static_cast<std::size_t>(r);
    for (std::uint64_t round = 1; round <= 50; ++round) {
      for (int q = 0; q < n(); ++q) ASSERT_EQ(rma::p(ep(r), slots[R] + r, round, q), Status::kOk);
      ASSERT_EQ(rma::barrier(ep(r)), Status::kOk);
      for (int q = 0; q < n(); ++q) ASSERT_EQ(slots[R][q], round) << "rank " << r << " slot " << q;
      ASSERT_EQ(rma::barrier(ep(r)), Status::kOk);
    }
  });
}

// Bad input: a status, and nothing written.
TEST_P(RmaHost, BadInputIsRejectedAndTouchesNothing) {
  auto buf = alloc<std::byte>(256);
  auto sig = alloc<std::uint64_t>(2);
  const Endpoint& e = ep(0);
  std::byte local[64];
  std::memset(local, 1, sizeof(local));
  on_ranks([&](int r) { std::memset(buf[static_cast<std::size_t>(r)], kPoison, 256); });
  const int bad_pes[] = {-1, n(), 1 << 30};
  for (const int pe : bad_pes) {
    EXPECT_EQ(rma::put(e, buf[0], local, 8, pe), Status::kInvalidPe);
    EXPECT_EQ(rma::get(e, local, buf[0], 8, pe), Status::kInvalidPe);
    EXPECT_EQ(rma::p(e, sig[0], std::uint64_t{1}, pe), Status::kInvalidPe);
    std::uint64_t old;
    EXPECT_EQ(rma::fetch_add(e, sig[0], std::uint64_t{1}, pe, old), Status::kInvalidPe);
    EXPECT_EQ(rma::signal(e, sig[0], 1, SignalOp::kSet, pe), Status::kInvalidPe);
    EXPECT_EQ(rma::ptr(e, buf[0], pe), nullptr);
  }
  const int to = 1;
  EXPECT_EQ(rma::put(e, local, local, 8, to), Status::kOutOfBounds) << "destination off the heap";
  EXPECT_EQ(rma::put(e, e.heap, local, 8, to), Status::kOutOfBounds) << "the rma layer's own words";
  EXPECT_EQ(rma::put(e, e.heap + e.heap_bytes - 4, local, 8, to), Status::kOutOfBounds) << "runs past the end";
  EXPECT_EQ(rma::put(e, buf[0], local, std::numeric_limits<std::size_t>::max(), to), Status::kOutOfBounds) << "size overflows";
  EXPECT_EQ(rma::get(e, local, buf[0] - 1 - (reinterpret_cast<std::byte*>(buf[0]) - e.heap), 8, to), Status::kOutOfBounds);
  EXPECT_EQ(rma::put_signal(e, buf[0], local, 8, reinterpret_cast<std::uint64_t*>(local), 1, SignalOp::kAdd, to),
            Status::kOutOfBounds) << "signal off the heap";
  EXPECT_EQ(rma::put_signal(e, buf[0], local, 8, reinterpret_cast<std::uint64_t*>(buf[0] + 4), 1, SignalOp::kAdd, to),
            Status::kInvalidArgument) << "misaligned signal";
  std::uint64_t old = 0;
  EXPECT_EQ(rma::fetch_add(e, reinterpret_cast<std::uint64_t*>(buf[0] + 4), std::uint64_t{1}, to, old), Status::kInvalidArgument);
  EXPECT_EQ(rma::wait_until(e, reinterpret_cast<const std::uint64_t*>(local), Cmp::kEq, std::uint64_t{0}), Status::kOutOfBounds);
  EXPECT_EQ(first_not(buf[1], 256, kPoison), 256u) << "a rejected operation wrote to the peer";
  EXPECT_EQ(first_not(local, sizeof(local), 1), sizeof(local));
  if (GetParam().transport == Transport::kIb) {
    // A large put from memory outside the heap cannot be described to the HCA.
    std::vector<std::byte> big(4096, std::byte{3});
    EXPECT_EQ(rma::put(e, buf[0], big.data(), big.size(), to), Status::kInvalidArgument);
    EXPECT_EQ(rma::ptr(e, buf[0], to), nullptr);
  } else {
    EXPECT_EQ(rma::ptr(e, buf[0], to), static_cast<void*>(buf[1]));
  }
  EXPECT_EQ(rma::ptr(e, buf[0], 0), static_cast<void*>(buf[0]));
  EXPECT_EQ(rma::transport(e, 0), Transport::kSelf);
  EXPECT_EQ(rma::transport(e, to), GetParam().transport);
  EXPECT_EQ(rma::transport(e, n()), Transport::kNone);
}

TEST_P(RmaHost, HeapAllocatorIsSymmetricAndReportsExhaustion) {
  std::vector<void*> a, b, c;
  for (int r = 0; r < n(); ++r) {
    a.push_back(world(r).alloc(1000));
    b.push_back(world(r).alloc(5000, 4096));
    world(r).free(a.back());
    c.push_back(world(r).alloc(100));
  }
  for (int r = 0; r < n(); ++r) {
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b[static_cast<std::size_t>(r)]) % 4096, 0u);
    EXPECT_EQ(c[static_cast<std::size_t>(r)], a[static_cast<std::size_t>(r)]) << "freed space is reused first";
  }
  const std::size_t before = world(0).heap_free();
  try {
    (void)world(0).alloc(world(0).heap_bytes() + 1);
    FAIL() << "no error for an exhausted heap";
  } catch (const gv::Error& e) {
    EXPECT_NE(std::string(e.what()).find("exhausted"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("GV_HEAP_BYTES"), std::string::npos) << e.what();
  }
  EXPECT_EQ(world(0).heap_free(), before);
  EXPECT_THROW(world(0).free(static_cast<std::byte*>(b[0]) + 8), gv::Error);
}

INSTANTIATE_TEST_SUITE_P(Transports, RmaHost,
                         ::testing::Values(RmaParam{Transport::kP2p, 2}, RmaParam{Transport::kP2p, 3},
                                           RmaParam{Transport::kIb, 2}, RmaParam{Transport::kIb, 3}),
                         rma_param_name);

}  // namespace gvt

namespace gvt {
// More ranks than Endpoint::near holds: ranks 8 and 9 are reached through the peer table.
TEST(RmaHostManyRanks, RingAndAtomicsBeyondTheNearPeers) {
  for (const Transport t : {Transport::kP2p, Transport::kIb}) {
    WorldOptions o;
    o.memory = WorldOptions::Memory::kHost;
    o.transport = t;
    o.heap_bytes = 1 << 20;
    o.ib_lanes = 1;
    auto w = World::create_local(10, o);
    const int n = static_cast<int>(w.size());
    std::vector<std::uint64_t*> data, sig, counter;
    for (auto& x : w) {
      data.push_back(static_cast<std::uint64_t*>(x->alloc(64)));
      sig.push_back(static_cast<std::uint64_t*>(x->alloc(8)));
      counter.push_back(static_cast<std::uint64_t*>(x->alloc(8)));
    }
    std::vector<std::thread> ts;
    for (int r = 0; r < n; ++r)
      ts.emplace_back([&, r] {
        const auto R = static_cast<std::size_t>(r);
        const Endpoint& e = w[R]->endpoint();
        std::uint64_t* src = data[R] + 4;
        src[0] = 1000 + static_cast<std::uint64_t>(r);
        EXPECT_EQ(gv::rma::put_signal(e, data[R], src, 8, sig[R], 1, SignalOp::kAdd, (r + 1) % n), Status::kOk);
        EXPECT_EQ(gv::rma::wait_until(e, sig[R], Cmp::kEq, std::uint64_t{1}), Status::kOk);
        EXPECT_EQ(data[R][0], 1000u + static_cast<std::uint64_t>((r + n - 1) % n)) << gv::rma::to_string(t) << " rank " << r;
        EXPECT_EQ(gv::rma::add(e, counter[R], std::uint64_t{1}, 9), Status::kOk);
        EXPECT_EQ(gv::rma::barrier(e), Status::kOk);
        std::uint64_t total = 0;
        EXPECT_EQ(gv::rma::fetch(e, counter[R], 9, total), Status::kOk);
        EXPECT_EQ(total, static_cast<std::uint64_t>(n));
        EXPECT_EQ(gv::rma::transport(e, 9), r == 9 ? Transport::kSelf : t);
      });
    for (auto& th : ts) th.join();
  }
}
}  // namespace gvt

namespace gvt {
// An asynchronous error of the software HCA (here a doorbell naming another QP: the CPU engine
// raises kQpFatal and puts the QP in error) becomes the World's failure: check() throws with
// the HCA's message, describe() names it, and this rank's waits end with kAborted.
TEST(RmaHostFailures, HcaAsyncErrorBecomesTheWorldsFailure) {
  WorldOptions o;
  o.memory = WorldOptions::Memory::kHost;
  o.transport = Transport::kIb;
  o.heap_bytes = 1 << 20;
  o.ib_lanes = 1;
  o.budget = gv::Budget{30'000'000'000ull};  // 30 s: only the abort can end the wait soon
  auto w = World::create_local(2, o);
  EXPECT_NO_THROW(w[0]->check());
  const Endpoint& e = w[0]->endpoint();
  const gv::ib::QpHandle& qp = e.peers[1].ib[0].qp;
  const std::uint32_t other_qpn = qp.qpn + 1;
  // An atomic store, as a poster's doorbell is (the engine polls it from its own thread).
  gv::sync::store_release(qp.doorbell, std::uint64_t{gv::byteswap(static_cast<std::uint32_t>(other_qpn << 8))} << 32);
  std::string why;
  const auto t0 = std::chrono::steady_clock::now();
  while (why.empty() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
    try {
      w[0]->check();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } catch (const gv::Error& x) {
      why = x.what();
    }
  }
  EXPECT_NE(why.find("rank 0: the software HCA reported"), std::string::npos) << why;
  EXPECT_NE(w[0]->describe().find("failed: rank 0"), std::string::npos) << w[0]->describe();
  auto* sig = static_cast<std::uint64_t*>(w[0]->alloc(8));
  EXPECT_EQ(gv::rma::wait_until(e, sig, Cmp::kEq, std::uint64_t{1}), Status::kAborted);
  EXPECT_NO_THROW(w[1]->check());  // the other rank's HCA reported nothing
}

// GV_IB_LANES sets the queue pairs per ib peer; anything but a power of two in 1..32 is refused
// with its name and value.
TEST(RmaHostFailures, IbLanesFromTheEnvironment) {
  WorldOptions o;
  o.memory = WorldOptions::Memory::kHost;
  o.transport = Transport::kIb;
  o.heap_bytes = 1 << 20;
  for (const char* bad : {"3", "64", "0", "8x", "-4"}) {
    ASSERT_EQ(setenv("GV_IB_LANES", bad, 1), 0);
    try {
      (void)World::create_local(2, o);
      ADD_FAILURE() << "GV_IB_LANES=" << bad << " was taken";
    } catch (const gv::Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("GV_IB_LANES='") + bad + "'"), std::string::npos) << e.what();
    }
  }
  ASSERT_EQ(setenv("GV_IB_LANES", "8", 1), 0);
  auto w = World::create_local(2, o);
  ASSERT_EQ(unsetenv("GV_IB_LANES"), 0);
  EXPECT_EQ(w[0]->endpoint().peers[1].lanes, 8u);
  EXPECT_EQ(w[1]->endpoint().peers[0].lanes, 8u);
}
// The common case's test (detail::direct: near peer, in the user heap, aligned, in one select)
// takes the fast path for exactly what the general checks (route, heap_offset, the alignment)
// accept, and points where they do: offsets around both ends of the user heap and beyond,
// sizes up to overflow, every PE class, on a well-formed endpoint and on one whose user offset
// lies past its heap.
TEST(RmaDirect, TakesTheFastPathForExactlyWhatTheChecksAccept) {
  constexpr std::size_t kHeap = 1 << 16, kUser = 4096;
  std::vector<std::uint64_t> mine(kHeap / 8), theirs(kHeap / 8);  // heaps: the abort word reads 0
  rma::Endpoint e;
  e.size = 3;
  e.heap = reinterpret_cast<std::byte*>(mine.data());
  e.heap_bytes = kHeap;
  e.user_offset = kUser;
  e.near[0] = e.heap;
  e.near[1] = reinterpret_cast<std::byte*>(theirs.data());  // PE 2: not near (through peers[2])
  const auto at = [&](std::int64_t off) {
    return reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(e.heap) + static_cast<std::uint64_t>(off));
  };
  std::vector<std::int64_t> offs;
  for (const std::int64_t edge : {std::int64_t{0}, std::int64_t{kUser}, std::int64_t{kHeap}})
    for (std::int64_t d = -17; d <= 17; ++d) offs.push_back(edge + d);
  offs.insert(offs.end(), {std::int64_t{-1} << 40, std::int64_t{1} << 40, std::numeric_limits<std::int64_t>::min()});
  const std::size_t sizes[] = {0, 1, 4, 7, 8, 9, 16, kHeap - kUser - 1, kHeap - kUser, kHeap - kUser + 1, kHeap,
                               std::numeric_limits<std::size_t>::max() - 7, std::numeric_limits<std::size_t>::max()};
  std::size_t fast = 0, cases = 0;
  for (const std::uint64_t user : {std::uint64_t{kUser}, std::uint64_t{kHeap + 8}}) {
    e.user_offset = user;
    for (const int pe : {-1, 0, 1, 2, 3, 8})
      for (const std::int64_t off : offs)
        for (const std::size_t n : sizes)
          for (const std::size_t align : {std::size_t{1}, std::size_t{8}}) {
            std::uint64_t heap_off = 0;
            const bool in_heap = rma::detail::heap_offset(e, at(off), n, heap_off);
            std::byte* const near = rma::detail::near_peer(e, pe);
            const bool want = near != nullptr && in_heap && reinterpret_cast<std::uintptr_t>(at(off)) % align == 0;
            std::byte* const got = rma::detail::direct(e, at(off), n, align, pe);
            ++cases;
            ASSERT_EQ(got != nullptr, want) << "pe " << pe << " offset " << off << " bytes " << n << " align " << align
                                            << " user offset " << user;
            if (want) {
              ++fast;
              EXPECT_EQ(got, near + heap_off);
            }
          }
  }
  EXPECT_GT(fast, 100u) << "of " << cases;  // the fast path itself was exercised
}
// A GPU heap that other processes map is allocated in whole 2 MiB pages (their CUDA IPC mapping
// of a heap ending inside a large page took small pages: 6.7 against 15.0 Gmsg/s of scattered
// puts on an H200); one mapped only here keeps its size.
TEST(RmaPlacement, AGpuHeapOtherProcessesMapIsAllocatedInWholeLargePages) {
  constexpr std::size_t kPage = std::size_t{2} << 20;
  for (const std::size_t bytes : {std::size_t{1}, std::size_t{4096}, kPage - 1, kPage, kPage + 1, (std::size_t{256} << 20) + 4096}) {
    const std::size_t shared = gv::detail::gpu_heap_allocation(bytes, true);
    EXPECT_EQ(shared % kPage, 0u) << bytes;
    EXPECT_GE(shared, bytes);
    EXPECT_LT(shared - bytes, kPage) << bytes;
    EXPECT_EQ(gv::detail::gpu_heap_allocation(bytes, false), bytes);
  }
}

}  // namespace gvt
