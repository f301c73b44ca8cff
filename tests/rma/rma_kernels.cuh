// Kernels of the GPU rma tests: each rank runs one, on its own stream; every kernel checks
// what it can on the device and leaves the rest in the heap for the host to compare with a
// reference. Statuses go to `st[i]` (0 = kOk).
#pragma once
#include <cstdint>

#include <gpuverbs/rma.hpp>

#include "pattern.hpp"

namespace gvt {

namespace rma = gv::rma;

/// Which group of the block this member belongs to, the slice it moves: its thread, its warp, or
/// the block's one.
template <class G>
__device__ __forceinline__ unsigned slice_of() {
  return G::count() == 1 ? threadIdx.x : (G::count() == 32 ? threadIdx.x / 32 : 0);
}

/// Slice k of `src` (bytes each) put to the next rank by group k: threads, warps or the block.
template <class G>
__global__ void put_slices(__grid_constant__ const rma::Endpoint ep, std::byte* dst, const std::byte* src,
                           std::size_t bytes, bool nbi, std::uint32_t* st) {
  const int to = static_cast<int>((ep.rank + 1) % ep.size);
  const unsigned k = slice_of<G>();
  const gv::Status s = nbi ? rma::put_nbi<G>(ep, dst + k * bytes, src + k * bytes, bytes, to)
                           : rma::put<G>(ep, dst + k * bytes, src + k * bytes, bytes, to);
  if (s != gv::Status::kOk) atomicMax(st, static_cast<std::uint32_t>(s));
  const gv::Status b = rma::barrier<rma::Block>(ep);
  if (b != gv::Status::kOk && threadIdx.x == 0) atomicMax(st + 1, static_cast<std::uint32_t>(b));
}

/// Slice k of `src` (`bytes` at k * stride) put_signal'd by group k to the same place in the next
/// rank's `dst`, each adding 1 to that rank's sig[k]; then group k waits until its own sig[k] is 1.
template <class G>
__global__ void put_signal_slices(__grid_constant__ const rma::Endpoint ep, std::byte* dst, const std::byte* src,
                                  std::size_t bytes, std::size_t stride, std::uint64_t* sig, std::uint32_t* st) {
  const int to = static_cast<int>((ep.rank + 1) % ep.size);
  const unsigned k = slice_of<G>();
  gv::Status s = rma::put_signal<G>(ep, dst + k * stride, src + k * stride, bytes, sig + k, 1, rma::SignalOp::kAdd, to);
  if (s == gv::Status::kOk) s = rma::wait_until<G>(ep, sig + k, rma::Cmp::kGe, std::uint64_t{1});
  if (s != gv::Status::kOk) atomicMax(st, static_cast<std::uint32_t>(s));
  const gv::Status b = rma::barrier<rma::Block>(ep);
  if (b != gv::Status::kOk && threadIdx.x == 0) atomicMax(st + 1, static_cast<std::uint32_t>(b));
}

/// Slice k of the previous rank's `src` fetched into this rank's `dst` by group k.
template <class G>
__global__ void get_slices(__grid_constant__ const rma::Endpoint ep, std::byte* dst, const std::byte* src,
                           std::size_t bytes, bool nbi, std::uint32_t* st) {
  const int from = static_cast<int>((ep.rank + ep.size - 1) % ep.size);
  const unsigned k = slice_of<G>();
  gv::Status s = nbi ? rma::get_nbi<G>(ep, dst + k * bytes, src + k * bytes, bytes, from)
                     : rma::get<G>(ep, dst + k * bytes, src + k * bytes, bytes, from);
  if (s == gv::Status::kOk && nbi) s = rma::quiet<G>(ep);
  if (s != gv::Status::kOk) atomicMax(st, static_cast<std::uint32_t>(s));
  const gv::Status b = rma::barrier<rma::Block>(ep);
  if (b != gv::Status::kOk && threadIdx.x == 0) atomicMax(st + 1, static_cast<std::uint32_t>(b));
}

/// Every block b of every rank sends `rounds` messages to the next rank's slot b, one at a
/// time: put_signal (data round-stamped), then waits for the receiver's ack. As receiver, block
/// b checks each message as soon as its signal arrives. `errors[0]` counts wrong bytes seen.
template <class G>
__global__ void put_signal_rounds(__grid_constant__ const rma::Endpoint ep, std::byte* buf, std::byte* src,
                                  std::size_t bytes, std::uint64_t* sig, std::uint64_t* ack, int rounds,
                                  std::uint32_t* st, std::uint32_t* errors) {
  const int to = static_cast<int>((ep.rank + 1) % ep.size);
  const int from = static_cast<int>((ep.rank + ep.size - 1) % ep.size);
  const unsigned b = blockIdx.x;
  std::byte* mine = buf + b * bytes;       // where `from` writes
  std::byte* out = src + b * bytes;        // what this block sends
  const unsigned lane = G::count() == 32 ? threadIdx.x % 32 : 0;
  const bool active = G::count() == 1 ? threadIdx.x == 0 : (G::count() == 32 ? threadIdx.x < 32 : true);
  if (!active) return;
  for (int k = 1; k <= rounds; ++k) {
    const std::uint64_t stamp = (std::uint64_t{ep.rank} << 40) ^ (std::uint64_t{b} << 20) ^ static_cast<std::uint64_t>(k);
    for (std::size_t i = G::index(); i < bytes; i += G::count()) out[i] = static_cast<std::byte>(pattern_byte(stamp, i));
    G::sync();
    gv::Status s = rma::put_signal<G>(ep, mine, out, bytes, sig + b, 1, rma::SignalOp::kAdd, to);
    if (s == gv::Status::kOk) s = rma::wait_until<G>(ep, sig + b, rma::Cmp::kGe, static_cast<std::uint64_t>(k));
    if (s == gv::Status::kOk) {
      const std::uint64_t theirs = (std::uint64_t{static_cast<std::uint32_t>(from)} << 40) ^ (std::uint64_t{b} << 20) ^
                                   static_cast<std::uint64_t>(k);
      std::uint32_t bad = 0;
      for (std::size_t i = G::index(); i < bytes; i += G::count())
        bad += mine[i] != static_cast<std::byte>(pattern_byte(theirs, i));
      if (bad != 0) atomicAdd(errors, bad);
      G::sync();
      s = rma::signal<G>(ep, ack + b, 1, rma::SignalOp::kAdd, from);
    }
    if (s == gv::Status::kOk) s = rma::wait_until<G>(ep, ack + b, rma::Cmp::kGe, static_cast<std::uint64_t>(k));
    if (s != gv::Status::kOk) {
      if (G::index() == 0) atomicMax(st, static_cast<std::uint32_t>(s));
      return;
    }
  }
  (void)lane;
}

/// Every thread adds 1 to rank 0's counters (64- and 32-bit) `per` times, recording each old
/// value; then one compare_swap per thread on a shared word (exactly one winner across ranks).
__global__ void atomics_exactly_once(__grid_constant__ const rma::Endpoint ep, std::uint64_t* c64, std::uint32_t* c32,
                                     std::uint64_t* olds64, std::uint32_t* olds32, int per, std::uint64_t* cas_word,
                                     std::uint32_t* winners, std::uint32_t* st) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  for (int i = 0; i < per; ++i) {
    std::uint64_t o64 = 0;
    std::uint32_t o32 = 0;
    gv::Status s = rma::fetch_add(ep, c64, std::uint64_t{1}, 0, o64);
    if (s == gv::Status::kOk) s = rma::fetch_add(ep, c32, std::uint32_t{1}, 0, o32);
    if (s != gv::Status::kOk) {
      atomicMax(st, static_cast<std::uint32_t>(s));
      return;
    }
    olds64[t * per + i] = o64;
    olds32[t * per + i] = o32;
  }
  std::uint64_t old = 1;
  const gv::Status s = rma::compare_swap(ep, cas_word, std::uint64_t{0}, std::uint64_t{ep.rank} * 100000 + t + 1, 0, old);
  if (s != gv::Status::kOk) atomicMax(st, static_cast<std::uint32_t>(s));
  else if (old == 0) atomicAdd(winners, 1u);
}

