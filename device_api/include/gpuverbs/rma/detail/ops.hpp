// The rma operations (declared and documented in <gpuverbs/rma.hpp>).
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../../sync.hpp"
#include "../endpoint.hpp"
#include "../group.hpp"
#include "copy.hpp"
#include "ib.hpp"
#include "mem.hpp"

namespace gv::rma {
namespace detail {

/// Largest message one WQE carries; longer ib transfers are split.
inline constexpr std::size_t kMaxWqeBytes = std::size_t{1} << 30;

/// How an operation reaches a PE: straight through memory mapped here (`base`: kSelf, kP2p),
/// or through the ib lanes of `ib`.
struct Route {
  std::byte* base = nullptr;
  const Peer* ib = nullptr;
};

/// Peer pe's heap in this address space when pe is a near direct peer (Endpoint::near: kSelf,
/// kP2p below kNearPeers), else null. No branches and no memory read: the index is masked into
/// the array and the entry kept only when the PE is valid (each compare a branch of its own cost
/// ~10 cycles apiece on the critical path of a ping-pong).
GV_HD GV_INLINE std::byte* near_peer(const Endpoint& ep, int pe) {
  static_assert((kNearPeers & (kNearPeers - 1)) == 0, "the near index is masked, not compared");
  const auto q = static_cast<std::uint32_t>(pe);
  std::byte* const near = ep.near[q & (kNearPeers - 1)];
  return (ep.version == kEndpointVersion) & (q < ep.size) & (q < kNearPeers) ? near : nullptr;
}

/// The route to `pe`; false when it is out of range or unreachable. Near direct peers cost no
/// memory read (near_peer).
GV_HD GV_INLINE bool route(const Endpoint& ep, int pe, Route& r) {
  if (std::byte* const near = near_peer(ep, pe)) {
    r = Route{near, nullptr};
    return true;
  }
  const auto q = static_cast<std::uint32_t>(pe);
  if ((ep.version != kEndpointVersion) | (q >= ep.size)) return false;
  const Peer* p = ep.peers + q;
  const Transport t = p->transport;
  if (t == Transport::kNone) return false;
  r = t == Transport::kIb ? Route{nullptr, p} : Route{p->base, nullptr};
  return true;
}

/// Offset of [p, p + n) in the user part of this rank's heap; false outside it or on overflow.
/// The three compares are combined without branches (`&`, not `&&`: the last one's wrapped
/// difference only matters when the second holds).
GV_HD GV_INLINE bool heap_offset(const Endpoint& ep, const void* p, std::size_t n, std::uint64_t& off) {
  off = reinterpret_cast<std::uintptr_t>(p) - reinterpret_cast<std::uintptr_t>(ep.heap);
  return (off >= ep.user_offset) & (off <= ep.heap_bytes) & (n <= ep.heap_bytes - off);
}

/// This rank's abort word (Reserved::aborted), nonzero once the World raised it: then every
/// operation returns kAborted. One load of this rank's heap; the value is the caller's to test,
/// so the load can be issued beside others and waited for once.
GV_HD GV_INLINE std::uint32_t abort_word(const Endpoint& ep) {
  return ep.heap != nullptr ? load_word(&reinterpret_cast<const Reserved*>(ep.heap)->aborted) : 0u;
}
GV_HD GV_INLINE bool aborted(const Endpoint& ep) { return abort_word(ep) != 0; }

/// The common case of an operation on symmetric [sym, sym + n) at PE pe, tested at once: a near
/// direct peer, the range in the user heap, `sym` a multiple of `align` (a power of two), and on
/// the host the World not aborted (host ranks test it before anything moves). Returns where the
/// range is in this address space, or null when any of it fails or the peer is not near: the
/// caller then takes the general path (locate_p2p_later), which names the failure. Every test
/// is combined without branches into one select, so a loop calling an operation on one target
/// decides a single predicate per call: through route()'s three outcomes the face's fetch_add
/// loop kept their branches and phis in the loop body (PTX, 2026-11-26).
GV_HD GV_INLINE std::byte* direct(const Endpoint& ep, const void* sym, std::size_t n, std::size_t align, int pe) {
  std::byte* const base = near_peer(ep, pe);
  std::uint64_t off;
  const bool ok = (base != nullptr) & heap_offset(ep, sym, n, off) &
                  ((reinterpret_cast<std::uintptr_t>(sym) & (align - 1)) == 0) & (GV_DEVICE_PASS || !aborted(ep));
  return ok ? base + off : nullptr;
}

/// The checks of an operation on symmetric [dst, dst + n) at PE pe that need no memory: the PE
/// and the heap range.
GV_HD GV_INLINE Status find(const Endpoint& ep, const void* sym, std::size_t n, int pe, Route& peer,
                            std::uint64_t& off) {
  if (!route(ep, pe, peer)) return Status::kInvalidPe;
  return heap_offset(ep, sym, n, off) ? Status::kOk : Status::kOutOfBounds;
}

/// The checks of an operation whose p2p accesses follow: find(), then the abort word. On the
/// host and over ib the word is tested here, so nothing is touched after an abort. On the GPU
/// over p2p it is read after the operation's own accesses (abort_after; an atomic's just before
/// it, tested after it: remote_rmw), so its round trip overlaps theirs instead of preceding
/// them: the operation returns kAborted all the same, but one that an abort overtakes may have
/// landed. (Loaded here and tested later, the compiler placed the test before the accesses,
/// which then waited for the load: ncu found the stall there.)
GV_HD GV_INLINE Status locate_p2p_later(const Endpoint& ep, const void* sym, std::size_t n, int pe, Route& peer,
                                        std::uint64_t& off) {
  const Status st = find(ep, sym, n, pe, peer, off);
  if (st != Status::kOk) return st;
  if ((!GV_DEVICE_PASS || peer.ib != nullptr) && aborted(ep)) return Status::kAborted;
  return Status::kOk;
}

/// The status that ends a p2p operation begun after locate_p2p_later: on the GPU, whether the
/// World has aborted, read now; on the host that was tested before anything moved.
GV_HD GV_INLINE Status abort_after(const Endpoint& ep) {
  return GV_DEVICE_PASS && aborted(ep) ? Status::kAborted : Status::kOk;
}

/// abort_after for a call that may not block: a non-blocking p2p operation on the GPU waits for
/// nothing, so it does not read the abort word (the quiet that completes it does). Read after
/// every scattered 64-byte put_nbi, the word held each thread for a round trip to memory: the
/// face's put rate on one H200 15.0 Gmsg/s with it, 17.3 without (NVSHMEM 3.4: 17.2).
GV_HD GV_INLINE Status abort_after(const Endpoint& ep, bool wait) { return wait ? abort_after(ep) : Status::kOk; }

/// The checks of a wait on a word of this rank's heap: in the heap, naturally aligned, and the
/// World not aborted.
template <class T>
GV_HD GV_INLINE Status locate_local_word(const Endpoint& ep, const T* ivar) {
  std::uint64_t off;
  if (!heap_offset(ep, ivar, sizeof(T), off)) return Status::kOutOfBounds;
  if (reinterpret_cast<std::uintptr_t>(ivar) % sizeof(T) != 0) return Status::kInvalidArgument;
  return aborted(ep) ? Status::kAborted : Status::kOk;
}

/// Run f on the group's leader; every member gets its result.
template <class G, class F>
GV_HD GV_INLINE auto on_leader(F&& f) {
  decltype(f()) r{};
  if (G::index() == 0) r = f();
  return G::from_leader(r);
}

/// The worst status of the group's members (kOk unless one failed); a group-wide sync point.
/// `value` becomes the leader's on every member, published by the same sync (a block's first
/// barrier: one barrier in all when every member is kOk, where group_worst and from_leader took
/// three). A call site (kSite) alternates between two slots (`turn`, which the caller flips on
/// every call): a slot is written again only after the next call's sync, which every member
/// reaches after it has read the slot.
template <class G, int kSite = 0>
GV_HD GV_INLINE Status group_worst(Status s, std::uint32_t* value = nullptr, unsigned turn = 0) {
#if GV_DEVICE_PASS
  if constexpr (std::is_same_v<G, Warp>) {
    if (value != nullptr) *value = __shfl_sync(0xffffffffu, *value, 0);
    if (!__any_sync(0xffffffffu, s != Status::kOk)) return Status::kOk;
    auto w = static_cast<std::uint32_t>(s);
    for (int d = 16; d > 0; d /= 2) w = max(w, __shfl_xor_sync(0xffffffffu, w, d));
    return static_cast<Status>(w);
  } else if constexpr (std::is_same_v<G, Block>) {
    __shared__ std::uint32_t shared[2];
    if (value != nullptr && G::index() == 0) shared[turn & 1u] = *value;
    const bool failed = __syncthreads_or(s != Status::kOk);
    if (value != nullptr) *value = shared[turn & 1u];
    if (!failed) return Status::kOk;
    __shared__ std::uint32_t worst;
    if (G::index() == 0) worst = 0;
    __syncthreads();
    atomicMax(&worst, static_cast<std::uint32_t>(s));
    __syncthreads();
    const auto w = static_cast<Status>(worst);
    __syncthreads();  // the slot may be reused by the next call
    return w;
  }
#endif
  (void)value;
  (void)turn;
  return s;
}

// ---- ib pieces -------------------------------------------------------------------------------

/// The local SGE of a transfer over ib: this rank's heap (lkey), or inline when it fits and the
/// caller allows it (puts: the payload is copied into the WQE at post time).
GV_HD GV_INLINE Status ib_local(const Endpoint& ep, const IbLane& L, const void* p, std::size_t n, bool may_inline,
                                ib::Sge& sge, bool& inl) {
  inl = may_inline && n <= L.qp.max_inline;
  sge = ib::Sge{reinterpret_cast<std::uint64_t>(p), static_cast<std::uint32_t>(n), ep.lkey};
  if (inl) return Status::kOk;
  const std::uint64_t a = reinterpret_cast<std::uintptr_t>(p) - reinterpret_cast<std::uintptr_t>(ep.heap);
  return (a <= ep.heap_bytes && n <= ep.heap_bytes - a) ? Status::kOk : Status::kInvalidArgument;
}

/// WRITE (or READ) of n bytes between local `loc` and the peer's heap at `off`, split into WQEs
/// of at most kMaxWqeBytes; `last` gets the final WQE.
GV_HD inline Status ib_transfer(const Endpoint& ep, const Peer& peer, const IbLane& L, bool read, void* loc,
                                std::uint64_t off, std::size_t n, Posted& last) {
  std::size_t done = 0;
  do {
    const std::size_t chunk = n - done < kMaxWqeBytes ? n - done : kMaxWqeBytes;
    ib::Sge sge;
    bool inl = false;
    Status st = ib_local(ep, L, static_cast<std::byte*>(loc) + done, chunk, !read, sge, inl);
    if (st != Status::kOk) return st;
    ib::SendWr wr = make_write(peer.remote_base + off + done, peer.rkey, &sge, inl);
    if (read) wr.opcode = ib::WrOpcode::kRdmaRead;
    if (chunk == 0) wr.num_sge = 0;
    st = ib_post(ep, L, wr, false, last);
    if (st != Status::kOk) return st;
    done += chunk;
  } while (done < n);
  return Status::kOk;
}

/// `*sig op= value` at the peer over lane L: an inline WRITE (set) or a FETCH_ADD (add).
GV_HD inline Status ib_signal(const Endpoint& ep, const Peer& peer, const IbLane& L, std::uint64_t off,
                              std::uint64_t value, SignalOp op, Posted& posted) {
  ib::SendWr wr;
  wr.flags = ib::kWrSignaled;
  wr.remote_addr = peer.remote_base + off;
  wr.rkey = peer.rkey;
  ib::Sge sge{reinterpret_cast<std::uint64_t>(&value), 8, 0};
  if (op == SignalOp::kSet) {
    wr = make_write(peer.remote_base + off, peer.rkey, &sge, true);
    return ib_post(ep, L, wr, false, posted);
  }
  wr.opcode = ib::WrOpcode::kAtomicFetchAdd;
  wr.compare_add = value;
  wr.sg_list = &sge;  // replaced by the result slot
  wr.num_sge = 1;
  return ib_post(ep, L, wr, true, posted);
}

/// One 8-byte verbs atomic at the peer's heap offset `off` (8-aligned); `old` is the value before.
GV_HD inline Status ib_atomic64(const Endpoint& ep, const Peer& peer, const IbLane& L, ib::WrOpcode op,
                                std::uint64_t off, std::uint64_t compare_add, std::uint64_t swap, bool wait,
                                std::uint64_t& old) {
  ib::SendWr wr;
  wr.opcode = op;
  wr.flags = ib::kWrSignaled;
  wr.remote_addr = peer.remote_base + off;
  wr.rkey = peer.rkey;
  wr.compare_add = compare_add;
  wr.swap = swap;
  ib::Sge placeholder{0, 8, 0};
  wr.sg_list = &placeholder;
  wr.num_sge = 1;
  Posted p;
  Status st = ib_post(ep, L, wr, true, p);
  if (st != Status::kOk || !wait) return st;
  st = ib_wait(ep, L, p.end);
  if (st == Status::kOk) old = ib_result(L, p);
  return st;
}

/// A read-modify-write of a 4- or 8-byte word at the peer over ib: FETCH_ADD and CMP_SWP act
/// on 8 aligned bytes, so a 4-byte word is updated by compare-and-swap of the 8 bytes around it
/// (retried until no one else changed them). `f(old) -> new`; `old` gets the word before.
template <class T, class F>
GV_HD inline Status ib_rmw(const Endpoint& ep, const Peer& peer, const IbLane& L, std::uint64_t off, F&& f,
                           T& old) {
  const std::uint64_t base = off & ~std::uint64_t{7};
  const unsigned shift = static_cast<unsigned>(off - base) * 8;
  const std::uint64_t mask = sizeof(T) == 8 ? ~std::uint64_t{0} : (std::uint64_t{0xffffffffu} << shift);
  std::uint64_t cur = 0;
  Status st = ib_atomic64(ep, peer, L, ib::WrOpcode::kAtomicFetchAdd, base, 0, 0, true, cur);
  const std::uint64_t t0 = sync::now_ns();
  while (st == Status::kOk) {
    const T mine = from_bits<T>(static_cast<bits_t<T>>((cur & mask) >> shift));
    const std::uint64_t next = (cur & ~mask) | ((static_cast<std::uint64_t>(to_bits<T>(f(mine))) << shift) & mask);
    std::uint64_t seen = 0;
    st = ib_atomic64(ep, peer, L, ib::WrOpcode::kAtomicCmpSwp, base, cur, next, true, seen);
    if (st != Status::kOk) break;
    if (seen == cur) {
      old = mine;
      return Status::kOk;
    }
    cur = seen;
    if (sync::now_ns() - t0 > ep.budget.ns) return Status::kTimeout;
  }
  return st;
}

template <class T>
inline constexpr bool is_atomic_int_v =
    std::is_integral_v<T> && !std::is_same_v<T, bool> && (sizeof(T) == 4 || sizeof(T) == 8);
template <class T>
inline constexpr bool is_atomic_word_v = std::is_trivially_copyable_v<T> && (sizeof(T) == 4 || sizeof(T) == 8);

/// remote_rmw over ib: the single verbs atomic `op64` for an 8-byte word where there is one,
/// else a read, `f` and a compare-and-swap until it holds (ib_rmw), on the group's leader.
template <class G, class T, class F>
GV_HD GV_INLINE Status remote_rmw_ib(const Endpoint& ep, const Peer& peer, std::uint64_t off, T& old, F&& f,
                                     ib::WrOpcode op64, std::uint64_t compare_add, std::uint64_t swap) {
  struct R {
    Status st;
    T old;
  };
  const R r = on_leader<G>([&]() -> R {
    R out{Status::kOk, T{}};
    const IbLane& L = lane_for(peer, G::queue_hint());
    if (sizeof(T) == 8 && op64 != ib::WrOpcode::kNop) {
      std::uint64_t o = 0;
      out.st = ib_atomic64(ep, peer, L, op64, off, compare_add, swap, true, o);
      out.old = from_bits<T>(static_cast<bits_t<T>>(o));
    } else {
      out.st = ib_rmw<T>(ep, peer, L, off, f, out.old);
    }
    return out;
  });
  old = r.old;
  return r.st;
}

/// A read-modify-write at PE pe: `native(ptr, word)` where the peer's word is in reach (p2p, self),
/// else over ib (`f(old) -> new`; `op64` is the single verbs atomic that does it for an
/// 8-byte word, kNop when there is none).
template <class G, class T, class Native, class F>
GV_HD GV_INLINE Status remote_rmw(const Endpoint& ep, T* target, int pe, T& old, Native&& native, F&& f,
                                  ib::WrOpcode op64, std::uint64_t compare_add, std::uint64_t swap) {
  struct R {
    Status st;
    T old;
  };
  static_assert(sizeof(T) == 4 || sizeof(T) == 8);
  T* at = reinterpret_cast<T*>(direct(ep, target, sizeof(T), sizeof(T), pe));
  if (at == nullptr) {
    Route peer;
    std::uint64_t off;
    const Status st = locate_p2p_later(ep, target, sizeof(T), pe, peer, off);
    if (st != Status::kOk) return st;
    if (reinterpret_cast<std::uintptr_t>(target) % sizeof(T) != 0) return Status::kInvalidArgument;
    if (peer.ib) return remote_rmw_ib<G>(ep, *peer.ib, off, old, f, op64, compare_add, swap);
    at = reinterpret_cast<T*>(peer.base + off);
  }
  // The abort word is loaded before the atomic and tested after it (mem.hpp): its round trip and
  // its test overlap the atomic's, where abort_after's load, issued after the atomic, returned
  // after it and put the test between the fetched value and the caller.
  const R r = on_leader<G>([&]() -> R {
    std::uint32_t word = GV_DEVICE_PASS ? abort_word(ep) : 0u;  // the host tested it before anything moved
    const T o = native(at, word);
    return R{word != 0 ? Status::kAborted : Status::kOk, o};
  });
  old = r.old;
  return r.st;
}
}  // namespace detail

// ---- Data movement ------------------------------------------------------------------------

namespace detail {
/// A put (kGet false: the caller's src to symmetric dst at PE pe) or a get (kGet true: symmetric
/// src at pe to the caller's dst).
template <class G, bool kGet>
GV_HD inline Status transfer_impl(const Endpoint& ep, void* dst, const void* src, std::size_t bytes, int pe, bool wait) {
  const void* sym = kGet ? src : dst;
  void* local = kGet ? dst : const_cast<void*>(src);
  std::byte* at = direct(ep, sym, bytes, 1, pe);
  if ((at == nullptr) | (local == nullptr)) {
    if (local == nullptr) return Status::kInvalidArgument;  // on every transport, at every size
    Route peer;
    std::uint64_t off;
    const Status st = locate_p2p_later(ep, sym, bytes, pe, peer, off);
    if (st != Status::kOk) return st;
    if (peer.ib) {
      return on_leader<G>([&] {
        const IbLane& L = lane_for(*peer.ib, G::queue_hint());
        Posted last;
        Status s = ib_transfer(ep, *peer.ib, L, kGet, local, off, bytes, last);
        // A put small enough to go inline is complete once posted.
        if (s == Status::kOk && wait && (kGet || bytes > L.qp.max_inline)) s = ib_wait(ep, L, last.end);
        return s;
      });
    }
    at = peer.base + off;
  }
  if constexpr (kGet) group_copy<G>(dst, at, bytes);
  else group_copy<G, true>(at, src, bytes);
  G::sync();  // a put: every member has read its part (the source may be reused); a get: every part arrived
  return abort_after(ep, wait);
}

/// The end of a p2p put_signal once every member has stored its data: the group syncs, the
/// leader releases the signal at `sig_at`, and the status is the abort word's (abort_after).
template <class G>
GV_HD GV_INLINE Status signal_after_data(const Endpoint& ep, std::byte* sig_at, SignalOp op, std::uint64_t value,
                                         bool wait) {
  G::sync();  // every member's stores are behind the leader's release
  if (G::index() == 0) signal_release(reinterpret_cast<std::uint64_t*>(sig_at), op, value, ep.direct_same_gpu != 0);
  return abort_after(ep, wait);
}

/// put_signal's common case on the GPU: whole 8-byte words, at most kW a member (word me + j *
/// count), to a near direct peer. Every member loads its words before the checks are decided, so
/// the checks' compares run while the loads are in flight; the stores follow the one test. Returns
/// false, having stored nothing, when the checks fail (the caller's general path then names the
/// failure or takes the route the peer needs).
template <class G, unsigned kW>
GV_HD GV_INLINE bool put_signal_words(const Endpoint& ep, void* dst, const void* src, std::size_t bytes,
                                      std::uint64_t* sig, std::uint64_t value, SignalOp op, int pe, bool wait,
                                      Status& st) {
  const std::uint32_t me = G::index(), cnt = G::count(), words = static_cast<std::uint32_t>(bytes / 8);
  const auto* s64 = static_cast<const std::uint64_t*>(src);
  std::uint64_t v[kW];
#if GV_DEVICE_PASS
#pragma unroll
#endif
  for (unsigned j = 0; j < kW; ++j) v[j] = load_if<false>(me + j * cnt < words, s64 + me + j * cnt, std::uint64_t{0});
  std::byte* const at = direct(ep, dst, bytes, 8, pe);
  std::byte* const sig_at = direct(ep, sig, sizeof(*sig), 8, pe);
  if ((at == nullptr) | (sig_at == nullptr)) return false;
#if GV_DEVICE_PASS
#pragma unroll
#endif
  for (unsigned j = 0; j < kW; ++j)
    if (me + j * cnt < words) reinterpret_cast<std::uint64_t*>(at)[me + j * cnt] = v[j];
  st = signal_after_data<G>(ep, sig_at, op, value, wait);
  return true;
}

/// The tiers of put_signal_words a group takes, by the words a member carries: one word a member
/// (a thread's 8 B, a warp's 256 B, a block's 4 KiB of 512 threads), then kPutSignalWords<G>. Between
/// a wait's poll and a put_signal's data store the checks, the copy's tests and its source loads
/// stood one after another, and a ping-pong waits for each (notes/rma.md). gv_rma on one H200 over
/// placements, against the general path: a thread's 8 B round 0.88-0.93 -> 0.77-0.78 us, its
/// 16-64 B 1.03-1.13 -> 0.80-0.81 (others within 0.03); a warp's 8-256 B 1.04-1.11 -> 0.99-1.00,
/// 512 B-2 KiB 1.09-1.24 -> 1.03-1.05; a block's 8 B-2 KiB (a warp's put_signal for it) 1.07-1.28 ->
/// 0.92-1.02, its 4 KiB 1.21-1.22 -> 1.02 (archive/2026-11-27-h200-rma-ab-put-signal-early.txt).
/// Sizes: a warp's eight words a lane cover what a block leaves to its first warp (kBlockByWarp); a
/// thread's sixteen made its 16-64 B rounds slower, and a third tier of 32 (its 128-256 B 1.11-1.20
/// -> 0.96-1.07 us) took a kernel of thread-scope put_signal calls in blocks of 512 past 128
/// registers (the face's ping-pong 139, compile.registers_gv_shmem_perf).
template <class G>
inline constexpr unsigned kPutSignalWords = std::is_same_v<G, Block> ? 1 : 8;

/// put_signal, put_signal_nbi (wait false) and put_ll's ib route. kWords: try put_signal_words
/// first (put_ll's ib route does not: its peer is never near, and the tiers' code took gv_rma's
/// LlChannel<Block> kernel past 128 registers).
template <class G, bool kWords = true>
GV_HD inline Status put_signal_impl(const Endpoint& ep, void* dst, const void* src, std::size_t bytes,
                                    std::uint64_t* sig, std::uint64_t value, SignalOp op, int pe, bool wait) {
#if GV_DEVICE_PASS
  if constexpr (kWords) {
    const std::size_t cnt = G::count();
    const bool whole = (src != nullptr) & (bytes != 0) & (((reinterpret_cast<std::uintptr_t>(src) | bytes) & 7u) == 0);
    Status st = Status::kOk;
    if (whole & (bytes <= 8 * cnt)) {
      if (put_signal_words<G, 1>(ep, dst, src, bytes, sig, value, op, pe, wait, st)) return st;
    } else if (kPutSignalWords<G> > 1 && (whole & (bytes <= 8 * kPutSignalWords<G> * cnt))) {
      if (put_signal_words<G, kPutSignalWords<G>>(ep, dst, src, bytes, sig, value, op, pe, wait, st)) return st;
    }
  }
#endif
  std::byte* at = direct(ep, dst, bytes, 1, pe);
  std::byte* sig_at = direct(ep, sig, sizeof(*sig), 8, pe);
  if ((src == nullptr) | (at == nullptr) | (sig_at == nullptr)) {
    if (src == nullptr) return Status::kInvalidArgument;  // on every transport, at every size
    Route peer;
    std::uint64_t off, sig_off;
    const Status st = locate_p2p_later(ep, dst, bytes, pe, peer, off);
    if (st != Status::kOk) return st;
    if (!heap_offset(ep, sig, sizeof(*sig), sig_off)) return Status::kOutOfBounds;
    if (reinterpret_cast<std::uintptr_t>(sig) % 8 != 0) return Status::kInvalidArgument;
    if (peer.ib) {
      return on_leader<G>([&] {
        const IbLane& L = lane_for(*peer.ib, G::queue_hint());
        Posted data, sigp;
        Status s = ib_transfer(ep, *peer.ib, L, false, const_cast<void*>(src), off, bytes, data);
        if (s == Status::kOk) s = ib_signal(ep, *peer.ib, L, sig_off, value, op, sigp);
        if (s == Status::kOk && wait && !(bytes <= L.qp.max_inline)) s = ib_wait(ep, L, data.end);
        return s;
      });
    }
    at = peer.base + off;
    sig_at = peer.base + sig_off;
  }
  group_copy<G, true>(at, src, bytes);
  return signal_after_data<G>(ep, sig_at, op, value, wait);
}
}  // namespace detail

template <class G>
GV_HD Status put(const Endpoint& ep, void* dst, const void* src, std::size_t bytes, int pe) {
  return detail::transfer_impl<G, false>(ep, dst, src, bytes, pe, true);
}
template <class G>
GV_HD Status put_nbi(const Endpoint& ep, void* dst, const void* src, std::size_t bytes, int pe) {
  return detail::transfer_impl<G, false>(ep, dst, src, bytes, pe, false);
}
template <class G>
GV_HD Status get(const Endpoint& ep, void* dst, const void* src, std::size_t bytes, int pe) {
  return detail::transfer_impl<G, true>(ep, dst, src, bytes, pe, true);
}
template <class G>
GV_HD Status get_nbi(const Endpoint& ep, void* dst, const void* src, std::size_t bytes, int pe) {
  return detail::transfer_impl<G, true>(ep, dst, src, bytes, pe, false);
}

template <class G, class T>
GV_HD Status p(const Endpoint& ep, T* dst, T value, int pe) {
  static_assert(std::is_trivially_copyable_v<T> && (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8),
                "rma::p moves one 1-, 2-, 4- or 8-byte value");
  T* at = reinterpret_cast<T*>(detail::direct(ep, dst, sizeof(T), 1, pe));
  if (at == nullptr) {
    detail::Route peer;
    std::uint64_t off;
    const Status st = detail::locate_p2p_later(ep, dst, sizeof(T), pe, peer, off);
    if (st != Status::kOk) return st;
    if (peer.ib) {
      return detail::on_leader<G>([&] {
        const IbLane& L = detail::lane_for(*peer.ib, G::queue_hint());
        const ib::Sge sge{reinterpret_cast<std::uint64_t>(&value), sizeof(T), 0};
        detail::Posted posted;
        return detail::ib_post(ep, L, detail::make_write(peer.ib->remote_base + off, peer.ib->rkey, &sge, true), false,
                               posted);
      });
    }
    at = reinterpret_cast<T*>(peer.base + off);
  }
  return detail::on_leader<G>([&] {
    detail::store_word(at, value);
    return detail::abort_after(ep);
  });
}

template <class G, class T>
GV_HD Status g(const Endpoint& ep, const T* src, int pe, T& value) {
  static_assert(std::is_trivially_copyable_v<T> && (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8),
                "rma::g moves one 1-, 2-, 4- or 8-byte value");
  struct R {
    Status st;
    T v;
  };
  const T* at = reinterpret_cast<const T*>(detail::direct(ep, src, sizeof(T), 1, pe));
  detail::Route peer;
  std::uint64_t off = 0;
  if (at == nullptr) {
    const Status st = detail::locate_p2p_later(ep, src, sizeof(T), pe, peer, off);
    if (st != Status::kOk) return st;
    if (!peer.ib) at = reinterpret_cast<const T*>(peer.base + off);
  }
  const R r = detail::on_leader<G>([&]() -> R {
    if (at != nullptr) {
      const T v = detail::load_word(at);
      return R{detail::abort_after(ep), v};
    }
    const IbLane& L = detail::lane_for(*peer.ib, G::queue_hint());
    ib::SendWr wr = detail::make_write(peer.ib->remote_base + off, peer.ib->rkey, nullptr, false);
    wr.opcode = ib::WrOpcode::kRdmaRead;
    ib::Sge placeholder{0, sizeof(T), 0};
    wr.sg_list = &placeholder;
    detail::Posted posted;
    Status s = detail::ib_post(ep, L, wr, true, posted);
    if (s == Status::kOk) s = detail::ib_wait(ep, L, posted.end);
    R out{s, T{}};
    if (s == Status::kOk) {
      const std::uint64_t word = detail::ib_result(L, posted);
      std::memcpy(&out.v, &word, sizeof(T));
    }
    return out;
  });
  value = r.v;
  return r.st;
}

// ---- Signals ------------------------------------------------------------------------------

namespace detail {
/// Largest put_signal a block leaves to its first warp: the warp's put_signal is the block's
/// without 15 more warps each making the checks, running the copy's loop control and meeting
/// the barrier before the release. One H200, typical half round trips of a block's put_signal
/// at 8 B-1 KiB, alternating binaries: 1.47-1.49 us, 1.32-1.34 delegated (a warp's own 1.31-1.34,
/// the block's floor, raw_put_sys, 1.18-1.20; archive/2026-11-26-h200-rma-ab-block-put-signal.txt).
/// A thread's put_signal is faster still up to 128 B (1.17-1.25), but a block that left it to
/// one thread was not: 1.51-1.55 us at 16-128 B against the block's own 1.42.
inline constexpr std::size_t kBlockByWarp = 2048;
}  // namespace detail

template <class G>
GV_HD Status put_signal(const Endpoint& ep, void* dst, const void* src, std::size_t bytes, std::uint64_t* sig,
                        std::uint64_t value, SignalOp op, int pe) {
#if GV_DEVICE_PASS
  if constexpr (std::is_same_v<G, Block>) {
    // The other warps only wait: the barrier at the end gives every thread the status and tells
    // it the source may be reused (the warp's loads are done). None first: the members' writes
    // to the source are behind the caller's sync (rma.hpp, "Groups").
    if (bytes <= detail::kBlockByWarp && Block::count() >= 32) {
      Status s = Status::kOk;
      if (Block::index() < 32) s = detail::put_signal_impl<Warp>(ep, dst, src, bytes, sig, value, op, pe, true);
      return detail::group_worst<Block>(s);
    }
  }
#endif
  return detail::put_signal_impl<G>(ep, dst, src, bytes, sig, value, op, pe, true);
}
template <class G>
GV_HD Status put_signal_nbi(const Endpoint& ep, void* dst, const void* src, std::size_t bytes, std::uint64_t* sig,
                            std::uint64_t value, SignalOp op, int pe) {
  return detail::put_signal_impl<G>(ep, dst, src, bytes, sig, value, op, pe, false);
}

template <class G>
GV_HD Status signal(const Endpoint& ep, std::uint64_t* sig, std::uint64_t value, SignalOp op, int pe) {
  auto* at = reinterpret_cast<std::uint64_t*>(detail::direct(ep, sig, sizeof(*sig), 8, pe));
  detail::Route peer;
  std::uint64_t off = 0;
  if (at == nullptr) {
    const Status st = detail::locate_p2p_later(ep, sig, sizeof(*sig), pe, peer, off);
    if (st != Status::kOk) return st;
    if (reinterpret_cast<std::uintptr_t>(sig) % 8 != 0) return Status::kInvalidArgument;
    if (!peer.ib) at = reinterpret_cast<std::uint64_t*>(peer.base + off);
  }
  G::sync();
  return detail::on_leader<G>([&] {
    if (at != nullptr) {
      detail::signal_release(at, op, value, ep.direct_same_gpu != 0);
      return detail::abort_after(ep);
    }
    detail::Posted posted;
    return detail::ib_signal(ep, *peer.ib, detail::lane_for(*peer.ib, G::queue_hint()), off, value, op, posted);
  });
}

// ---- Waiting ------------------------------------------------------------------------------

template <class G, class T>
GV_HD Status wait_until(const Endpoint& ep, const T* ivar, Cmp cmp, T value, T* seen) {
  static_assert(detail::is_atomic_int_v<T>, "rma::wait_until waits on a 4- or 8-byte integer");
  if (const Status st = detail::locate_local_word(ep, ivar); st != Status::kOk) return st;
  struct R {
    Status st;
    T v;
  };
  // Every poll an acquire load, the value it saw returned: a relaxed poll ended by one acquire
  // load paid that load's round trip after the signal had arrived, on the critical path of a
  // ping-pong (a block's put_signal + wait_until on an H100, 2026-11-26: +0.09 us).
  T v{};
  auto poll = [&] {
    return sync::bounded_wait(
        [&] {
          v = detail::signal_seen_before_data(ivar);
          return compare(v, cmp, value);
        },
        ep.budget, ep.abort);
  };
#if GV_DEVICE_PASS
  if constexpr (std::is_same_v<G, Block>) {
    // Without `seen` a block shares only the leader's status, in the reduction of one barrier
    // (group_worst), not through shared memory between from_leader's two barriers: a block's
    // put_signal ping-pong -0.03 us at 8 B-4 KiB on one H200, ranks on SMs 0 and 1, 8 processes
    // of each binary (bench/results/archive/2026-11-27-h200-rma-ab-wait-status.txt).
    if (seen == nullptr) {
      Status s = Status::kOk;
      if (G::index() == 0) s = poll();
      return detail::group_worst<G>(s);
    }
  }
#endif
  const R r = detail::on_leader<G>([&]() -> R {
    const Status s = poll();
    return R{s, v};
  });
  if (seen != nullptr) *seen = r.v;
  return r.st;
}

template <class G, class T>
GV_HD bool test(const Endpoint& ep, const T* ivar, Cmp cmp, T value) {
  static_assert(detail::is_atomic_int_v<T>, "rma::test reads a 4- or 8-byte integer");
  if (detail::locate_local_word(ep, ivar) != Status::kOk) return false;
  return detail::on_leader<G>([&] {
    return compare(detail::load_word(ivar), cmp, value) && compare(detail::signal_seen_before_data(ivar), cmp, value);
  });
}

GV_HD inline std::uint64_t signal_fetch(const std::uint64_t* sig) { return detail::signal_seen_before_data(sig); }

// ---- Remote atomics -----------------------------------------------------------------------

template <class G, class T>
GV_HD Status fetch_add(const Endpoint& ep, T* target, T value, int pe, T& old) {
  static_assert(detail::is_atomic_int_v<T>, "rma::fetch_add takes a 4- or 8-byte integer");
  return detail::remote_rmw<G>(
      ep, target, pe, old, [&](T* p, std::uint32_t& w) { return detail::atomic_fetch_add(p, value, w); },
      [&](T o) { return static_cast<T>(o + value); }, ib::WrOpcode::kAtomicFetchAdd,
      static_cast<std::uint64_t>(value), 0);
}

template <class G, class T>
GV_HD Status add(const Endpoint& ep, T* target, T value, int pe) {
  T old;
  return fetch_add<G>(ep, target, value, pe, old);
}

template <class G, class T>
GV_HD Status compare_swap(const Endpoint& ep, T* target, T cond, T value, int pe, T& old) {
  static_assert(detail::is_atomic_int_v<T>, "rma::compare_swap takes a 4- or 8-byte integer");
  return detail::remote_rmw<G>(
      ep, target, pe, old, [&](T* p, std::uint32_t& w) { return detail::atomic_compare_swap(p, cond, value, w); },
      [&](T o) { return o == cond ? value : o; }, ib::WrOpcode::kAtomicCmpSwp,
      static_cast<std::uint64_t>(detail::to_bits(cond)), static_cast<std::uint64_t>(detail::to_bits(value)));
}

template <class G, class T>
GV_HD Status swap(const Endpoint& ep, T* target, T value, int pe, T& old) {
  static_assert(detail::is_atomic_word_v<T>, "rma::swap takes a 4- or 8-byte value");
  using B = detail::bits_t<T>;
  B o{};
  const Status st = detail::remote_rmw<G>(
      ep, reinterpret_cast<B*>(target), pe, o,
      [&](B* p, std::uint32_t& w) { return detail::atomic_exchange(p, detail::to_bits(value), w); },
      [&](B) { return detail::to_bits(value); }, ib::WrOpcode::kNop, 0, 0);
  old = detail::from_bits<T>(o);
  return st;
}

template <class G, class T>
GV_HD Status fetch(const Endpoint& ep, const T* target, int pe, T& value) {
  static_assert(detail::is_atomic_word_v<T>, "rma::fetch takes a 4- or 8-byte value");
  using B = detail::bits_t<T>;
  B o{};
  const Status st = detail::remote_rmw<G>(
      ep, reinterpret_cast<B*>(const_cast<T*>(target)), pe, o, [&](B* p, std::uint32_t& w) { return detail::atomic_load(p, w); },
      [&](B v) { return v; }, ib::WrOpcode::kAtomicFetchAdd, 0, 0);
  value = detail::from_bits<T>(o);
  return st;
}

// ---- Order, completion, synchronisation ---------------------------------------------------

template <class G>
GV_HD Status fence(const Endpoint& ep) {
  // ib: a block's operations to one peer share a lane, executed in order. p2p and self: the
  // stores themselves need ordering.
  G::sync();
  if (G::index() == 0) detail::data_before_signal();
  return detail::aborted(ep) ? Status::kAborted : Status::kOk;
}

template <class G>
GV_HD Status quiet(const Endpoint& ep) {
  G::sync();
  return detail::on_leader<G>([&] {
    detail::puts_complete();
    if (detail::aborted(ep)) return Status::kAborted;
    for (std::uint32_t q = 0; q < ep.size; ++q) {
      const Peer& peer = ep.peers[q];
      if (peer.transport != Transport::kIb) continue;
      const Status s = detail::ib_quiet_peer(ep, peer);
      if (s != Status::kOk) return s;
    }
    return Status::kOk;
  });
}

namespace detail {
/// `value` into this rank's arrive slot at every peer: the barrier's announcement (an inline
/// WRITE over ib, a store over p2p). The first failure is returned; the other peers still get it.
template <class G>
GV_HD inline Status announce(const Endpoint& ep, std::uint64_t value) {
  const std::uint64_t mine = ep.arrive_offset + 8 * std::uint64_t{ep.rank};
  Status first = Status::kOk;
  for (std::uint32_t q = 0; q < ep.size; ++q) {
    if (q == ep.rank) continue;
    const Peer& peer = ep.peers[q];
    if (peer.transport == Transport::kIb) {
      Posted posted;
      const Status s = ib_signal(ep, peer, lane_for(peer, G::queue_hint()), mine, value, SignalOp::kSet, posted);
      if (first == Status::kOk) first = s;
    } else {
      store_word(reinterpret_cast<std::uint64_t*>(peer.base + mine), value);
    }
  }
  return first;
}

/// A barrier failed: its epoch is unknown to the peers, so mark it broken here and, as far as
/// they can be reached, at every peer (their barriers then refuse too, instead of passing on
/// this rank's earlier arrival).
template <class G>
GV_HD inline Status break_barrier(const Endpoint& ep, Status why) {
  reinterpret_cast<Reserved*>(ep.heap)->barrier_epoch = kBrokenEpoch;
  (void)announce<G>(ep, kBrokenEpoch);
  for (std::uint32_t q = 0; q < ep.size; ++q)  // landed before this barrier returns
    if (ep.peers[q].transport == Transport::kIb) (void)ib_quiet_peer(ep, ep.peers[q]);
  return why;
}
}  // namespace detail

template <class G>
GV_HD Status barrier(const Endpoint& ep) {
  Status st = quiet<G>(ep);
  if (st != Status::kOk) return st;
  st = detail::on_leader<G>([&] {
    auto* res = reinterpret_cast<Reserved*>(ep.heap);
    if (res->barrier_epoch == kBrokenEpoch) return Status::kBarrierBroken;
    const std::uint64_t epoch = res->barrier_epoch + 1;
    res->barrier_epoch = epoch;
    if (const Status s = detail::announce<G>(ep, epoch); s != Status::kOk) return detail::break_barrier<G>(ep, s);
    const auto* arrive = reinterpret_cast<const std::uint64_t*>(ep.heap + ep.arrive_offset);
    for (std::uint32_t q = 0; q < ep.size; ++q) {
      if (q == ep.rank) continue;
      const std::uint64_t* a = arrive + q;
      const Status s = sync::bounded_wait([&] { return detail::load_word(a) >= epoch; }, ep.budget, ep.abort);
      if (s != Status::kOk) return detail::break_barrier<G>(ep, s);
      if (detail::signal_seen_before_data(a) == kBrokenEpoch) return detail::break_barrier<G>(ep, Status::kBarrierBroken);
    }
    return Status::kOk;
  });
  G::sync();
  return st;
}

// ---- Addresses ----------------------------------------------------------------------------

GV_HD inline void* ptr(const Endpoint& ep, const void* sym, int pe) {
  detail::Route r;
  std::uint64_t off;
  if (!detail::route(ep, pe, r) || r.ib != nullptr || !detail::heap_offset(ep, sym, 0, off)) return nullptr;
  return r.base + off;
}

GV_HD inline Transport transport(const Endpoint& ep, int pe) {
  detail::Route r;
  if (!detail::route(ep, pe, r)) return Transport::kNone;
  if (r.ib != nullptr) return Transport::kIb;
  return static_cast<std::uint32_t>(pe) == ep.rank ? Transport::kSelf : Transport::kP2p;
}

}  // namespace gv::rma
