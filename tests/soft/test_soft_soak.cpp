// Randomized verbs soak: WRITE (from SGEs and inline), READ, FETCH_ADD and CMP_SWP of random
// sizes and offsets, from several threads, each with its own QP pair between two soft devices
// (two CPU engines), every byte and every counter checked against a host shadow. RC executes
// one QP's WQEs in order, so the shadow applies each operation in posting order; a batch's
// operations use disjoint local slots, so their sources and destinations do not overlap.
// Besides its own counters, every thread adds to shared counters, whose final values must be
// the sum of all adds. GV_SOAK_OPS (default 24000) sets the operations of all threads together;
// the figures (operations, seconds, rate, errors) are printed.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

#include "pattern.hpp"
#include "soft_fixture.hpp"

namespace gvt {
namespace {

constexpr int kThreads = 4;
constexpr std::size_t kRemote = 64 << 10;  // each thread's remote region
constexpr std::uint32_t kSlots = 8;        // operations in flight per batch, one local slot each
constexpr std::size_t kSlot = 8 << 10;     // a slot's bytes: the largest message
constexpr std::uint32_t kCounters = 64;    // each thread's remote counters
constexpr std::uint32_t kShared = 8;       // counters every thread adds to

std::uint64_t soak_ops() {
  const char* v = std::getenv("GV_SOAK_OPS");
  if (v == nullptr || *v == '\0') return 24000;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (*end != '\0' || n == 0) {
    ADD_FAILURE() << "GV_SOAK_OPS='" << v << "' is not a positive whole number";
    return 0;
  }
  return n;
}

/// One thread's QP pair and memory, and their shadows.
struct Lane {
  Endpoint a, b;
  Buffer local, remote, counters;
  std::vector<std::uint8_t> remote_shadow;
  std::vector<std::uint64_t> counter_shadow;
  std::uint64_t shared_added[kShared] = {};
  std::uint64_t ops = 0;
  std::string error;  ///< the first mismatch or bad completion

  Lane(gv::Device& da, gv::Device& db, const gv::QpCaps& caps, int id)
      : a(da, caps, 64), b(db, caps, 64),
        local(da, *a.pd, kSlots * kSlot, kAllAccess, 100 + id),
        remote(db, *b.pd, kRemote, kAllAccess, 200 + id),
        counters(db, *b.pd, kCounters * 8, kAllAccess, 300 + id),
        remote_shadow(remote.p, remote.p + kRemote),
        counter_shadow(kCounters) {
    connect_pair(a, b);
    std::memcpy(counter_shadow.data(), counters.p, kCounters * 8);
  }