/// LL rounds around the ring, block b to block b: every size min_bytes..max_bytes with the source
/// and the destination each at every offset 0..7. Each round: fill the source, put_ll to the next rank,
/// wait_ll from the one before into a poisoned destination, check every byte there (the message
/// and the poison around it) on the device. `errors[0]` counts wrong bytes. kChannel: the same
/// rounds through one LlChannel per block, opened once.
template <class G, bool kChannel = false>
__global__ void ll_rounds(__grid_constant__ const rma::Endpoint ep, std::byte* box, std::byte* src, std::byte* out,
                          std::size_t min_bytes, std::size_t max_bytes, std::uint32_t* st, std::uint32_t* errors) {
  const int to = static_cast<int>((ep.rank + 1) % ep.size), from = static_cast<int>((ep.rank + ep.size - 1) % ep.size);
  const std::size_t span = max_bytes + 16, box_span = (rma::ll_bytes(max_bytes) + 15) & ~std::size_t{15};
  std::byte* mine = box + blockIdx.x * box_span;
  std::byte* s = src + blockIdx.x * span;
  std::byte* o = out + blockIdx.x * span;
  std::uint32_t round = 0;
  rma::LlChannel<G> ch;
  if constexpr (kChannel) {
    const gv::Status r = ch.open(ep, mine, max_bytes, to, from);
    if (r != gv::Status::kOk) {
      if (G::index() == 0) atomicMax(st, static_cast<std::uint32_t>(r));
      return;
    }
  }
  for (std::size_t bytes = min_bytes; bytes <= max_bytes; ++bytes) {
    for (unsigned a = 0; a < 8; ++a) {
      ++round;
      const std::size_t so = a, oo = (a * 5 + bytes) % 8;
      const std::uint64_t seed = (std::uint64_t{ep.rank} << 40) ^ (std::uint64_t{blockIdx.x} << 32) ^ round;
      for (std::size_t i = G::index(); i < bytes; i += G::count()) s[so + i] = static_cast<std::byte>(pattern_byte(seed, i));
      for (std::size_t i = G::index(); i < span; i += G::count()) o[i] = static_cast<std::byte>(kPoison);
      G::sync();
      gv::Status r;
      if constexpr (kChannel) {
        r = ch.put(s + so, bytes, round);
        if (r == gv::Status::kOk) r = ch.wait(o + oo, bytes, round);
      } else {
        r = rma::put_ll<G>(ep, mine, s + so, bytes, round, to);
        if (r == gv::Status::kOk) r = rma::wait_ll<G>(ep, mine, bytes, round, o + oo);
      }
      if (r != gv::Status::kOk) {
        if (G::index() == 0) atomicMax(st, static_cast<std::uint32_t>(r));
        return;
      }
      G::sync();  // every member's part of the message is in `o`
      const std::uint64_t theirs = (std::uint64_t{static_cast<std::uint32_t>(from)} << 40) ^ (std::uint64_t{blockIdx.x} << 32) ^ round;
      std::uint32_t bad = 0;
      for (std::size_t i = G::index(); i < span; i += G::count()) {
        const bool in = i >= oo && i < oo + bytes;
        bad += o[i] != static_cast<std::byte>(in ? pattern_byte(theirs, i - oo) : kPoison);
      }
      if (bad != 0) atomicAdd(errors, bad);
      G::sync();  // before the next round rewrites the source and the destination
    }
  }
}

