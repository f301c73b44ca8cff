// rma contracts under bad local arguments and faults, on host-thread ranks over p2p and ib:
// a null local buffer, a misaligned wait word, a barrier after a timed-out one, every operation
// after World::abort(), and the World's host calls given null buffers.
#include <chrono>
#include <limits>

#include "rma_fixture.hpp"

namespace gvt {
namespace rma = gv::rma;

namespace {

class RmaFaults : public RmaHost {};

}  // namespace

// One answer on every transport and at every size (inline or not, one WQE or several).
TEST_P(RmaFaults, NullLocalBufferIsInvalidArgumentAtEverySize) {
  constexpr std::size_t kBytes = std::size_t{1} << 20;
  auto buf = alloc<std::byte>(kBytes);
  auto sig = alloc<std::uint64_t>(1);
  on_ranks([&](int r) { std::memset(buf[static_cast<std::size_t>(r)], kPoison, kBytes); });
  const Endpoint& e = ep(0);
  for (const int pe : {0, 1}) {
    for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{8}, std::size_t{64}, std::size_t{65},
                                std::size_t{4096}, kBytes}) {
      EXPECT_EQ(rma::put(e, buf[0], nullptr, n, pe), Status::kInvalidArgument) << n << " bytes to PE " << pe;
      EXPECT_EQ(rma::put_nbi(e, buf[0], nullptr, n, pe), Status::kInvalidArgument) << n << " bytes to PE " << pe;
      EXPECT_EQ(rma::get(e, nullptr, buf[0], n, pe), Status::kInvalidArgument) << n << " bytes from PE " << pe;
      EXPECT_EQ(rma::get_nbi(e, nullptr, buf[0], n, pe), Status::kInvalidArgument) << n << " bytes from PE " << pe;
      EXPECT_EQ(rma::put_signal(e, buf[0], nullptr, n, sig[0], 1, SignalOp::kAdd, pe), Status::kInvalidArgument);
    }
  }
  EXPECT_EQ(rma::quiet(e), Status::kOk);
  for (int r = 0; r < n(); ++r) {
    EXPECT_EQ(first_not(buf[static_cast<std::size_t>(r)], kBytes, kPoison), kBytes) << "rank " << r << " was written";
    EXPECT_EQ(sig[static_cast<std::size_t>(r)][0], 0u) << "a refused put_signal signalled rank " << r;
  }
}

// rma.hpp: kInvalidArgument for a misaligned signal word, as every atomic refuses it.
TEST_P(RmaFaults, WaitAndTestRefuseAMisalignedWord) {
  auto buf = alloc<std::uint64_t>(4);
  const Endpoint& e = ep(0);
  auto* b = reinterpret_cast<std::byte*>(buf[0]);
  const auto* w64 = reinterpret_cast<const std::uint64_t*>(b + 4);
  const auto* w32 = reinterpret_cast<const std::uint32_t*>(b + 2);
  EXPECT_EQ(rma::wait_until(e, w64, Cmp::kEq, std::uint64_t{0}), Status::kInvalidArgument);
  EXPECT_EQ(rma::wait_until(e, w32, Cmp::kEq, std::uint32_t{0}), Status::kInvalidArgument);
  EXPECT_FALSE(rma::test(e, w64, Cmp::kEq, std::uint64_t{0})) << "the word is 0: only the check can say false";
  EXPECT_FALSE(rma::test(e, w32, Cmp::kEq, std::uint32_t{0}));
  std::uint64_t old = 0;
  EXPECT_EQ(rma::fetch_add(e, const_cast<std::uint64_t*>(w64), std::uint64_t{1}, 0, old), Status::kInvalidArgument)
      << "the atomics' answer for the same word";
  EXPECT_EQ(rma::wait_until(e, buf[0] + 1, Cmp::kEq, std::uint64_t{0}), Status::kOk) << "an aligned word still works";
  EXPECT_TRUE(rma::test(e, reinterpret_cast<const std::uint32_t*>(b + 4), Cmp::kEq, std::uint32_t{0}));
}

