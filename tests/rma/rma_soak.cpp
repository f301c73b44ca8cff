// rma soak on host-thread ranks: a random mix of put / put_nbi / p / get / put_signal / signal
// wait / fetch_add / compare_swap / swap / add (contended) / g, 8- and 4-byte atomics, over p2p
// and ib, every byte and counter checked against a host model.
//
//   rma_soak [--ops N] [--transport p2p|ib|both] [--ranks R] [--round K] [--seed S]
//
// Each rank writes only its own slice of every peer's heap (data[r], counter[r], signal[r]), so
// it can predict every value it reads back there (gets, atomics' old values); the contended
// word (`shared`) is checked by its sum. Every K operations per rank the ranks quiet, pass an
// rma barrier, exchange their models (World::allgather) and each checks its whole heap: every
// byte of every slice, every counter, every signal (through wait_until) and the shared sum.
// Exit 0 when nothing differed; the first differences are printed. ctest runs a short soak;
// `--ops 10000000` is the long one.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gpuverbs/host/world.hpp>
#include <gpuverbs/rma.hpp>

#include "host_rings.hpp"
#include "pattern.hpp"

namespace {

namespace rma = gv::rma;
using gv::Status;

constexpr std::size_t kSlice = 4096;  ///< bytes of data[r] at every PE

/// What a rank knows of its slice at one target PE.
struct Model {
  std::uint64_t counter = 0, signals = 0, shared_added = 0;
  std::uint32_t counter32 = 0, pad = 0;
  std::byte data[kSlice] = {};
};

struct Blocks {
  std::byte* data;             ///< [ranks][kSlice]
  std::uint64_t* counter;      ///< [ranks]
  std::uint32_t* counter32;    ///< [ranks]
  std::uint64_t* signal;       ///< [ranks]
  std::uint64_t* shared;       ///< [1]
  std::byte* src;              ///< this rank's staging (heap: ib describes it by lkey)
  std::byte* dst;
};

struct Tally {
  std::uint64_t ops = 0, errors = 0, rounds = 0;  ///< rounds: checked to the end
  std::uint64_t by_kind[12] = {};
};

const char* const kKinds[12] = {"put", "put_nbi", "p", "get", "get_nbi", "put_signal", "fetch_add",
                                "fetch_add32", "compare_swap", "swap", "add_shared", "g"};

class Soak {
 public:
  Soak(rma::Transport t, int ranks, std::uint64_t seed) : seed_(seed), n_(ranks) {
    gv::WorldOptions o;
    o.memory = gv::WorldOptions::Memory::kHost;
    o.transport = t;
    o.heap_bytes = std::size_t{4} << 20;
    o.ib_lanes = 2;
    o.budget = gv::Budget{120'000'000'000ull};  // a slow peer on a loaded machine is not a failure
    worlds_ = gv::World::create_local(ranks, o);
    for (auto& w : worlds_) {
      Blocks b{};
      b.data = static_cast<std::byte*>(w->alloc(kSlice * static_cast<std::size_t>(n_)));
      b.counter = static_cast<std::uint64_t*>(w->alloc(8 * static_cast<std::size_t>(n_)));
      b.counter32 = static_cast<std::uint32_t*>(w->alloc(4 * static_cast<std::size_t>(n_)));
      b.signal = static_cast<std::uint64_t*>(w->alloc(8 * static_cast<std::size_t>(n_)));
      b.shared = static_cast<std::uint64_t*>(w->alloc(8));
      b.src = static_cast<std::byte*>(w->alloc(kSlice));
      b.dst = static_cast<std::byte*>(w->alloc(kSlice));
      blocks_.push_back(b);
    }
    models_.assign(static_cast<std::size_t>(n_), std::vector<Model>(static_cast<std::size_t>(n_)));
    tallies_.resize(static_cast<std::size_t>(n_));
  }

  /// `rounds` rounds of `per_round` operations per rank.
  Tally run(std::uint64_t rounds, std::uint64_t per_round) {
    std::vector<std::thread> ts;
    for (int r = 0; r < n_; ++r)
      ts.emplace_back([&, r] {
        try {
          rank_body(r, rounds, per_round);
        } catch (const std::exception& e) {  // a host collective failed: another rank stopped
          error(r, e.what());
        }
      });
    for (auto& t : ts) t.join();
    Tally all;
    all.rounds = rounds;
    for (const Tally& t : tallies_) {
      all.rounds = std::min(all.rounds, t.rounds);
      all.ops += t.ops;
      all.errors += t.errors;
      for (int k = 0; k < 12; ++k) all.by_kind[k] += t.by_kind[k];
    }
    return all;
  }

 private:
  void error(int r, const std::string& what) {
    Tally& t = tallies_[static_cast<std::size_t>(r)];
    if (t.errors++ < 5) std::printf("rank %d: %s\n", r, what.c_str());
  }

  void rank_body(int r, std::uint64_t rounds, std::uint64_t per_round) {
    const auto R = static_cast<std::size_t>(r);
    std::mt19937_64 rng(seed_ * 1000003 + R);
    const rma::Endpoint& ep = worlds_[R]->endpoint();
    const Blocks& b = blocks_[R];
    std::vector<Model>& mine = models_[R];
    Tally& tally = tallies_[R];
    std::vector<bool> unsettled(static_cast<std::size_t>(n_), false);  // puts since the last quiet
    bool src_busy = false;                                              // a put_nbi still reads src
    auto settle = [&] {
      if (rma::quiet(ep) != Status::kOk) error(r, "quiet failed");
      std::fill(unsettled.begin(), unsettled.end(), false);
      src_busy = false;
    };
    auto check = [&](Status s, const char* what) {
      if (s != Status::kOk) error(r, std::string(what) + ": " + gv::to_string(s));
      return s == Status::kOk;
    };
    for (std::uint64_t round = 0; round < rounds; ++round) {
      for (std::uint64_t i = 0; i < per_round; ++i) {
        const int t = static_cast<int>(rng() % static_cast<std::uint64_t>(n_));
        const auto T = static_cast<std::size_t>(t);
        Model& m = mine[T];
        const int kind = static_cast<int>(rng() % 12);
        // A range of the slice: often small (inline over ib), sometimes whole pages.
        const std::size_t len = (rng() & 3) == 0 ? 1 + rng() % kSlice : 1 + rng() % 64;
        const std::size_t off = rng() % (kSlice - len + 1);
        std::byte* remote = b.data + R * kSlice + off;  // symmetric: data[r] at PE t
        ++tally.ops;
        ++tally.by_kind[kind];
        switch (kind) {
          case 0:
          case 1:
          case 5: {  // put, put_nbi, put_signal
            if (src_busy) settle();
            const std::uint64_t stream = rng();
            for (std::size_t k = 0; k < len; ++k) b.src[k] = static_cast<std::byte>(gvt::pattern_byte(stream, k));
            Status s;
            if (kind == 0) s = rma::put(ep, remote, b.src, len, t);
            else if (kind == 1) s = rma::put_nbi(ep, remote, b.src, len, t);
            else s = rma::put_signal(ep, remote, b.src, len, b.signal + R, 1, rma::SignalOp::kAdd, t);
            if (check(s, kKinds[kind])) {
              std::memcpy(m.data + off, b.src, len);
              if (kind == 5) ++m.signals;
            }
            src_busy = kind == 1;
            unsettled[T] = true;
            break;
          }
          case 2: {  // p: one aligned 8-byte value
            const std::size_t o8 = off & ~std::size_t{7};
            const std::uint64_t v = rng();
            if (check(rma::p(ep, reinterpret_cast<std::uint64_t*>(b.data + R * kSlice + o8), v, t), "p"))
              std::memcpy(m.data + o8, &v, 8);
            unsettled[T] = true;
            break;
          }
          case 3:
          case 4: {  // get, get_nbi: what the model says is there
            if (unsettled[T] || src_busy) settle();
            std::memset(b.dst, gvt::kPoison, len);
            const Status s = kind == 3 ? rma::get(ep, b.dst, remote, len, t) : rma::get_nbi(ep, b.dst, remote, len, t);
            if (kind == 4 && s == Status::kOk) (void)check(rma::quiet(ep), "quiet after get_nbi");
            if (check(s, kKinds[kind]) && std::memcmp(b.dst, m.data + off, len) != 0)
              error(r, "get of " + std::to_string(len) + " bytes at " + std::to_string(off) + " from PE " +
                           std::to_string(t) + " differs from what this rank put there");
            break;
          }
          case 6: {
            const std::uint64_t v = rng() % 1000;
            std::uint64_t old = 0;
            if (check(rma::fetch_add(ep, b.counter + R, v, t, old), "fetch_add")) {
              if (old != m.counter) error(r, "fetch_add at PE " + std::to_string(t) + ": old " + std::to_string(old) +
                                                 ", model " + std::to_string(m.counter));
              m.counter += v;
            }
            break;
          }
          case 7: {
            const auto v = static_cast<std::uint32_t>(rng() % 1000);
            std::uint32_t old = 0;
            if (check(rma::fetch_add(ep, b.counter32 + R, v, t, old), "fetch_add (4 B)")) {
              if (old != m.counter32) error(r, "fetch_add (4 B) at PE " + std::to_string(t) + ": old " +
                                                   std::to_string(old) + ", model " + std::to_string(m.counter32));
              m.counter32 += v;
            }
            break;
          }
          case 8: {
            const bool hit = rng() & 1;
            const std::uint64_t cond = hit ? m.counter : m.counter + 1, value = rng() % 1000000;
            std::uint64_t old = 0;
            if (check(rma::compare_swap(ep, b.counter + R, cond, value, t, old), "compare_swap")) {
              if (old != m.counter) error(r, "compare_swap at PE " + std::to_string(t) + ": old differs from the model");
              if (hit) m.counter = value;
            }
            break;
          }
          case 9: {
            const std::uint64_t value = rng() % 1000000;
            std::uint64_t old = 0;
            if (check(rma::swap(ep, b.counter + R, value, t, old), "swap")) {
              if (old != m.counter) error(r, "swap at PE " + std::to_string(t) + ": old differs from the model");
              m.counter = value;
            }
            break;
          }
          case 10: {
            const std::uint64_t v = 1 + rng() % 100;
            if (check(rma::add(ep, b.shared, v, t), "add (contended)")) m.shared_added += v;
            break;
          }
          default: {
            std::uint64_t v = 0;
            if (check(rma::g(ep, b.counter + R, t, v), "g") && v != m.counter)
              error(r, "g of the counter at PE " + std::to_string(t) + " differs from the model");
          }
        }
      }
      settle();
      if (!check(rma::barrier(ep), "barrier")) return;
      verify(r);
      worlds_[R]->barrier();  // every rank checked before anyone writes again
      ++tally.rounds;
    }
  }

  /// This rank's heap against every writer's model of it.
  void verify(int r) {
    const auto R = static_cast<std::size_t>(r);
    gv::World& w = *worlds_[R];
    std::vector<Model> col(static_cast<std::size_t>(n_));  // col[q]: rank q's model of this rank
    std::vector<Model> all(static_cast<std::size_t>(n_) * static_cast<std::size_t>(n_));
    w.allgather(models_[R].data(), all.data(), sizeof(Model) * static_cast<std::size_t>(n_));
    const Blocks& b = blocks_[R];
    std::uint64_t shared = 0;
    for (int q = 0; q < n_; ++q) {
      const auto Q = static_cast<std::size_t>(q);
      const Model& m = all[Q * static_cast<std::size_t>(n_) + R];
      if (std::memcmp(b.data + Q * kSlice, m.data, kSlice) != 0) error(r, "data from rank " + std::to_string(q) + " differs");
      if (b.counter[Q] != m.counter) error(r, "counter of rank " + std::to_string(q) + " differs");
      if (b.counter32[Q] != m.counter32) error(r, "4-byte counter of rank " + std::to_string(q) + " differs");
      const Status s = rma::wait_until(w.endpoint(), b.signal + Q, rma::Cmp::kEq, m.signals);
      if (s != Status::kOk)
        error(r, "signal of rank " + std::to_string(q) + " is " + std::to_string(b.signal[Q]) + ", " +
                     std::to_string(m.signals) + " were sent (" + gv::to_string(s) + ")");
      shared += m.shared_added;
    }
    if (*b.shared != shared) error(r, "the contended word is " + std::to_string(*b.shared) + ", " + std::to_string(shared) + " were added");
  }

  std::uint64_t seed_;
  int n_;
  std::vector<std::unique_ptr<gv::World>> worlds_;
  std::vector<Blocks> blocks_;
  std::vector<std::vector<Model>> models_;  ///< [rank][target]
  std::vector<Tally> tallies_;
};

bool number(const char* text, std::uint64_t lo, std::uint64_t hi, std::uint64_t& out) {
  const char* end = text + std::strlen(text);
  const auto [p, ec] = std::from_chars(text, end, out);
  return ec == std::errc{} && p == end && out >= lo && out <= hi;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t ops = 200'000, ranks = 3, round = 2000, seed = gvt::test_seed(20261126);
  std::string transport = "both";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    bool ok = has;
    if (a == "--ops" && has) ok = number(argv[++i], 1, 1'000'000'000'000ull, ops);
    else if (a == "--ranks" && has) ok = number(argv[++i], 2, 16, ranks);
    else if (a == "--round" && has) ok = number(argv[++i], 1, 100'000'000, round);
    else if (a == "--seed" && has) ok = number(argv[++i], 0, UINT64_MAX, seed);
    else if (a == "--transport" && has) {
      transport = argv[++i];
      ok = transport == "p2p" || transport == "ib" || transport == "both";
    } else ok = false;
    if (!ok) {
      std::fprintf(stderr, "rma_soak: bad argument '%s'\nusage: rma_soak [--ops N] [--transport p2p|ib|both] [--ranks 2..16] "
                           "[--round K] [--seed S]\n", a.c_str());
      return 2;
    }
  }
  std::uint64_t errors = 0;
  for (const rma::Transport t : {rma::Transport::kP2p, rma::Transport::kIb}) {
    if (transport != "both" && transport != rma::to_string(t)) continue;
    const std::uint64_t per_rank = (ops + ranks - 1) / ranks;
    const std::uint64_t per_round = std::min(round, per_rank), rounds = (per_rank + per_round - 1) / per_round;
    const auto t0 = std::chrono::steady_clock::now();
    Soak soak(t, static_cast<int>(ranks), seed);
    const Tally tally = soak.run(rounds, per_round);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("rma_soak: %s, %llu ranks, %s: %llu operations in %.1f s (%.0f/s), %llu rounds checked, %llu errors\n  ",
                rma::to_string(t), static_cast<unsigned long long>(ranks), gvt::seed_note(seed).c_str(),
                static_cast<unsigned long long>(tally.ops), s, static_cast<double>(tally.ops) / s,
                static_cast<unsigned long long>(tally.rounds), static_cast<unsigned long long>(tally.errors));
    for (int k = 0; k < 12; ++k) std::printf("%s %llu%s", kKinds[k], static_cast<unsigned long long>(tally.by_kind[k]), k < 11 ? ", " : "\n");
    std::fflush(stdout);
    errors += tally.errors;
  }
  return errors == 0 ? 0 : 1;
}