/// LlChannel::wait_put around the ring, block b to block b: every rank puts round 1, then each
/// wait_put waits for round k from the rank before and puts round k + 1 to the next, 2 * (max -
/// min + 1) rounds with sizes in min_bytes..max_bytes; three rounds in four whole lines from and
/// into 8-byte aligned offsets (wait_put's single pass where both fit a poll batch), the fourth
/// any size at any offset. The reply's source is filled before the call that sends it; every
/// byte received and the poison around it are checked on the device. Then a relay: each rank
/// forwards what it received (src is out) for 6 rounds. `errors[0]` counts wrong bytes.
/// kPingPong: ranks 0 and 1 alone, as gv_rma's ll_wait_put rows run them (rank 0 puts round 1 and
/// then waits for round k and puts k + 1; rank 1 waits for round k and answers with its own round
/// k), so that the credit for the reply has come with the round that it answers and wait_put's
/// single pass is the common case; no relay.
template <class G, bool kPingPong = false>
__global__ void ll_wait_put_rounds(__grid_constant__ const rma::Endpoint ep, std::byte* box, std::byte* src,
                                   std::byte* out, std::size_t min_bytes, std::size_t max_bytes, std::uint32_t* st,
                                   std::uint32_t* errors) {
  if (kPingPong && ep.rank > 1) return;
  const bool answers = kPingPong && ep.rank == 1;  // rank 1 of a ping-pong: its round k answers round k
  const int to = kPingPong ? static_cast<int>(1 - ep.rank) : static_cast<int>((ep.rank + 1) % ep.size);
  const int from = kPingPong ? to : static_cast<int>((ep.rank + ep.size - 1) % ep.size);
  const std::size_t span = max_bytes + 16, box_span = (rma::ll_bytes(max_bytes) + 15) & ~std::size_t{15};
  std::byte* mine = box + blockIdx.x * box_span;
  std::byte* s = src + blockIdx.x * span;
  std::byte* o = out + blockIdx.x * span;
  const auto rounds = static_cast<std::uint32_t>(2 * (max_bytes - min_bytes + 1));
  auto size_of = [&](std::uint32_t k) {
    const std::size_t b = min_bytes + (k * 37u) % (max_bytes - min_bytes + 1);
    return k % 4 != 3 ? b & ~std::size_t{7} : b;
  };
  auto src_at = [](std::uint32_t k) -> std::size_t { return k % 4 != 3 ? 0 : k % 8; };
  auto out_at = [](std::uint32_t k) -> std::size_t { return k % 4 != 3 ? 0 : (k * 5 + 3) % 8; };
  auto seed = [&](int rank, std::uint32_t k) {
    return (std::uint64_t{static_cast<std::uint32_t>(rank)} << 40) ^ (std::uint64_t{blockIdx.x} << 32) ^ k;
  };
  auto fail = [&](gv::Status r) {
    if (G::index() == 0) atomicMax(st, static_cast<std::uint32_t>(r));
  };
  auto check = [&](std::size_t at, std::size_t bytes, std::uint64_t theirs) {
    std::uint32_t bad = 0;
    for (std::size_t i = G::index(); i < span; i += G::count()) {
      const bool in = i >= at && i < at + bytes;
      bad += o[i] != static_cast<std::byte>(in ? pattern_byte(theirs, i - at) : kPoison);
    }
    if (bad != 0) atomicAdd(errors, bad);
  };
  rma::LlChannel<G> ch;
  gv::Status r = ch.open(ep, mine, max_bytes, to, from);
  if (r != gv::Status::kOk) return fail(r);
  if (!answers) {
    for (std::size_t i = G::index(); i < size_of(1); i += G::count())
      s[src_at(1) + i] = static_cast<std::byte>(pattern_byte(seed(ep.rank, 1), i));
    G::sync();
    if ((r = ch.put(s + src_at(1), size_of(1), 1)) != gv::Status::kOk) return fail(r);
  }
  for (std::uint32_t k = 1; k <= rounds; ++k) {
    const std::uint32_t next = answers ? k : k + 1;  // the round this call puts
    for (std::size_t i = G::index(); i < size_of(next); i += G::count())
      s[src_at(next) + i] = static_cast<std::byte>(pattern_byte(seed(ep.rank, next), i));
    for (std::size_t i = G::index(); i < span; i += G::count()) o[i] = static_cast<std::byte>(kPoison);
    G::sync();
    r = answers || k < rounds ? ch.wait_put(o + out_at(k), size_of(k), k, s + src_at(next), size_of(next), next)
                              : ch.wait(o + out_at(k), size_of(k), k);
    if (r != gv::Status::kOk) return fail(r);
    G::sync();  // every member's part of the message is in `o`, every member's source was read
    check(out_at(k), size_of(k), seed(from, k));
    G::sync();  // before the next round rewrites the source and the destination
  }
  if constexpr (kPingPong) return;
  constexpr std::uint32_t kRelay = 6;
  const std::size_t bytes = max_bytes < 24 ? max_bytes : 24;
  for (std::size_t i = G::index(); i < span; i += G::count())
    o[i] = static_cast<std::byte>(i < bytes ? pattern_byte(seed(ep.rank, 0), i) : kPoison);
  G::sync();
  if ((r = ch.put(o, bytes, rounds + 1)) != gv::Status::kOk) return fail(r);
  for (std::uint32_t j = 1; j <= kRelay; ++j) {
    const std::uint32_t k = rounds + j;
    r = j < kRelay ? ch.wait_put(o, bytes, k, o, bytes, k + 1) : ch.wait(o, bytes, k);
    if (r != gv::Status::kOk) return fail(r);
    G::sync();
    check(0, bytes, seed(static_cast<int>((ep.rank + j * (ep.size - 1)) % ep.size), 0));
    G::sync();
  }
}