// After a barrier times out, epochs may differ between ranks: no later barrier may pass on a
// stale arrival. Rank 0 waits alone and times out; rank 1's first barrier and every later one of
// both ranks say kBarrierBroken.
TEST_P(RmaFaults, BarrierAfterATimedOutOneRefusesOnEveryRank) {
  WorldOptions o = options();
  o.budget = gv::Budget{100'000'000};  // 100 ms
  make(o);
  EXPECT_EQ(rma::barrier(ep(0)), Status::kTimeout);
  EXPECT_EQ(rma::barrier(ep(1)), Status::kBarrierBroken) << "rank 1 passed on rank 0's arrival at the failed barrier";
  on_ranks([&](int r) {
    if (r > 1) return;
    for (int i = 0; i < 3; ++i) EXPECT_EQ(rma::barrier(ep(r)), Status::kBarrierBroken) << "rank " << r;
  });
  // Other operations are unaffected.
  auto word = alloc<std::uint64_t>(1);
  EXPECT_EQ(rma::p(ep(1), word[1], std::uint64_t{7}, 0), Status::kOk);
  EXPECT_EQ(rma::quiet(ep(1)), Status::kOk);
  EXPECT_EQ(rma::wait_until(ep(0), word[0], Cmp::kEq, std::uint64_t{7}), Status::kOk);
}

// World::abort(): every operation of that rank returns kAborted, whatever it would have done,
// and touches nothing; check() says why. The other rank is not aborted.
TEST_P(RmaFaults, AfterAbortEveryOperationReturnsAborted) {
  auto buf = alloc<std::byte>(4096);
  auto word = alloc<std::uint64_t>(2);
  auto src = alloc<std::byte>(4096);
  on_ranks([&](int r) { std::memset(buf[static_cast<std::size_t>(r)], kPoison, 4096); });
  world(0).abort();
  const Endpoint& e = ep(0);
  for (const int pe : {0, 1}) {
    for (const std::size_t n : {std::size_t{8}, std::size_t{4096}}) {
      EXPECT_EQ(rma::put(e, buf[0], src[0], n, pe), Status::kAborted) << n << " to PE " << pe;
      EXPECT_EQ(rma::put_nbi(e, buf[0], src[0], n, pe), Status::kAborted);
      EXPECT_EQ(rma::get(e, src[0], buf[0], n, pe), Status::kAborted);
      EXPECT_EQ(rma::get_nbi(e, src[0], buf[0], n, pe), Status::kAborted);
      EXPECT_EQ(rma::put_signal(e, buf[0], src[0], n, word[0], 1, SignalOp::kAdd, pe), Status::kAborted);
    }
    std::uint64_t v = 5;
    EXPECT_EQ(rma::p(e, word[0] + 1, std::uint64_t{1}, pe), Status::kAborted);
    EXPECT_EQ(rma::g(e, word[0] + 1, pe, v), Status::kAborted);
    EXPECT_EQ(rma::signal(e, word[0], 1, SignalOp::kSet, pe), Status::kAborted);
    EXPECT_EQ(rma::fetch_add(e, word[0], std::uint64_t{1}, pe, v), Status::kAborted);
    EXPECT_EQ(rma::add(e, word[0], std::uint64_t{1}, pe), Status::kAborted);
    EXPECT_EQ(rma::compare_swap(e, word[0], std::uint64_t{0}, std::uint64_t{1}, pe, v), Status::kAborted);
    EXPECT_EQ(rma::swap(e, word[0], std::uint64_t{1}, pe, v), Status::kAborted);
    EXPECT_EQ(rma::fetch(e, word[0], pe, v), Status::kAborted);
    std::uint32_t v32 = 0;
    EXPECT_EQ(rma::fetch_add(e, reinterpret_cast<std::uint32_t*>(word[0]), std::uint32_t{1}, pe, v32), Status::kAborted);
  }
  EXPECT_EQ(rma::wait_until(e, word[0], Cmp::kEq, std::uint64_t{0}), Status::kAborted) << "even when it holds";
  EXPECT_EQ(rma::fence(e), Status::kAborted);
  EXPECT_EQ(rma::quiet(e), Status::kAborted);
  EXPECT_EQ(rma::barrier(e), Status::kAborted);
  for (int r = 0; r < n(); ++r) {
    EXPECT_EQ(first_not(buf[static_cast<std::size_t>(r)], 4096, kPoison), 4096u) << "rank " << r << " was written";
    EXPECT_EQ(word[static_cast<std::size_t>(r)][0], 0u);
    EXPECT_EQ(word[static_cast<std::size_t>(r)][1], 0u);
  }
  try {
    world(0).check();
    ADD_FAILURE() << "check() is silent after abort()";
  } catch (const gv::Error& err) {
    EXPECT_NE(std::string(err.what()).find("abort"), std::string::npos) << err.what();
  }
  EXPECT_THROW(world(0).barrier(), gv::Error);
  // Rank 1 was not aborted: its operations still work.
  EXPECT_EQ(rma::p(ep(1), word[1] + 1, std::uint64_t{9}, 1), Status::kOk);
  EXPECT_EQ(word[1][1], 9u);
}

