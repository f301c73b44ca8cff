// kShared posting as a ticket queue, on host threads (post_poll_fixture.hpp): a poster waiting for
// ring space keeps its place in line, no waiting poster is passed by more than the work a ring and
// the posters ahead of it hold, every slot is used once and published in ticket order, and a
// ticket given up breaks the queue at its slot with a defined status for every poster behind it,
// until the host reopens the queue.
#include <memory>
#include <thread>
#include <vector>

#include <gpuverbs/splitmix.hpp>

#include "post_poll_fixture.hpp"

namespace gvt::post_poll {
namespace {

constexpr gv::Budget kLong{20'000'000'000ull};  ///< never reached by a healthy wait
constexpr auto kShared = Ownership::kShared;

/// Spin (yielding) until pred() holds; false once `limit` has passed.
template <class Pred>
bool eventually(Pred pred, std::chrono::seconds limit = std::chrono::seconds(10)) {
  const auto end = Clock::now() + limit;
  while (!pred()) {
    if (Clock::now() > end) return false;
    std::this_thread::yield();
  }
  return true;
}

/// Threads that end with the test, however it ends: the abort word is raised before they are
/// joined, so a poster a failed assertion left waiting returns at once.
struct Posters {
  std::uint32_t abort = 0;
  std::vector<std::thread> threads;
  template <class F>
  void start(F&& f) { threads.emplace_back(std::forward<F>(f)); }
  void join() {
    for (auto& t : threads) t.join();
    threads.clear();
  }
  ~Posters() {
    store_rel(abort, 1u);
    join();
  }
};

/// `slots` one-WQEBB reservations published on `wq`, none completed.
void fill(WqCounters& wq, std::uint32_t size, std::uint32_t slots) {
  for (std::uint32_t i = 0; i < slots; ++i) {
    std::uint64_t s = 0;
    ASSERT_EQ(wq_reserve<kShared>(&wq, size, 1, s, {}, nullptr), Status::kOk);
    ASSERT_EQ(wq_wait_turn<kShared>(&wq, s, nullptr), Status::kOk);
    wq_pass_turn<kShared>(&wq, s + 1);
  }
}

// A poster that finds the ring full takes its ticket before it waits, so the slots completions
// free go to the waiting posters in the order they came. (A CAS reservation takes nothing until
// the ring has room, and whichever poster retries first after a completion wins: the first
// check below, a ticket held while the ring is full, fails for it.)
TEST(SharedTickets, AWaitingPosterKeepsItsPlace) {
  constexpr std::uint32_t kRing = 4, kWaiters = 6;
  WqCounters wq{};
  fill(wq, kRing, kRing);
  std::unique_ptr<std::atomic<std::uint64_t>[]> got(new std::atomic<std::uint64_t>[kWaiters]);
  for (std::uint32_t i = 0; i < kWaiters; ++i) got[i] = ~std::uint64_t{0};
  Posters p;
  for (std::uint32_t i = 0; i < kWaiters; ++i) {
    p.start([&, i] {
      std::uint64_t s = 0;
      if (wq_reserve<kShared>(&wq, kRing, 1, s, kLong, &p.abort) != Status::kOk) return;
      got[i] = s;
      if (wq_wait_turn<kShared>(&wq, s, &p.abort) == Status::kOk) wq_pass_turn<kShared>(&wq, s + 1);
    });
    ASSERT_TRUE(eventually([&] { return load_acq(wq.reserved) == kRing + i + 1; }))
        << "waiter " << i << " holds no ticket while the ring is full";
  }
  for (std::uint32_t i = 0; i < kWaiters; ++i) {
    store_rel(wq.completed, std::uint64_t{i + 1});  // one slot freed: waiter i's, nobody else's
    ASSERT_TRUE(eventually([&] { return got[i].load() != ~std::uint64_t{0}; })) << "waiter " << i;
    EXPECT_EQ(got[i].load(), kRing + i) << "waiter " << i;
    ASSERT_TRUE(eventually([&] { return load_acq(wq.published) == kRing + i + 1; })) << "waiter " << i << " published";
    for (std::uint32_t j = i + 1; j < kWaiters; ++j)
      EXPECT_EQ(got[j].load(), ~std::uint64_t{0}) << "waiter " << j << " passed waiter " << i;
  }
  p.join();
  EXPECT_EQ(wq.published, kRing + kWaiters);
  EXPECT_EQ(wq.broken, 0u);
}

// kPosters threads reserve 1 or 2 slots at a time on a ring of kRing while a completer retires
// what they publish, checking that each slot holds its poster's next record (used once, in
// ticket order, never overwritten before it was retired). While a poster waits for space, the
// grants to others are bounded by the work that can legitimately pass it: the posters ahead of
// it (each holds at most one ticket), those behind it whose slots fit the ring before its own
// (it has not published, so nothing past it completes), and the grants made before it waited
// but counted after (one per poster). No clock is involved, so a loaded machine cannot fail it.
TEST(SharedTickets, ManyPostersEverySlotOnceInTurnOrderNoPosterPassedBeyondTheWorkAhead) {
  constexpr std::uint32_t kRing = 8, kPosters = 4, kEach = 400;
  const std::uint64_t seed = test_seed() + 20;
  SCOPED_TRACE(seed_note(seed));
  auto slots_of = [&](std::uint32_t t, std::uint32_t k) {
    return 1 + static_cast<std::uint32_t>(gv::splitmix64(seed ^ (std::uint64_t{t} << 32) ^ k) & 1);
  };
  auto record = [](std::uint32_t t, std::uint32_t k, std::uint32_t j) {
    return (std::uint64_t{t} << 40) | (std::uint64_t{k} << 8) | j;
  };
  constexpr std::uint64_t kPoison = ~std::uint64_t{0};
  WqCounters wq{};
  std::vector<std::uint64_t> ring(kRing, kPoison);
  std::atomic<std::uint64_t> granted{0}, worst_passed{0};
  std::atomic<bool> failed{false};
  Posters p;
  for (std::uint32_t t = 0; t < kPosters; ++t) {
    p.start([&, t] {
      for (std::uint32_t k = 0; k < kEach && !failed.load(); ++k) {
        const std::uint32_t n = slots_of(t, k);
        bool waited = false;
        std::uint64_t first = 0, s = 0;
        const Status st = wq_reserve<kShared>(&wq, kRing, n, s, kLong, &p.abort, [&] {
          if (!waited) first = granted.load();
          waited = true;
          return Status::kOk;
        });
        if (st != Status::kOk) return failed.store(true);
        const std::uint64_t before = granted.fetch_add(1);
        if (waited) {
          std::uint64_t w = worst_passed.load();
          while (before - first > w && !worst_passed.compare_exchange_weak(w, before - first)) {
          }
        }
        for (std::uint32_t j = 0; j < n; ++j) ring[(s + j) % kRing] = record(t, k, j);
        if (wq_wait_turn<kShared>(&wq, s, &p.abort) != Status::kOk) return failed.store(true);
        wq_pass_turn<kShared>(&wq, s + n);
      }
    });
  }
  std::uint64_t total = 0;
  for (std::uint32_t t = 0; t < kPosters; ++t)
    for (std::uint32_t k = 0; k < kEach; ++k) total += slots_of(t, k);
  std::vector<std::uint32_t> next_k(kPosters, 0), next_j(kPosters, 0);
  std::string error;
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  for (std::uint64_t c = 0; c < total && error.empty();) {
    const std::uint64_t pub = load_acq(wq.published);
    if (pub == c) {
      if (failed.load()) error = "a poster failed";
      else if (Clock::now() > deadline) error = "no progress";
      std::this_thread::yield();
      continue;
    }
    for (; c < pub && error.empty(); ++c) {
      const std::uint64_t v = ring[c % kRing];
      const auto t = static_cast<std::uint32_t>(v >> 40);
      if (v == kPoison || t >= kPosters || v != record(t, next_k[t], next_j[t])) {
        error = "slot " + std::to_string(c) + " holds " + std::to_string(v) + ": not its poster's next record";
        break;
      }
      if (++next_j[t] == slots_of(t, next_k[t])) next_j[t] = 0, ++next_k[t];
      ring[c % kRing] = kPoison;  // retired: the HCA is done with it
      store_rel(wq.completed, c + 1);
    }
  }
  if (!error.empty()) store_rel(p.abort, 1u);
  p.join();
  ASSERT_EQ(error, "");
  ASSERT_FALSE(failed.load());
  for (std::uint32_t t = 0; t < kPosters; ++t) EXPECT_EQ(next_k[t], kEach) << "poster " << t;
  EXPECT_EQ(wq.reserved, total);
  EXPECT_EQ(wq.published, total);
  EXPECT_LE(worst_passed.load(), kRing + 2 * (kPosters - 1)) << "a waiting poster was passed by more than the work ahead";
  RecordProperty("most_grants_passing_a_waiting_poster", static_cast<int>(worst_passed.load()));
}

/// A 2-WQEBB SEND with 60 inline bytes.
struct TwoBbs {
  std::vector<std::uint8_t> payload = std::vector<std::uint8_t>(60, 0x3c);
  Sge sge{reinterpret_cast<std::uint64_t>(payload.data()), 60, 1};
  SendWr wr;
  TwoBbs() {
    wr.opcode = WrOpcode::kSend;
    wr.flags = kWrInline;
    wr.sg_list = &sge;
    wr.num_sge = 1;
  }
};

// The ring is full. A ticket that runs out of budget with another behind it cannot be handed
// back: kQueueFull for it, the queue broken at its slot; the poster behind fails at once with
// kQueueBroken instead of waiting out its budget; a ticket ahead of the break still publishes;
// later posters get kQueueBroken whatever room the ring has; nothing is published past the
// break. wq_reopen (no poster inside) restores service at the published position.
TEST(SharedTickets, ATimedOutTicketBreaksTheQueueUntilReopened) {
  HostQp q(4, 2, 4);
  WqCounters& wq = q.qs->sq;
  SendWr nop;
  nop.opcode = WrOpcode::kNop;
  ASSERT_EQ(post_send<kShared>(q.qp, nop), Status::kOk);
  ASSERT_EQ(post_send<kShared>(q.qp, nop), Status::kOk);
  TwoBbs two;
  std::uint64_t ahead = 0;  // slots 2..3: reserved, not yet written
  ASSERT_EQ(wq_reserve<kShared>(&wq, q.sq_bbs, 2, ahead, {}, nullptr), Status::kOk);
  ASSERT_EQ(ahead, 2u);
  Status st_a = Status::kOk, st_b = Status::kOk;
  Clock::time_point end_a, end_b;
  {
    Posters p;
    p.start([&] {  // ticket 4: needs one completion, gets none within 50 ms
      std::uint64_t s = 0;
      st_a = wq_reserve<kShared>(&wq, q.sq_bbs, 1, s, gv::Budget{50'000'000}, &p.abort);
      end_a = Clock::now();
    });
    ASSERT_TRUE(eventually([&] { return load_acq(wq.reserved) == 5; }));
    p.start([&] {  // ticket 5, behind it, with all the time in the world
      std::uint64_t s = 0;
      st_b = wq_reserve<kShared>(&wq, q.sq_bbs, 1, s, kLong, &p.abort);
      end_b = Clock::now();
    });
    ASSERT_TRUE(eventually([&] { return load_acq(wq.reserved) == 6; }));
    p.join();
  }
  EXPECT_EQ(st_a, Status::kQueueFull) << "the ring had no room for its slot";
  EXPECT_EQ(st_b, Status::kQueueBroken);
  EXPECT_LT(end_b - end_a, std::chrono::seconds(5)) << "the poster behind waited out its budget";
  EXPECT_EQ(wq.broken, ~std::uint64_t{4});
  EXPECT_EQ(wq.reserved, 6u) << "a ticket with another behind it is not handed back";

  // The ticket ahead of the break publishes as usual.
  const std::uint64_t db = doorbell_value(sq_write_wqe(q.qp, ahead, two.wr));
  ASSERT_EQ(wq_wait_turn<kShared>(&wq, ahead, nullptr), Status::kOk);
  sq_ring_doorbell(q.qp, ahead + 2, db);
  wq_pass_turn<kShared>(&wq, ahead + 2);
  EXPECT_EQ(wq.published, 4u);
  EXPECT_EQ(be32toh(q.qp_dbrec.snd.raw), 4u);
  EXPECT_EQ(q.doorbell, first8(q.sq_bytes(2)));
  for (std::uint32_t k = 0; k < wqe_ds(two.wr); ++k) {
    const Octoword want = wqe_octoword(two.wr, k, 2, q.qp.qpn);
    EXPECT_EQ(0, std::memcmp(q.sq_bytes(2, k), &want, 16)) << "octoword " << k;
  }

  // Every WQE completes: the ring has room, yet a later poster is refused, and nothing moves.
  store_rel(wq.completed, std::uint64_t{4});
  const auto t0 = Clock::now();
  EXPECT_EQ(post_send<kShared>(q.qp, nop, kLong), Status::kQueueBroken);
  EXPECT_EQ(post_recv<kShared>(q.qp, &two.sge, 1), Status::kOk) << "the receive queue is not broken";
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(wq.published, 4u);
  EXPECT_EQ(be32toh(q.qp_dbrec.snd.raw), 4u);
  EXPECT_EQ(q.doorbell, db);  // (the refused WQE may lie in slot 2, retired: the HCA reads no further)

  // Reopened: the dropped tickets are gone, the next post lands at the published position.
  wq_reopen(&wq);
  EXPECT_EQ(wq.reserved, 4u);
  EXPECT_EQ(wq.broken, 0u);
  EXPECT_EQ(wq.completed, 4u);
  ASSERT_EQ(post_send<kShared>(q.qp, nop), Status::kOk);
  EXPECT_EQ(wq.published, 5u);
  EXPECT_EQ(be32toh(q.qp_dbrec.snd.raw), 5u);
  const Octoword want = wqe_octoword(nop, 0, 4, q.qp.qpn);
  EXPECT_EQ(0, std::memcmp(q.sq_bytes(4), &want, 16));
  EXPECT_EQ(q.doorbell, first8(q.sq_bytes(4)));
}

// A ticket whose wait for its turn ends (here: aborted, as when an earlier poster died) will not
// be published: the queue breaks at it, those behind get kQueueBroken, those ahead publish.
TEST(SharedTickets, AnAbandonedTurnBreaksTheQueueAtItsSlot) {
  WqCounters wq{};
  std::uint64_t s0 = 0, s1 = 0, s2 = 0;
  ASSERT_EQ(wq_reserve<kShared>(&wq, 4, 1, s0, {}, nullptr), Status::kOk);
  ASSERT_EQ(wq_reserve<kShared>(&wq, 4, 1, s1, {}, nullptr), Status::kOk);
  const std::uint32_t raised = 1;
  EXPECT_EQ(wq_wait_turn<kShared>(&wq, s1, &raised), Status::kAborted);
  EXPECT_EQ(wq.broken, ~std::uint64_t{1});
  ASSERT_EQ(wq_reserve<kShared>(&wq, 4, 1, s2, {}, nullptr), Status::kOk) << "the ring has room for ticket 2";
  EXPECT_EQ(wq_wait_turn<kShared>(&wq, s2, nullptr), Status::kQueueBroken);
  ASSERT_EQ(wq_wait_turn<kShared>(&wq, s0, nullptr), Status::kOk);
  wq_pass_turn<kShared>(&wq, s0 + 1);
  EXPECT_EQ(wq.published, 1u);
  // An earlier break wins over a later one.
  detail::mark_broken(&wq, 3);
  EXPECT_EQ(wq.broken, ~std::uint64_t{1});
  wq_reopen(&wq);
  std::uint64_t s = 0;
  ASSERT_EQ(wq_reserve<kShared>(&wq, 4, 1, s, {}, nullptr), Status::kOk);
  EXPECT_EQ(s, 1u);
  EXPECT_EQ(wq_wait_turn<kShared>(&wq, s, nullptr), Status::kOk);
}

// A progress callable's failure ends the wait with its status; the last ticket is handed back
// (no hole), one with a ticket behind it breaks the queue.
TEST(SharedTickets, AProgressFailureGivesUpTheTicket) {
  WqCounters wq{};
  fill(wq, 2, 2);
  int calls = 0;
  std::uint64_t s = 0;
  auto failing = [&] { return ++calls < 3 ? Status::kOk : Status::kCompletionError; };
  EXPECT_EQ(wq_reserve<kShared>(&wq, 2, 1, s, kLong, nullptr, failing), Status::kCompletionError);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(wq.reserved, 2u);
  EXPECT_EQ(wq.broken, 0u);
  calls = 0;
  auto failing_after_an_arrival = [&] {
    if (++calls == 1) (void)gv::sync::fetch_add(&wq.reserved, std::uint64_t{1});  // a poster behind
    return calls < 3 ? Status::kOk : Status::kCompletionError;
  };
  EXPECT_EQ(wq_reserve<kShared>(&wq, 2, 1, s, kLong, nullptr, failing_after_an_arrival), Status::kCompletionError);
  EXPECT_EQ(wq.reserved, 4u);
  EXPECT_EQ(wq.broken, ~std::uint64_t{2});
}

}  // namespace
}  // namespace gvt::post_poll