/// p of every width to the next rank, barrier, then g of the next rank's slot (which its
/// predecessor, this rank, wrote): values checked on the device, mismatches counted.
__global__ void p_and_g(__grid_constant__ const rma::Endpoint ep, std::uint8_t* w8, std::int16_t* w16, std::int32_t* w32,
                        std::uint64_t* w64, double* wd, std::uint32_t* st, std::uint32_t* errors) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  const int to = static_cast<int>((ep.rank + 1) % ep.size);
  const int r = static_cast<int>(ep.rank);
  gv::Status s = rma::p(ep, w8, static_cast<std::uint8_t>(0xC0 + r), to);
  if (s == gv::Status::kOk) s = rma::p(ep, w16, static_cast<std::int16_t>(-1000 - r), to);
  if (s == gv::Status::kOk) s = rma::p(ep, w32, static_cast<std::int32_t>(-70000 - r), to);
  if (s == gv::Status::kOk) s = rma::p(ep, w64, std::uint64_t{0x0123456789abcdefull} + static_cast<std::uint64_t>(r), to);
  if (s == gv::Status::kOk) s = rma::p(ep, wd, -2.25 - r, to);
  if (s == gv::Status::kOk) s = rma::barrier(ep);
  std::uint8_t v8 = 0;
  std::int16_t v16 = 0;
  std::int32_t v32 = 0;
  std::uint64_t v64 = 0;
  double vd = 0;
  if (s == gv::Status::kOk) s = rma::g(ep, w8, to, v8);
  if (s == gv::Status::kOk) s = rma::g(ep, w16, to, v16);
  if (s == gv::Status::kOk) s = rma::g(ep, w32, to, v32);
  if (s == gv::Status::kOk) s = rma::g(ep, w64, to, v64);
  if (s == gv::Status::kOk) s = rma::g(ep, wd, to, vd);
  if (s != gv::Status::kOk) {
    atomicMax(st, static_cast<std::uint32_t>(s));
    return;
  }
  errors[0] += v8 != static_cast<std::uint8_t>(0xC0 + r);
  errors[0] += v16 != static_cast<std::int16_t>(-1000 - r);
  errors[0] += v32 != static_cast<std::int32_t>(-70000 - r);
  errors[0] += v64 != std::uint64_t{0x0123456789abcdefull} + static_cast<std::uint64_t>(r);
  errors[0] += vd != -2.25 - r;
}

