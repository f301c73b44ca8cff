// put_ll / wait_ll (declared and documented in <gpuverbs/rma/ll.hpp>).
//
// Layout of one rank's copy of an LL buffer (8-byte words, little-endian):
//   [0] credit  the seq of the last round the peer took from what this rank sent (peer writes)
//   [1] sent    the seq of the last round this rank sent (this rank writes)
//   [2] header  {u32 sender rank | kLlPacked, u32 seq} of the round arriving here (sender writes)
//   [3]         never written, zero (so the data words start 16-byte aligned)
//   [4...]      data words {u32 data, u32 seq}, one per 4 data bytes, in lines of two (16 bytes,
//               one store and one load each; the last zero-padded, an empty message one line of
//               zeros); over ib the data bytes themselves, packed, written before the header
// An aligned 8-byte store reaches the peer whole (single-copy atomic; a 16-byte store is two such
// words, unordered, so both flags are checked), so a word whose flag is the round's seq carries
// that round's data: no fence between data and flag. The credit closes the loop without a fence
// too: the receiver stores it after it has compared every word's flag, so its loads are complete
// (the hardware performs no store ahead of the loads it depends on).
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../../sync.hpp"
#include "../endpoint.hpp"
#include "../group.hpp"
#include "../ll.hpp"
#include "copy.hpp"
#include "mem.hpp"
#include "ops.hpp"