  void fail(const std::string& what) {
    if (error.empty()) error = what;
  }
};

/// What a posted operation expects back in its local slot.
struct Expect {
  enum Kind { kNone, kBytes, kWord } kind = kNone;
  std::uint32_t slot = 0;
  std::vector<std::uint8_t> bytes;  ///< kBytes: a READ's data
  std::uint64_t word = 0;           ///< kWord: an atomic's original value
  bool shared = false;              ///< an add to a shared counter: its value is not predictable
};

/// Lane `l` runs `ops` operations; the shared counters lie at `shared` under `shared_rkey`.
void run_lane(Lane& l, int id, std::uint64_t ops, std::uint64_t shared, std::uint32_t shared_rkey) {
  std::mt19937_64 rng(0x5eed0000u + static_cast<unsigned>(id));
  const auto pick = [&](std::uint64_t n) { return rng() % n; };
  // Message sizes spread over 1 B .. 8 KiB, small ones as often as large ones.
  const auto size = [&] { return static_cast<std::uint32_t>(1 + pick(std::uint64_t{1} << (1 + pick(13)))); };
  Expect expect[kSlots];
  while (l.ops < ops && l.error.empty()) {
    const std::uint32_t batch = static_cast<std::uint32_t>(std::min<std::uint64_t>(kSlots, ops - l.ops));
    for (std::uint32_t s = 0; s < batch; ++s) {
      std::uint8_t* slot = l.local.p + s * kSlot;
      const std::uint64_t slot_addr = l.local.addr(s * kSlot);
      Expect& e = expect[s];
      e = Expect{};
      e.slot = s;
      SendWr wr;
      Sge sge{slot_addr, 0, l.local.mr->lkey()};
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.flags = gv::ib::kWrSignaled;
      const std::uint64_t kind = pick(8);
      if (kind < 3) {  // WRITE
        const std::uint32_t n = size();
        const std::uint64_t off = pick(kRemote - n + 1);
        fill_random(slot, n, rng());
        std::memcpy(l.remote_shadow.data() + off, slot, n);
        sge.length = n;
        wr.opcode = WrOpcode::kRdmaWrite;
        if (n <= 64 && pick(2)) wr.flags |= gv::ib::kWrInline;
        wr.remote_addr = l.remote.addr(off);
        wr.rkey = l.remote.mr->rkey();
      } else if (kind < 6) {  // READ
        const std::uint32_t n = size();
        const std::uint64_t off = pick(kRemote - n + 1);
        std::memset(slot, kPoison, n);
        e.kind = Expect::kBytes;
        e.bytes.assign(l.remote_shadow.begin() + static_cast<std::ptrdiff_t>(off),
                       l.remote_shadow.begin() + static_cast<std::ptrdiff_t>(off + n));
        sge.length = n;
        wr.opcode = WrOpcode::kRdmaRead;
        wr.remote_addr = l.remote.addr(off);
        wr.rkey = l.remote.mr->rkey();
      } else {  // FETCH_ADD or CMP_SWP on an own counter, or FETCH_ADD on a shared one
        sge.length = 8;
        std::memset(slot, kPoison, 8);
        e.kind = Expect::kWord;
        const bool to_shared = pick(4) == 0;
        const std::uint32_t c = static_cast<std::uint32_t>(pick(to_shared ? kShared : kCounters));
        if (to_shared) {
          const std::uint64_t add = 1 + pick(1000);
          l.shared_added[c] += add;
          e.shared = true;
          wr.opcode = WrOpcode::kAtomicFetchAdd;
          wr.compare_add = add;
          wr.remote_addr = shared + 8 * c;
          wr.rkey = shared_rkey;
        } else {
          std::uint64_t& v = l.counter_shadow[c];
          e.word = v;
          wr.remote_addr = l.counters.addr(8 * c);
          wr.rkey = l.counters.mr->rkey();
          if (kind == 6) {
            wr.opcode = WrOpcode::kAtomicFetchAdd;
            wr.compare_add = rng();
            v += wr.compare_add;
          } else {
            wr.opcode = WrOpcode::kAtomicCmpSwp;
            wr.compare_add = pick(2) ? v : rng();  // half of them miss
            wr.swap = rng();
            if (wr.compare_add == v) v = wr.swap;
          }
        }
      }
      const Status st = gv::ib::post_send<Ownership::kExclusive>(l.a.h, wr);
      if (st != Status::kOk) return l.fail(std::string("post_send: ") + gv::to_string(st));
    }
    for (std::uint32_t s = 0; s < batch; ++s) {
      Completion c;
      const Status st = gv::ib::poll_cq<Ownership::kExclusive>(l.a.ch, c, gv::Budget{20'000'000'000ull});
      if (st != Status::kOk) return l.fail("poll_cq: " + std::string(gv::to_string(st)) + " " + gv::describe(c));
    }
    for (std::uint32_t s = 0; s < batch; ++s) {
      const Expect& e = expect[s];
      const std::uint8_t* slot = l.local.p + s * kSlot;
      if (e.kind == Expect::kBytes && std::memcmp(slot, e.bytes.data(), e.bytes.size()) != 0)
        return l.fail("READ of " + std::to_string(e.bytes.size()) + " bytes returned other bytes than the shadow");
      if (e.kind == Expect::kWord && !e.shared) {
        std::uint64_t got;
        std::memcpy(&got, slot, 8);
        if (got != e.word) return l.fail("an atomic returned " + std::to_string(got) + ", the shadow " + std::to_string(e.word));
      }
    }
    l.ops += batch;
    // Every 64 batches, and at the end: every remote byte and counter against the shadow.
    if ((l.ops / kSlots) % 64 == 0 || l.ops >= ops) {
      if (std::memcmp(l.remote.p, l.remote_shadow.data(), kRemote) != 0) return l.fail("remote bytes differ from the shadow");
      if (std::memcmp(l.counters.p, l.counter_shadow.data(), kCounters * 8) != 0) return l.fail("counters differ from the shadow");
    }
  }
}

TEST(SoftSoak, RandomOperationsOnManyQpsMatchTheShadow) {
  const std::uint64_t total = soak_ops();
  ASSERT_GT(total, 0u);
  auto da = gv::Device::open("soft");
  auto db = gv::Device::open("soft");
  gv::QpCaps caps;
  caps.sq_depth = 2 * kSlots;
  std::vector<std::unique_ptr<Lane>> lanes;
  for (int t = 0; t < kThreads; ++t) lanes.push_back(std::make_unique<Lane>(*da, *db, caps, t));
  // The shared counters: one block of b's device, registered in every lane's responder PD.
  auto* shared_mem = static_cast<std::uint8_t*>(db->alloc(kShared * 8));
  std::memset(shared_mem, 0, kShared * 8);
  std::vector<std::unique_ptr<gv::MemoryRegion>> shared;
  for (const auto& l : lanes) shared.push_back(l->b.pd->reg_mr(shared_mem, kShared * 8, kAllAccess));

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back(run_lane, std::ref(*lanes[static_cast<std::size_t>(t)]), t,
                         total / kThreads + (static_cast<std::uint64_t>(t) < total % kThreads ? 1 : 0),
                         reinterpret_cast<std::uint64_t>(shared_mem), shared[static_cast<std::size_t>(t)]->rkey());
  for (auto& th : threads) th.join();
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::uint64_t done = 0, errors = 0;
  for (int t = 0; t < kThreads; ++t) {
    const Lane& l = *lanes[static_cast<std::size_t>(t)];
    done += l.ops;
    if (!l.error.empty()) {
      ++errors;
      ADD_FAILURE() << "lane " << t << " after " << l.ops << " operations: " << l.error;
    }
  }
  for (std::uint32_t c = 0; c < kShared; ++c) {
    std::uint64_t sum = 0;
    for (const auto& l : lanes) sum += l->shared_added[c];
    std::uint64_t got;
    std::memcpy(&got, shared_mem + 8 * c, 8);
    if (got != sum) ++errors;
    EXPECT_EQ(got, sum) << "shared counter " << c;
  }
  std::printf("soak: %" PRIu64 " operations on %d QPs in %.2f s (%.0f ops/s), %" PRIu64 " errors\n", done, kThreads, sec,
              done / sec, errors);
  EXPECT_EQ(done, total);
  shared.clear();
  db->free(shared_mem);
}

}  // namespace
}  // namespace gvt