/// Rounds of: every thread 0 of every block stores the round into slot[rank * blocks + block]
/// of every rank, block barrier over the World (block 0 only), check. One block.
__global__ void barrier_rounds(__grid_constant__ const rma::Endpoint ep, std::uint64_t* slots, int rounds,
                               std::uint32_t* st, std::uint32_t* errors) {
  for (int k = 1; k <= rounds; ++k) {
    if (threadIdx.x < ep.size) {
      const gv::Status s = rma::p(ep, slots + ep.rank, static_cast<std::uint64_t>(k), static_cast<int>(threadIdx.x));
      if (s != gv::Status::kOk) atomicMax(st, static_cast<std::uint32_t>(s));
    }
    gv::Status s = rma::barrier<rma::Block>(ep);
    if (s != gv::Status::kOk) {
      if (threadIdx.x == 0) atomicMax(st, static_cast<std::uint32_t>(s));
      return;
    }
    if (threadIdx.x < ep.size && gv::rma::detail::load_word(slots + threadIdx.x) != static_cast<std::uint64_t>(k))
      atomicAdd(errors, 1u);
    s = rma::barrier<rma::Block>(ep);
    if (s != gv::Status::kOk) {
      if (threadIdx.x == 0) atomicMax(st, static_cast<std::uint32_t>(s));
      return;
    }
  }
}

