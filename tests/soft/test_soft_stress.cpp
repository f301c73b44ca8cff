// Many posters: >= 1e5 operations from many threads on one QP (shared ownership) and on many
// QPs (exclusive ownership), with no loss, duplication or reordering. Each operation is a
// FETCH_ADD of 1 on a remote counter; the value it returns is its position in the QP's
// execution order, so the returned values prove exactly-once, in-order execution.
#include <algorithm>
#include <atomic>
#include <thread>

#include "soft_fixture.hpp"

namespace gvt {
namespace {

constexpr int kThreads = 8;
constexpr int kOpsPerThread = 12500;  // 8 x 12500 = 1e5 per test

/// Drain whatever completions are ready (any thread may retire any completion).
void drain(const gv::ib::CqHandle& cq, std::atomic<int>& errors) {
  Completion c;
  for (;;) {
    const Status st = gv::ib::try_poll_cq<Ownership::kShared>(cq, c);
    if (st == Status::kEmpty) return;
    if (st != Status::kOk) {
      ++errors;
      return;
    }
  }
}

TEST(SoftStress, ManyThreadsShareOneQp) {
  auto dev = gv::Device::open("soft");
  gv::QpCaps caps;
  caps.sq_depth = 1024;
  Endpoint a(*dev, caps, 4096), b(*dev, caps, 4096);
  connect_pair(a, b);
  Buffer counter(*dev, *b.pd, 64, kAllAccess, 0);
  std::memset(counter.p, 0, 64);
  Buffer results(*dev, *a.pd, sizeof(std::uint64_t) * kThreads * kOpsPerThread, kAllAccess, 9);

  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kOpsPerThread; ++k) {
        const Sge s = results.sge(sizeof(std::uint64_t) * (std::size_t{static_cast<std::size_t>(t)} * kOpsPerThread + k), 8);
        SendWr wr = make_wr(WrOpcode::kAtomicFetchAdd, &s, 1, (k % 32 == 31) ? gv::ib::kWrSignaled : 0u,
                            counter.addr(), counter.mr->rkey());
        wr.compare_add = 1;
        // A full ring frees up as completions are drained, by the posters waiting for it; give up
        // (and fail) after 10 s.
        const Status st = gv::ib::post_send<Ownership::kShared>(a.h, wr, gv::Budget{10'000'000'000ull}, [&] {
          drain(a.ch, errors);
          return Status::kOk;
        });
        if (st != Status::kOk) ++errors;
        drain(a.ch, errors);
      }
    });
  }
  for (auto& th : threads) th.join();
  // Fence the whole stream with one last signaled NOP (shared, like every post on this QP),
  // then drain everything.
  ASSERT_EQ(gv::ib::post_send<Ownership::kShared>(a.h, make_wr(WrOpcode::kNop, nullptr, 0, gv::ib::kWrSignaled)),
            Status::kOk);
  ASSERT_EQ(gv::sync::bounded_wait([&] {
              drain(a.ch, errors);
              return a.h.state->sq.completed == a.h.state->sq.reserved;
            }, gv::Budget{}, nullptr), Status::kOk);
  ASSERT_EQ(errors.load(), 0);

  const std::uint64_t total = std::uint64_t{kThreads} * kOpsPerThread;
  EXPECT_EQ(*reinterpret_cast<std::uint64_t*>(counter.p), total);
  const auto* r = reinterpret_cast<const std::uint64_t*>(results.p);
  std::vector<std::uint8_t> seen(total, 0);
  for (int t = 0; t < kThreads; ++t) {
    for (int k = 0; k < kOpsPerThread; ++k) {
      const std::uint64_t v = r[std::size_t{static_cast<std::size_t>(t)} * kOpsPerThread + k];
      ASSERT_LT(v, total) << "thread " << t << " op " << k;
      ASSERT_EQ(seen[v], 0) << "value " << v << " returned twice";
      seen[v] = 1;
      // One poster's operations execute in its posting order.
      if (k > 0) {
        ASSERT_GT(v, r[std::size_t{static_cast<std::size_t>(t)} * kOpsPerThread + k - 1]) << "thread " << t << " op " << k;
      }
    }
  }
}

TEST(SoftStress, ManyQpsOneThreadEach) {
  auto dev = gv::Device::open("soft");
  std::vector<std::unique_ptr<Endpoint>> req, resp;
  gv::QpCaps caps;
  caps.sq_depth = 256;
  for (int i = 0; i < kThreads; ++i) {
    req.push_back(std::make_unique<Endpoint>(*dev, caps, 1024));
    resp.push_back(std::make_unique<Endpoint>(*dev, caps, 1024));
    connect_pair(*req.back(), *resp.back());
  }
  Buffer counters(*dev, *resp[0]->pd, 64 * kThreads, kAllAccess, 0);
  std::memset(counters.p, 0, 64 * kThreads);
  std::vector<std::unique_ptr<gv::MemoryRegion>> remote_mrs;  // one per responder PD
  for (int i = 0; i < kThreads; ++i) remote_mrs.push_back(resp[i]->pd->reg_mr(counters.p, 64 * kThreads, kAllAccess));
  std::vector<std::unique_ptr<Buffer>> results;
  for (int i = 0; i < kThreads; ++i)
    results.push_back(std::make_unique<Buffer>(*dev, *req[i]->pd, 8 * kOpsPerThread, kAllAccess, 100 + i));

  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const Endpoint& e = *req[t];
      for (int k = 0; k < kOpsPerThread; ++k) {
        const Sge s = results[t]->sge(8 * static_cast<std::size_t>(k), 8);
        SendWr wr = make_wr(WrOpcode::kAtomicFetchAdd, &s, 1, (k % 64 == 63 || k + 1 == kOpsPerThread) ? gv::ib::kWrSignaled : 0u,
                            counters.addr(64 * t), remote_mrs[t]->rkey());
        wr.compare_add = 1;
        Status st;
        Completion c;
        const std::uint64_t t0 = gv::sync::now_ns();
        while ((st = gv::ib::post_send<Ownership::kExclusive>(e.h, wr, gv::Budget{100'000})) == Status::kQueueFull &&
               gv::sync::now_ns() - t0 < 10'000'000'000ull) {
          if (gv::ib::try_poll_cq<Ownership::kExclusive>(e.ch, c) == Status::kCompletionError) ++failures[t];
        }
        if (st != Status::kOk) ++failures[t];
      }
      Completion c;
      while (e.h.state->sq.completed != e.h.state->sq.reserved) {
        const Status st = gv::ib::poll_cq<Ownership::kExclusive>(e.ch, c);
        if (st != Status::kOk) {
          ++failures[t];
          break;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(failures[t], 0) << "QP " << t;
    EXPECT_EQ(reinterpret_cast<std::uint64_t*>(counters.p + 64 * t)[0], std::uint64_t{kOpsPerThread});
    const auto* r = reinterpret_cast<const std::uint64_t*>(results[t]->p);
    for (int k = 0; k < kOpsPerThread; ++k) ASSERT_EQ(r[k], std::uint64_t(k)) << "QP " << t << " op " << k;
  }
}

}  // namespace
}  // namespace gvt