TEST_P(RmaFaults, HostCallsThrowOnNullBuffers) {
  for (int r = 0; r < n(); ++r) {
    try {
      world(r).allgather(nullptr, nullptr, 8);
      ADD_FAILURE() << "allgather(nullptr, nullptr, 8) was accepted";
    } catch (const gv::Error& e) {
      EXPECT_NE(std::string(e.what()).find("null"), std::string::npos) << e.what();
    }
    std::uint64_t x = 0;
    EXPECT_THROW(world(r).allgather(&x, nullptr, 8), gv::Error);
    EXPECT_THROW(world(r).allgather(&x, &x, std::numeric_limits<std::size_t>::max()), gv::Error);
  }
  // The World still works: nothing was half-sent.
  std::vector<std::uint64_t> got(static_cast<std::size_t>(n() * n()));
  on_ranks([&](int r) {
    const std::uint64_t mine = 100 + static_cast<std::uint64_t>(r);
    world(r).allgather(&mine, got.data() + static_cast<std::size_t>(r * n()), sizeof(mine));
  });
  for (int r = 0; r < n(); ++r)
    for (int q = 0; q < n(); ++q) EXPECT_EQ(got[static_cast<std::size_t>(r * n() + q)], 100u + static_cast<std::uint64_t>(q));
}

// The environment's numbers and choices: each refusal names the variable, its value and why.
TEST(RmaEnvironment, BadValuesAreRefusedWithTheReason) {
  WorldOptions o;
  o.memory = WorldOptions::Memory::kHost;
  o.transport = Transport::kIb;
  o.heap_bytes = 1 << 20;
  struct Case {
    const char* var;
    const char* value;
    const char* says;
  };
  const Case cases[] = {
      {"GV_WAIT_TIMEOUT", "0", "above 0 (0 would end every wait at once)"},
      {"GV_WAIT_TIMEOUT", "-1", "out of range"},
      {"GV_WAIT_TIMEOUT", "ten", "not a number of seconds"},
      {"GV_WAIT_TIMEOUT", "1e7", "at most 1000000"},
      {"GV_BOOTSTRAP_TIMEOUT", "0", "above 0"},
      {"GV_HEAP_BYTES", "99999999999999999999", "not a size"},
      {"GV_HEAP_BYTES", "4X", "not a size"},
      {"GV_IB_LANES", "99999999999999999999", "out of range"},
      {"GV_IB_ENGINE", "fast", "use cpu, gpu or auto"},
      {"GV_IB_ENGINE", "gpu", "needs GPU heaps"},
  };
  for (const Case& c : cases) {
    ASSERT_EQ(setenv(c.var, c.value, 1), 0);
    try {
      (void)World::create_local(2, o);
      ADD_FAILURE() << c.var << "=" << c.value << " was taken";
    } catch (const gv::Error& e) {
      const std::string m = e.what();
      if (std::string(c.value) != "gpu") {
        EXPECT_NE(m.find(std::string(c.var) + "='" + c.value + "'"), std::string::npos) << m;
      }
      EXPECT_NE(m.find(c.says), std::string::npos) << c.var << "=" << c.value << ": " << m;
    }
    ASSERT_EQ(unsetenv(c.var), 0);
  }
  ASSERT_EQ(setenv("GV_WAIT_TIMEOUT", "0.25", 1), 0);
  ASSERT_EQ(setenv("GV_HEAP_BYTES", "2M", 1), 0);
  ASSERT_EQ(setenv("GV_IB_ENGINE", "cpu", 1), 0);
  auto w = World::create_local(2, o);
  EXPECT_EQ(w[0]->endpoint().budget.ns, 250'000'000u);
  EXPECT_EQ(w[0]->heap_bytes(), std::size_t{2} << 20);
  for (const char* v : {"GV_WAIT_TIMEOUT", "GV_HEAP_BYTES", "GV_IB_ENGINE"}) ASSERT_EQ(unsetenv(v), 0);
}

INSTANTIATE_TEST_SUITE_P(Transports, RmaFaults,
                         ::testing::Values(RmaParam{Transport::kP2p, 2}, RmaParam{Transport::kIb, 2}), rma_param_name);

}  // namespace gvt