/// An LlChannel round nobody sends: every member's wait() status in out[member]; `dst` is left
/// for the test to check untouched.
template <class G>
__global__ void ll_wait_unsent(__grid_constant__ const rma::Endpoint ep, std::byte* box, std::size_t bytes,
                               std::byte* dst, std::uint32_t* out) {
  rma::LlChannel<G> ch;
  gv::Status s = ch.open(ep, box, bytes, 1, 1);
  if (s == gv::Status::kOk) s = ch.wait(dst, bytes, 1);
  out[G::index()] = static_cast<std::uint32_t>(s);
}

/// wait_until at scope G for `*word == want` on this rank's heap: every member's status and,
/// with `with_seen`, the value it was handed (all ones when it asked for none).
template <class G>
__global__ void wait_word(__grid_constant__ const rma::Endpoint ep, const std::uint64_t* word, std::uint64_t want,
                          bool with_seen, std::uint32_t* out, std::uint64_t* seen) {
  std::uint64_t v = ~std::uint64_t{0};
  const gv::Status s = rma::wait_until<G>(ep, word, rma::Cmp::kEq, want, with_seen ? &v : nullptr);
  out[G::index()] = static_cast<std::uint32_t>(s);
  seen[G::index()] = v;
}

/// Statuses of bad requests, in a fixed order (see the test).
__global__ void bad_input(__grid_constant__ const rma::Endpoint ep, std::byte* buf, std::uint32_t* out) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  std::byte local[16] = {};
  std::uint64_t old = 0;
  int i = 0;
  out[i++] = static_cast<std::uint32_t>(rma::put(ep, buf, local, 8, -1));
  out[i++] = static_cast<std::uint32_t>(rma::put(ep, buf, local, 8, static_cast<int>(ep.size)));
  out[i++] = static_cast<std::uint32_t>(rma::put(ep, local, local, 8, 0));
  out[i++] = static_cast<std::uint32_t>(rma::put(ep, ep.heap + ep.heap_bytes - 4, local, 8, 0));
  out[i++] = static_cast<std::uint32_t>(rma::put(ep, buf, local, ~std::size_t{0}, 0));
  out[i++] = static_cast<std::uint32_t>(rma::fetch_add(ep, reinterpret_cast<std::uint64_t*>(buf + 4), std::uint64_t{1}, 0, old));
  out[i++] = static_cast<std::uint32_t>(
      rma::put_signal(ep, buf, local, 8, reinterpret_cast<std::uint64_t*>(local), 1, rma::SignalOp::kAdd, 0));
  out[i++] = static_cast<std::uint32_t>(rma::wait_until(ep, reinterpret_cast<std::uint64_t*>(buf + 64), rma::Cmp::kEq,
                                                        std::uint64_t{12345}));  // budget: kTimeout
}