namespace gv::rma {
namespace detail {

/// Header bit: the data travelled packed (ib), not as flagged words.
inline constexpr std::uint32_t kLlPacked = 0x80000000u;
/// Index of the first data word in a copy (kLlHeaderBytes / 8).
inline constexpr unsigned kLlFirstWord = kLlHeaderBytes / 8;
/// Lines (two words) a member polls before it waits for any of them: a thread alone needs many
/// in flight, a warp's or block's members share the work (and a block's registers).
template <class G>
inline constexpr unsigned kLlBatch = std::is_same_v<G, Thread> ? 8 : (std::is_same_v<G, Warp> ? 4 : 1);

GV_HD GV_INLINE constexpr std::uint64_t ll_word(std::uint32_t data, std::uint32_t seq) {
  return (std::uint64_t{seq} << 32) | data;
}
GV_HD GV_INLINE constexpr std::uint32_t ll_seq(std::uint64_t w) { return static_cast<std::uint32_t>(w >> 32); }
/// What a header word says: the PE that sent the round, and whether its data travelled packed.
GV_HD GV_INLINE constexpr int ll_sender(std::uint64_t header) {
  return static_cast<int>(static_cast<std::uint32_t>(header) & ~kLlPacked);
}
GV_HD GV_INLINE constexpr bool ll_packed(std::uint64_t header) {
  return (static_cast<std::uint32_t>(header) & kLlPacked) != 0;
}

/// Data words of an n-byte message (n <= kLlMaxBytes, so they count in 32 bits). Word indices
/// are 32-bit: a bound check is one compare instead of a 64-bit compare's two.
GV_HD GV_INLINE std::uint32_t ll_count(std::size_t n) { return static_cast<std::uint32_t>((n + 3) / 4); }
/// Lines (two data words, 8 data bytes) that carry bytes of an n-byte message.
GV_HD GV_INLINE std::uint32_t ll_lines(std::size_t n) { return static_cast<std::uint32_t>((n + 7) / 8); }
/// Lines a round stores over p2p: its data lines, and one for an empty message, so that every
/// round's arrival shows in a word (a receiver that watches only words sees it).
GV_HD GV_INLINE std::uint32_t ll_sent_lines(std::size_t n) { return n > 8 ? ll_lines(n) : 1; }

/// Data word k of the n bytes at s (any alignment): 4 bytes, fewer in the last, zero-padded.
GV_HD GV_INLINE std::uint32_t ll_gather(const unsigned char* s, std::size_t n, std::uint32_t k) {
  const std::size_t at = 4 * std::size_t{k};
  if (at + 4 <= n && (reinterpret_cast<std::uintptr_t>(s + at) & 3u) == 0) return *reinterpret_cast<const std::uint32_t*>(s + at);
  std::uint32_t v = 0;
  for (unsigned b = 0; b < 4 && at + b < n; ++b) v |= std::uint32_t{s[at + b]} << (8 * b);
  return v;
}
/// The inverse: data word k into the n bytes at d.
GV_HD GV_INLINE void ll_scatter(unsigned char* d, std::size_t n, std::uint32_t k, std::uint32_t v) {
  const std::size_t at = 4 * std::size_t{k};
  if (at + 4 <= n && (reinterpret_cast<std::uintptr_t>(d + at) & 3u) == 0) {
    *reinterpret_cast<std::uint32_t*>(d + at) = v;
    return;
  }
  for (unsigned b = 0; b < 4 && at + b < n; ++b) d[at + b] = static_cast<unsigned char>(v >> (8 * b));
}

/// The credit and sent words of this rank's copy: two loads in flight together.
GV_HD GV_INLINE void ll_load_credit(const std::uint64_t* p, std::uint64_t& credit, std::uint64_t& sent) {
  credit = load_word(p);
  sent = load_word(p + 1);
}

/// Every member syncs with the group and gets the leader's `v`: one barrier for a block (where
/// a sync and from_leader take three), a shuffle for a warp. Slots as group_worst's (kSite, turn).
template <class G, int kSite>
GV_HD GV_INLINE std::uint32_t sync_share(std::uint32_t v, unsigned turn) {
#if GV_DEVICE_PASS
  if constexpr (std::is_same_v<G, Block>) {
    __shared__ std::uint32_t slot[2];
    if (G::index() == 0) slot[turn & 1u] = v;
    __syncthreads();
    return slot[turn & 1u];
  } else if constexpr (std::is_same_v<G, Warp>) {
    return __shfl_sync(0xffffffffu, v, 0);
  }
#endif
  (void)turn;
  return v;
}

/// One line of round seq: data words 2 * line and 2 * line + 1 with their flags, one store.
GV_HD GV_INLINE void ll_store_line(std::uint64_t* words, std::uint32_t line, std::uint64_t data, std::uint32_t seq) {
  store_pair(words + 2 * line, ll_word(static_cast<std::uint32_t>(data), seq),
             ll_word(static_cast<std::uint32_t>(data >> 32), seq));
}
/// ll_store_line by the members for which `mine` holds, predicated (store_pair_if).
GV_HD GV_INLINE void ll_store_line_if(bool mine, std::uint64_t* words, std::uint32_t line, std::uint64_t data,
                                      std::uint32_t seq) {
  store_pair_if(mine, words + 2 * line, ll_word(static_cast<std::uint32_t>(data), seq),
                ll_word(static_cast<std::uint32_t>(data >> 32), seq));
}

/// Whether a batch's slots for lines that do not exist are predicated off rather than branched
/// around: a block's and a warp's, in the common case (ll_send_batch, and ll_receive_batch with
/// kWhole). gv_rma on one H200, ranks on SMs 0 and 1, 8 processes of each binary: a block's round
/// 0.63 -> 0.52 us at 8-128 B in processes of the faster mode (0.61 in the slower), a warp's 512 B
/// 0.64 -> 0.54 (archive/2026-11-27-h200-rma-ab-ll-predicated-slots.txt). A warp's line a lane
/// joined them with LlChannel::put's early source load (a warp's 8-32 B -0.01 us over placements,
/// archive/2026-11-27-h200-rma-ab-ll-processing.txt). Predicated, a thread's batches of eight
/// (32 B-4 KiB +7-86 %) and the general path's batches (a warp's 2-4 KiB +17-20 %) were slower:
/// they keep their branches.
template <class G, unsigned kBatch>
inline constexpr bool kLlPredicated = std::is_same_v<G, Block> || std::is_same_v<G, Warp>;

/// The common case of ll_send_lines: lines me + j * cnt, j < kBatch, that exist.
template <class G, unsigned kBatch>
GV_HD GV_INLINE void ll_send_batch(std::uint64_t* words, const std::uint64_t* s64, std::uint32_t lines,
                                   std::uint32_t seq) {
  const std::uint32_t me = G::index(), cnt = G::count();
  std::uint64_t v[kBatch] = {};
#if GV_DEVICE_PASS
#pragma unroll
#endif
  for (unsigned j = 0; j < kBatch; ++j)
    if (me + j * cnt < lines) v[j] = s64[me + j * cnt];
#if GV_DEVICE_PASS
#pragma unroll
#endif
  for (unsigned j = 0; j < kBatch; ++j) {
    const std::uint32_t line = me + j * cnt;
    if constexpr (kLlPredicated<G, kBatch>)
      ll_store_line_if(line < lines, words, line, v[j], seq);
    else if (line < lines)
      ll_store_line(words, line, v[j], seq);
  }
}

/// Source lines a member of LlChannel::put's common case loads before its test: a thread's one
/// (a message of 8 B), a warp's whole batch (every line of its common case, 1 KiB), a block
/// member's one (its batch, the whole of its common case).
template <class G>
inline constexpr unsigned kLlEarly = std::is_same_v<G, Warp> ? kLlBatch<G> : 1;

/// The data bytes of a poll batch of lines for every member of the group: the most the common
/// case below carries (LlChannel::open keeps it, bounded by its n).
template <class G>
GV_HD GV_INLINE std::size_t ll_batch_bytes() {
  return std::size_t{8} * kLlBatch<G> * G::count();
}
/// Whether an n-byte message at p is ll_send_batch's and ll_receive's common case: whole lines
/// (8 data bytes) at an 8-byte aligned address, at most a poll batch of them a member.
template <class G>
GV_HD GV_INLINE bool ll_whole_batch(const void* p, std::size_t n) {
  return (((reinterpret_cast<std::uintptr_t>(p) | n) & 7u) == 0) & (n != 0) & (n <= ll_batch_bytes<G>());
}

/// Whether a message is at most a line a member of a thread (8 B) or a warp (256 B), sent and
/// polled one line a member rather than in batches of kLlBatch<G> lines with the others
/// predicated off: a thread's 8 B round ~0.05 us faster on an H100; a warp's of 8-256 B
/// 0.58-0.60 -> 0.53-0.56 us on one H200 (alternating binaries, LlWarpAgree's vote in both;
/// 0.59-0.63 with neither). A block's batch is a line a member already.
template <class G>
GV_HD GV_INLINE constexpr bool ll_line_a_member(std::size_t n) {
  return (std::is_same_v<G, Thread> && n <= 8) || (std::is_same_v<G, Warp> && n <= 8 * 32);
}

/// The lines of such a message: a line a member (ll_line_a_member), else a batch.
template <class G>
GV_HD GV_INLINE void ll_send_whole(std::uint64_t* words, const std::uint64_t* s64, std::size_t n, std::uint32_t seq) {
  if (ll_line_a_member<G>(n)) ll_send_batch<G, 1>(words, s64, std::is_same_v<G, Thread> ? 1u : ll_lines(n), seq);
  else ll_send_batch<G, kLlBatch<G>>(words, s64, ll_lines(n), seq);
}

/// This member's data lines of round seq (lines me, me + cnt, ...), each word stored whole with
/// its flag. The common case, whole lines from an 8-byte aligned source and at most a poll
/// batch of them a member (a thread's 64 B, a warp's 1 KiB, a block's 4 KiB), loads its lines,
/// then stores them, predicated, without loops (ll_send_batch). Otherwise, from an 8-byte
/// aligned source four lines are loaded before the first store (the stores may alias the
/// source, so the compiler keeps them in order); from any other source, and for the last,
/// partial line, the bytes are gathered a word at a time.
template <class G>
GV_HD GV_INLINE void ll_send_lines(std::uint64_t* words, const unsigned char* s, std::size_t n, std::uint32_t seq) {
  const std::uint32_t lines = ll_sent_lines(n), full = static_cast<std::uint32_t>(n / 8);
  const std::uint32_t me = G::index(), cnt = G::count();
  if (ll_whole_batch<G>(s, n)) {
    ll_send_whole<G>(words, reinterpret_cast<const std::uint64_t*>(s), n, seq);
    return;
  }
  std::uint32_t k = me;
  if ((reinterpret_cast<std::uintptr_t>(s) & 7u) == 0) {
    const auto* s64 = reinterpret_cast<const std::uint64_t*>(s);
    for (; k + 3 * cnt < full; k += 4 * cnt) {
      const std::uint64_t a = s64[k], b = s64[k + cnt], c = s64[k + 2 * cnt], e = s64[k + 3 * cnt];
      ll_store_line(words, k, a, seq);
      ll_store_line(words, k + cnt, b, seq);
      ll_store_line(words, k + 2 * cnt, c, seq);
      ll_store_line(words, k + 3 * cnt, e, seq);
    }
    for (; k < full; k += cnt) ll_store_line(words, k, s64[k], seq);
  }
  for (; k < lines; k += cnt)
    ll_store_line(words, k, ll_gather(s, n, 2 * k) | (std::uint64_t{ll_gather(s, n, 2 * k + 1)} << 32), seq);
}

/// bounded_wait's agreement for a warp whose lanes poll only their own lines: a lane leaves the
/// poll when every lane's lines have come (a vote), and every lane decides with lane 0's clock
/// and abort flag. Lanes that each left their poll alone, those without lines at once, left the
/// warp diverged until the round's end (a hand-written round on one H200: a warp's 8-128 B
/// 0.45 -> 0.31 us with the vote).
struct LlWarpAgree {
  GV_HD GV_INLINE bool all(bool v) const {
#if GV_DEVICE_PASS
    return __all_sync(0xffffffffu, v);
#else
    return v;
#endif
  }
  template <class T>
  GV_HD GV_INLINE T first(T v) const {
#if GV_DEVICE_PASS
    return __shfl_sync(0xffffffffu, v, 0);
#else
    return v;
#endif
  }
};

/// What a receive runs when its poll has seen this member's lines (ll_receive's `arrived`):
/// nothing, unless LlChannel::wait_put stores its reply there.
struct LlNothing {
  GV_HD GV_INLINE void operator()(std::uint64_t) const {}
};

/// This member's part of receiving round seq: the header (every member watches it: it says how
/// the data travelled) and this member's data lines, polled a batch at a time, copied to out.
/// `header` gets the header word. With kCredit the leader also loads this copy's credit word in
/// every poll and `credit` gets its value from the last one (an LlChannel's credit, free of a
/// round trip); without it `credit` is untouched. `budget` and `abort` bound the wait as an
/// Endpoint's do.
/// Without kHeader the round has come when this member's lines have (ll_sent_lines: an empty
/// message is one line): nobody reads the header, and `header` is {0, seq}. For rounds that
/// come as words (a p2p sender's); a packed round would never end.
/// This is ll_receive with batches of kBatch lines a member. kWhole: the caller has found the
/// message ll_whole_batch's case (for `out`), so no other copy is compiled in.
template <class G, unsigned kBatch, bool kCredit, bool kHeader, bool kWhole, class Arrived = LlNothing>
GV_HD inline Status ll_receive_batch(Budget budget, const std::uint32_t* abort, const std::uint64_t* buf, std::size_t n,
                                     std::uint32_t seq, unsigned char* out, std::uint64_t& header,
                                     std::uint64_t& credit, Arrived&& arrived = {}) {
  const std::uint64_t* hdr = buf + 2;
  const std::uint64_t* words = buf + kLlFirstWord;
  const std::uint32_t count = kHeader ? ll_lines(n) : ll_sent_lines(n), me = G::index(), cnt = G::count();
  const std::uint32_t lines = ll_lines(n);  // the lines that carry bytes of out
  const std::uint32_t data = ll_count(n);   // the words that do
  const std::uint32_t whole = static_cast<std::uint32_t>(n / 4);  // ... all four of their bytes
  const auto at = reinterpret_cast<std::uintptr_t>(out);
  const bool aligned4 = (at & 3u) == 0, aligned8 = (at & 7u) == 0;
  const bool whole_lines = kWhole || (aligned8 & ((n & 7u) == 0));
  constexpr bool kPredicated = kWhole && kLlPredicated<G, kBatch>;
  std::uint64_t h = kHeader ? 0 : ll_word(0, seq);
  std::uint32_t k0 = me;
  do {
    // Every poll issues all its loads (the header, the credit, the whole batch) before it looks
    // at any of them. The version that loaded only the words not yet seen (each load behind a
    // branch on the last poll's value) spent ~0.11 us per word of a thread's batch on an H100;
    // one that stored the credit through a pointer between the loads made each poll three round
    // trips, header, credit, words, one after another (ncu on an H200, 2026-11-26).
    std::uint64_t w[2 * kBatch] = {};
    // A warp that does not watch the header leaves the poll together (LlWarpAgree); one that
    // does keeps every lane polling the header until the round has come.
    using Agree = std::conditional_t<std::is_same_v<G, Warp> && !kHeader, LlWarpAgree, sync::Alone>;
    const Status s = sync::bounded_wait(
        [&] {
          if (kHeader) h = load_word(hdr);
#if !GV_DEVICE_PASS
          // Host ranks read the words only once the header says they are words: over ib the
          // area holds packed bytes the engine writes (a race ThreadSanitizer would report).
          if (ll_seq(h) != seq) return false;
#endif
          if constexpr (kCredit) {
            if (me == 0) credit = load_word(buf);
          }
#if GV_DEVICE_PASS
#pragma unroll
#endif
          for (unsigned j = 0; j < kBatch; ++j) {
            if constexpr (kPredicated)
              load_pair_if(k0 + j * cnt < count, words + 2 * (k0 + j * cnt), w[2 * j], w[2 * j + 1]);
            else if (k0 + j * cnt < count)
              load_pair(words + 2 * (k0 + j * cnt), w[2 * j], w[2 * j + 1]);
          }
          bool all = true;
#if GV_DEVICE_PASS
#pragma unroll
#endif
          for (unsigned j = 0; j < kBatch; ++j) {
            if constexpr (kPredicated) {
              all &= (k0 + j * cnt >= count) | ((ll_seq(w[2 * j]) == seq) & (ll_seq(w[2 * j + 1]) == seq));
            } else {
              if (k0 + j * cnt >= count) break;  // a short message stops here, not after the batch
              all &= (ll_seq(w[2 * j]) == seq) & (ll_seq(w[2 * j + 1]) == seq);
            }
          }
          return ll_seq(h) == seq && (all || ll_packed(h));
        },
        budget, abort, sync::kHostSpins, Agree{});
    if (s != Status::kOk) return s;
    if (ll_packed(h)) break;
    arrived(credit);
    if (whole_lines) {
      // Every line whole into an 8-byte aligned `out`: one 8-byte store a line, predicated.
#if GV_DEVICE_PASS
#pragma unroll
#endif
      for (unsigned j = 0; j < kBatch; ++j)
        if (k0 + j * cnt < lines)
          reinterpret_cast<std::uint64_t*>(out)[k0 + j * cnt] =
              (w[2 * j + 1] << 32) | static_cast<std::uint32_t>(w[2 * j]);
    } else if constexpr (!kWhole) {
#if GV_DEVICE_PASS
#pragma unroll
#endif
      for (unsigned j = 0; j < kBatch; ++j) {
        const std::uint32_t line = k0 + j * cnt;
        if (line >= lines) break;
        const std::uint32_t k = 2 * line;
        const auto lo = static_cast<std::uint32_t>(w[2 * j]), hi = static_cast<std::uint32_t>(w[2 * j + 1]);
        // Whole words into an aligned `out` are stored as they are, a line's two as one 8-byte
        // store; ll_scatter (per-word tests, a byte loop) only for the last word or an `out` not
        // 4-byte aligned. gv_rma on one H100, alternating binaries: a thread's LlChannel round of
        // 128 B-4 KiB 2-8 % faster with whole words stored than with ll_scatter for every word
        // (archive/2026-11-26-h100-rma-ab-dbe8fa5.txt).
        if (aligned8 & (k + 1 < whole)) {
          reinterpret_cast<std::uint64_t*>(out)[line] = (std::uint64_t{hi} << 32) | lo;
          continue;
        }
        if (aligned4 & (k < whole)) reinterpret_cast<std::uint32_t*>(out)[k] = lo;
        else ll_scatter(out, n, k, lo);
        if (k + 1 >= data) continue;
        if (aligned4 & (k + 1 < whole)) reinterpret_cast<std::uint32_t*>(out)[k + 1] = hi;
        else ll_scatter(out, n, k + 1, hi);
      }
    }
    k0 += kBatch * cnt;
    // As many polls for every member (a warp's agree needs every lane). kWhole's message is one
    // batch a member, so a thread's or a warp's ends here without the loop's test. A block keeps
    // it, and wait()'s branch on the status: without both its 8-64 B round read 0.61-0.63 us
    // against 0.59-0.61 with them (gv_rma on one H200 over placements,
    // archive/2026-11-27-h200-rma-ab-ll-processing.txt).
  } while (!(kWhole && !std::is_same_v<G, Block>) && k0 - me < count);
  if (ll_packed(h)) {
    // Over ib the header is a signal after the data: acquire it as wait_until does, then copy.
    (void)signal_seen_before_data(hdr);
    group_copy<G>(out, words, n);
  }
  header = h;
  return Status::kOk;
}

/// This member's part of receiving round seq (ll_receive_batch): a line a member
/// (ll_line_a_member), a warp's whole message of two lines a lane (257-512 B) in batches of two
/// in LlChannel's common case (kWhole), every other call in batches of kLlBatch<G>. Two lines a
/// lane polled in a batch of four, half of it predicated off, cost the round: gv_rma's warp
/// LlChannel at 512 B 0.51-0.56 -> 0.47-0.49 us on one H200 and 1.04-1.05 -> 0.98-0.99 us across two (over
/// placements; a warp's 1 KiB +0.01-0.02 in both; archive/2026-11-27-h200-2xh200-rma-ab-ll-warp-two-lines.txt).
/// `arrived(credit)` runs each time a poll has seen this member's batch of lines as words, before
/// they are copied out, with the credit that poll loaded (kCredit). A thread's or a warp's call with
/// kWhole polls one batch (a warp's lanes leave it on one vote), so there it runs once, when the
/// whole round has come.
template <class G, bool kCredit = false, bool kHeader = true, bool kWhole = false, class Arrived = LlNothing>
GV_HD GV_INLINE Status ll_receive(Budget budget, const std::uint32_t* abort, const std::uint64_t* buf, std::size_t n,
                                  std::uint32_t seq, unsigned char* out, std::uint64_t& header, std::uint64_t& credit,
                                  Arrived&& arrived = {}) {
  if constexpr (!std::is_same_v<G, Block>) {  // no second receive compiled for a block
    if (ll_line_a_member<G>(n))
      return ll_receive_batch<G, 1, kCredit, kHeader, kWhole>(budget, abort, buf, n, seq, out, header, credit, arrived);
  }
  if constexpr (kWhole && std::is_same_v<G, Warp>) {
    if (n <= 2 * 8 * 32)
      return ll_receive_batch<G, 2, kCredit, kHeader, kWhole>(budget, abort, buf, n, seq, out, header, credit, arrived);
  }
  return ll_receive_batch<G, kLlBatch<G>, kCredit, kHeader, kWhole>(budget, abort, buf, n, seq, out, header, credit,
                                                                    arrived);
}

/// The leader's wait (bounded) until the receiver has taken round `sent` (credit == sent), from
/// the words already loaded; both come back as last loaded.
GV_HD GV_INLINE Status ll_wait_credit(Budget budget, const std::uint32_t* abort, const std::uint64_t* mine,
                                      std::uint64_t& credit, std::uint64_t& sent) {
  if (credit == sent) return Status::kOk;
  return sync::bounded_wait(
      [&] {
        ll_load_credit(mine, credit, sent);
        return credit == sent;
      },
      budget, abort);
}

/// The leader's header word of round seq into the peer's copy, and this copy's sent word
/// (predicated stores: no branch for the group to converge after).
template <class G>
GV_HD GV_INLINE void ll_mark_sent(std::uint64_t* theirs, std::uint64_t* mine, std::uint32_t seq, std::uint32_t from) {
  store_word_if(G::index() == 0, theirs + 2, ll_word(from, seq));
  store_word_if(G::index() == 0, mine + 1, std::uint64_t{seq});
}

/// Round seq over p2p: the data words and the header into the peer's copy `theirs`, and the sent
/// word of this rank's copy `mine` (read only by this rank's later calls). The caller syncs the
/// group after it: until then a member may still be reading its part of src.
template <class G>
GV_HD GV_INLINE void ll_send_p2p(std::uint64_t* theirs, std::uint64_t* mine, const void* src, std::size_t n,
                                 std::uint32_t seq, std::uint32_t from) {
  ll_send_lines<G>(theirs + kLlFirstWord, static_cast<const unsigned char*>(src), n, seq);
  ll_mark_sent<G>(theirs, mine, seq, from);
}

}  // namespace detail

template <class G>
GV_HD Status put_ll(const Endpoint& ep, void* dst, const void* src, std::size_t n, std::uint32_t seq, int pe) {
  if (seq == 0 || n > kLlMaxBytes || (n != 0 && src == nullptr)) return Status::kInvalidArgument;
  detail::Route peer;
  std::uint64_t off;
  Status st = detail::find(ep, dst, ll_bytes(n), pe, peer, off);
  if (st != Status::kOk) return st;
  if (reinterpret_cast<std::uintptr_t>(dst) % 16 != 0) return Status::kInvalidArgument;
  auto* mine = static_cast<std::uint64_t*>(dst);
  // The receiver has taken the previous round (credit == sent); a repeated seq is refused, since
  // the receiver could not tell the rounds apart. The abort word and both words load together:
  // one round trip before the stores (each load waited for alone cost ~0.18 us on an H200).
  st = detail::on_leader<G>([&] {
    const std::uint32_t raised = detail::abort_word(ep);
    std::uint64_t credit = 0, sent = 0;
    detail::ll_load_credit(mine, credit, sent);
    if (raised != 0) return Status::kAborted;
    const Status s = detail::ll_wait_credit(ep.budget, ep.abort, mine, credit, sent);
    if (s != Status::kOk) return s;
    return sent == seq ? Status::kInvalidArgument : Status::kOk;
  });
  if (st != Status::kOk) return st;
  const std::uint32_t from = static_cast<std::uint32_t>(ep.rank);
  if (!peer.ib) {
    detail::ll_send_p2p<G>(reinterpret_cast<std::uint64_t*>(peer.base + off), mine, src, n, seq, from);
    G::sync();  // every member has read its part of src
    return Status::kOk;
  }
  st = detail::put_signal_impl<G, false>(ep, static_cast<std::byte*>(dst) + kLlHeaderBytes, src, n, mine + 2,
                                  detail::ll_word(from | detail::kLlPacked, seq), SignalOp::kSet, pe, true);
  if (st == Status::kOk && G::index() == 0) detail::store_word(mine + 1, std::uint64_t{seq});
  return st;
}

namespace detail {
/// The end of a receive that every member of the group takes part in: the round's sender checked
/// against `from` (>= 0: kInvalidPe for a round another PE sent), then every member's status
/// behind one group-wide sync, after which every member's loads are done and the sender may
/// overwrite the buffer. kOk or the worst status of the group.
/// `value`, kSite, turn: as group_worst's.
template <class G, int kSite = 0>
GV_HD GV_INLINE Status ll_received(Status mine, std::uint64_t header, int from, std::uint32_t* value = nullptr,
                                   unsigned turn = 0) {
  if (mine == Status::kOk && from >= 0 && ll_sender(header) != from) mine = Status::kInvalidPe;
  return group_worst<G, kSite>(mine, value, turn);
}

/// wait_ll after its argument checks; `from` as for ll_received. The credit goes back to the
/// sender the header names, wherever it is.
template <class G>
GV_HD Status ll_wait(const Endpoint& ep, const void* buf, std::uint64_t off, std::size_t n, std::uint32_t seq,
                     void* out, int from) {
  std::uint64_t header = 0, unused = 0;
  const Status mine = ll_receive<G>(ep.budget, ep.abort, static_cast<const std::uint64_t*>(buf), n, seq,
                                    static_cast<unsigned char*>(out), header, unused);
  const Status worst = ll_received<G>(mine, header, from);  // header as ll_receive left it
  if (worst != Status::kOk) return worst;
  const int sender = ll_sender(header);
  return on_leader<G>([&] {
    Route back;
    if (!route(ep, sender, back)) return Status::kInvalidPe;
    if (!back.ib) {
      store_word(reinterpret_cast<std::uint64_t*>(back.base + off), std::uint64_t{seq});
      return Status::kOk;
    }
    Posted posted;
    return ib_signal(ep, *back.ib, lane_for(*back.ib, G::queue_hint()), off, seq, SignalOp::kSet, posted);
  });
}
}  // namespace detail

template <class G>
GV_HD Status wait_ll(const Endpoint& ep, const void* buf, std::size_t n, std::uint32_t seq, void* out) {
  if (seq == 0 || n > kLlMaxBytes || (n != 0 && out == nullptr)) return Status::kInvalidArgument;
  std::uint64_t off;
  if (!detail::heap_offset(ep, buf, ll_bytes(n), off)) return Status::kOutOfBounds;
  if (reinterpret_cast<std::uintptr_t>(buf) % 16 != 0) return Status::kInvalidArgument;
  return detail::ll_wait<G>(ep, buf, off, n, seq, out, -1);
}

namespace detail {
/// put_ll and ll_wait called out of line, where a block's channel falls back to them (over ib).
/// Inlined, their registers counted in every kernel that holds a block's channel: with its
/// early source line (LlChannel::put) gv_rma's block ping-pong needed 153, more than the 128 a
/// block of 512 threads may have, and 127 with these calls out of line. A thread's and a warp's
/// channel keep them inline: out of line, their rounds were slower (gv_rma on one H100 over
/// placements: a warp's 8-256 B 0.41-0.43 -> 0.43-0.46 us, 1 KiB 0.59-0.60 -> 0.65, a thread's 8 B
/// 0.37-0.40 -> 0.40-0.41; archive/2026-11-28-2xh100-rma-ab-ll-block-early.txt).
template <class G>
GV_HD GV_NOINLINE Status ll_put_out_of_line(const Endpoint* ep, std::uint64_t* mine, const void* src, std::size_t n,
                                            std::uint32_t seq, int to) {
  return put_ll<G>(*ep, mine, src, n, seq, to);
}
template <class G>
GV_HD GV_NOINLINE Status ll_wait_out_of_line(const Endpoint* ep, const std::uint64_t* mine, std::uint64_t off,
                                             std::size_t n, std::uint32_t seq, void* out, int from) {
  return ll_wait<G>(*ep, mine, off, n, seq, out, from);
}
}  // namespace detail

template <class G>
GV_HD Status LlChannel<G>::open(const Endpoint& ep, void* buf, std::size_t n, int to, int from) {
  *this = LlChannel{};
  if (n > kLlMaxBytes) return Status::kInvalidArgument;
  detail::Route peer, back;
  std::uint64_t off;
  Status st = detail::find(ep, buf, ll_bytes(n), to, peer, off);
  if (st == Status::kOk) st = detail::find(ep, buf, ll_bytes(n), from, back, off);
  if (st != Status::kOk) return st;
  if (reinterpret_cast<std::uintptr_t>(buf) % 16 != 0) return Status::kInvalidArgument;
  auto* mine = static_cast<std::uint64_t*>(buf);
  struct Words {
    std::uint32_t status, credit, sent;
  };
  const Words w = detail::on_leader<G>([&] {
    const std::uint32_t raised = detail::abort_word(ep);
    std::uint64_t credit = 0, sent = 0;
    detail::ll_load_credit(mine, credit, sent);
    return Words{static_cast<std::uint32_t>(raised != 0 ? Status::kAborted : Status::kOk),
                 static_cast<std::uint32_t>(credit), static_cast<std::uint32_t>(sent)};
  });
  if (static_cast<Status>(w.status) != Status::kOk) return static_cast<Status>(w.status);
  ep_ = &ep;
  mine_ = mine;
  theirs_ = peer.ib ? nullptr : reinterpret_cast<std::uint64_t*>(peer.base + off);
  back_ = back.ib ? nullptr : reinterpret_cast<std::uint64_t*>(back.base + off);
  // What the p2p rounds read of the endpoint, copied (the endpoint is often a kernel parameter
  // reached through a generic pointer: a load each time, and the header store waited for one).
  aborted_ = &reinterpret_cast<const Reserved*>(ep.heap)->aborted;
  abort_ = ep.abort;
  budget_ = ep.budget;
  max_ = static_cast<std::uint32_t>(n);
  const std::size_t fit = detail::ll_batch_bytes<G>();
  fast_ = static_cast<std::uint32_t>(n < fit ? n : fit);
  to_ = to;
  from_ = from;
  rank_ = static_cast<std::uint32_t>(ep.rank);
  sent_ = w.sent;
  credit_ = w.credit;
  return Status::kOk;
}

template <class G>
GV_HD Status LlChannel<G>::put(const void* src, std::size_t n, std::uint32_t seq) {
  // The common case in one test, as direct() for the other operations: a p2p channel on the GPU,
  // a new round the last wait() saw the credit for, whole lines of an aligned `src` that fit one
  // batch a member. Then the lines go without the general path's branches, each of which cost
  // its share of a round's critical path (gv_rma on one H100, alternating binaries: a thread's
  // 8 B round 0.55 -> 0.39 us with this test and wait()'s receive without the general copy).
  // The message's size is tested against the bound open() computed (fast_): one compare where
  // ll_whole_batch's and max_'s took several (gv_rma on one H200, alternating binaries: a warp's
  // round of 8-64 B 0.66 -> 0.61 us with this and wait()'s test alike).
  //
  // A thread's message of at most a line (8 B) and a warp's of at most a batch of lines a lane
  // (1 KiB, the whole of its common case) load their source words before that test is decided,
  // predicated on what src and n alone say, and store their lines predicated too: the test's
  // compares run while the loads are in flight, and no branch stands between a load and its
  // store. Between a wait()'s poll and this line's store a warp's round spent 215 ns where
  // gv_rma's raw_ll spends 58, and that difference was the whole of the gap between them (a
  // timeline probe on one H200); loading the word early took its put part 114 -> 72 ns. A warp
  // stores its first line before the branch on the test, predicated on it, and the lines of a
  // message longer than a line a lane after it (gv_rma on one H200 over placements, against
  // the first line loaded early alone: a warp's 8-256 B round -0.01 to -0.03 us, 512 B 0.60-0.64
  // -> 0.49-0.55, 1 KiB 0.60-0.62 -> 0.57-0.59; the later lines before the branch as well: 8-256 B
  // +0.01-0.02; archive/2026-11-27-h200-rma-ab-ll-warp-early.txt). A thread stores after the
  // branch: before it, its 32 B-1 KiB rounds were 0.03-0.05 us slower. A block member loads its
  // one line early and stores it before the branch as a warp does (its ib fallbacks out of line
  // leave the registers for it): against a prefetch of the line into L1 before the test, a
  // block's round 0.56-0.60 -> 0.49-0.57 us on one H100 and 1.01-1.14 -> 0.93-1.07 across two,
  // over placements (archive/2026-11-28-2xh100-rma-ab-ll-block-early.txt).
  const auto* s64 = static_cast<const std::uint64_t*>(src);
  auto* words = theirs_ + detail::kLlFirstWord;
  const std::uint32_t me = G::index(), cnt = G::count(), lines = static_cast<std::uint32_t>(n / 8);
  const bool src_ok = (src != nullptr) & (n - 1 < std::size_t{fast_}) &
                      (((reinterpret_cast<std::uintptr_t>(src) | n) & 7u) == 0);
  const bool one = n <= 8 * std::size_t{cnt};
  constexpr unsigned kEarly = detail::kLlEarly<G>;
  // A warp's and a block's early lines are their whole common case; a thread's one line only a
  // message of 8 B.
  constexpr bool kEarlyCoversBatch = kEarly == detail::kLlBatch<G>;
  std::uint64_t v[kEarly] = {};
  if constexpr (GV_DEVICE_PASS) {
#if GV_DEVICE_PASS
#pragma unroll
#endif
    for (unsigned j = 0; j < kEarly; ++j)
      v[j] = detail::load_if<false>(src_ok & (one | kEarlyCoversBatch) & (me + j * cnt < lines), s64 + me + j * cnt, v[j]);
  }
  const bool common = GV_DEVICE_PASS & src_ok & (seq != 0) & (seq != sent_) & (credit_ == sent_) & (theirs_ != nullptr);
  if constexpr (!std::is_same_v<G, Thread>) {
    if (GV_DEVICE_PASS) detail::ll_store_line_if(common & (me < lines), words, me, v[0], seq);
  }
  if (common) {
    if constexpr (std::is_same_v<G, Warp>) {
      if (!one) {
#if GV_DEVICE_PASS
#pragma unroll
#endif
        for (unsigned j = 1; j < kEarly; ++j) detail::ll_store_line_if(me + j * cnt < lines, words, me + j * cnt, v[j], seq);
      }
    } else if constexpr (std::is_same_v<G, Thread>) {
      if (one) detail::ll_store_line_if(me < lines, words, me, v[0], seq);
      else detail::ll_send_whole<G>(words, s64, n, seq);
    }
    detail::ll_mark_sent<G>(theirs_, mine_, seq, rank_);
  } else {
    if (ep_ == nullptr || seq == 0 || n > max_ || (n != 0 && src == nullptr)) return Status::kInvalidArgument;
    if (theirs_ == nullptr) {
      if constexpr (std::is_same_v<G, Block>) return detail::ll_put_out_of_line<G>(ep_, mine_, src, n, seq, to_);
      else return put_ll<G>(*ep_, mine_, src, n, seq, to_);
    }
    if (seq == sent_) return Status::kInvalidArgument;
    // The abort word as locate_p2p_later reads it: on the host before anything moves, on the GPU
    // after the stores.
    if (!GV_DEVICE_PASS && detail::load_word(aborted_) != 0) return Status::kAborted;
    if (credit_ != sent_) {
      // The last wait() did not see the credit of the last round (or there was none): load it.
      struct Credit {
        std::uint32_t status, credit;
      };
      const Credit c = detail::on_leader<G>([&] {
        std::uint64_t credit = credit_, sent = sent_;
        const Status s = detail::ll_wait_credit(budget_, abort_, mine_, credit, sent);
        return Credit{static_cast<std::uint32_t>(s), static_cast<std::uint32_t>(credit)};
      });
      if (static_cast<Status>(c.status) != Status::kOk) return static_cast<Status>(c.status);
      credit_ = c.credit;
    }
    detail::ll_send_p2p<G>(theirs_, mine_, src, n, seq, rank_);
  }
  return put_done(seq);
}

template <class G>
GV_HD GV_INLINE Status LlChannel<G>::put_done(std::uint32_t seq) {
  std::uint32_t raised = 0;
  // After the stores, as abort_after.
  if (GV_DEVICE_PASS) raised = detail::load_if<true>(G::index() == 0, aborted_, raised);
  // One group-wide sync: every member has read its part of src, and every member has the
  // leader's abort word (a sync and then from_leader would be three barriers in a block).
  raised = detail::sync_share<G, 1>(raised, turns_);
  turns_ ^= 1u;
  sent_ = seq;
  return raised != 0 ? Status::kAborted : Status::kOk;
}

template <class G>
GV_HD Status LlChannel<G>::wait(void* out, std::size_t n, std::uint32_t seq) {
  // Every member watches only its words, not the header: on one H100 (llfast probe,
  // archive/2026-11-26-h100-llfast.txt) the block's round at 8 B-1 KiB took 0.70-0.82 us without
  // the header against 0.85-0.91 with it, a thread's of 8 B 0.90 against 1.11. A warp watched the
  // header too while its lanes left their polls alone (its lanes without a line then waited
  // diverged); since they leave together (LlWarpAgree), a warp's round of 2-4 KiB is 12-19 %
  // faster without it (gv_rma on one H200, alternating binaries). The sender is not checked (the
  // header says it): a p2p round comes from the PE the channel was opened for or breaks the
  // contract of one sender per copy.
  constexpr bool kHeader = false;
  std::uint64_t header = 0, credit = credit_;
  Status got;
  // put()'s common case from the receiving side, in one test against the bound open() computed:
  // whole lines into an aligned `out`, one batch a member, over p2p. Then the receive has no
  // general copy and no other check.
  if (GV_DEVICE_PASS & (out != nullptr) & (seq != 0) & (back_ != nullptr) & (n - 1 < std::size_t{fast_}) &
      (((reinterpret_cast<std::uintptr_t>(out) | n) & 7u) == 0)) {
    got = detail::ll_receive<G, true, kHeader, true>(budget_, abort_, mine_, n, seq, static_cast<unsigned char*>(out),
                                                     header, credit);
  } else {
    if (ep_ == nullptr || seq == 0 || n > max_ || (n != 0 && out == nullptr)) return Status::kInvalidArgument;
    if (back_ == nullptr) {
      const std::uint64_t off = reinterpret_cast<std::uintptr_t>(mine_) - reinterpret_cast<std::uintptr_t>(ep_->heap);
      if constexpr (std::is_same_v<G, Block>) return detail::ll_wait_out_of_line<G>(ep_, mine_, off, n, seq, out, from_);
      else return detail::ll_wait<G>(*ep_, mine_, off, n, seq, out, from_);
    }
    got = detail::ll_receive<G, true, kHeader>(budget_, abort_, mine_, n, seq, static_cast<unsigned char*>(out), header,
                                              credit);
  }
  // The leader's credit reaches every member through the sync that ends the receive. A warp's
  // poll ended on one vote (LlWarpAgree), so every lane has the same status already and a shuffle
  // of the credit is the whole sync; the credit goes back as a predicated store, not behind a
  // branch (with the same in put(): a block's round 0.65 -> 0.61 us at 8 B-1 KiB and a warp's
  // 8-128 B 0.55 -> 0.46 us in most processes on one H200, archive/2026-11-27-h200-rma-ab-ll-predicated.txt).
  auto credit32 = static_cast<std::uint32_t>(credit);
  Status s;
#if GV_DEVICE_PASS
  if constexpr (std::is_same_v<G, Warp>) {
    credit32 = __shfl_sync(0xffffffffu, credit32, 0);
    s = got;
  } else
#endif
  {
    s = detail::ll_received<G, 1>(got, header, -1, &credit32, turns_ >> 1);
  }
  turns_ ^= 2u;
  // A thread or a warp has no branch on the status between the poll and the caller's next put:
  // the credit's store and the channel's copy of it follow the status, predicated. A block
  // returns at a failure first (see ll_receive_batch's loop test).
  const bool ok = s == Status::kOk;
  if constexpr (std::is_same_v<G, Block>) {
    if (!ok) return s;
  }
  detail::store_word_if((G::index() == 0) & ok, back_, std::uint64_t{seq});
  credit_ = ok ? credit32 : credit_;
  return s;
}

template <class G>
GV_HD Status LlChannel<G>::wait_put(void* out, std::size_t n, std::uint32_t seq, const void* src, std::size_t m,
                                    std::uint32_t next) {
  // Between a wait()'s poll and the next put()'s first store lie the receive's copy into `out`,
  // the status and credit handed to the members, the caller's own code, put()'s source load and
  // its common test. Here the source is loaded and every test that does not need the round is
  // made before the poll; when the poll has seen the round (a warp's lanes on one vote), the
  // credit goes back and the reply's lines follow at once, predicated on the credit of the last
  // round sent. A block's members leave their polls one by one and the round has come only at
  // the barrier that ends wait(), so a block makes the two calls; so does any call outside both
  // common cases, and one whose src overlaps out (src must then be read after the copy).
  if constexpr (!std::is_same_v<G, Block>) {
    const auto so = reinterpret_cast<std::uintptr_t>(src), oo = reinterpret_cast<std::uintptr_t>(out);
    const bool fused = GV_DEVICE_PASS & (src != nullptr) & (out != nullptr) & (m - 1 < std::size_t{fast_}) &
                       (n - 1 < std::size_t{fast_}) & (((so | m | oo | n) & 7u) == 0) & ((so + m <= oo) | (oo + n <= so)) &
                       (seq != 0) & (next != 0) & (next != sent_) & (theirs_ != nullptr) & (back_ != nullptr);
    if (fused) {
      constexpr unsigned kLines = detail::kLlBatch<G>;  // put()'s common case: a poll batch a member
      const std::uint32_t me = G::index(), cnt = G::count(), lines = static_cast<std::uint32_t>(m / 8);
      const auto* s64 = static_cast<const std::uint64_t*>(src);
      auto* words = theirs_ + detail::kLlFirstWord;
      std::uint64_t v[kLines] = {};
#if GV_DEVICE_PASS
#pragma unroll
#endif
      for (unsigned j = 0; j < kLines; ++j) v[j] = detail::load_if<false>(me + j * cnt < lines, s64 + me + j * cnt, v[j]);
      bool replied = false;
      std::uint32_t credit32 = credit_;
      auto reply = [&](std::uint64_t credit) {
        credit32 = static_cast<std::uint32_t>(credit);
#if GV_DEVICE_PASS
        if constexpr (std::is_same_v<G, Warp>) credit32 = __shfl_sync(0xffffffffu, credit32, 0);
#endif
        // The credit first, as wait() stores it before put()'s lines: the sender's poll for this
        // reply then sees the credit with it.
        detail::store_word_if(me == 0, back_, std::uint64_t{seq});
        replied = credit32 == sent_;
        if constexpr (std::is_same_v<G, Warp>) {
#if GV_DEVICE_PASS
#pragma unroll
#endif
          for (unsigned j = 0; j < kLines; ++j)
            detail::ll_store_line_if(replied & (me + j * cnt < lines), words, me + j * cnt, v[j], next);
        } else if (replied) {  // a thread's batch keeps its branches (kLlPredicated)
#if GV_DEVICE_PASS
#pragma unroll
#endif
          for (unsigned j = 0; j < kLines; ++j)
            if (j < lines) detail::ll_store_line(words, j, v[j], next);
        }
      };
      std::uint64_t header = 0, credit = credit_;
      const Status got = detail::ll_receive<G, true, false, true>(budget_, abort_, mine_, n, seq,
                                                                 static_cast<unsigned char*>(out), header, credit, reply);
      if (got != Status::kOk) return got;  // every member alike: a warp's lanes left the poll on one vote
      credit_ = credit32;
      // The credit of the last round sent was not in the poll that saw this round: put() waits for it.
      if (!replied) return put(src, m, next);
      detail::ll_mark_sent<G>(theirs_, mine_, next, rank_);
      return put_done(next);
    }
  }
  const Status s = wait(out, n, seq);
  return s != Status::kOk ? s : put(src, m, next);
}

}  // namespace gv::rma