/// After World::abort(): each operation's status, in a fixed order (see the test). The target
/// PE is `pe`; `local` is a buffer of this rank's heap.
__global__ void after_abort(__grid_constant__ const rma::Endpoint ep, std::byte* buf, std::byte* local, int pe,
                            std::uint32_t* out) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  auto* word = reinterpret_cast<std::uint64_t*>(buf);
  std::uint64_t old = 0;
  int i = 0;
  out[i++] = static_cast<std::uint32_t>(rma::p(ep, word, std::uint64_t{1}, pe));
  out[i++] = static_cast<std::uint32_t>(rma::put(ep, buf + 64, local, 64, pe));
  out[i++] = static_cast<std::uint32_t>(rma::put_nbi(ep, buf + 64, local, 64, pe));
  out[i++] = static_cast<std::uint32_t>(rma::get(ep, local, buf + 64, 64, pe));
  out[i++] = static_cast<std::uint32_t>(rma::put_signal(ep, buf + 64, local, 64, word, 1, rma::SignalOp::kAdd, pe));
  out[i++] = static_cast<std::uint32_t>(rma::signal(ep, word, 1, rma::SignalOp::kSet, pe));
  out[i++] = static_cast<std::uint32_t>(rma::fetch_add(ep, word, std::uint64_t{1}, pe, old));
  out[i++] = static_cast<std::uint32_t>(rma::compare_swap(ep, word, std::uint64_t{0}, std::uint64_t{1}, pe, old));
  out[i++] = static_cast<std::uint32_t>(rma::put_ll(ep, buf + 256, local, 8, 1, pe));
  out[i++] = static_cast<std::uint32_t>(rma::wait_until(ep, word, rma::Cmp::kGe, std::uint64_t{0}));
  out[i++] = static_cast<std::uint32_t>(rma::fence(ep));
  out[i++] = static_cast<std::uint32_t>(rma::quiet(ep));
}

/// A random soak: each thread issues `ops` random operations to random ranks: add (values
/// tallied per (thread, target)), put_signal of 64 bytes counted by a signal per source rank.
__global__ void soak(__grid_constant__ const rma::Endpoint ep, std::uint64_t* counters, std::uint64_t* arrivals,
                     std::uint64_t* mail, std::uint64_t* payloads, std::uint64_t* tally_add, std::uint64_t* tally_put,
                     int ops, std::uint32_t* st) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  std::uint64_t x = gv::splitmix64(0x5eed + ep.rank * 7919u + t);
  std::uint64_t* payload = payloads + t * 8;
  for (int i = 0; i < ops; ++i) {
    x = gv::splitmix64(x);
    const int q = static_cast<int>(x % ep.size);
    gv::Status s;
    if ((x >> 32) % 4 != 0) {
      const std::uint64_t v = 1 + (x >> 40) % 1000;
      s = rma::add(ep, counters + ep.rank, v, q);
      if (s == gv::Status::kOk) atomicAdd(reinterpret_cast<unsigned long long*>(tally_add + q), static_cast<unsigned long long>(v));
    } else {
      for (int k = 0; k < 8; ++k) payload[k] = static_cast<std::uint64_t>(i) * 8 + k;
      s = rma::put_signal(ep, mail + 8 * ep.rank, payload, 64, arrivals + ep.rank, 1, rma::SignalOp::kAdd, q);
      if (s == gv::Status::kOk) atomicAdd(reinterpret_cast<unsigned long long*>(tally_put + q), 1ull);
    }
    if (s != gv::Status::kOk) {
      atomicMax(st, static_cast<std::uint32_t>(s));
      return;
    }
  }
}

}  // namespace gvt

namespace gvt {
/// Complete every operation of this rank (ib puts may still be in flight when a kernel ends),
/// then meet the other ranks.
__global__ void finish(__grid_constant__ const rma::Endpoint ep, std::uint32_t* st) {
  gv::Status s = rma::quiet<rma::Block>(ep);
  if (s == gv::Status::kOk) s = rma::barrier<rma::Block>(ep);
  if (s != gv::Status::kOk && threadIdx.x == 0) atomicMax(st, static_cast<std::uint32_t>(s));
}
}  // namespace gvt
